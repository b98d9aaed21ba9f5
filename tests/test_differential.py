"""``get_device`` never changes an answer: random circuits on every runnable backend against an exact reference.

Reference values come from PennyLane's default.qubit built with ``qml.device`` (exact matrices, no
qbackends rules); reference gradients are five-point finite differences of those values (error
~1e-12 at h=1e-3), because default.qubit's own backprop is wrong for ``qml.evolve`` with a
trainable time. A backend may refuse a circuit only with a typed qbackends error.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pennylane as qml
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from randomcircuits import SPECIAL_GATES, RandomCircuit, Step, generic_gate, random_circuits

from qbackends import QBackendsError, capabilities, get_device, get_registry
from qbackends.device import facts_for

VALUE_TOL = 1e-10
GRAD_TOL = 1e-8
FD_STEP = 1e-3


def _runnable():
    registry = get_registry()
    facts = facts_for(registry)
    runnable = [b for b in registry.backends.values() if b.provider != "fixture" and not b.needs_shots]
    return [b for b in runnable if capabilities.evaluate(b, facts).ok], facts


RUNNABLE, FACTS = _runnable()
DECLARED = sorted({op for b in RUNNABLE for op in capabilities.evaluate(b, FACTS).operations.native})
# The per-circuit auto device, checked like a backend: whatever it takes for a circuit must be exact too.
AUTO = SimpleNamespace(device_string="auto", key="auto", device_name="qbackends.auto", dense_adjoint_observables=False)
BACKENDS = [*RUNNABLE, AUTO]


def _diff_method(backend) -> str:
    if backend is AUTO:
        return "best"  # each backend's own: adjoint where it has it, else backprop or parameter-shift
    declared = capabilities.evaluate(backend, FACTS).operations
    return "adjoint" if declared.adjoint_differentiable or backend.device_name == "default.qubit" else "parameter-shift"


def _qnodes(device, circuit: RandomCircuit, diff_method: str):
    @qml.qnode(device, diff_method=diff_method)
    def expval(x):
        circuit.apply(x)
        return qml.expval(circuit.observable)

    @qml.qnode(device, diff_method=None)
    def probs(x):
        circuit.apply(x)
        return qml.probs(wires=circuit.probs_wires)

    return expval, probs


def _reference(circuit: RandomCircuit, x: np.ndarray):
    """Exact value, probabilities and (finite-difference) gradient on default.qubit from qml.device."""
    expval, probs = _qnodes(qml.device("default.qubit", wires=circuit.wires), circuit, diff_method=None)
    shifts = []
    for i in range(len(x)):
        for k in (-2, -1, 1, 2):
            y = x.copy()
            y[i] += k * FD_STEP
            shifts.append(y)
    values = [expval(y) for y in shifts]
    grad = np.array(
        [
            (values[4 * i] - 8 * values[4 * i + 1] + 8 * values[4 * i + 2] - values[4 * i + 3]) / (12 * FD_STEP)
            for i in range(len(x))
        ]
    )
    return expval(x), probs(x), grad


def check_backend_against_reference(backend, circuit: RandomCircuit, x: np.ndarray) -> str:
    """Run ``circuit`` through ``get_device`` on ``backend``; compare with the reference. Returns "ok" or "refused"."""
    ref_value, ref_probs, ref_grad = _reference(circuit, x)
    try:
        device = get_device(backend.device_string, wires=circuit.wires)
        expval, probs = _qnodes(device, circuit, _diff_method(backend))
        value = expval(qml.numpy.array(x, requires_grad=False))
        got_probs = probs(qml.numpy.array(x, requires_grad=False))
        grad = _jacobian(expval, x, ref_grad) if _gradient_checked(backend, circuit, x) else None
    except QBackendsError:
        return "refused"
    assert abs(value - ref_value) < VALUE_TOL, f"value {value} != reference {ref_value} on {backend.device_string}: {circuit}"
    np.testing.assert_allclose(got_probs, ref_probs, atol=VALUE_TOL, err_msg=f"probs on {backend.device_string}: {circuit}")
    if grad is not None:
        np.testing.assert_allclose(
            np.reshape(grad, -1), ref_grad, atol=GRAD_TOL, err_msg=f"gradient on {backend.device_string}: {circuit}"
        )
    return "ok"


def _jacobian(qnode, x: np.ndarray, ref_grad: np.ndarray):
    """The gradient; PennyLane 0.45's parameter-shift raises UnboundLocalError when every parameter is
    outside the observable's light cone (all gradients zero), so that case is checked against zero."""
    try:
        return qml.jacobian(qnode)(qml.numpy.array(x, requires_grad=True))
    except UnboundLocalError:
        if qnode.diff_method != "parameter-shift":
            raise
        return np.zeros_like(ref_grad)  # compared with the reference below: it must really be zero


def _gradient_checked(backend, circuit: RandomCircuit, x: np.ndarray) -> bool:
    """Every gradient is checked, except two parameter-shift cases PennyLane 0.45 crashes on before any
    device sees the circuit, with ``qml.device`` alike (docs/upstream.md): through ``qml.evolve`` (it
    cannot rebind an Evolution's parameters); and when every gradient is zero (see _jacobian)."""
    if not len(x):
        return False
    return _diff_method(backend) == "adjoint" or not any(s.label.startswith("evolve") for s in circuit.steps if s.nparams)


def _params(count: int):
    return st.lists(st.floats(-np.pi, np.pi), min_size=count, max_size=count)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.key)
