"""Issue: the scale frontier, the peers in the same run. The QAOA MaxCut energy (p=2, gnm(n, 1.5 n, seed=1967))
on fused.qubit and on the state-vector simulators people compare it with, each as its own project ships it, when
installed; each skipped with the reason otherwise:

- QOKit's C simulator (``qokit.fur``, ``simulator="c"``): ``pip install qokit`` brings the Python one; the C
  library is built from its sources with QOKit's own makefile (no ``-O`` flag: its defaults).
- Qiskit Aer's statevector (``qiskit_aer.primitives.EstimatorV2``): RZZ and RX gates, the ZZ sum measured.
- qsim (``qsimcirq``): the same gates in Cirq; single precision, as qsim's CPU simulator runs.
- lightning.qubit, by name (``get_device``).

None of the peers has a gradient of its own, so the energy alone is timed: fused.qubit's is ``qaoa.energy_function``,
the ``run qaoa`` default. Each peer's energy is checked against fused.qubit's: to 1e-10 in double precision, and
within the single-precision bound of ``tests/test_fused.py`` (2.2e-6 per term and unit weight, twice) for qsim.
fused.qubit runs a value + gradient step too, for the ratio a user of a peer would pay for a gradient by
finite differences (two energies per parameter).

Installing them (QOKit without its pins, its C simulator with headers from its repository): docs/benchmarks.md, "The peers".
"""

from __future__ import annotations

import importlib.util

import networkx as nx
import numpy as np
import pennylane as qml
import pytest
from conftest import interleaved_medians, record_note, record_seconds, skip_reason

from qbackends import get_device
from qbackends.workloads import qaoa

FUSED = "local:qbackends/fused.qubit"
LIGHTNING = "local:pennylane/lightning.qubit"
GAMMA, ALPHA = np.array([0.3, 0.5]), np.array([0.2, 0.7])  # p=2
SINGLE_PRECISION_PER_TERM = 2.2e-6


def _graph(nodes: int) -> nx.Graph:
    return nx.gnm_random_graph(nodes, 3 * nodes // 2, seed=1967)


def _ours(device, graph: nx.Graph):
    energy = qaoa.energy_function(device, qaoa.Graph(graph.number_of_nodes(), tuple((u, v, 1.0) for u, v in graph.edges)), 2)
    return lambda: float(energy(qml.numpy.array([GAMMA, ALPHA], requires_grad=False)))


def _ours_with_gradient(device, graph: nx.Graph):
    energy = qaoa.energy_function(device, qaoa.Graph(graph.number_of_nodes(), tuple((u, v, 1.0) for u, v in graph.edges)), 2)
    step = qml.grad(energy)
    params = qml.numpy.array([GAMMA, ALPHA], requires_grad=True)
    return lambda: step(params)


def _qokit(graph: nx.Graph):
    import qokit.fur
    from qokit.qaoa_objective_maxcut import get_qaoa_maxcut_objective

    if "c" not in qokit.fur.get_available_simulator_names("x"):
        raise RuntimeError(
            "QOKit's C simulator is not built: its wheel lacks the headers and makefile (docs/benchmarks.md, 'The peers')"
        )
    objective = get_qaoa_maxcut_objective(graph.number_of_nodes(), 2, G=graph, parameterization="gamma beta", simulator="c")
    return lambda: float(objective(2 * GAMMA, -ALPHA))  # QOKit's angles: its phase is exp(-iγC/2), its mixer exp(+iβX)


def _aer(graph: nx.Graph):
    from qiskit import QuantumCircuit
    from qiskit.quantum_info import SparsePauliOp
    from qiskit_aer.primitives import EstimatorV2

    n = graph.number_of_nodes()
    circuit = QuantumCircuit(n)
    circuit.h(range(n))
    for gamma, alpha in zip(GAMMA, ALPHA, strict=True):
        for u, v in graph.edges:
            circuit.rzz(gamma, u, v)  # exp(-iγ/2 ZZ), as IsingZZ(γ w) for w = 1
        circuit.rx(2 * alpha, range(n))
    zz = SparsePauliOp.from_sparse_list([("ZZ", [u, v], 0.5) for u, v in graph.edges], num_qubits=n)
    estimator = EstimatorV2(options={"backend_options": {"method": "statevector"}})
    offset = -0.5 * graph.number_of_edges()
    return lambda: float(estimator.run([(circuit, zz)]).result()[0].data.evs) + offset


def _qsim(graph: nx.Graph):
    import cirq
    import qsimcirq

    qubits = cirq.LineQubit.range(graph.number_of_nodes())
    ops = [cirq.H(q) for q in qubits]
    for gamma, alpha in zip(GAMMA, ALPHA, strict=True):
        ops += [cirq.ZZPowGate(exponent=gamma / np.pi, global_shift=-0.5)(qubits[u], qubits[v]) for u, v in graph.edges]
        ops += [cirq.rx(2 * alpha)(q) for q in qubits]
    circuit = cirq.Circuit(ops)
    zz = sum(0.5 * cirq.Z(qubits[u]) * cirq.Z(qubits[v]) for u, v in graph.edges)
    simulator = qsimcirq.QSimSimulator()
    offset = -0.5 * graph.number_of_edges()
    return lambda: float(np.real(simulator.simulate_expectation_values(circuit, observables=[zz])[0])) + offset


PEERS = {  # name -> (module that must be importable, step maker, tolerance against fused.qubit per edge)
    "QOKit (C simulator)": ("qokit", _qokit, 0.0),
    "Qiskit Aer statevector": ("qiskit_aer", _aer, 0.0),
    "qsim (qsimcirq, single precision)": ("qsimcirq", _qsim, 2 * SINGLE_PRECISION_PER_TERM),
}


@pytest.mark.parametrize("nodes", [18, 22, pytest.param(24, marks=pytest.mark.slow), pytest.param(26, marks=pytest.mark.slow)])
def test_qaoa_energy_against_the_peers(benchmark, nodes):
    graph = _graph(nodes)
    group = f"qaoa energy beside the peers: {nodes} nodes"
    steps = {
        f"{FUSED}: energy": _ours(get_device(FUSED, wires=nodes), graph),
        f"{FUSED}: value+gradient": _ours_with_gradient(get_device(FUSED, wires=nodes), graph),
    }
    tolerance = {f"{FUSED}: energy": 1e-10}
    if nodes <= 22 and skip_reason(LIGHTNING.removeprefix("local:")) is None:
        steps[f"{LIGHTNING}: energy"] = _ours(get_device(LIGHTNING, wires=nodes), graph)
        tolerance[f"{LIGHTNING}: energy"] = 1e-10
    for name, (module, make, per_edge) in PEERS.items():
        if importlib.util.find_spec(module) is None:
            record_note(group, name, f"skipped: {module} is not installed")
            continue
        try:
            steps[name] = make(graph)
        except (ImportError, RuntimeError) as exc:
            record_note(group, name, f"skipped: {exc}")
            continue
        tolerance[name] = max(per_edge * graph.number_of_edges(), 1e-10)
    reference = steps[f"{FUSED}: energy"]()
    energies = {name: steps[name]() for name in tolerance}
    for name, energy in energies.items():
        assert abs(energy - reference) <= tolerance[name], (name, energy, reference)
    benchmark.group = group
    medians = interleaved_medians(benchmark, steps, rounds=3 if nodes <= 22 else 2)
    benchmark.extra_info.update(medians=medians, energies=energies)
    fused = medians[f"{FUSED}: energy"]
    for name, seconds in medians.items():
        record_seconds(group, name, seconds, f"x{seconds / fused:.2f} of fused.qubit's energy")
