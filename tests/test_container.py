"""The job image's entry (qbackends.container) against a real S3 server (moto, on loopback): code fetched and unpacked,
requirements installed, hyperparameters bound, the entry point run, failures written where Braket reads them."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from qbackends.container import CodeSource, ContainerPaths, download, install_requirements, main, unpack, worker_launches
from qbackends.errors import JobSetupError, WorkloadInputError
from qbackends.hybridjob import run_processes
from qbackends.jobentry import bind_hyperparameters

BUCKET = "amazon-braket-us-east-1-123456789012"
JOB = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path

    def main(steps: int, rate: float = 0.5, label="x"):
        out = {"steps": steps, "rate": rate, "label": label, "device": os.environ["AMZN_BRAKET_DEVICE_ARN"],
               "rank": os.environ.get("RANK"), "world": os.environ.get("WORLD_SIZE"), "cwd": os.getcwd()}
        Path(os.environ["AMZN_BRAKET_JOB_RESULTS_DIR"], f"results-{os.environ.get('RANK', '-')}.json").write_text(json.dumps(out))

    def ranked(**hyperparameters):
        main(int(hyperparameters["steps"]), label=hyperparameters["sagemaker_instance_type"])

    def fail():
        raise ValueError("step 3 has no data")

    def leave(code: int):
        sys.exit(code)

    def wait():
        Path(os.environ["AMZN_BRAKET_JOB_RESULTS_DIR"], "started").write_text("")
        time.sleep(120)
    """
)


