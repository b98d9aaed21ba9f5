"""Training the dressed QNN on Sonar: the settings, the distributed context, the loop and its timers.

Loss: margin ranking against 0 with the ±1 labels (a hinge on y·output); Adam and StepLR.
Data parallelism: DistributedDataParallel over DistributedSampler shards, all-reduced with gloo;
only rank 0 prints, checkpoints and writes results.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from ...checkpoint import corrupt, recorded_device
from ...errors import WorkloadInputError
from ...fixes import Spell, option
from ...gradients import check as check_gradient
from .. import sonar
from . import checkpoint as checkpoints
from .config import Config
from .model import build_model, layer_tape

PHASES = ("data", "classical", "quantum", "backward", "allreduce")


# ---- distributed context ----------------------------------------------------------------------


@dataclass
class Context:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    distributed: bool = False

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(timeout_s: float = 120.0) -> Context:
    """Join the process group of the run torchrun, mpiexec or srun started (``qbackends.launchers``), if any."""
    from ...launchers import adopt

    if adopt() is None:  # torch's variables (RANK, WORLD_SIZE, MASTER_ADDR...) set from the launcher's
        return Context()
    import torch.distributed as dist

    if not dist.is_initialized():
        # The model's tensors live on the CPU (the simulator takes and returns host tensors, even
        # lightning.gpu), so gradients are all-reduced with gloo; nccl would only add copies.
        dist.init_process_group("gloo", timeout=timedelta(seconds=timeout_s))
    return Context(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)), True)


# ---- training -------------------------------------------------------------------------------


@dataclass
class Timer:
    """Seconds per phase, summed over the run."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))

    def add(self, phase: str, since: float) -> float:
        now = time.perf_counter()
        self.seconds[phase] += now - since
        return now


