"""Issue 27: what fused.qubit's distributed state costs in exchanges, measured on loopback with the [mpi] extra's
own mpiexec (MPICH, shared memory between the ranks of one machine), 1, 2 and 4 ranks; and (issue 46) ranks of one
node sharing one state, the default there, against ranks that each hold a share and exchange (share_node=False, as
ranks on several nodes do).

For each size, ``benchmarks/mpi_exchange.py`` runs under ``mpiexec -n R`` on a fused.qubit ``mpi=True`` device:
a p=2 QAOA value + adjoint gradient step (``qaoa.energy_function``, the ``qml.qaoa`` formulation, on
gnm(n, 1.5n, seed=1967)), and one exchange of a rank's share alone (``distributed.Ranks.exchange``: pairwise,
in place). Reported: medians of the slowest rank's time, the bytes each exchange sends per rank
((R-1)/R of the share), the bandwidth that reaches, the 3p exchanges' part of the step, and the step
against one process (R = 1, and the same step without mpi=True); for R > 1 each layout in turn. Each rank gets cores / R kernel threads (OMP_NUM_THREADS)
(at least one): 4 ranks on this 2-core machine oversubscribe it two to a core, and the output says so.
``docs/clusters.md`` ("How far it scales") carries these into the model of a step on R nodes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import record_seconds

MPIEXEC = Path(sys.executable).parent / "mpiexec"
RUNNER = Path(__file__).with_name("mpi_exchange.py")
RANKS = (1, 2, 4)
LAYERS = 2
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

needs_mpi = pytest.mark.skipif(
    not MPIEXEC.exists() or importlib.util.find_spec("mpi4py") is None,
    reason=f"no mpiexec next to {sys.executable} or no mpi4py: pip install 'qbackends[mpi]'",
)

# (wires, precision, timed steps, timed exchanges)
CASES = [
    pytest.param(20, "c128", 7, 9, id="20-c128"),
    pytest.param(22, "c128", 5, 9, id="22-c128", marks=pytest.mark.slow),
    pytest.param(24, "c128", 3, 5, id="24-c128", marks=pytest.mark.slow),
    pytest.param(24, "c64", 3, 5, id="24-c64", marks=pytest.mark.slow),
]


def launch(ranks: int, spec: dict, folder: Path, timeout: float = 300) -> list[dict]:
    """Rank 0's JSON lines from ``mpiexec -n ranks python mpi_exchange.py`` on ``spec``, cores / ranks threads each."""
    path = folder / f"spec-{ranks}.json"
    path.write_text(json.dumps(spec))
    root = str(Path(__file__).parents[1])
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(max(1, CORES // ranks)),
        "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
    }
    run = subprocess.run(
        [str(MPIEXEC), "-n", str(ranks), sys.executable, str(RUNNER), str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert run.returncode == 0, f"mpiexec -n {ranks}: exit {run.returncode}\n{run.stderr[-3000:]}"
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]


def oversubscribed(ranks: int) -> str:
    return f" (oversubscribed: {ranks} ranks on {CORES} cores)" if ranks > CORES else ""


@needs_mpi
@pytest.mark.parametrize(("wires", "precision", "steps", "exchanges"), CASES)
def test_mpi_exchange(benchmark, tmp_path, wires, precision, steps, exchanges):
    """The exchange alone and a p=2 value + gradient step on 1, 2 and 4 ranks; checks that every R gives
    the one-process energy and that a step takes 3p exchanges (none on one rank)."""
    spec = {"cases": [[wires, precision]], "layers": LAYERS, "formulation": "qml.qaoa", "steps": steps}
    spec["exchanges"] = exchanges
    results: dict[tuple[int, bool], dict] = {}  # (ranks, sharing one state)

    def every_rank_count():
        for ranks in RANKS:
            for share in (True, False) if ranks > 1 else (False,):
                (results[ranks, share],) = launch(ranks, {**spec, "one_process": ranks == 1, "share_node": share}, tmp_path)

    benchmark.pedantic(every_rank_count, rounds=1, iterations=1)
    benchmark.group = f"MPI exchange, QAOA p={LAYERS}, {wires} wires {precision}"
    benchmark.extra_info.update(results={f"{r} {'shared' if s else 'exchange'}": v for (r, s), v in results.items()}, cores=CORES)

    one = results[1, False]
    tol = 1e-10 if precision == "c128" else 1e-5
    for (ranks, share), line in results.items():
        assert line["shared_state"] == share, line
        assert line["exchanges_per_step"] == (0 if ranks == 1 or share else 3 * LAYERS), line
        assert abs(line["value"] - one["value"]) <= tol * max(1.0, abs(one["value"])), (ranks, line["value"], one["value"])

    label = f"mpi: {wires} wires {precision}"
    record_seconds(
        f"{label}, p={LAYERS} value+gradient",
        "one process, mpi=False",
        one["one_process_step_s"],
        f"{CORES} threads; the mpi=True step on 1 rank x{one['step_s'] / one['one_process_step_s']:.2f} of it",
    )
    for (ranks, share), line in results.items():
        sent = line["share_bytes"] * (ranks - 1) // ranks
        in_step = line["exchanges_per_step"] * line["exchange_s"] / line["step_s"]
        who = f"{ranks} rank{'s' if ranks > 1 else ''} x {line['threads_per_rank']} thread{oversubscribed(ranks)}"
        if share:
            record_seconds(
                f"{label}, p={LAYERS} value+gradient",
                f"mpi=True, {ranks} ranks sharing one state",
                line["step_s"],
                f"{who}; no exchanges; x{one['one_process_step_s'] / line['step_s']:.2f} of mpi=False's speed, "
                f"x{results[ranks, False]['step_s'] / line['step_s']:.2f} of exchanging ranks'",
            )
            continue
        if ranks > 1:  # one rank exchanges nothing
            record_seconds(
                f"{label}, exchange of a rank's share alone",
                f"{ranks} ranks",
                line["exchange_s"],
                f"share {line['share_bytes'] / 2**20:.0f} MiB, sends {sent / 2**20:.0f} MiB per rank, "
                f"{sent / line['exchange_s'] / 1e9:.2f} GB/s{oversubscribed(ranks)}",
            )
        record_seconds(
            f"{label}, p={LAYERS} value+gradient",
            f"mpi=True, {ranks} rank{'s' if ranks > 1 else ''}{' exchanging shares' if ranks > 1 else ''}",
            line["step_s"],
            f"{who}; {line['exchanges_per_step']} exchanges = {in_step:.0%} of the step; "
            f"x{one['step_s'] / line['step_s']:.2f} of 1 rank's speed, x{one['one_process_step_s'] / line['step_s']:.2f} of mpi=False's",
        )
