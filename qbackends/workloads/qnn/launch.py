"""Running the QNN: one process, or local workers through torch's elastic launcher (what torchrun runs); the job entry point."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ...errors import WorkloadInputError
from ...storage import atomic_write_json
from .training import RESULTS_FILE, Config, Context, init_distributed, train


def worker(
    config_json: dict[str, Any], device: str | None, results_dir: str, checkpoint_dir: str | None, resume: bool, quiet: bool
) -> dict[str, Any]:
    """What each process runs (under torchrun or ``elastic_launch``); rank 0 writes the results."""

    config = Config(**config_json)
    ctx = init_distributed()
    _share_cores(ctx)
    bars = _Progress(config, quiet or not ctx.main)
    try:
        result = train(
            config, device, checkpoint_dir=checkpoint_dir, resume=resume, context=ctx, on_batch=bars.batch, on_epoch=bars.epoch
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

    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", ctx.world))
    per = max(1, len(cores) // local_world) if cores else max(1, (os.cpu_count() or 1) // local_world)
    if ctx.distributed and len(cores) >= local_world:
        mine = cores[ctx.local_rank * per : (ctx.local_rank + 1) * per]
        os.sched_setaffinity(0, mine)
    torch.set_num_threads(per)
    try:  # batched.qubit's and fused.qubit's kernels: the same share
        from ...fused.threads import import_numba

        import_numba().set_num_threads(per)
    except (ImportError, ValueError):  # no numba, a NUMBA_NUM_THREADS it refuses (said when a simulator needs it), or
        pass  # fewer threads in its pool than cores here


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
) -> dict[str, Any]:
    """Train on ``workers`` local processes through torch's elastic launcher (what torchrun runs)."""
    config.validate()
    args = (asdict(config), device, results_dir, checkpoint_dir, resume, quiet)
    if workers == 1:
        return worker(*args)
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
    import logging

    # One OpenMP thread team per worker, sharing the cores: oversubscription stalls the all-reduce.
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
    # The launcher logs a failed worker with a traceback; the error below says it in one line.
    for name in ("torch.distributed.elastic", "torch.multiprocessing.spawn"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    os.environ.setdefault("PYTHONWARNINGS", "ignore::UserWarning:multiprocessing.resource_tracker")
    try:
        results = elastic_launch(launch_config, worker)(*args)
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        from ...errors import QBackendsError

        message = failure.message.get("message", "") if isinstance(failure.message, dict) else failure.message
        why = message or f"killed by signal {failure.signal_name()}" if failure.exitcode < 0 else message or "no error message"
        raise QBackendsError(
            f"QNN training failed: worker rank {rank} exited with code {failure.exitcode} ({why}); the other workers were stopped.",
            "see the worker's output above; rerun with --resume to continue from the last finished epoch.",
        ) from None
    return results[0]


def main() -> int:
    """Entry point for a hybrid job: device, hyperparameters, data, checkpoints and results from ``AMZN_BRAKET_*``."""
    from ...hybridjob import JobEnvironment, config_from_hyperparameters, save_job_result

    env = JobEnvironment.from_env()
    hps = dict(env.hyperparameters)
    workers = int(hps.pop("workers", "1"))
    data = _channel_file(env.input_dir) if env.input_dir else None
    config = config_from_hyperparameters(Config, hps, **({"data": str(data)} if data else {}))
    results_dir = str(env.results_dir or Path("results/qnn"))
    checkpoint_dir = str(env.checkpoint_dir) if env.checkpoint_dir else None
    result = launch(config, env.device, workers, results_dir, checkpoint_dir, resume=checkpoint_dir is not None, quiet=True)
    save_job_result(result, env)
    print(
        f"qnn: held-out accuracy {result['test_accuracy']:.3f} (majority class {result['majority_class_rate']:.3f}) on {result['device']}"
    )
    return 0


def _channel_file(input_dir: Path) -> Path | None:
    """The one data file under the job's input channels, if there is one."""
    files = sorted(p for p in input_dir.rglob("*") if p.is_file())
    if len(files) > 1:
        raise WorkloadInputError(
            f"The job's input channels hold {len(files)} files: {', '.join(map(str, files))}.", "pass a single CSV as input data."
        )
    return files[0] if files else None
