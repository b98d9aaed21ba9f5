"""A backend whose construction fails the way lightning.gpu does on a machine with an old driver."""

from qbackends import Backend, hookimpl


def create(wires=None, **options):
    raise RuntimeError("Error in PennyLane Lightning: CUDA driver version is insufficient for CUDA runtime version")


@hookimpl
def register_backends(register):
    register(
        Backend(
            "fixture",
            "failing.qubit",
            "failing.qubit",
            "pennylane",
            preference=-1,
            create=create,
            description="fixture: fails at construction",
        )
    )
