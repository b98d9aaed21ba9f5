"""Running the QNN: one process, or local workers through torch's elastic launcher (what torchrun runs); the job entry point."""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import PeerLostError, QBackendsError, WorkloadInputError
from ...fixes import Spell, hyperparameter, option
from ...probe import cpu_cores
from ...scoped import environment
from ...storage import atomic_write_json
from .config import RESULTS_FILE, Config

if TYPE_CHECKING:
    from .training import Context


def worker(
    config_json: dict[str, Any],
    device: str | None,
    results_dir: str,
    checkpoint_dir: str | None,
    resume: bool,
    quiet: bool,
    spell: Spell = option,
) -> dict[str, Any]:
    """What each process runs (under torchrun or ``elastic_launch``); rank 0 writes the results."""
    from .training import init_distributed, train

    config = Config(**config_json)
    ctx = init_distributed()
    _share_cores(ctx)
    bars = _Progress(config, quiet or not ctx.main)
    try:
        result = train(
            config,
            device,
            checkpoint_dir=checkpoint_dir,
            resume=resume,
            context=ctx,
            on_batch=bars.batch,
            on_epoch=bars.epoch,
            spell=spell,
        )
    finally:
        bars.close()
    if ctx.main:
        atomic_write_json(Path(results_dir) / RESULTS_FILE, result)
    if ctx.distributed:
        import torch.distributed as dist

        dist.destroy_process_group()
    return result


