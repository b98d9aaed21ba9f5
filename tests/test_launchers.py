"""Launchers: rank, world and rendezvous from recorded mpiexec, srun and torchrun environments; then real runs.

The real runs start the QNN under the [mpi] extra's own ``mpiexec -n 2`` (MPICH's Hydra, on loopback) and as
srun starts a step (two processes with srun's variables: srun itself is not installed here), and compare
every loss, accuracy and weight with ``--workers 2``'s. A rank killed with SIGKILL ends the run in seconds.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rankprocesses import kill_a_rank

from qbackends.errors import EnvironmentSettingError
from qbackends.launchers import PORTS, Launch, adopt, derived_port, first_host, from_environment, tasks_on_node

# What MPICH 5.0.2's and Open MPI 5.0.11's mpiexec -n 2 set for rank 1 on one host (recorded here, launcher
# variables only), and what srun sets for task 5 of a 2-node, 8-task step.
MPICH_RANK_1 = {
    "PMI_RANK": "1",
    "PMI_SIZE": "2",
    "PMI_FD": "11",
    "PMI_HOSTNAME": "vm",
    "MPI_LOCALRANKID": "1",
    "MPI_LOCALNRANKS": "2",
}
OPEN_MPI_RANK_1 = {
    "OMPI_COMM_WORLD_RANK": "1",
    "OMPI_COMM_WORLD_SIZE": "2",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    "OMPI_COMM_WORLD_NODE_RANK": "1",
    "PMIX_RANK": "1",
    "PMIX_NAMESPACE": "prterun-vm-9201@1",
    "PMIX_HOSTNAME": "vm",
}
SRUN_TASK_5 = {
    "SLURM_JOB_ID": "81723",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_NTASKS": "8",
    "SLURM_STEP_NUM_TASKS": "8",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
    "SLURM_STEP_NODELIST": "andes[017-018]",
    "SLURM_JOB_NODELIST": "andes[017-018]",
}


def test_mpich_on_one_host_meets_on_loopback_at_a_port_of_its_job():
    launch = from_environment(MPICH_RANK_1, parent_pid=7201)
    assert launch == Launch("mpiexec (MPICH)", 1, 2, 1, 2, "127.0.0.1", derived_port("hydra:7201"))
    assert from_environment(MPICH_RANK_1, parent_pid=7201) == launch  # the other rank, same proxy: the same port
    assert from_environment(MPICH_RANK_1, parent_pid=7202).master_port != launch.master_port  # another job


def test_open_mpi_on_one_host_takes_its_port_from_the_job_namespace():
    launch = from_environment(OPEN_MPI_RANK_1, parent_pid=1)
    assert launch == Launch("mpiexec (Open MPI)", 1, 2, 1, 2, "127.0.0.1", derived_port("ompi:prterun-vm-9201@1"))
    assert launch.master_port in PORTS


def test_srun_meets_at_the_first_host_of_the_step():
    launch = from_environment(SRUN_TASK_5)
    assert launch == Launch("srun", 5, 8, 1, 4, "andes017", derived_port("slurm:81723.0"))
    assert launch.torch_variables() == {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "MASTER_ADDR": "andes017",
        "MASTER_PORT": str(launch.master_port),
    }
    next_step = from_environment({**SRUN_TASK_5, "SLURM_STEP_ID": "1"})
    assert next_step.master_port != launch.master_port  # two steps of one job at once do not collide
    set_by_user = from_environment({**SRUN_TASK_5, "MASTER_ADDR": "andes017-ib", "MASTER_PORT": "31000"})
    assert (set_by_user.master_addr, set_by_user.master_port) == ("andes017-ib", 31000)


def test_one_node_srun_meets_on_loopback():
    one_node = {**SRUN_TASK_5, "SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2"}
    one_node.update(SLURM_NODEID="0", SLURM_STEP_NUM_NODES="1", SLURM_STEP_TASKS_PER_NODE="2", SLURM_STEP_NODELIST="andes017")
    assert from_environment(one_node) == Launch("srun", 1, 2, 1, 2, "127.0.0.1", derived_port("slurm:81723.0"))


def test_one_process_is_no_run_to_join():
    assert from_environment({}) is None
    assert from_environment({"PMI_RANK": "0", "PMI_SIZE": "1"}) is None  # mpiexec -n 1
    batch_shell = {k: v for k, v in SRUN_TASK_5.items() if k != "SLURM_STEP_ID"}  # sbatch's script, before srun
    assert from_environment({**batch_shell, "SLURM_PROCID": "0"}) is None


def test_torchrun_keeps_its_own_and_srun_plus_torchrun_is_torchrun():
    torchrun = {
        "RANK": "3",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "h0",
        "MASTER_PORT": "29400",
    }
    assert from_environment(torchrun) == Launch("torchrun", 3, 8, 1, 2, "h0", 29400)
    # torchrun's worker 3 of 8 inside srun task 0 of 2 (one agent per node): torchrun's numbers win
    assert from_environment({**SRUN_TASK_5, "SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", **torchrun}).launcher == "torchrun"
    # variables adopted from mpiexec: still mpiexec's run
    adopted = {**MPICH_RANK_1, **from_environment(MPICH_RANK_1, 7201).torch_variables()}
    assert from_environment(adopted, 7201).launcher == "mpiexec (MPICH)"


def test_adopt_sets_what_is_unset_only():
    env = {**MPICH_RANK_1, "MASTER_PORT": "23456"}
    launch = adopt(env, parent_pid=7201)
    assert launch is not None and launch.master_port == 23456
    assert {k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")} == {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "23456",
    }
    empty: dict[str, str] = {}
    assert adopt(empty, parent_pid=1) is None and empty == {}


def test_mpiexec_over_hosts_needs_rank_0s_host_unless_slurm_names_it():
    two_hosts = {**MPICH_RANK_1, "PMI_SIZE": "4"}  # 2 of 4 ranks here
    with pytest.raises(
        EnvironmentSettingError, match=r"more than one host.*Fix: pass it to every rank: mpiexec -genv MASTER_ADDR"
    ):
        from_environment(two_hosts, 7201)
    assert from_environment({**two_hosts, "SLURM_JOB_NODELIST": "n[3-4]"}, 7201).master_addr == "n3"
    assert from_environment({**two_hosts, "MASTER_ADDR": "n9"}, 7201).master_addr == "n9"


@pytest.mark.parametrize(
    "env, name",
    [
        ({**MPICH_RANK_1, "PMI_SIZE": "two"}, "PMI_SIZE='two'"),
        ({**SRUN_TASK_5, "SLURM_PROCID": "-1"}, "SLURM_PROCID='-1'"),
        ({**OPEN_MPI_RANK_1, "MASTER_PORT": "x"}, "MASTER_PORT='x'"),
    ],
)
def test_a_variable_no_launcher_writes_is_named(env, name):
    with pytest.raises(EnvironmentSettingError, match=f"^{name} is not a whole number"):
        from_environment(env, 1)


@pytest.mark.parametrize(
    "nodelist, host",
    [("node[01-04]", "node01"), ("a,b", "a"), ("node[01-04,07],gpu[1-2]", "node01"), ("r[1-2]-n[08-09]", "r1-n08"), ("x", "x")],
)
def test_first_host_of_a_slurm_node_list(nodelist, host):
    assert first_host(nodelist) == host


@pytest.mark.parametrize("nodelist", ["", "node[01-04", "node]1["])
def test_a_node_list_slurm_does_not_write_is_refused(nodelist):
    with pytest.raises(EnvironmentSettingError, match="is not one Slurm writes"):
        first_host(nodelist)


def test_tasks_on_node_reads_slurms_repeat_form():
    assert [tasks_on_node("2(x3),1", n) for n in range(5)] == [2, 2, 2, 1, None]
    assert tasks_on_node("4", 0) == 4 and tasks_on_node("four", 0) is None


# ---- real runs ------------------------------------------------------------------------------

MPIEXEC = Path(sys.executable).parent / "mpiexec"
needs_mpi = pytest.mark.skipif(
    not MPIEXEC.exists() or importlib.util.find_spec("mpi4py") is None,
    reason=f"no mpiexec next to {sys.executable} or no mpi4py: pip install 'qbackends[mpi]'",
)
QNN = [sys.executable, "-m", "qbackends.cli", "run", "qnn", "--device", "lightning.qubit", "--nwires", "4", "--ndata", "64"]
QNN += ["--batch-size", "8", "--quiet"]


def _results(folder: Path) -> dict:
    return json.loads((folder / "qnn-results.json").read_text())


def _same_training(a: dict, b: dict) -> None:
    keys = ("epoch", "train_loss", "test_loss", "test_accuracy")
    assert [[h[k] for k in keys] for h in a["history"]] == [[h[k] for k in keys] for h in b["history"]]
    assert a["parameters"].keys() == b["parameters"].keys()
    for name, values in a["parameters"].items():
        assert max(abs(x - y) for x, y in zip(values, b["parameters"][name], strict=True)) <= 1e-12, name
    assert (a["workers"], a["per_worker_batch"], a["test_accuracy"]) == (b["workers"], b["per_worker_batch"], b["test_accuracy"])


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    """``--workers 2``: what the launchers must reproduce."""
    out = tmp_path_factory.mktemp("workers")
    done = subprocess.run(
        [*QNN, "--epochs", "2", "--workers", "2", "--results-dir", str(out)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return _results(out)


def _srun_env(rank: int, job: str = "4242") -> dict[str, str]:
    """What srun sets for task ``rank`` of a 2-task step on this one node."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PMI_", "OMPI_", "PMIX_", "MASTER_"))}
    env.pop("RANK", None), env.pop("WORLD_SIZE", None)
    env.update(SLURM_JOB_ID=job, SLURM_STEP_ID="0", SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank), SLURM_NODEID="0")
    env.update(SLURM_NTASKS="2", SLURM_STEP_NUM_TASKS="2", SLURM_STEP_NUM_NODES="1", SLURM_STEP_TASKS_PER_NODE="2")
    env.update(SLURM_STEP_NODELIST=os.uname().nodename, SLURM_JOB_NODELIST=os.uname().nodename)
    return env


