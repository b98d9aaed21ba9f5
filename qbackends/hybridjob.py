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
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import JobFailedError, QBackendsError, StorageError, WorkloadInputError, report
from .fixes import hyperparameter
from .jobentry import module_spec, unrunnable
from .storage import atomic_write_json, storage_error

DEVICE = "AMZN_BRAKET_DEVICE_ARN"
HP_FILE = "AMZN_BRAKET_HP_FILE"
INPUT_DIR = "AMZN_BRAKET_INPUT_DIR"
CHECKPOINT_DIR = "AMZN_BRAKET_CHECKPOINT_DIR"
RESULTS_DIR = "AMZN_BRAKET_JOB_RESULTS_DIR"
JOB_NAME = "AMZN_BRAKET_JOB_NAME"
RESULTS_FILE = "results.json"
_JOB_NAME = re.compile(r"[A-Za-z0-9](-*[A-Za-z0-9]){0,49}")
_CHANNEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9.\-_]{0,63}")


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


MAX_HYPERPARAMETER_BYTES = 1 << 20
HYPERPARAMETERS_FIX = 'write a JSON object such as {"layers": 2, "stepsize": 0.1}.'


def read_hyperparameters(path: Path) -> dict[str, str]:
    """A JSON object of hyperparameters. Braket passes every value as a string; so does this.

    Raises:
        WorkloadInputError: the file cannot be read, is not UTF-8 JSON (``userfiles.read_json``), or holds no object.
    """
    from .userfiles import read_json

    data = read_json(path, "Hyperparameter file", HYPERPARAMETERS_FIX, MAX_HYPERPARAMETER_BYTES)
    if not isinstance(data, dict):
        raise WorkloadInputError(
            f"Hyperparameter file {str(path)!r} holds a JSON {type(data).__name__}, not an object.", HYPERPARAMETERS_FIX
        )
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}


def config_from_hyperparameters(
    config_class: Any, hyperparameters: Mapping[str, str], read_apart: tuple[str, ...] = (), **overrides: Any
) -> Any:
    """A workload's config dataclass from Braket-style string hyperparameters; ``read_apart``: those the job takes
    out before (named among the choices when a name is unknown).

    Raises:
        WorkloadInputError: for an unknown name (listing the known ones) or a value of the wrong type.
    """
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    values: dict[str, Any] = {}
    for key, text in hyperparameters.items():
        if key not in fields:
            raise WorkloadInputError(
                f"Hyperparameter {key!r} is unknown; choices: {', '.join([*fields, *read_apart])}.",
                "remove it from the hyperparameters.",
            )
        kind = _kind(str(fields[key].type))
        try:
            values[key] = _convert(kind, text)
        except ValueError:
            raise WorkloadInputError(
                f"Hyperparameter {key}={text!r} is not {_KIND_WORDS[kind]}.", hyperparameter(key, _KIND_WORDS[kind]) + "."
            ) from None
    return config_class(**{**values, **overrides})


_KIND_WORDS = {"int": "a whole number", "float": "a number", "bool": "true or false", "str": "a string"}


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
        if not number.is_integer() or abs(number) >= 2**63:
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

    def held(self) -> list[tuple[Path, str]]:
        """The folders a run locks: the job's own, and the checkpoint and results folders given outside it."""
        name = self.root.name
        folders = [(self.root, f"Job folder {str(self.root)!r}")]
        for folder, what in ((self.checkpoint_dir, "Checkpoint"), (self.results_dir, "Results")):
            if not _inside(folder, self.root):
                folders.append((folder, f"{what} folder {str(folder)!r} of job {name!r}"))
        return folders


@dataclass(frozen=True)
class JobPlan:
    """A job run, checked and not yet laid out: its command, folders, hyperparameters and input channels."""

    command: list[str]
    layout: JobLayout
    hyperparameters: dict[str, str]
    channels: dict[str, Path]

    @property
    def name(self) -> str:
        return self.layout.root.name


