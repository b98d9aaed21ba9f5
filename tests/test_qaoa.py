"""The QAOA workload: exact energies, backends agree, max cut is exact, checkpoints resume exactly."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time

import networkx as nx
import numpy as np
import pennylane as qml
import pytest

from qbackends.errors import CheckpointError, WorkloadInputError
from qbackends.fixes import hyperparameter, option
from qbackends.workloads import qaoa


def brute_force_max_cut(graph: qaoa.Graph) -> float:
    best = 0.0
    for bits in itertools.product((0, 1), repeat=graph.nodes):
        best = max(best, sum(w for u, v, w in graph.edges if bits[u] != bits[v]))
    return best


@pytest.mark.parametrize(("nodes", "edges", "seed"), [(5, 7, 1), (8, 12, 1967), (9, 20, 3)])
def test_vectorised_cut_values_match_brute_force(nodes, edges, seed):
    graph = qaoa.random_graph(nodes, edges, seed)
    values = qaoa.cut_values(graph)
    assert values.max() == brute_force_max_cut(graph)
    bits = [1, 0, 1, 1, 0, 0, 1, 0, 1][:nodes]
    index = int("".join(map(str, bits)), 2)
    assert values[index] == sum(w for u, v, w in graph.edges if bits[u] != bits[v])


def test_weighted_edge_list(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("# triangle plus a tail\n0 1 2.5\n1 2\n0 2 0.5  # light\n2 3 1.5\n")
    graph = qaoa.read_edge_list(path)
    assert graph.nodes == 4 and graph.weighted
    assert qaoa.cut_values(graph).max() == brute_force_max_cut(graph) == 5.0


def test_edge_list_error_names_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("0 1\n1 x\n")
    with pytest.raises(WorkloadInputError, match=r"line 2: invalid literal for int\(\) with base 10: 'x': '1 x'"):
        qaoa.read_edge_list(path)


@pytest.mark.parametrize("weighted", [False, True])
def test_fast_formulation_equals_qml_qaoa_circuit(weighted):
    graph = qaoa.random_graph(8, 12, 1967)
    if weighted:
        graph = qaoa.Graph(graph.nodes, tuple((u, v, 0.5 + (u * v) % 3) for u, v, _ in graph.edges))
    dev = qml.device("lightning.qubit", wires=8)
    params = np.random.default_rng(5).uniform(0, np.pi, (2, 3))

    def energy(formulation):
        @qml.qnode(dev)
        def e(p):
            qaoa.circuit(graph, 3, formulation)(p)
            return qml.expval(qaoa.cost_hamiltonian(graph))

        return e(params)

    assert abs(energy("fast") - energy("qml.qaoa")) < 1e-9
    # and as the workload measures them (ZZ terms only, the constant added classically)
    fast, example = (qaoa.energy_function(dev, graph, 3, f) for f in ("fast", "qml.qaoa"))
    assert abs(fast(params) - example(params)) < 1e-9 and abs(fast(params) - energy("qml.qaoa")) < 1e-9
    if not weighted:  # and the Hamiltonian is qml.qaoa.maxcut's
        cost_h, _ = qml.qaoa.maxcut(nx.gnm_random_graph(8, 12, seed=1967))
        assert np.allclose(qml.matrix(cost_h, wire_order=range(8)), qml.matrix(qaoa.cost_hamiltonian(graph), wire_order=range(8)))


def test_the_fast_formulation_runs_whole_layers_where_the_device_declares_them_with_the_same_energy_and_gradient():
    """On fused.qubit (and auto, which may take it) each layer is one ``ApproxTimeEvolution``, differentiated in one
    sweep; on lightning, which would lower it on every execution, each term is its own gate. Same numbers."""
    from qbackends import get_device

    graph = qaoa.Graph(8, tuple((u, v, 0.5 + (u * v) % 3) for u, v, _ in qaoa.random_graph(8, 12, 1967).edges))
    params = qml.numpy.array(np.random.default_rng(5).uniform(0, np.pi, (2, 3)), requires_grad=True)
    results, kinds = {}, {}
    for spec in ("local:qbackends/fused.qubit", "auto", "local:pennylane/lightning.qubit"):
        energy = qaoa.energy_function(get_device(spec, wires=8), graph, 3)
        kinds[spec] = {op.name for op in qml.tape.make_qscript(energy.ansatz)(params).operations} - {"Hadamard"}
        results[spec] = (energy(params), qml.grad(energy)(params))
    assert kinds["local:qbackends/fused.qubit"] == kinds["auto"] == {"ApproxTimeEvolution"}
    assert kinds["local:pennylane/lightning.qubit"] == {"IsingZZ", "RX"}
    value, gradient = results["local:pennylane/lightning.qubit"]
    for spec, (v, g) in results.items():
        assert abs(v - value) < 1e-10 and np.allclose(g, gradient, atol=1e-10, rtol=0), spec


def test_lightning_qubit_and_kokkos_give_the_same_run():
    config = qaoa.Config(nodes=8, edges=12, iterations=12)
    a = qaoa.run(config, "local:pennylane/lightning.qubit")
    b = qaoa.run(config, "local:pennylane/lightning.kokkos")
    np.testing.assert_allclose(a["costs"], b["costs"], atol=1e-10, rtol=0)
    np.testing.assert_allclose(a["params"], b["params"], atol=1e-10, rtol=0)
    assert a["max_cut"] == b["max_cut"] == brute_force_max_cut(qaoa.load_graph(config))
    # a bitstring and its complement are equally likely: compare the cut, not the string
    assert a["most_probable_cut"] == b["most_probable_cut"]
    assert abs(a["most_probable_probability"] - b["most_probable_probability"]) < 1e-10
    assert a["costs"][-1] < a["costs"][0]  # it optimises


def test_adam_matches_pennylane_adam():
    config = qaoa.Config(nodes=6, edges=8, iterations=8, stepsize=0.05)
    ours = qaoa.run(config, "lightning.qubit")
    graph = qaoa.load_graph(config)
    dev = qml.device("lightning.qubit", wires=6)

    @qml.qnode(dev, diff_method="adjoint")
    def energy(p):
        qaoa.circuit(graph, 2)(p)
        return qml.expval(qaoa.cost_hamiltonian(graph))

    opt = qml.AdamOptimizer(0.05)
    params = qml.numpy.array(qaoa.initial_params(config), requires_grad=True)
    costs = []
    for _ in range(8):
        params, cost = opt.step_and_cost(energy, params)
        costs.append(cost)
    np.testing.assert_allclose(ours["costs"], costs, atol=1e-12, rtol=0)


def test_hyperparameters_are_braket_strings():
    from qbackends.hybridjob import config_from_hyperparameters

    config = config_from_hyperparameters(
        qaoa.Config, {"nodes": "10", "stepsize": "0.05", "optimizer": "gd", "graph_file": "g.txt"}
    )
    assert (config.nodes, config.stepsize, config.optimizer, config.graph_file) == (10, 0.05, "gd", "g.txt")
    with pytest.raises(WorkloadInputError, match="Hyperparameter 'p' is unknown; choices: nodes, edges"):
        config_from_hyperparameters(qaoa.Config, {"p": "2"})
    with pytest.raises(
        WorkloadInputError,
        match=r"layers='two' is not a whole number\. Fix: set layers to a whole number in the hyperparameters\.",
    ):
        config_from_hyperparameters(qaoa.Config, {"layers": "two"})


def _cli(*args, **kwargs):
    return [sys.executable, "-m", "qbackends.cli", "run", "qaoa", "--device", "lightning.qubit", "--quiet", "--no-plot", *args]


def test_sigkill_then_resume_gives_the_uninterrupted_result(tmp_path):
    common = ["--nodes", "14", "--edges", "20", "--iterations", "40"]
    subprocess.run(_cli(*common, "--results-dir", str(tmp_path / "full")), check=True, capture_output=True)
    full = json.loads((tmp_path / "full/qaoa-results.json").read_text())

    killed = tmp_path / "killed"
    checkpoint = killed / "checkpoints" / qaoa.CHECKPOINT_FILE
    proc = subprocess.Popen(_cli(*common, "--results-dir", str(killed)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if checkpoint.exists():
            seen = json.loads(checkpoint.read_text())["progress"]["iteration"]
            if seen >= 3:
                os.kill(proc.pid, signal.SIGKILL)
                break
        time.sleep(0.005)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    at_kill = json.loads(checkpoint.read_text())["progress"]
    assert 3 <= at_kill["iteration"] < 40
    assert not (killed / "qaoa-results.json").exists()

    subprocess.run(_cli(*common, "--results-dir", str(killed), "--resume"), check=True, capture_output=True)
    resumed = json.loads((killed / "qaoa-results.json").read_text())
    assert resumed["costs"][: at_kill["iteration"]] == at_kill["costs"]  # no finished iteration lost or redone
    assert len(resumed["costs"]) == 40
    np.testing.assert_allclose(resumed["costs"], full["costs"], atol=1e-12, rtol=0)
    np.testing.assert_allclose(resumed["params"], full["params"], atol=1e-12, rtol=0)
    assert resumed["most_probable_bitstring"] == full["most_probable_bitstring"]


def test_resume_refuses_another_configuration(tmp_path):
    qaoa.run(qaoa.Config(nodes=6, edges=8, iterations=2), "lightning.qubit", checkpoint_dir=tmp_path)
    with pytest.raises(WorkloadInputError, match=r"is of another run: its settings differ \(layers: 2 then, 3 now\)"):
        qaoa.run(qaoa.Config(nodes=6, edges=8, iterations=2, layers=3), "lightning.qubit", checkpoint_dir=tmp_path, resume=True)
    with pytest.raises(
        WorkloadInputError, match=r"it was made on another device \('lightning.qubit' then, 'default.qubit' now\)"
    ):
        qaoa.run(qaoa.Config(nodes=6, edges=8, iterations=3), "default.qubit", checkpoint_dir=tmp_path, resume=True)


def test_a_refusal_names_every_difference_and_the_fix(tmp_path):
    qaoa.run(qaoa.Config(nodes=6, edges=8, iterations=2), "lightning.qubit", checkpoint_dir=tmp_path)
    with pytest.raises(CheckpointError) as refused:
        qaoa.run(qaoa.Config(nodes=6, edges=8, iterations=3, stepsize=0.2), "default.qubit", checkpoint_dir=tmp_path, resume=True)
    assert str(refused.value) == (
        f"Checkpoint {str(tmp_path / qaoa.CHECKPOINT_FILE)!r} is of another run: its settings differ (stepsize: 0.1 then, "
        "0.2 now); it was made on another device ('lightning.qubit' then, 'default.qubit' now). Fix: resume with the "
        "settings, the graph and --device it was made with, or pass another --results-dir (or --checkpoint-dir) to "
        "start a new run beside it."
    )


def test_c64_runs_the_same_optimisation_within_its_tolerance_and_is_another_run(tmp_path):
    """--precision c64 on fused.qubit follows c128's costs to about 1e-6 of the cut's scale; a checkpoint
    of one precision does not resume the other (named), while c128 checkpoints keep their identity."""
    fused = "local:qbackends/fused.qubit"
    single = qaoa.run(qaoa.Config(nodes=10, edges=15, iterations=4, precision="c64"), fused, checkpoint_dir=tmp_path / "a")
    double = qaoa.run(qaoa.Config(nodes=10, edges=15, iterations=4), fused, checkpoint_dir=tmp_path / "b")
    assert single["config"]["precision"] == "c64" and double["config"]["precision"] == "c128"
    gaps = np.abs(np.array(single["costs"]) - np.array(double["costs"]))
    assert gaps.max() < 2.2e-6 * 15 and gaps.max() > 0
    with pytest.raises(CheckpointError, match=r"its settings differ \(precision: 'c64' then, 'c128' now\)"):
        qaoa.run(qaoa.Config(nodes=10, edges=15, iterations=5), fused, checkpoint_dir=tmp_path / "a", resume=True)
    with pytest.raises(CheckpointError, match=r"its settings differ \(precision: 'c128' then, 'c64' now\)"):
        qaoa.run(
            qaoa.Config(nodes=10, edges=15, iterations=5, precision="c64"), fused, checkpoint_dir=tmp_path / "b", resume=True
        )
    with pytest.raises(WorkloadInputError, match=r"precision 'c32' is unknown; choices: c128, c64\."):
        qaoa.Config(precision="c32").validate()


def test_a_checkpoint_of_the_layout_before_schemas_resumes(tmp_path):
    """A checkpoint written before the run record had a schema ("graph", not "inputs") continues as it did."""
    config = qaoa.Config(nodes=5, edges=6, iterations=4)
    uninterrupted = qaoa.run(config, "lightning.qubit")
    qaoa.run(qaoa.Config(nodes=5, edges=6, iterations=2), "lightning.qubit", checkpoint_dir=tmp_path)
    path = tmp_path / qaoa.CHECKPOINT_FILE
    data = json.loads(path.read_text())
    del data["config"]["precision"]  # that layout's settings had no precision (all c128)
    settings = {k: v for k, v in data["config"].items() if k not in ("iterations", "graph_file")}
    graph = qaoa.random_graph(5, 6, 1967)
    edges = json.dumps([graph.nodes, [list(e) for e in graph.edges]])
    data["run"] = {  # what that layout recorded, computed as it computed it
        "settings": hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest(),
        "graph": hashlib.sha256(edges.encode()).hexdigest(),
        "device": "lightning.qubit",
    }
    path.write_text(json.dumps(data))
    resumed = qaoa.run(config, "lightning.qubit", checkpoint_dir=tmp_path, resume=True)
    np.testing.assert_allclose(resumed["costs"], uninterrupted["costs"], atol=1e-12, rtol=0)
    assert json.loads(path.read_text())["run"]["schema"] == 2


def test_a_checkpoint_of_a_newer_schema_is_refused_typed(tmp_path):
    qaoa.run(qaoa.Config(nodes=5, edges=6, iterations=2), "lightning.qubit", checkpoint_dir=tmp_path)
    path = tmp_path / qaoa.CHECKPOINT_FILE
    data = json.loads(path.read_text())
    data["run"]["schema"] = 3
    path.write_text(json.dumps(data))
    with pytest.raises(CheckpointError) as refused:
        qaoa.run(qaoa.Config(nodes=5, edges=6, iterations=3), "lightning.qubit", checkpoint_dir=tmp_path, resume=True)
    assert str(refused.value) == (
        f"Checkpoint {str(path)!r} is of schema 3; this qbackends reads schemas up to 2. Fix: resume it with the "
        "qbackends that wrote it, or pass another --results-dir (or --checkpoint-dir) to start a new run beside it."
    )


def test_resume_refuses_a_graph_file_whose_contents_changed(tmp_path):
    """The attack's F4: a 4-node graph file replaced by a 6-node one under the same name was resumed."""
    graph = tmp_path / "g.txt"
    graph.write_text("0 1\n1 2\n2 3\n3 0\n")
    config = qaoa.Config(graph_file=str(graph), iterations=3)
    qaoa.run(config, "lightning.qubit", checkpoint_dir=tmp_path / "ck")
    graph.write_text("0 1\n1 2\n2 3\n3 4\n4 5\n5 0\n")
    with pytest.raises(WorkloadInputError, match=r"the graph differs \(the edge list's contents changed\)"):
        qaoa.run(qaoa.Config(graph_file=str(graph), iterations=6), "lightning.qubit", checkpoint_dir=tmp_path / "ck", resume=True)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: p.update(iteration=1000), "costs holds 3 entries for 1000 iterations"),
        (lambda p: p.update(iteration=-5), "iteration -5 is not a whole number of at least 0"),
        (lambda p: p.update(params=[[float("nan"), 0.1], [0.2, 0.3]]), "a parameter, cost or optimizer moment is not finite"),
        (lambda p: p.update(params=[[0.1], [0.2]]), r"parameters of shape \(2, 1\), not \(2, 2\)"),
        (lambda p: p.update(costs=p["costs"][:1]), "costs holds 1 entries for 3 iterations"),
        (lambda p: p.update(params="x"), "a value is not a number|parameters of shape"),
        (lambda p: p.pop("optimizer"), "is unreadable"),
    ],
)
def test_resume_refuses_a_corrupt_checkpoint(tmp_path, edit, message):
    qaoa.run(qaoa.Config(nodes=5, edges=6, iterations=3), "lightning.qubit", checkpoint_dir=tmp_path)
    path = tmp_path / qaoa.CHECKPOINT_FILE
    data = json.loads(path.read_text())
    edit(data["progress"])
    path.write_text(json.dumps(data))
    with pytest.raises(WorkloadInputError, match=message):
        qaoa.run(qaoa.Config(nodes=5, edges=6, iterations=10), "lightning.qubit", checkpoint_dir=tmp_path, resume=True)


