"""A simulator's one-time cost: numba compiles its kernels on first use and caches them on disk.

``Compilation`` says whether that has happened in this installation (a marker beside numba's cache,
named after what invalidates the cache) and how long it takes here (what the last compile measured).
``auto`` weighs it (``auto.one_time_seconds``); ``qbackends warmup`` pays it ahead. The marker means
every kernel: it is written only once the simulator's warm-up circuits, which take each kernel, have run.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib
import logging
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Compilation:
    """The compile state of one simulator's kernels.

    Attributes:
        simulator: its name in messages ("fused.qubit").
        modules: the modules whose source the cached kernels are compiled from, the first holding ``CACHE``.
        default_seconds: a whole compile from an empty cache on 2 cores, until this installation times its own.
        stem: the marker's file name start; the seconds file is ``<stem>.seconds``.
        circuits: ``"module:function"``; function(precision) runs circuits that take every kernel of that precision.
    """

    simulator: str
    modules: tuple[str, ...]
    default_seconds: float
    stem: str
    circuits: str

    def compile(self, precision: str = "c128", spent: float = 0.0) -> None:
        """Compile (or load) every kernel of ``precision`` by running the warm-up circuits, then mark them
        compiled, with the seconds numba spent compiling (``spent`` of them before this call) when it did."""
        module, _, name = self.circuits.partition(":")
        run_circuits = getattr(importlib.import_module(module), name)
        cold, seconds = spent > 0 or not self.done(precision), [spent]
        token = _warming_up.set(True)  # the warm-up's own devices leave the marking to this call
        try:
            with timing_compiles(seconds.append):
                run_circuits(precision)
        finally:
            _warming_up.reset(token)
        self.record(sum(seconds) if cold else 0.0, precision)  # the whole compile, not a recompile of a few

    def cached(self, precision: str = "c128") -> bool:
        """Whether compiled kernels outlive this process (numba caches them, so a marker can say so)."""
        try:
            return self._marker(precision) is not None
        except OSError:
            return False

    @property
    def seconds_file(self) -> str:
        return f"{self.stem}.seconds"

    def _folder(self) -> Path | None:
        """Where the marker goes: beside numba's cache of the kernels (None when they are not cached)."""
        chosen = os.environ.get("NUMBA_CACHE_DIR")
        return Path(chosen) if chosen else importlib.import_module(self.modules[0]).CACHE.folder

    def _marker(self, precision: str) -> Path | None:
        from importlib import metadata

        folder = self._folder()
        if folder is None:
            return None
        sources = b"".join(Path(importlib.import_module(m).__file__ or "").read_bytes() for m in self.modules)
        key = hashlib.sha256(sources + metadata.version("numba").encode()).hexdigest()[:16]
        return folder / f"{self.stem}-{key}{'' if precision == 'c128' else '-' + precision}.compiled"

    def _seconds_path(self, folder: Path, precision: str) -> Path:
        return folder / (self.seconds_file if precision == "c128" else f"{self.seconds_file}.{precision}")

    def done(self, precision: str = "c128") -> bool:
        """True once the kernels (of ``precision``) have been compiled and cached in this installation."""
        try:
            marker = self._marker(precision)
            return marker is not None and marker.exists()
        except OSError:
            return False

    def seconds(self, precision: str = "c128") -> float:
        """How long compiling the kernels takes here: what the last compile measured, else ``default_seconds``."""
        folder = self._folder()
        try:
            seconds = float(self._seconds_path(folder, precision).read_text()) if folder is not None else math.nan
        except (OSError, ValueError):
            seconds = math.nan
        return seconds if math.isfinite(seconds) and seconds > 0 else self.default_seconds

    def record(self, seconds: float = 0.0, precision: str = "c128") -> None:
        """Record that every kernel of ``precision`` has been compiled (a value and a gradient ran), and,
        when they were compiled just now rather than loaded (``seconds`` > 0), how long numba took."""
        marker = self._marker(precision)
        if marker is None:  # not cached: they compile again next time
            return
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
            if seconds > 0:
                self._seconds_path(marker.parent, precision).write_text(f"{seconds:.1f}\n")
        except OSError:  # a read-only installation: the kernels compile again next time
            pass


@contextlib.contextmanager
def timing_compiles(add: Callable[[float], None]) -> Iterator[None]:
    """Within the block, ``add(seconds)`` the time numba spent compiling (loads from its cache do not count)."""
    from numba.core import event

    with event.install_timer("numba:compile", add):
        yield


log = logging.getLogger("qbackends")
_warming_up: contextvars.ContextVar[bool] = contextvars.ContextVar("warming_up", default=False)


class CompileTimer:
    """A device's share of its kernels' compile: it times numba's compiling in its executions and, once its
    first value and gradient ran on cold kernels, compiles the rest (``Compilation.compile``), so that no later
    circuit or ``auto`` trial waits for a kernel this one did not take (a layer between CNOTs after a QAOA run
    compiled for about two minutes); warm, it records nothing new."""

    def __init__(self, compilation: Compilation, precision: str = "c128") -> None:
        self._compilation = compilation
        self._precision = precision
        self._cold = not compilation.done(precision)
        self._seconds = 0.0
        self._recorded = False

    def _add(self, seconds: float) -> None:
        self._seconds += seconds

    def timing(self) -> contextlib.AbstractContextManager[None]:
        """Numba's compiling within the block counts, while the kernels were cold and not yet recorded."""
        return timing_compiles(self._add) if self._cold and not self._recorded else contextlib.nullcontext()

    def gradient_ran(self) -> None:
        if self._recorded or _warming_up.get():
            return
        self._recorded = True
        done = self._compilation.done(self._precision)  # by another device or process since, if it was cold
        if self._cold and not done and self._compilation.cached(self._precision):
            log.warning(
                "qbackends: compiling the rest of %s's %s kernels, once per installation (`qbackends warmup` does it ahead)...",
                self._compilation.simulator,
                self._precision,
            )
            self._compilation.compile(self._precision, spent=self._seconds)
