"""Issue: core. get_device's overhead against qml.device on the seed QAOA, and the CLI's cold start."""

from __future__ import annotations

import subprocess
import sys

import pennylane as qml
import pytest
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
