"""What a backend can do on a machine: a record built from the backend's declared data and probe facts.

Pure functions of (Backend, MachineFacts): testable with facts recorded on GPU machines.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from .backend import Backend
from .probe import SHARED_MEMORY, MachineFacts

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Precision = Literal["c64", "c128"]
BYTES_PER_AMPLITUDE: dict[str, int] = {"c64": 8, "c128": 16}
# PennyLane's differentiation methods (``qml.qnode(diff_method=...)``), which the memory guard and the workloads check against.
DIFF_METHODS = (
    "best",
    "device",
    "backprop",
    "adjoint",
    "parameter-shift",
    "hadamard",
    "reversed-hadamard",
    "direct-hadamard",
    "reversed-direct-hadamard",
    "finite-diff",
    "spsa",
)
MIN_NVIDIA_COMPUTE_CAPABILITY = (7, 0)  # cuStateVec supports Volta and newer
KOKKOS_HARDWARE = {"OpenMP": "cpu", "Serial": "cpu", "Threads": "cpu", "CUDA": "nvidia", "HIP": "amd"}


@dataclass(frozen=True)
class DeclaredOperations:
    """Operations a device declares in its capabilities TOML."""

    native: tuple[str, ...] = ()
    adjoint_differentiable: tuple[str, ...] = ()
    observables: tuple[str, ...] = ()
    source: str = ""


@dataclass(frozen=True)
class Capabilities:
    """Whether a backend runs here, how large, and why not.

    Attributes:
        ok: the backend can run here (ignoring size).
        reason: why not, or "" when ok.
        fix: what to do about it.
        hardware: where it would run, in words.
        memory_available: bytes the backend can use for its state.
        max_wires: the largest wire count whose adjoint working set fits (None: no state-vector limit).
    """

    backend: str
    ok: bool
    reason: str
    fix: str
    version: str | None
    hardware: str
    memory_available: int
    max_wires: int | None
    state_copies: float | None
    operations: DeclaredOperations = field(default_factory=DeclaredOperations)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def state_bytes(wires: int, precision: str = "c128") -> int:
    """Bytes of one state vector: 2^n amplitudes."""
    return BYTES_PER_AMPLITUDE[precision] << wires


def describe_bytes(n: int) -> str:
    """``n`` bytes as the memory guard's messages say them: GiB, and the exact count."""
    return f"{n / 2**30:.3g} GiB ({n} bytes)"