def _srun(extra: list[str], out: Path, job: str = "4242") -> list[subprocess.Popen]:
    """Two tasks, each bound to a core of its own where there are two (as ``srun --cpu-bind=cores`` does)."""
    cores = sorted(os.sched_getaffinity(0))

    def bind(rank: int):
        return (lambda: os.sched_setaffinity(0, {cores[rank]})) if len(cores) >= 2 else None

    return [
        subprocess.Popen(
            [*QNN, *extra, "--results-dir", str(out)],
            env=_srun_env(rank, job),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=bind(rank),
        )
        for rank in (0, 1)
    ]


def test_srun_trains_as_two_workers_do(tmp_path, two_workers):
    tasks = _srun(["--epochs", "2"], tmp_path, job=str(os.getpid()))
    outputs = [task.communicate(timeout=600) for task in tasks]
    assert [task.returncode for task in tasks] == [0, 0], [err[-2000:] for _, err in outputs]
    assert "held-out accuracy" in outputs[0][0] and outputs[1][0] == ""  # only rank 0 prints
    _same_training(_results(tmp_path), two_workers)
    assert (tmp_path / "checkpoints" / "qnn-checkpoint.pt").exists()


@needs_mpi
def test_mpiexec_trains_as_two_workers_do(tmp_path, two_workers):
    done = subprocess.run(
        [str(MPIEXEC), "-n", "2", *QNN, "--epochs", "2", "--results-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("held-out accuracy") == 1 and "x2:" in done.stdout  # rank 0 alone prints
    _same_training(_results(tmp_path), two_workers)


def _wait_for_checkpoint(folder: Path, tasks: list[subprocess.Popen]) -> None:
    checkpoint = folder / "checkpoints" / "qnn-checkpoint.pt"
    deadline = time.monotonic() + 300
    while not checkpoint.exists() and time.monotonic() < deadline and all(t.poll() is None for t in tasks):
        time.sleep(0.1)
    assert checkpoint.exists(), "training never reached its first checkpoint"


@pytest.mark.jax_in_children  # a stop in a worker met jax's gc callback once
@pytest.mark.parametrize("killed", [0, 1])
def test_a_killed_srun_task_ends_the_other_in_seconds_with_one_line(tmp_path, killed):
    tasks = _srun(["--epochs", "500"], tmp_path, job=f"{os.getpid()}{killed}")
    try:
        _wait_for_checkpoint(tmp_path, tasks)
        tasks[killed].send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        survivor = tasks[1 - killed]
        _, stderr = survivor.communicate(timeout=60)
        assert time.monotonic() - killed_at < 30
    finally:
        for task in tasks:
            task.kill()
            task.communicate()
    assert survivor.returncode == 2 and "Traceback" not in stderr, stderr[-3000:]
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"qbackends: error: QNN training failed on rank {1 - killed} of 2 (srun): ")
    assert "another rank stopped (" in lines[0] and "--resume" in lines[0]


@pytest.mark.jax_in_children  # a stop in a worker met jax's gc callback once
@needs_mpi
def test_a_killed_mpiexec_rank_ends_the_run_in_seconds(tmp_path):
    run = subprocess.Popen(
        [str(MPIEXEC), "-n", "2", *QNN, "--epochs", "500", "--results-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    kill_a_rank(run, lambda: _wait_for_checkpoint(tmp_path, [run]))


# ---- probe --mpi ----------------------------------------------------------------------------

PROBE = ["probe", "local:qbackends/fused.qubit", "--mpi"]


def test_probe_mpi_without_mpi4py_says_how_to_install_it():
    blocked = "import sys; sys.modules['mpi4py'] = None; from qbackends.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", blocked, *PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "qbackends: error: --mpi: mpi4py is not installed, so there is no MPI here. "
        "Fix: pip install 'qbackends[mpi]' (mpi4py and MPICH, both from wheels)."
    ]


@needs_mpi
def test_probe_mpi_reports_the_library_ranks_and_memory_per_rank():
    from qbackends.probe import host_memory_available

    def near_available(figure: float, share: int, before: int) -> bool:
        """Within 1 GiB of the memory available before and after the run (other processes move it meanwhile)."""
        low, high = sorted((before, host_memory_available()))
        return low / share - 2**30 < figure < high / share + 2**30

    before = host_memory_available()
    alone = subprocess.run([sys.executable, "-m", "qbackends.cli", *PROBE, "--json"], capture_output=True, text=True, timeout=120)
    assert alone.returncode == 0, alone.stderr[-2000:]
    one = json.loads(alone.stdout)["mpi"]
    assert one["library"].startswith("MPICH Version: 5.") and one["library_file"].endswith("libmpi.so.12")
    assert Path(one["library_file"]).parent == Path(sys.executable).parent.parent / "lib"  # the wheel's library
    assert (one["ranks"], one["ranks_on_node"], one["launcher"]) == (1, 1, "")
    assert near_available(one["memory_per_rank"], 1, before)
    before = host_memory_available()
    done = subprocess.run(
        [str(MPIEXEC), "-n", "2", sys.executable, "-m", "qbackends.cli", *PROBE, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    two = json.loads(done.stdout)["mpi"]  # rank 0's report alone: one JSON document
    assert (two["ranks"], two["ranks_on_node"], two["launcher"]) == (2, 2, "mpiexec (MPICH)")
    assert near_available(two["memory_per_rank"], 2, before)
    table = subprocess.run([sys.executable, "-m", "qbackends.cli", *PROBE], capture_output=True, text=True, timeout=120).stdout
    assert "MPI library" in table and re.search(r"^MPI ranks +1 \(one process\)$", table, re.M)
