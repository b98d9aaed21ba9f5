"""The fused simulator against lightning.qubit: values and adjoint gradients to 1e-10."""

from __future__ import annotations

import re
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pennylane as qml
import pytest
from circuits import random_params

from qbackends import capabilities, get_device, get_registry
from qbackends.errors import UnsupportedCircuitError
from qbackends.fused import engine, kernels
from qbackends.fused.program import SUPPORTED, applied_by_matrix, compile_operations
from qbackends.workloads import qaoa

FUSED = "local:qbackends/fused.qubit"
DECLARED = capabilities.declared_operations(get_registry().backends["qbackends/fused.qubit"])


def _pair(circuit_fn, n, diff_method="adjoint"):
    return (
        qml.qnode(get_device(FUSED, wires=n), diff_method=diff_method)(circuit_fn),
        qml.qnode(qml.device("lightning.qubit", wires=n), diff_method="adjoint")(circuit_fn),
    )


def _assert_same(ours, reference, params, tol=1e-10):
    assert abs(float(ours(params)) - float(reference(params))) < tol
    np.testing.assert_allclose(qml.grad(ours)(params), qml.grad(reference)(params), atol=tol, rtol=0)


def test_declared_operations_are_what_the_kernels_run():
    by_matrix = set(DECLARED.native) - set(SUPPORTED) - {"ApproxTimeEvolution"}
    assert by_matrix == {"DoubleExcitationPlus", "DoubleExcitationMinus", "BlockEncode"}
    examples = [qml.DoubleExcitationPlus(0.1, range(4)), qml.DoubleExcitationMinus(0.1, range(4)), qml.BlockEncode(0.5, [0, 1])]
    assert all(applied_by_matrix(op) for op in examples)
    assert set(DECLARED.adjoint_differentiable) == set(SUPPORTED) | {"ApproxTimeEvolution"}


@pytest.mark.parametrize(
    "hamiltonian",
    [
        qml.Hamiltonian([0.5, -0.7, 0.3, 1.1], [qml.Z(0) @ qml.Z(1), qml.Z(1) @ qml.Z(2) @ qml.Z(3), qml.Z(2), qml.Identity(0)]),
        qml.Hamiltonian([1.0, 0.4, -0.6], [qml.X(0), qml.X(2), qml.Y(3)]),
        qml.Hamiltonian([0.5, 0.8, 0.3], [qml.X(0) @ qml.X(1), qml.Z(0), qml.Y(1) @ qml.Z(2)]),  # not commuting
    ],
    ids=["z words", "single-qubit terms", "Trotterised"],
)
@pytest.mark.parametrize("rounds", [1, 3])
def test_approx_time_evolution_as_pennylane_runs_it(hamiltonian, rounds):
    """qml.qaoa's layers (ApproxTimeEvolution) reach fused.qubit whole: commuting terms become one
    round of rotations, others PennyLane's Trotter rounds; state, value and gradient as default.qubit."""

    def body(x):
        for w in range(4):
            qml.RY(0.3 + 0.2 * w, wires=w)
        qml.ApproxTimeEvolution(hamiltonian, x[0], rounds)
        qml.CNOT([0, 3])
        qml.ApproxTimeEvolution(hamiltonian, x[1], 1)

    def circuit(x):
        body(x)
        return qml.expval(qml.Z(0) @ qml.Z(1) + 0.5 * qml.X(3))

    def state(device):
        return qml.QNode(lambda x: (body(x), qml.state())[1], device)(x)

    ours, reference = _pair(circuit, 4)
    x = qml.numpy.array([0.37, -0.52], requires_grad=True)
    _assert_same(ours, reference, x)
    np.testing.assert_allclose(state(get_device(FUSED, wires=4)), state(qml.device("default.qubit", wires=4)), atol=1e-12)
    terms = sum(1 for word in hamiltonian.pauli_rep if len(word))
    commuting = hamiltonian.pauli_rep is not None and all(
        a.commutes_with(b) for a in hamiltonian.pauli_rep for b in hamiltonian.pauli_rep
    )
    counted = qml.QNode(lambda x: (body(x), qml.expval(qml.Z(0)))[1], get_device(FUSED, wires=4), diff_method="adjoint")
    tape = qml.workflow.construct_batch(counted, level="device")(x)[0][0]
    if commuting:  # one round of rotations per layer, on the layer's one parameter
        rounds_run = [op for op in tape.operations if op.name == "CommutingRotations"]
        assert len(rounds_run) == 2 and all(len(op.hyperparameters["terms"]) == terms for op in rounds_run)
        assert [op.data[0] for op in rounds_run] == [0.37, -0.52]
    else:  # PennyLane's rounds of PauliRot: a MultiRZ each, between basis changes
        assert len([op for op in tape.operations if op.name == "MultiRZ"]) == (rounds + 1) * terms


def test_approx_time_evolution_with_trainable_coefficients():
    """A trainable coefficient: the evolution runs as rotations whose angles carry it, and its
    gradient agrees with default.qubit's backpropagation."""

    def circuit(c, t):
        for w in range(3):
            qml.Hadamard(w)
        h = qml.Hamiltonian(qml.math.stack([c[0], c[1], 0.4]), [qml.Z(0) @ qml.Z(1), qml.Z(1) @ qml.Z(2), qml.Z(2)])
        qml.ApproxTimeEvolution(h, t, 2)
        qml.qaoa.mixer_layer(t, qml.Hamiltonian([1.0] * 3, [qml.X(w) for w in range(3)]))
        return qml.expval(qml.Z(0) @ qml.Z(2) + 0.3 * qml.Z(1))

    ours = qml.QNode(circuit, get_device(FUSED, wires=3), diff_method="adjoint")
    reference = qml.QNode(circuit, qml.device("default.qubit", wires=3), diff_method="backprop")
    c, t = qml.numpy.array([0.8, -0.3], requires_grad=True), qml.numpy.array(0.45, requires_grad=True)
    assert abs(float(ours(c, t)) - float(reference(c, t))) < 1e-12
    for mine, theirs in zip(qml.grad(ours)(c, t), qml.grad(reference)(c, t), strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-10, rtol=0)
    assert np.abs(qml.grad(ours)(c, t)[0]).min() > 1e-3  # the coefficients' gradient is not zero


def test_qaoa_layers_with_broadcast_parameters():
    """A batch of angles for qml.qaoa's layers: one circuit per row, as on default.qubit."""
    import networkx as nx

    cost, mixer = qml.qaoa.maxcut(nx.gnm_random_graph(5, 6, seed=3))

    def circuit(gamma, beta):
        for w in range(5):
            qml.Hadamard(w)
        qml.qaoa.cost_layer(gamma, cost)
        qml.qaoa.mixer_layer(beta, mixer)
        return qml.expval(cost)

    gammas, betas = np.array([0.1, 0.5, 0.9]), np.array([0.3, 0.2, 0.7])
    ours = qml.QNode(circuit, get_device(FUSED, wires=5))(gammas, betas)
    np.testing.assert_allclose(ours, qml.QNode(circuit, qml.device("default.qubit", wires=5))(gammas, betas), atol=1e-12)


def test_qaoa_layers_on_mixed_wire_labels():
    wires = [7, "q", "r"]
    cost = qml.Hamiltonian([0.5, -0.25], [qml.Z(7) @ qml.Z("q"), qml.Z("q") @ qml.Z("r")])
    mixer = qml.Hamiltonian([1.0] * 3, [qml.X(w) for w in wires])

    def circuit(x):
        for w in wires:
            qml.Hadamard(w)
        qml.qaoa.cost_layer(x[0], cost)
        qml.qaoa.mixer_layer(x[1], mixer)
        return qml.expval(cost)

    ours = qml.QNode(circuit, get_device(FUSED, wires=wires), diff_method="adjoint")
    reference = qml.QNode(circuit, qml.device("default.qubit", wires=wires), diff_method="backprop")
    _assert_same(ours, reference, qml.numpy.array([0.3, -0.8], requires_grad=True))


def _on_fused_and_default(fn, wires, **qnode):
    return (
        qml.QNode(fn, qml.device("qbackends.fused.qubit", wires=wires), **qnode),
        qml.QNode(fn, qml.device("default.qubit", wires=wires), **qnode),
    )


