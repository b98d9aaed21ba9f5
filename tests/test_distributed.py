"""fused.qubit with mpi=True: the layout in one process, then real ranks under the [mpi] extra's own mpiexec (MPICH's
Hydra, on loopback), sharing one state (the default on one node) and exchanging shares (share_node=False, as across
nodes): energies and gradients equal the one-process run, ``qbackends run qaoa --mpi`` gives its
costs and resumes, and a rank that dies, fails or cannot share the state ends the job at once."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mpicases import value_and_gradient
from rankprocesses import kill_a_rank

from qbackends import checkpoint
from qbackends.errors import CheckpointError, RankCountError
from qbackends.fixes import option
from qbackends.fused.distributed import Layout, local_bits, plan
from qbackends.fused.program import DiagonalBlock, ProductLayer

MPIEXEC = Path(sys.executable).parent / "mpiexec"
needs_mpi = pytest.mark.skipif(
    not MPIEXEC.exists() or importlib.util.find_spec("mpi4py") is None,
    reason=f"no mpiexec next to {sys.executable} or no mpi4py: pip install 'qbackends[mpi]'",
)
CASES = Path(__file__).with_name("mpicases.py")
QAOA = [sys.executable, "-m", "qbackends.cli", "run", "qaoa", "--nodes", "14", "--edges", "21", "--no-plot", "--quiet"]


# ---- the layout, in one process ---------------------------------------------------------------


def test_a_z_product_splits_into_a_local_mask_and_this_ranks_sign():
    layout = Layout(nwires=12, local=10, rank=2)  # rank bits: index bit 10 (0) and bit 11 (1)
    assert layout.split(0b1 << 11 | 0b101) == (0b101, -1)
    assert layout.split(0b1 << 10 | 0b1) == (0b1, 1)
    layout.swapped = True  # index bits 10, 11 now local bits 8, 9; index bits 8, 9 the rank bits
    assert layout.split(0b1 << 11) == (0b1 << 9, 1)
    assert layout.split(0b1 << 9) == (0, -1)
    assert layout.global_indices(np.array([0, 1 << 9])).tolist() == [1 << 9, (1 << 9) | (1 << 11)]


def test_a_layer_on_every_wire_takes_one_exchange_and_the_layout_stays_swapped():
    layout = Layout(nwires=12, local=10, rank=1)
    x = np.array([[0, 1], [1, 0]], dtype=complex)
    layer = ProductLayer({w: (x, -1, 0, 0.0) for w in range(12)})
    first = plan([layer, DiagonalBlock([1 << 11], [0.5], [0], [1.0]), layer], layout)
    kinds = [step[0] for step in first.steps]
    assert kinds == ["layer", "exchange", "layer", "block", "layer", "exchange", "layer"] and first.exchanges == 2
    assert sorted(first.steps[0][1].gates) == list(range(10))  # wires 2..11: local wires 0..9
    assert first.steps[3][1].masks == [1 << 9]  # index bit 11 is local bit 9 after the exchange
    assert layout.swapped is False  # two exchanges: back where it started


def test_ranks_that_cannot_share_the_state_are_refused_by_name():
    assert local_bits(12, 4) == 10
    with pytest.raises(RankCountError, match=r"on 3 ranks.*power of two.*Fix: start 2 or 4 ranks"):
        local_bits(14, 3)
    with pytest.raises(RankCountError, match=r"4 ranks are too many for 11 wires.*at most 2 ranks"):
        local_bits(11, 4)
    with pytest.raises(RankCountError) as too_few:  # one rank is already too many: no rank count is the fix
        local_bits(8, 1)
    assert str(too_few.value) == (
        "mpi=True: 8 wires are too few to split over ranks (a rank holds at least 2^10 amplitudes). "
        "Fix: leave out mpi=True (--mpi): one process runs 8 wires; or run at least 10 wires."
    )


def test_the_memory_guard_sizes_the_ranks_on_this_node():
    from qbackends.device import rank_share_wires
    from qbackends.launchers import Launch

    on_one_node = Launch("mpiexec (MPICH)", 0, 4, 0, 4, "127.0.0.1", 29500)
    one_per_node = Launch("srun", 0, 4, 0, 1, "n1", 29500)
    assert rank_share_wires(30, on_one_node) == 30  # four quarters in one node's memory
    assert rank_share_wires(30, one_per_node) == 28  # a quarter of the state per node


def test_a_checkpoint_resumes_only_on_as_many_ranks(tmp_path):
    words = checkpoint.Inputs("graph", "the graph differs")
    made = checkpoint.RunIdentity({"layers": 2}, "g", "qbackends.fused.qubit", words, ranks=4)
    state = {"config": {"layers": 2}, "run": made.record()}
    checkpoint.check(tmp_path, state, made, option)
    for now, then_now in ((2, "4 ranks then, 2 ranks now"), (None, "4 ranks then, one process now")):
        with pytest.raises(CheckpointError, match=f"another number of MPI ranks \\({then_now}\\)"):
            checkpoint.check(
                tmp_path, state, checkpoint.RunIdentity({"layers": 2}, "g", "qbackends.fused.qubit", words, ranks=now), option
            )


# ---- real ranks ---------------------------------------------------------------------------------


def _ranks(
    n: int, cases: list, tmp_path: Path, *extra: str, timeout: float = 300, threads: str | None = None
) -> subprocess.CompletedProcess:
    """``threads``: OMP_NUM_THREADS for the ranks ("": unset); None: as this process has it."""
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    if threads is not None:
        env.pop("OMP_NUM_THREADS", None)
        env.update({"OMP_NUM_THREADS": threads} if threads else {})
    return subprocess.run(
        [str(MPIEXEC), "-n", str(n), sys.executable, str(CASES), str(spec), *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


LAYOUTS = ["shared", "exchange"]  # one state the ranks share (one node), or a share each and exchanges
EXCHANGE = "--exchange"
BOTH_LAYOUTS = "--both-layouts"  # each case in both, one after the other, in one run of the ranks


def _same_as_one_process(ranks: int, cases: list, tmp_path: Path, *extra: str) -> None:
    """Each case on ``ranks`` ranks, in both layouts (one run), gives one process's energy and gradient."""
    expected = [value_and_gradient(case, mpi=False) for case in cases]  # one process first, the reference
    run = _ranks(ranks, cases, tmp_path, BOTH_LAYOUTS, *extra)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [(line["case"], line["layout"]) for line in lines] == [(case, layout) for case in cases for layout in LAYOUTS]
    for line, (value, grad, _) in zip(lines, [e for e in expected for _ in LAYOUTS], strict=True):
        qaoa = line["case"][0] != "circuit"
        if line["layout"] == "shared":
            assert line["exchanges"] == 0
        elif qaoa:  # p forward (mixers; the Hadamards need none), 2p back (φ and λ)
            assert line["exchanges"] == 3 * line["case"][1]
        tol = 1e-12 if not qaoa or line["case"][4] == "c128" else 1e-5
        assert abs(line["value"] - value) <= tol * max(1.0, abs(value)), line["case"]
        assert np.max(np.abs(np.array(line["grad"]) - grad)) <= tol * max(1.0, np.max(np.abs(grad))), line["case"]
        assert np.max(np.abs(grad)) > 0.1  # a real gradient, not zeros


