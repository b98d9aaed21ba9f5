"""Which measurements PennyLane's parameter-shift rule differentiates: not those of the state itself.

A shift rule holds for a quantity linear in the state's projector |ψ⟩⟨ψ| (expectations, variances through them,
probabilities). PennyLane 0.45's ``param_shift`` refuses the state, a density matrix, a von Neumann entropy and
a mutual information with a plain ``ValueError``, and gives a wrong number for the purity (tr ρ² is quadratic in
ρ). So where a circuit with trainable parameters measures one of these, the simulators keep its gradient (and
refuse it, typed, when it is asked for) rather than let "best" fall back to parameter-shift, and refuse an
explicit parameter-shift; ``auto`` takes only a backend that differentiates it by backpropagation.
"""

from __future__ import annotations

from typing import Any

NO_SHIFT_RULE = frozenset({"StateMP", "DensityMatrixMP", "PurityMP", "VnEntropyMP", "MutualInfoMP"})


def shifted(gradient_method: Any) -> bool:
    """Whether ``gradient_method`` (a config's, as PennyLane resolved it) is the parameter-shift rule."""
    import pennylane as qml

    return gradient_method == "parameter-shift" or gradient_method is qml.gradients.param_shift


def unruled(circuit: Any) -> list[Any]:
    """The measurements of ``circuit`` without a shift rule, where it has trainable parameters (else none)."""
    if circuit is None or not circuit.trainable_params:
        return []
    return [m for m in circuit.measurements if type(m).__name__ in NO_SHIFT_RULE]


def refusal(device: str, m: Any, how: str) -> Exception:
    """The typed refusal of a gradient of ``m`` on ``device``, which would take it by ``how``."""
    from .errors import UnsupportedCircuitError

    return UnsupportedCircuitError(
        f"{device} has no gradient of {m} ({type(m).__name__}): {how}, and parameter-shift has no rule for a "
        "measurement of the state itself (PennyLane 0.45's returns a wrong purity gradient).",
        "for values alone use diff_method=None; for the gradient, diff_method='backprop' on "
        "local:pennylane/default.qubit (auto takes it).",
    )
