"""Running a Braket-style hybrid-job script locally."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from qbackends.errors import WorkloadInputError
from qbackends.hybridjob import JobEnvironment, prepare_job, read_hyperparameters

BRAKET_STYLE_SCRIPT = textwrap.dedent(
    """
    import json, os
    from pathlib import Path

    device = os.environ["AMZN_BRAKET_DEVICE_ARN"]
    hp = json.loads(Path(os.environ["AMZN_BRAKET_HP_FILE"]).read_text())
    data = Path(os.environ["AMZN_BRAKET_INPUT_DIR"]) / "input" / "numbers.txt"
    total = sum(int(x) for x in data.read_text().split()) * int(hp["factor"])
    Path(os.environ["AMZN_BRAKET_CHECKPOINT_DIR"], "ckpt.json").write_text("{}")
    out = Path(os.environ["AMZN_BRAKET_JOB_RESULTS_DIR"]) / "results.json"
    out.write_text(json.dumps({"device": device, "total": total, "job": os.environ["AMZN_BRAKET_JOB_NAME"]}))
    print("done", total)
    """
)


def test_braket_style_script_runs_and_results_are_found(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(BRAKET_STYLE_SCRIPT)
    (tmp_path / "numbers.txt").write_text("1 2 3 4")
    (tmp_path / "hp.json").write_text(json.dumps({"factor": 10}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "qbackends.cli",
            "job",
            "run",
            str(script),
            "--device",
            "local:pennylane/lightning.qubit",
            "--hyperparameters",
            str(tmp_path / "hp.json"),
            "--input-data",
            f"input={tmp_path / 'numbers.txt'}",
            "--job-name",
            "sum-job",
            "--jobs-dir",
            str(tmp_path / "jobs"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "done 100" in out.stdout
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["exit_code"] == 0 and summary["job"] == "sum-job"
    result = json.loads((tmp_path / "jobs/sum-job/results/results.json").read_text())
    assert result == {"device": "local:pennylane/lightning.qubit", "total": 100, "job": "sum-job"}
    assert (tmp_path / "jobs/sum-job/checkpoints/ckpt.json").exists()


def test_qaoa_module_runs_as_a_job_and_a_resumed_job_is_told_its_fix_in_hyperparameters(tmp_path):
    def job(**hyperparameters: int) -> subprocess.CompletedProcess:
        (tmp_path / "hp.json").write_text(json.dumps({"nodes": 6, "edges": 8, **hyperparameters}))
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "qbackends.cli",
                "job",
                "run",
                "qbackends.workloads.qaoa",
                "--device",
                "local:pennylane/lightning.qubit",
                "--hyperparameters",
                str(tmp_path / "hp.json"),
                "--job-name",
                "qaoa",
                "--jobs-dir",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
        )

    assert job(iterations=3).returncode == 0
    result = json.loads((tmp_path / "qaoa/results/results.json").read_text())["dataDictionary"]
    assert (
        result["device"] == "lightning.qubit" and len(result["costs"]) == 3 and result["max_cut"] == 6.0
    )  # brute force: tests/test_qaoa.py
    checkpoint = tmp_path / "qaoa/checkpoints/qaoa-checkpoint.json"
    assert checkpoint.exists()
    out = job(iterations=2)  # the same job again, asking for less than its checkpoint holds
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines()[0] == (
        f"qbackends: error: Checkpoint {str(checkpoint.resolve())!r} holds 3 finished iterations, more than the 2 asked "
        "for. Fix: set iterations to 3 or more in the hyperparameters to continue it, or start a new job that does not "
        "take this checkpoint (another job name; no copy_checkpoints_from_job)."
    )
    checkpoint.write_text("{")  # damaged
    out = job(iterations=3)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    line = out.stderr.splitlines()[0]
    assert line.startswith(f"qbackends: error: Checkpoint {str(checkpoint.resolve())!r} is unreadable: ")
    assert line.endswith("Fix: start a new job that does not take it (another job name; no copy_checkpoints_from_job).")


def test_failing_script_exit_code_is_returned(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import sys; sys.exit(3)")
    out = subprocess.run(
        [sys.executable, "-m", "qbackends.cli", "job", "run", str(script), "--jobs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not JSON: Expecting property name enclosed in double quotes at line 1, column 2"),
        ("[1, 2]", "holds a JSON list, not an object"),
    ],
)
def test_bad_hyperparameter_file(tmp_path, content, message):
    path = tmp_path / "hp.json"
    path.write_text(content)
    with pytest.raises(WorkloadInputError, match=message):
        read_hyperparameters(path)


def test_errors_before_anything_starts(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("")
    with pytest.raises(WorkloadInputError, match="cannot be read: No such file or directory"):
        prepare_job(str(script), hyperparameters=str(tmp_path / "missing.json"), jobs_dir=str(tmp_path / "jobs"))
    with pytest.raises(WorkloadInputError, match="does not exist"):
        prepare_job(str(script), input_data=["data=/no/such/path"], jobs_dir=str(tmp_path / "jobs"))
    with pytest.raises(WorkloadInputError, match="is not CHANNEL=PATH"):
        prepare_job(str(script), input_data=["nochannel"], jobs_dir=str(tmp_path / "jobs"))
    with pytest.raises(WorkloadInputError, match="Job name 'bad name' is not valid"):
        prepare_job(str(script), job_name="bad name", jobs_dir=str(tmp_path / "jobs"))
    assert not (tmp_path / "jobs").exists()


def test_environment_outside_a_job_is_empty():
    env = JobEnvironment.from_env({})
    assert env.device is None and env.hyperparameters == {} and env.results_dir is None


# What Braket's example scripts do with the device string (hybrid_jobs/4, qaoa/utils.py), written out.
BRAKET_GET_DEVICE_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import pennylane as qml

    device_string = os.environ["AMZN_BRAKET_DEVICE_ARN"]
    assert device_string.split(":")[0] == "local", device_string
    _prefix, device_name = device_string.split("/")
    device = qml.device(device_name, wires=2)

    @qml.qnode(device)
    def bell():
        qml.Hadamard(0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(0) @ qml.Z(1))

    print("opened", device.name, float(bell()))
    """
)