@pytest.fixture(scope="module")
def s3_endpoint():
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        pytest.fail("moto is not installed: pip install -e '.[test]' (moto[server])")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(s3_endpoint, monkeypatch):
    """A boto3 client of the loopback server, with the environment the container's boto3 (and its children) read."""
    import boto3

    for name, value in {
        "AWS_ENDPOINT_URL_S3": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3")
    if BUCKET not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    return client


def _tar_gz(files: dict[str, str]) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return data.getvalue()


def _zip(files: dict[str, str]) -> bytes:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as zipped:
        for name, text in files.items():
            zipped.writestr(name, text)
    return data.getvalue()


def _job_env(tmp_path: Path, key: str, entry: str, compression: str = "GZIP", **extra: str) -> dict[str, str]:
    (tmp_path / "model").mkdir(exist_ok=True)
    return {
        **os.environ,
        "AMZN_BRAKET_SCRIPT_S3_URI": f"s3://{BUCKET}/{key}",
        "AMZN_BRAKET_SCRIPT_ENTRY_POINT": entry,
        "AMZN_BRAKET_SCRIPT_COMPRESSION_TYPE": compression,
        "AMZN_BRAKET_DEVICE_ARN": "local:pennylane/default.qubit",
        "AMZN_BRAKET_JOB_NAME": "unit-job",
        "AMZN_BRAKET_JOB_RESULTS_DIR": str(tmp_path / "model"),
        **extra,
    }


def _paths(tmp_path: Path) -> ContainerPaths:
    return ContainerPaths(ml=tmp_path / "ml", braket=tmp_path / "braket")


def _hp_file(tmp_path: Path, hps: dict[str, str]) -> str:
    path = tmp_path / "hyperparameters.json"
    path.write_text(json.dumps(hps))
    return str(path)


# ---- where the code is ------------------------------------------------------------------------------------


def test_the_code_is_named_by_the_environment_else_by_sm_hps():
    env = {
        "AMZN_BRAKET_SCRIPT_S3_URI": "s3://b/jobs/j/script/source.tar.gz",
        "AMZN_BRAKET_SCRIPT_ENTRY_POINT": "qaoa.qaoa_algorithm",
        "AMZN_BRAKET_SCRIPT_COMPRESSION_TYPE": "gzip",
    }
    assert CodeSource.from_env(env) == CodeSource("s3://b/jobs/j/script/source.tar.gz", "qaoa.qaoa_algorithm", "GZIP")
    hps = json.dumps({"AMZN_BRAKET_SCRIPT_S3_URI": "s3://b/k.zip", "AMZN_BRAKET_SCRIPT_COMPRESSION_TYPE": "ZIP"})
    source = CodeSource.from_env({"AMZN_BRAKET_SCRIPT_ENTRY_POINT": "m:f", "SM_HPS": hps})
    assert source == CodeSource("s3://b/k.zip", "m:f", "ZIP") and source.bucket_and_key == ("b", "k.zip")
    assert CodeSource.from_env({**env, "AMZN_BRAKET_SCRIPT_COMPRESSION_TYPE": ""}).compression == "NONE"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"AMZN_BRAKET_SCRIPT_ENTRY_POINT": "m"},
            "AMZN_BRAKET_SCRIPT_S3_URI is unset (and SM_HPS does not hold it): this job's code is not named. Fix: start the "
            "image through AwsQuantumJob.create(..., image_uri=...), or set AMZN_BRAKET_SCRIPT_S3_URI=s3://BUCKET/KEY and "
            "AMZN_BRAKET_SCRIPT_ENTRY_POINT=module[:function].",
        ),
        (
            {
                "AMZN_BRAKET_SCRIPT_S3_URI": "s3://b/k",
                "AMZN_BRAKET_SCRIPT_ENTRY_POINT": "m",
                "AMZN_BRAKET_SCRIPT_COMPRESSION_TYPE": "bz2",
            },
            "AMZN_BRAKET_SCRIPT_COMPRESSION_TYPE='bz2' is not one of GZIP, ZIP, NONE. Fix: give GZIP for a .tar.gz, ZIP for a "
            ".zip, or NONE (or leave it unset) for one file.",
        ),
        (
            {"AMZN_BRAKET_SCRIPT_S3_URI": "https://b/k", "AMZN_BRAKET_SCRIPT_ENTRY_POINT": "m"},
            "AMZN_BRAKET_SCRIPT_S3_URI='https://b/k' is not s3://BUCKET/KEY of one file. Fix: give e.g. "
            "s3://amazon-braket-us-east-1-123456789012/jobs/my-job/script/source.tar.gz.",
        ),
        (
            {"AMZN_BRAKET_SCRIPT_S3_URI": "s3://b/k", "AMZN_BRAKET_SCRIPT_ENTRY_POINT": "qaoa/qaoa_algorithm.py"},
            "AMZN_BRAKET_SCRIPT_ENTRY_POINT='qaoa/qaoa_algorithm.py' is not module[:function]. Fix: give e.g. "
            "qaoa.qaoa_algorithm or qaoa.qaoa_algorithm:main.",
        ),
    ],
)
def test_code_that_is_not_named_right_is_one_line(env, message):
    with pytest.raises(JobSetupError) as caught:
        CodeSource.from_env(env)
    assert caught.value.one_line() == message


# ---- S3, archives, requirements ---------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "pack"), [("GZIP", _tar_gz), ("ZIP", _zip)])
def test_code_is_downloaded_from_s3_and_unpacked(s3, tmp_path, kind, pack):
    files = {"pkg/__init__.py": "", "pkg/job.py": "VALUE = 42\n", "pkg/data/table.csv": "a,b\n"}
    s3.put_object(Bucket=BUCKET, Key=f"jobs/j/script/source.{kind.lower()}", Body=pack(files))
    source = CodeSource(f"s3://{BUCKET}/jobs/j/script/source.{kind.lower()}", "pkg.job", kind)
    (tmp_path / "original").mkdir()
    archive = download(source, tmp_path / "original")
    assert archive == tmp_path / "original" / f"source.{kind.lower()}"
    unpack(archive, source, tmp_path / "extracted")
    assert {
        str(p.relative_to(tmp_path / "extracted")): p.read_text() for p in (tmp_path / "extracted").rglob("*") if p.is_file()
    } == files


def test_a_single_file_is_copied_as_it_is(s3, tmp_path):
    s3.put_object(Bucket=BUCKET, Key="jobs/j/script/job.py", Body=b"print('one file')\n")
    source = CodeSource(f"s3://{BUCKET}/jobs/j/script/job.py", "job", "NONE")
    (tmp_path / "original").mkdir()
    (tmp_path / "extracted").mkdir()
    unpack(download(source, tmp_path / "original"), source, tmp_path / "extracted")
    assert (tmp_path / "extracted" / "job.py").read_text() == "print('one file')\n"


