"""A sampling-only backend (default.qubit, declared ``needs_shots``), one whose factory takes
``**options`` without declaring them (the kit's unknown-option check must fail it), and
default.mixed, a device that implements PennyLane's ``preprocess`` hook rather than ``preprocess_transforms``."""

from qbackends import Backend, hookimpl


def _lenient(wires, **options):
    import pennylane as qml

    return qml.device("default.qubit", wires=wires)


@hookimpl
def register_backends(register):
    register(
        Backend(
            "fixture",
            "sampler.qubit",
            "default.qubit",
            "pennylane",
            preference=50,
            needs_shots=True,
            description="fixture: samples",
        )
    )
    register(Backend("fixture", "lenient.qubit", "lenient", "pennylane", preference=-1, create=_lenient))
    register(
        Backend("fixture", "mixed.qubit", "default.mixed", "pennylane", preference=-1, description="fixture: density matrices")
    )
