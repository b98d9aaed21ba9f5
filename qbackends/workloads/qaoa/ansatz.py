"""QAOA's circuit: the cost Hamiltonian, the ansatz in its two formulations, and the energy as a QNode.

The circuit is the Braket example's (``qml.qaoa`` cost and mixer layers) in its fastest exact form for the
device: on a device that runs a whole layer as one operation (``ApproxTimeEvolution`` declared native, as
fused.qubit does), each layer is one, with one parameter, which the device's adjoint differentiates in one sweep;
elsewhere each cost term exp(-iγ w/2 Z_uZ_v) is ``IsingZZ(γ w)`` and each mixer term exp(-iα X) is ``RX(2α)``,
one pass over the state each (a layer would be lowered to those on every execution). Energies equal the
``qml.qaoa`` circuit's (tests check 1e-9).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...capabilities import declared_by_device
from .graph import Graph, random_graph


def cost_hamiltonian(graph: Graph) -> Any:
    """H_C = Σ w/2 (Z_u Z_v - 1): its minimum is minus the maximum cut (``qml.qaoa.maxcut``'s, weighted)."""
    import pennylane as qml

    with qml.QueuingManager.stop_recording():  # safe to call inside a QNode
        coeffs, ops = [], []
        for u, v, w in graph.edges:
            coeffs += [0.5 * w, -0.5 * w]
            ops += [qml.PauliZ(u) @ qml.PauliZ(v), qml.Identity(u)]
        return qml.Hamiltonian(coeffs, ops).simplify()


def zz_hamiltonian(graph: Graph) -> Any:
    """Σ w/2 Z_u Z_v: H_C without its constant, which the fast formulation adds classically."""
    import pennylane as qml

    with qml.QueuingManager.stop_recording():
        return qml.Hamiltonian([0.5 * w for *_, w in graph.edges], [qml.PauliZ(u) @ qml.PauliZ(v) for u, v, _ in graph.edges])


def calibration_step(device_string: str, wires: int) -> Callable[[], Any]:
    """One p=2 value + adjoint gradient on gnm(n, 1.5n, seed=1967): what ``qbackends calibrate`` times for QAOA."""
    import pennylane as qml
    from autograd import value_and_grad

    from ...device import get_device
    from ...gradients import check

    graph = random_graph(wires, int(1.5 * wires), 1967)
    params = qml.numpy.array(np.full((2, 2), 0.3), requires_grad=True)
    device = get_device(device_string, wires=wires)
    check(device, energy_tape(graph, 2, params), "adjoint", "autograd", lambda *_: "time it with --workload circuits")
    run = value_and_grad(energy_function(device, graph, 2))
    return lambda: run(params)


LAYER = "ApproxTimeEvolution"  # what qml.qaoa.cost_layer and mixer_layer are


def runs_layers(device: Any) -> bool:
    """Whether ``device`` runs a QAOA layer (``LAYER``) as one operation: its declared native operations say, or for
    the auto device, those of a backend it may take."""
    may_run = getattr(device, "may_run_natively", None)  # the auto device's: it may then take that backend
    return bool(may_run(LAYER)) if callable(may_run) else LAYER in declared_by_device(device).native


def _measured(graph: Graph, layers: int, formulation: str, layered: bool = False) -> tuple[Callable[[Any], Any], float]:
    """The energy's quantum function of params[2, layers] (it returns the expectation it measures) and the
    constant added to that expectation."""
    import pennylane as qml

    ansatz = circuit(graph, layers, formulation, layered)
    if formulation == "fast":
        observable, offset = zz_hamiltonian(graph), -0.5 * sum(w for *_, w in graph.edges)
    else:
        observable, offset = cost_hamiltonian(graph), 0.0

    def expectation(params: Any) -> Any:
        ansatz(params)
        return qml.expval(observable)

    return expectation, offset


def energy_tape(graph: Graph, layers: int, params: Any, formulation: str = "fast", layered: bool = False) -> Any:
    """The energy's circuit at ``params`` as a tape: what a device is asked about before a QNode is made on it
    (``layered``: as ``energy_function`` makes it for a device that ``runs_layers``)."""
    import pennylane as qml

    return qml.tape.make_qscript(_measured(graph, layers, formulation, layered)[0])(params)


def energy_function(device: Any, graph: Graph, layers: int, formulation: str = "fast", diff_method: str = "adjoint") -> Any:
    """⟨H_C⟩ as a differentiable function of params[2, layers] on ``device``.

    The fast formulation measures only the ZZ terms and adds H_C's constant -Σw/2 classically: one
    pass less over the state in the expectation and in the adjoint; its layers are whole where the device
    ``runs_layers``. ``energy.qnode`` is the QNode, ``energy.ansatz`` the circuit.
    """
    import pennylane as qml

    layered = formulation == "fast" and runs_layers(device)
    measured, offset = _measured(graph, layers, formulation, layered)
    expectation = qml.qnode(device, diff_method=diff_method)(measured)

    def energy(params: Any) -> Any:
        return expectation(params) + offset

    energy.qnode = expectation  # type: ignore[attr-defined]
    energy.ansatz = circuit(graph, layers, formulation, layered)  # type: ignore[attr-defined]
    return energy


def circuit(graph: Graph, layers: int, formulation: str = "fast", layered: bool = False) -> Callable[[Any], None]:
    """The QAOA ansatz as a quantum function of params[2, layers] (γ row, α row); ``layered``: the fast formulation's
    layers whole, one parameter each (for a device that ``runs_layers``)."""
    import pennylane as qml

    if formulation == "fast" and layered:
        cost_h, mixer_h = zz_hamiltonian(graph), qml.qaoa.x_mixer(range(graph.nodes))

        def fast_layers(params: Any) -> None:
            for wire in range(graph.nodes):
                qml.Hadamard(wire)
            for layer in range(layers):
                qml.ApproxTimeEvolution(cost_h, params[0][layer], 1)  # Π IsingZZ(γ w): its terms commute
                qml.ApproxTimeEvolution(mixer_h, params[1][layer], 1)  # Π RX(2α)

        return fast_layers

    if formulation == "qml.qaoa":
        cost_h = cost_hamiltonian(graph)
        mixer_h = qml.qaoa.x_mixer(range(graph.nodes))

        def braket_example(params: Any) -> None:
            for wire in range(graph.nodes):
                qml.Hadamard(wire)
            for layer in range(layers):
                qml.qaoa.cost_layer(params[0][layer], cost_h)
                qml.qaoa.mixer_layer(params[1][layer], mixer_h)

        return braket_example

    def fast(params: Any) -> None:
        for wire in range(graph.nodes):
            qml.Hadamard(wire)
        for layer in range(layers):
            gamma, alpha = params[0][layer], params[1][layer]
            for u, v, w in graph.edges:
                qml.IsingZZ(gamma * w, wires=[u, v])
            for wire in range(graph.nodes):
                qml.RX(2 * alpha, wires=wire)

    return fast
