"""batched.qubit: a broadcast minibatch against default.qubit (values 1e-10) and parameter-shift (gradients 1e-8)."""

from __future__ import annotations

import zlib

import numpy as np
import pennylane as qml
import pytest
import torch

from qbackends import capabilities, get_device, get_registry
from qbackends.batched.device import BatchedQubit
from qbackends.batched.layer import TorchLayer
from qbackends.batched.program import NATIVE, is_native
from qbackends.errors import UnsupportedCircuitError, UnsupportedOptionError
from qbackends.workloads import qnn

BATCHED = "local:qbackends/batched.qubit"
DECLARED = capabilities.declared_operations(get_registry().backends["qbackends/batched.qubit"])
ROWS = 3
NWIRES = 4
H = qml.Hamiltonian([0.7, -0.4, 0.25], [qml.Z(0) @ qml.X(2), qml.Y(1), qml.X(0) @ qml.Y(1) @ qml.Z(3)])


def _gate(name: str, x_column, weights):
    """``name`` on wires 1.. with its first parameter broadcast (an input column), the rest weights."""
    cls = getattr(qml, name)
    nparams = cls.num_params if isinstance(cls.num_params, int) else 1
    nwires = cls.num_wires if isinstance(cls.num_wires, int) else 3
    wires = [1, 3, 0][:nwires] if nwires <= 3 else None
    params = [x_column, *weights[: max(nparams - 1, 0)]][:nparams]
    if name == "PauliRot":
        return cls(x_column, "XYZ", wires=[1, 3, 0])
    if name == "MultiRZ":
        return cls(x_column, wires=[1, 3, 0])
    if name == "GlobalPhase":
        return cls(x_column, wires=[1])
    return cls(*params, wires=wires[:nwires])


def _circuit(name: str):
    def circuit(x, w):
        for i in range(NWIRES):
            qml.RY(x[..., i], wires=i)
        for i in range(NWIRES - 1):
            qml.CNOT([i, i + 1])
        _gate(name, x[..., NWIRES], w)
        for i in range(NWIRES):
            qml.RX(w[3 + i], wires=i)
        qml.CRot(w[0], w[1], w[2], wires=[2, 0])
        return qml.expval(H), qml.probs(wires=[3, 1])

    return circuit


@pytest.mark.parametrize("name", sorted(DECLARED.native))
def test_every_declared_gate_on_a_broadcast_batch(name):
    """Values of a random batch against default.qubit; the VJP for inputs and shared weights against
    parameter-shift on default.qubit, row by row."""
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    x = rng.uniform(-np.pi, np.pi, size=(ROWS, NWIRES + 1))
    w = rng.uniform(-np.pi, np.pi, size=NWIRES + 3)
    dy_e, dy_p = rng.normal(size=ROWS), rng.normal(size=(ROWS, 4))

    batched = qml.QNode(_circuit(name), get_device(BATCHED, wires=NWIRES), interface="torch", diff_method="adjoint")
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    e, p = batched(xt, wt)
    ((e * torch.tensor(dy_e)).sum() + (p * torch.tensor(dy_p)).sum()).backward()

    reference = qml.QNode(_circuit(name), qml.device("default.qubit", wires=NWIRES), diff_method="parameter-shift")
    ref_e, ref_p = reference(x, w)
    np.testing.assert_allclose(e.detach().numpy(), ref_e, atol=1e-10, rtol=0)
    np.testing.assert_allclose(p.detach().numpy(), ref_p, atol=1e-10, rtol=0)

    grad_x, grad_w = np.zeros_like(x), np.zeros_like(w)
    for b in range(ROWS):

        def cost(xb, wb, b=b):
            eb, pb = reference(xb, wb)
            return eb * dy_e[b] + qml.math.sum(pb * dy_p[b])

        gx, gw = qml.grad(cost)(qml.numpy.array(x[b], requires_grad=True), qml.numpy.array(w, requires_grad=True))
        grad_x[b], grad_w = gx, grad_w + gw
    np.testing.assert_allclose(xt.grad.numpy(), grad_x, atol=1e-8, rtol=0)
    np.testing.assert_allclose(wt.grad.numpy(), grad_w, atol=1e-8, rtol=0)


def test_declared_operations_are_what_the_kernels_run():
    fixed = {"Hadamard", "PauliX", "PauliY", "PauliZ", "S", "T", "SX"}  # run by their matrix
    assert set(DECLARED.native) - fixed == NATIVE - {"Barrier", "Snapshot"}
    assert all(is_native(getattr(qml, name)(wires=0)) for name in fixed)
    assert is_native(qml.adjoint(qml.S(0))) and not is_native(qml.U3(0.1, 0.2, 0.3, wires=0))


