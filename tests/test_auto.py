"""The per-circuit auto device: it takes a backend per circuit, and every result is exactly that backend's."""

from __future__ import annotations

import logging

import networkx as nx
import numpy as np
import pennylane as qml
import pytest
import torch
from pennylane import numpy as pnp

from qbackends import QBackendsError, get_device, get_registry
from qbackends.autodevice import AutoQubit
from qbackends.errors import BackendUnavailableError, UnsupportedCircuitError


def _qaoa(device, wires=6):
    graph = nx.gnm_random_graph(wires, 8, seed=3)
    cost, mixer = qml.qaoa.maxcut(graph)
    cost = qml.Hamiltonian(np.array(cost.coeffs, dtype=float), cost.ops)  # constants, as a user's would be

    @qml.qnode(device, diff_method="adjoint")
    def circuit(p):
        for w in range(wires):
            qml.Hadamard(w)
        for layer in range(2):
            qml.qaoa.cost_layer(p[0][layer], cost)
            qml.qaoa.mixer_layer(p[1][layer], mixer)
        return qml.expval(cost)

    params = pnp.array([[0.3, 0.2], [0.1, 0.4]], requires_grad=True)
    return lambda: (circuit(params), qml.grad(circuit)(params))


def _template(device, wires=5):
    weights = pnp.array(np.random.default_rng(1).uniform(size=(2, wires, 3)), requires_grad=True)
    words = [qml.Z(0) @ qml.Z(1), qml.X(2), qml.Y(3) @ qml.Z(4), qml.Z(1)]
    hamiltonian = qml.Hamiltonian([0.5, -0.3, 0.8, 0.1], words)

    @qml.qnode(device, diff_method="adjoint")
    def circuit(w):
        qml.StronglyEntanglingLayers(w, wires=range(wires))
        return qml.expval(hamiltonian)

    return lambda: (circuit(weights), qml.grad(circuit)(weights))


def _broadcast(device, wires=3, batch=8):
    inputs = np.random.default_rng(2).uniform(size=(batch, wires))
    weights = pnp.array(np.random.default_rng(3).uniform(size=(2, wires)), requires_grad=True)

    @qml.qnode(device, diff_method="best")
    def circuit(w):
        qml.AngleEmbedding(inputs, wires=range(wires))
        qml.BasicEntanglerLayers(w, wires=range(wires))
        return qml.expval(qml.Z(0))

    return lambda: (circuit(weights), qml.jacobian(lambda w: pnp.sum(circuit(w)))(weights))


def _probs(device, wires=4):
    @qml.qnode(device)
    def circuit(x):
        for w in range(wires):
            qml.RY(x * (w + 1), w)
        qml.CNOT([0, 1])
        return qml.probs(wires=range(wires))

    return lambda: (circuit(0.37),)


CIRCUITS = {"qaoa": (_qaoa, 6), "template": (_template, 5), "broadcast": (_broadcast, 3), "probs": (_probs, 4)}


@pytest.mark.parametrize("name", sorted(CIRCUITS))
def test_every_result_is_the_chosen_backends(name):
    make, wires = CIRCUITS[name]
    device = get_device("auto", wires=wires)
    assert isinstance(device, AutoQubit)
    through_auto = make(device)()
    chosen = device.last_choice
    assert chosen is not None and chosen.startswith("local:")
    by_name = make(get_device(chosen, wires=wires))()
    for a, b, tol in zip(through_auto, by_name, (1e-10, 1e-8), strict=False):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=tol, rtol=0)
    reference = make(qml.device("default.qubit", wires=wires))()
    for a, b in zip(through_auto, reference, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-8, rtol=0)


def test_the_decision_is_made_once_per_structure_and_logged_once(caplog):
    device = get_device("auto", wires=5)
    step = _template(device, 5)
    with caplog.at_level(logging.INFO, logger="qbackends"):
        step()
        step()
        _template(get_device("auto", wires=5), 5)()  # a device built alike reuses the decisions
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("qbackends: auto: ")]
    assert len(lines) == 1  # the value and the value with its gradient are one structure; the second device asks the registry
    assert "for 5 wires" in lines[0] and "runners-up: " in lines[0]
    assert len({id(d) for d in device.decisions}) == 1


def test_a_circuit_a_backend_refuses_goes_elsewhere():
    device = get_device("auto", wires=2)
    matrix = np.array([[1.0, 0.5], [0.5, -1.0]])

    def body(x):
        qml.RX(x, 0)
        return qml.expval(qml.Hermitian(matrix, wires=0))

    # batched.qubit's adjoint pass takes no Hermitian (with "best" PennyLane shifts the parameters there: it runs it)
    x = qml.numpy.array(0.4, requires_grad=True)
    value = qml.QNode(body, device, diff_method="adjoint")(x)
    assert abs(value - qml.QNode(body, qml.device("default.qubit"))(0.4)) < 1e-12
    decision = device.decisions[-1]
    assert decision.backend != "qbackends/batched.qubit"
    assert decision.refused["qbackends/batched.qubit"].startswith("UnsupportedCircuitError: qbackends.batched.qubit")


