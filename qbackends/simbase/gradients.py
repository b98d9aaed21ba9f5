"""What the simulators' adjoint passes differentiate: gate parameters, and nothing else."""

from __future__ import annotations

from typing import Any

import pennylane as qml

from ..errors import UnsupportedCircuitError
from .values import NUMBERS


def trainable_observables(tape: Any) -> bool:
    """Whether an observable of ``tape`` has trainable data (a coefficient the gradient would reach)."""
    return any(
        m.obs is not None and any(not isinstance(d, NUMBERS) and qml.math.requires_grad(d) for d in m.obs.data)
        for m in tape.measurements
    )


def refuse_trainable_coefficients(tape: Any, device: str, gate_parameters: int) -> None:
    """Refuse trainable observable coefficients (parameters after the first ``gate_parameters``),
    rather than return zeros for them."""
    if any(i >= gate_parameters for i in tape.trainable_params):
        raise UnsupportedCircuitError(
            f"{device} differentiates gate parameters only; this circuit has trainable observable coefficients.",
            "make the coefficients constants (requires_grad=False), or use diff_method='parameter-shift'.",
        )
