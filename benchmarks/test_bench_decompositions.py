"""Issue: decomposition rules. Seed QAOA with and without the default rules: gates and time per iteration."""

from __future__ import annotations

import pytest
from conftest import runnable_cpu_backends
from qaoa_circuits import device_gate_count, value_and_gradient

from qbackends import get_device


@pytest.mark.parametrize("nodes", [18, pytest.param(20, marks=pytest.mark.slow)])
@pytest.mark.parametrize("backend", runnable_cpu_backends())
@pytest.mark.parametrize("rules", ["default rules", "no rules"])
def test_qaoa_layers_with_and_without_rules(benchmark, record, backend, nodes, rules):
    dev = get_device(backend, wires=nodes, default_decompositions=(rules == "default rules"))
    step, qnode, params = value_and_gradient(dev, nodes, "qml.qaoa")
    gates = device_gate_count(qnode, params)
    benchmark.extra_info["device_gates"] = gates
    step()
    benchmark.pedantic(step, rounds=3 if nodes <= 18 else 2, iterations=1)
    record(f"rules: qml.qaoa QAOA {nodes} nodes p=2 on {backend}", rules, f"{gates} gates")
