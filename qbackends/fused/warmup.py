"""The fused simulator's one-time cost: its numba kernels compile on first use and are cached on disk.
This module says whether that has happened in this installation and how long it takes here, and does
it on request (``qbackends warmup``). Each precision compiles its own kernels (c64 is opted in:
``qbackends warmup --precision c64``).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

COMPILE_SECONDS = 45.0  # every kernel from an empty numba cache on 2 cores; until this installation times its own
SECONDS_FILE = "qbackends-kernels.seconds"  # beside the marker: how long the last compile here took


def _folder() -> Path | None:
    """Where the marker goes: beside numba's cache of the kernels (None when they are not cached)."""
    from . import kernels

    chosen = os.environ.get("NUMBA_CACHE_DIR")
    return Path(chosen) if chosen else kernels.CACHE.folder


def _marker(precision: str = "c128") -> Path | None:
    """A file beside numba's cache of the kernels, named after what invalidates that cache and the precision."""
    from importlib import metadata

    from . import kernels

    folder = _folder()
    if folder is None:
        return None
    source = Path(kernels.__file__)
    key = hashlib.sha256(source.read_bytes() + metadata.version("numba").encode()).hexdigest()[:16]
    return folder / f"qbackends-kernels-{key}{'' if precision == 'c128' else '-' + precision}.compiled"


def _seconds_file(folder: Path, precision: str) -> Path:
    return folder / (SECONDS_FILE if precision == "c128" else f"{SECONDS_FILE}.{precision}")


def compiled(precision: str = "c128") -> bool:
    """True once the kernels (of ``precision``) have been compiled and cached in this installation."""
    try:
        marker = _marker(precision)
        return marker is not None and marker.exists()
    except OSError:
        return False


def compile_seconds(precision: str = "c128") -> float:
    """How long compiling the kernels takes here: what the last compile measured, else ``COMPILE_SECONDS``."""
    folder = _folder()
    try:
        seconds = float(_seconds_file(folder, precision).read_text()) if folder is not None else math.nan
    except (OSError, ValueError):
        seconds = math.nan
    return seconds if math.isfinite(seconds) and seconds > 0 else COMPILE_SECONDS


def mark_compiled(seconds: float = 0.0, precision: str = "c128") -> None:
    """Record that every kernel of ``precision`` has been compiled (a value and a gradient ran), and,
    when they were compiled just now rather than loaded (``seconds`` > 0), how long numba took."""
    marker = _marker(precision)
    if marker is None:  # not cached: they compile again next time
        return
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        if seconds > 0:
            _seconds_file(marker.parent, precision).write_text(f"{seconds:.1f}\n")
    except OSError:  # a read-only installation: the kernels compile again next time
        pass


@contextlib.contextmanager
def timing_compiles(add: Callable[[float], None]) -> Iterator[None]:
    """Within the block, ``add(seconds)`` the time numba spent compiling (loads from its cache do not count)."""
    from numba.core import event

    with event.install_timer("numba:compile", add):
        yield


def compile_kernels(precision: str = "c128") -> None:
    """Compile (or load) every kernel of ``precision`` by running a small value and gradient, then mark them compiled."""
    import numpy as np
    import pennylane as qml

    from .device import FusedQubit

    dtype = np.complex64 if precision == "c64" else np.complex128

    hamiltonian = qml.Hamiltonian([1.0, 0.5], [qml.Z(0) @ qml.Z(1), qml.Z(2)])

    @qml.qnode(FusedQubit(wires=3, c_dtype=dtype), diff_method="adjoint")
    def circuit(x):  # every segment kind: product layer, diagonal block, CNOT
        for w in range(3):
            qml.Hadamard(w)
        qml.IsingZZ(x[0], wires=[0, 1])
        qml.RX(x[1], wires=0)
        qml.CNOT([0, 1])
        qml.RY(x[1], wires=2)
        return qml.expval(hamiltonian)

    cost = qml.Hamiltonian([0.5] * 3, [qml.Z(0) @ qml.Z(1), qml.Z(1) @ qml.Z(2), qml.Z(0) @ qml.Z(2)])
    mixer = qml.Hamiltonian([1.0] * 3, [qml.X(w) for w in range(3)])

    @qml.qnode(FusedQubit(wires=3, c_dtype=dtype), diff_method="adjoint")
    def qaoa(p):  # the sweeps that fuse a mixer, an unweighted cost layer and the next mixer
        for w in range(3):
            qml.Hadamard(w)
        for layer in range(2):
            qml.qaoa.cost_layer(p[0][layer], cost)
            qml.qaoa.mixer_layer(p[1][layer], mixer)
        return qml.expval(cost)

    cold, spent = not compiled(precision), [0.0]
    with timing_compiles(spent.append):
        qml.grad(circuit)(qml.numpy.array([0.1, 0.2], requires_grad=True))
        angles = [[0.1, 0.2], [0.3, 0.4]]
        qml.grad(qaoa)(qml.numpy.array(angles, requires_grad=True))
        qaoa(qml.numpy.array(angles, requires_grad=False))
    mark_compiled(sum(spent) if cold else 0.0, precision)  # the whole compile, not a recompile of a few