def _seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train(
    config: Config,
    device: str | None = None,
    *,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    context: Context | None = None,
    on_batch: Callable[[int, int, float], None] | None = None,
    on_epoch: Callable[[int, dict[str, Any]], None] | None = None,
    spell: Spell = option,
) -> dict[str, Any]:
    """Train the dressed QNN; every rank returns the same results record (rank 0 also writes files).

    Args:
        config: model, data and optimiser settings.
        device: device string for ``get_device`` (None: the environment, then ``auto``).
        checkpoint_dir: where rank 0 saves a checkpoint after every epoch.
        resume: continue from the checkpoint there.
        context: the distributed context (default: from the environment torchrun sets).
        on_batch, on_epoch: progress callbacks, called on rank 0 only.
        spell: words the fix for a setting (``option``: the CLI's; ``hyperparameter``: a hybrid job's).
    """
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    from ...workloaddevices import qnn_device

    config.validate(spell)
    ctx = context or init_distributed()
    data = sonar.load(config.data)
    if config.ndata > len(data):
        raise WorkloadInputError(
            f"ndata={config.ndata} exceeds the {len(data)} rows of {data.source}.", spell("ndata", f"{len(data)} or fewer") + "."
        )
    rows = np.sort(np.random.default_rng(config.seed).permutation(len(data))[: config.ndata])
    features, labels = data.features[rows], data.labels[rows]
    train_idx, test_idx = sonar.stratified_split(labels, config.test_fraction, config.seed)
    if len(test_idx) == 0 or len(train_idx) == 0:
        raise WorkloadInputError(
            f"test_fraction={config.test_fraction} of {config.ndata} rows leaves "
            f"{len(train_idx)} to train on and {len(test_idx)} held out.",
            f"{spell('ndata', 'more rows')}, or {spell('test_fraction', 'one that leaves rows on both sides')}.",
        )
    x_train, y_train = torch.tensor(features[train_idx]), torch.tensor(labels[train_idx])
    x_test, y_test = torch.tensor(features[test_idx]), torch.tensor(labels[test_idx])

    if config.batch_size % ctx.world and not config.scale_lr:
        raise WorkloadInputError(
            f"batch_size={config.batch_size} does not split evenly over {ctx.world} workers.",
            f"{spell('batch_size', f'a multiple of {ctx.world}')}, or {spell('scale_lr', 'true')} to keep the per-worker batch.",
        )
    local_batch = config.batch_size if config.scale_lr else config.batch_size // ctx.world
    lr = config.lr * ctx.world if config.scale_lr else config.lr

    checkpoint = Path(checkpoint_dir) / checkpoints.FILE if checkpoint_dir else None
    state = checkpoints.read(checkpoint, spell) if resume and checkpoint and checkpoint.exists() else None
    _seed_everything(config.seed)
    steps = config.epochs * math.ceil(len(train_idx) / ctx.world / local_batch)  # minibatches, for auto
    qdev, diff_method = qnn_device(device, config.nwires, config.diff_method, resumed_on=recorded_device(state), steps=steps)
    check_gradient(qdev, layer_tape(config.nwires, diff_method), diff_method, "torch", spell)
    model = build_model(features.shape[1], config.nwires, qdev, diff_method)
    device_name = _settled(qdev, model, config.nwires, local_batch)
    advice = workers_advice(device_name, config.nwires, int(os.environ.get("LOCAL_WORLD_SIZE", ctx.world)), spell)
    if advice and ctx.main:
        logging.getLogger("qbackends").warning("qbackends: %s", advice)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=config.gamma)
    loss_fn = torch.nn.MarginRankingLoss(margin=config.margin)

    identity = checkpoints.identity(config, features, labels, device_name, ctx.world)
    history: list[dict[str, Any]] = []
    start_epoch, best, since_best = 1, -1.0, 0
    if state is not None and checkpoint is not None:
        checkpoints.check(checkpoint, state, config, identity, spell)
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            torch.set_rng_state(state["torch_rng"])
            start_epoch, history = int(state["epoch"]) + 1, checkpoints.history_from(state)
            best, since_best = float(state["best"]), int(state["since_best"])
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:  # shapes, types, missing entries
            raise corrupt(checkpoint, " ".join(str(exc).split())[:300], spell) from exc

    timer = Timer()
    allreduce = _AllReduceTimer()
    quantum = _ForwardTimer(model.quantum)
    net: Any = model
    if ctx.distributed:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(model)
        net.register_comm_hook(None, allreduce.hook)
    sampler: DistributedSampler[Any] = DistributedSampler(
        TensorDataset(x_train, y_train), num_replicas=ctx.world, rank=ctx.rank, shuffle=True, seed=config.seed
    )
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=local_batch, sampler=sampler)
    stopped_early = False
    for epoch in range(start_epoch, config.epochs + 1):
        sampler.set_epoch(epoch)
        net.train()
        epoch_loss, seen = 0.0, 0
        tick = epoch_start = time.perf_counter()
        for batch, (xb, yb) in enumerate(loader, start=1):
            tick = timer.add("data", tick)
            optimizer.zero_grad()
            quantum.reset()
            out = net(xb)
            tick = timer.add("classical", tick)
            timer.seconds["classical"] -= quantum.seconds
            timer.seconds["quantum"] += quantum.seconds
            loss = loss_fn(out, torch.zeros_like(out), yb)
            allreduce.reset()
            loss.backward()
            optimizer.step()
            tick = timer.add("backward", tick)
            timer.seconds["allreduce"] += allreduce.seconds
            timer.seconds["backward"] -= allreduce.seconds
            epoch_loss += loss.item() * len(yb)
            seen += len(yb)
            if ctx.main and on_batch is not None:
                on_batch(epoch, batch, loss.item())
            tick = time.perf_counter()
        scheduler.step()
        epoch_seconds = time.perf_counter() - epoch_start
        train_loss = _global_mean(epoch_loss, seen, ctx)
        accuracy, test_loss = evaluate(model, loss_fn, x_test, y_test, ctx)
        history.append(
            {
                "epoch": epoch,
                "train_loss": train_loss,
                "test_loss": test_loss,
                "test_accuracy": accuracy,
                "lr": scheduler.get_last_lr()[0],
                "train_seconds": epoch_seconds,
            }
        )
        _check_finite(epoch, config, epoch - 1 if checkpoint is not None else 0, train_loss, test_loss, model, optimizer, spell)
        if accuracy > best:
            best, since_best = accuracy, 0
        else:
            since_best += 1
        if ctx.main and checkpoint is not None:
            checkpoints.save(checkpoint, config, identity, model, optimizer, scheduler, epoch, history, best, since_best)
        if ctx.main and on_epoch is not None:
            on_epoch(epoch, history[-1])
        if config.patience is not None and since_best >= config.patience:
            stopped_early = True
            break
    if ctx.distributed:
        dist.barrier()
    majority = float(max(np.mean(labels[test_idx] > 0), np.mean(labels[test_idx] < 0)))
    with torch.no_grad():
        one_class = len(torch.unique(model(x_test) > 0)) == 1
    return {
        "config": asdict(config),
        "device": device_name,
        "workers": ctx.world,
        "per_worker_batch": local_batch,
        "learning_rate": lr,
        "history": history,
        "test_accuracy": history[-1]["test_accuracy"] if history else None,
        "best_test_accuracy": best,
        "majority_class_rate": majority,
        "predicts_one_class": one_class,
        "stopped_early": stopped_early,
        "train_rows": len(train_idx),
        "test_rows": len(test_idx),
        "phase_seconds": dict(timer.seconds),
        "samples_per_second": _throughput(history, len(train_idx)),
        "parameters": {k: v.detach().reshape(-1).tolist() for k, v in model.state_dict().items()},
    }


