"""A QAOA run: the optimiser loop over the energy's value and gradient, checkpointed after every iteration."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ...checkpoint import recorded_device
from ...errors import WorkloadInputError
from ...fixes import Spell, option
from ...gradients import check as check_gradient
from ...workloaddevices import qaoa_device as workload_device  # the device this QAOA run uses
from . import checkpoint as checkpoints
from .ansatz import energy_function, energy_tape, runs_layers
from .checkpoint import Progress
from .config import Config
from .graph import Graph, random_graph, read_edge_list
from .optimizer import OptimizerState, optimizer_step
from .results import TIES, most_probable_index, results


def load_graph(config: Config) -> Graph:
    return read_edge_list(config.graph_file) if config.graph_file else random_graph(config.nodes, config.edges, config.seed)


def initial_params(config: Config) -> np.ndarray:
    return config.init_scale * np.random.default_rng(config.seed).uniform(size=(2, config.layers))


def run(
    config: Config,
    device: str | None = None,
    *,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    on_iteration: Callable[[int, float], None] | None = None,
    mpi: bool = False,
    spell: Spell = option,
) -> dict[str, Any]:
    """Optimise the QAOA angles; return the results record.

    Args:
        config: the problem and optimiser settings.
        device: a device string for ``get_device`` (None: the environment, then ``auto``).
        checkpoint_dir: where a checkpoint is written after every iteration.
        resume: continue from the checkpoint there (it must be of the same run; under ``auto``, on its device).
        on_iteration: called with (iteration, cost) after each iteration.
        mpi: split the state over the ranks of this MPI job (fused.qubit's ``mpi=True``); rank 0 alone writes
            checkpoints and calls ``on_iteration``; every rank returns the results.
        spell: words the fix for a setting (``option``: the CLI's; ``hyperparameter``: a hybrid job's).
    """
    import pennylane as qml
    from pennylane import numpy as pnp

    config.validate(spell)
    graph = load_graph(config)
    checkpoint = Path(checkpoint_dir) / checkpoints.FILE if checkpoint_dir else None
    state = _saved_state(checkpoint, resume, mpi, spell)
    dev = workload_device(
        device, graph.nodes, config.diff_method, config.layers, config.iterations, recorded_device(state), config.precision, mpi
    )
    shared = _ranks(dev) if mpi else None
    ranks = shared.size if shared is not None else None
    writes = shared is None or shared.rank == 0
    start_params = pnp.array(initial_params(config), requires_grad=True)
    tape = energy_tape(graph, config.layers, start_params, config.formulation, runs_layers(dev))
    check_gradient(dev, tape, config.diff_method, "autograd", spell)
    energy = energy_function(dev, graph, config.layers, config.formulation, config.diff_method)
    value_and_grad = _value_and_grad(energy)
    device_name = backend_name(dev, energy.qnode, start_params, config.diff_method)
    identity = checkpoints.identity(config, graph, device_name, ranks)
    if state is not None and checkpoint is not None:
        progress = checkpoints.progress(checkpoint, state, config, identity, spell)
    else:
        progress = Progress(0, initial_params(config).tolist(), [], [], OptimizerState())
    params = np.array(progress.params)
    for iteration in range(progress.iteration + 1, config.iterations + 1):
        start = time.perf_counter()
        value, grad = value_and_grad(pnp.array(params, requires_grad=True))
        params = optimizer_step(config.optimizer, params, np.asarray(grad), progress.optimizer, config.stepsize)
        progress.seconds.append(time.perf_counter() - start)
        progress.costs.append(float(value))
        progress.params, progress.iteration = params.tolist(), iteration
        if checkpoint is not None and writes:
            checkpoints.save(checkpoint, config, identity, progress)
        if on_iteration is not None and writes:
            on_iteration(iteration, float(value))

    @qml.qnode(dev, diff_method=None)  # values only: a gradient method would refuse probs on lightning's adjoint
    def probabilities(params: Any) -> Any:
        energy.ansatz(params)
        return qml.probs(wires=range(graph.nodes))

    final_energy = float(energy(pnp.array(params, requires_grad=False)))
    if not (np.isfinite(final_energy) and np.isfinite(progress.costs).all() and np.isfinite(params).all()):
        raise WorkloadInputError(
            f"The optimisation diverged: energy {final_energy}, parameters {np.asarray(params).tolist()}.",
            spell("stepsize", "a smaller value")
            + (f", or {spell('optimizer', 'adam')}" if config.optimizer != "adam" else "")
            + ".",
        )
    if shared is not None:  # the final energy's state, read where it lies (all probabilities would not fit one rank)
        best = shared.most_probable(TIES)
    else:
        best = most_probable_index(np.asarray(probabilities(params)))
    return results(config, graph, device_name, progress, final_energy=final_energy, most_probable=best)


def _saved_state(checkpoint: Path | None, resume: bool, mpi: bool, spell: Spell) -> dict[str, Any] | None:
    """The checkpoint to resume from, if any; under ``mpi``, rank 0's, sent to every rank (their folders may differ)."""
    if not mpi:
        return checkpoints.read(checkpoint, spell) if resume and checkpoint is not None and checkpoint.exists() else None
    from ...fused.distributed import world

    comm = world()
    state = None
    if comm.Get_rank() == 0 and resume and checkpoint is not None and checkpoint.exists():
        state = checkpoints.read(checkpoint, spell)  # a refusal here ends every rank (the command aborts the job)
    return comm.bcast(state, root=0)


def _ranks(dev: Any) -> Any:
    from ...fused.distributed import ranks_of

    return ranks_of(dev)


def backend_name(dev: Any, qnode: Any, params: Any, diff_method: str) -> str:
    """The PennyLane name of the backend that runs ``qnode``: under ``auto``, the one it takes for this circuit
    (decided now, so that a checkpoint records it and a resumed run continues on it)."""
    import pennylane as qml

    from ...autodevice import AutoQubit

    if not isinstance(dev, AutoQubit):
        return str(dev.name)
    return str(dev.backend_for(qml.workflow.construct_tape(qnode)(params), diff_method).name)


def _value_and_grad(qnode: Any) -> Callable[[Any], tuple[Any, Any]]:
    """Value and gradient from one execution (adjoint computes both in one pass)."""
    from autograd import value_and_grad

    return value_and_grad(qnode)
