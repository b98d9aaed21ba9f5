"""The QAOA circuits the benchmarks time: the Braket example's and the workload's."""

from __future__ import annotations

import numpy as np
import pennylane as qml
from autograd import value_and_grad

from qbackends.workloads import qaoa

SEED_PROBLEMS = {18: 24, 20: 30, 22: 33, 24: 36, 12: 16, 14: 20, 16: 22}


def value_and_gradient(device, nodes: int, formulation: str, layers: int = 2, diff_method: str = "adjoint"):
    """(step computing the QAOA energy and its gradient, the energy function, params), as the workload does."""
    graph = qaoa.random_graph(nodes, SEED_PROBLEMS[nodes], 1967)
    energy = qaoa.energy_function(device, graph, layers, formulation, diff_method)
    params = qml.numpy.array(np.random.default_rng(1).uniform(0, 1, (2, layers)), requires_grad=True)
    run = value_and_grad(energy)
    return lambda: run(params), energy, params


def device_gate_count(energy, params) -> int:
    return len(qml.workflow.construct_batch(energy.qnode, level="device")(params)[0][0].operations)