def _share_cores(ctx: Context) -> None:
    """Give each local worker its own cores (no migrations, no oversubscription)."""
    import torch

    from ...launchers import current

    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", ctx.world))
    launch = current()
    bound = launch is not None and launch.launcher != "torchrun" and 0 < len(cores) < (os.cpu_count() or 0)
    per = max(1, len(cores) // local_world) if cores else max(1, (os.cpu_count() or 1) // local_world)
    if bound:  # srun (or mpiexec) bound this rank to cores of its own already: all of them are its share
        per = len(cores)
    elif ctx.distributed and len(cores) >= local_world:
        mine = cores[ctx.local_rank * per : (ctx.local_rank + 1) * per]
        os.sched_setaffinity(0, mine)
    # The model's classical layers are a few thousand multiply-adds a row: torch's own thread pool only wakes
    # and waits. 4 wires, 2 cores, samples/s with one torch thread against two: 10,900 vs 8,600 quiet; beside
    # a busy process 8,500 vs 8,200, and 8,800 vs 3,000 with OMP_WAIT_POLICY=ACTIVE (benchmarks/
    # test_bench_contention.py). The cores go to the simulator's kernels.
    torch.set_num_threads(1)
    try:  # batched.qubit's and fused.qubit's kernels: this worker's share
        import qbackends_native
    except ImportError:  # not installed: nothing to share out
        return
    qbackends_native.fused.set_num_threads(per)


class _Progress:
    def __init__(self, config: Config, disabled: bool) -> None:
        from tqdm import tqdm

        self.epochs = tqdm(total=config.epochs, desc="epochs", unit="epoch", disable=disabled, position=0)
        self.batches = tqdm(desc="batches", unit="batch", disable=disabled, position=1, leave=False)
        self.current = 0

    def batch(self, epoch: int, batch: int, loss: float) -> None:
        if epoch != self.current:
            self.current = epoch
            self.batches.reset()
        self.batches.update(1)
        self.batches.set_postfix(loss=f"{loss:.4f}")

    def epoch(self, epoch: int, record: dict[str, Any]) -> None:
        self.epochs.n = epoch
        self.epochs.set_postfix(loss=f"{record['train_loss']:.4f}", acc=f"{record['test_accuracy']:.3f}")

    def close(self) -> None:
        self.batches.close()
        self.epochs.close()


def launch(
    config: Config,
    device: str | None,
    workers: int,
    results_dir: str,
    checkpoint_dir: str | None,
    resume: bool,
    quiet: bool = False,
    monitor_interval: float = 0.5,
    spell: Spell = option,
) -> dict[str, Any]:
    """Train on ``workers`` local processes through torch's elastic launcher (what torchrun runs); ``spell`` words
    the fix for a setting (``option``: the CLI's; ``hyperparameter``: a hybrid job's).

    Raises:
        KeyboardInterrupt: on SIGINT or SIGTERM, once the workers are stopped.
        QBackendsError: a worker's typed error, or a worker that died, in one line.
    """
    config.validate(spell)
    args = (asdict(config), device, results_dir, checkpoint_dir, resume, quiet, spell)
    if workers == 1:
        with _peers_lost():
            return worker(*args)
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    launch_config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=workers,
        run_id=f"qbackends-qnn-{os.getpid()}",
        rdzv_backend="c10d",
        rdzv_endpoint="127.0.0.1:0",
        max_restarts=0,
        monitor_interval=monitor_interval,
        start_method="spawn",
    )
    # One OpenMP thread team per worker, sharing the cores: oversubscription stalls the all-reduce.
    workers_env = {
        "OMP_NUM_THREADS": str(max(1, cpu_cores() // workers)),  # of the cores this process may use
        "PYTHONWARNINGS": "ignore::UserWarning:multiprocessing.resource_tracker",
    }
    try:
        with _launcher_quiet(), environment(workers_env):
            results = elastic_launch(launch_config, _local_worker)(*args)
    except SignalException:  # the launcher stopped the workers; the CLI says "interrupted" once
        raise KeyboardInterrupt from None
    except ChildFailedError as exc:
        typed = _typed_failure(exc)
        if typed is not None:
            raise typed from None
        rank, failure = exc.get_first_failure()
        message = failure.message.get("message", "") if isinstance(failure.message, dict) else failure.message
        why = message or f"killed by signal {failure.signal_name()}" if failure.exitcode < 0 else message or "no error message"
        raise QBackendsError(
            f"QNN training failed: worker rank {rank} exited with code {failure.exitcode} ({why}); the other workers were stopped.",
            f"see the worker's output above; {spell.resume} to continue from the last finished epoch.",
        ) from None
    return results[0]


@contextlib.contextmanager
def _peers_lost() -> Iterator[None]:
    """Under mpiexec or srun: gloo's error for a rank that died (its sockets closed) becomes one typed line here.

    torchrun and ``--workers`` have their own launcher, which names the rank that died."""
    from ...launchers import current

    launch = current()
    if launch is None or launch.launcher == "torchrun":
        yield
        return
    try:
        yield
    except RuntimeError as exc:
        text = " ".join(str(exc).split())
        if "gloo" not in text and type(exc).__name__ not in ("DistError", "DistBackendError", "DistNetworkError"):
            raise
        why = text.rpartition("RuntimeError: ")[2].split(" This is typically")[0].split(" At: ")[0]
        why = re.sub(r"^\[[^\]]*\]\s*", "", why).rstrip(".")  # gloo's source line off
        raise PeerLostError(
            f"QNN training failed on rank {launch.rank} of {launch.world} ({launch.launcher}): another rank stopped ({why}); "
            "this rank stopped too.",
            "see the other ranks' output; rerun with --resume to continue from the last finished epoch.",
        ) from None


@contextlib.contextmanager
def _launcher_quiet() -> Iterator[None]:
    """The launcher's logging muted (errors are said in one line) and its signal handlers undone afterwards."""
    import logging

    names = [n for n in logging.root.manager.loggerDict if n.startswith("torch.distributed.elastic")]
    loggers = [logging.getLogger(n) for n in (*names, "torch.multiprocessing.spawn")]
    levels = [logger.level for logger in loggers]
    handlers = {sig: signal.getsignal(sig) for sig in _STOP_SIGNALS}
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _local_worker(*args: Any) -> dict[str, Any]:
    """``worker`` in a process ``launch`` started: an interrupt ends it quietly with code 130 (the
    launcher stops the others and the CLI says it once); a typed error is recorded for ``launch`` to
    raise, without a traceback."""
    from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

    interrupted = []

    def stop(signum: int, frame: Any) -> None:
        interrupted.append(signum)
        for sig in _STOP_SIGNALS:  # one interrupt is enough: no second one inside the cleanup
            signal.signal(sig, signal.SIG_IGN)
        if _unraisable(frame):  # Python would print the interrupt as ignored, with its traceback, and run on
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        raise KeyboardInterrupt

    for sig in _STOP_SIGNALS:
        signal.signal(sig, stop)
    try:
        return worker(*args)
    except BaseException as exc:
        if interrupted:  # at once: torch's threads for a lost peer abort the interpreter's teardown, loudly
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        if not isinstance(exc, QBackendsError):
            raise
        ErrorHandler().record_exception(exc)
        raise SystemExit(2) from None
    finally:  # a stop that arrives while the process exits (atexit callbacks) ends it at once, quietly
        for sig in _STOP_SIGNALS:
            signal.signal(sig, lambda signum, _frame: os._exit(128 + signum))


def _unraisable(frame: Any) -> bool:
    """Whether an exception raised at ``frame`` would be ignored, not raised: it runs inside a garbage collector
    callback (jax registers one) or a ``__del__``."""
    callbacks = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        if frame.f_code in callbacks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _typed_failure(exc: Any) -> QBackendsError | None:
    """The first typed error a worker recorded (``_local_worker``), rebuilt from its recorded text."""
    from ... import errors

    for _, failure in sorted(exc.failures.items()):
        text = failure.message.get("message", "") if isinstance(failure.message, dict) else failure.message
        name, _, rest = str(text).partition(": ")
        kind = getattr(errors, name, None)
        if isinstance(kind, type) and issubclass(kind, QBackendsError):
            message, _, fix = rest.rpartition(" Fix: ") if " Fix: " in rest else (rest, "", "")
            return kind(message, fix)
    return None


def main() -> int:
    """Entry point for a hybrid job: device, hyperparameters, data, checkpoints and results from ``AMZN_BRAKET_*``."""
    from ...hybridjob import JobEnvironment, config_from_hyperparameters, save_job_result

    env = JobEnvironment.from_env()
    hps = dict(env.hyperparameters)
    workers = _workers(hps.pop("workers", "1"))
    data = _channel_file(env.input_dir) if env.input_dir else None
    config = config_from_hyperparameters(Config, hps, read_apart=("workers",), **({"data": str(data)} if data else {}))
    config.validate(hyperparameter)
    results_dir = str(env.results_dir or Path("results/qnn"))
    checkpoint_dir = str(env.checkpoint_dir) if env.checkpoint_dir else None
    result = launch(
        config,
        env.device,
        workers,
        results_dir,
        checkpoint_dir,
        resume=checkpoint_dir is not None,
        quiet=True,
        spell=hyperparameter,
    )
    save_job_result(result, env)
    print(
        f"qnn: held-out accuracy {result['test_accuracy']:.3f} (majority class {result['majority_class_rate']:.3f}) on {result['device']}"
    )
    warning = one_class_warning(result, hyperparameter)
    if warning:
        print(f"qnn: {warning}", file=sys.stderr)
    return 0


def _workers(text: str) -> int:
    """The ``workers`` hyperparameter: a whole number of local processes, 1 or more."""
    try:
        number = float(text)  # "2" or "2.0", as Braket passes numbers
    except ValueError:
        number = 0.0
    if not number.is_integer() or number < 1:
        raise WorkloadInputError(
            f"Hyperparameter workers={text!r} is not a whole number of local processes, 1 or more.",
            hyperparameter("workers", "1 or more") + ' (e.g. "workers": "2").',
        )
    return int(number)


def one_class_warning(result: dict[str, Any], spell: Spell = option) -> str | None:
    """What to change when the trained model predicts one class on the held-out rows, or None."""
    if not result.get("predicts_one_class"):
        return None
    accuracy, majority = result["test_accuracy"], result["majority_class_rate"]
    rate = "the majority-class rate" if abs(accuracy - majority) < 1e-12 else "the minority-class rate"
    lr = result["config"]["lr"]
    return (
        f"the model predicts one class (held-out accuracy {accuracy:.3f} = {rate}); "
        f"{spell('lr', f'{lr / 10:g}')} (a tenth of {lr:g}) or train more epochs."
    )


def _channel_file(input_dir: Path) -> Path | None:
    """The one data file under the job's input channels, if there is one."""
    files = sorted(p for p in input_dir.rglob("*") if p.is_file())
    if len(files) > 1:
        raise WorkloadInputError(
            f"The job's input channels hold {len(files)} files: {', '.join(map(str, files))}.", "pass a single CSV as input data."
        )
    return files[0] if files else None
