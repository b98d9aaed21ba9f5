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


def test_each_backend_is_predicted_as_its_own_preprocessing_runs_the_circuit():
    """lightning runs a DoubleExcitation as one operation and measures X0 X1 + Z0 in one execution; fused.qubit
    decomposes it (31 operations) and measures the two non-commuting groups one by one: it is predicted so."""
    from pennylane.devices import ExecutionConfig

    from qbackends import get_device

    def circuit(x):
        qml.BasisState([1, 1, 0, 0], wires=range(4))
        qml.DoubleExcitation(x, wires=[0, 1, 2, 3])
        return qml.expval(qml.X(0) @ qml.X(1) + 0.5 * qml.Z(0))

    tape = qml.tape.make_qscript(circuit)(0.3)
    tape.trainable_params = [0]
    shape = auto.shape_of(tape, 4, "adjoint", [0])
    runs = {}
    for name in ("lightning.qubit", "local:qbackends/fused.qubit"):
        device = get_device(name, wires=4)
        config = device.setup_execution_config(ExecutionConfig(gradient_method="adjoint"), tape)
        tapes, _ = device.preprocess_transforms(config)((tape,))
        runs[name] = auto.as_run(shape, tapes)
    assert (runs["lightning.qubit"].groups, runs["lightning.qubit"].native) == (1, 3)  # BasisState, DoubleExcitation, ...
    assert (runs["local:qbackends/fused.qubit"].groups, runs["local:qbackends/fused.qubit"].native) == (2, 31)
    costs = auto.Costs(execution=1e-4, row=0.0, gate=0.0, diagonal=0.0, term=0.0, op=1e-5, gradient=1.0)
    assert auto.predict(costs, runs["lightning.qubit"], "adjoint") == pytest.approx(1e-4 + 3e-5)
    assert auto.predict(costs, runs["local:qbackends/fused.qubit"], "adjoint") == pytest.approx(2 * (1e-4 + 31e-5))


def test_a_broadcast_split_into_rows_is_not_counted_as_groups():
    tapes = [qml.tape.QuantumScript([qml.RX(0.1 * i, 0)], [qml.expval(qml.Z(0))]) for i in range(8)]
    assert auto.as_run(auto.Shape(wires=1, batch=8, gates=1), tapes).groups == 1  # the rows, as lightning splits them
    assert auto.as_run(auto.Shape(wires=1, batch=4, gates=1), tapes).groups == 2  # two groups of four rows each


def test_the_trial_takes_the_lowest_median_not_one_lucky_round():
    """A backend whose times scatter (one fast round among slow ones) loses to a steady one that is faster in the median."""
    rounds = auto.TRIAL_ROUNDS
    times = {
        "pennylane/lightning.kokkos": iter([0.05, 0.01] + [0.05] * (rounds - 2)),
        "pennylane/lightning.qubit": iter([0.03] * rounds),
    }
    model = dict.fromkeys(times, FAST)
    shape = auto.Shape(wires=10, gates=50)
    measure = lambda k: next(times[k])  # noqa: E731
    decision = auto.decide(shape, dict.fromkeys(times, "adjoint"), _backends(*times), model, measure, steps=100_000)
    assert decision.measured == {"pennylane/lightning.kokkos": 0.05, "pennylane/lightning.qubit": 0.03}
    assert decision.backend == "pennylane/lightning.qubit"


def test_the_trial_stays_within_its_share_of_a_short_run():
    """Beyond the two timed rounds, more run only while the trial costs under 5 % of the expected steps."""
    calls = []

    def measure(key):
        calls.append(key)
        return 0.01

    keys = ["pennylane/lightning.qubit", "qbackends/batched.qubit"]
    model = dict.fromkeys(keys, FAST)
    shape = auto.Shape(wires=10, gates=50)
    auto.decide(shape, dict.fromkeys(keys, "adjoint"), _backends(*keys), model, measure, steps=10)
    assert len(calls) == 2 * (1 + auto.TIMED_ROUNDS)  # 10 steps of 10 ms: no round beyond the two
    calls.clear()
    auto.decide(shape, dict.fromkeys(keys, "adjoint"), _backends(*keys), model, measure, steps=100_000)
    assert len(calls) == 2 * auto.TRIAL_ROUNDS  # within 3 s: every round


def test_a_trial_that_cannot_rebuild_the_step_leaves_the_backends_to_their_predictions():
    """An untyped error in a trial is the trial's (not a refusal): nobody is passed over, the best prediction is taken."""

    tried = []

    def measure(key):
        tried.append(key)
        raise ValueError("Cannot differentiate with respect to parameter(s) [0]")

    keys = ["pennylane/lightning.qubit", "qbackends/batched.qubit"]
    model = dict.fromkeys(keys, FAST)
    decision = auto.decide(auto.Shape(wires=6, gates=20), dict.fromkeys(keys, "adjoint"), _backends(*keys), model, measure)
    assert tried == keys  # both were close enough to try
    assert decision.backend == "pennylane/lightning.qubit" and decision.refused == {} and decision.measured == {}


def test_a_trial_over_its_budget_stops_each_round_after_the_quickest():
    """Warm-ups in order of prediction: a fast one, then two the model mispredicted (2 s and 1.5 s against 10 ms).
    Past the 3 s budget the fourth is not warmed up, and the timed round runs the quickest alone."""
    tried = []
    seconds = {
        "qbackends/batched.qubit": 0.01,
        "pennylane/default.qubit": 2.0,
        "pennylane/lightning.kokkos": 1.5,
        "pennylane/lightning.qubit": 0.01,
    }

    def measure(key):
        tried.append(key)
        return seconds[key]

    keys = list(seconds)
    model = dict.fromkeys(keys, FAST)
    runs = {k: auto.Shape(wires=10, gates=50 + i) for i, k in enumerate(keys)}  # predicted in this order
    shape = auto.Shape(wires=10, gates=50)
    decision = auto.decide(shape, dict.fromkeys(keys, "adjoint"), _backends(*keys), model, measure, runs=runs)
    assert tried == keys[:3] + ["qbackends/batched.qubit"]
    assert decision.backend == "qbackends/batched.qubit" and decision.measured == {"qbackends/batched.qubit": 0.01}
