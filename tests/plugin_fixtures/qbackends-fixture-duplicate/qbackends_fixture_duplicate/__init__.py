"""Registers its own backend, then tries to take local:pennylane/lightning.qubit."""

from qbackends import Backend, hookimpl


@hookimpl
def register_backends(register):
    register(
        Backend(
            "fixture",
            "dup.qubit",
            "default.qubit",
            "pennylane",
            preference=-1,
            description="fixture: default.qubit under another name",
        )
    )
    register(Backend("pennylane", "lightning.qubit", "default.qubit", "pennylane", description="fixture: a clash"))


@hookimpl
def register_decompositions(register):
    """Three registrations the host must refuse, each on its own."""
    import pennylane as qml

    from qbackends import RuleRegistration

    @qml.register_resources({qml.RZ: 1})
    def rz_as_rz(theta, wires, **_):
        qml.RZ(theta, wires=wires)

    register("not a rule")
    register(RuleRegistration("NotAnOperator", rz_as_rz, name="fixture: unknown operator", example=lambda t, w: qml.RZ(t, w[0])))
    register(RuleRegistration("RZ", rz_as_rz, name="fixture: example raises", example=lambda t, w: 1 / 0))
