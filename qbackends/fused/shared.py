"""One state shared by the ranks of one node (``mpi=True`` with every rank on one node).

Each array is a file of ``/dev/shm`` that rank 0 creates and every rank maps (it is unlinked once all have it:
the memory goes with the last mapping, no collective frees it). The kernels then run as a team
(``kernels.set_team``): each rank sweeps its part of every pass's tiles and waits for the others at a barrier
in that memory before the next pass. The ranks together make one process's passes over one state, where ranks
that each hold a share exchange between the passes that need a global bit.
"""

from __future__ import annotations

import mmap
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .. import probe
from ..errors import InsufficientMemoryError
from ..probe import SHARED_MEMORY
from . import kernels as K

SYNC_WORDS = 16  # the barrier's two words, alone in a cache line


def room() -> int:
    """Bytes ``/dev/shm`` can still take (a container's is often 64 MiB unless ``--shm-size`` says more)."""
    return probe.shared_memory_available() or 0


class NodeMemory:
    """Arrays every rank of ``comm`` (the ranks of one node) maps, and the team the kernels run as on them."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.part, self.parts = comm.Get_rank(), comm.Get_size()
        tag = comm.bcast(secrets.token_hex(8) if self.part == 0 else None)
        self._prefix = os.path.join(SHARED_MEMORY, f"qbackends-{tag}-")
        self._made = 0
        self._sync = self.array(SYNC_WORDS, np.uint32)

    def array(self, size: int, dtype: Any) -> np.ndarray:
        """``size`` zeros of ``dtype`` that every rank maps; every rank calls it, in the same order.

        Raises:
            InsufficientMemoryError: ``/dev/shm`` cannot take it.
        """
        nbytes = max(1, size * np.dtype(dtype).itemsize)
        path = f"{self._prefix}{self._made}"
        self._made += 1
        failed = None
        if self.part == 0:
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
                try:
                    os.posix_fallocate(fd, 0, nbytes)  # refused now, not a SIGBUS at the first touch past the room
                finally:
                    os.close(fd)
            except OSError as exc:
                failed = str(exc)
                if os.path.exists(path):
                    os.unlink(path)
        failed = self.comm.bcast(failed)
        if failed is not None:
            raise InsufficientMemoryError(
                f"fused.qubit with mpi=True: the ranks of this node share the state in {SHARED_MEMORY}, which cannot "
                f"take {nbytes} bytes more ({failed}).",
                f"enlarge {SHARED_MEMORY} (in a container: docker run --shm-size), or pass share_node=False to the "
                "device (each rank then holds its share and they exchange).",
            )
        mapping, failed = None, None
        try:
            fd = os.open(path, os.O_RDWR)
            try:
                mapping = mmap.mmap(fd, nbytes, mmap.MAP_SHARED)
            finally:
                os.close(fd)
        except OSError as exc:
            failed = f"rank {self.comm.Get_rank()}: {exc}"
        finally:
            failures = self.comm.allgather(failed)  # every rank has mapped it, or failed: now it can go
            if self.part == 0:
                os.unlink(path)
        failed = next((f for f in failures if f is not None), None)
        if failed is not None:
            if mapping is not None:
                mapping.close()
            raise InsufficientMemoryError(
                f"fused.qubit with mpi=True: a rank of this node could not map the state it shares in {SHARED_MEMORY} "
                f"({failed}).",
                "pass share_node=False to the device (each rank then holds its share and they exchange).",
            )
        return np.frombuffer(mapping, dtype=dtype, count=size)

    @contextmanager
    def team(self) -> Iterator[None]:
        """The kernels run as this rank's part of the team while inside."""
        K.set_team(self.part, self.parts, self._sync)
        try:
            yield
        finally:
            K.set_team(0, 1, self._sync[:0])

    def span(self, count: int) -> tuple[int, int]:
        """[first, last) of ``count`` items that is this rank's part (the kernels' split)."""
        per = -(-count // self.parts)
        return min(count, self.part * per), min(count, (self.part + 1) * per)
