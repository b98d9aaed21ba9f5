"""The kinds of circuit ``qbackends calibrate`` times (a workload's step each), and when ``auto`` takes a backend.

Nothing here imports PennyLane: ``qbackends list``, ``probe`` and ``calibrate --help`` read it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from . import capabilities
from .backend import Backend
from .context import Context, get_context
from .screening import machine


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


def auto_role(backend: Backend) -> str:
    """When ``auto`` takes ``backend``, in one line."""
    if not backend.auto_eligible:
        return "never: only when asked for by name" + (" (it samples only)" if backend.needs_shots else "")
    start = f" from {backend.min_auto_wires} wires" if backend.min_auto_wires else ""
    return f"per circuit{start}: when the cost model, or a trial on the circuit, finds it the fastest here"


def calibration_step(kind: str) -> Any:
    """``step(device_string, wires) -> run()`` of the workload of ``kind``."""
    return importlib.import_module(KINDS[kind].module).calibration_step


def calibration_candidates(context: Context | None = None) -> list[Backend]:
    """The runnable backends ``auto`` may take: what ``qbackends calibrate`` times by default."""
    context = context or get_context()
    facts = machine(context)
    failures = context.build_failures
    return [
        b
        for b in context.registry.backends.values()
        if b.auto_eligible and capabilities.evaluate(b, facts, construction_error=failures.get(b.device_name)).ok
    ]
