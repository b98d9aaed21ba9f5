"""The entry of qbackends' job images: a Braket Hybrid Job started in the container the way Braket starts one.

Braket starts a job image through SageMaker's training toolkit, which runs ``python $SAGEMAKER_PROGRAM`` in
``/opt/ml/code``; the images' program (``docker/braket_container.py``) calls ``main``. As Braket's own
``braket_container.py`` does, ``main``:

1. links ``/opt/braket`` to ``/opt/ml``;
2. reads where the job's code is from ``AMZN_BRAKET_SCRIPT_S3_URI``, ``AMZN_BRAKET_SCRIPT_ENTRY_POINT`` and
   ``AMZN_BRAKET_SCRIPT_COMPRESSION_TYPE`` (or the same keys in ``SM_HPS``);
3. downloads it with boto3 into ``/opt/braket/code/customer_code/original``, unpacks it (a tar or zip archive)
   into ``.../extracted`` and installs each ``requirements.txt`` found there;
4. runs the entry point from that folder in a child process (``qbackends.jobentry``: ``module:function`` with the
   hyperparameters bound to its signature, or ``module`` as ``__main__``); with ``distribution="data_parallel"``
   (the ``sagemaker_distributed_dataparallel_enabled`` hyperparameter) one child per device, each with ``RANK``,
   ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``.

qbackends adds: ``AMZN_BRAKET_DEVICE_ARN`` resolved before anything is downloaded, as ``qbackends job run``
resolves ``--device`` (a ``local:`` string; an AWS device ARN passes unchanged); every failure, typed errors
included, as a ``Type: message`` line in ``/opt/ml/output/failure`` and a non-zero exit (Braket's own exits 0
after a failed setup); SIGINT, SIGTERM and SIGHUP passed on to the job's process groups (``run_processes``, as
``job run``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlparse

from .errors import JobFailedError, JobSetupError, QBackendsError, report
from .hybridjob import DEVICE, HP_FILE, JOB_NAME, check_exit, read_hyperparameters, resolve_device, run_processes
from .jobentry import FAILURE_FILE, record_failure
from .launchers import LOOPBACK, Launch
from .storage import storage_error

S3_URI = "AMZN_BRAKET_SCRIPT_S3_URI"
ENTRY_POINT = "AMZN_BRAKET_SCRIPT_ENTRY_POINT"
COMPRESSION = "AMZN_BRAKET_SCRIPT_COMPRESSION_TYPE"
COMPRESSIONS = ("GZIP", "ZIP", "NONE")  # the SDK's values, in any case; unset is NONE
DATA_PARALLEL = "sagemaker_distributed_dataparallel_enabled"
MASTER_PORT = 23456  # Braket's container's, where MASTER_PORT is unset
RUNNER = "the job's container"
_ENTRY = re.compile(r"[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?")
_EXAMPLE_URI = "s3://amazon-braket-us-east-1-123456789012/jobs/my-job/script/source.tar.gz"


@dataclass(frozen=True)
class ContainerPaths:
    """A job container's folders: SageMaker's ``/opt/ml``, and Braket's ``/opt/braket`` linked to it."""

    ml: Path = Path("/opt/ml")
    braket: Path = Path("/opt/braket")

    @property
    def original(self) -> Path:
        return self.braket / "code" / "customer_code" / "original"

    @property
    def extracted(self) -> Path:
        return self.braket / "code" / "customer_code" / "extracted"

    @property
    def failure(self) -> Path:
        return self.ml / "output" / "failure"

    def prepare(self) -> None:
        """Link ``braket`` to ``ml`` (a link or folder already there is kept, as Braket keeps it) and make the code folders.

        Raises:
            StorageError: a folder or the link cannot be made, naming it.
        """
        try:
            self.ml.mkdir(parents=True, exist_ok=True)
            if not os.path.lexists(self.braket):
                self.braket.symlink_to(self.ml, target_is_directory=True)
            for folder in (self.original, self.extracted, self.failure.parent):
                folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise storage_error(Path(exc.filename or self.braket), exc) from exc