def working_set_bytes(
    backend: Backend,
    wires: int,
    precision: str = "c128",
    diff_method: str | None = "adjoint",
    mpi: int = 0,
    shared: bool = False,
) -> int:
    """Peak bytes a value+gradient run needs on this backend: its ``state_copies`` and ``table_bytes`` an amplitude.
    ``mpi``: the ranks of an MPI job on this node (True: one),
    ``wires`` their shares' worth, each rank at ``rank_state_copies`` of its share, its ``rank_table_bytes`` an
    amplitude and its ``rank_buffer_bytes``; ``shared``: the ranks hold one state between them, at the backend's
    ``shared_table_bytes`` (where it has them)."""
    copies = backend.copies(bool(mpi)) or 0.0
    need = int(state_bytes(wires, precision) * copies)
    if mpi and shared and backend.shared_table_bytes is not None:
        need += backend.shared_table_bytes << wires
    elif mpi:
        need += backend.rank_table_bytes << wires
        share = state_bytes(wires, precision) // int(mpi)
        need += int(mpi) * min(backend.rank_buffer_bytes, share // 2)
    else:
        need += backend.table_bytes << wires
    if backend.dense_adjoint_observables and diff_method == "adjoint":
        need += 16 << (2 * wires)  # dense complex128 Hamiltonian matrix
    return need


def max_wires(
    backend: Backend,
    available: int,
    precision: str = "c128",
    diff_method: str | None = "adjoint",
    mpi: int = 0,
    shared: bool = False,
) -> int | None:
    """The largest wire count whose working set fits in ``available`` bytes."""
    if backend.state_copies is None:
        return None
    low, high = 0, 64  # bisected (screening asks this of every backend for every auto device): it grows with wires
    while low < high:
        wires = (low + high + 1) // 2
        fits = working_set_bytes(backend, wires, precision, diff_method, mpi, shared) <= available
        low, high = (wires, high) if fits else (low, wires - 1)
    return low


def hardware_of(backend: Backend, facts: MachineFacts) -> str:
    if backend.hardware == "kokkos":
        return KOKKOS_HARDWARE.get(facts.kokkos_space, "cpu")
    return backend.hardware


def evaluate(
    backend: Backend,
    facts: MachineFacts,
    precision: str = "c128",
    diff_method: str | None = "adjoint",
    construction_error: str | None = None,
    mpi: int = 0,
    shared: bool = False,
) -> Capabilities:
    """The capabilities record of ``backend`` on the machine ``facts`` describes; ``construction_error``: why it failed
    at construction in this process (a ``Context``'s ``build_failures``), if it did; ``mpi``: sized as that many ranks
    of an MPI job, ``shared``: holding one state between them (``working_set_bytes``)."""
    version = facts.distributions.get(backend.distribution)
    hardware = hardware_of(backend, facts)
    available, where, problem, fix = _hardware_check(hardware, facts)
    room = facts.shared_memory_available
    if shared and backend.shared_table_bytes is not None and hardware == "cpu" and room is not None and room < available:
        available, where = room, f"{SHARED_MEMORY}, where the ranks of this node share the state,"
    ok = True
    reasons: list[str] = []
    fixes: list[str] = []
    if version is None:
        ok = False
        reasons.append(f"package {backend.distribution} is not installed")
        fixes.append(backend.install_fix)
    if problem:
        ok = False
        reasons.append(problem)
        fixes.append(fix)
    threads, threads_fix = kokkos_threads_problem(facts) if backend.hardware == "kokkos" and hardware == "cpu" else ("", "")
    if threads:
        ok = False
        reasons.append(threads)
        fixes.append(threads_fix)
    if construction_error and ok:
        ok = False
        reasons.append(f"{backend.device_name} failed at construction: {construction_error}")
        fixes.append(construction_fix(hardware))
    if backend.hardware == "kokkos" and facts.kokkos_space:
        where = f"{where} (Kokkos {facts.kokkos_space})"
    return Capabilities(
        backend=backend.key,
        ok=ok,
        reason="; ".join(reasons),
        fix="; ".join(fixes),
        version=version,
        hardware=where,
        memory_available=available,
        max_wires=max_wires(backend, available, precision, diff_method, mpi, shared),
        state_copies=backend.copies(bool(mpi)),
        operations=declared_operations(backend) if version is not None else DeclaredOperations(),
    )


def _hardware_check(hardware: str, facts: MachineFacts) -> tuple[int, str, str, str]:
    """(memory available, where, problem, fix) for the hardware a backend needs."""
    if hardware == "nvidia":
        usable = [g for g in facts.nvidia_gpus if _compute_capability(g.arch) >= MIN_NVIDIA_COMPUTE_CAPABILITY]
        if not facts.nvidia_gpus:
            return (
                0,
                "NVIDIA GPU",
                facts.nvidia_error or "no NVIDIA GPU found",
                "run on a machine with an NVIDIA GPU and its driver, or choose a CPU backend (e.g. local:pennylane/lightning.qubit)",
            )
        if not usable:
            archs = ", ".join(f"{g.name} (compute {g.arch})" for g in facts.nvidia_gpus)
            return (
                0,
                "NVIDIA GPU",
                f"no NVIDIA GPU with compute capability >= 7.0: {archs}",
                "use a Volta or newer GPU, or a CPU backend",
            )
        best = max(usable, key=lambda g: g.memory_free)
        return best.memory_free, f"{len(usable)}x {best.name} (compute {best.arch})", "", ""
    if hardware == "amd":
        if not facts.amd_gpus:
            return (
                0,
                "AMD GPU",
                facts.amd_error or "no AMD GPU found",
                "run on a machine with an AMD GPU and ROCm, or choose a CPU backend (e.g. local:pennylane/lightning.qubit)",
            )
        best = max(facts.amd_gpus, key=lambda g: g.memory_free)
        where = f"{len(facts.amd_gpus)}x {best.name} ({best.arch})"
        if facts.amd_error:
            return best.memory_free, where, facts.amd_error, "install the ROCm runtime (libamdhip64) matching the driver"
        return best.memory_free, where, "", ""
    return facts.host_memory_available, f"CPU, {facts.cores} cores", "", ""


KOKKOS_MAX_THREADS = 512  # past this, lightning.kokkos' OpenMP build crashes as its thread team starts (measured)


def kokkos_threads_problem(facts: MachineFacts) -> tuple[str, str]:
    """(why, fix) when the thread count set for lightning.kokkos' host build cannot work here, else ("", "").

    Kokkos aborts the process on a ``KOKKOS_NUM_THREADS`` that is not a positive whole number, and crashes past
    512 threads (``OMP_NUM_THREADS=1000``: exit -6, no message of its own); more threads than cores only wait on
    each other. So a count above the cores is refused, before anything starts Kokkos.
    """
    cores = facts.cores
    fix = f"unset {{name}}, or set it to a count from 1 to {cores}"
    if "KOKKOS_NUM_THREADS" in facts.threads:
        name, value = "KOKKOS_NUM_THREADS", facts.threads["KOKKOS_NUM_THREADS"]
        count = _whole(value) or 0
        if not 1 <= count <= cores:
            shown = value if len(value) <= 40 else value[:39] + "…"
            return (
                f"{name}={shown!r} is not a thread count from 1 to {cores} (the cores this process may use); Kokkos "
                "aborts the process on it",
                fix.format(name=name),
            )
        return "", ""
    value = facts.threads.get("OMP_NUM_THREADS", "")
    count = _whole(value.split(",")[0])
    if count is not None and count > cores:  # what OpenMP does not read as a count, it ignores
        what = (
            "Kokkos crashes the process past 512" if count > KOKKOS_MAX_THREADS else "the extra threads only wait on each other"
        )
        return (
            f"OMP_NUM_THREADS={value[:40]} asks lightning.kokkos for {count} threads, more than the {cores} cores this "
            f"process may use ({what})",
            fix.format(name="OMP_NUM_THREADS") + " (KOKKOS_NUM_THREADS sets lightning.kokkos' threads alone)",
        )
    return "", ""


def _whole(text: str) -> int | None:
    """The whole number ``text`` spells in ASCII digits (as C's strtol reads it), or None."""
    digits = text.strip()
    return int(digits) if digits.isascii() and digits.isdigit() else None


def _compute_capability(arch: str) -> tuple[int, int]:
    try:
        major, _, minor = arch.partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return (0, 0)


def construction_fix(hardware: str) -> str:
    if hardware == "nvidia":
        return (
            "update the NVIDIA driver to one that supports the CUDA runtime the package was built with, or choose a CPU backend"
        )
    if hardware == "amd":
        return "match the ROCm runtime to the package's build, or choose a CPU backend"
    return "reinstall the package for this platform"


@functools.cache
def declared_operations(backend: Backend) -> DeclaredOperations:
    """Operations from the device's capabilities TOML, found through package metadata."""
    if backend.capabilities_file is None:
        return DeclaredOperations(source="declared in the device's code")
    distribution, path = backend.capabilities_file
    try:
        data = tomllib.loads(_find_file(distribution, path).read_text())
    except (FileNotFoundError, OSError, tomllib.TOMLDecodeError):
        return DeclaredOperations(source=f"{path} not found in {distribution}")
    return parse_declared_operations(data, source=f"{distribution}:{path}")


def declared_by_device(device: Any) -> DeclaredOperations:
    """Operations a built device declares in code (plugins without a TOML): its capabilities, else ``operations``."""
    caps = getattr(device, "capabilities", None)
    ops = getattr(caps, "operations", None)
    if ops:
        observables = getattr(caps, "observables", None) or ()
        return DeclaredOperations(
            native=tuple(sorted(ops)), observables=tuple(sorted(observables)), source="the device's capabilities"
        )
    ops = getattr(device, "operations", None)
    if ops:
        return DeclaredOperations(native=tuple(sorted(str(op) for op in ops)), source="the device's operations")
    return DeclaredOperations(source="declared in the device's code")


def _find_file(distribution: str, path: str) -> Any:
    """A file of an installed distribution, from its metadata; for editable installs, beside its package."""
    try:
        for file in metadata.distribution(distribution).files or []:
            if str(file) == path:
                return file
    except metadata.PackageNotFoundError:
        pass
    top, _, rest = path.partition("/")
    spec = importlib.util.find_spec(top)  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(path)
    return Path(next(iter(spec.submodule_search_locations))) / rest


def parse_declared_operations(data: dict[str, Any], source: str = "") -> DeclaredOperations:
    """Read PennyLane's device TOML (schema 3): native gates, adjoint-differentiable gates, observables."""
    gates = data.get("operators", {}).get("gates", {})
    observables = data.get("operators", {}).get("observables", {})
    return DeclaredOperations(
        native=tuple(sorted(gates)),
        adjoint_differentiable=tuple(sorted(n for n, v in gates.items() if "differentiable" in v.get("properties", ()))),
        observables=tuple(sorted(observables)),
        source=source,
    )