def _check_finite(
    epoch: int, config: Config, saved: int, train_loss: float, test_loss: float, model: Any, optimizer: Any, spell: Spell
) -> None:
    """A diverged run stops before anything non-finite is saved; ``saved`` is the last checkpointed epoch (0: none);
    ``spell`` words the fix."""
    import torch

    moments = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    if not math.isfinite(train_loss):
        what = f"the training loss is {train_loss}"
    elif not math.isfinite(test_loss):
        what = f"the held-out loss is {test_loss}"
    elif not all(bool(torch.isfinite(t).all()) for t in [*model.state_dict().values(), *moments]):
        what = "a weight or an optimizer moment is not finite"
    else:
        return
    kept = f"; the checkpoint of epoch {saved} is kept" if saved else ""
    raise WorkloadInputError(
        f"QNN training diverged in epoch {epoch}: {what}. Nothing of epoch {epoch} was saved{kept}.",
        f"{spell('lr', f'{config.lr / 10:g}')} (it is {config.lr:g}), or {spell('margin', 'a smaller value')} "
        f"(it is {config.margin:g}), and train again.",
    )


def _settled(device: Any, model: Any, nwires: int, batch: int) -> str:
    """The backend that runs the quantum layer: under ``auto``, decided now for a minibatch (its compiled path
    traces one), so a checkpoint records it and a resumed run continues on it."""
    from ...autodevice import running_name

    plan = getattr(model.quantum, "plan", None)
    if plan is not None:
        plan(nwires, batch)
    return running_name(device)


def _throughput(history: list[dict[str, Any]], rows: int) -> float | None:
    """Training samples per second over all workers, leaving out the first (warm-up) epoch when there are more."""
    timed = [h["train_seconds"] for h in history if "train_seconds" in h]
    timed = timed[1:] if len(timed) > 1 else timed
    return rows * len(timed) / sum(timed) if timed and sum(timed) > 0 else None


class _ForwardTimer:
    """Seconds spent in a module's forward, through forward hooks (works under DDP too)."""

    def __init__(self, module: Any) -> None:
        self.seconds, self._start = 0.0, 0.0
        module.register_forward_pre_hook(self._before)
        module.register_forward_hook(self._after)

    def reset(self) -> None:
        self.seconds = 0.0

    def _before(self, *_: Any) -> None:
        self._start = time.perf_counter()

    def _after(self, *_: Any) -> None:
        self.seconds += time.perf_counter() - self._start


class _AllReduceTimer:
    """A DDP communication hook: gloo/nccl all-reduce of each gradient bucket, timed until done."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def reset(self) -> None:
        self.seconds = 0.0

    def hook(self, state, bucket):  # type: ignore[no-untyped-def]  # DDP checks these annotations: leave them out
        import torch.distributed as dist

        start = time.perf_counter()
        tensor = bucket.buffer().div_(dist.get_world_size())
        fut = dist.all_reduce(tensor, async_op=True).get_future()

        def done(f: Any) -> Any:
            self.seconds += time.perf_counter() - start
            return f.value()[0]

        return fut.then(done)


def evaluate(model: Any, loss_fn: Any, x: Any, y: Any, ctx: Context) -> tuple[float, float]:
    """Held-out accuracy and loss; each worker takes a shard, the counts are summed."""
    import torch

    shard = slice(ctx.rank, None, ctx.world)
    with torch.no_grad():
        out = model(x[shard]) if len(x[shard]) else torch.zeros(0, dtype=torch.float64)
        correct = float((torch.sign(out) == y[shard]).sum())
        loss = float(loss_fn(out, torch.zeros_like(out), y[shard]) * len(out)) if len(out) else 0.0
    totals = _sum([correct, loss, float(len(out))], ctx)
    return totals[0] / totals[2], totals[1] / totals[2]


def _global_mean(total: float, count: int, ctx: Context) -> float:
    s = _sum([total, float(count)], ctx)
    return s[0] / s[1]


def _sum(values: list[float], ctx: Context) -> list[float]:
    if not ctx.distributed:
        return values
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor)
    return tensor.tolist()


# `qbackends run qnn` on batched.qubit, 2 cores, 3 epochs (2 at 16 wires; docs/benchmarks.md):
# training samples/s with 1 and 2 local workers.
WORKERS_MEASURED = "11,800 vs 4,600 samples/s at 4 wires, 5,800 vs 4,600 at 8, 1,450 vs 1,200 at 12, 69 vs 42 at 16"


def workers_advice(device_name: str, wires: int, local_workers: int, spell: Spell = option) -> str | None:
    """Why more local worker processes will not speed this QNN run up, or None when they may (``spell`` words the fix)."""
    if local_workers > 1 and device_name == "qbackends.batched.qubit":
        fix = spell("workers", "1")
        return (
            f"{local_workers} local workers will not train faster than one on batched.qubit at {wires} wires: one process "
            "already runs the whole minibatch in one call (on every core once the batch holds 2^14 amplitudes), so "
            "more processes on this machine only split it and add an all-reduce per step (1 vs 2 workers on 2 cores: "
            f"{WORKERS_MEASURED}). {fix[0].upper() + fix[1:]}; more processes pay where they bring more cores (torchrun "
            "across machines) or with a per-sample backend such as lightning.qubit."
        )
    return None
