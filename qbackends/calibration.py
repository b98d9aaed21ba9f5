"""Calibration profiles: time each runnable backend here on a workload's step, and let ``auto`` pick the fastest.

A profile is of one kind of circuit (``qaoa``: a diagonal-heavy QAOA gradient, also the yardstick of
generic ``auto``; ``qnn``: a small batched QML step), timed on the step the workload hands over
(``qbackends.kinds.KINDS``). It records the versions and hardware it was measured on; one that no
longer matches this machine is ignored with a warning.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .backend import Backend
from .costs import Costs
from .errors import QBackendsError, StorageError, WorkloadInputError
from .probe import MachineFacts
from .storage import atomic_write_json

log = logging.getLogger("qbackends")
PROFILE_ENV = "QBACKENDS_PROFILE"
SCHEMA = 1
# Qubits beyond a backend's measured sizes that ``fastest`` still trusts its extended time: half the
# spacing of the default sizes (a default qaoa profile, 12/16/20, decides from 10 to 22 qubits).
REACH = 2


class MinWires(NamedTuple):
    """The smallest size a kind's step times what it says, and why."""

    wires: int
    why: str


MIN_WIRES = {"qaoa": MinWires(4, "its graph, gnm_random_graph(n, 1.5n), has room for 1.5n edges only from n = 4")}
ANY_WIRES = MinWires(1, "")  # every other kind's, e.g. qnn's layer, which runs on one qubit


def profile_path(kind: str = "qaoa") -> Path:
    """``$QBACKENDS_PROFILE``, else the user's cache directory; another kind than qaoa beside it
    (``profile-qnn.json``)."""
    if os.environ.get(PROFILE_ENV):
        base = Path(os.environ[PROFILE_ENV])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "qbackends" / "profile.json"
    return base if kind == "qaoa" else base.with_name(f"{base.stem}-{kind}{base.suffix}")