@needs_mpi
@pytest.mark.parametrize("ranks", [2, 4])
def test_ranks_give_the_energy_and_gradient_of_one_process(ranks, tmp_path):
    cases = [[12, 1, False, "fast", "c128"], [12, 2, True, "qml.qaoa", "c128"], [13, 3, True, "fast", "c128"]]
    cases.append([17, 2, True, "fast", "c128"])  # tiles of 2^15: a pass's tiles split among the ranks and threads
    if ranks == 2:
        cases.append([12, 2, False, "fast", "c64"])
    _same_as_one_process(ranks, cases, tmp_path)


@needs_mpi
def test_ranks_tile_the_forward_pass_as_the_adjoint_pass_that_reads_it(tmp_path):
    """Where the adjoint pass's tiles are smaller than an energy's (28 wires a rank at c128; here 12, with small
    tiles), a rank's forward pass takes the adjoint's tiling: the layer it undid on λ is the adjoint's pass."""
    cases = [[12, 2, False, "fast", "c128"], [13, 2, True, "fast", "c128"], [13, 4, False, "qml.qaoa", "c128"]]
    _same_as_one_process(2, cases, tmp_path, "--small-tiles")


@needs_mpi
@pytest.mark.parametrize("ranks", [2, 4])
def test_ranks_give_one_processs_answers_whatever_the_first_layer_does_on_the_rank_bits(ranks, tmp_path):
    """The first layer's fixed gates on rank bits are each rank's factor; trainable ones wait for an exchange."""
    names = ["x-on-a-rank-bit", "rotation-on-a-rank-bit", "rotation-beside-hadamards", "rotations-on-every-other-wire"]
    names += ["block-first", "block-last", "another-cost-layer"]
    _same_as_one_process(ranks, [["circuit", name] for name in names], tmp_path)


