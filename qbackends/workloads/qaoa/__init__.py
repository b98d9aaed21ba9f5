"""QAOA MaxCut, written once against ``get_device``.

The circuit is the Braket example's (``qml.qaoa`` cost and mixer layers) in its fastest exact form
(``ansatz``). Modules: ``graph`` (the problem: a random graph or an edge list), ``config`` (the settings),
``ansatz`` (Hamiltonians, circuit, energy), ``optimizer`` (Adam and gradient descent with JSON state),
``optimization`` (the run), ``checkpoint``, ``results`` and ``job`` (the hybrid-job entry point).

Run it from the CLI (``qbackends run qaoa``), or as a hybrid job (``python -m qbackends.workloads.qaoa``
under ``qbackends job run``): it reads ``AMZN_BRAKET_*`` when present.
"""

from __future__ import annotations

from .ansatz import calibration_step, circuit, cost_hamiltonian, energy_function, zz_hamiltonian
from .checkpoint import FILE as CHECKPOINT_FILE
from .checkpoint import Progress
from .config import FORMULATIONS, OPTIMIZERS, Config
from .graph import MAX_GRAPH_FILE_BYTES, MAX_GRAPH_NODES, MAX_WEIGHT, Edge, Graph, cut_values, random_graph, read_edge_list
from .job import main
from .optimization import backend_name, initial_params, load_graph, run, workload_device
from .optimizer import OptimizerState, optimizer_step
from .results import plot_costs

__all__ = [
    "CHECKPOINT_FILE",
    "FORMULATIONS",
    "MAX_GRAPH_FILE_BYTES",
    "MAX_GRAPH_NODES",
    "MAX_WEIGHT",
    "OPTIMIZERS",
    "Config",
    "Edge",
    "Graph",
    "OptimizerState",
    "Progress",
    "backend_name",
    "calibration_step",
    "circuit",
    "cost_hamiltonian",
    "cut_values",
    "energy_function",
    "initial_params",
    "load_graph",
    "main",
    "optimizer_step",
    "plot_costs",
    "random_graph",
    "read_edge_list",
    "run",
    "workload_device",
    "zz_hamiltonian",
]
