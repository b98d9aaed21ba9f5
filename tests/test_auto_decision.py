"""auto's decision on its own: what it reads of a circuit, what it predicts, what it tries and what it takes."""

from __future__ import annotations

import networkx as nx
import pennylane as qml
import pytest

from qbackends import auto, get_registry
from qbackends.errors import UnsupportedCircuitError

FAST = auto.Costs(execution=1e-4, row=0.0, gate=1e-9, diagonal=1e-9, term=1e-9, splits_batch=False)
SLOW = auto.Costs(execution=1e-4, row=1e-4, gate=1e-8, diagonal=1e-8, term=1e-8)


def _backends(*keys):
    return [get_registry().backends[k] for k in keys]


def test_the_shape_of_a_qaoa_circuit_counts_its_diagonal_runs():
    graph = nx.gnm_random_graph(6, 8, seed=1)
    cost, mixer = qml.qaoa.maxcut(graph)

    def circuit(p):
        for w in range(6):
            qml.Hadamard(w)
        for layer in range(2):
            qml.qaoa.cost_layer(p[0][layer], cost)
            qml.qaoa.mixer_layer(p[1][layer], mixer)
        return qml.expval(cost)

    tape = qml.tape.make_qscript(circuit)([[0.1, 0.2], [0.3, 0.4]])
    shape = auto.shape_of(tape, 6, "adjoint", [0, 1, 2, 3])
    assert (shape.gates, shape.diagonal, shape.runs) == (6 + 2 * (8 + 6), 16, 2)
    assert shape.terms == 16 and shape.parameters == 4 and shape.batch == 1  # maxcut: 0.5 ZZ - 0.5 I per edge


def test_a_broadcast_batch_costs_rows_where_the_backend_splits_it():
    shape = auto.Shape(wires=4, batch=64, gates=10)
    assert auto.predict(SLOW, shape, None) > 60 * SLOW.row
    assert auto.predict(FAST, shape, None) < 2 * FAST.execution + 64 * 16 * 10 * FAST.gate + 1e-6


def test_only_close_contenders_are_tried_and_the_fastest_measured_is_taken():
    tried = []

    def measure(key):
        tried.append(key)
        return {"pennylane/lightning.qubit": 0.002, "qbackends/batched.qubit": 0.001}[key]

    model = {"pennylane/lightning.qubit": FAST, "qbackends/batched.qubit": FAST, "pennylane/default.qubit": SLOW}
    keys = list(model)
    shape = auto.Shape(wires=10, gates=50)
    decision = auto.decide(shape, dict.fromkeys(keys, "adjoint"), _backends(*keys), model, measure)
    assert decision.backend == "qbackends/batched.qubit"
    assert set(tried) == {"pennylane/lightning.qubit", "qbackends/batched.qubit"}  # default.qubit: predicted 10x slower
    assert decision.measured == {"pennylane/lightning.qubit": 0.002, "qbackends/batched.qubit": 0.001}
    assert "runners-up: pennylane/lightning.qubit 2 ms measured" in decision.explain()


def test_a_backend_that_refuses_in_its_trial_is_passed_over():
    def measure(key):
        if key == "qbackends/batched.qubit":
            raise UnsupportedCircuitError("qbackends.batched.qubit is analytic.")
        return 0.01

    keys = ["qbackends/batched.qubit", "pennylane/lightning.qubit"]
    model = dict.fromkeys(keys, FAST)
    decision = auto.decide(auto.Shape(wires=3, gates=4), dict.fromkeys(keys, "adjoint"), _backends(*keys), model, measure)
    assert decision.backend == "pennylane/lightning.qubit"
    assert decision.refused == {"qbackends/batched.qubit": "UnsupportedCircuitError: qbackends.batched.qubit is analytic."}


def test_without_trials_the_best_prediction_that_accepts_the_circuit_is_taken():
    def accepts(key):
        if key == "qbackends/batched.qubit":
            raise UnsupportedCircuitError("no shots here.")

    model = {"qbackends/batched.qubit": FAST, "pennylane/lightning.qubit": SLOW}
    keys = list(model)
    decision = auto.decide(
        auto.Shape(wires=3, gates=4, shots=100), dict.fromkeys(keys), _backends(*keys), model, None, accepts=accepts
    )
    assert decision.backend == "pennylane/lightning.qubit" and decision.measured == {}


def test_when_every_backend_refuses_the_error_names_each():
    def accepts(key):
        raise UnsupportedCircuitError(f"{key} says no.")

    keys = ["pennylane/lightning.qubit"]
    with pytest.raises(UnsupportedCircuitError, match="No backend auto may take runs this circuit: pennylane/lightning.qubit: "):
        auto.decide(auto.Shape(wires=1), {keys[0]: None}, _backends(*keys), {keys[0]: FAST}, None, accepts=accepts)


def test_a_one_time_cost_is_spread_over_the_steps_and_never_tried(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # fused.qubit's kernels not compiled here
    fused, lightning = "qbackends/fused.qubit", "pennylane/lightning.qubit"
    model = {fused: FAST, lightning: SLOW}
    shape = auto.Shape(wires=20, gates=100, diagonal=60, runs=2)
    tried = []
    short = auto.decide(shape, dict.fromkeys(model, "adjoint"), _backends(*model), model, tried.append, steps=2)
    assert short.backend == lightning and fused not in tried
    long = auto.decide(shape, dict.fromkeys(model, "adjoint"), _backends(*model), model, tried.append, steps=100_000)
    assert long.backend == fused and fused not in tried
