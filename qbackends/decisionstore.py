"""``auto``'s decisions kept between processes: one small JSON file per decision, per user and machine.

A decision is stored under a digest of what it depends on: the machine (``calibration.fingerprint``: package and
backend versions, CPU, GPUs, cores), the thread-count variables, the auto device's setup (its candidates, wires and
options) and the circuit's structure. A second run of the same script on the same machine reads the decision
instead of trying the backends again (a process lists the folder once, at its first lookup: what other processes
store after that is seen by the next one). The folder is ``$QBACKENDS_DECISIONS``, else the user's cache directory
(``~/.cache/qbackends/decisions``); ``QBACKENDS_DECISIONS=off`` keeps decisions in the process only.

Each file is written atomically (``storage.atomic_write``), so concurrent processes see the old file or the new
one; two processes that decide the same circuit write the same answer. Nothing is read from, or written to, a
folder that is not this user's own and closed to others (another user could plant a decision there), nor through a
link. ``qbackends probe auto`` lists what is stored; ``qbackends probe auto --clear`` removes it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import stat
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .storage import atomic_write

log = logging.getLogger("qbackends")

DECISIONS_ENV = "QBACKENDS_DECISIONS"
OFF = ("off", "0", "none", "no")
SCHEMA = 1
SUFFIX = ".decision.json"
KEPT = 2000  # decisions kept at most; past it the oldest quarter goes


def folder(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where decisions are kept; None when ``QBACKENDS_DECISIONS`` turns the store off."""
    env = os.environ if environ is None else environ
    given = env.get(DECISIONS_ENV, "").strip()
    if given.lower() in OFF:
        return None
    if given:
        return Path(given)
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "qbackends" / "decisions"


def why_untrusted(path: Path) -> str | None:
    """Why decisions must not be read from (or written to) ``path``; None when it is this user's own, closed folder."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None  # made here, 0700, when the first decision is written
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder of its own (a link or a file)"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"{path} belongs to another user"
    if info.st_mode & 0o022:
        return f"{path} is writable by other users"
    return None


def digest(*parts: Any) -> str:
    """A stable name for ``parts`` (plain values: str, numbers, None, and lists/tuples/dicts of them)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=_refuse)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def stable_digest(*parts: Any) -> str | None:
    """``digest``, or None where a part has no stable form (an object, compared by identity in this process)."""
    try:
        return digest(*parts)
    except (TypeError, ValueError):  # ValueError: a container that holds itself
        return None


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} has no stable form")


def plain(value: Any) -> bool:
    """Whether ``value`` is made of values that mean the same in every process (no objects compared by identity)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    return False


@dataclass(frozen=True)
class Stored:
    """One stored decision, as ``auto`` reads it back."""

    backend: str
    predicted: dict[str, float]
    measured: dict[str, float]
    refused: dict[str, str]
    shape: dict[str, Any]
    stored: str  # when (UTC, ISO 8601)
    describe: str = ""  # the circuit and setup, in words, for ``qbackends probe auto``


class DecisionStore:
    """The decisions of one machine fingerprint in ``root`` (None: none are kept)."""

    def __init__(self, root: Path | None, machine: Mapping[str, Any]) -> None:
        self.root = root
        self.machine = digest(dict(machine))
        self._warned = False
        self._names: set[str] | None = None  # the folder's files, listed at the first lookup

    def _usable(self) -> bool:
        if self.root is None:
            return False
        why = why_untrusted(self.root)
        if why is not None and not self._warned:
            self._warned = True
            log.warning(
                "qbackends: auto's decisions are kept in this process only: %s. Fix: set %s to a folder of your own, or %s=off.",
                why,
                DECISIONS_ENV,
                DECISIONS_ENV,
            )
        return why is None

    def path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / f"{self.machine}-{key}{SUFFIX}"

    def get(self, key: str) -> Stored | None:
        """The decision stored under ``key`` for this machine; None when there is none, or it is unreadable."""
        if not self._usable():
            return None
        if self._names is None:
            try:
                self._names = set(os.listdir(self.root))
            except OSError:
                self._names = set()
        if self.path(key).name not in self._names:
            return None  # not stored when this process first looked, nor by it since (a loop of new circuits asks often)
        try:
            fd = os.open(self.path(key), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None  # none stored (or a link planted in its place: not followed)
        try:
            with os.fdopen(fd, "rb") as fh:
                data = json.loads(fh.read(1 << 20))
            if data.get("schema") != SCHEMA:
                return None
            stored = Stored(
                backend=_text(data["backend"]),
                predicted={_text(k): _seconds(v) for k, v in data["predicted"].items()},
                measured={_text(k): _seconds(v) for k, v in data["measured"].items()},
                refused={_text(k): _text(v) for k, v in data["refused"].items()},
                shape=dict(data["shape"]),
                stored=_text(data["stored"]),
                describe=_text(data.get("describe", "")),
            )
            return stored
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None  # a damaged file is decided again, then written over

    def put(
        self,
        key: str,
        backend: str,
        predicted: Mapping[str, float],
        measured: Mapping[str, float],
        refused: Mapping[str, str],
        shape: Any,
        describe: str,
    ) -> None:
        """Keep a decision; a folder that cannot take it leaves the decision in this process only (logged)."""
        if not self._usable():
            return
        assert self.root is not None
        data = {
            "schema": SCHEMA,
            "backend": backend,
            "predicted": dict(predicted),
            "measured": dict(measured),
            "refused": dict(refused),
            "shape": asdict(shape) if shape is not None else {},
            "stored": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "describe": describe,
        }
        payload = (json.dumps(data, indent=1) + "\n").encode()
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if why_untrusted(self.root) is None:
                atomic_write(self.path(key), lambda fh: fh.write(payload))
                if self._names is not None:
                    self._names.add(self.path(key).name)
                _prune(self.root)
        except Exception as exc:  # noqa: BLE001 - storing is a saving, never a reason for the user's circuit to fail
            if not self._warned:
                self._warned = True
                log.warning("qbackends: auto's decision was not stored (%s); it holds in this process only.", exc)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("not text")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError("not a number of seconds")
    return float(value)


def _prune(root: Path) -> None:
    """Past ``KEPT`` files, the least recently written go (a loop whose circuits never repeat writes one each)."""
    paths = list(root.glob(f"*{SUFFIX}"))
    if len(paths) <= KEPT:
        return
    paths.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0.0)
    for path in paths[: len(paths) - KEPT * 3 // 4]:
        path.unlink(missing_ok=True)


def entries(root: Path | None) -> list[tuple[Path, Stored | None]]:
    """Every stored decision in ``root`` (any machine), newest first; None for a file that cannot be read."""
    if root is None or why_untrusted(root) is not None or not root.is_dir():
        return []
    found = []
    paths = list(root.glob(f"*{SUFFIX}"))
    names = {path.name for path in paths}  # listed once, not once per store
    for path in paths:
        machine, _, key = path.name[: -len(SUFFIX)].partition("-")
        store = DecisionStore(root, {})
        store.machine, store._names = machine, names
        found.append((path, store.get(key)))
    return sorted(found, key=lambda e: e[1].stored if e[1] else "", reverse=True)


def clear(root: Path | None) -> int:
    """Remove every stored decision in ``root``; how many were removed."""
    if root is None or not root.is_dir() or why_untrusted(root) is not None:
        return 0
    removed = 0
    for path in root.glob(f"*{SUFFIX}"):
        path.unlink(missing_ok=True)
        removed += 1
    return removed