@dataclass(frozen=True)
class CodeSource:
    """Where the job's code is and how it starts, as Braket's ``scriptModeConfig`` gives them."""

    s3_uri: str
    entry_point: str
    compression: str  # GZIP, ZIP or NONE

    @property
    def bucket_and_key(self) -> tuple[str, str]:
        parsed = urlparse(self.s3_uri, allow_fragments=False)
        return parsed.netloc, parsed.path.lstrip("/")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> CodeSource:
        """The code's S3 URI, entry point and compression, from the environment or else ``SM_HPS``.

        Raises:
            JobSetupError: one of them missing or malformed, naming it.
        """
        values = {name: environ.get(name) or "" for name in (S3_URI, ENTRY_POINT, COMPRESSION)}
        if not (values[S3_URI] and values[ENTRY_POINT]) and environ.get("SM_HPS"):
            try:
                hps = json.loads(environ["SM_HPS"])
            except json.JSONDecodeError as exc:
                raise JobSetupError(
                    f"SM_HPS is not JSON: {exc.msg} at column {exc.colno}.",
                    "let SageMaker's training toolkit set it, or unset it and set the AMZN_BRAKET_SCRIPT_* variables.",
                ) from None
            if isinstance(hps, dict):
                values = {name: value or str(hps.get(name) or "") for name, value in values.items()}
        how = (
            f"start the image through AwsQuantumJob.create(..., image_uri=...), or set {S3_URI}=s3://BUCKET/KEY and "
            f"{ENTRY_POINT}=module[:function]."
        )
        for name in (S3_URI, ENTRY_POINT):
            if not values[name]:
                raise JobSetupError(f"{name} is unset (and SM_HPS does not hold it): this job's code is not named.", how)
        source = cls(values[S3_URI], values[ENTRY_POINT], values[COMPRESSION].strip().upper() or "NONE")
        bucket, key = source.bucket_and_key
        if not source.s3_uri.startswith("s3://") or not bucket or not key or key.endswith("/"):
            raise JobSetupError(f"{S3_URI}={source.s3_uri!r} is not s3://BUCKET/KEY of one file.", f"give e.g. {_EXAMPLE_URI}.")
        if not _ENTRY.fullmatch(source.entry_point):
            raise JobSetupError(
                f"{ENTRY_POINT}={source.entry_point!r} is not module[:function].",
                "give e.g. qaoa.qaoa_algorithm or qaoa.qaoa_algorithm:main.",
            )
        if source.compression not in COMPRESSIONS:
            raise JobSetupError(
                f"{COMPRESSION}={values[COMPRESSION]!r} is not one of {', '.join(COMPRESSIONS)}.",
                "give GZIP for a .tar.gz, ZIP for a .zip, or NONE (or leave it unset) for one file.",
            )
        return source


def download(source: CodeSource, folder: Path) -> Path:
    """Download the job's code into ``folder`` with boto3; a file already there (a restarted container) is kept, as
    Braket keeps it. The S3 endpoint, region and credentials are boto3's own (``AWS_ENDPOINT_URL_S3`` included).

    Raises:
        JobSetupError: the object cannot be read (missing, no access, no credentials, no connection), naming it.
    """
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    except ImportError:
        raise JobSetupError(
            f"The job's code {source.s3_uri} cannot be downloaded: boto3 is not installed here.",
            "pip install boto3 in the image.",
        ) from None
    bucket, key = source.bucket_and_key
    target = folder / PurePosixPath(key).name
    if target.is_file():
        return target
    what = f"The job's code {source.s3_uri} cannot be downloaded"
    try:
        boto3.client("s3").download_file(bucket, key, str(target))
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise JobSetupError(
            f"{what}: {error.get('Code', '?')} ({error.get('Message') or 'no message'}).",
            f"check {S3_URI}, and that the job's role may read it (s3:GetObject on arn:aws:s3:::{bucket}/{key}).",
        ) from None
    except NoCredentialsError:
        raise JobSetupError(
            f"{what}: there are no AWS credentials here.",
            "on AWS the job's role gives them; elsewhere set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.",
        ) from None
    except BotoCoreError as exc:
        raise JobSetupError(
            f"{what}: {' '.join(str(exc).split())}.", "check the network, AWS_DEFAULT_REGION and AWS_ENDPOINT_URL_S3."
        ) from None
    return target