def _job(tmp_path, *args, check=False):
    return subprocess.run(
        [sys.executable, "-m", "qbackends.cli", "job", "run", *args, "--jobs-dir", str(tmp_path / "jobs")],
        capture_output=True,
        text=True,
        check=check,
        cwd=tmp_path,
    )


def _runnable_cpu_backends():
    from qbackends import capabilities, get_registry
    from qbackends.device import facts_for

    registry = get_registry()
    facts = facts_for(registry)
    return [
        b.device_string
        for b in registry.backends.values()
        if b.provider != "fixture" and b.hardware in ("cpu", "kokkos") and capabilities.evaluate(b, facts).ok
    ]


@pytest.mark.parametrize("device", ["auto", *_runnable_cpu_backends()])
def test_every_exported_string_opens_with_braket_get_device(tmp_path, device):
    from qbackends import get_registry
    from qbackends.devicestring import parse

    (tmp_path / "job.py").write_text(BRAKET_GET_DEVICE_SCRIPT)
    out = _job(tmp_path, "job.py", "--device", device, check=True)
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    opened = next(line for line in out.stdout.splitlines() if line.startswith("opened"))
    assert abs(float(opened.split()[-1]) - 1.0) < 1e-12
    exported = summary["device"]
    if device == "auto":  # the per-circuit auto device, which the script opens by its PennyLane name
        assert exported == "local:qbackends/qbackends.auto" and "opened qbackends.auto" in out.stdout
    else:  # and qbackends resolves it to the backend asked for
        assert get_registry().lookup(parse(exported)) == get_registry().lookup(parse(device))


def test_a_typo_stops_the_job_before_anything_is_made(tmp_path):
    (tmp_path / "job.py").write_text("print('ran')")
    out = _job(tmp_path, "job.py", "--device", "local:pennylane/lighting.qubit")
    assert out.returncode == 2 and "ran" not in out.stdout
    assert out.stderr.strip().splitlines() == [
        "qbackends: error: Unknown simulator 'lighting.qubit' in 'local:pennylane/lighting.qubit'; registered: "
        + ", ".join(sorted(s for s in _pennylane_strings()))
        + ". Fix: did you mean 'local:pennylane/lightning.qubit'?"
    ]
    assert not (tmp_path / "jobs").exists()


def _pennylane_strings():
    from qbackends import get_registry

    return [b.device_string for b in get_registry().backends.values() if b.provider == "pennylane"]


def test_a_job_killed_by_a_signal_says_so(tmp_path):
    (tmp_path / "job.py").write_text("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    out = _job(tmp_path, "job.py", "--job-name", "doomed")
    assert out.returncode == 137
    assert out.stderr.strip().splitlines()[-1].startswith("qbackends: error: job 'doomed' was ended by SIGKILL.")


def test_the_summary_lists_only_what_this_run_wrote(tmp_path):
    writes = "import os, pathlib; pathlib.Path(os.environ['AMZN_BRAKET_JOB_RESULTS_DIR'], 'results.json').write_text('{}')"
    (tmp_path / "ok.py").write_text(writes)
    (tmp_path / "fail.py").write_text("raise ValueError('bad input in the script')")
    first = json.loads(_job(tmp_path, "ok.py", "--job-name", "same", check=True).stdout.splitlines()[-1])
    assert [p.rsplit("/", 1)[-1] for p in first["results"]] == ["results.json"]
    second = _job(tmp_path, "fail.py", "--job-name", "same")
    assert json.loads(second.stdout.splitlines()[-1])["results"] == []
    assert "ValueError: bad input in the script" in second.stderr  # the script's own error, as the script's
    assert second.stderr.strip().splitlines()[-1] == (
        "qbackends: error: job 'same' failed with exit code 1. Fix: its own error is shown above."
    )


def test_a_missing_module_or_function_is_one_line(tmp_path):
    out = _job(tmp_path, "nosuch.module:main")
    assert out.stderr.splitlines() == [  # refused before the job starts: one line
        "qbackends: error: entry point 'nosuch.module:main': no module named 'nosuch' here. "
        "Fix: run `qbackends job run` from the folder that holds the module, or install its package."
    ]
    assert "Traceback" not in out.stderr
    out = _job(tmp_path, "qbackends.workloads.qaoa:nosuch")
    assert out.stderr.splitlines()[0] == (
        "qbackends: error: entry point 'qbackends.workloads.qaoa:nosuch': module 'qbackends.workloads.qaoa' has no function 'nosuch'."
    )


def test_a_workload_entry_point_ends_a_bad_device_with_one_line(tmp_path):
    env = {**__import__("os").environ, "AMZN_BRAKET_DEVICE_ARN": "local:pennylane/nosuch"}
    out = subprocess.run([sys.executable, "-m", "qbackends.workloads.qaoa"], capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("qbackends: error: Unknown simulator 'nosuch' in 'local:pennylane/nosuch'")
