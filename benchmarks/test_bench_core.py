"""Issue: core. get_device's overhead against qml.device on the seed QAOA, and the CLI's cold start."""

from __future__ import annotations

import subprocess
import sys

import pennylane as qml
import pytest
from conftest import interleaved_medians, record_seconds
from pennylane import numpy as pnp
from qaoa_circuits import value_and_gradient

from qbackends import get_device

VARIANTS = {
    "qml.device": lambda name: qml.device(name, wires=18),
    "get_device, rules off": lambda name: get_device(name, wires=18, default_decompositions=False),
    "get_device (default rules)": lambda name: get_device(name, wires=18),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("backend", ["lightning.qubit"])
def test_get_device_overhead_seed_qaoa(benchmark, record, backend, variant):
    """Seed QAOA (18 nodes, 24 edges, p=2, qml.qaoa layers), value + adjoint gradient per iteration."""
    step, *_ = value_and_gradient(VARIANTS[variant](backend), 18, "qml.qaoa")
    step()  # warm up outside the timed region
    benchmark.pedantic(step, rounds=7, iterations=1)
    record(f"core: seed QAOA 18 nodes on {backend}", variant)


@pytest.mark.parametrize("command", ["python -c pass", "qbackends list", "qbackends --help"])
def test_cli_cold_start(benchmark, record, command):
    args = (
        [sys.executable, "-c", "pass"]
        if command == "python -c pass"
        else [sys.executable, "-m", "qbackends.cli", *command.split()[1:]]
    )
    benchmark.pedantic(lambda: subprocess.run(args, check=True, capture_output=True), rounds=5, iterations=1)
    record("core: CLI cold start", command)


def _reuploading_step(dev):
    """PennyLane's data re-uploading classifier's step: 32 one-qubit circuits of Rot gates, a Hermitian cost."""
    target = qml.Hermitian(pnp.array([[1.0, 0.0], [0.0, 0.0]], requires_grad=False), wires=0)

    @qml.qnode(dev, diff_method="adjoint")
    def fidelity(x, weights):
        for layer in range(3):
            qml.Rot(*x, wires=0)
            qml.Rot(*weights[layer], wires=0)
        return qml.expval(target)

    rng = pnp.random.default_rng(0)
    inputs = rng.uniform(-1, 1, (32, 3))
    weights = pnp.array(rng.uniform(-1, 1, (3, 3)), requires_grad=True)
    gradient = qml.grad(lambda w: sum((1 - fidelity(x, w)) ** 2 for x in inputs) / len(inputs))
    return lambda: gradient(weights)


def _two_qubit_step(dev):
    @qml.qnode(dev, diff_method="adjoint")
    def energy(w):
        qml.RX(w[0], 0)
        qml.RY(w[1], 1)
        qml.CNOT([0, 1])
        qml.Rot(*w[2:], wires=1)
        return qml.expval(qml.Z(0) @ qml.Z(1))

    w = pnp.array([0.1, 0.2, 0.3, 0.4, 0.5], requires_grad=True)
    gradient = qml.grad(energy)
    return lambda: (energy(w), gradient(w))


@pytest.mark.parametrize(
    "circuit", [_reuploading_step, _two_qubit_step], ids=["re-uploading-32-rot-circuits", "2-qubit-value+gradient"]
)
def test_get_device_per_execution(benchmark, circuit):
    """Per execution, get_device by name against qml.device on the same backend, interleaved: what the rules in
    front of lightning.qubit cost (the Rot gates are lowered for adjoint)."""
    steps = {
        "qml.device": circuit(qml.device("lightning.qubit", wires=2)),
        "get_device": circuit(get_device("local:pennylane/lightning.qubit", wires=2)),
    }
    for step in steps.values():
        step()
    medians = interleaved_medians(benchmark, steps, rounds=15)
    group = f"core: per execution on lightning.qubit, {circuit.__name__.strip('_').replace('_', ' ')}"
    for name, seconds in medians.items():
        record_seconds(group, name, seconds, f"get_device / qml.device = {medians['get_device'] / medians['qml.device']:.3f}")