def test_missing_code_is_one_line(s3, tmp_path):
    source = CodeSource(f"s3://{BUCKET}/jobs/none/script/source.tar.gz", "m", "GZIP")
    with pytest.raises(JobSetupError) as caught:
        download(source, tmp_path)
    assert caught.value.one_line() == (
        f"The job's code s3://{BUCKET}/jobs/none/script/source.tar.gz cannot be downloaded: 404 (Not Found). Fix: check "
        f"AMZN_BRAKET_SCRIPT_S3_URI, and that the job's role may read it (s3:GetObject on arn:aws:s3:::{BUCKET}/jobs/none/script/source.tar.gz)."
    )
    assert list(tmp_path.iterdir()) == []


def test_an_archive_that_escapes_or_is_no_archive_is_refused(tmp_path):
    source = CodeSource("s3://b/source.tar.gz", "m", "GZIP")
    (tmp_path / "evil.tar.gz").write_bytes(_tar_gz({"../outside.py": "x"}))
    (tmp_path / "out").mkdir()
    with pytest.raises(JobSetupError, match=r"cannot be unpacked: .*outside"):
        unpack(tmp_path / "evil.tar.gz", source, tmp_path / "out")
    assert not (tmp_path / "outside.py").exists()
    (tmp_path / "plain.tar.gz").write_text("not an archive")
    with pytest.raises(JobSetupError, match=r"is neither a tar nor a zip archive \(AMZN_BRAKET_SCRIPT_COMPRESSION_TYPE=GZIP\)"):
        unpack(tmp_path / "plain.tar.gz", source, tmp_path / "out")


def test_requirements_are_installed_and_a_failed_install_stops_the_job(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "requirements.txt").write_text("pluggy\n")  # installed already: pip needs no index
    assert install_requirements(tmp_path) == [tmp_path / "pkg" / "requirements.txt"]
    (tmp_path / "requirements.txt").write_text("./no-such-package\n")
    with pytest.raises(JobSetupError) as caught:
        install_requirements(tmp_path)
    assert caught.value.one_line() == (
        f"The job's requirements '{tmp_path / 'requirements.txt'}' could not be installed: pip exited with 1. Fix: see "
        "pip's output above; fix the file, or build an image FROM this one with those packages installed."
    )


# ---- hyperparameters --------------------------------------------------------------------------------------


def test_hyperparameters_bind_to_the_signature_by_braket_rule():
    def train(steps: int, rate: float, verbose: bool, name: str, tag):
        pass

    hps = {"steps": "3", "rate": "0.25", "verbose": "false", "name": "qaoa", "tag": "7"}
    assert bind_hyperparameters(train, hps) == {"steps": 3, "rate": 0.25, "verbose": False, "name": "qaoa", "tag": "7"}
    assert bind_hyperparameters(train, {**hps, "extra": "1"}) == {}  # they do not bind: called with none, as Braket does
    assert bind_hyperparameters(lambda **kw: None, {"a": "1"}) == {"a": "1"}

    def layered(layers: list):
        pass

    assert bind_hyperparameters(layered, {"layers": "ab"}) == {"layers": ["a", "b"]}  # another callable, as Braket calls it
    with pytest.raises(WorkloadInputError) as caught:
        bind_hyperparameters(train, {**hps, "steps": "three"})
    assert caught.value.one_line() == (
        "Hyperparameter steps='three' is not a whole number, as "
        "test_hyperparameters_bind_to_the_signature_by_braket_rule.<locals>.train() declares it (int). "
        "Fix: set steps to a whole number in the hyperparameters."
    )


