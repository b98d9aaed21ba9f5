"""The same measurements through every ML interface: autograd, torch, jax and jax.jit, jax with float64 on and off,
on every backend and auto, against default.qubit by backpropagation in float64 (1e-10 for values, 1e-8 for
gradients; 1e-5 in float32). A backend may refuse a circuit only with a typed error; auto computes it.
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import pennylane as qml
import pytest
from knowndefects import INTERFACE_KNOWN
from measurementcases import GRAD_TOL, HERMITIAN_1, SHOTS, VALUE_TOL, Case, Mismatch, judge_exact, pauli_sum
from measurementharness import BACKENDS, SEED, device, typed

jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")

CONFIGS = ["autograd", "torch", "jax", "jax-jit", "jax-float32", "jax-jit-float32"]
FAST_CONFIGS = {"autograd", "torch", "jax", "jax-jit"}
FAST_BACKENDS = {"qbackends/fused.qubit", "qbackends/batched.qubit", "auto", "pennylane/lightning.qubit"}
FLOAT32_TOL = 1e-5


def _values(m):
    """Several measurements in one circuit: a sum's expectation and variance, probabilities, a density matrix."""
    return (qml.expval(pauli_sum()), qml.var(pauli_sum()), qml.probs(wires=[2, 0]), qml.density_matrix(wires=[2, 0]))


def _differentiated(m):
    return (qml.expval(pauli_sum()), qml.var(qml.Hermitian(HERMITIAN_1, wires=1)), qml.probs(wires=[2, 0]))


VALUES = Case("interface-values", _values)
GRADIENT = Case("interface-gradient", _differentiated)
BROADCAST = Case(
    "interface-broadcast", lambda m: (qml.expval(qml.X(0) @ qml.Y(2)), qml.var(qml.Z(1)), qml.probs(wires=[1])), broadcast=True
)
SAMPLED = Case("interface-sampled", lambda m: qml.expval(qml.X(0) @ qml.Y(2)), shots=SHOTS)


def _cost(results):
    expval, variance, probs = results
    return qml.math.sum(expval + 0.3 * variance + probs[..., 1])  # over a broadcast batch too


@contextlib.contextmanager
def _float64(on: bool):
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", on)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


def _as(config: str, x: np.ndarray):
    if config == "autograd":
        return qml.numpy.array(x, requires_grad=True)
    if config == "torch":
        return torch.tensor(x, dtype=torch.float64, requires_grad=True)
    return jax.numpy.array(x)


def _numpy(value):
    if isinstance(value, (tuple, list)):
        return type(value)(_numpy(v) for v in value)
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    return np.asarray(value)


def _run(config: str, qnode, x: np.ndarray):
    if config.startswith("jax-jit"):
        return jax.jit(qnode)(_as(config, x))
    return qnode(_as(config, x))


def _gradient(config: str, qnode, x: np.ndarray):
    def cost(y):
        return _cost(qnode(y))

    if config == "autograd":
        return qml.grad(cost)(_as(config, x))
    if config == "torch":
        y = _as(config, x)
        cost(y).backward()
        return y.grad
    return (jax.jit(jax.grad(cost)) if config.startswith("jax-jit") else jax.grad(cost))(_as(config, x))


@functools.cache
def _reference(name: str):
    case = {c.name: c for c in CASES}[name]
    qnode = qml.QNode(case.apply, qml.device("default.qubit", wires=case.wires), diff_method="backprop")
    values = qnode(qml.numpy.array(case.x, requires_grad=False))
    if case is not VALUES:
        return values, qml.grad(lambda y: _cost(qnode(y)))(qml.numpy.array(case.x, requires_grad=True))
    return values, None


CASES = (VALUES, GRADIENT, BROADCAST, SAMPLED)


def _params():
    for backend in BACKENDS:
        for config in CONFIGS:
            for case in CASES:
                fast = backend.key in FAST_BACKENDS and config in FAST_CONFIGS
                known = INTERFACE_KNOWN.get((backend.key, case.name))
                marks = ([] if fast else [pytest.mark.slow]) + ([pytest.mark.xfail(reason=known, strict=True)] if known else [])
                yield pytest.param(backend, config, case, id=f"{backend.key}-{config}-{case.name}", marks=marks)


@pytest.mark.parametrize("backend, config, case", list(_params()))
def test_values_and_gradients_through_the_interface(backend, config, case):
    with _float64(not config.endswith("float32")) if config.startswith("jax") else contextlib.nullcontext():
        if case is SAMPLED:
            _sampled(backend, config)
        else:
            _exact(backend, config, case)


def _exact(backend, config, case):
    tol, grad_tol = (FLOAT32_TOL, FLOAT32_TOL) if config.endswith("float32") else (VALUE_TOL, GRAD_TOL)
    expected, expected_grad = _reference(case.name)
    try:
        qnode = qml.QNode(case.apply, device(backend, case), diff_method="best")
        got = _numpy(_run(config, qnode, case.x))
        grad = _numpy(_gradient(config, qnode, case.x)) if expected_grad is not None else None
    except Exception as exc:  # noqa: BLE001 - judged here
        if not typed(exc, backend.key) or backend.key == "auto":
            raise Mismatch(f"{case.name} through {config}: {type(exc).__name__}: {exc}") from exc
        return
    judge_exact(got, _numpy(expected), tol, f"{case.name} through {config}")
    if grad is not None:
        judge_exact(grad, _numpy(expected_grad), grad_tol, f"gradient through {config}")


def _sampled(backend, config):
    """A sampled expectation through the interface: within 5σ of the exact one (σ from its exact variance)."""
    analytic = Case("", SAMPLED.measure)
    mean = float(qml.QNode(analytic.apply, qml.device("default.qubit", wires=analytic.wires))(analytic.x))
    sigma = np.sqrt((1 - mean**2) / SHOTS)  # a Pauli word: ⟨P²⟩ = 1
    try:
        got = float(_numpy(_run(config, qml.QNode(SAMPLED.apply, device(backend, SAMPLED), shots=SHOTS), SAMPLED.x)))
    except Exception as exc:  # noqa: BLE001 - judged here
        if not typed(exc, backend.key) or backend.key == "auto":
            raise Mismatch(f"sampled through {config}: {type(exc).__name__}: {exc}") from exc
        return
    assert abs(got - mean) <= 5 * sigma, f"sampled {got} vs exact {mean} (σ {sigma:.3g}) through {config}, seed {SEED}"