def test_resume_with_fewer_iterations_says_the_checkpoint_is_further_along(tmp_path):
    qaoa.run(qaoa.Config(nodes=5, edges=6, iterations=3), "lightning.qubit", checkpoint_dir=tmp_path)
    with pytest.raises(WorkloadInputError) as refused:
        qaoa.run(qaoa.Config(nodes=5, edges=6, iterations=2), "lightning.qubit", checkpoint_dir=tmp_path, resume=True)
    assert str(refused.value) == (
        f"Checkpoint {str(tmp_path / qaoa.CHECKPOINT_FILE)!r} holds 3 finished iterations, more than the 2 asked for. "
        "Fix: pass --iterations 3 or more to continue it, or pass another --results-dir (or --checkpoint-dir) to start "
        "a new run beside it."
    )


def test_cli_writes_results_and_plot(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "qbackends.cli",
            "run",
            "qaoa",
            "--device",
            "lightning.qubit",
            "--nodes",
            "6",
            "--edges",
            "8",
            "--iterations",
            "3",
            "--results-dir",
            str(tmp_path),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "lightning.qubit: expected cut" in out.stdout
    result = json.loads((tmp_path / "qaoa-results.json").read_text())
    assert len(result["costs"]) == 3 and result["max_cut"] == brute_force_max_cut(qaoa.random_graph(6, 8, 1967))
    assert (tmp_path / "qaoa-costs.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_bad_input_is_one_line():
    out = subprocess.run(
        [sys.executable, "-m", "qbackends.cli", "run", "qaoa", "--nodes", "4", "--edges", "9"], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert (
        out.stderr.strip()
        == "qbackends: error: edges=9 does not fit a simple graph on 4 nodes (at most 6). Fix: pass --edges 6 or fewer, or pass --nodes 5 or more."
    )


def test_edges_no_graph_of_at_most_40_nodes_holds_are_fixed_by_fewer_edges_alone():
    with pytest.raises(WorkloadInputError) as refused:
        qaoa.Config(nodes=40, edges=10**18).validate()
    assert str(refused.value) == (
        "edges=1000000000000000000 does not fit a simple graph on 40 nodes (at most 780). Fix: pass --edges 780 or fewer."
    )


def test_resume_under_auto_continues_on_the_checkpoints_device(tmp_path):
    first = qaoa.run(qaoa.Config(nodes=5, edges=6, iterations=2), "lightning.kokkos", checkpoint_dir=tmp_path)
    resumed = qaoa.run(qaoa.Config(nodes=5, edges=6, iterations=4), "auto", checkpoint_dir=tmp_path, resume=True)
    assert resumed["device"] == first["device"] == "lightning.kokkos"
    assert resumed["costs"][:2] == first["costs"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00", "is not UTF-8 text"),
        (b"0 1\n1 1000000\n", "node 1000000 is beyond the 40 nodes"),
        (b"0 1 2.0\n1 0 3.0\n", "edge 1-0 is given twice"),
        (b"0 1 1e308\n", "the weight finite, at most 1e+06"),
    ],
)
def test_bad_graph_files_are_refused_by_line(tmp_path, content, message):
    path = tmp_path / "g.txt"
    path.write_bytes(content)
    with pytest.raises(WorkloadInputError, match=re.escape(message)):
        qaoa.read_edge_list(path)


def test_a_results_folder_in_use_is_refused(tmp_path):
    """Two runs with different settings in one results folder once overwrote each other silently."""
    first = subprocess.Popen(
        [sys.executable, "-m", "qbackends.cli", "run", "qaoa", "--device", "lightning.qubit", "--nodes", "10",
         "--edges", "15", "--iterations", "100000", "--quiet", "--no-plot", "--results-dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "checkpoints" / qaoa.CHECKPOINT_FILE).exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        second = subprocess.run(
            [sys.executable, "-m", "qbackends.cli", "run", "qaoa", "--device", "lightning.qubit", "--nodes", "6",
             "--edges", "8", "--iterations", "2", "--quiet", "--no-plot", "--results-dir", str(tmp_path)],
            capture_output=True,
            text=True,
        )  # fmt: skip
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 2
    assert second.stderr.startswith(
        f"qbackends: error: Results folder {str(tmp_path)!r} is in use by another run (process {first.pid})"
    )


def test_a_killed_writer_leaves_no_temporary_file_behind(tmp_path):
    from qbackends.storage import atomic_write_json

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f".r.json.{int(dead.stdout)}.abc123.tmp"  # what a SIGKILL mid-write leaves
    orphan.write_text("{")
    atomic_write_json(tmp_path / "r.json", {"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_a_results_folder_that_cannot_be_written_is_a_typed_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the folder would go: as unwritable as a read-only mount
    out = subprocess.run(
        [sys.executable, "-m", "qbackends.cli", "run", "qaoa", "--nodes", "5", "--edges", "6", "--iterations", "1",
         "--quiet", "--no-plot", "--results-dir", str(blocker / "results")],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.startswith(f"qbackends: error: Results folder {str(blocker / 'results')!r} cannot be written: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--nodes", "-3", "--edges", "3"],
            "nodes=-3 is out of range: it must be from 2 to 40. Fix: pass --nodes a whole number from 2 to 40.",
        ),
        (
            ["--nodes", "1", "--edges", "0"],
            "nodes=1 is out of range: it must be from 2 to 40. Fix: pass --nodes a whole number from 2 to 40.",
        ),
        (["--nodes", "4", "--edges", "0"], "edges=0 is out of range: it must be at least 1. Fix: pass --edges 1 or more."),
        (
            ["--seed", "-1"],
            "seed=-1 is out of range: it must be from 0 to 4294967295. Fix: pass --seed a whole number from 0 to 4294967295.",
        ),
        (
            ["--stepsize", "inf"],
            "stepsize=inf is not a finite number of at least 0. Fix: pass --stepsize a number of at least 0, e.g. 0.1.",
        ),
        (
            ["--diff-method", "bogus"],
            "diff_method 'bogus' is unknown; choices: best, device, backprop, adjoint, parameter-shift, hadamard, "
            "reversed-hadamard, direct-hadamard, reversed-direct-hadamard, finite-diff, spsa. Fix: pass --diff-method adjoint.",
        ),
    ],
)
def test_cli_numbers_and_choices_are_checked_before_anything_runs(tmp_path, args, message):
    out = subprocess.run(_cli(*args, "--results-dir", str(tmp_path)), capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr == f"qbackends: error: {message}\n"
    assert not (tmp_path / "qaoa-results.json").exists()


@pytest.mark.parametrize(
    ("hyperparameters", "message"),
    [
        (
            {"nodes": 1e300},
            "Hyperparameter nodes='1e+300' is not a whole number. Fix: set nodes to a whole number in the hyperparameters.",
        ),
        ({"nodes": None}, "nodes=None is not a whole number. Fix: set nodes to a whole number in the hyperparameters."),
        (
            {"nodes": "50"},
            "nodes=50 is out of range: it must be from 2 to 40. Fix: set nodes to a whole number from 2 to 40 in the hyperparameters.",
        ),
        (
            {"formulation": "slow"},
            "formulation 'slow' is unknown; choices: fast, qml.qaoa. Fix: set formulation to fast in the hyperparameters.",
        ),
        (
            {"seed": -5},
            "seed=-5 is out of range: it must be from 0 to 4294967295. Fix: set seed to a whole number from 0 to 4294967295 in the hyperparameters.",
        ),
    ],
)
def test_a_job_validates_its_hyperparameters_and_words_the_fix_for_them(tmp_path, hyperparameters, message):
    (tmp_path / "hp.json").write_text(json.dumps(hyperparameters))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMZN_BRAKET")}
    env |= {"AMZN_BRAKET_HP_FILE": str(tmp_path / "hp.json"), "AMZN_BRAKET_DEVICE_ARN": "local:pennylane/lightning.qubit"}
    out = subprocess.run([sys.executable, "-m", "qbackends.workloads.qaoa"], capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"qbackends: error: {message}")


@pytest.mark.parametrize(
    ("spell", "fix"),
    [
        (option, "Fix: pass --stepsize a smaller value, or pass --optimizer adam."),
        (
            hyperparameter,
            "Fix: set stepsize to a smaller value in the hyperparameters, or set optimizer to adam in the hyperparameters.",
        ),
    ],
)
@pytest.mark.parametrize("device", ["local:pennylane/lightning.qubit", "local:qbackends/fused.qubit"])
def test_a_diverged_run_is_refused_with_the_fix_worded_for_its_caller(spell, fix, device):
    config = qaoa.Config(nodes=4, edges=3, iterations=2, stepsize=1e308, optimizer="gd")
    with pytest.warns(RuntimeWarning, match="overflow"), pytest.raises(WorkloadInputError) as diverged:
        qaoa.run(config, device, spell=spell)
    assert str(diverged.value).startswith("The optimisation diverged: energy nan, parameters [[")
    assert str(diverged.value).endswith(f"]]. {fix}")


def test_a_bad_device_variable_is_named_under_run_qaoa(tmp_path):
    env = {**os.environ, "QBACKENDS_DEVICE": "local:pennylane/nosuch"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "qbackends.cli",
            "run",
            "qaoa",
            "--nodes",
            "4",
            "--edges",
            "3",
            "--quiet",
            "--results-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("qbackends: error: Unknown simulator 'nosuch' in 'local:pennylane/nosuch'; registered: ")
    assert "(the device string came from QBACKENDS_DEVICE). Fix: " in out.stderr