def prepare_job(
    entry_point: str,
    *,
    job_name: str | None = None,
    hyperparameters: str | None = None,
    input_data: Sequence[str] = (),
    jobs_dir: str = "jobs",
    checkpoint_dir: str | None = None,
    results_dir: str | None = None,
) -> JobPlan:
    """Check every input; nothing is made (``lay_out`` makes the folders, under the job's lock).

    Raises:
        WorkloadInputError: for a missing entry point, a bad hyperparameter file, a missing or
            uncopyable input path, or a bad channel or job name.
    """
    command = _entry_command(entry_point)
    name = job_name or f"qbackends-job-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    if not _JOB_NAME.fullmatch(name):
        raise WorkloadInputError(
            f"Job name {name!r} is not valid: use 1-50 letters, digits and hyphens, starting and ending with a letter or digit.",
            "pass e.g. --job-name qaoa-18-nodes.",
        )
    hps = read_hyperparameters(Path(hyperparameters)) if hyperparameters else {}
    root = Path(jobs_dir) / name
    channels: dict[str, Path] = {}
    for item in input_data:
        channel, sep, given = item.partition("=")
        if not sep or not _CHANNEL.fullmatch(channel) or not given:
            raise WorkloadInputError(
                f"--input-data {item!r} is not CHANNEL=PATH (channel: 1-64 letters, digits, '.', '-', '_', "
                "starting with a letter or digit).",
                "pass e.g. --input-data input=data/graph.txt.",
            )
        if channel in channels:
            raise WorkloadInputError(
                f"--input-data {item!r}: channel {channel!r} is given twice.", "give each input channel once."
            )
        source = Path(given)
        if not source.exists():
            raise WorkloadInputError(f"--input-data {item!r}: {given!r} does not exist.", "pass an existing file or folder.")
        if _inside(root, source):
            raise WorkloadInputError(
                f"--input-data {item!r}: {given!r} holds the job's own folder {str(root)!r}; it would be copied into itself.",
                "pass a folder outside --jobs-dir, or a --jobs-dir outside it.",
            )
        _check_copyable(item, source)
        channels[channel] = source
    layout = JobLayout(
        root=root,
        input_dir=root / "input",
        checkpoint_dir=Path(checkpoint_dir) if checkpoint_dir else root / "checkpoints",
        results_dir=Path(results_dir) if results_dir else root / "results",
        hp_file=root / "hyperparameters.json",
    )
    return JobPlan(command, layout, hps, channels)


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies under it, links resolved."""
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def _check_copyable(item: str, source: Path) -> None:
    """Every entry under an input path is a file or a folder, and its links end (no loop)."""
    seen: set[tuple[int, int]] = set()
    pending = [source]
    while pending:
        path = pending.pop()
        try:
            info = path.stat()
        except OSError as exc:
            raise WorkloadInputError(
                f"--input-data {item!r}: {str(path)!r} cannot be read: {exc.strerror or exc}.",
                "remove or fix that entry (a link that loops or points nowhere), or pass another path.",
            ) from None
        if stat.S_ISDIR(info.st_mode):
            if (info.st_dev, info.st_ino) in seen:
                raise WorkloadInputError(
                    f"--input-data {item!r}: {str(path)!r} links back to a folder above it; the copy would never end.",
                    "remove that link, or pass another path.",
                )
            seen.add((info.st_dev, info.st_ino))
            try:
                pending.extend(path.iterdir())
            except OSError as exc:
                raise WorkloadInputError(
                    f"--input-data {item!r}: folder {str(path)!r} cannot be read: {exc.strerror or exc}.",
                    "make it readable, or pass another path.",
                ) from None
        elif not stat.S_ISREG(info.st_mode):
            raise WorkloadInputError(
                f"--input-data {item!r}: {str(path)!r} is not a file or a folder (a pipe, socket or device); it cannot be copied.",
                "pass only files and folders as input data.",
            )


def lay_out(plan: JobPlan) -> None:
    """Make the job's folders, write its hyperparameters, and copy its input channels (the caller holds the job's lock).

    The input folder is built beside the old one and swapped in whole: a source inside the old copy
    (``--input-data in=jobs/j/input/in``) is read before anything is removed, and a failed copy
    leaves the old input as it was.

    Raises:
        StorageError: a folder cannot be made or a copy fails, naming it.
    """
    layout = plan.layout
    try:
        for folder in (layout.root, layout.checkpoint_dir, layout.results_dir):
            folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_error(Path(exc.filename or layout.root), exc) from exc
    atomic_write_json(layout.hp_file, plan.hyperparameters)
    staging = layout.root / f".input-{os.getpid()}"
    old = layout.root / f".input-old-{os.getpid()}"
    try:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        for channel, source in plan.channels.items():
            if source.is_dir():
                shutil.copytree(source, staging / channel)
            else:
                (staging / channel).mkdir()
                shutil.copy2(source, staging / channel / source.name)
        if layout.input_dir.exists():
            layout.input_dir.rename(old)
        staging.rename(layout.input_dir)
    except (OSError, shutil.Error) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if old.exists() and not layout.input_dir.exists():
            old.rename(layout.input_dir)
        if isinstance(exc, OSError):
            raise storage_error(Path(exc.filename or staging), exc) from exc
        raise StorageError(
            f"The input data of job {plan.name!r} could not be copied: {' '.join(str(exc).split())[:300]}.",
            "check the input paths, or free space in --jobs-dir.",
            path=str(staging),
        ) from exc
    shutil.rmtree(old, ignore_errors=True)


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
    top = module.split(".")[0]  # looked for as the job's Python will (the current folder first), without running it
    spec = module_spec(top, os.getcwd())
    if spec is None or (module == top and not function):
        if problem := unrunnable(entry_point, top, spec):
            raise problem
    return [sys.executable, "-m", "qbackends.jobentry", entry_point]


def resolve_device(spec: str) -> str:
    """The device string a job gets: resolved here, so a typo stops the job before it starts. ``auto`` becomes
    the per-circuit auto device's string, which decides for each circuit the job builds; every string opens
    with ``qml.device(string.split("/")[-1])`` as Braket's example scripts do (``Backend.braket_string``).

    Raises:
        QBackendsError: for a bad or unknown string, or a backend that cannot run here.
    """
    from .devicestring import AUTO_STRING, parse
    from .screening import choose

    if parse(spec).is_auto:
        choose(spec)  # something runs here at all
        return AUTO_STRING
    return choose(spec).backend.braket_string


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of every file under ``folder``."""
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.rglob("*") if p.is_file()}


