"""Every decomposition rule on every installed CPU backend: lowered, and exact against parameter-shift."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from circuits import qaoa_qnode, random_params

from qbackends import capabilities, get_device, get_registry
from qbackends.decompositions import lowered
from qbackends.device import facts_for
from qbackends.errors import UnsupportedOptionError

CPU_BACKENDS = ["lightning.qubit", "lightning.kokkos", "default.qubit"]
RULES = get_registry().rules()


def _case(reg):
    return f"{reg.operator}:{reg.name}"


def _matrix():
    """(rule, backend) for every rule and every backend it applies to that runs here (fixtures aside)."""
    registry = get_registry()
    facts = facts_for(registry)
    runnable = [  # sampling-only backends are checked with shots by qbackends.testing instead
        b
        for b in registry.backends.values()
        if b.provider != "fixture" and not b.needs_shots and capabilities.evaluate(b, facts).ok
    ]
    return [
        pytest.param(reg, backend.key, id=f"{_case(reg)}-{backend.simulator}")
        for reg in RULES
        if reg.example is not None
        for backend in runnable
        if reg.applies_to(backend.key)
    ]


def _diff_method(device):
    adjoint = qml.devices.ExecutionConfig(gradient_method="adjoint")
    return "adjoint" if device.supports_derivatives(adjoint) else "parameter-shift"


def test_every_rule_has_an_example():
    missing = [_case(r) for r in RULES if r.example is None]
    assert not missing, f"rules without an example (add one so the matrix covers them): {missing}"


def _circuit(device, example, diff_method):
    @qml.qnode(device, diff_method=diff_method)
    def circuit(x):
        for w in range(3):
            qml.RY(x[w], wires=w)
        qml.CNOT([0, 1])
        example(x[3], [1, 2, 0])
        qml.CNOT([2, 0])
        example(x[4], [0, 1, 2])
        return qml.expval(qml.PauliZ(0) @ qml.PauliX(1) + 0.5 * qml.PauliY(2) + 0.3 * qml.PauliZ(1))

    return circuit


def test_matrix_covers_every_rule_on_the_cpu_backends():
    covered = {(p.values[0].name, p.values[1]) for p in _matrix()}
    for reg in RULES:
        if not reg.backends:
            assert {(reg.name, f"pennylane/{b}") for b in CPU_BACKENDS} <= covered
        else:
            assert any(name == reg.name for name, _ in covered), f"{reg.name} runs on no backend here"


@pytest.mark.parametrize(("reg", "backend"), _matrix())
def test_rule_lowers_and_keeps_value_and_gradient(reg, backend):
    x = random_params(5, seed=len(reg.name))
    device = get_device(f"local:{backend}", wires=3)
    ours = _circuit(device, reg.example, _diff_method(device))
    reference = _circuit(qml.device("default.qubit", wires=3), reg.example, "parameter-shift")

    tape = qml.workflow.construct_batch(ours, level="device")(x)[0][0]
    sample = reg.example(0.1, [0, 1, 2])
    lowered = {getattr(k, "name", str(k)) for k in reg.rule.compute_resources(**sample.resource_params).gate_counts}
    names = {op.name for op in tape.operations}
    assert reg.operator not in names
    # what the rule produces reaches the device, unless another rule on this device lowers it further
    assert lowered - device.qbackends_rules.targets <= names, f"{lowered} not in device tape {names}"

    assert abs(ours(x) - reference(x)) < 1e-8
    np.testing.assert_allclose(qml.grad(ours)(x), qml.grad(reference)(x), atol=1e-8, rtol=0)


@pytest.mark.parametrize("backend", ["lightning.qubit", "lightning.kokkos"])
def test_adjoint_lowers_declared_non_differentiable_gates(backend):
    def crot_circuit(device, diff_method):
        @qml.qnode(device, diff_method=diff_method)
        def circuit(x):
            qml.Hadamard(0)
            qml.RY(x[0], wires=1)
            qml.CRot(x[1], x[2], x[3], wires=[0, 1])
            qml.Rot(x[2], x[3], x[1], wires=2)
            qml.CNOT([1, 2])
            return qml.expval(qml.PauliZ(1) @ qml.PauliZ(2))

        return circuit

    x = random_params(4, seed=3)
    ours = crot_circuit(get_device(backend, wires=3), "adjoint")
    reference = crot_circuit(qml.device("default.qubit", wires=3), "parameter-shift")
    names = {op.name for op in qml.workflow.construct_batch(ours, level="device")(x)[0][0].operations}
    assert "CRot" not in names and "Rot" not in names
    assert abs(ours(x) - reference(x)) < 1e-8
    np.testing.assert_allclose(qml.grad(ours)(x), qml.grad(reference)(x), atol=1e-8, rtol=0)


@pytest.mark.parametrize("backend", ["lightning.qubit", "lightning.kokkos"])
def test_trainable_gates_a_backends_own_adjoint_lowers_are_left_to_it(backend):
    """A circuit whose only non-differentiable gates are trainable Rot and CRot reaches lightning as it is
    (``Backend.adjoint_lowers``): its adjoint lowers them as PennyLane does, so lowering them in front was work done
    twice. A fixed one is lowered in front: lightning keeps it, and its adjoint then fails (next test)."""
    rules = get_device(backend, wires=2).qbackends_rules
    x, fixed = qml.numpy.array([0.1, 0.2, 0.3], requires_grad=True), qml.numpy.array([0.1, 0.2, 0.3], requires_grad=False)
    trainable = qml.tape.QuantumScript([qml.Rot(*x, wires=0), qml.CRot(*x, wires=[0, 1])], [qml.expval(qml.Z(0))])
    assert lowered(trainable, rules, adjoint=True) is trainable
    assert [op.name for op in lowered(trainable, rules, adjoint=False).operations] == ["Rot", "CRot"]
    mixed = qml.tape.QuantumScript([qml.Rot(*x, wires=0), qml.Rot(*fixed, wires=1)], [qml.expval(qml.Z(0))])
    assert {op.name for op in lowered(mixed, rules, adjoint=True).operations} == {"RZ", "RY"}
    assert "CRot, Rot: the device's own adjoint lowers them where trainable" in rules.names[-1]

    def rot_as_rz_ry_rz(phi, theta, omega, wires):  # the user's rule for Rot is applied, left to no one
        return [qml.RZ(phi, wires), qml.RY(theta, wires), qml.RZ(omega, wires)]

    ruled = get_device(backend, wires=2, decompositions={"Rot": rot_as_rz_ry_rz}).qbackends_rules
    assert [op.name for op in lowered(trainable, ruled, adjoint=True).operations][:3] == ["RZ", "RY", "RZ"]


@pytest.mark.parametrize("backend", ["default.qubit", "fixture/lenient.qubit", "lightning.qubit", "lightning.kokkos"])
def test_adjoint_lowers_fixed_gates_of_several_parameters_on_a_device_declaring_nothing(backend):
    """PennyLane 0.45's adjoint (default.qubit's) counts a fixed Rot's or CRot's parameters as one:
    the trainable angles before it got gradient 0 (a TorchLayer with frozen weights had zero input
    gradients). Lowered first, they are the parameter-shift gradients; lightning, which lowers them itself, gives
    them too."""

    def frozen_gates(device, diff_method):
        @qml.qnode(device, diff_method=diff_method)
        def circuit(x, fixed):
            qml.RX(x[0], wires=0)
            qml.RX(x[1], wires=1)
            qml.Rot(*fixed, wires=0)
            qml.CRot(*fixed, wires=[1, 0])
            qml.CNOT([0, 1])
            return qml.expval(qml.PauliZ(0))

        return circuit

    x = qml.numpy.array([0.3, 0.7], requires_grad=True)
    fixed = qml.numpy.array([0.1, 0.2, 0.3], requires_grad=False)
    expected = qml.grad(frozen_gates(qml.device("default.qubit", wires=2), "parameter-shift"))(x, fixed)
    np.testing.assert_allclose(expected, [-0.31725, -0.02619], atol=1e-5)
    ours = frozen_gates(get_device(f"local:{backend}" if "/" in backend else backend, wires=2), "adjoint")
    np.testing.assert_allclose(qml.grad(ours)(x, fixed), expected, atol=1e-10, rtol=0)


def test_qaoa_mixer_costs_one_pass_per_qubit():
    params = random_params((2, 2))
    with_rules = qaoa_qnode(get_device("lightning.qubit", wires=8), nodes=8, edges=12)
    without = qaoa_qnode(get_device("lightning.qubit", wires=8, default_decompositions=False), nodes=8, edges=12)
    ops_with = qml.workflow.construct_batch(with_rules, level="device")(params)[0][0].operations
    ops_without = qml.workflow.construct_batch(without, level="device")(params)[0][0].operations
    # 8 initial H; per layer 12 edges and 8 mixer qubits
    assert len(ops_with) == 8 + 2 * (12 + 8)
    assert len(ops_without) == 8 + 2 * (12 + 3 * 8)
    assert {op.name for op in ops_with} == {"Hadamard", "IsingZZ", "RX"}
    assert abs(with_rules(params) - without(params)) < 1e-10


def test_seed_custom_decomps_pattern_works_again():
    params = random_params((2, 2))
    dev = get_device("local:pennylane/lightning.qubit", wires=8, decompositions={"MultiRZ": qml.MultiRZ.compute_decomposition})
    ours = qaoa_qnode(dev, nodes=8, edges=12)
    plain = qaoa_qnode(qml.device("lightning.qubit", wires=8), nodes=8, edges=12)
    ops = qml.workflow.construct_batch(ours, level="device")(params)[0][0].operations
    names = [op.name for op in ops]
    assert "MultiRZ" not in names and "IsingZZ" not in names
    assert names.count("CNOT") == 2 * 2 * 12 and names.count("RZ") == 2 * 12
    assert abs(ours(params) - plain(params)) < 1e-10
    np.testing.assert_allclose(qml.grad(ours)(params), qml.grad(plain)(params), atol=1e-10, rtol=0)


def test_user_rule_by_class_and_registered_rule():
    @qml.register_resources({qml.RY: 1, qml.CNOT: 2})
    def crx_rule(phi, wires, **_):
        qml.CNOT(wires)
        qml.RY(-phi / 2, wires[1])
        qml.CNOT(wires)

    dev = get_device("lightning.qubit", wires=2, decompositions={qml.MultiRZ: qml.MultiRZ.compute_decomposition})
    assert "MultiRZ -> " in "; ".join(dev.qbackends_rules.names)
    dev2 = get_device("lightning.qubit", wires=2, decompositions={"CRY": crx_rule})
    assert "CRY" in dev2.qbackends_rules.fixed


def test_plain_qml_device_custom_decomps_is_gone_in_this_pennylane():
    with pytest.raises(TypeError, match="custom_decomps"):
        qml.device("lightning.qubit", wires=2, custom_decomps={"MultiRZ": qml.MultiRZ.compute_decomposition})


def test_bad_decomposition_keys_and_values_are_typed():
    with pytest.raises(UnsupportedOptionError, match="'NotAGate' is not a PennyLane operator"):
        get_device("lightning.qubit", wires=2, decompositions={"NotAGate": qml.MultiRZ.compute_decomposition})
    with pytest.raises(UnsupportedOptionError, match="is not callable"):
        get_device("lightning.qubit", wires=2, decompositions={"MultiRZ": 3})


def test_opt_out_keeps_only_the_exact_rules():
    dev = get_device("default.qubit", wires=2, default_decompositions=False)
    assert dev.qbackends_rules.names == (
        "Evolution -> commuting Pauli rotations (exact)",
        "Exp -> commuting Pauli rotations (exact)",
    )
    assert not dev.qbackends_rules.alternatives


def test_a_device_without_its_own_gradient_keeps_pennylanes_best():
    """Rules attached to a device that has no derivatives of its own must not make "best" ask it for one."""
    pytest.importorskip("braket.pennylane_plugin", reason="the Braket plugin: pip install ./plugins/qbackends-braket")
    device = get_device("local:braket/braket.local.qubit", wires=1)

    @qml.qnode(device)
    def circuit(x):
        qml.RX(x, 0)
        return qml.expval(qml.Z(0))

    assert abs(qml.grad(circuit)(qml.numpy.array(0.3, requires_grad=True)) + np.sin(0.3)) < 1e-10


def test_an_operator_no_device_runs_is_pennylanes_device_error_too():
    """PennyLane's devices raise DeviceError for an operator outside their gate set; qbackends' typed refusal is one."""
    from qbackends.errors import UnsupportedCircuitError

    device = get_device("lightning.qubit", wires=2)
    tape = qml.tape.QuantumScript([qml.BlockEncode(np.array([[0.1]]), wires=[0, 1])], [qml.expval(qml.Z(0))])
    with pytest.raises(qml.exceptions.DeviceError) as err:
        device.preprocess_transforms()((tape,))
    assert isinstance(err.value, UnsupportedCircuitError)
    assert "it is not in the device's gate set and has no decomposition" in err.value.message
    assert "local:pennylane/default.qubit applies most operators by their matrix" in err.value.fix