def test_gates_it_does_not_run_are_lowered_exactly():
    """U3, IsingXY, a controlled rotation with a zero control: PennyLane's decompositions, exact values."""

    def circuit(x):
        qml.Hadamard(0)
        qml.U3(x[..., 0], 0.3, -0.2, wires=1)
        qml.IsingXY(x[..., 1], wires=[0, 1])
        qml.ctrl(qml.RY(x[..., 0], wires=2), control=[0, 1], control_values=[0, 1])
        return qml.expval(qml.X(2) @ qml.Z(1))

    x = np.random.default_rng(1).uniform(-2, 2, size=(5, 2))
    ours = qml.QNode(circuit, get_device(BATCHED, wires=3))(x)
    np.testing.assert_allclose(ours, qml.QNode(circuit, qml.device("default.qubit", wires=3))(x), atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "measure, message",
    [
        (lambda: qml.classical_shadow(wires=[0]), r"does not compute shadow\(wires=\[0\]\) \(ClassicalShadowMP\) analytically"),
        (lambda: qml.sample(wires=[0]), r"does not compute sample\(wires=\[0\]\) \(SampleMP\).*it computes DensityMatrixMP, "),
        (lambda: qml.sample(qml.Z(0)), "is analytic"),
    ],
)
def test_what_it_does_not_compute_is_refused_by_name(measure, message):
    @qml.qnode(get_device(BATCHED, wires=1), shots=10 if message == "is analytic" else None)
    def circuit():
        qml.RX(0.3, 0)
        return measure()

    with pytest.raises(UnsupportedCircuitError, match=message):
        circuit()


def _layers(nwires: int):
    torch.manual_seed(7)
    fast = qnn.quantum_layer(nwires, get_device(BATCHED, wires=nwires))
    reference = qnn.quantum_layer(nwires, qml.device("default.qubit", wires=nwires), "backprop")
    reference.load_state_dict(fast.state_dict())
    return fast.double(), reference.double()


