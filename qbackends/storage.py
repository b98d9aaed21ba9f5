"""Atomic writes: a file is either the old version or the complete new one, never half."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], object]) -> Path:
    """Write through ``write(fileobj)`` to a temporary file beside ``path``, fsync, then rename over it.

    The temporary file's name carries this process's id; ones left by killed processes are removed.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_for(target))  # mkstemp makes 0600; a new file gets what the umask allows
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _remove_orphans(target: Path) -> None:
    """Temporary files of ``target`` whose writing process no longer exists (it was killed mid-write)."""
    for stale in target.parent.glob(f".{target.name}.*.tmp"):
        pid = stale.name[len(target.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            stale.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextlib.contextmanager
def exclusive(lock: Path, what: str) -> Iterator[None]:
    """Hold ``lock`` (a file) for as long as this run uses ``what``; a second run is refused, naming the first.

    Raises:
        WorkloadInputError: another process holds it.
    """
    import fcntl

    from .errors import WorkloadInputError

    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise WorkloadInputError(
            f"{what} cannot be written: {exc.strerror or exc} ({str(lock.parent)!r}).",
            "give this run a writable place (--results-dir, --output, or QBACKENDS_PROFILE).",
        ) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise WorkloadInputError(
                f"{what} is in use by another run (process {holder}); two runs there would overwrite each other.",
                "wait for that run to end, or give this one its own folder (--results-dir, --output).",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _mode_for(target: Path) -> int:
    """The mode an ordinary write would give: the existing file's, else 0666 less the umask."""
    try:
        return target.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> Path:
    """``atomic_write`` of ``data`` as indented JSON."""
    payload = (json.dumps(data, indent=2, default=_jsonable) + "\n").encode()
    return atomic_write(path, lambda fh: fh.write(payload))


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