@needs_mpi
@pytest.mark.parametrize("ranks", [2, 4])
def test_shared_and_exchanged_states_give_the_same_most_probable_bitstring(ranks, tmp_path):
    """Each rank reads its part of a shared state, or its share (the layout's bits mapped back): the same basis
    state, at the same probability, from every rank."""
    cases = [[12, 1, False, "fast", "c128"], [13, 2, True, "qml.qaoa", "c128"], ["circuit", "block-first"]]
    run = _ranks(ranks, cases, tmp_path, "--most-probable", BOTH_LAYOUTS)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [line["layout"] for line in lines] == LAYOUTS * len(cases)
    for shared, exchanged in zip(lines[::2], lines[1::2], strict=True):
        assert shared["case"] == exchanged["case"]
        (index, p), (other, q) = shared["most_probable"], exchanged["most_probable"]
        assert index == other and abs(p - q) <= 1e-12 and 0 < p <= 1


@needs_mpi
def test_ranks_sharing_a_state_hold_it_once_for_the_node(tmp_path):
    """At 20 wires on 2 ranks sharing one state, the device sizes the node at ψ, λ and the cost's tables of one bit
    layout (1-byte levels unweighted; a weighted cost's diagonal, 8 or 4 bytes), and that is what its /dev/shm files take: the
    node holds one process's state, not a share per rank plus exchange pieces. get_device's figure, the least a cost
    needs, is the unweighted one."""
    from qbackends import capabilities
    from qbackends.context import get_context

    fused = get_context().registry.backends["qbackends/fused.qubit"]
    cases = [[20, 2, w, "fast", p] for p in ("c128", "c64") for w in (False, True)]
    run = _ranks(2, cases, tmp_path)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    held_before = 0
    for k, line in enumerate(lines):
        weighted, precision = line["case"][2], line["case"][4]
        amplitude, real = {"c128": (16, 8), "c64": (8, 4)}[precision]
        assert line["sized_bytes"] == (2 * amplitude + (real if weighted else 1)) << 20, line["case"]
        if not weighted:
            assert line["sized_bytes"] == capabilities.working_set_bytes(fused, 20, precision, "adjoint", mpi=2, shared=True)
        assert line["held_bytes"] - held_before == line["sized_bytes"]  # this case's device holds what it sized
        held_before = line["held_bytes"]
        # a page for each device's barrier, the rest exactly the arrays
        assert 0 <= line["shm_bytes"] - line["held_bytes"] <= 4096 * (k + 1), (line["shm_bytes"], line["held_bytes"])