def written_since(folder: Path, before: Mapping[str, tuple[int, int]]) -> list[str]:
    """Files under ``folder`` that are new or changed since ``before`` was taken."""
    return sorted(path for path, stamp in snapshot(folder).items() if before.get(path) != stamp)


@dataclass(frozen=True)
class JobOutcome:
    """How a job ended: its exit code (negative: the signal that ended it), the signal passed on to it
    from ``qbackends job run``, if one was, and how many of its processes outlived it and were ended."""

    code: int
    forwarded: int | None = None
    leftover: int = 0


def check_exit(outcome: JobOutcome, job_name: str, runner: str = "qbackends job run") -> None:
    """Raise ``JobFailedError`` for a job that failed, was ended by a signal, or was stopped from outside (``runner``
    names what received the signal)."""
    if outcome.forwarded is not None:
        name = signal.Signals(outcome.forwarded).name
        raise JobFailedError(
            f"job {job_name!r} was stopped: {runner} received {name} and passed it on to the job's processes.",
            "run it again to continue; its checkpoints are kept.",
            exit_code=128 + outcome.forwarded,
        )
    code = outcome.code
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
        return report(exc)


FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE_SECONDS = 10.0  # after a passed-on signal (and for processes left behind), before SIGKILL


def job_environment(layout: JobLayout, device: str, job_name: str) -> dict[str, str]:
    """The ``AMZN_BRAKET_*`` variables of a local job run, paths made absolute."""
    return {
        DEVICE: device,
        HP_FILE: str(layout.hp_file.resolve()),
        INPUT_DIR: str(layout.input_dir.resolve()),
        CHECKPOINT_DIR: str(layout.checkpoint_dir.resolve()),
        RESULTS_DIR: str(layout.results_dir.resolve()),
        JOB_NAME: job_name,
    }


