"""A job run never loses what a user had: channel names, input copies, folder locks, its processes and signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from qbackends.errors import WorkloadInputError
from qbackends.hybridjob import prepare_job

WRITES_RESULTS = "import os, pathlib; pathlib.Path(os.environ['AMZN_BRAKET_JOB_RESULTS_DIR'], 'results.json').write_text('{}')"


def _job(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qbackends.cli", "job", "run", *args, "--device", "lightning.qubit"],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("channel", ["..", ".", ".hidden", "a/b", "", "x" * 65])
def test_a_channel_that_is_not_one_plain_name_is_refused_before_anything_is_touched(tmp_path, channel):
    (tmp_path / "ok.py").write_text(WRITES_RESULTS)
    (tmp_path / "data.csv").write_text("1,2\n")
    assert _job(tmp_path, "ok.py", "--job-name", "j", "--input-data", "in=data.csv").returncode == 0
    before = _tree(tmp_path / "jobs")
    out = _job(tmp_path, "ok.py", "--job-name", "j", "--input-data", f"{channel}=data.csv")
    assert out.returncode == 2
    assert out.stderr == (
        f"qbackends: error: --input-data '{channel}=data.csv' is not CHANNEL=PATH (channel: 1-64 letters, digits, "
        "'.', '-', '_', starting with a letter or digit). Fix: pass e.g. --input-data input=data/graph.txt.\n"
    )
    assert _tree(tmp_path / "jobs") == before  # the earlier run's results and input are untouched


def test_a_job_rerun_on_its_own_input_copy_keeps_the_data(tmp_path):
    (tmp_path / "ok.py").write_text(WRITES_RESULTS)
    (tmp_path / "data.csv").write_text("1,2\n")
    assert _job(tmp_path, "ok.py", "--job-name", "j", "--input-data", "in=data.csv").returncode == 0
    out = _job(tmp_path, "ok.py", "--job-name", "j", "--input-data", "in=jobs/j/input/in")
    assert out.returncode == 0, out.stderr
    assert _tree(tmp_path / "jobs/j/input") == {"in/data.csv": "1,2\n"}


def test_the_input_folder_holds_exactly_this_runs_channels(tmp_path):
    (tmp_path / "ok.py").write_text(WRITES_RESULTS)
    (tmp_path / "a.csv").write_text("a\n")
    (tmp_path / "b.csv").write_text("b\n")
    assert _job(tmp_path, "ok.py", "--job-name", "j", "--input-data", "one=a.csv").returncode == 0
    assert _job(tmp_path, "ok.py", "--job-name", "j", "--input-data", "two=b.csv").returncode == 0
    assert _tree(tmp_path / "jobs/j/input") == {"two/b.csv": "b\n"}


def test_a_source_that_holds_the_job_folder_is_refused(tmp_path):
    (tmp_path / "ok.py").write_text(WRITES_RESULTS)
    out = _job(tmp_path, "ok.py", "--job-name", "j", "--input-data", "d=.")
    assert out.returncode == 2
    assert out.stderr == (
        "qbackends: error: --input-data 'd=.': '.' holds the job's own folder 'jobs/j'; it would be copied into itself. "
        "Fix: pass a folder outside --jobs-dir, or a --jobs-dir outside it.\n"
    )
    assert not (tmp_path / "jobs").exists()


def test_input_that_cannot_be_copied_is_named_before_anything_is_made(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text("1\n")
    os.mkfifo(data / "pipe")
    with pytest.raises(WorkloadInputError) as fifo:
        prepare_job(sys.executable, input_data=[f"d={data}"], jobs_dir=str(tmp_path / "jobs"))
    assert str(fifo.value) == (
        f"--input-data 'd={data}': '{data / 'pipe'}' is not a file or a folder (a pipe, socket or device); it cannot "
        "be copied. Fix: pass only files and folders as input data."
    )
    (data / "pipe").unlink()
    (data / "up").symlink_to(data)
    with pytest.raises(WorkloadInputError, match="links back to a folder above it; the copy would never end"):
        prepare_job(sys.executable, input_data=[f"d={data}"], jobs_dir=str(tmp_path / "jobs"))
    (data / "up").unlink()
    (data / "self").symlink_to(data / "self")
    with pytest.raises(WorkloadInputError, match="cannot be read: Too many levels of symbolic links"):
        prepare_job(sys.executable, input_data=[f"d={data}"], jobs_dir=str(tmp_path / "jobs"))
    assert not (tmp_path / "jobs").exists()


def test_a_channel_given_twice_is_refused(tmp_path):
    (tmp_path / "a.csv").write_text("a")
    with pytest.raises(WorkloadInputError, match="channel 'in' is given twice"):
        prepare_job(sys.executable, input_data=[f"in={tmp_path / 'a.csv'}"] * 2, jobs_dir=str(tmp_path / "jobs"))


def test_a_jobs_dir_that_is_a_file_is_a_typed_error(tmp_path):
    (tmp_path / "ok.py").write_text(WRITES_RESULTS)
    (tmp_path / "afile").write_text("")
    out = _job(tmp_path, "ok.py", "--job-name", "j", "--jobs-dir", "afile")
    assert out.returncode == 2
    assert out.stderr == (
        "qbackends: error: Job folder 'afile/j' cannot be written: Not a directory (a file stands where a folder must go) "
        "('afile/j'). Fix: make 'afile/j' a writable folder, or choose another place for this run's files.\n"
    )


SLOW_JOB = textwrap.dedent(
    """
    import os, pathlib, subprocess, sys, time
    marker = sys.argv[0]
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker])
    pathlib.Path(os.environ["AMZN_BRAKET_JOB_RESULTS_DIR"], "started").write_text(str(os.getpid()))
    time.sleep(300)
    """
)


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _start_slow_job(tmp_path: Path, name: str) -> subprocess.Popen[str]:
    script = tmp_path / f"slow-{name}.py"
    script.write_text(SLOW_JOB)
    runner = subprocess.Popen(
        [sys.executable, "-m", "qbackends.cli", "job", "run", str(script), "--job-name", name, "--device", "lightning.qubit"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "jobs" / name / "results" / "started").exists():
        assert time.monotonic() < deadline and runner.poll() is None, runner.communicate()
        time.sleep(0.1)
    return runner


def test_a_second_run_of_a_running_job_is_refused_and_changes_nothing(tmp_path):
    (tmp_path / "ok.py").write_text(WRITES_RESULTS)
    (tmp_path / "b.csv").write_text("b")
    runner = _start_slow_job(tmp_path, "same")
    try:
        second = _job(tmp_path, "ok.py", "--job-name", "same", "--input-data", "in=b.csv")
        assert second.returncode == 2
        assert second.stderr == (
            f"qbackends: error: Job folder 'jobs/same' is in use by another run (process {runner.pid}); two runs there "
            "would overwrite each other. Fix: wait for that run to end, or give this one its own folder "
            "(--results-dir, --checkpoint-dir, --job-name).\n"
        )
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.communicate(timeout=60)
    assert not (tmp_path / "jobs/same/input/in").exists()


def test_default_job_names_of_runs_started_together_differ(tmp_path):
    (tmp_path / "ok.py").write_text(WRITES_RESULTS)
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "qbackends.cli", "job", "run", "ok.py", "--device", "lightning.qubit"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    names = {json.loads(r.communicate()[0].splitlines()[-1])["job"] for r in runs}
    assert len(names) == 2 and all(n.startswith("qbackends-job-") for n in names)


def test_sigterm_to_the_runner_ends_the_whole_job_and_says_so(tmp_path):
    runner = _start_slow_job(tmp_path, "stopped")
    marker = str(tmp_path / "slow-stopped.py")
    try:
        assert len(_processes_with(marker)) == 3  # the runner, the job and the child it started
    finally:
        runner.send_signal(signal.SIGTERM)
        _, stderr = runner.communicate(timeout=60)
    assert runner.returncode == 143
    assert stderr.splitlines()[-1] == (
        "qbackends: error: job 'stopped' was stopped: qbackends job run received SIGTERM and passed it on to the job's "
        "processes. Fix: run it again to continue; its checkpoints are kept."
    )
    assert _processes_with(marker) == []


def test_processes_a_job_leaves_behind_end_with_it_and_their_files_are_listed(tmp_path):
    (tmp_path / "parent.py").write_text(
        textwrap.dedent(
            """
            import os, subprocess, sys
            results = os.environ["AMZN_BRAKET_JOB_RESULTS_DIR"]
            child = "import pathlib, sys, time; pathlib.Path(sys.argv[1], 'child.txt').write_text('x'); time.sleep(300)"
            subprocess.Popen([sys.executable, "-c", child, results, sys.argv[0]])
            import time
            deadline = time.time() + 30
            while not os.path.exists(os.path.join(results, "child.txt")) and time.time() < deadline:
                time.sleep(0.05)
            """
        )
    )
    out = _job(tmp_path, "parent.py", "--job-name", "p")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.splitlines()[-1])
    assert [Path(p).name for p in summary["results"]] == ["child.txt"]
    assert out.stderr == "qbackends: job 'p' left 1 process(es) running when it exited; they were ended with it.\n"
    assert _processes_with(str(tmp_path / "parent.py")) == []