def test_finite_shots_are_tried_apart_and_the_samples_are_the_chosen_backends():
    def samples(spec):
        np.random.seed(11)
        device = get_device(spec, wires=3)

        @qml.set_shots(200)
        @qml.qnode(device)
        def circuit(x):
            qml.RY(x, 0)
            qml.Hadamard(1)
            return qml.sample(wires=[0, 1])

        return device, np.asarray(circuit(0.3))

    device, through_auto = samples("auto")
    decision = device.decisions[-1]
    assert decision.backend != "qbackends/batched.qubit"  # analytic only
    assert "qbackends/batched.qubit" in decision.refused or "qbackends/batched.qubit" not in decision.measured
    _, by_name = samples(device.last_choice)
    assert np.array_equal(through_auto, by_name)  # the trials drew from instances of their own


def test_excluded_backends_are_not_weighed(monkeypatch):
    monkeypatch.setenv("QBACKENDS_AUTO_EXCLUDE", "local:qbackends/batched.qubit,default.qubit")
    device = get_device("auto", wires=3, exclude=["local:qbackends/fused.qubit"])
    keys = {b.key for b in device._candidates}
    assert keys.isdisjoint({"qbackends/batched.qubit", "pennylane/default.qubit", "qbackends/fused.qubit"})
    assert "pennylane/lightning.qubit" in keys


def test_excluding_every_backend_is_a_typed_error(monkeypatch):
    everything = ",".join(b.device_string for b in get_registry().backends.values())
    monkeypatch.setenv("QBACKENDS_AUTO_EXCLUDE", everything)
    with pytest.raises(BackendUnavailableError, match="auto has no backend to weigh: every one is excluded"):
        get_device("auto", wires=2)


def test_pennylane_opens_it_by_name():
    device = qml.device("qbackends.auto", wires=2)

    @qml.qnode(device)
    def bell():
        qml.Hadamard(0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(0) @ qml.Z(1))

    assert abs(bell() - 1.0) < 1e-12 and device.last_choice is not None


