"""qbackends provider ``qulacs``: ``local:qulacs/qulacs.simulator`` through pennylane-qulacs.

This is the plugin CONTRIBUTING.md builds step by step: copy it to start a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from qbackends import Backend, RuleRegistration, hookimpl


def create_simulator(wires: Any = None, **options: Any) -> Any:
    """``qulacs.simulator`` that prepares a leading ``BasisState`` with X gates.

    pennylane-qulacs 0.44 indexes an array with the BasisState's wire labels, so labels that are
    not 0..n-1 in device order raise IndexError or prepare the wrong state.
    """
    import pennylane as qml

    from ._basis_state import with_basis_state_as_x

    return with_basis_state_as_x(qml.device("qulacs.simulator", wires=wires, **options))


SIMULATOR = Backend(
    provider="qulacs",
    simulator="qulacs.simulator",
    device_name="qulacs.simulator",  # the name PennyLane knows it by (pennylane.plugins entry point)
    distribution="pennylane-qulacs",  # what `pip install` brings it
    hardware="cpu",
    state_copies=3.0,  # peak state vectors held in a value+gradient run
    preference=-1,  # never chosen by `auto`; ask for it by name
    description="Qulacs state vector on the CPU (pennylane-qulacs)",
    create=create_simulator,  # optional: only for devices that need more than qml.device(device_name, ...)
    options=("shots", "gpu"),  # QulacsDevice(wires, shots, gpu, **kwargs) ignores other keywords: refuse them
)


@hookimpl
def register_backends(register: Callable[[Backend], None]) -> None:
    register(SIMULATOR)


@hookimpl
def register_decompositions(register: Callable[[RuleRegistration], None]) -> None:
    import pennylane as qml  # imported only when a device is built, never by `qbackends list`

    @qml.register_resources({qml.CNOT: 2, qml.RZ: 1})
    def ising_zz_as_cnot_rz(phi, wires, **_):
        """IsingZZ(φ) = CNOT · RZ(φ) on the target · CNOT: gates Qulacs runs natively."""
        qml.CNOT(wires=wires)
        qml.RZ(phi, wires=wires[1])
        qml.CNOT(wires=wires)

    register(
        RuleRegistration(
            operator="IsingZZ",
            rule=ising_zz_as_cnot_rz,
            backends=frozenset({SIMULATOR.key}),
            name="IsingZZ -> CNOT RZ CNOT",
            example=lambda theta, wires: qml.IsingZZ(theta, wires=wires[:2]),
        )
    )