@needs_mpi
def test_ranks_sharing_the_cores_of_a_node_take_a_share_of_them_unless_told(tmp_path):
    """Ranks no launcher bound to cores of their own (mpiexec's default here) each see every core: unless
    OMP_NUM_THREADS says otherwise, a rank of a team takes its share of them (all threads on every core would
    wait on each other at each barrier)."""
    cores, online = len(os.sched_getaffinity(0)), os.cpu_count()
    case = [[12, 1, False, "fast", "c128"]]
    for threads, expected in (("", max(1, cores // 2) if 2 * cores > online else cores), ("3", 3)):
        run = _ranks(2, case, tmp_path, threads=threads)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["team_threads"] == expected, threads


@needs_mpi
def test_a_dev_shm_too_small_for_the_shared_state_is_named_with_its_fix(tmp_path):
    """A container's /dev/shm (64 MiB unless --shm-size says more) as a recorded fact: 1 MiB of room, 16 wires on 2 ranks
    sharing the state (2.0625 MiB): refused at the first circuit, naming /dev/shm and how to give it room."""
    refused = _ranks(2, [[16, 1, False, "fast", "c128"]], tmp_path, "--shm-room", str(1 << 20))
    assert refused.returncode != 0 and not refused.stdout
    assert (
        "the ranks of this node share 0.00201 GiB (2162688 bytes) in /dev/shm (16 wires at c128 on 2 ranks: the state of "
        "its 2^16 amplitudes and λ for the gradient; the cost's tables, 1 byte an amplitude (1 of levels: 1 byte, 0 "
        "diagonals of weighted terms at 8 bytes))"
    ) in refused.stderr
    assert (
        "the node needs 0.00104 GiB (1114112 bytes) more than its memory and /dev/shm have available. Fix: give /dev/shm "
        "more room (in a container: docker run --shm-size) or pass share_node=False to the device (each rank then holds "
        "its share in its own memory); precision='c64' halves the state's memory"
    ) in refused.stderr


@needs_mpi
def test_a_circuit_the_node_cannot_hold_in_one_shared_state_is_refused_before_it_runs(tmp_path):
    """With 2.875 MiB available (a recorded probe fact), 16 wires on 2 ranks sharing the state: get_device's figure
    and the unweighted cost (2.125 MiB) fit; QAOA whose cost layers are not the measured cost's keeps two
    diagonals (3 MiB) and is refused with the node's figure; ignore_memory=True runs it to one process's answer."""
    cases = [[16, 1, False, "fast", "c128"], ["circuit", "another-cost-layer", 16]]
    available = str(23 << 17)
    refused = _ranks(2, cases, tmp_path, "--available", available)
    assert refused.returncode != 0
    assert [json.loads(line)["case"] for line in refused.stdout.splitlines()] == cases[:1]
    assert (
        "InsufficientMemoryError: fused.qubit with mpi=True cannot hold this circuit: the ranks of this node share "
        "0.00293 GiB (3145728 bytes) in /dev/shm (16 wires at c128 on 2 ranks: the state of its 2^16 amplitudes and λ "
        "for the gradient; the cost's tables, 16 bytes an amplitude (0 of levels: 0 bytes, 2 diagonals of weighted "
        "terms at 8 bytes)), and the node needs 0.000122 GiB (131072 bytes) more than its memory and /dev/shm have "
        "available. Fix: precision='c64' halves the state's memory"
    ) in refused.stderr
    ignored = _ranks(2, cases, tmp_path, "--available", available, "--ignore-memory")
    assert ignored.returncode == 0, ignored.stderr
    value, _, _ = value_and_gradient(cases[1], mpi=False)
    assert abs(json.loads(ignored.stdout.splitlines()[1])["value"] - value) <= 1e-12 * max(1.0, abs(value))


@needs_mpi
def test_each_rank_holds_about_its_share_of_one_processs_memory(tmp_path):
    """Peak traced memory of a 20-wire value and gradient: per rank on 2 and 4 ranks against one process.
    Measured 0.67 and 0.37 of it (about 1.4/R: a rank holds its share of ψ and λ and of the tables, and exchanges
    in place; one process ψ, λ and the tables, and its trials' temporaries)."""
    import tracemalloc

    case = [20, 2, True, "fast", "c128"]
    value_and_gradient(case, mpi=False)  # warm, as the ranks are after their first case
    tracemalloc.start()
    value_and_gradient(case, mpi=False)
    one = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    for ranks in (2, 4):
        run = _ranks(ranks, [[12, 1, False, "fast", "c128"], case], tmp_path, EXCHANGE)
        assert run.returncode == 0, run.stderr
        peak = json.loads(run.stdout.splitlines()[-1])["peak_bytes"]
        print(f"{ranks} ranks: {peak / one:.2f} of one process's peak ({one / 2**20:.0f} MiB)")
        assert peak <= 1.6 * one / ranks, (ranks, peak / one)


@needs_mpi
def test_a_rank_is_sized_within_a_tenth_of_its_peak_memory(tmp_path):
    """get_device sizes a rank for the least a cost needs (ψ, λ, 1-byte levels in the two bit layouts, the exchange's
    piece); the device sizes a weighted cost's real diagonals when it runs one, and a cost layer's own where its
    weights are not the measured cost's (three diagonals, all kept). Measured at 20 wires on 2 ranks: peaks 1.02-1.05 of the
    figure (the rest: Python's own objects, about 0.7 MB)."""
    from qbackends import capabilities
    from qbackends.context import get_context

    fused = get_context().registry.backends["qbackends/fused.qubit"]
    cases = [[12, 1, False, "fast", "c128"]] + [[20, 2, w, "fast", p] for p in ("c128", "c64") for w in (False, True)]
    cases.append(["circuit", "another-cost-layer", 20])
    run = _ranks(2, cases, tmp_path, EXCHANGE)
    assert run.returncode == 0, run.stderr
    for line in [json.loads(line) for line in run.stdout.splitlines()][1:]:
        weighted, precision = (line["case"][2], line["case"][4]) if line["case"][0] != "circuit" else (True, "c128")
        guarded = capabilities.working_set_bytes(fused, 20, precision, "adjoint", mpi=2) // 2  # per rank
        real = {"c128": 8, "c64": 4}[precision]
        diagonals = 3 if line["case"][0] == "circuit" else 2  # the other layers' own: one in each bit layout
        assert line["sized_bytes"] == guarded + ((diagonals * real - 2) << 19 if weighted else 0), line["case"]
        assert 0.9 <= line["peak_bytes"] / line["sized_bytes"] <= 1.1, (line["case"], line["peak_bytes"] / line["sized_bytes"])
        assert line["tables_kept"] == (3 if line["case"][0] == "circuit" else 2)  # all kept: none built again a run


@needs_mpi
def test_a_weighted_cost_the_node_cannot_hold_is_refused_before_it_runs(tmp_path):
    """With 3 MiB available (a recorded probe fact), 16 wires on 2 ranks: get_device's figure and the unweighted
    cost fit (1.3125 MiB a rank), the weighted cost's diagonals do not (1.75 MiB a rank); ignore_memory=True runs it."""
    cases = [[16, 1, False, "fast", "c128"], [16, 1, True, "fast", "c128"]]
    refused = _ranks(2, cases, tmp_path, "--available", str(3 << 20), EXCHANGE)
    assert refused.returncode != 0
    assert [json.loads(line)["case"] for line in refused.stdout.splitlines()] == cases[:1]
    assert (
        "InsufficientMemoryError: fused.qubit with mpi=True cannot hold this circuit: a rank holds 0.00171 GiB (1835008 "
        "bytes) (16 wires at c128 on 2 ranks: the state of its 2^15 amplitudes and λ for the gradient; the cost's "
        "tables, 16 bytes an amplitude (0 of levels: 0 bytes, 2 diagonals of weighted terms at 8 bytes); the "
        "exchange's piece), and the ranks on the node with the least room need 0.000488 GiB (524288 bytes) more than "
        "it has available. Fix: precision='c64' halves the state's memory; start the ranks across more nodes"
    ) in refused.stderr
    ignored = _ranks(2, cases, tmp_path, "--available", str(3 << 20), "--ignore-memory", EXCHANGE)
    assert ignored.returncode == 0, ignored.stderr
    value, _, _ = value_and_gradient(cases[1], mpi=False)
    assert abs(json.loads(ignored.stdout.splitlines()[1])["value"] - value) <= 1e-12 * max(1.0, abs(value))


@needs_mpi
def test_tables_a_rank_already_holds_are_not_sized_again(tmp_path):
    """The energy alone first (ψ, the weighted cost's two diagonals, the piece: 1.25 MiB a rank at 16 wires), then energy
    and gradient on the same device: only λ is new (0.5 MiB a rank, 1 MiB for the node's two ranks), so it runs with
    1.25 MiB then available (a node of 3.75 MiB less the 2.5 MiB its ranks hold, as recorded probe facts); counting
    the held tables again would ask 2 MiB and refuse it."""
    case = [16, 1, True, "fast", "c128"]
    run = _ranks(2, [case], tmp_path, "--energy-first", "--node-memory", str(15 << 18), EXCHANGE)
    assert run.returncode == 0, run.stderr
    value, _, _ = value_and_gradient(case, mpi=False)
    assert abs(json.loads(run.stdout)["value"] - value) <= 1e-12 * max(1.0, abs(value))


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 4])
def test_ranks_give_the_energy_and_gradient_of_one_process_up_to_22_wires(ranks, tmp_path):
    cases = [[16, 3, False, "fast", "c128"], [16, 2, True, "qml.qaoa", "c128"], [20, 2, True, "fast", "c128"]]
    cases += [[22, 1, False, "fast", "c128"], [22, 3, True, "fast", "c128"]]
    _same_as_one_process(ranks, cases, tmp_path)


def _costs(folder: Path) -> list:
    return json.loads((folder / "qaoa-results.json").read_text())["costs"]


@needs_mpi
def test_qaoa_on_two_ranks_gives_the_costs_of_one_process_and_resumes(tmp_path):
    from qbackends.workloads import qaoa

    one = qaoa.run(qaoa.Config(nodes=14, edges=21, iterations=3), "local:qbackends/fused.qubit")
    folder = tmp_path / "two"
    first = subprocess.run(
        [str(MPIEXEC), "-n", "2", *QAOA, "--mpi", "--iterations", "2", "--results-dir", str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("expected cut") == 1  # rank 0 alone prints
    resumed = subprocess.run(
        [str(MPIEXEC), "-n", "2", *QAOA, "--mpi", "--iterations", "3", "--resume", "--results-dir", str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    saved = json.loads((folder / "checkpoints" / qaoa.CHECKPOINT_FILE).read_text())
    assert saved["run"]["ranks"] == 2 and saved["progress"]["iteration"] == 3
    costs = _costs(folder)
    assert len(costs) == 3 and max(abs(a - b) for a, b in zip(costs, one["costs"], strict=True)) <= 1e-12
    result = json.loads((folder / "qaoa-results.json").read_text())
    assert result["most_probable_bitstring"] == one["most_probable_bitstring"]


@needs_mpi
def test_ranks_not_a_power_of_two_are_refused_before_mpi_starts(tmp_path):
    run = subprocess.run(
        [str(MPIEXEC), "-n", "3", *QAOA, "--mpi", "--results-dir", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "mpi=True on 3 ranks" in lines[0] and "power of two" in lines[0], run.stderr
    assert not (tmp_path / "qaoa-results.json").exists()


@needs_mpi
def test_a_rank_that_fails_ends_every_rank(tmp_path):
    cases = [[12, 1, False, "fast", "c128"]] * 3
    start = time.monotonic()
    run = _ranks(2, cases, tmp_path, "--raise-on", "1", timeout=120)
    assert run.returncode != 0
    assert "rank 1 fails on purpose" in run.stderr
    assert run.stdout.count('"case"') <= 1  # rank 0 never finished the second case (it waited on rank 1)
    assert time.monotonic() - start < 60


@needs_mpi
def test_a_killed_rank_ends_the_qaoa_run_in_seconds(tmp_path):
    run = subprocess.Popen(
        [str(MPIEXEC), "-n", "2", *QAOA, "--mpi", "--iterations", "100000", "--results-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )

    def started() -> None:
        checkpoint_file = tmp_path / "checkpoints" / "qaoa-checkpoint.json"
        deadline = time.monotonic() + 120
        while not checkpoint_file.exists() and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.2)
        assert checkpoint_file.exists(), run.communicate()[1] if run.poll() is not None else "no checkpoint in 120 s"

    kill_a_rank(run, started)