def test_initial_state_preparation_and_matrix_observables():
    rng = np.random.default_rng(3)
    state = rng.normal(size=8) + 1j * rng.normal(size=8)
    state /= np.linalg.norm(state)
    a = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
    hermitian = qml.numpy.array(a + a.conj().T, requires_grad=False)

    def gates(x):
        qml.StatePrep(state, wires=["c", "a", "b"])
        qml.RX(x[0], wires="a")
        qml.DoubleExcitationPlus(0.3, wires=["a", "b", "c", "d"])
        qml.CNOT(["a", "b"])

    def circuit(x):
        gates(x)
        return qml.expval(qml.Hermitian(hermitian, wires=["b", "c"])), qml.var(qml.Projector([1, 0], wires=["a", "c"]))

    ours, reference = _on_fused_and_default(circuit, ["a", "b", "c", "d"])
    x = qml.numpy.array([0.7], requires_grad=True)
    np.testing.assert_allclose(ours(x), reference(x), atol=1e-12)

    def expval(x):
        gates(x)
        return qml.expval(qml.Hermitian(hermitian, wires=["b", "c"]))

    ours, reference = _on_fused_and_default(expval, ["a", "b", "c", "d"], diff_method="adjoint")
    np.testing.assert_allclose(qml.grad(ours)(x), qml.grad(reference)(x), atol=1e-10)


def test_gradients_it_cannot_take_are_refused_typed():
    from qbackends import UnsupportedCircuitError

    def trainable_coefficient(x, c):
        qml.RX(x, wires=0)
        return qml.expval(qml.Hamiltonian(c, [qml.Z(0)]))

    qnode = qml.QNode(trainable_coefficient, qml.device("qbackends.fused.qubit", wires=1), diff_method="adjoint")
    x, c = qml.numpy.array(0.4, requires_grad=True), qml.numpy.array([0.5], requires_grad=True)
    assert abs(qnode(x, c) - 0.5 * np.cos(0.4)) < 1e-12  # a value alone is fine
    with pytest.raises(UnsupportedCircuitError, match="trainable observable coefficients"):
        qml.grad(qnode)(x, c)

    def by_matrix(x):
        qml.DoubleExcitationMinus(x, wires=[0, 1, 2, 3])
        return qml.expval(qml.Z(0))

    qnode = qml.QNode(by_matrix, qml.device("qbackends.fused.qubit", wires=4), diff_method="adjoint")
    with pytest.raises(UnsupportedCircuitError, match="DoubleExcitation|by their matrix"):
        qml.grad(qnode)(x)


def test_finite_shots_sample_the_final_state():
    dev = qml.device("qbackends.fused.qubit", wires=2, seed=11)

    @qml.set_shots(20000)
    @qml.qnode(dev)
    def circuit():
        qml.RY(1.1, wires=0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(0) @ qml.Z(1)), qml.probs(wires=[1]), qml.sample(qml.Z(0))

    zz, probs, samples = circuit()
    assert zz == 1.0  # the Bell-like state has Z0 Z1 = +1 in every shot
    assert abs(probs[1] - np.sin(0.55) ** 2) < 0.02  # 5 sigma at 20000 shots
    assert samples.shape == (20000,) and set(np.unique(samples)) == {-1.0, 1.0}


def test_wires_taken_from_the_circuit_and_tracked():
    dev = qml.device("qbackends.fused.qubit")

    @qml.qnode(dev)
    def circuit():
        qml.Hadamard("q")
        return qml.expval(qml.X("q"))

    with qml.Tracker(dev) as tracker:
        assert abs(circuit() - 1.0) < 1e-12
    assert tracker.totals["executions"] == 1 and tracker.totals["batches"] == 1


@pytest.mark.parametrize("angle", [np.inf, -np.inf, np.nan])
def test_an_angle_that_is_not_finite_gives_nans_as_lightning_does(angle):
    """A diverged optimisation's angle: NaN value and gradient on every device, not an error (fused.qubit's rotation
    raised "math domain error", an internal error under the CLI)."""

    def run(name):
        @qml.qnode(get_device(name, wires=2), diff_method="adjoint")
        def circuit(x):
            qml.Hadamard(0)
            qml.Hadamard(1)
            qml.RX(x, 0)
            qml.IsingZZ(x, [0, 1])
            qml.RY(x, 1)
            return qml.expval(qml.Z(0) @ qml.Z(1))

        x = qml.numpy.array(angle, requires_grad=True)
        return circuit(x), qml.grad(circuit)(x)

    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        reference = run("local:pennylane/lightning.qubit")
        results = [run(name) for name in (FUSED, "local:qbackends/batched.qubit", "auto")]
    assert np.isnan(reference).all()
    for value, grad in results:
        assert np.isnan(value) and np.isnan(grad)