def unpack(archive: Path, source: CodeSource, folder: Path) -> None:
    """Unpack the code into ``folder``: a tar (gzip or not) or zip archive for GZIP and ZIP, told apart by its content
    as Braket's container tells them apart by name; with NONE the file is copied there as it is.

    Raises:
        JobSetupError: the file is not such an archive, or a member would land outside ``folder``.
    """
    if source.compression == "NONE":
        shutil.copy(archive, folder)
        return
    fix = f"upload a .tar.gz (or a .zip with {COMPRESSION}=ZIP) holding the job's code, as AwsQuantumJob.create(source_module=...) does."
    try:
        if tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tar:
                _extract_tar(tar, folder)
        elif zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(folder)  # zipfile drops ".." and leading "/" itself
        else:
            raise JobSetupError(
                f"The job's code {source.s3_uri} is neither a tar nor a zip archive ({COMPRESSION}={source.compression}).", fix
            )
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise JobSetupError(f"The job's code {source.s3_uri} cannot be unpacked: {' '.join(str(exc).split())}.", fix) from None


def _extract_tar(tar: tarfile.TarFile, folder: Path) -> None:
    if hasattr(tarfile, "data_filter"):
        tar.extractall(folder, filter="data")
        return
    root = folder.resolve()  # Pythons without extraction filters (3.11.2, Debian bookworm's): refuse what escapes
    for member in tar.getmembers():
        target = (root / member.name).resolve()
        inside = target == root or root in target.parents
        if member.issym() or member.islnk():
            link = ((target.parent if member.issym() else root) / member.linkname).resolve()
            inside = inside and (link == root or root in link.parents)
        if not inside:
            raise tarfile.TarError(f"member {member.name!r} would land outside the code folder")
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            raise tarfile.TarError(f"member {member.name!r} is not a file, folder or link")
    tar.extractall(folder)


def install_requirements(folder: Path) -> list[Path]:
    """``pip install -r`` each ``requirements.txt`` under ``folder`` (run from it), as Braket's container does; the files.

    Raises:
        JobSetupError: pip fails on one (Braket's container goes on and the job fails on its first import).
    """
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        if "requirements.txt" in files:
            path = Path(root) / "requirements.txt"
            found.append(path)
            code = subprocess.run([sys.executable, "-m", "pip", "install", "-r", str(path)], cwd=folder).returncode
            if code != 0:
                raise JobSetupError(
                    f"The job's requirements {str(path)!r} could not be installed: pip exited with {code}.",
                    "see pip's output above; fix the file, or build an image FROM this one with those packages installed.",
                )
    return found


def check_entry_module(source: CodeSource, folder: Path) -> None:
    """The entry point's top-level module is in the code, or installed in the image.

    Raises:
        JobSetupError: it is neither, listing what the code holds.
    """
    top = source.entry_point.partition(":")[0].split(".")[0]
    if (folder / top).is_dir() or (folder / f"{top}.py").is_file() or importlib.util.find_spec(top) is not None:
        return
    held = sorted(p.name for p in folder.iterdir())
    raise JobSetupError(
        f"{ENTRY_POINT}={source.entry_point!r}: the job's code ({source.s3_uri}) holds no module {top!r}; "
        f"it holds: {', '.join(held) or 'nothing'}.",
        "name a module at the archive's top, e.g. AwsQuantumJob.create(source_module='qaoa', entry_point='qaoa.qaoa_algorithm').",
    )


