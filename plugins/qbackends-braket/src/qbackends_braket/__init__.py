"""qbackends provider ``braket``: ``local:braket/braket.local.qubit``, the device string a Braket user writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from qbackends import Backend, RuleRegistration, hookimpl


def create_local_qubit(wires: Any = None, **options: Any) -> Any:
    """``braket.local.qubit`` whose probabilities come back in the wire order asked for.

    amazon-braket-pennylane-plugin 1.36 returns ``qml.probs(wires=W)`` permuted when W is not in the
    device's wire order and has three or more wires (the inverse permutation is applied); two wires
    happen to be right. Probabilities are therefore measured in device order and reordered here.
    """
    import pennylane as qml

    from ._probs_order import with_ordered_probs

    device = qml.device("braket.local.qubit", wires=wires, **options)
    return with_ordered_probs(device)


LOCAL_QUBIT = Backend(
    provider="braket",
    simulator="braket.local.qubit",
    device_name="braket.local.qubit",
    distribution="amazon-braket-pennylane-plugin",
    hardware="cpu",
    state_copies=4.0,
    preference=-1,  # a reference for Braket users; never chosen by auto (slower than Lightning)
    description="Amazon Braket's local state-vector simulator (amazon-braket-default-simulator)",
    create=create_local_qubit,
    options=("backend", "shots"),  # BraketLocalQubitDevice(wires, backend, *, shots, **run_kwargs)
)


@hookimpl
def register_backends(register: Callable[[Backend], None]) -> None:
    register(LOCAL_QUBIT)


# amazon-braket-pennylane-plugin 1.36 declares these but raises NotImplementedError when it meets them.
DECLARED_BUT_MISSING = ("PSWAP", "CPhaseShift00", "CPhaseShift01", "CPhaseShift10")


@hookimpl
def register_decompositions(register: Callable[[RuleRegistration], None]) -> None:
    import pennylane as qml

    for name in DECLARED_BUT_MISSING:
        operator = getattr(qml, name)
        register(
            RuleRegistration(
                operator=name,
                rule=_own_decomposition(operator),
                backends=frozenset({LOCAL_QUBIT.key}),
                name=f"{name} -> its PennyLane decomposition (declared by the plugin, not run by it)",
                example=lambda theta, wires, operator=operator: operator(theta, wires=wires[:2]),
            )
        )


def _own_decomposition(operator: Any) -> Any:
    """PennyLane's first rule for ``operator``, under a name of its own (rule names must be unique)."""
    import pennylane as qml

    base = qml.list_decomps(operator)[0]

    @qml.register_resources(lambda **params: base.compute_resources(**params).gate_counts)
    def rule(*params: Any, wires: Any, **hyperparameters: Any) -> None:
        base(*params, wires=wires, **hyperparameters)

    rule.__name__ = f"braket_{operator.__name__.lower()}"
    return rule