def test_job_run_binds_hyperparameters_too(tmp_path):
    (tmp_path / "entry.py").write_text("def main(n: int, scale: float = 1.0):\n    print('product', n * scale)\n")
    (tmp_path / "hp.json").write_text(json.dumps({"n": 6, "scale": "0.5"}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "qbackends.cli",
            "job",
            "run",
            "entry:main",
            "--device",
            "lightning.qubit",
            "--hyperparameters",
            "hp.json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "product 3.0" in out.stdout


# ---- the whole entry --------------------------------------------------------------------------------------


def test_a_job_runs_from_s3_to_its_results(s3, tmp_path):
    s3.put_object(Bucket=BUCKET, Key="jobs/ok/source.tar.gz", Body=_tar_gz({"unitjob/__init__.py": "", "unitjob/job.py": JOB}))
    env = _job_env(tmp_path, "jobs/ok/source.tar.gz", "unitjob.job:main", AMZN_BRAKET_HP_FILE=_hp_file(tmp_path, {"steps": "4"}))
    paths = _paths(tmp_path)
    assert main(env, paths) == 0
    result = json.loads((tmp_path / "model" / "results--.json").read_text())
    assert result == {
        "steps": 4,
        "rate": 0.5,
        "label": "x",
        "device": "local:pennylane/default.qubit",
        "rank": None,
        "world": None,
        "cwd": str(paths.extracted.resolve()),  # /opt/braket links to /opt/ml
    }
    assert paths.braket.is_symlink() and paths.braket.resolve() == paths.ml.resolve()
    assert not paths.failure.exists()


def test_data_parallel_starts_one_worker_per_device(s3, tmp_path):
    s3.put_object(Bucket=BUCKET, Key="jobs/dp/source.zip", Body=_zip({"unitjob/__init__.py": "", "unitjob/job.py": JOB}))
    hps = {"steps": "1", "sagemaker_distributed_dataparallel_enabled": "true", "sagemaker_instance_type": "ml.m5.large"}
    env = _job_env(tmp_path, "jobs/dp/source.zip", "unitjob.job:ranked", "ZIP", AMZN_BRAKET_HP_FILE=_hp_file(tmp_path, hps))
    assert main(env, _paths(tmp_path)) == 0
    result = json.loads((tmp_path / "model" / "results-0.json").read_text())  # no GPU here: one worker
    assert (result["rank"], result["world"], result["label"]) == ("0", "1", "ml.m5.large")
    assert [
        w.torch_variables() for w in worker_launches({"SM_HOSTS": '["algo-2", "algo-1"]', "SM_CURRENT_HOST": "algo-2"}, 2)
    ] == [
        {
            "RANK": str(r),
            "WORLD_SIZE": "4",
            "LOCAL_RANK": str(r - 2),
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "algo-1",
            "MASTER_PORT": "23456",
        }
        for r in (2, 3)
    ]


def test_main_without_signature_arguments_gets_the_default(s3, tmp_path):
    s3.put_object(Bucket=BUCKET, Key="jobs/dflt/source.tar.gz", Body=_tar_gz({"unitjob/__init__.py": "", "unitjob/job.py": JOB}))
    env = _job_env(
        tmp_path,
        "jobs/dflt/source.tar.gz",
        "unitjob.job:main",
        AMZN_BRAKET_HP_FILE=_hp_file(tmp_path, {"steps": "2", "label": "7"}),
    )
    assert main(env, _paths(tmp_path)) == 0
    assert json.loads((tmp_path / "model" / "results--.json").read_text())["label"] == "7"  # unannotated: the string


def test_an_entry_point_that_raises_leaves_its_message_in_the_failure_file(s3, tmp_path):
    s3.put_object(Bucket=BUCKET, Key="jobs/fail/source.tar.gz", Body=_tar_gz({"unitjob/__init__.py": "", "unitjob/job.py": JOB}))
    paths = _paths(tmp_path)
    assert main(_job_env(tmp_path, "jobs/fail/source.tar.gz", "unitjob.job:fail"), paths) == 1
    assert paths.failure.read_text() == "ValueError: step 3 has no data\n"


def test_an_entry_point_that_exits_non_zero_is_named_in_the_failure_file(s3, tmp_path, capsys):
    s3.put_object(Bucket=BUCKET, Key="jobs/exit/source.tar.gz", Body=_tar_gz({"unitjob/__init__.py": "", "unitjob/job.py": JOB}))
    paths = _paths(tmp_path)
    env = _job_env(
        tmp_path, "jobs/exit/source.tar.gz", "unitjob.job:leave", AMZN_BRAKET_HP_FILE=_hp_file(tmp_path, {"code": "3"})
    )
    assert main(env, paths) == 3
    line = "job 'unit-job' failed with exit code 3. Fix: its own error is shown above."
    assert paths.failure.read_text() == f"JobFailedError: {line}\n"
    assert capsys.readouterr().err.splitlines()[-1] == f"qbackends: error: {line}"


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            {"AMZN_BRAKET_DEVICE_ARN": "local:pennylane/lighting.qubit"},
            "UnknownBackendError: Unknown simulator 'lighting.qubit' in 'local:pennylane/lighting.qubit'",
        ),
        (
            {"AMZN_BRAKET_SCRIPT_ENTRY_POINT": "qaoa.qaoa_algorithm"},
            f"JobSetupError: AMZN_BRAKET_SCRIPT_ENTRY_POINT='qaoa.qaoa_algorithm': the job's code (s3://{BUCKET}/jobs/typed/source.tar.gz) "
            "holds no module 'qaoa'; it holds: unitjob.",
        ),
        (
            {"AMZN_BRAKET_SCRIPT_S3_URI": f"s3://{BUCKET}/jobs/nothing/source.tar.gz"},
            f"JobSetupError: The job's code s3://{BUCKET}/jobs/nothing/source.tar.gz cannot be downloaded: 404 (Not Found).",
        ),
    ],
)
def test_a_failed_setup_is_one_typed_line_in_the_failure_file(s3, tmp_path, capsys, change, line):
    s3.put_object(Bucket=BUCKET, Key="jobs/typed/source.tar.gz", Body=_tar_gz({"unitjob/__init__.py": "", "unitjob/job.py": JOB}))
    paths = _paths(tmp_path)
    assert main({**_job_env(tmp_path, "jobs/typed/source.tar.gz", "unitjob.job:main"), **change}, paths) == 2
    written = paths.failure.read_text()
    assert written.startswith(line) and written.count("\n") == 1
    assert capsys.readouterr().err == f"qbackends: error: {written.split(': ', 1)[1]}"