def run_job(
    command: Sequence[str], layout: JobLayout, device: str, job_name: str, extra_env: Mapping[str, str] | None = None
) -> JobOutcome:
    """Run the job's command with the Braket environment of ``layout``, streaming its output (``run_processes``)."""
    env = {**os.environ, **(extra_env or {}), **job_environment(layout, device, job_name)}
    return run_processes([(command, env)])


def run_processes(commands: Sequence[tuple[Sequence[str], Mapping[str, str]]], cwd: Path | None = None) -> JobOutcome:
    """Run a job's processes (one, or one per data-parallel worker), each with its environment, streaming their output.

    Each runs in a process group of its own, which ends with it: processes it started and left running are
    ended when it exits. SIGINT, SIGTERM or SIGHUP sent to this runner (Ctrl-C, ``docker stop``, Slurm) are
    passed on to every group; a second one kills them. When one process fails, the others are stopped
    (SIGTERM, then SIGKILL after ``GRACE_SECONDS``): its peers would wait for it for ever. The outcome's code
    is the first failure's, else 0.
    """
    forwarded: list[int] = []
    processes = [subprocess.Popen(list(c), env=dict(e), cwd=cwd, start_new_session=True) for c, e in commands]
    codes: dict[int, int] = {}
    failed: int | None = None
    kill_at: float | None = None

    def signal_all(signum: int) -> None:
        for i, process in enumerate(processes):
            if i not in codes:
                _signal_group(process.pid, signum)

    def pass_on(signum: int, _frame: Any) -> None:
        if forwarded:  # a second signal: no more grace
            signal_all(signal.SIGKILL)
        forwarded.append(signum)
        signal_all(signum)

    previous = {sig: signal.signal(sig, pass_on) for sig in FORWARDED}
    try:
        while len(codes) < len(processes):
            for i, process in enumerate(processes):
                code = None if i in codes else _wait(process, 0.05)
                if code is None:
                    continue
                codes[i] = code
                if code != 0 and failed is None:
                    failed = code
                    if len(codes) < len(processes):  # stop its peers
                        signal_all(signal.SIGTERM)
                        kill_at = time.monotonic() + GRACE_SECONDS
            if forwarded and kill_at is None:
                kill_at = time.monotonic() + GRACE_SECONDS
            if kill_at is not None and time.monotonic() > kill_at:
                signal_all(signal.SIGKILL)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    leftover = sum(_end_group(process.pid) for process in processes)
    return JobOutcome(failed if failed is not None else 0, forwarded[0] if forwarded else None, leftover)


def _wait(process: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The process's exit code, waiting up to ``timeout`` seconds; None while it runs."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def _signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to a process group; False when none of its processes is left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    return True


def _end_group(pgid: int) -> int:
    """End what is left of the job's process group (SIGTERM, then SIGKILL); how many processes were left."""
    left = _group_members(pgid)
    if not left:
        return 0
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while _group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    while _group_members(pgid) and time.monotonic() < deadline + GRACE_SECONDS:
        time.sleep(0.05)
    return len(left)


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group, from /proc; where there is no /proc, whether any signal lands."""
    proc = Path("/proc")
    if not proc.is_dir():
        return [pgid] if _signal_group(pgid, 0) else []
    members = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members
