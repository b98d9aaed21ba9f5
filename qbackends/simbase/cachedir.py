"""Where numba caches the simulators' compiled kernels, decided once, before a module defines them.

numba caches in ``NUMBA_CACHE_DIR``, else beside the source (``__pycache__``), else in the user's cache
folder; where none can be written (a read-only installation and HOME) it refuses to compile at all.
Then the kernels are cached in ``qbackends-numba-<uid>`` under the temporary directory, a folder that
must be this user's alone: made here with mode 0700, or found so. Anyone who could write in it could
have numba load their code, so when it is not private the kernels are not cached (they compile in
every process). The other folders are the user's own choice or as writable as the source itself.

Files there that numba could not read back (a truncated or garbled index or data file, a folder in a
file's place) would fail every run; they are removed first, and those kernels compile again. Each file
is read through once: ``<module>.checked`` there keeps the files found readable (size, times, inode),
and a file that changed since is read through again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import logging
import os
import pickle
import pickletools
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("qbackends")


@dataclasses.dataclass(frozen=True)
class KernelCache:
    """Where one module's kernels are cached.

    Attributes:
        folder: the folder numba reads and writes them in; None when they are not cached.
        numba_dir: the private temporary folder, set as numba's ``CACHE_DIR`` while each kernel is
            defined (and restored at once); None where numba finds ``folder`` itself.
    """

    folder: Path | None
    numba_dir: Path | None = None

    def njit(self, **options: Any) -> Callable[[Callable[..., Any]], Any]:
        """``numba.njit(**options)``, cached in ``folder``, or not at all."""
        from .threads import import_numba

        numba = import_numba()

        def decorate(func: Callable[..., Any]) -> Any:
            if self.numba_dir is None:
                return numba.njit(cache=self.folder is not None, **options)(func)
            saved = numba.config.CACHE_DIR
            numba.config.CACHE_DIR = str(self.numba_dir)  # read when the function's cache is made, here
            try:
                return numba.njit(cache=True, **options)(func)
            finally:
                numba.config.CACHE_DIR = saved

        return decorate


def kernel_cache(source: Path) -> KernelCache:
    """Where the kernels defined in ``source`` are cached: numba's own choice, else the private temporary folder."""
    from numba.core.caching import UserProvidedCacheLocator
    from numba.misc.appdirs import AppDirs

    from .threads import import_numba

    chosen = import_numba().config.CACHE_DIR
    subfolder = UserProvidedCacheLocator.get_suitable_cache_subpath(str(source))  # numba's name for source's folder
    user = Path(AppDirs(appname="numba", appauthor=False).user_cache_dir)
    for folder in ([Path(chosen) / subfolder] if chosen else []) + [source.parent / "__pycache__", user / subfolder]:
        if _writable(folder):  # numba's test, in numba's order
            return _without_unreadable(folder, source.stem)
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    fallback = Path(tempfile.gettempdir()) / f"qbackends-numba-{uid}"
    if not _private_fallback(fallback, user):
        return KernelCache(None)
    return _without_unreadable(fallback / subfolder, source.stem, numba_dir=fallback)


def _writable(folder: Path) -> bool:
    """Whether a file can be made in ``folder`` (made if missing), tested as numba tests it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


@functools.cache  # once per folder and process: the fused and batched kernels share it, and one warning
def _private_fallback(folder: Path, user: Path) -> bool:
    """Whether the kernels may be cached in ``folder``; warns either way."""
    reason = _not_private(folder)
    if reason:
        log.warning(
            "qbackends: numba can write its cache neither beside the kernels' source nor in %s, and %s is not "
            "private to this user (%s): the kernels are not cached, so they compile in every run. Fix: set "
            "NUMBA_CACHE_DIR to a folder of your own, or remove %s if it is yours.",
            user,
            folder,
            reason,
            folder,
        )
        return False
    log.warning(
        "qbackends: numba can write its cache neither beside the kernels' source nor in %s; the kernels are cached "
        "in %s (set NUMBA_CACHE_DIR to keep them elsewhere).",
        user,
        folder,
    )
    return True


def _not_private(folder: Path) -> str:
    """Why ``folder`` is not this user's alone and writable ("" when it is): made now with mode 0700, or found so."""
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return f"it cannot be made: {exc.strerror}"
    try:
        info = folder.lstat()
    except OSError as exc:  # removed just now
        return f"it cannot be read: {exc.strerror}"
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"it belongs to uid {info.st_uid}, not to uid {os.getuid()}"
    if os.name == "posix" and stat.S_IMODE(info.st_mode) != 0o700:
        return f"its mode is {stat.S_IMODE(info.st_mode):04o}, not 0700"
    return "" if _writable(folder) else "it cannot be written"


def _without_unreadable(folder: Path, stem: str, numba_dir: Path | None = None) -> KernelCache:
    """Caching in ``folder`` once the files of ``stem``'s kernels there that numba could not read back are
    removed; not caching if they cannot be."""
    cache = KernelCache(folder, numba_dir)
    checked = folder / f"{stem}.checked"
    known = _checked_files(checked)
    stamps = {path: _stamp(path) for path in sorted(folder.glob(f"{stem}.*.nb[ic]"))}
    broken = [path for path, now in stamps.items() if now is None or (known.get(path.name) != now and not _readable(path))]
    readable = {path.name: now for path, now in stamps.items() if now is not None and path not in broken}
    if readable != known:
        _write_checked(checked, readable)
    if not broken:
        return cache
    names = ", ".join(path.name for path in broken)
    try:
        for path in broken:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    except OSError as exc:
        log.warning(
            "qbackends: numba's cache in %s holds files it cannot read back (%s) that cannot be removed (%s): the "
            "kernels there are not cached in this run. Fix: delete those files, or set NUMBA_CACHE_DIR to another folder.",
            folder,
            names,
            exc.strerror,
        )
        return KernelCache(None)
    log.warning(
        "qbackends: numba's cache in %s held files it could not read back (%s); they are removed, and those kernels "
        "compile again.",
        folder,
        names,
    )
    return cache


def _stamp(path: Path) -> list[int] | None:
    """What changes when a file is written or replaced (size, modification and change times, inode); None
    for anything but a regular file."""
    try:
        info = path.lstat()
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino] if stat.S_ISREG(info.st_mode) else None


def _checked_files(checked: Path) -> dict[str, list[int]]:
    """The files an earlier run found readable, by name, with their stamps; none if the record is unreadable."""
    try:
        found = json.loads(checked.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_checked(checked: Path, readable: dict[str, list[int]]) -> None:
    """Replace the record at once (another process may read it now); a folder that cannot take it is left as it is."""
    try:
        with tempfile.NamedTemporaryFile("w", dir=checked.parent, prefix=checked.name, delete=False) as out:
            json.dump(readable, out)
    except OSError:
        return
    try:
        os.replace(out.name, checked)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(out.name)


def _readable(path: Path) -> bool:
    """Whether numba can read ``path`` back: an index (``.nbi``, small) as numba reads it, its version and then
    its entries; a data file (``.nbc``) as one whole pickle, checked opcode by opcode without loading it."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return False
        data = path.read_bytes()
    except OSError:
        return False
    stream = io.BytesIO(data)
    try:
        if path.suffix == ".nbi":
            pickle.load(stream)
            pickle.loads(stream.read())
            return True
        for _ in pickletools.genops(stream):
            pass
    except Exception:  # noqa: BLE001 - whatever numba's own read would raise
        return False
    return stream.tell() == len(data)
