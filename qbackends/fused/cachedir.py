"""Where the fused simulator's compiled kernels are cached, also on a read-only installation.

numba caches beside the source (``__pycache__``) or in the user's cache folder; where neither can be
written (a container, a shared site-packages with a read-only HOME) it refuses to compile at all.
Then the kernels go to a folder under the system's temporary directory, with one warning.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger("qbackends")


def _writable(folder: Path) -> bool:
    """Whether a file can be made in ``folder`` (made if missing), tested as numba tests it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def _user_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "numba"


def kernel_cache_dir(source: Path) -> Path:
    """The folder numba will cache ``source``'s kernels in; sets numba's ``CACHE_DIR`` when it must move."""
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen:
        return Path(chosen)
    if _writable(source.parent / "__pycache__"):
        return source.parent / "__pycache__"
    if _writable(_user_cache()):
        return _user_cache()
    fallback = Path(tempfile.gettempdir()) / f"qbackends-numba-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    import numba

    numba.config.CACHE_DIR = str(fallback)  # type: ignore[attr-defined]  # set from the environment at import
    log.warning(
        "qbackends: %s and %s cannot be written; fused.qubit's kernels are cached in %s "
        "(set NUMBA_CACHE_DIR to keep them elsewhere).",
        source.parent,
        _user_cache(),
        fallback,
    )
    return fallback
