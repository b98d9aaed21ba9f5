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


def test_qaoa_module_runs_as_a_job(tmp_path):
    (tmp_path / "hp.json").write_text(json.dumps({"nodes": 6, "edges": 8, "iterations": 3}))
    subprocess.run(
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
        check=True,
    )
    result = json.loads((tmp_path / "qaoa/results/results.json").read_text())["dataDictionary"]
    assert (
        result["device"] == "lightning.qubit" and len(result["costs"]) == 3 and result["max_cut"] == 6.0
    )  # brute force: tests/test_qaoa.py
    assert (tmp_path / "qaoa/checkpoints/qaoa-checkpoint.json").exists()


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