@pytest.mark.parametrize("nwires", [1, 4, 7])
def test_the_qnn_layer_compiles_to_one_call_and_agrees(nwires):
    fast, reference = _layers(nwires)
    assert isinstance(fast, TorchLayer) and fast.plan(nwires) is not None
    x = torch.rand(16, nwires, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 6 - 3
    dy = torch.randn(16, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    grads = []
    for layer in (fast, reference):
        xi = x.clone().requires_grad_(True)
        out = layer(xi)
        (out * dy).sum().backward()
        grads.append((out.detach(), xi.grad, [p.grad for p in layer.parameters()]))
    (v1, g1, w1), (v2, g2, w2) = grads
    torch.testing.assert_close(v1, v2, atol=1e-12, rtol=0)
    torch.testing.assert_close(g1, g2, atol=1e-12, rtol=0)
    for a, b in zip(w1, w2, strict=True):  # unused weights (CRot on one wire): zeros here, None there
        torch.testing.assert_close(a, b if b is not None else torch.zeros_like(a), atol=1e-12, rtol=0)
    single = fast(x[0])  # one sample, no batch dimension
    assert single.shape == () and abs(single.item() - v1[0].item()) < 1e-12


def test_a_circuit_that_does_not_trace_runs_through_the_qnode():
    """An angle computed from an input (2·x) cannot be matched to a column: the layer falls back to
    the QNode, with the same results as PennyLane's TorchLayer."""
    dev = get_device(BATCHED, wires=2)

    @qml.qnode(dev, diff_method="adjoint")
    def circuit(inputs, w):
        qml.RX(2 * inputs[..., 0], wires=0)
        qml.RY(inputs[..., 1], wires=1)
        qml.CNOT([0, 1])
        qml.RZ(w[0], wires=1)
        qml.RX(0.3, wires=1)
        return qml.expval(qml.Y(1))

    layer = TorchLayer(circuit, {"w": (1,)}).double()
    x = torch.rand(5, 2, dtype=torch.float64)
    assert layer.plan(2) is None
    expected = qml.qnn.TorchLayer(circuit, {"w": (1,)}).double()
    expected.load_state_dict(layer.state_dict())
    torch.testing.assert_close(layer(x), expected(x), atol=1e-12, rtol=0)


def test_constants_in_a_traced_circuit_stay_constants():
    dev = get_device(BATCHED, wires=2)

    @qml.qnode(dev, diff_method="adjoint")
    def circuit(inputs, w):
        qml.RY(inputs[..., 0], wires=0)
        qml.RX(0.3, wires=1)
        qml.CRX(w[0], wires=[0, 1])
        return qml.expval(qml.Z(1))

    layer = TorchLayer(circuit, {"w": (1,)}).double()
    assert layer.plan(1) is not None
    x = torch.rand(4, 1, dtype=torch.float64, requires_grad=True)
    reference = qml.qnn.TorchLayer(qml.QNode(circuit.func, qml.device("default.qubit", wires=2)), {"w": (1,)}).double()
    reference.load_state_dict(layer.state_dict())
    torch.testing.assert_close(layer(x), reference(x), atol=1e-12, rtol=0)


def test_a_layer_of_several_expectations_compiles_and_agrees():
    """The transfer-learning circuit: H, RY embedding, CNOT ladders and RY weights, <Z_i> of every wire."""
    wires = 4

    def circuit(inputs, weights):
        for w in range(wires):
            qml.Hadamard(w)
            qml.RY(inputs[..., w], wires=w)
        for layer in range(2):
            for w in range(0, wires - 1, 2):
                qml.CNOT([w, w + 1])
            for w in range(1, wires - 1, 2):
                qml.CNOT([w, w + 1])
            for w in range(wires):
                qml.RY(weights[layer, w], wires=w)
        return [qml.expval(qml.Z(w)) for w in range(wires)]

    shapes = {"weights": (2, wires)}
    layer = TorchLayer(qml.QNode(circuit, BatchedQubit(wires=wires), diff_method="adjoint", interface="torch"), shapes).double()
    assert layer.plan(wires) is not None and len(layer.plan(wires).terms) == wires
    reference = qml.qnn.TorchLayer(
        qml.QNode(circuit, qml.device("default.qubit", wires=wires), interface="torch"), shapes
    ).double()
    reference.load_state_dict(layer.state_dict())
    x = torch.rand(16, wires, dtype=torch.float64, generator=torch.Generator().manual_seed(3), requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    out, expected = layer(x), reference(x_ref)
    assert out.shape == (16, wires)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=0)
    cotangent = torch.linspace(-1, 1, 16 * wires, dtype=torch.float64).reshape(16, wires)
    (out * cotangent).sum().backward()
    (expected * cotangent).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, atol=1e-10, rtol=0)
    torch.testing.assert_close(layer.weights.grad, reference.weights.grad, atol=1e-10, rtol=0)
    single = torch.rand(wires, dtype=torch.float64)  # one sample: a vector of the expectations
    torch.testing.assert_close(layer(single), reference(single), atol=1e-12, rtol=0)


def test_a_jacobian_of_an_unbroadcast_circuit_matches_parameter_shift():
    """compute_derivatives runs one adjoint pass per result entry on the same final state."""

    def circuit(x):
        qml.RX(x[0], wires=0)
        qml.CRY(x[1], wires=[0, 1])
        return qml.expval(qml.Z(0)), qml.probs(wires=[1])

    x = qml.numpy.array([0.4, -1.1], requires_grad=True)
    ours = qml.QNode(circuit, BatchedQubit(wires=2), diff_method="adjoint")
    reference = qml.QNode(circuit, qml.device("default.qubit", wires=2), diff_method="parameter-shift")
    tape = qml.workflow.construct_tape(ours)(x)
    jac = BatchedQubit(wires=2).compute_derivatives([tape])[0]
    expected = qml.jacobian(lambda v: qml.math.hstack(reference(v)))(x)
    np.testing.assert_allclose(np.vstack([np.stack(jac[0]), np.stack(jac[1]).T]), expected, atol=1e-10)


def test_torchlayer_still_evaluates_through_the_overridden_method():
    """qbackends' layers override qml.qnn.TorchLayer._evaluate_qnode (no public hook): PennyLane's forward must
    still call it with the 2-D minibatch, or the compiled path would be skipped silently."""
    import inspect

    calls = []

    class Probe(qml.qnn.TorchLayer):
        def _evaluate_qnode(self, x):
            calls.append(tuple(x.shape))
            return super()._evaluate_qnode(x)

    @qml.qnode(qml.device("default.qubit", wires=1), interface="torch")
    def circuit(inputs, w):
        qml.RX(inputs[..., 0], 0)
        qml.RY(w[0], 0)
        return qml.expval(qml.Z(0))

    Probe(circuit, {"w": (1,)})(torch.rand(5, 1))
    assert calls == [(5, 1)]
    assert list(inspect.signature(qml.qnn.TorchLayer._evaluate_qnode).parameters) == ["self", "x"]


def test_the_tracker_counts_each_batch_as_pennylanes_devices_do():
    device = BatchedQubit(wires=2)

    @qml.qnode(device, diff_method="parameter-shift")
    def circuit():
        return qml.expval(qml.X(0))

    with qml.Tracker(device) as tracker:
        circuit()
    assert tracker.history["batches"] == [1] and tracker.history["executions"] == [1]


def test_a_vjp_reuses_the_forward_run_only_of_the_same_gates_at_the_same_parameters():
    """A training step's backward pass asks for the VJP of the circuits its forward pass just ran: their final states
    are reused. Another angle, another gate or other settings (a controlled gate's base) are run afresh."""
    from pennylane.devices import ExecutionConfig

    def tape(angle, gate=qml.RY, base=qml.PauliX):
        ops = [qml.RX(np.array([0.1, 0.2, 0.3]), wires=0), gate(angle, wires=1), qml.ctrl(base(1), control=0)]
        script = qml.tape.QuantumScript(ops, [qml.expval(qml.Z(0) @ qml.Z(1)), qml.probs(wires=[1])])
        script.trainable_params = [0, 1]
        return script

    config = ExecutionConfig(gradient_method="adjoint", use_device_jacobian_product=True, grad_on_execution=False)
    cotangent = [(np.array([1.0, -0.5, 0.25]), np.array([[0.3, -0.2]] * 3))]
    for forward, backward in [
        (tape(0.4), tape(0.4)),
        (tape(0.4), tape(0.5)),
        (tape(0.4), tape(0.4, qml.RZ)),
        (tape(0.4), tape(0.4, base=qml.PauliY)),
    ]:
        dev, fresh = BatchedQubit(wires=2), BatchedQubit(wires=2)
        dev.execute((forward,), config)
        reused = dev.compute_vjp((backward,), cotangent, config)
        expected = fresh.compute_vjp((backward,), cotangent, config)
        assert all(np.allclose(a, b, atol=1e-14, rtol=0) for a, b in zip(reused[0], expected[0], strict=True))
        assert (dev._again(backward) is not None) == (backward is forward or forward.operations == backward.operations)
    # a device without wires lays each circuit out on its own wires: one that measures another wire is run afresh
    narrow = qml.tape.QuantumScript([qml.RX(0.3, 0)], [qml.expval(qml.Z(0))], trainable_params=[0])
    wide = qml.tape.QuantumScript([qml.RX(0.3, 0)], [qml.expval(qml.Z(0) @ qml.Z(1))], trainable_params=[0])
    dev = BatchedQubit()
    dev.execute((narrow, wide), config)
    vjps = dev.compute_vjp((narrow, wide), (1.0, 1.0), config)
    assert np.allclose([v[0] for v in vjps], [-np.sin(0.3)] * 2, atol=1e-14)


def test_a_device_lowers_each_structure_once_and_never_takes_one_for_another():
    """One device, circuits that differ only in a Pauli word, a gate, its wires or its number of parameters: each
    gives default.qubit's value, the second time from the program kept for its structure."""
    dev, reference = BatchedQubit(wires=3), qml.device("default.qubit", wires=3)
    circuits = [
        [qml.PauliRot(0.4, "XY", wires=[0, 1])],
        [qml.PauliRot(0.4, "YX", wires=[0, 1])],
        [qml.PauliRot(0.4, "XY", wires=[1, 2])],
        [qml.RX(0.4, wires=0), qml.CNOT(wires=[0, 2])],
        [qml.RY(0.4, wires=0), qml.CNOT(wires=[0, 2])],
        [qml.Rot(0.4, 0.5, 0.6, wires=0), qml.CNOT(wires=[0, 2])],
        [qml.prod(qml.Hadamard(0), qml.S(0))],  # run as their matrices: the same name, wires and parameters
        [qml.prod(qml.S(0), qml.Hadamard(0))],
    ]
    for _ in range(2):
        for ops in circuits:
            tape = qml.tape.QuantumScript([qml.Hadamard(1), *ops], [qml.expval(qml.Y(0) @ qml.X(1) + qml.Z(2))])
            assert np.isclose(dev.execute((tape,))[0], reference.execute((tape,))[0], atol=1e-12), ops
    assert len(dev._programs) == len(circuits) - 2  # the products are lowered each time


# Single precision: complex64 states worked on in float32; gate matrices, sums, expectations and gradients in
# float64. Measured against c128 over every declared gate (4 wires, ROWS rows, angles in [-π, π]): values
# within 2.2e-7, VJPs within 3.3e-7; over 60 seeds of the SX case, values within 4.3e-7. The test allows 1e-6
# and 2e-6.
C64_VALUE, C64_VJP = 1e-6, 2e-6


@pytest.mark.parametrize("name", sorted(DECLARED.native))
def test_c64_agrees_with_c128_on_every_declared_gate(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # the same angles in every process
    x = rng.uniform(-np.pi, np.pi, size=(ROWS, NWIRES + 1))
    w = rng.uniform(-np.pi, np.pi, size=NWIRES + 3)
    dy_e, dy_p = torch.tensor(rng.normal(size=ROWS)), torch.tensor(rng.normal(size=(ROWS, 4)))
    out = {}
    for precision in ("c64", "c128"):
        device = get_device(BATCHED, wires=NWIRES, precision=precision)
        assert device.dtype == (np.complex64 if precision == "c64" else np.complex128)
        qnode = qml.QNode(_circuit(name), device, interface="torch", diff_method="adjoint")
        xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
        e, p = qnode(xt, wt)
        ((e * dy_e).sum() + (p * dy_p).sum()).backward()
        assert e.dtype == p.dtype == torch.float64
        out[precision] = [t.detach().numpy() for t in (e, p, xt.grad, wt.grad)]
    for single, double, tolerance in zip(out["c64"], out["c128"], (C64_VALUE, C64_VALUE, C64_VJP, C64_VJP), strict=True):
        np.testing.assert_allclose(single, double, atol=tolerance, rtol=0)
    assert max(np.abs(s - d).max() for s, d in zip(out["c64"], out["c128"], strict=True)) > 1e-12  # really single


def test_c64_is_refused_by_name_where_the_dtype_is_not_a_complex_one():
    with pytest.raises(UnsupportedOptionError, match=r"^qbackends.batched.qubit has no c_dtype 'float32'; choices"):
        BatchedQubit(wires=2, c_dtype="float32")


def test_the_qnn_layer_runs_a_c64_device_in_single_precision():
    """The compiled layer keeps the device's precision: c64 within the stated tolerance of c128, and not equal to it."""
    x = torch.rand(16, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 6 - 3
    out = {}
    for precision in ("c64", "c128"):
        torch.manual_seed(7)
        layer = qnn.quantum_layer(4, get_device(BATCHED, wires=4, precision=precision)).double()
        assert layer.plan(4).dtype == (np.complex64 if precision == "c64" else np.complex128)
        xi = x.clone().requires_grad_(True)
        values = layer(xi)
        values.sum().backward()
        out[precision] = (values.detach().numpy(), xi.grad.numpy())
    (v64, g64), (v128, g128) = out["c64"], out["c128"]
    np.testing.assert_allclose(v64, v128, atol=C64_VALUE, rtol=0)
    np.testing.assert_allclose(g64, g128, atol=C64_VJP, rtol=0)
    assert np.abs(v64 - v128).max() > 1e-12  # really single precision


@pytest.mark.parametrize("precision", ["c128", "c64"])
def test_a_probabilities_jacobian_stays_within_the_guard_and_is_right_across_its_pieces(precision):
    """The adjoint λ of a probabilities cotangent is built a piece of 2^14 amplitudes at a time (16 wires: four
    pieces): the peak is ψ, λ and the pass's copy of ψ, not a whole-state index and weights beside them (c64 held
    4.57 states at 18 wires so, over the guard's 4.0; now 3.11, and 3.41 at 16). The Jacobian is default.qubit's."""
    import tracemalloc

    n = 16

    def circuit(p):
        for w in range(n):
            qml.RY(p[w], wires=w)
        for w in range(n - 1):
            qml.CNOT([w, w + 1])
        for w in range(n):
            qml.RX(p[n + w], wires=w)
        return qml.probs(wires=[0, 7, 15])

    params = qml.numpy.array(np.linspace(0.1, 1.3, 2 * n), requires_grad=True)
    ours = qml.QNode(circuit, get_device(BATCHED, wires=n, precision=precision), diff_method="adjoint")
    expected = qml.jacobian(qml.QNode(circuit, qml.device("default.qubit", wires=n), diff_method="backprop"))(params)
    got = qml.jacobian(ours)(params)
    tracemalloc.start()
    qml.jacobian(ours)(params)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_allclose(got, expected, atol=1e-12 if precision == "c128" else 2e-6, rtol=0)
    assert peak / ((16 if precision == "c128" else 8) << n) < 4.0  # the memory guard's figure for a row
