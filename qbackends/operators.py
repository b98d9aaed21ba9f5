"""PennyLane's operator names, as a rule registration or a user's rule spells them."""

from __future__ import annotations

# Operator classes that name no one operator: instances of a wrapper take the wrapped operator's name
# ("Adjoint(RX)", "C(RX)", "RX**2"), and the bases have none of their own, so a rule keyed by one is never used.
WRAPPERS = frozenset(
    {"Adjoint", "Controlled", "ControlledOp", "Pow", "Conditional", "SymbolicOp", "ScalarSymbolicOp", "CompositeOp"}
)


def pennylane_operator(name: str) -> str | None:
    """The name PennyLane gives instances of the operator ``name`` spells (an alias: ``X`` is ``PauliX``), or None
    when it spells no operator (``expval``, ``Operation``, ``Adjoint``)."""
    import pennylane as qml  # only rules are checked here, and rules are for devices: the registry stays light

    found = getattr(qml.ops, name, None) if name.isidentifier() else None
    if found is None and name.isidentifier():
        found = getattr(qml, name, None)
    if not (isinstance(found, type) and issubclass(found, qml.operation.Operator)):
        return None
    if found.__module__ == qml.operation.__name__ or found.__name__ in WRAPPERS:
        return None
    return found.__name__
