"""The exchange of fused.qubit's distributed state, timed: ``mpiexec -n R python benchmarks/mpi_exchange.py SPEC.json``.

SPEC is {"cases": [[wires, precision], ...], "layers": p, "formulation": "qml.qaoa", "steps": k, "exchanges": k,
"one_process": bool, "share_node": bool}. For each case, on a ``get_device("local:qbackends/fused.qubit", wires=n,
mpi=True, share_node=...)`` device (``share_node`` True, the default: ranks on one node share one state; False: each
holds a share and they exchange, as across nodes):

- a QAOA value + adjoint gradient step of p layers (``qaoa.energy_function`` on gnm(n, 1.5n, seed=1967)),
  run once to compile and allocate, then ``steps`` times, each between two barriers;
- the exchange alone (ranks that exchange): ``Ranks.exchange`` (distributed.py's own pairwise in-place exchange of a rank's share) on an
  array of the share's size and dtype, once untimed, then ``exchanges`` times;
- with ``one_process`` (R = 1 only), the same step on a device without mpi=True, for the one-process time.

A time is the slowest rank's (an all-reduce of each rank's seconds, MAX), and rank 0 prints one JSON line per
case with the medians. ``OMP_NUM_THREADS`` is left to the caller (the benchmark gives each rank cores / R).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np

FUSED = "local:qbackends/fused.qubit"
AMPLITUDE_BYTES = {"c128": 16, "c64": 8}


def slowest(comm, seconds: float) -> float:
    from mpi4py import MPI

    return comm.allreduce(seconds, op=MPI.MAX)


def timed(comm, step, repeats: int) -> list[float]:
    """Seconds of ``step`` on the slowest rank, ``repeats`` times, each started together."""
    times = []
    for _ in range(repeats):
        comm.Barrier()
        start = time.perf_counter()
        step()
        times.append(slowest(comm, time.perf_counter() - start))
    return times


def qaoa_step(device, wires: int, layers: int, formulation: str):
    """A value + adjoint gradient of the p-layer QAOA on gnm(n, 1.5n, seed=1967), as ``qbackends calibrate`` runs it."""
    from autograd import value_and_grad
    from pennylane import numpy as pnp

    from qbackends.workloads.qaoa import energy_function, random_graph

    graph = random_graph(wires, int(1.5 * wires), 1967)
    run = value_and_grad(energy_function(device, graph, layers, formulation))
    params = pnp.array(np.random.default_rng(5).uniform(size=(2, layers)), requires_grad=True)
    return lambda: run(params)


def one_case(comm, wires: int, precision: str, spec: dict) -> dict:
    from qbackends import get_device
    from qbackends.fused import kernels
    from qbackends.fused.distributed import ranks_of

    layers, formulation = spec["layers"], spec["formulation"]
    share_node = spec.get("share_node", True)
    device = get_device(FUSED, wires=wires, precision=precision, mpi=True, share_node=share_node)
    ranks = ranks_of(device)
    step = qaoa_step(device, wires, layers, formulation)
    start = time.perf_counter()
    value, _ = step()  # allocates the buffers
    first = slowest(comm, time.perf_counter() - start)
    before = ranks.exchanges
    steps = timed(comm, step, spec["steps"])
    per_step = (ranks.exchanges - before) // spec["steps"]

    exchanges = [0.0]
    if ranks.memory is None:
        share = np.ones(device_share(wires, comm.Get_size()), dtype=np.complex64 if precision == "c64" else np.complex128)
        state = [ranks.exchange(share)]  # once untimed, as the step is

        def exchange():
            state[0] = ranks.exchange(state[0])

        exchanges = timed(comm, exchange, spec["exchanges"])

    threads = kernels.threads()
    if ranks.memory is not None:
        with ranks.memory.team():  # a team may take a share of the cores
            threads = kernels.threads()
    out = {
        "threads_per_rank": threads,
        "wires": wires,
        "precision": precision,
        "ranks": comm.Get_size(),
        "shared_state": ranks.memory is not None,
        "layers": layers,
        "formulation": formulation,
        "value": float(value),
        "first_step_s": first,
        "step_s": statistics.median(steps),
        "steps_s": steps,
        "exchanges_per_step": per_step,
        "share_bytes": AMPLITUDE_BYTES[precision] * device_share(wires, comm.Get_size()),
        "exchange_s": statistics.median(exchanges),
        "exchanges_s": exchanges,
    }
    if spec.get("one_process") and comm.Get_size() == 1:
        single = qaoa_step(get_device(FUSED, wires=wires, precision=precision), wires, layers, formulation)
        single()
        out["one_process_step_s"] = statistics.median(timed(comm, single, spec["steps"]))
    return out


def device_share(wires: int, ranks: int) -> int:
    """Amplitudes on each rank: 2^n / R."""
    return (1 << wires) // ranks


def main(argv: list[str]) -> int:
    from mpi4py import MPI

    from qbackends.fused.distributed import world

    spec = json.loads(open(argv[0]).read())
    comm = world()  # as the device starts MPI: an uncaught error on one rank ends the job
    for wires, precision in spec["cases"]:
        line = one_case(comm, wires, precision, spec)
        line["mpi_library"] = MPI.Get_library_version().splitlines()[0].strip()
        if comm.Get_rank() == 0:
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
