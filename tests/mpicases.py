"""QAOA energies and adjoint gradients on fused.qubit, for the distributed tests: ``mpiexec -n R python
tests/mpicases.py CASES.json`` runs each case with mpi=True and rank 0 prints one JSON line per case and layout;
the tests import ``value_and_gradient`` to run the same cases in one process.

A case is [wires, layers, weighted, formulation, precision] or ["circuit", name]; ``--raise-on 1`` makes rank 1
fail mid-run; ``--available BYTES`` makes that the memory the machine reads as available (a recorded probe fact);
``--node-memory BYTES``: the machine reads that less what the ranks' devices hold (each as much as this rank's);
``--energy-first`` takes each case's energy alone before its energy and gradient, on the same device;
``--shm-room BYTES``: the room /dev/shm reads as having; ``--small-tiles``: the tiles of 12 wires smaller for the adjoint pass than
for an energy; ``--ignore-memory`` builds the devices with ignore_memory=True; ``--exchange`` with share_node=False (each rank holds
a share and they exchange, as across nodes; else the ranks of this one machine share one state); ``--both-layouts``
runs each case shared, then exchanged (each line's ``layout``: "shared" or "exchange"); ``--most-probable``
also gives the most probable basis state of each case's final state (index, probability) in ``most_probable``.
Each line also gives the largest peak of any rank's traced memory over the case (``peak_bytes``) and the bytes the
device sized a rank at (``sized_bytes``), and the tables its cache keeps after it (``tables_kept``); what this rank's
devices hold (``held_bytes``, all the cases' so far) and what the /dev/shm files it has mapped since the start take
there (``shm_bytes``).
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path

import numpy as np


def graph(wires: int, weighted: bool):
    from qbackends.workloads.qaoa import Graph, random_graph

    g = random_graph(wires, int(1.5 * wires), 7)
    if not weighted:
        return g
    rng = np.random.default_rng(3)
    return Graph(g.nodes, tuple((u, v, float(rng.uniform(0.5, 2.0))) for u, v, _ in g.edges))


CIRCUIT_WIRES = 12


def circuit(name: str, dev, n: int = CIRCUIT_WIRES):
    """A circuit whose first layer is not QAOA's Hadamards on every wire (the rank bits: wire 0 on 2 ranks, wires 0
    and 1 on 4): ``x-on-a-rank-bit``: an X on wire 0 (rank 0's part is 0 until an exchange);
    ``rotation-on-a-rank-bit``: a trainable RY there; ``rotation-beside-hadamards``: a trainable RY on wire 1, a
    Hadamard on every other wire; ``rotations-on-every-other-wire``: Hadamards on wires 0 and 1 and a trainable RY
    on every other wire; ``block-first``: a diagonal block before any layer; ``block-last``: one after the last layer,
    an unweighted cost measured from its levels (no sweep takes it); ``another-cost-layer``: QAOA whose cost
    layers are of weights not proportional to the measured cost's (a diagonal of their own in each bit layout)."""
    import pennylane as qml

    cost = qml.Hamiltonian(
        [0.5 + 0.1 * w for w in range(n - 1)] + [0.3], [qml.Z(w) @ qml.Z(w + 1) for w in range(n - 1)] + [qml.Z(0)]
    )
    if name == "another-cost-layer":
        other = qml.Hamiltonian([1.7 - 0.07 * w for w in range(n - 1)], [qml.Z(w) @ qml.Z(w + 1) for w in range(n - 1)])

        @qml.qnode(dev, diff_method="adjoint")
        def qaoa(params):
            for w in range(n):
                qml.Hadamard(w)
            for gamma in (params[0], params[2]):
                qml.qaoa.cost_layer(gamma, other)
                qml.qaoa.mixer_layer(params[1], qml.qaoa.x_mixer(range(n)))
            return qml.expval(cost)

        return qaoa

    @qml.qnode(dev, diff_method="adjoint")
    def energy(params):
        if name == "block-first":
            qml.MultiRZ(params[0], wires=[0, 3, 5])
        for w in range(n):
            if name == "x-on-a-rank-bit" and w == 0:
                qml.X(w)
            elif name == "rotation-on-a-rank-bit" and w == 0 or name == "rotation-beside-hadamards" and w == 1:
                qml.RY(params[0], wires=w)
            elif name == "rotations-on-every-other-wire" and w > 1:
                qml.RY(params[0] + 0.1 * w, wires=w)
            else:
                qml.Hadamard(w)
        for w in range(n - 1):
            qml.IsingZZ(params[1], wires=[w, w + 1])
        for w in range(n):
            qml.RX(params[2], wires=w)
        qml.MultiRZ(params[1], wires=[0, 1, 7])
        for w in range(n):
            qml.RY(params[0], wires=w)
        if name == "block-last":
            for w in range(n - 1):
                qml.IsingZZ(params[2], wires=[w, w + 1])
            return qml.expval(qml.sum(*(qml.Z(w) @ qml.Z(w + 1) for w in range(n - 1))))
        return qml.expval(cost)

    return energy


def value_and_gradient(case: list, mpi: bool, **options) -> tuple[float, list, int | None]:
    """Energy and gradient of ``case`` at fixed angles, and (mpi) the exchanges of a state it took. A case is
    [wires, layers, weighted, formulation, precision], or ["circuit", name] or ["circuit", name, wires] (``circuit``)."""
    from qbackends.fused.distributed import ranks_of

    value, grad, dev = _run(case, mpi, **options)
    return value, grad, ranks_of(dev).exchanges if mpi else None


DEVICES: list = []  # the devices built so far in this process, their energies and fixed angles
ENERGIES: list = []
FIXED: list = []


def _held() -> int:
    """Bytes the tables and buffers of this rank's devices hold."""
    ranks = [dev._mpi for dev in DEVICES if dev._mpi is not None]
    return sum(sum(b.nbytes for b in r._buffers.values()) + r._cache.nbytes for r in ranks)


def _mapped_shared_files() -> dict[int, int]:
    """The /dev/shm files this rank maps (unlinked ones too), by inode: the bytes each takes there (the whole file is
    allocated and mapped, so its mappings' furthest end). Read from this process's maps, not from /dev/shm's free room,
    which every other process on the machine moves."""
    files: dict[int, int] = {}
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/dev/shm/"):
            start, end = (int(a, 16) for a in fields[0].split("-"))
            inode = int(fields[4])
            files[inode] = max(files.get(inode, 0), int(fields[2], 16) + end - start)
    return files


def _run(case: list, mpi: bool, energy_first: bool = False, **options):
    from autograd import value_and_grad
    from pennylane import numpy as pnp

    from qbackends.device import get_device
    from qbackends.workloads.qaoa import energy_function

    options = {"mpi": True, **options} if mpi else options
    if case[0] == "circuit":
        wires = case[2] if len(case) > 2 else CIRCUIT_WIRES
        dev = get_device("local:qbackends/fused.qubit", wires=wires, **options)
        energy = circuit(case[1], dev, wires)
        params = pnp.array([0.3, 0.7, 1.1], requires_grad=True)
    else:
        wires, layers, weighted, formulation, precision = case
        dev = get_device("local:qbackends/fused.qubit", wires=wires, precision=precision, **options)
        energy = energy_function(dev, graph(wires, weighted), layers, formulation)
        params = pnp.array(np.random.default_rng(5).uniform(size=(2, layers)), requires_grad=True)
    DEVICES.append(dev)
    ENERGIES.append(energy)
    FIXED.append(pnp.array(params, requires_grad=False))
    if energy_first:
        energy(pnp.array(params, requires_grad=False))
    value, grad = value_and_grad(energy)(params)
    return float(value), np.asarray(grad).tolist(), dev


def _team_threads(ranks) -> int | None:
    """The threads a rank's kernels take in its team (None: the ranks exchange, no team)."""
    from qbackends.fused import kernels

    if ranks.memory is None:
        return None
    with ranks.memory.team():
        return kernels.threads()


def main(argv: list[str]) -> int:
    import pennylane  # noqa: F401 - imported before memory is traced: traced, imports take 3x as long
    from mpi4py import MPI

    import qbackends.workloads.qaoa  # noqa: F401
    from qbackends.fused.distributed import ranks_of

    cases = json.loads(open(argv[0]).read())
    fail_on = int(argv[argv.index("--raise-on") + 1]) if "--raise-on" in argv else None
    if "--available" in argv:
        from qbackends import probe

        available = int(argv[argv.index("--available") + 1])
        probe.host_memory_available = lambda meminfo="/proc/meminfo": available
    if "--node-memory" in argv:
        from qbackends import probe

        node = int(argv[argv.index("--node-memory") + 1])
        probe.host_memory_available = lambda meminfo="/proc/meminfo": node - MPI.COMM_WORLD.Get_size() * _held()
    if "--small-tiles" in argv:  # one c128 state's tiles of 2^9 at 12 wires, φ's and λ's of 2^8 (as 28 wires' are)
        from qbackends.fused import kernels

        kernels.TILE_BITS, kernels.MAX_TILE_BITS, kernels.MIN_RUN_BITS, kernels.ADJOINT_TILES_BYTES = 7, 9, 6, 16 << 9
    if "--shm-room" in argv:
        from qbackends.fused import shared

        shm_room = int(argv[argv.index("--shm-room") + 1])
        shared.room = lambda: shm_room
    options = {"ignore_memory": True} if "--ignore-memory" in argv else {}
    options["energy_first"] = "--energy-first" in argv
    # each case on one state the ranks share ("shared"), on a share each with exchanges ("exchange"), or both in turn
    layouts = ["shared", "exchange"] if "--both-layouts" in argv else ["exchange"] if "--exchange" in argv else ["shared"]
    rank = MPI.COMM_WORLD.Get_rank()
    before = _mapped_shared_files()  # MPI's own segment
    for k, (case, layout) in enumerate((case, layout) for case in cases for layout in layouts):
        if fail_on == rank and k == 1:
            raise RuntimeError(f"rank {rank} fails on purpose")
        tracemalloc.start()
        value, grad, dev = _run(case, mpi=True, share_node=layout == "shared", **options)
        peak = MPI.COMM_WORLD.allreduce(tracemalloc.get_traced_memory()[1], op=MPI.MAX)
        tracemalloc.stop()
        ranks = ranks_of(dev)
        exchanges = ranks.exchanges
        most = None
        if "--most-probable" in argv:
            ENERGIES[-1](FIXED[-1])  # the energy alone: the final state is kept
            most = ranks.most_probable()
        if rank == 0:
            line = {"case": case, "layout": layout, "value": value, "grad": grad, "exchanges": exchanges, "peak_bytes": peak}
            line["sized_bytes"], line["tables_kept"], line["most_probable"] = ranks.sized, ranks._cache.tables, most
            line["held_bytes"], line["shm_bytes"] = _held(), sum(n for i, n in _mapped_shared_files().items() if i not in before)
            line["team_threads"] = _team_threads(ranks)
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":  # under pytest the ranks import no jax (tests/nojax)
    sys.exit(main(sys.argv[1:]))
