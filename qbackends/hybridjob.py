"""Amazon Braket Hybrid Jobs, locally: the environment a job sees, and a runner that sets it.

A script written for Braket Hybrid Jobs reads ``AMZN_BRAKET_*`` variables; ``run_job`` starts it as
a subprocess with exactly those, so the same script runs here unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import JobFailedError, QBackendsError, WorkloadInputError
from .storage import atomic_write_json

DEVICE = "AMZN_BRAKET_DEVICE_ARN"
HP_FILE = "AMZN_BRAKET_HP_FILE"
INPUT_DIR = "AMZN_BRAKET_INPUT_DIR"
CHECKPOINT_DIR = "AMZN_BRAKET_CHECKPOINT_DIR"
RESULTS_DIR = "AMZN_BRAKET_JOB_RESULTS_DIR"
JOB_NAME = "AMZN_BRAKET_JOB_NAME"
RESULTS_FILE = "results.json"
_JOB_NAME = re.compile(r"[A-Za-z0-9](-*[A-Za-z0-9]){0,49}")
_CHANNEL = re.compile(r"[A-Za-z0-9.\-_]{1,64}")


@dataclass(frozen=True)
class JobEnvironment:
    """What a hybrid job receives from its environment; every field is None outside a job."""

    device: str | None
    hyperparameters: dict[str, str]
    input_dir: Path | None
    checkpoint_dir: Path | None
    results_dir: Path | None
    job_name: str | None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JobEnvironment:
        env = os.environ if environ is None else environ

        def path(name: str) -> Path | None:
            return Path(env[name]) if env.get(name) else None

        hp_file = path(HP_FILE)
        return cls(
            device=env.get(DEVICE) or None,
            hyperparameters=read_hyperparameters(hp_file) if hp_file else {},
            input_dir=path(INPUT_DIR),
            checkpoint_dir=path(CHECKPOINT_DIR),
            results_dir=path(RESULTS_DIR),
            job_name=env.get(JOB_NAME) or None,
        )

    def channel(self, name: str) -> Path | None:
        """The folder of an input channel, if the job has one."""
        return self.input_dir / name if self.input_dir else None


def read_hyperparameters(path: Path) -> dict[str, str]:
    """A JSON object of hyperparameters. Braket passes every value as a string; so does this."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise WorkloadInputError(
            f"Hyperparameter file {str(path)!r} cannot be read: {exc.strerror or exc}.",
            'pass an existing JSON file, e.g. --hyperparameters hp.json containing {"layers": 2}.',
        ) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkloadInputError(
            f"Hyperparameter file {str(path)!r} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.",
            'write a JSON object such as {"layers": 2, "stepsize": 0.1}.',
        ) from exc
    if not isinstance(data, dict):
        raise WorkloadInputError(
            f"Hyperparameter file {str(path)!r} holds a JSON {type(data).__name__}, not an object.",
            'write a JSON object such as {"layers": 2, "stepsize": 0.1}.',
        )
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}


def config_from_hyperparameters(config_class: Any, hyperparameters: Mapping[str, str], **overrides: Any) -> Any:
    """A workload's config dataclass from Braket-style string hyperparameters.

    Raises:
        WorkloadInputError: for an unknown name (listing the known ones) or a value of the wrong type.
    """
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    values: dict[str, Any] = {}
    for key, text in hyperparameters.items():
        if key not in fields:
            raise WorkloadInputError(
                f"Hyperparameter {key!r} is unknown; choices: {', '.join(fields)}.", "remove it from the hyperparameter file."
            )
        kind = _kind(str(fields[key].type))
        try:
            values[key] = _convert(kind, text)
        except ValueError:
            raise WorkloadInputError(
                f"Hyperparameter {key}={text!r} is not a valid {kind}.", f"give {key} a {kind} value."
            ) from None
    return config_class(**{**values, **overrides})


def _kind(annotation: str) -> str:
    for kind in ("bool", "int", "float"):
        if annotation.startswith(kind):
            return kind
    return "str"


def _convert(kind: str, text: str) -> Any:
    if text in ("null", "None") and kind != "str":
        return None
    if kind == "bool":
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(text)
        return text.lower() in ("true", "1")
    if kind == "int":
        number = float(text)
        if not number.is_integer():
            raise ValueError(text)
        return int(number)
    if kind == "float":
        return float(text)
    return text


def save_job_result(data: Mapping[str, Any], environment: JobEnvironment | None = None) -> Path | None:
    """Write ``data`` to the job's results folder, in the shape Braket's ``save_job_result`` writes."""
    env = environment or JobEnvironment.from_env()
    if env.results_dir is None:
        return None
    return atomic_write_json(env.results_dir / RESULTS_FILE, {"dataDictionary": dict(data), "dataFormat": "plaintext"})


# ---- the runner -----------------------------------------------------------------------------


@dataclass(frozen=True)
class JobLayout:
    """The folders of one local job run."""

    root: Path
    input_dir: Path
    checkpoint_dir: Path
    results_dir: Path
    hp_file: Path


