"""Issue: QAOA workload. The Braket example's formulation against the workload's, per device, and auto."""

from __future__ import annotations

import pennylane as qml
import pytest
from conftest import runnable_cpu_backends
from qaoa_circuits import value_and_gradient

from qbackends import get_device
from qbackends.workloads import qaoa

SIZES = [18, pytest.param(20, marks=pytest.mark.slow), pytest.param(22, marks=pytest.mark.slow)]


@pytest.mark.parametrize("nodes", SIZES)
@pytest.mark.parametrize("backend", runnable_cpu_backends())
@pytest.mark.parametrize("formulation", ["braket example (qml.qaoa, qml.device)", "workload (IsingZZ+RX, get_device)"])
def test_formulations(benchmark, record, nodes, backend, formulation):
    if formulation.startswith("braket"):
        step, *_ = value_and_gradient(qml.device(backend, wires=nodes), nodes, "qml.qaoa")
    else:
        step, *_ = value_and_gradient(get_device(backend, wires=nodes), nodes, "fast")
    step()
    benchmark.pedantic(step, rounds=3 if nodes <= 18 else 1, iterations=1)
    record(f"qaoa: {nodes} nodes p=2 value+gradient", f"{backend}: {formulation}")


@pytest.mark.parametrize("nodes", SIZES)
def test_workload_default_choice(benchmark, record, nodes):
    dev = qaoa.workload_device("auto", nodes, "adjoint")  # what `qbackends run qaoa` uses under auto
    step, *_ = value_and_gradient(dev, nodes, "fast")
    step()
    benchmark.pedantic(step, rounds=3 if nodes <= 18 else 1, iterations=1)
    record(f"qaoa: {nodes} nodes p=2 value+gradient", f"auto ({dev.name}): workload")