def test_sigterm_to_the_container_is_passed_on_to_the_job(s3, tmp_path):
    s3.put_object(Bucket=BUCKET, Key="jobs/wait/source.tar.gz", Body=_tar_gz({"unitjob/__init__.py": "", "unitjob/job.py": JOB}))
    env = _job_env(tmp_path, "jobs/wait/source.tar.gz", "unitjob.job:wait")
    runner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from pathlib import Path; from qbackends.container import ContainerPaths, main; "
            f"raise SystemExit(main(paths=ContainerPaths(Path({str(tmp_path / 'ml')!r}), Path({str(tmp_path / 'braket')!r}))))",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "model" / "started").exists():
        assert time.monotonic() < deadline and runner.poll() is None, runner.communicate()
        time.sleep(0.05)
    runner.send_signal(signal.SIGTERM)
    _, stderr = runner.communicate(timeout=30)
    line = (
        "job 'unit-job' was stopped: the job's container received SIGTERM and passed it on to the job's processes. "
        "Fix: run it again to continue; its checkpoints are kept."
    )
    assert runner.returncode == 143 and stderr.splitlines()[-1] == f"qbackends: error: {line}"
    assert (tmp_path / "ml" / "output" / "failure").read_text() == f"JobFailedError: {line}\n"


@pytest.mark.jax_in_children  # a stop in a worker met jax's gc callback once
def test_a_failed_worker_stops_its_peers():
    started = time.monotonic()
    outcome = run_processes(
        [
            ([sys.executable, "-c", "import time; time.sleep(60)"], os.environ),
            ([sys.executable, "-c", "raise SystemExit(4)"], os.environ),
        ]
    )
    assert outcome.code == 4 and time.monotonic() - started < 8