def prepare_job(
    entry_point: str,
    *,
    job_name: str | None = None,
    hyperparameters: str | None = None,
    input_data: Sequence[str] = (),
    jobs_dir: str = "jobs",
    checkpoint_dir: str | None = None,
    results_dir: str | None = None,
) -> tuple[list[str], JobLayout]:
    """Check every input, lay out the job's folders, and return the command to run.

    Raises:
        WorkloadInputError: before anything is created, for a missing entry point, a bad
            hyperparameter file, a missing input path or a bad channel or job name.
    """
    command = _entry_command(entry_point)
    name = job_name or f"qbackends-job-{time.strftime('%Y%m%d-%H%M%S')}"
    if not _JOB_NAME.fullmatch(name):
        raise WorkloadInputError(
            f"Job name {name!r} is not valid: use 1-50 letters, digits and hyphens, starting and ending with a letter or digit.",
            "pass e.g. --job-name qaoa-18-nodes.",
        )
    hps = read_hyperparameters(Path(hyperparameters)) if hyperparameters else {}
    channels: dict[str, Path] = {}
    for item in input_data:
        channel, sep, given = item.partition("=")
        if not sep or not _CHANNEL.fullmatch(channel) or not given:
            raise WorkloadInputError(
                f"--input-data {item!r} is not CHANNEL=PATH (channel: letters, digits, '.', '-', '_').",
                "pass e.g. --input-data input=data/graph.txt.",
            )
        if not Path(given).exists():
            raise WorkloadInputError(f"--input-data {item!r}: {given!r} does not exist.", "pass an existing file or folder.")
        channels[channel] = Path(given)

    root = Path(jobs_dir) / name
    layout = JobLayout(
        root=root,
        input_dir=root / "input",
        checkpoint_dir=Path(checkpoint_dir) if checkpoint_dir else root / "checkpoints",
        results_dir=Path(results_dir) if results_dir else root / "results",
        hp_file=root / "hyperparameters.json",
    )
    for folder in (layout.input_dir, layout.checkpoint_dir, layout.results_dir):
        folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(layout.hp_file, hps)
    for channel, source in channels.items():
        target = layout.input_dir / channel
        if target.exists():
            shutil.rmtree(target)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            target.mkdir()
            shutil.copy2(source, target / source.name)
    return command, layout


def _entry_command(entry_point: str) -> list[str]:
    """``script.py`` runs as a file; ``package.module`` or ``package.module:function`` through
    ``qbackends.jobentry`` in a child Python (the current folder on its path, as Braket has it)."""
    if entry_point.endswith(".py") or os.sep in entry_point:
        if not Path(entry_point).is_file():
            raise WorkloadInputError(f"Entry point {entry_point!r} is not a file.", "pass the path of the job's Python script.")
        return [sys.executable, entry_point]
    module, _, function = entry_point.partition(":")
    if not re.fullmatch(r"[A-Za-z_][\w.]*", module) or (function and not function.isidentifier()):
        raise WorkloadInputError(
            f"Entry point {entry_point!r} is neither a script path nor module[:function].",
            "pass e.g. job.py or qbackends.workloads.qaoa.",
        )
    return [sys.executable, "-m", "qbackends.jobentry", entry_point]


def resolve_device(spec: str) -> str:
    """The device string a job gets: resolved here, so a typo stops the job before it starts, ``auto``
    becomes the backend it picks, and the string opens with ``qml.device(string.split("/")[-1])``
    as Braket's example scripts do (``Backend.braket_string``).

    Raises:
        QBackendsError: for a bad or unknown string, or a backend that cannot run here.
    """
    from .device import choose

    return choose(spec).backend.braket_string


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of every file under ``folder``."""
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.rglob("*") if p.is_file()}


def written_since(folder: Path, before: Mapping[str, tuple[int, int]]) -> list[str]:
    """Files under ``folder`` that are new or changed since ``before`` was taken."""
    return sorted(path for path, stamp in snapshot(folder).items() if before.get(path) != stamp)


def check_exit(code: int, job_name: str) -> None:
    """Raise ``JobFailedError`` for a job that failed or was ended by a signal."""
    if code == 0:
        return
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        raise JobFailedError(
            f"job {job_name!r} was ended by {name}.",
            "see the job's output above; a kill by SIGKILL is often the machine running out of memory.",
            exit_code=128 - code,
        )
    raise JobFailedError(f"job {job_name!r} failed with exit code {code}.", "its own error is shown above.", exit_code=code)


def entry(main: Callable[[], int | None]) -> int:
    """Run a qbackends job entry point: a typed error ends it with one line and exit 2."""
    try:
        return int(main() or 0)
    except QBackendsError as exc:
        print(f"qbackends: error: {exc.one_line()}", file=sys.stderr)
        return 2


def run_job(
    command: Sequence[str], layout: JobLayout, device: str, job_name: str, extra_env: Mapping[str, str] | None = None
) -> int:
    """Run the job's command with the Braket environment, streaming its output; its exit code."""
    env = {
        **os.environ,
        **(extra_env or {}),
        DEVICE: device,
        HP_FILE: str(layout.hp_file.resolve()),
        INPUT_DIR: str(layout.input_dir.resolve()),
        CHECKPOINT_DIR: str(layout.checkpoint_dir.resolve()),
        RESULTS_DIR: str(layout.results_dir.resolve()),
        JOB_NAME: job_name,
    }
    return subprocess.run(list(command), env=env, check=False).returncode
