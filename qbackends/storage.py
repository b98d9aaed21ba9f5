"""Atomic writes: a file is either the old version or the complete new one, never half."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from .errors import StorageError, WorkloadInputError


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], object]) -> Path:
    """Write through ``write(fileobj)`` to a temporary file beside ``path``, fsync, then rename over it.

    The temporary file's name carries this process's id; ones left by killed processes are removed.

    Raises:
        StorageError: the file cannot be written (disk full, read-only, a file where a folder goes),
            naming it; the old version, if any, is left as it was.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_orphans(target)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise storage_error(target, exc) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_for(target))  # mkstemp makes 0600; a new file gets what the umask allows
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise storage_error(target, exc) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def os_reason(exc: OSError) -> str:
    """The system's words for a failed write, and what they mean where they say little."""
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        return f"{exc.strerror} (a file stands where a folder must go)"
    return exc.strerror or str(exc)


def storage_error(path: Path, exc: OSError) -> StorageError:
    """The typed error for a file or folder that cannot be written, with the fix its cause calls for."""
    reason = os_reason(exc)
    folder = path.parent if path.name else path
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free space on the disk that holds {str(folder)!r}, or write elsewhere."
    else:
        fix = f"make {str(folder)!r} a writable folder, or write elsewhere."
    return StorageError(f"{str(path)!r} cannot be written: {reason}.", fix, path=str(path), reason=reason)


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


LOCK_FILE = ".qbackends.lock"


@contextlib.contextmanager
def exclusive(lock: Path, what: str) -> Iterator[None]:
    """Hold ``lock`` (a file) for as long as this run uses ``what``; a second run is refused, naming the first.

    The lock file is never followed through a link nor written when it is not a plain file of its own
    (in a shared folder another user could plant either). A run started by the process that holds the
    lock (a job script running ``qbackends run``) works inside its parent's hold.

    Raises:
        WorkloadInputError: another process holds it, or it cannot be made.
    """
    import fcntl

    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise WorkloadInputError(
                f"{what} has a symbolic link as its lock file {str(lock)!r}; qbackends does not write through it.",
                f"remove {str(lock)!r} (or give this run its own folder).",
            ) from None
        raise WorkloadInputError(
            f"{what} cannot be written: {os_reason(exc)} ({str(lock.parent)!r}).",
            f"make {str(lock.parent)!r} a writable folder, or choose another place for this run's files.",
        ) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise WorkloadInputError(
                f"{what} has a lock file {str(lock)!r} that is not a plain file of its own; qbackends does not write it.",
                f"remove {str(lock)!r} (or give this run its own folder).",
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            if holder.isdigit() and int(holder) in _ancestors():
                yield  # our own parent holds it for us
                return
            raise WorkloadInputError(
                f"{what} is in use by another run (process {holder}); two runs there would overwrite each other.",
                "wait for that run to end, or give this one its own folder (--results-dir, --checkpoint-dir, --job-name).",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def exclusive_folders(folders: Iterable[tuple[Path, str]]) -> Iterator[None]:
    """``exclusive`` on each distinct folder of (folder, what), through a lock file inside it."""
    with contextlib.ExitStack() as stack:
        seen: set[Path] = set()
        for folder, what in folders:
            key = Path(os.path.abspath(folder))
            if key not in seen:
                seen.add(key)
                stack.enter_context(exclusive(folder / LOCK_FILE, what))
        yield


def _ancestors() -> set[int]:
    """This process's parent, its parent, and so on (Linux's /proc; empty elsewhere)."""
    found: set[int] = set()
    pid = os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat_line = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat_line.rsplit(")", 1)[1].split()[1])
    return found


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