def test_torch_minibatches_through_torchlayer():
    wires = 3
    device = get_device("auto", wires=wires)

    @qml.qnode(device, interface="torch", diff_method="adjoint")
    def circuit(inputs, weights):
        qml.AngleEmbedding(inputs, wires=range(wires))
        qml.BasicEntanglerLayers(weights, wires=range(wires))
        return [qml.expval(qml.Z(i)) for i in range(wires)]

    layer = qml.qnn.TorchLayer(circuit, {"weights": (2, wires)})
    x = torch.rand(16, wires, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out = layer(x)
    out.sum().backward()
    reference = qml.qnn.TorchLayer(
        qml.QNode(circuit.func, qml.device("default.qubit"), interface="torch"), {"weights": (2, wires)}
    )
    reference.load_state_dict(layer.state_dict())
    expected = reference(x)
    expected.sum().backward()
    assert torch.allclose(out, expected, atol=1e-10)
    assert torch.allclose(layer.weights.grad, reference.weights.grad, atol=1e-8)


def test_program_capture_gets_a_concrete_device(monkeypatch):
    """Captured programs are not tapes: under qml.capture.enable() auto gives the preference order's backend.
    (Capture itself needs JAX, which the test environment does not install: its switch is set directly.)"""
    monkeypatch.setattr(qml.capture, "enabled", lambda: True)
    device = get_device("auto", wires=2)
    assert not isinstance(device, AutoQubit) and device.name == "lightning.qubit"


def test_a_circuit_no_backend_takes_is_one_typed_error():
    device = get_device("auto", wires=2, exclude=["default.qubit", "lightning.qubit", "lightning.kokkos", "fused.qubit"])

    @qml.set_shots(10)
    @qml.qnode(device)
    def circuit():
        return qml.sample(qml.Z(0))

    with pytest.raises((UnsupportedCircuitError, QBackendsError)):
        circuit()


@pytest.mark.parametrize(
    "spec", ["auto", "local:pennylane/lightning.qubit", "local:qbackends/fused.qubit", "local:qbackends/batched.qubit"]
)
def test_a_seeded_program_draws_the_same_data_whatever_the_device_line(spec):
    np.random.seed(1967)
    qml.device("lightning.qubit", wires=3)
    expected = np.random.uniform(size=4)
    np.random.seed(1967)
    get_device(spec, wires=3)
    assert np.array_equal(np.random.uniform(size=4), expected)


@pytest.mark.parametrize("spec", ["local:qbackends/fused.qubit", "local:pennylane/lightning.qubit", "auto"])
def test_samples_are_reproducible_under_numpys_seed(spec):
    def run():
        np.random.seed(7)
        device = get_device(spec, wires=2)

        @qml.set_shots(50)
        @qml.qnode(device)
        def circuit():
            qml.Hadamard(0)
            qml.Hadamard(1)
            return qml.sample(wires=[0, 1])

        return np.asarray(circuit())

    first, second = run(), run()
    assert first.shape == (50, 2) and np.array_equal(first, second)
    assert 0 < first.mean() < 1  # really sampled


def test_a_template_under_a_gradient_transform_is_tried_and_matches_default_qubit():
    """parameter-shift of a variance through RandomLayers: the trial shifts the preprocessed gates, as PennyLane
    does (the template's own weights have no shift rule), and the result is default.qubit's."""
    weights = pnp.array([[0.3, 1.1, 2.0]], requires_grad=True)

    def circuit(w):
        qml.RandomLayers(w, wires=range(2), seed=42)
        return qml.var(qml.Z(0) @ qml.X(1))

    reference = qml.QNode(circuit, qml.device("default.qubit", wires=2), diff_method="parameter-shift")
    device = get_device("auto", wires=2, diff_method="parameter-shift")
    auto = qml.QNode(circuit, device, diff_method="parameter-shift")
    np.testing.assert_allclose(qml.grad(auto)(weights), qml.grad(reference)(weights), atol=1e-10)
    assert float(auto(weights)) == pytest.approx(float(reference(weights)), abs=1e-10)
    # every backend computes a variance; none is passed over for the trial's own failing
    assert device.decisions[0].refused == {}


def test_a_circuit_executed_without_setup_runs_on_the_first_candidate():
    """``dev.execute(tape)`` with no execution config, as PennyLane's device tests call it: auto's first candidate."""
    device = get_device("auto", wires=2)
    tape = qml.tape.QuantumScript([qml.RX(0.4, 0), qml.CNOT([0, 1])], [qml.expval(qml.Z(1))])
    program = device.preprocess_transforms()
    tapes, post = program((tape,))
    assert post(device.execute(tapes))[0] == pytest.approx(np.cos(0.4), abs=1e-12)


def test_trials_are_not_counted_by_the_users_tracker():
    """The tracker counts what the chosen backend by name counts for the same step, not the decision's trials."""

    def counted(device):
        @qml.qnode(device, diff_method="adjoint")
        def circuit(x):
            qml.RX(x, 0)
            qml.CNOT([0, 1])
            qml.RY(x, 2)
            return qml.expval(qml.Z(1) @ qml.Z(2))

        with qml.Tracker(device) as tracker:
            qml.grad(circuit)(pnp.array(0.3, requires_grad=True))  # under auto the decision's trials run here
        return dict(tracker.totals)  # lightning counts execute_and_derivative_batches, fused.qubit batches

    auto = get_device("auto", wires=3)
    through_auto = counted(auto)
    assert len(auto.decisions[0].measured) >= 2  # it did try (else this test says nothing)
    assert through_auto["executions"] >= 1
    assert through_auto == counted(get_device(auto.last_choice, wires=3))


def test_a_new_auto_device_of_a_known_setup_sees_new_failures_exclusions_and_tight_memory(monkeypatch):
    """Auto's screening of a setup is kept for its next devices (a loop builds one per sample), but never past what
    could change the answer: a build failure recorded since, an exclusion, or memory that now decides."""
    from qbackends import probe
    from qbackends.context import get_context
    from qbackends.screening import auto_candidates

    context = get_context()
    plain = ["local:pennylane/default.qubit"]  # (it refuses large states for memory: a setup that is never kept)
    keys = lambda wires: [c.backend.key for c in auto_candidates(context, wires, exclude=plain)]  # noqa: E731
    assert "pennylane/lightning.qubit" in keys(4)
    context.build_failures["lightning.qubit"] = "RuntimeError: recorded here"
    assert "pennylane/lightning.qubit" not in keys(4)
    del context.build_failures["lightning.qubit"]
    monkeypatch.setenv("QBACKENDS_AUTO_EXCLUDE", "local:pennylane/lightning.qubit")
    assert "pennylane/lightning.qubit" not in keys(4)
    monkeypatch.delenv("QBACKENDS_AUTO_EXCLUDE")
    lightning = next(c for c in auto_candidates(context, 4, exclude=plain) if c.backend.key == "pennylane/lightning.qubit")
    wires = lightning.capabilities.max_wires - 5  # fits, but memory is not far from deciding: screened each time
    assert "pennylane/lightning.qubit" in keys(wires)
    state = 16 << wires
    monkeypatch.setattr(probe, "host_memory_available", lambda: int(8 * state))  # 9 states no longer fit, 4 do
    assert "pennylane/lightning.qubit" not in keys(wires) and "qbackends/batched.qubit" in keys(wires)
    assert "pennylane/lightning.qubit" in keys(4)
