"""What each workload hands ``auto``: its device request, and the step ``qbackends calibrate`` times for it.

The decision itself is ``qbackends.auto``'s, per circuit, for the workloads as for every other caller;
a workload adds what only it knows (how many steps its run takes, the gradient its layer wants).
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import Any, TypeGuard

log = logging.getLogger("qbackends")


@dataclass(frozen=True)
class Kind:
    """A kind of circuit a workload runs: the step ``qbackends calibrate`` times for it (the
    workload module's ``calibration_step(device_string, wires)``) and its sizes."""

    description: str
    module: str
    sizes: tuple[int, ...]


KINDS = {
    "qaoa": Kind(
        "QAOA MaxCut p=2 value+adjoint gradient, gnm_random_graph(n, 1.5n, seed=1967)",
        "qbackends.workloads.qaoa",
        (12, 16, 20),
    ),
    "qnn": Kind("dressed-QNN quantum layer, a batch of 16, forward+backward", "qbackends.workloads.qnn", (4, 8, 12, 16)),
}


def auto_role(backend: Any) -> str:
    """When ``auto`` takes ``backend``, in one line."""
    from .auto import may_take

    if not may_take(backend):
        return "never: only when asked for by name" + (" (it samples only)" if backend.needs_shots else "")
    start = f" from {backend.min_auto_wires} wires" if backend.min_auto_wires else ""
    return f"per circuit{start}: when the cost model, or a trial on the circuit, finds it the fastest here"


def calibration_step(kind: str) -> Any:
    """``step(device_string, wires) -> run()`` of the workload of ``kind``."""
    return importlib.import_module(KINDS[kind].module).calibration_step


def calibration_candidates() -> list[Any]:
    """The runnable backends ``auto`` may take: what ``qbackends calibrate`` times by default."""
    from . import capabilities
    from .device import facts_for
    from .registry import get_registry

    registry = get_registry()
    facts = facts_for(registry)
    return [b for b in registry.backends.values() if b.generic_auto and capabilities.evaluate(b, facts).ok]


def qnn_diff_method(device_string: str) -> str:
    """How the QNN differentiates on a backend: what ``auto`` would resolve "best" to there (backprop on
    default.qubit, else adjoint)."""
    from . import auto
    from .devicestring import parse
    from .registry import get_registry

    backend = get_registry().lookup(parse(device_string))
    return auto.gradient_methods([backend], "best", shots=False)[0][backend.key] or "adjoint"


def _resolve(spec: str | None) -> tuple[str, bool]:
    from .device import requested_spec

    parsed = requested_spec(spec)
    return str(parsed), parsed.is_auto


MPI_DEVICE = "local:qbackends/fused.qubit"  # the one device here that splits its state over MPI ranks


def qaoa_device(
    spec: str | None,
    wires: int,
    diff_method: str,
    layers: int = 2,
    iterations: int = 1000,
    resumed_on: str | None = None,
    precision: str = "c128",
    mpi: bool = False,
) -> Any:
    """``get_device`` for a QAOA run: under ``auto``, the device a resumed checkpoint was made on (``resumed_on``),
    else the per-circuit auto device, told how many steps the run takes (so its trials stay a small share of
    them); otherwise what was asked for. ``precision`` as the user asked (c64 only then).
    ``mpi``: the state split over the MPI ranks, on fused.qubit unless ``spec`` names another device (which
    then refuses mpi=True by name)."""
    from .device import get_device

    if mpi:
        return get_device(spec or MPI_DEVICE, wires=wires, diff_method=diff_method, precision=precision, mpi=True)
    _, is_auto = _resolve(spec)
    if is_auto and _resumable(resumed_on):
        return get_device(resumed_on, wires=wires, diff_method=diff_method, precision=precision)
    steps: dict[str, Any] = {"expected_steps": iterations} if is_auto else {}
    # None: get_device names the variable it read
    return get_device(spec, wires=wires, diff_method=diff_method, precision=precision, **steps)


def _resumable(resumed_on: str | None) -> TypeGuard[str]:
    """A checkpoint's device that a resumed ``auto`` run continues on (one that names a backend, not auto)."""
    from .devicestring import parse

    return resumed_on is not None and not parse(resumed_on).is_auto


def qnn_device(
    spec: str | None, wires: int, diff_method: str, resumed_on: str | None = None, steps: int = 100
) -> tuple[Any, str]:
    """(device, diff_method) for the dressed QNN's minibatches: under ``auto``, the device a resumed checkpoint
    was made on (``resumed_on``, differentiated as it was); else, with the default adjoint or best, the per-circuit
    auto device with each backend's best gradient (batched.qubit's adjoint VJPs, default.qubit's backprop), told
    the run's ``steps`` (minibatches: its trials stay a small share of them); otherwise what was
    asked for. A bad string from the environment names its variable (``requested_spec``)."""
    from .device import get_device

    _, is_auto = _resolve(spec)
    tuned = diff_method in ("adjoint", "best")
    if is_auto and _resumable(resumed_on):
        method = qnn_diff_method(resumed_on) if tuned else diff_method
        return get_device(resumed_on, wires=wires, diff_method=method), method
    if is_auto and tuned:
        return get_device(spec, wires=wires, diff_method="best", expected_steps=steps), "best"
    return get_device(spec, wires=wires, diff_method=diff_method), diff_method


def check_qnn_size(spec: str | None, wires: int, diff_method: str) -> None:
    """What ``qnn_device`` would refuse at ``wires`` (a bad device string, no backend here that fits), found without
    building anything: a sweep checks each of its sizes so before it trains any."""
    from .device import choose

    _, is_auto = _resolve(spec)
    choose(spec, wires, diff_method="best" if is_auto and diff_method in ("adjoint", "best") else diff_method)


# `qbackends run qnn` on batched.qubit, 2 cores, 3 epochs (2 at 16 wires; docs/benchmarks.md):
# training samples/s with 1 and 2 local workers.
WORKERS_MEASURED = "11,800 vs 4,600 samples/s at 4 wires, 5,800 vs 4,600 at 8, 1,450 vs 1,200 at 12, 69 vs 42 at 16"


def workers_advice(device_name: str, wires: int, local_workers: int) -> str | None:
    """Why more local worker processes will not speed this QNN run up, or None when they may."""
    if local_workers > 1 and device_name == "qbackends.batched.qubit":
        return (
            f"{local_workers} local workers will not train faster than one on batched.qubit at {wires} wires: one process "
            "already runs the whole minibatch in one call (on every core once the batch holds 2^14 amplitudes), so "
            "more processes on this machine only split it and add an all-reduce per step (1 vs 2 workers on 2 cores: "
            f"{WORKERS_MEASURED}). Pass --workers 1 here; more processes pay where they bring more cores (torchrun "
            "across machines) or with a per-sample backend such as lightning.qubit."
        )
    return None