@pytest.mark.jax_in_children  # PennyLane's suite tests the jax interface where jax is installed
@pytest.mark.parametrize("device", ["qbackends.fused.qubit", "qbackends.auto"])
def test_pennylane_device_suite_passes(tmp_path, device):
    """PennyLane's own device tests (pennylane/devices/tests), analytic: on fused.qubit, and on the
    per-circuit auto device (each of the suite's circuits on the backend it takes). Once, with
    --shots=None: without the option the suite creates the device with its default shots, None, and
    gives the same result."""
    import os
    import subprocess
    import sys

    suite = Path(qml.__file__).parent / "devices" / "tests"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(suite), "--device", device, "-q", "-p", "no:cacheprovider", "--shots=None"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    summary = run.stdout.strip().splitlines()[-1]
    assert run.returncode == 0 and not re.search(r"\d+ (failed|errors?)\b", summary), run.stdout[-3000:]
    passed = re.search(r"\b(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 389, summary  # the suite ran (389 tests or more pass on PennyLane 0.45)


@pytest.mark.parametrize("nodes", [4, 9, 13, 16])
@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_qaoa_matches_lightning(nodes, layers, weighted):
    graph = qaoa.random_graph(nodes, min(nodes * (nodes - 1) // 2, int(1.5 * nodes)), seed=nodes)
    if weighted:
        graph = qaoa.Graph(nodes, tuple((u, v, 0.25 + ((3 * u + v) % 5) / 2) for u, v, _ in graph.edges))
    cost = qaoa.cost_hamiltonian(graph)
    ansatz = qaoa.circuit(graph, layers)

    def circuit(p):
        ansatz(p)
        return qml.expval(cost)

    _assert_same(*_pair(circuit, nodes), random_params((2, layers), seed=nodes + layers))


@pytest.mark.parametrize("precision,tol", [("c128", 1e-10), ("c64", 2e-6)])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n,tile_bits", [(17, None), (20, 18)])
def test_rotations_on_any_subset_of_wires_as_lightning(monkeypatch, precision, tol, seed, n, tile_bits):
    """Layers of RX and RY on random subsets of the wires, with angles either side of π/2 (both scaled forms of a
    rotation), between cost layers: the state and an adjoint gradient as lightning.qubit's. A pass sweeps the gates
    on its tiles' high bits one or two at a time (17 wires: tiles of 2^15), or three (20 wires in tiles of 2^18)."""
    if tile_bits:
        monkeypatch.setattr(kernels, "TILE_BITS", tile_bits)
    rng = np.random.default_rng(seed)
    layers = [[(int(w), rng.choice(["RX", "RY"])) for w in np.flatnonzero(rng.random(n) < 0.7)] for _ in range(3)]
    params = qml.numpy.array(rng.uniform(-2 * np.pi, 2 * np.pi, sum(len(layer) for layer in layers)), requires_grad=True)

    def circuit(p, measure):
        for w in range(n):
            qml.Hadamard(w)
        k = 0
        for layer in layers:
            for w in range(n - 1):
                qml.IsingZZ(0.3 + 0.1 * w, wires=[w, w + 1])
            for w, name in layer:
                getattr(qml, name)(p[k], wires=w)
                k += 1
        return measure()

    ours, reference = get_device(FUSED, wires=n, precision=precision), qml.device("lightning.qubit", wires=n)
    states = [qml.QNode(circuit, device, diff_method=None)(params, qml.state) for device in (ours, reference)]
    np.testing.assert_allclose(*states, atol=tol, rtol=0)
    energy = lambda: qml.expval(qml.sum(*(qml.PauliZ(w) @ qml.PauliZ(w + 1) for w in range(n - 1))))  # noqa: E731
    gradients = [
        qml.grad(lambda p, d=device: qml.QNode(circuit, d, diff_method="adjoint")(p, energy))(params)
        for device in (ours, reference)
    ]
    np.testing.assert_allclose(*gradients, atol=tol * n, rtol=0)


@pytest.mark.parametrize("tile_bits,max_tile_bits,passes", [(8, 8, 3), (7, 7, 6), (7, 9, 2)])
@pytest.mark.parametrize("layers", [2, 3])
def test_adjoint_pass_orders_in_many_tiled_passes(monkeypatch, tile_bits, max_tile_bits, passes, layers):
    """Small tiles make a 12-wire mixer take 3 or 6 passes: the adjoint pass that undoes λ alone takes
    each pass's moments at the layer's output, at its input, or in an extra read, and the last
    mixer's input comes from the forward pass (one expval) or from undoing it (two). Tiles that may
    grow keep it to two passes, as at 25-31 wires."""
    from qbackends.fused import engine
    from qbackends.fused.program import ProductLayer

    monkeypatch.setattr(kernels, "TILE_BITS", tile_bits)
    monkeypatch.setattr(kernels, "MAX_TILE_BITS", max_tile_bits)
    monkeypatch.setattr(kernels, "MIN_RUN_BITS", 6)
    n = 12
    assert (
        len(engine._layer_passes(ProductLayer({w: (np.eye(2), w, 1, 1.0) for w in range(n)}), n, engine.tiling_for(n))) == passes
    )
    _assert_qaoa_as_lightnings(qaoa.random_graph(n, 18, seed=5), n, layers)


def _assert_qaoa_as_lightnings(graph, n, layers):
    """A QAOA's energy and gradient as lightning.qubit's, and the Jacobian of it with a second expectation (the
    forward pass then not fused with the adjoint pass)."""
    cost, ansatz = qaoa.cost_hamiltonian(graph), qaoa.circuit(graph, layers)
    params = random_params((2, layers), seed=layers)

    def energy(p):
        ansatz(p)
        return qml.expval(cost)

    def two(p):
        ansatz(p)
        return qml.expval(cost), qml.expval(qml.Z(0) @ qml.Z(5))

    _assert_same(*_pair(energy, n), params)
    ours, reference = _pair(two, n)
    np.testing.assert_allclose(
        qml.jacobian(lambda p: qml.math.stack(ours(p)))(params),
        qml.jacobian(lambda p: qml.math.stack(reference(p)))(params),
        atol=1e-10,
    )


@pytest.mark.parametrize("weighted", [False, True])
def test_a_deep_qaoas_adjoint_undoes_each_layer_in_one_sweep(monkeypatch, weighted):
    """Past two layers (no cheap way back to |+⟩) each sweep of the adjoint pass undoes a pass of a mixer, the cost
    layer before it and a pass of the mixer before that, on φ and λ; a mixer of two passes takes part in two sweeps
    (a chain through the layers), and the first mixer's last pass reads λ alone (its input computed). A layer more
    then costs the gradient 3.1 state passes (1.06 forward, 2 back; 3.5 weighted, whose diagonal is 8 bytes an
    amplitude where a level is 2; they were 4.1-6.1 and 4.5-6.3). Gradients as lightning's at p = 3 to 6."""
    from qbackends.fused.program import ProductLayer

    monkeypatch.setattr(kernels, "TILE_BITS", 7)
    monkeypatch.setattr(kernels, "MAX_TILE_BITS", 9)
    monkeypatch.setattr(kernels, "MIN_RUN_BITS", 6)
    n = 12
    assert len(engine._layer_passes(ProductLayer({w: (np.eye(2), w, 1, 1.0) for w in range(n)}), n, engine.tiling_for(n))) == 2
    graph = qaoa.random_graph(n, 18, seed=5)
    if weighted:
        rng = np.random.default_rng(3)
        graph = qaoa.Graph(n, tuple((u, v, float(rng.uniform(0.5, 2.0))) for u, v, _ in graph.edges))
    cost, mixer = qaoa.cost_hamiltonian(graph), qml.qaoa.x_mixer(range(n))
    passes = []
    for layers in (3, 4, 5, 6):

        def deep(p, layers=layers):
            for w in range(n):
                qml.Hadamard(w)
            for layer in range(layers):
                qml.qaoa.cost_layer(p[0][layer], cost)
                qml.qaoa.mixer_layer(p[1][layer], mixer)
            return qml.expval(cost)

        ours, reference = _pair(deep, n)
        params = random_params((2, layers), seed=layers)
        _assert_same(ours, reference, params)
        with qml.Tracker(ours.device) as tracker:
            qml.grad(ours)(params)
        passes.append(tracker.totals["bytes_moved"] / (2 * 16 * 2**n))
    assert np.max(np.diff(passes)) <= (3.6 if weighted else 3.2), passes


def test_a_pass_the_forward_undid_is_not_skipped_in_another_layer(monkeypatch):
    """Two rotation layers, a cost layer and a mixer of two passes: the forward's last sweep undoes one of the
    mixer's passes on λ, and the adjoint's first fused sweep refills φ from the first layer; the pass it undid
    belongs to the mixer alone (the first layer's gradient was zeros where the second layer's step skipped it)."""
    monkeypatch.setattr(kernels, "TILE_BITS", 7)
    monkeypatch.setattr(kernels, "MAX_TILE_BITS", 9)
    monkeypatch.setattr(kernels, "MIN_RUN_BITS", 6)
    n = 12
    cost = qml.Hamiltonian([1.0] * (n - 1), [qml.Z(w) @ qml.Z(w + 1) for w in range(n - 1)])

    def circuit(p):
        for w in range(n):
            qml.RY(p[w], wires=w)
        for w in range(n):
            qml.RX(p[n + w], wires=w)
        qml.qaoa.cost_layer(p[2 * n], cost)
        qml.qaoa.mixer_layer(p[2 * n + 1], qml.qaoa.x_mixer(range(n)))
        return qml.expval(cost)

    _assert_same(*_pair(circuit, n), random_params(2 * n + 2, seed=1))


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("first", ["Hadamard", "RY"])
def test_fused_sweeps_read_the_first_layers_state_where_needed(monkeypatch, layers, first):
    """Mixer, cost layer and mixer share sweeps, and the first mixer's input is computed from the
    first layer and cost layer instead of being read: right when that first layer has parameters
    too (its moments then need the state written)."""
    monkeypatch.setattr(kernels, "TILE_BITS", 8)
    monkeypatch.setattr(kernels, "MAX_TILE_BITS", 8)
    n = 12
    graph = qaoa.random_graph(n, 18, seed=7)
    cost = qaoa.cost_hamiltonian(graph)
    mixer = qml.Hamiltonian([1.0] * n, [qml.X(w) for w in range(n)])

    def energy(p):
        for w in range(n):
            if first == "RY":
                qml.RY(p[0, 0] * (w + 1) / n, wires=w)
            else:
                qml.Hadamard(w)
        for layer in range(layers):
            qml.qaoa.cost_layer(p[0, layer], cost)
            qml.qaoa.mixer_layer(p[1, layer], mixer)
        return qml.expval(cost)

    _assert_same(*_pair(energy, n), random_params((2, layers), seed=layers + 10))


def _random_circuit(ops: list[str], n: int, seed: int):
    rng = np.random.default_rng(seed)
    plan = [(ops[i % len(ops)], rng.choice(n, size=2, replace=False).tolist()) for i in range(3 * len(ops))]
    rng.shuffle(plan)

    def circuit(x):
        for w in range(n):
            qml.RY(x[w % len(x)], wires=w)
        k = 0
        for name, wires in plan:
            op = getattr(qml, name)
            if op.num_wires == 1:
                wires = wires[:1]
            elif op.num_wires == 2:
                wires = wires[:2]
            else:
                wires = sorted(set(wires + [(wires[0] + 3) % n]))
            if op.num_params:
                op(x[k % len(x)] * (1 + 0.1 * k), wires=wires)
                k += 1
            else:
                op(wires=wires)
        return qml.expval(qml.PauliZ(0) @ qml.PauliZ(n - 1) + 0.5 * qml.PauliZ(1) - 0.25 * qml.PauliZ(2) @ qml.PauliZ(3))

    return circuit


@pytest.mark.parametrize("n", [5, 13, 17])
@pytest.mark.parametrize("name", sorted(set(DECLARED.adjoint_differentiable) - {"ApproxTimeEvolution"}))  # its own test above
def test_every_declared_operation_in_random_circuits(name, n):
    mix = [name, "RX", "IsingZZ", "CNOT", "RZ", "Hadamard"]
    circuit = _random_circuit(mix, n, seed=len(name) + n)
    _assert_same(*_pair(circuit, n), random_params(6, seed=n))


def test_other_gates_and_observables_go_through_preprocessing():
    def circuit(x):
        qml.Rot(x[0], x[1], x[2], wires=0)
        qml.CRot(x[2], x[0], x[1], wires=[0, 1])
        qml.PauliRot(x[1], "XY", wires=[1, 2])
        qml.Toffoli(wires=[0, 1, 2])
        return qml.expval(qml.PauliX(0) @ qml.PauliY(2) + 0.3 * qml.PauliZ(1))

    _assert_same(*_pair(circuit, 3), random_params(3, seed=9))


def test_diagonal_hamiltonian_evolutions_are_one_block():
    hamiltonian = 0.4 * qml.Z(0) @ qml.Z(1) - 0.7 * qml.Z(1) @ qml.Z(2) @ qml.Z(3) + 0.2 * qml.Z(3) + 0.1 * qml.I(0)

    def circuit(x, evolve=qml.evolve):
        for w in range(4):
            qml.Hadamard(w)
        evolve(hamiltonian, x[0])
        qml.ApproxTimeEvolution(hamiltonian, x[1], 1)
        qml.CommutingEvolution(hamiltonian, x[2])
        for w in range(4):
            qml.RX(x[3], w)
        return qml.expval(qml.PauliX(0) + hamiltonian)

    def reference_circuit(x):  # lightning cannot run qml.evolve of a sum; one Trotter step is exact here
        return circuit(x, evolve=lambda h, t: qml.ApproxTimeEvolution(h, t, 1))

    ours = qml.QNode(circuit, get_device(FUSED, wires=4), diff_method="adjoint")
    reference = qml.QNode(reference_circuit, qml.device("lightning.qubit", wires=4), diff_method="adjoint")
    x = random_params(4, seed=11)
    _assert_same(ours, reference, x)
    names = {op.name for op in qml.workflow.construct_batch(ours, level="device")(x)[0][0].operations}
    assert "Evolution" not in names and "MultiRZ" in names  # its terms join a diagonal block


def test_probs_state_var_and_several_expvals():
    dev = get_device(FUSED, wires=4)

    def circuit(x):
        qml.Hadamard(0)
        qml.RX(x, wires=1)
        qml.CNOT([0, 2])
        qml.IsingZZ(x / 2, wires=[2, 3])
        return qml.probs(wires=[2, 0]), qml.state(), qml.var(qml.PauliZ(1)), qml.expval(qml.PauliZ(2)), qml.expval(qml.PauliX(0))

    ours = qml.QNode(circuit, dev)(0.7)
    reference = qml.QNode(circuit, qml.device("lightning.qubit", wires=4))(0.7)
    for a, b in zip(ours, reference, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)

    def two(x):
        qml.RX(x[0], 0)
        qml.CNOT([0, 1])
        qml.RY(x[1], 1)
        return qml.expval(qml.PauliZ(0)), qml.expval(qml.PauliZ(1) @ qml.PauliZ(0))

    x = random_params(2, seed=4)
    jac = qml.jacobian(lambda p: qml.numpy.stack(qml.QNode(two, dev, diff_method="adjoint")(p)))(x)
    ref = qml.jacobian(
        lambda p: qml.numpy.stack(qml.QNode(two, qml.device("lightning.qubit", wires=2), diff_method="adjoint")(p))
    )(x)
    np.testing.assert_allclose(jac, ref, atol=1e-10)


def test_unsupported_operation_is_refused_with_the_list():
    with pytest.raises(UnsupportedCircuitError, match="cannot run the operation 'SWAP'; it runs: CNOT, CRZ"):
        compile_operations([qml.SWAP([0, 1])], {0: 0, 1: 1}, 2)


def test_peak_memory_is_two_states_and_the_levels():
    """Everything the device allocates in QAOA gradient steps, from its creation on, its kernels
    loaded: ψ and the kept input (λ takes ψ's place), the cost's levels (2 bytes an amplitude) and
    tiles. The float64 diagonal (half a state) is not built: the last sweep reads the levels."""
    graph16, graph = qaoa.random_graph(16, 24, 1967), qaoa.random_graph(20, 30, 1967)
    params = random_params((2, 2))

    def gradient_steps(graph, steps):
        cost, ansatz = qaoa.cost_hamiltonian(graph), qaoa.circuit(graph, 2)
        device = get_device(FUSED, wires=graph.nodes)
        qnode = qml.QNode(lambda p: (ansatz(p), qml.expval(cost))[1], device, diff_method="adjoint")
        for _ in range(steps):
            qml.grad(qnode)(params)

    gradient_steps(graph16, 1)  # loads the kernels (the same ones at 16 wires)
    tracemalloc.start()
    gradient_steps(graph, 2)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    state = 16 * 2**graph.nodes
    assert peak <= 2.5 * state, f"peak {peak / state:.2f} state vectors > 2.5"


@pytest.mark.parametrize("gradient", [False, True])
def test_a_circuit_ending_in_its_cost_layer_reads_the_levels_not_a_diagonal(gradient):
    """A circuit whose last operation is a diagonal block is measured by its own pass (no layer's sweep
    takes it), from the cost's levels (an eighth of a state): no float64 diagonal (half a state) beside ψ (and
    the kept input for a gradient); its value and gradient are lightning's."""
    small, graph = qaoa.random_graph(10, 15, 1967), qaoa.random_graph(20, 30, 1967)
    params = random_params((3, 2))

    def circuit(graph):
        cost, ansatz = qaoa.cost_hamiltonian(graph), qaoa.circuit(graph, 2)

        def ends_in_cost_layer(p):
            ansatz(p[:2])
            qml.qaoa.cost_layer(p[2, 0], cost)
            return qml.expval(cost)

        return ends_in_cost_layer

    _assert_same(*_pair(circuit(small), small.nodes), params)  # the kernels loaded
    tracemalloc.start()
    qnode = qml.QNode(circuit(graph), get_device(FUSED, wires=graph.nodes), diff_method="adjoint")
    for _ in range(2):
        qml.grad(qnode)(params) if gradient else qnode(np.asarray(params))  # a plain array: no gradient taken with it
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    state, states = 16 * 2**graph.nodes, (2 if gradient else 1)
    assert peak <= (states + 0.5) * state, f"peak {peak / state:.2f} state vectors > {states} + 0.5"


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize(("transposed", "run_bits", "high_bits"), [(True, 3, range(3, 13)), (False, 6, range(16, 22))])
def test_states_of_stream_bytes_are_stored_past_the_caches_unchanged(dtype, transposed, run_bits, high_bits):
    """A tile scattered into a state of STREAM_BYTES (22 qubits at c128, 23 at c64) from state_buffer
    streams its stores; the same tile into a state one amplitude off that alignment does not: both
    states end equal."""
    size = kernels.STREAM_BYTES // np.dtype(dtype).itemsize
    streamed = engine.state_buffer(size, dtype)
    cached = engine.state_buffer(size + 1, dtype)[1:]
    assert kernels.streams(streamed) and not kernels.streams(cached)
    streamed[:], cached[:] = 0.5j, 0.5j
    runs = np.arange(1 << len(high_bits), dtype=np.uint64)
    offsets = np.zeros(runs.size, dtype=np.uint64)
    for i, bit in enumerate(high_bits):  # each run's first amplitude less its tile's
        offsets |= ((runs >> np.uint64(i)) & np.uint64(1)) << np.uint64(bit)
    width = offsets.size << run_bits
    rng = np.random.default_rng(5)
    re, im = (rng.normal(size=width).astype(streamed.real.dtype) for _ in range(2))
    base = np.uint64(1 << 14) if not transposed else np.uint64(1 << 20)
    for state in (streamed, cached):
        kernels.scatter(re, im, state, int(base), offsets, run_bits, transposed)
    np.testing.assert_array_equal(streamed, cached)
    written = np.flatnonzero(streamed != 0.5j)
    assert written.size == width and written.min() >= base


def test_a_qaoa_gradient_streamed_at_22_qubits_is_the_cached_ones(monkeypatch):
    """At 22 qubits c128 every state the device holds streams its stores; with its buffers off the
    alignment nothing does: the energy and gradient are the same numbers."""
    graph = qaoa.random_graph(22, 33, seed=22)
    params = random_params((2, 2), seed=22)
    results, streams = [], []
    aligned = engine.state_buffer
    for run in ("streamed", "cached"):
        if run == "cached":
            monkeypatch.setattr(engine, "state_buffer", lambda size, dtype: aligned(size + 1, dtype)[1:])
        qnode = _qaoa_at("c128", graph)
        results.append((float(qnode(params)), qml.grad(qnode)(params)))
        streams.append({name: kernels.streams(state) for name, state in qnode.device._scratch.items()})
    assert streams == [{"psi": True, "lambda": True}, {"psi": False, "lambda": False}]
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_qaoa_workload_auto_uses_fused():
    """Even a 2-iteration run: the kernels were compiled at install, there is no one-time cost to weigh."""
    config = qaoa.Config(nodes=16, edges=24, iterations=2)  # from FUSED_MIN_WIRES: smaller is lightning's
    result = qaoa.run(config, "auto")
    reference = qaoa.run(config, "lightning.qubit")
    assert result["device"] == "qbackends.fused.qubit"
    np.testing.assert_allclose(result["costs"], reference["costs"], atol=1e-10)


def _qml_qaoa(n, cost, mixer, layers):
    """The user's QAOA ansatz with qml.qaoa layers: |+>, then cost and mixer layers of p[0] and p[1]."""

    def ansatz(p):
        for w in range(n):
            qml.Hadamard(w)
        for layer in range(layers):
            qml.qaoa.cost_layer(p[0][layer], cost)
            qml.qaoa.mixer_layer(p[1][layer], mixer)

    return ansatz


@pytest.mark.parametrize(
    ("weights", "values"),
    [(None, np.uint8), ((0.3, 1.7), np.float64), ((-40.0, 55.0), np.float64)],
    ids=["levels", "angles", "angles-of-both-signs-past-1000"],
)
def test_swept_cost_layers_match_the_trigonometric_path(weights, values):
    """A cost layer applied inside the mixers' sweeps, by level (unweighted: a table of its m+1 phases)
    or by angle (weighted: from the cost's kept diagonal; each quadrant, and angles of either sign past
    1000 radians): the state and gradient of the table kernels' separate passes (no cache: nothing kept)."""
    import networkx as nx

    from qbackends.fused import engine

    n = 16
    cost, mixer = qml.qaoa.maxcut(nx.gnm_random_graph(n, 24, seed=5))
    weighted = weights is not None
    if weighted:
        cost = qml.Hamiltonian(np.linspace(*weights, len(cost.coeffs)), cost.ops)

    device = get_device(FUSED, wires=n)
    tape = qml.tape.make_qscript(_qml_qaoa(n, cost, mixer, 3))(random_params((2, 3)))
    (tape,), _ = device.preprocess_transforms()((qml.tape.QuantumScript(tape.operations, [qml.expval(cost)]),))
    segments, nparams = compile_operations(tape.operations, {w: i for i, w in enumerate(range(n))}, n)
    terms = [(list(w.keys()), float(c)) for w, c in cost.pauli_rep.items()]
    masks = np.array([sum(1 << (n - 1 - q) for q in ws) for ws, _ in terms], dtype=np.int64)
    coefs = np.array([c for _, c in terms])
    results = []
    for cache in (engine.DiagonalCache(), None):
        diagonal = (cache or engine.DiagonalCache()).get(n, masks, coefs)  # the cost observable's, kept first
        blocks = [engine.sweep_block(s, n, cache, 1.0) for s in segments if isinstance(s, engine.DiagonalBlock)]
        assert len(blocks) == 3 and all(b is None if cache is None else b.values.dtype == values for b in blocks)
        psi = engine.forward(segments, n, np.empty(2**n, dtype=complex), cache)
        lam = np.empty_like(psi)
        engine.K.expval_and_lambda(psi, diagonal, lam)
        state = psi.copy()
        results.append((state, engine.adjoint_gradient(segments, nparams, psi, lam, n, cache)))
        if weighted and cache is not None:  # the cost layers read the observable's diagonal: no other kept
            assert all(b.values is diagonal for b in blocks)
    np.testing.assert_allclose(results[0][0], results[1][0], atol=1e-13, rtol=0)
    scale = max([1.0, *np.abs(weights or ())])  # a cost layer's gradient grows with its weights
    np.testing.assert_allclose(results[0][1], results[1][1], atol=1e-11 * scale, rtol=0)


# The tile bits tiling_for gives, by (bytes an amplitude, for an adjoint pass); 2^TILE_BITS up to 24 wires.
TILES = {
    (16, False): {25: 16, 26: 16, 27: 17, 28: 17, 29: 18, 30: 18, 31: 19, 36: 19},
    (16, True): {25: 16, 26: 16, 27: 17, 28: 17, 29: 17, 30: 17, 31: 19, 36: 19},  # 4 MiB of tiles: runs of 16 at 29, 30
    (8, False): {25: 16, 26: 16, 27: 17, 28: 17, 29: 18, 30: 18, 31: 19, 36: 19},
    (8, True): {25: 16, 26: 16, 27: 17, 28: 17, 29: 18, 30: 18, 31: 19, 36: 19},
}


@pytest.mark.parametrize("itemsize,adjoint", list(TILES))
@pytest.mark.parametrize("n", [3, 15, 16, 19, 22, 24, 25, 26, 27, 28, 29, 30, 31, 36])
def test_layer_passes_take_every_gate_once_in_tiles_that_fit(n, itemsize, adjoint):
    """The tiling of a product layer: each wire's gate in exactly one pass, every tile 2^TILE_BITS
    amplitudes at most up to 24 wires, then as large as two passes need (up to 2^MAX_TILE_BITS), with
    runs of 2^MIN_RUN_BITS or more, or of 2^ADJOINT_RUN_BITS where that keeps an adjoint sweep's tiles to
    ADJOINT_TILES_BYTES; no gate pairing amplitudes closer than 2^SPECTATORS in a multi-tile state (but in runs
    of 16 amplitudes, whose spectators' gates pair amplitudes 2 and 4 apart: the kernels' scalar loop)."""
    from qbackends.fused import engine
    from qbackends.fused.program import ProductLayer, rotation_matrix

    layer = ProductLayer({w: (rotation_matrix("RY", 0.1 * w), w, 2, 1.0) for w in range(n)})
    tiling = engine.tiling_for(n, itemsize, adjoint)
    tile = TILES[itemsize, adjoint].get(n, kernels.TILE_BITS)
    assert tiling.bits == tile
    seen = []
    for run_bits, high, rest, transposed, _, tile_bits, _, params, _ in engine._layer_passes(layer, n, tiling):
        assert run_bits + high.size <= tile and run_bits + high.size + rest.size == n
        shortest = kernels.ADJOINT_RUN_BITS.get(itemsize, kernels.MIN_RUN_BITS) if adjoint else kernels.MIN_RUN_BITS
        assert transposed or not rest.size or run_bits >= shortest
        for tb, p in zip(tile_bits, params, strict=True):
            if transposed:
                bit = int(high[tb]) if tb < high.size else int(tb) - high.size
            else:
                bit = int(tb) if tb < run_bits else int(high[tb - run_bits])
            assert p == n - 1 - bit
            seen.append(bit)
            if n > kernels.TILE_BITS:  # runs of 2^4 hold the spectators' gates at tile bits 1-3
                assert tb >= (kernels.SPECTATORS if transposed else min(kernels.SPECTATORS, run_bits - kernels.SPECTATORS))
    assert sorted(seen) == list(range(n))
    passes = {3: 1, 15: 1, 16: 2, 19: 2, 22: 2, 24: 2, 25: 2, 26: 2, 27: 2, 28: 2, 29: 2, 30: 2, 31: 2, 36: 3}
    assert len(engine._layer_passes(layer, n, tiling)) == passes[n]


@pytest.mark.parametrize("layers", [2, 4])
@pytest.mark.parametrize("weighted", [False, True])
def test_an_adjoint_pass_in_smaller_tiles_than_the_energys(monkeypatch, layers, weighted):
    """Where an adjoint sweep's tiles would outgrow ADJOINT_TILES_BYTES (29 wires at c128), a gradient step tiles
    its forward pass as its adjoint pass (which reads what the forward pass kept and undid), in smaller tiles than
    an energy alone takes: both as lightning's, also in a QAOA of four layers (the adjoint's chained sweeps)."""
    from qbackends.fused import engine

    monkeypatch.setattr(kernels, "TILE_BITS", 7)
    monkeypatch.setattr(kernels, "MAX_TILE_BITS", 9)
    monkeypatch.setattr(kernels, "MIN_RUN_BITS", 6)
    monkeypatch.setattr(kernels, "ADJOINT_TILES_BYTES", 16 << 9)  # φ's and λ's c128 tiles of 2^8
    n = 12
    assert engine.tiling_for(n, 16) == (9, 6) and engine.tiling_for(n, 16, adjoint=True) == (8, 4)
    graph = qaoa.random_graph(n, 18, seed=5)
    if weighted:
        rng = np.random.default_rng(3)
        graph = qaoa.Graph(n, tuple((u, v, float(rng.uniform(0.5, 2.0))) for u, v, _ in graph.edges))
    _assert_qaoa_as_lightnings(graph, n, layers)


@pytest.mark.parametrize(
    "layers,energy,gradient",
    [
        # |+> with the cost's phases by level, computed in the mixer's first tiled pass (16 written,
        # 1 read per amplitude: 24 edges, uint8 levels); its second pass takes the energy, reading ψ and
        # the cost's levels (17). The gradient keeps the mixer's input: |+> written (17), the mixer read
        # from it (32), its second pass writing λ in place of ψ, that pass already undone on it and its
        # moments taken (33); the first pass undone on λ alone, its moments and the cost's at the input (33).
        (1, 17 + 17, 17 + 32 + 33 + 33),
        # p=2: the first mixer's second pass, the second cost layer and the second mixer's second pass
        # in one sweep (32 + 1), which for the gradient also writes the kept input (16); the last
        # mixer's first pass writes λ with itself undone, its moments taken (33). Adjoint: one sweep
        # undoes the last mixer's second pass on λ, takes its moments at the input and the cost
        # layer's, undoes it and the first mixer's second pass (49); the first mixer's first pass,
        # its input computed, with the first cost layer's moments (17).
        (2, 17 + 33 + 17, 17 + 49 + 33 + 49 + 17),
    ],
)
def test_tracker_reports_the_bytes_the_kernels_move(layers, energy, gradient):
    """QAOA at 16 wires: the bytes per amplitude each pass of the fused simulator moves."""
    n = 16
    import networkx as nx

    cost, mixer = qml.qaoa.maxcut(nx.gnm_random_graph(n, 24, seed=1967))
    device = get_device(FUSED, wires=n)

    ansatz = _qml_qaoa(n, cost, mixer, layers)

    @qml.qnode(device, diff_method="adjoint")
    def circuit(p):
        ansatz(p)
        return qml.expval(cost)

    params = np.random.default_rng(3).uniform(0, 1, (2, layers))
    with qml.Tracker(device) as tracker:
        circuit(qml.numpy.array(params, requires_grad=False))
    assert tracker.totals["bytes_moved"] == energy * 2**n
    with qml.Tracker(device) as tracker:
        qml.grad(circuit)(qml.numpy.array(params, requires_grad=True))
    assert tracker.totals["bytes_moved"] == gradient * 2**n


@pytest.mark.parametrize("layers", [1, 3])
def test_weighted_cost_layers_join_the_mixers_sweeps(layers):
    """A weighted cost layer (qml.qaoa layers, the user's H_C) is applied inside the mixers' sweeps
    from the cost's kept diagonal, as an unweighted one is by level: about the same bytes (8 per
    amplitude for the diagonal instead of 2 for a level; separate passes took three times as many),
    with lightning.qubit's energy and gradient."""
    import networkx as nx

    n = 16
    unweighted, mixer = qml.qaoa.maxcut(nx.gnm_random_graph(n, 24, seed=1967))
    weighted = qml.Hamiltonian(np.random.default_rng(5).uniform(0.1, 2.0, len(unweighted.coeffs)), unweighted.ops)
    params = qml.numpy.array(np.random.default_rng(3).uniform(0, 1, (2, layers)), requires_grad=True)
    moved, results = {}, {}
    for name in (FUSED, "local:pennylane/lightning.qubit"):
        device = get_device(name, wires=n)
        for label, cost in (("weighted", weighted), ("unweighted", unweighted)):
            ansatz = _qml_qaoa(n, cost, mixer, layers)

            @qml.qnode(device, diff_method="adjoint")
            def circuit(p, cost=cost, ansatz=ansatz):
                ansatz(p)
                return qml.expval(cost)

            with qml.Tracker(device) as tracker:
                results[name, label] = float(circuit(params)), qml.grad(circuit)(params)
            moved[name, label] = tracker.totals.get("bytes_moved")
    for label in ("weighted", "unweighted"):
        energy, gradient = results[FUSED, label]
        reference_energy, reference_gradient = results["local:pennylane/lightning.qubit", label]
        assert energy == pytest.approx(reference_energy, abs=1e-10)
        np.testing.assert_allclose(gradient, reference_gradient, atol=1e-10, rtol=0)
    assert moved[FUSED, "weighted"] <= 1.2 * moved[FUSED, "unweighted"], moved  # 1.15 at p=1, 1.05 at p=3


# Single precision: complex64 states worked on in float32, sums (energies, moments) in float64.
# Measured against c128 (p=2, gnm graphs with 1.5 n edges, weights uniform in [0.1, 2)): energies
# within 1.4e-6 and gradients within 2.3e-6 of Σ|w| at 12-26 wires, the most at 22 (docs/benchmarks.md),
# closer than lightning.qubit's c64 (1.3e-4 and 2.2e-5 at 16 wires); within 5.3e-7 at 12-16 wires. The
# tests (12 and 17 wires) allow 2.2e-6 and 3.8e-6, above the worst at any size.
C64_ENERGY, C64_GRADIENT = 2.2e-6, 3.8e-6


def _qaoa_at(precision, graph, layers=2):
    cost, ansatz = qaoa.cost_hamiltonian(graph), qaoa.circuit(graph, layers)
    device = get_device(FUSED, wires=graph.nodes, precision=precision)
    return qml.QNode(lambda p: (ansatz(p), qml.expval(cost))[1], device, diff_method="adjoint")


C64_CASES = [  # (nodes, weighted, layers): 12 wires every way, 17 wires one way unless -m slow
    pytest.param(nodes, weighted, layers, marks=[pytest.mark.slow] if nodes == 17 and (weighted, layers) != (True, 2) else [])
    for nodes in (12, 17)
    for weighted in (False, True)
    for layers in (1, 2, 3)
]


@pytest.mark.parametrize(("nodes", "weighted", "layers"), C64_CASES)
def test_c64_agrees_with_c128_within_the_stated_tolerance(nodes, weighted, layers):
    graph = qaoa.random_graph(nodes, int(1.5 * nodes), seed=nodes + layers)
    if weighted:
        rng = np.random.default_rng(nodes)
        graph = qaoa.Graph(nodes, tuple((u, v, float(rng.uniform(0.1, 2.0))) for u, v, _ in graph.edges))
    scale = sum(abs(w) for *_, w in graph.edges)
    params = random_params((2, layers), seed=nodes)
    single, double = _qaoa_at("c64", graph, layers), _qaoa_at("c128", graph, layers)
    energy, reference = float(single(params)), float(double(params))
    assert abs(energy - reference) <= C64_ENERGY * scale
    assert abs(energy - reference) > 1e-12  # really single precision
    np.testing.assert_allclose(qml.grad(single)(params), qml.grad(double)(params), atol=C64_GRADIENT * scale, rtol=0)


@pytest.mark.parametrize("precision,tol", [("c128", 1e-10), ("c64", C64_GRADIENT)])
@pytest.mark.parametrize("edges", [5, 15, 31, 40, 63, 100, 140])
def test_cuts_of_any_number_of_levels_as_lightning(precision, tol, edges):
    """A cut's phases by level come from registers a permute at a time (16 levels c128, 32 c64, on AVX-512) up to
    32 levels c128 and 128 c64; c64 on AVX2 as products of one to three 8-level tables up to 512 levels; else lane
    by lane from the table: 18-wire cuts of 6 to 141 levels, energy and gradient as lightning.qubit's."""
    graph = qaoa.random_graph(18, edges, seed=edges)
    assert len(graph.edges) == edges
    cost, ansatz = qaoa.cost_hamiltonian(graph), qaoa.circuit(graph, 2)
    params = random_params((2, 2), seed=edges)
    reference = qml.QNode(
        lambda p: (ansatz(p), qml.expval(cost))[1], qml.device("lightning.qubit", wires=18), diff_method="adjoint"
    )
    ours = _qaoa_at(precision, graph)
    assert abs(float(ours(params)) - float(reference(params))) <= tol * edges
    np.testing.assert_allclose(qml.grad(ours)(params), qml.grad(reference)(params), atol=tol * edges, rtol=0)


@pytest.mark.parametrize("precision,tol", [("c128", 1e-10), ("c64", C64_GRADIENT)])
def test_costs_of_more_than_255_terms_keep_two_byte_levels(precision, tol):
    """Levels are one byte for up to 255 unit terms, two beyond: a 12-wire cost of every pair and triple of Z (286
    terms, levels 0-286), energy and gradient as lightning.qubit's."""
    from itertools import combinations

    from qbackends.fused import engine

    n = 12
    ops = [qml.prod(*(qml.Z(w) for w in ws)) for k in (2, 3) for ws in combinations(range(n), k)]
    cost, mixer = qml.Hamiltonian(np.ones(len(ops)), ops), qml.qaoa.x_mixer(range(n))
    assert (engine.level_dtype(len(ops)), engine.level_dtype(255)) == (np.uint16, np.uint8)
    params = random_params((2, 2), seed=3)

    def energy(p, device):
        return qml.QNode(lambda p: (_qml_qaoa(n, cost, mixer, 2)(p), qml.expval(cost))[1], device, diff_method="adjoint")(p)

    ours, reference = get_device(FUSED, wires=n, precision=precision), qml.device("lightning.qubit", wires=n)
    assert abs(float(energy(params, ours)) - float(energy(params, reference))) <= tol * len(ops)
    np.testing.assert_allclose(qml.grad(energy)(params, ours), qml.grad(energy)(params, reference), atol=tol * len(ops), rtol=0)


def test_c64_state_probabilities_and_samples():
    """A c64 device returns a complex64 state; probabilities (summed in float64) and samples as c128's."""
    graph = qaoa.random_graph(10, 15, seed=3)
    ansatz, params = qaoa.circuit(graph, 2), random_params((2, 2), seed=3)
    outputs = {}
    for precision in ("c64", "c128"):
        device = get_device(FUSED, wires=10, precision=precision)
        state = qml.QNode(lambda p: (ansatz(p), qml.state())[1], device)(params)
        probs = qml.QNode(lambda p: (ansatz(p), qml.probs(wires=[0, 3]))[1], device)(params)
        outputs[precision] = state, probs
    assert outputs["c64"][0].dtype == np.complex64 and outputs["c128"][0].dtype == np.complex128
    np.testing.assert_allclose(outputs["c64"][0], outputs["c128"][0], atol=1e-6)
    assert outputs["c64"][1].dtype == np.float64 and abs(outputs["c64"][1].sum() - 1) < 1e-6
    np.testing.assert_allclose(outputs["c64"][1], outputs["c128"][1], atol=1e-6)
    sampled = get_device(FUSED, wires=10, precision="c64", seed=7)
    counts = qml.set_shots(qml.QNode(lambda p: (ansatz(p), qml.probs(wires=[0, 3]))[1], sampled), 20000)(params)
    np.testing.assert_allclose(counts, outputs["c128"][1], atol=0.02)


def test_c_dtype_other_than_complex_is_refused_typed():
    from qbackends.errors import UnsupportedOptionError
    from qbackends.fused.device import FusedQubit

    with pytest.raises(UnsupportedOptionError) as err:
        FusedQubit(wires=2, c_dtype=np.float32)
    assert str(err.value).startswith(
        "qbackends.fused.qubit has no c_dtype <class 'numpy.float32'>; choices: numpy.complex128, numpy.complex64."
    )
    assert "c_dtype=numpy.complex64" in err.value.fix


def test_c64_moves_half_the_state_bytes_and_holds_half_the_memory():
    """The tracker counts 8 bytes an amplitude at c64 (a level stays 1: 24 edges): the p=1 energy at 17 wires
    is two sweeps that each move a state once and read the levels (the c128 case: 17 + 17 above; a
    c64 tile holds a c128 tile's 2^15 amplitudes); the
    peak of gradient steps at 20 wires stays within what the memory guard declares (ψ, λ, the levels) and a few
    MiB that do not grow with the wires."""
    n = 17
    import networkx as nx

    cost, mixer = qml.qaoa.maxcut(nx.gnm_random_graph(n, 24, seed=1967))
    moved = {}
    for precision in ("c64", "c128"):
        device = get_device(FUSED, wires=n, precision=precision)

        @qml.qnode(device, diff_method="adjoint")
        def circuit(p):
            for w in range(n):
                qml.Hadamard(w)
            qml.qaoa.cost_layer(p[0], cost)
            qml.qaoa.mixer_layer(p[1], mixer)
            return qml.expval(cost)

        with qml.Tracker(device) as tracker:
            circuit(qml.numpy.array([0.3, 0.4], requires_grad=False))
        moved[precision] = tracker.totals["bytes_moved"] / 2**n
    assert moved == {"c64": 9 + 9, "c128": 17 + 17}

    graph, params = qaoa.random_graph(20, 30, 1967), random_params((2, 2))
    qml.grad(_qaoa_at("c64", qaoa.random_graph(12, 18, 1)))(params)  # the c64 kernels loaded
    tracemalloc.start()
    qnode = _qaoa_at("c64", graph)
    for _ in range(2):
        qml.grad(qnode)(params)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    declared = capabilities.working_set_bytes(get_registry().backends["qbackends/fused.qubit"], graph.nodes, "c64")
    assert declared == (2 * 8 + 1) * 2**graph.nodes  # ψ, λ and the cost's levels (30 edges: a byte each)
    # beyond them, about 2.7 MiB at 18, 20 and 22 wires alike (PennyLane's and the tables' small arrays)
    assert peak <= declared + (4 << 20), (
        f"peak {peak / (8 * 2**graph.nodes):.2f} c64 state vectors > {declared / (8 * 2**graph.nodes)}"
    )


@pytest.mark.parametrize("precision", ["c128", "c64"])
def test_a_mixer_the_cost_layer_and_the_mixer_before_it_are_undone_in_one_sweep(monkeypatch, precision):
    """Where the first cost layer does not lead back to |+⟩ cheaply (p = 5; a CNOT after the Hadamards) the adjoint
    pass undoes a mixer, the cost layer before it and the mixer before that on φ and λ in one sweep
    (engine._fused_layer_adjoint); when that earlier mixer is the first segment with parameters the sweep takes its
    moments and writes nothing back. Gradients as lightning.qubit's (c64: within the stated tolerance)."""
    n = 12
    graph = qaoa.random_graph(n, 18, seed=3)
    cost = qaoa.cost_hamiltonian(graph)
    scale = sum(abs(w) for *_, w in graph.edges)
    mixer = qml.Hamiltonian([1.0] * n, [qml.X(w) for w in range(n)])
    swept = []
    fused_adjoint = engine._fused_layer_adjoint
    monkeypatch.setattr(engine, "_fused_layer_adjoint", lambda *a: swept.append(a[9]) or fused_adjoint(*a))  # undo_low

    def deep(p):  # as users write it: one parameter per cost layer
        for w in range(n):
            qml.Hadamard(w)
        for layer in range(5):
            qml.qaoa.cost_layer(p[0][layer], cost)
            qml.qaoa.mixer_layer(p[1][layer], mixer)
        return qml.expval(cost)

    def fixed_block_first(p):
        for w in range(n):
            qml.Hadamard(w)
        qml.CNOT([0, 1])  # no parameter: the first trainable segment is the layer after it
        for layer in range(3):
            for w in range(n):
                qml.RX(p[layer] * (1 + 0.1 * w), wires=w)
            if layer < 2:
                qml.qaoa.cost_layer(p[3 + layer], cost)
        return qml.expval(cost)

    reference = qml.device("lightning.qubit", wires=n)
    for circuit, params in ((deep, random_params((2, 5), seed=5)), (fixed_block_first, random_params(5, seed=6))):
        ours = qml.QNode(circuit, get_device(FUSED, wires=n, precision=precision), diff_method="adjoint")
        theirs = qml.QNode(circuit, reference, diff_method="adjoint")
        tol = (1e-10, 1e-10) if precision == "c128" else (C64_ENERGY * scale, C64_GRADIENT * scale)
        assert abs(float(ours(params)) - float(theirs(params))) <= tol[0]
        np.testing.assert_allclose(qml.grad(ours)(params), qml.grad(theirs)(params), atol=tol[1], rtol=0)
    assert set(swept) == {True, False}  # both kinds of sweep ran


def test_a_circuit_that_needs_more_than_the_least_is_sized_when_it_runs(monkeypatch):
    """get_device sizes fused.qubit for ψ, λ and a cost's levels; a weighted cost's diagonal takes more, and the device
    sizes that circuit before it allocates anything: here (20 wires, c128, this machine's available memory recorded
    as 36 MiB) the unweighted gradient (2 states of 16 MiB and 2 MiB of levels) runs, the weighted one (an 8 MiB
    diagonal) is refused by name, and runs with ignore_memory=True."""
    from qbackends import probe
    from qbackends.errors import InsufficientMemoryError

    n = 20
    graph = qaoa.random_graph(n, 30, 1967)
    rng = np.random.default_rng(2)
    weighted = qaoa.Graph(n, tuple((u, v, float(rng.uniform(0.1, 2.0))) for u, v, _ in graph.edges))
    params = random_params((2, 2))
    monkeypatch.setattr(probe, "host_memory_available", lambda: 36 << 20)
    qml.grad(_qaoa_at("c128", graph))(params)
    with pytest.raises(InsufficientMemoryError) as refused:
        qml.grad(_qaoa_at("c128", weighted))(params)
    assert str(refused.value) == (
        "fused.qubit cannot run this circuit of 20 wires: it holds 2 states of 0.0156 GiB (16777216 bytes), its cost's "
        "1 diagonal of weighted terms, 0.0391 GiB (41943040 bytes) more than this device holds now, and this machine has "
        "0.0352 GiB (37748736 bytes) available. Fix: precision='c64' halves the state's memory; use fewer wires; or pass "
        "ignore_memory=True (to get_device or the device) if you know better."
    )
    cost, ansatz = qaoa.cost_hamiltonian(weighted), qaoa.circuit(weighted, 2)
    device = get_device(FUSED, wires=n, ignore_memory=True)
    gradient = qml.grad(qml.QNode(lambda p: (ansatz(p), qml.expval(cost))[1], device, diff_method="adjoint"))(params)
    monkeypatch.undo()
    expected = qml.grad(_qaoa_at("c128", weighted))(params)
    np.testing.assert_allclose(gradient, expected, atol=1e-12)


def test_what_a_circuits_results_make_is_sized_before_it_runs(monkeypatch):
    """Beyond ψ the device counts what each result makes and drops: a returned state (two copies of ψ), probabilities
    (|ψ|² over every amplitude, 8 bytes each; summed over the other wires and put in the wires' order unless they are
    every wire in order). With 28 MiB available (recorded), 20 wires c128 (ψ 16 MiB): the probabilities of every wire
    in order (8 MiB more: a 30-wire c64 run's last readout needs this) and of one wire run; of every wire in reverse
    order (24 MiB more) and the state (32 MiB) are refused by name before anything is allocated."""
    from qbackends import probe
    from qbackends.errors import InsufficientMemoryError

    n = 20
    device = get_device(FUSED, wires=n)  # screened for an adjoint gradient's two states: more than the 28 MiB below
    monkeypatch.setattr(probe, "host_memory_available", lambda: 28 << 20)

    def circuit(measure):
        @qml.qnode(device)
        def run():
            for w in range(n):
                qml.RX(0.1 * w, w)
            return measure()

        return run

    marginals = [np.array([np.cos(0.05 * w) ** 2, np.sin(0.05 * w) ** 2]) for w in range(n)]
    expected = marginals[0]
    for m in marginals[1:]:
        expected = np.kron(expected, m)
    np.testing.assert_allclose(circuit(lambda: qml.probs(wires=range(n)))(), expected, atol=1e-12)
    np.testing.assert_allclose(circuit(lambda: qml.probs(wires=[0]))(), [1.0, 0.0], atol=1e-12)
    device._scratch.clear()  # nothing held: every byte is new again
    with pytest.raises(InsufficientMemoryError) as refused:
        circuit(lambda: qml.probs(wires=range(n - 1, -1, -1)))()
    assert "0.0234 GiB (25165824 bytes) of results and scratch" in str(refused.value)
    with pytest.raises(InsufficientMemoryError) as refused:
        circuit(qml.state)()
    assert str(refused.value) == (
        "fused.qubit cannot run this circuit of 20 wires: it holds 1 state of 0.0156 GiB (16777216 bytes), 0.0312 GiB "
        "(33554432 bytes) of results and scratch, 0.0469 GiB (50331648 bytes) more than this device holds now, and this "
        "machine has 0.0273 GiB (29360128 bytes) available. Fix: precision='c64' halves the state's memory; use fewer "
        "wires; or pass ignore_memory=True (to get_device or the device) if you know better."
    )


def test_cost_layers_of_several_weightings_keep_their_diagonals_between_runs(monkeypatch):
    """Three cost layers whose weights are not proportional (and the observable) need four diagonals at once: the
    device sizes them all, keeps them all, and a second gradient step builds none again."""
    n = 20
    graph = qaoa.random_graph(n, 30, 1967)
    rng = np.random.default_rng(3)
    costs = [
        qaoa.cost_hamiltonian(qaoa.Graph(n, tuple((u, v, float(rng.uniform(0.1, 2.0))) for u, v, _ in graph.edges)))
        for _ in range(4)
    ]
    mixer = qml.Hamiltonian([1.0] * n, [qml.X(w) for w in range(n)])

    @qml.qnode(get_device(FUSED, wires=n), diff_method="adjoint")
    def circuit(p):
        for w in range(n):
            qml.Hadamard(w)
        for layer in range(3):
            qml.qaoa.cost_layer(p[0][layer], costs[layer])
            qml.qaoa.mixer_layer(p[1][layer], mixer)
        return qml.expval(costs[3])

    params = random_params((2, 3))
    first = qml.grad(circuit)(params)
    built = []
    diag_values = engine.K.diag_values
    monkeypatch.setattr(engine.K, "diag_values", lambda *a: built.append(a[0].size) or diag_values(*a))
    np.testing.assert_allclose(qml.grad(circuit)(params), first, atol=1e-12)
    assert built == []


def test_a_step_plans_each_layer_and_block_once_per_tiling_and_cache():
    """A step asks for a layer's passes and a block's sweep several times (passes, fusions, the adjoint): the same plan
    comes back, made once per tiling and cache. A block no kept diagonal sweeps yet is planned again when asked, and
    found once the cache keeps its diagonal."""
    ops = [qml.Hadamard(w) for w in range(4)] + [qml.IsingZZ(0.3, [0, 1]), qml.IsingZZ(0.3, [1, 2])]
    segments, _ = compile_operations(ops + [qml.RX(0.2, w) for w in range(4)], {w: w for w in range(4)}, 4)
    layer, block = segments[0], segments[1]
    tiling = engine.tiling_for(4)
    assert engine._layer_passes(layer, 4, tiling) is engine._layer_passes(layer, 4, tiling)
    cache, other = engine.DiagonalCache(), engine.DiagonalCache()
    swept = engine.sweep_block(block, 4, cache, 1.0)
    assert swept is not None and engine.sweep_block(block, 4, cache, 1.0) is swept
    elsewhere = engine.sweep_block(block, 4, other, 1.0)  # another cache's tables, the same values
    assert elsewhere is not swept and np.array_equal(elsewhere.values, swept.values)
    undone = engine.sweep_block(block, 4, cache, -1.0)
    np.testing.assert_allclose(undone.phases, swept.phases.conj(), rtol=0, atol=1e-15)

    weighted, _ = compile_operations([qml.IsingZZ(0.3, [0, 1]), qml.IsingZZ(0.7, [1, 2])], {w: w for w in range(4)}, 4)
    block = weighted[0]  # two parameters, unequal angles: only a kept diagonal sweeps it
    assert engine.sweep_block(block, 4, cache, 1.0) is None and not block.plans
    cache.get(4, np.array(block.masks, dtype=np.int64), np.array(block.coefs))
    assert engine.sweep_block(block, 4, cache, 1.0) is not None
