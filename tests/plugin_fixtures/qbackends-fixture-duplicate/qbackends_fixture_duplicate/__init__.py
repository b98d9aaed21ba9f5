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
