"""QAOA MaxCut, written once against ``get_device``.

The circuit is the Braket example's (``qml.qaoa`` cost and mixer layers) in its fastest exact form
(``ansatz``). Modules: ``graph`` (the problem: a random graph or an edge list), ``config`` (the settings),
``ansatz`` (Hamiltonians, circuit, energy), ``optimizer`` (Adam and gradient descent with JSON state),
``optimization`` (the run), ``checkpoint``, ``results`` and ``job`` (the hybrid-job entry point).

Run it from the CLI (``qbackends run qaoa``), or as a hybrid job (``python -m qbackends.workloads.qaoa``
under ``qbackends job run``): it reads ``AMZN_BRAKET_*`` when present.
"""

from __future__ import annotations

from .. import lazy_names

# Each public name: (module, name there), imported when first used (``lazy_names``): ``config`` and ``graph`` need no PennyLane.
_WHERE = {
    "calibration_step": ("ansatz", "calibration_step"),
    "circuit": ("ansatz", "circuit"),
    "cost_hamiltonian": ("ansatz", "cost_hamiltonian"),
    "energy_function": ("ansatz", "energy_function"),
    "zz_hamiltonian": ("ansatz", "zz_hamiltonian"),
    "CHECKPOINT_FILE": ("checkpoint", "FILE"),
    "Progress": ("checkpoint", "Progress"),
    "FORMULATIONS": ("config", "FORMULATIONS"),
    "OPTIMIZERS": ("config", "OPTIMIZERS"),
    "Config": ("config", "Config"),
    "MAX_GRAPH_FILE_BYTES": ("graph", "MAX_GRAPH_FILE_BYTES"),
    "MAX_GRAPH_NODES": ("graph", "MAX_GRAPH_NODES"),
    "MAX_WEIGHT": ("graph", "MAX_WEIGHT"),
    "Edge": ("graph", "Edge"),
    "Graph": ("graph", "Graph"),
    "cut_values": ("graph", "cut_values"),
    "random_graph": ("graph", "random_graph"),
    "read_edge_list": ("graph", "read_edge_list"),
    "main": ("job", "main"),
    "backend_name": ("optimization", "backend_name"),
    "initial_params": ("optimization", "initial_params"),
    "load_graph": ("optimization", "load_graph"),
    "run": ("optimization", "run"),
    "workload_device": ("optimization", "workload_device"),
    "OptimizerState": ("optimizer", "OptimizerState"),
    "optimizer_step": ("optimizer", "optimizer_step"),
    "plot_costs": ("results", "plot_costs"),
}

__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