def job_device(environ: Mapping[str, str]) -> str:
    """``AMZN_BRAKET_DEVICE_ARN`` as the job gets it: a ``local:`` string resolved (unset: auto), an ARN unchanged.

    Raises:
        QBackendsError: a bad or unknown device string, or a backend that cannot run here.
    """
    given = environ.get(DEVICE) or ""
    if given and not given.startswith("local:"):
        return given
    return resolve_device(given or "auto")


def is_data_parallel(hyperparameters: Mapping[str, Any]) -> bool:
    """Whether the job asked for ``distribution="data_parallel"`` (the SDK's hyperparameter for it)."""
    return str(hyperparameters.get(DATA_PARALLEL, "")).strip().lower() in ("true", "1", "yes")


def worker_launches(environ: Mapping[str, str], devices: int) -> list[Launch]:
    """This node's data-parallel workers, one per device (at least one), as Braket's container places them: nodes
    from ``SM_HOSTS`` (sorted; rank 0 on the first), this node from ``SM_CURRENT_HOST``, ``MASTER_PORT`` or 23456.

    Raises:
        JobSetupError: ``SM_HOSTS`` is not a JSON list of names, or ``MASTER_PORT`` not a port.
    """
    try:
        hosts = sorted(json.loads(environ.get("SM_HOSTS") or "[]"))
        if not all(isinstance(h, str) for h in hosts):
            raise ValueError
    except (ValueError, TypeError):
        raise JobSetupError(
            f"SM_HOSTS={environ.get('SM_HOSTS')!r} is not a JSON list of host names.",
            'let SageMaker set it, e.g. ["algo-1", "algo-2"].',
        ) from None
    port_text = environ.get("MASTER_PORT") or str(MASTER_PORT)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise JobSetupError(
            f"MASTER_PORT={port_text!r} is not a port number.", f"set a port from 1 to 65535, or unset it for {MASTER_PORT}."
        )
    current = environ.get("SM_CURRENT_HOST", "")
    nodes = max(len(hosts), 1)
    node, address = (hosts.index(current), hosts[0]) if nodes > 1 and current in hosts else (0, LOOPBACK)
    per_node = max(devices, 1)
    return [
        Launch("data_parallel", node * per_node + local, nodes * per_node, local, per_node, address, int(port_text))
        for local in range(per_node)
    ]


def _device_count() -> int:
    from .probe import nvidia_gpus

    return len(nvidia_gpus()[0])


def main(environ: Mapping[str, str] | None = None, paths: ContainerPaths | None = None) -> int:
    """Set up and run the job this container was started for; the exit code (0, the job's, or 2 for a failed setup)."""
    env = dict(os.environ if environ is None else environ)
    paths = paths or ContainerPaths()
    try:
        paths.prepare()
        source = CodeSource.from_env(env)
        device = job_device(env)  # before the download: a typo ends the job here
        hp_file = Path(env[HP_FILE]) if env.get(HP_FILE) else None
        hyperparameters = read_hyperparameters(hp_file) if hp_file and hp_file.is_file() else {}
        archive = download(source, paths.original)
        unpack(archive, source, paths.extracted)
        install_requirements(paths.extracted)
        check_entry_module(source, paths.extracted)
        child = {**env, DEVICE: device, FAILURE_FILE: str(paths.failure)}
        command = [sys.executable, "-m", "qbackends.jobentry", source.entry_point]
        if is_data_parallel(hyperparameters):
            commands = [(command, {**child, **w.torch_variables()}) for w in worker_launches(env, _device_count())]
        else:
            commands = [(command, child)]
    except QBackendsError as exc:
        record_failure(exc, paths.failure)
        return report(exc)
    print(f"qbackends: running {source.entry_point} ({len(commands)} process(es)) on {device}", flush=True)
    before = paths.failure.stat().st_size if paths.failure.is_file() else 0
    outcome = run_processes(commands, cwd=paths.extracted)
    try:
        check_exit(outcome, env.get(JOB_NAME) or source.entry_point, RUNNER)
    except JobFailedError as exc:
        if (paths.failure.stat().st_size if paths.failure.is_file() else 0) == before:  # the job wrote no reason itself
            record_failure(exc, paths.failure)
        return report(exc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
