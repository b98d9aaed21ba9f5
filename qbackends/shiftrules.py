"""What PennyLane's parameter-shift rule cannot differentiate: a measurement of the state itself, a variance of a
mid-circuit measurement's value, a broadcast batch.

A shift rule holds for a quantity linear in the state's projector |ψ⟩⟨ψ| (expectations, variances through them,
probabilities). PennyLane 0.45's ``param_shift`` refuses the state, a density matrix, a von Neumann entropy and a
mutual information with a plain ``ValueError``, gives a wrong number for the purity (tr ρ² is quadratic in ρ),
refuses a broadcast tape with a ``NotImplementedError``, and fails on a variance of a mid-circuit measurement's value
with an ``AttributeError``. "best" falls back to it wherever a device has no gradient of its own for a circuit; so
for these circuits the simulators keep the gradient (and refuse it, typed, when it is asked for), refuse an explicit
parameter-shift of them, and ``auto`` takes only a backend whose own gradient covers them. (With shots every
gradient is parameter-shift: PennyLane's own refusals stand.)
"""

from __future__ import annotations

from typing import Any

from .errors import UnsupportedCircuitError

NO_SHIFT_RULE = frozenset({"StateMP", "DensityMatrixMP", "PurityMP", "VnEntropyMP", "MutualInfoMP"})


HADAMARD_TESTS = ("hadamard", "reversed-hadamard", "direct-hadamard", "reversed-direct-hadamard")


def shifted(gradient_method: Any) -> bool:
    """Whether ``gradient_method`` (a config's, as PennyLane resolved it) is a rule linear in the state's projector:
    parameter-shift, or a Hadamard test (PennyLane 0.45's direct one returns 0 for a purity's gradient)."""
    import pennylane as qml  # a circuit is being run: PennyLane is loaded; importing this module stays light

    if isinstance(gradient_method, str):
        return gradient_method == "parameter-shift" or gradient_method in HADAMARD_TESTS
    return gradient_method is qml.gradients.param_shift or gradient_method is qml.gradients.hadamard_grad


def method_name(gradient_method: Any) -> str:
    """``gradient_method`` as a message names it: its string, or a transform's name."""
    return gradient_method if isinstance(gradient_method, str) else str(getattr(gradient_method, "__name__", "a transform"))


def numerical(gradient_method: Any) -> bool:
    """Whether ``gradient_method`` differentiates numerically (finite differences, SPSA): it runs the circuit at
    nearby parameters and differentiates whatever comes back, the state too, so no shift rule is needed."""
    import pennylane as qml  # a circuit is being run: PennyLane is loaded; importing this module stays light

    return gradient_method in ("finite-diff", "spsa") or gradient_method in (qml.gradients.finite_diff, qml.gradients.spsa_grad)


def of_the_state(circuit: Any) -> str | None:
    """Why parameter-shift cannot differentiate ``circuit``'s measurements (of the state itself), where it has
    trainable parameters; None otherwise."""
    if circuit is None or not circuit.trainable_params:
        return None
    state = [m for m in circuit.measurements if type(m).__name__ in NO_SHIFT_RULE]
    if not state:
        return None
    return (
        f"{state[0]} ({type(state[0]).__name__}) is a measurement of the state itself "
        "(PennyLane 0.45's param_shift returns a wrong purity gradient)"
    )


def of_a_measured_value(circuit: Any) -> str | None:
    """Why no shift rule differentiates ``circuit``'s variance of a mid-circuit measurement's value, where it has
    trainable parameters; None otherwise."""
    if circuit is None or not circuit.trainable_params:
        return None
    variances = [m for m in circuit.measurements if type(m).__name__ == "VarianceMP" and m.obs is None and m.mv is not None]
    if not variances:
        return None
    return (
        f"{variances[0]} is a variance of a mid-circuit measurement's value (PennyLane 0.45's param_shift fails on "
        "it with an AttributeError, and its Hadamard tests take no variance)"
    )


def unshiftable(circuit: Any) -> str | None:
    """Why a shift rule (``shifted``) cannot differentiate ``circuit``'s measurements: ``of_the_state`` or
    ``of_a_measured_value``; None where it can."""
    return of_the_state(circuit) or of_a_measured_value(circuit)


def misdifferentiated(circuit: Any) -> str | None:
    """Why PennyLane's param_shift would differentiate ``circuit`` wrongly or fail on it untyped: a purity (a wrong
    gradient, silently) or a variance of a mid-circuit measurement's value (an AttributeError); None otherwise. Its
    other refusals (the state, a density matrix, entropies) are PennyLane's own ``ValueError`` when a gradient is
    taken, after values were computed: a device without a gradient of its own refuses only these, up front."""
    if circuit is not None and circuit.trainable_params and any(type(m).__name__ == "PurityMP" for m in circuit.measurements):
        return "a purity is quadratic in the state (PennyLane 0.45's param_shift returns a wrong gradient for it)"
    return of_a_measured_value(circuit)


def no_shift_rule(circuit: Any) -> str | None:
    """Why parameter-shift cannot differentiate analytic ``circuit`` (``unshiftable``, or a broadcast batch); None
    where it can, or where nothing is trainable."""
    if reason := unshiftable(circuit):
        return reason
    if circuit is not None and circuit.trainable_params and circuit.batch_size is not None:
        return "PennyLane 0.45's param_shift does not differentiate a broadcast batch by its broadcast parameters"
    return None


def standard_hadamard(config: Any) -> bool:
    """Whether ``config`` asks for PennyLane's standard Hadamard test (``diff_method="hadamard"``), by name or as
    the transform PennyLane resolved it to (its mode among the gradient's keyword arguments)."""
    import pennylane as qml  # a circuit is being run: PennyLane is loaded; importing this module stays light

    method = None if config is None else config.gradient_method
    if isinstance(method, str):
        return method == "hadamard"
    return (
        method is qml.gradients.hadamard_grad and (config.gradient_keyword_arguments or {}).get("mode", "standard") == "standard"
    )


def misread_by_hadamard(circuit: Any) -> str | None:
    """Why PennyLane 0.45's standard Hadamard test would differentiate ``circuit`` wrongly: a statistic of a
    mid-circuit measurement's value (``expval(m)``: -0.23 where backprop and parameter-shift give 0.15); None
    otherwise, or where nothing is trainable."""
    if circuit is None or not circuit.trainable_params:
        return None
    measured = [m for m in circuit.measurements if getattr(m, "mv", None) is not None]
    if not measured:
        return None
    return (
        f"{measured[0]} is a statistic of a mid-circuit measurement's value (PennyLane 0.45's standard Hadamard test "
        "returns a wrong gradient for it)"
    )


def hadamard_refusal(device: str, reason: str) -> Exception:
    """The typed refusal of the standard Hadamard test on ``device`` where it would be wrong (``misread_by_hadamard``)."""
    return UnsupportedCircuitError(
        f"{device} does not take diff_method='hadamard' for this circuit: {reason}.",
        "use diff_method='parameter-shift' or 'direct-hadamard' (exact for it), or 'best'.",
    )


def refusal(device: str, reason: str, how: str) -> Exception:
    """The typed refusal of a gradient on ``device``, whose own gradient is ``how``, where parameter-shift cannot."""
    return UnsupportedCircuitError(
        f"{device} has no gradient of this circuit: {how}, and parameter-shift cannot take it: {reason}.",
        "for values alone use diff_method=None; for the gradient, diff_method='backprop' on "
        "local:pennylane/default.qubit (auto takes a backend that differentiates it).",
    )