def fingerprint(facts: MachineFacts) -> dict[str, Any]:
    """What a profile's timings depend on: package versions and hardware."""
    return {
        "distributions": dict(sorted(facts.distributions.items())),
        "cores": facts.cores,
        "cpu": _cpu_model(),
        "machine": platform.machine(),
        "nvidia": [g.name for g in facts.nvidia_gpus],
        "amd": [g.name for g in facts.amd_gpus],
        "kokkos": facts.kokkos_space,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


@dataclass
class Profile:
    """Seconds per step of one kind of workload, per backend key and wire count."""

    fingerprint: dict[str, Any]
    seconds: dict[str, dict[int, float]] = field(default_factory=dict)
    workload: str = "QAOA MaxCut p=2 value+adjoint gradient, gnm_random_graph(n, 1.5n, seed=1967)"
    measured: str = ""
    schema: int = SCHEMA
    kind: str = "qaoa"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = {b: {str(n): s for n, s in sizes.items()} for b, sizes in self.seconds.items()}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Profile:
        seconds = {b: {int(n): float(s) for n, s in sizes.items()} for b, sizes in data["seconds"].items()}
        return cls(
            fingerprint=dict(data["fingerprint"]),
            seconds=seconds,
            workload=data.get("workload", ""),
            measured=data.get("measured", ""),
            schema=int(data.get("schema", 0)),
            kind=str(data.get("kind", "qaoa")),
        )

    def predict(self, backend: str, wires: int) -> float | None:
        """Seconds at ``wires``: log-linear between measured sizes, extended from the nearest two."""
        points = sorted(self.seconds.get(backend, {}).items())
        if not points:
            return None
        if len(points) == 1:
            n0, s0 = points[0]
            try:
                return s0 * 2.0 ** (wires - n0)
            except OverflowError:  # a size past a float's range (2**1024): longer than any run
                return math.inf if s0 > 0 else 0.0
        below = [p for p in points if p[0] <= wires]
        above = [p for p in points if p[0] >= wires]
        if below and above:
            (n0, s0), (n1, s1) = below[-1], above[0]
        elif below:
            (n0, s0), (n1, s1) = points[-2], points[-1]
        else:
            (n0, s0), (n1, s1) = points[0], points[1]
        if n0 == n1:
            return s0
        slope = (math.log(s1) - math.log(s0)) / (n1 - n0)
        try:
            return math.exp(math.log(s0) + slope * (wires - n0))
        except OverflowError:  # past a float's range: longer than any run
            return math.inf


def _present(path: Path) -> bool:
    """Whether something is at ``path``; a path that cannot name a file (too long, a NUL byte) is warned of."""
    try:
        return path.exists()
    except (OSError, ValueError) as exc:
        log.warning("qbackends: ignoring calibration file %r: %s; set %s to a file's path.", str(path)[:200], exc, PROFILE_ENV)
        return False


def load_profile(facts: MachineFacts, path: Path | None = None, kind: str = "qaoa") -> Profile | None:
    """The saved profile of ``kind``, if there is one and it was measured on this machine as it is now."""
    path = path or profile_path(kind)
    if not _present(path):
        return None
    try:
        if path.stat().st_size > MAX_PROFILE_BYTES:
            raise ValueError(f"over {MAX_PROFILE_BYTES} bytes")
        profile = Profile.from_json(json.loads(path.read_text(encoding="utf-8")))
        if not all(math.isfinite(t) and t > 0 for sizes in profile.seconds.values() for t in sizes.values()):
            raise ValueError("a time that is not a positive number")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        # a folder, another file type, wrong types, deep nesting: the profile is only advice, so auto goes on without it
        log.warning(
            "qbackends: ignoring unreadable calibration profile %s (%s: %s); run `qbackends calibrate` again.",
            path,
            type(exc).__name__,
            exc,
        )
        return None
    current = fingerprint(facts)
    if profile.kind != kind:
        log.warning("qbackends: ignoring calibration profile %s: it times %s, not %s.", path, profile.kind, kind)
        return None
    if profile.schema != SCHEMA or profile.fingerprint != current:
        changed = sorted(k for k in current if profile.fingerprint.get(k) != current[k]) or ["schema"]
        log.warning(
            "qbackends: ignoring stale calibration profile %s (changed: %s); run `qbackends calibrate` again.",
            path,
            ", ".join(changed),
        )
        return None
    return profile


def fastest(profile: Profile, candidates: Iterable[Backend], wires: int) -> Backend | None:
    """The candidate with the smallest predicted time at ``wires``, when the profile timed every
    candidate near that size; else None, and the documented defaults decide.

    Near: from ``REACH`` qubits below the smallest size measured for that backend to ``REACH`` above
    the largest. A backend the profile did not time there may be faster than every one it did, and a
    time extended far from its measurements is a guess (one at 3 qubits says nothing about 14).
    """
    timed = []
    for backend in candidates:
        sizes = profile.seconds.get(backend.key, {})
        seconds = profile.predict(backend.key, wires)
        if seconds is None or not min(sizes) - REACH <= wires <= max(sizes) + REACH:
            return None
        timed.append((seconds, backend))
    return min(timed, key=lambda tb: tb[0])[1] if timed else None


def calibrate(
    backends: Iterable[Backend],
    facts: MachineFacts,
    step: Callable[[str, int], Callable[[], Any]],
    sizes: Iterable[int],
    repeats: int = 3,
    kind: str = "qaoa",
    workload: str = "",
    on_result: Callable[[str, int, float], None] | None = None,
) -> Profile:
    """Time ``step(device_string, wires)()`` on each backend at each size (median of ``repeats``).

    ``step`` builds the workload's step (it raises a QBackendsError for a size a backend cannot
    take, which is skipped with a warning); its first call, compiling and allocating, is not timed.
    """
    profile = Profile(fingerprint(facts), measured=time.strftime("%Y-%m-%dT%H:%M:%S"), kind=kind, workload=workload or kind)
    for backend in backends:
        for n in sizes:
            try:
                run = step(backend.device_string, n)
            except QBackendsError as exc:  # e.g. the memory guard: this size is not for this backend
                log.warning("qbackends: calibration skips %s at %d qubits: %s", backend.device_string, n, exc.one_line())
                continue
            run()
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
            seconds = sorted(times)[len(times) // 2]
            profile.seconds.setdefault(backend.key, {})[n] = seconds
            if on_result is not None:
                on_result(backend.key, n, seconds)
    return profile


def save_profile(profile: Profile, path: Path | None = None) -> Path:
    """Write the profile; a place that cannot be written is a typed error naming it."""
    target = path or profile_path(profile.kind)
    try:
        return atomic_write_json(target, profile.to_json())
    except StorageError as exc:
        raise WorkloadInputError(
            f"The calibration profile cannot be written to {str(target)!r}: {exc.reason}.",
            "pass --output PATH (or set QBACKENDS_PROFILE) to a writable place.",
        ) from exc


MAX_PROFILE_BYTES = 1 << 20


# ---- auto's cost model, measured on this machine (``qbackends calibrate --workload circuits``) ---------------


def save_model(costs: Mapping[str, Any], facts: MachineFacts, path: Path | None = None) -> Path:
    """Write a cost model measured here (backend key -> ``Costs``), with what it was measured on."""
    target = path or profile_path("circuits")
    data = {
        "schema": SCHEMA,
        "kind": "circuits",
        "fingerprint": fingerprint(facts),
        "measured": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "backends": {key: asdict(c) for key, c in costs.items()},
    }
    try:
        return atomic_write_json(target, data)
    except StorageError as exc:
        raise WorkloadInputError(
            f"The cost model cannot be written to {str(target)!r}: {exc.reason}.",
            "pass --output PATH (or set QBACKENDS_PROFILE) to a writable place.",
        ) from exc


def load_model(facts: MachineFacts, path: Path | None = None) -> dict[str, Any]:
    """The cost model measured on this machine as it is now (backend key -> ``auto.Costs``); {} without one, or
    with one of other versions or hardware (ignored with a warning)."""
    path = path or profile_path("circuits")
    if not _present(path):
        return {}
    try:
        if path.stat().st_size > MAX_PROFILE_BYTES:
            raise ValueError(f"over {MAX_PROFILE_BYTES} bytes")
        data = json.loads(path.read_text(encoding="utf-8"))
        costs = {str(k): Costs(**v) for k, v in data["backends"].items()}
        stamp = data["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        log.warning(
            "qbackends: ignoring unreadable cost model %s (%s: %s); run `qbackends calibrate --workload circuits` again.",
            path,
            type(exc).__name__,
            exc,
        )
        return {}
    current = fingerprint(facts)
    if data.get("schema") != SCHEMA or stamp != current:
        changed = sorted(k for k in current if stamp.get(k) != current[k]) or ["schema"]
        log.warning(
            "qbackends: ignoring stale cost model %s (changed: %s); run `qbackends calibrate --workload circuits` again.",
            path,
            ", ".join(changed),
        )
        return {}
    return costs
