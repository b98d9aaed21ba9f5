"""Circuits shared by tests: the seed QAOA in the Braket example's formulation."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pennylane as qml


def qaoa_qnode(device, nodes: int = 8, edges: int = 12, layers: int = 2, seed: int = 1967, diff_method: str = "adjoint"):
    """QAOA MaxCut with qml.qaoa cost/mixer layers, as the Braket hybrid-job example writes it."""
    graph = nx.gnm_random_graph(nodes, edges, seed=seed)
    cost_h, mixer_h = qml.qaoa.maxcut(graph)

    @qml.qnode(device, diff_method=diff_method)
    def circuit(params):
        for wire in range(nodes):
            qml.Hadamard(wire)
        for layer in range(layers):
            qml.qaoa.cost_layer(params[0][layer], cost_h)
            qml.qaoa.mixer_layer(params[1][layer], mixer_h)
        return qml.expval(cost_h)

    return circuit


def random_params(shape, seed: int = 7):
    return qml.numpy.array(np.random.default_rng(seed).uniform(0, np.pi, shape), requires_grad=True)