# Derandomized and unshrunk in the default run: the same examples every CI run, a failure reported at once.
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_random_circuits_agree_with_the_reference(backend, data):
    circuit = data.draw(random_circuits(DECLARED, max_wires=8, max_steps=6), label="circuit")
    x = np.array(data.draw(_params(circuit.nparams), label="x"))
    check_backend_against_reference(backend, circuit, x)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.key)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_circuits_agree_with_the_reference_long(backend, data):
    # default.qubit's adjoint builds a dense 2^n x 2^n Hamiltonian: 4 GiB at 14 wires, several at once
    max_wires = 10 if backend.dense_adjoint_observables else 14
    circuit = data.draw(random_circuits(DECLARED, max_wires=max_wires, max_steps=10), label="circuit")
    x = np.array(data.draw(_params(circuit.nparams), label="x"))
    check_backend_against_reference(backend, circuit, x)


def test_generator_covers_every_declared_gate():
    """A gate some backend declares is drawn by the generic recipe or has its own: none is left out."""
    unbuildable = [name for name in DECLARED if not generic_gate(name) and name not in SPECIAL_GATES]
    assert not unbuildable


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.key)
@pytest.mark.parametrize(
    "hamiltonian",
    [
        qml.Hamiltonian([0.5], [qml.Z(0)]),  # one term: PennyLane's rule dropped its coefficient
        qml.Hamiltonian([0.25, 0.25], [qml.Z(0), qml.Z(0)]),  # duplicates merging into one term
        qml.Hamiltonian([0.5, -0.3, 0.2], [qml.Z(0), qml.Z(0) @ qml.Z(1), qml.Identity(0)]),  # multi-term diagonal
        qml.Hamiltonian([0.4, 0.7], [qml.X(0) @ qml.X(1), qml.Y(0) @ qml.Y(1)]),  # commuting, not diagonal
    ],
    ids=["one-term", "duplicates", "diagonal-sum", "commuting-xx-yy"],
)
def test_evolve_is_exact(backend, hamiltonian):
    """The reproducer of the Evolution bug, and its relatives, through get_device on every backend."""
    steps = [
        _step("H", lambda x: (qml.Hadamard(0), qml.RY(0.3, wires=1))),
        _step("evolve", lambda x: qml.evolve(hamiltonian, x[0]), 1),
    ]
    circuit = RandomCircuit([0, 1], None, steps, qml.X(0) + 0.5 * qml.Y(1) @ qml.X(0), [0, 1])
    assert check_backend_against_reference(backend, circuit, np.array([0.9])) == "ok"


def test_evolve_reproducer_gives_cos_and_minus_sin():
    dev = get_device("local:pennylane/lightning.qubit", wires=1)

    @qml.qnode(dev, diff_method="adjoint")
    def c(t):
        qml.Hadamard(0)
        qml.evolve(qml.Hamiltonian([0.5], [qml.Z(0)]), t)
        return qml.expval(qml.X(0))

    t = qml.numpy.array(0.9, requires_grad=True)
    assert abs(c(t) - np.cos(0.9)) < 1e-12
    assert abs(qml.grad(c)(t) + np.sin(0.9)) < 1e-12


def test_non_commuting_evolution_is_refused_typed_where_the_device_cannot_run_it():
    from qbackends import UnsupportedCircuitError

    dev = get_device("local:pennylane/lightning.qubit", wires=1)

    @qml.qnode(dev)
    def c(t):
        qml.evolve(qml.Hamiltonian([0.5, 0.3], [qml.Z(0), qml.X(0)]), t)
        return qml.expval(qml.Y(0))

    with pytest.raises(UnsupportedCircuitError, match="generator is not a sum of commuting Pauli terms.*TrotterProduct"):
        c(0.7)


@pytest.mark.parametrize("backend", ["local:pennylane/default.qubit", "auto"])
def test_a_non_commuting_evolution_at_a_constant_time_runs_where_the_device_runs_it_by_matrix(backend):
    """Found by the long differential run: PennyLane 0.45 rebinds every parameter to NumPy before a
    device runs, and cannot rebind an Evolution's (IndexError), so a constant (autograd) time failed
    even with diff_method=None; qbackends hands the device the same operator as Exp(H, -i t)."""
    h = qml.Hamiltonian([1.0, 0.6], [qml.X(0) @ qml.X(1), qml.Y(0)])

    def circuit(t, a):
        qml.RX(a, wires=0)
        qml.evolve(h, t)
        return qml.probs(wires=[0])

    def exact(angle):  # P(wire 0) from the matrices
        state = qml.matrix(qml.evolve(h, 0.3), wire_order=[0, 1]) @ np.kron(qml.matrix(qml.RX(angle, 0)), np.eye(2))[:, 0]
        return np.array([np.sum(np.abs(state[:2]) ** 2), np.sum(np.abs(state[2:]) ** 2)])

    t = qml.numpy.array(0.3, requires_grad=False)
    a = qml.numpy.array(1.0, requires_grad=True)
    probs = qml.QNode(circuit, get_device(backend, wires=2), diff_method=None)
    np.testing.assert_allclose(probs(t, a), exact(1.0), atol=1e-12)
    # the trainable angle keeps its place among the parameters: its derivative, against finite differences
    step = 1e-3
    slope = (exact(1.0 - 2 * step) - 8 * exact(1.0 - step) + 8 * exact(1.0 + step) - exact(1.0 + 2 * step)) / (12 * step)
    assert np.abs(slope).max() > 0.1
    differentiated = qml.QNode(circuit, get_device(backend, wires=2), diff_method="best")
    np.testing.assert_allclose(qml.jacobian(differentiated)(t, a), slope, atol=1e-9)


def _step(label, queue, nparams=0):
    return Step(label, nparams, queue)
