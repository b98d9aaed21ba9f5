"""The dressed quantum neural network on Sonar, trained on one process or many (torch.distributed).

Model: Linear(features, nwires) -> (sigmoid(x) - 0.5)·2π -> TorchLayer(AngleEmbedding; two blocks of
Rot on every wire and CRot at ranges 1 and 3; a final Rot on wire 0; <Z0>; adjoint) -> Linear(1, 1).
Loss: margin ranking against 0 with the ±1 labels (a hinge on y·output); Adam and StepLR.

Data parallelism: DistributedDataParallel over DistributedSampler shards, all-reduced with gloo (the
model's tensors live on the host, even with lightning.gpu); only rank 0 prints, checkpoints and writes results. By default the global
batch stays fixed (each of N workers takes batch/N); ``scale_lr`` keeps the per-worker batch and
multiplies the learning rate by N instead.
"""

from __future__ import annotations

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

from ..errors import WorkloadInputError
from ..storage import atomic_write, atomic_write_json
from . import sonar

CHECKPOINT_FILE = "qnn-checkpoint.pt"
RESULTS_FILE = "qnn-results.json"
RANGES = (1, 3)
PHASES = ("data", "classical", "quantum", "backward", "allreduce")


@dataclass(frozen=True)
class Config:
    """Everything that determines a training run."""

    nwires: int = 6
    ndata: int = 208
    batch_size: int = 16
    epochs: int = 5
    lr: float = 0.1
    gamma: float = 0.99
    margin: float = 0.1
    seed: int = 1967
    test_fraction: float = 0.25
    patience: int | None = None
    scale_lr: bool = False
    diff_method: str = "adjoint"
    data: str | None = None

    def validate(self) -> None:
        checks = [
            (self.nwires >= 1, f"nwires={self.nwires} must be at least 1", "pass --nwires 1 or more"),
            (self.batch_size >= 1, f"batch_size={self.batch_size} must be at least 1", "pass --batch-size 1 or more"),
            (self.epochs >= 1, f"epochs={self.epochs} must be at least 1", "pass --epochs 1 or more"),
            (0 < self.test_fraction < 1, f"test_fraction={self.test_fraction} must be in (0, 1)", "pass e.g. 0.25"),
            (self.lr > 0, f"lr={self.lr} must be positive", "pass e.g. --lr 0.1"),
            (self.ndata >= 4, f"ndata={self.ndata} is too small to split", "pass --ndata 4 or more"),
        ]
        for ok, message, fix in checks:
            if not ok:
                raise WorkloadInputError(message + ".", fix + ".")


# ---- the model ------------------------------------------------------------------------------


def quantum_layer(nwires: int, device: Any, diff_method: str = "adjoint") -> Any:
    """The TorchLayer: AngleEmbedding, two entangling blocks, a final Rot on wire 0, <Z0>."""
    import pennylane as qml

    wires = list(range(nwires))

    @qml.qnode(device, interface="torch", diff_method=diff_method)
    def circuit(inputs: Any, block_rot: Any, block_crot: Any, final_rot: Any) -> Any:
        qml.AngleEmbedding(inputs, wires=wires)
        for block, distance in enumerate(RANGES):
            for w in wires:
                qml.Rot(*block_rot[block, w], wires=w)
            if nwires > 1:
                step = distance % nwires or 1
                for w in wires:
                    qml.CRot(*block_crot[block, w], wires=[w, (w + step) % nwires])
        qml.Rot(*final_rot, wires=0)
        return qml.expval(qml.PauliZ(0))

    shapes = {"block_rot": (len(RANGES), nwires, 3), "block_crot": (len(RANGES), nwires, 3), "final_rot": (3,)}
    if getattr(device, "name", None) == "qbackends.batched.qubit":  # one compiled call per minibatch
        from ..batched.layer import TorchLayer

        return TorchLayer(circuit, shapes)
    return qml.qnn.TorchLayer(circuit, shapes)


def build_model(nfeatures: int, nwires: int, device: Any, diff_method: str = "adjoint") -> Any:
    import torch

    class DressedQNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pre = torch.nn.Linear(nfeatures, nwires)
            self.quantum = quantum_layer(nwires, device, diff_method)
            self.post = torch.nn.Linear(1, 1)

        def encode(self, x: Any) -> Any:
            return (torch.sigmoid(self.pre(x)) - 0.5) * 2 * math.pi

        def forward(self, x: Any) -> Any:
            return self.post(self.quantum(self.encode(x)).reshape(-1, 1)).reshape(-1)

    return DressedQNN().double()


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
    """Join the process group torchrun set up (RANK, WORLD_SIZE, MASTER_ADDR...), if any."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
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
) -> dict[str, Any]:
    """Train the dressed QNN; every rank returns the same results record (rank 0 also writes files).

    Args:
        config: model, data and optimiser settings.
        device: device string for ``get_device`` (None: the environment, then ``auto``).
        checkpoint_dir: where rank 0 saves a checkpoint after every epoch.
        resume: continue from the checkpoint there.
        context: the distributed context (default: from the environment torchrun sets).
        on_batch, on_epoch: progress callbacks, called on rank 0 only.
    """
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    from ..policy import qnn_device

    config.validate()
    ctx = context or init_distributed()
    data = sonar.load(config.data)
    if config.ndata > len(data):
        raise WorkloadInputError(
            f"ndata={config.ndata} exceeds the {len(data)} rows of {data.source}.", f"pass --ndata {len(data)} or fewer."
        )
    rows = np.sort(np.random.default_rng(config.seed).permutation(len(data))[: config.ndata])
    features, labels = data.features[rows], data.labels[rows]
    train_idx, test_idx = sonar.stratified_split(labels, config.test_fraction, config.seed)
    if len(test_idx) == 0 or len(train_idx) == 0:
        raise WorkloadInputError(
            f"test_fraction={config.test_fraction} of {config.ndata} rows leaves "
            f"{len(train_idx)} to train on and {len(test_idx)} held out.",
            "use more rows (--ndata) or a test fraction that leaves rows on both sides.",
        )
    x_train, y_train = torch.tensor(features[train_idx]), torch.tensor(labels[train_idx])
    x_test, y_test = torch.tensor(features[test_idx]), torch.tensor(labels[test_idx])

    if config.batch_size % ctx.world and not config.scale_lr:
        raise WorkloadInputError(
            f"batch_size={config.batch_size} does not split evenly over {ctx.world} workers.",
            f"pass a batch size divisible by {ctx.world}, or --scale-lr to keep the per-worker batch.",
        )
    local_batch = config.batch_size if config.scale_lr else config.batch_size // ctx.world
    lr = config.lr * ctx.world if config.scale_lr else config.lr

    _seed_everything(config.seed)
    qdev, diff_method = qnn_device(device, config.nwires, config.diff_method)
    model = build_model(features.shape[1], config.nwires, qdev, diff_method)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=config.gamma)
    loss_fn = torch.nn.MarginRankingLoss(margin=config.margin)

    checkpoint = Path(checkpoint_dir) / CHECKPOINT_FILE if checkpoint_dir else None
    identity = {"data": _digest(features, labels), "device": qdev.name, "workers": str(ctx.world)}
    state = _load_checkpoint(checkpoint, config, identity) if resume and checkpoint and checkpoint.exists() else None
    history: list[dict[str, Any]] = []
    start_epoch, best, since_best = 1, -1.0, 0
    if state is not None:
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            torch.set_rng_state(state["torch_rng"])
            start_epoch, history = int(state["epoch"]) + 1, _history_from(state)
            best, since_best = float(state["best"]), int(state["since_best"])
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:  # shapes, types, missing entries
            raise WorkloadInputError(
                f"Checkpoint {str(checkpoint)!r} is corrupt: {' '.join(str(exc).split())[:300]}.", "remove it to start over."
            ) from exc

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
        if accuracy > best:
            best, since_best = accuracy, 0
        else:
            since_best += 1
        if ctx.main and checkpoint is not None:
            _save_checkpoint(checkpoint, config, identity, model, optimizer, scheduler, epoch, history, best, since_best)
        if ctx.main and on_epoch is not None:
            on_epoch(epoch, history[-1])
        if config.patience is not None and since_best >= config.patience:
            stopped_early = True
            break
    if ctx.distributed:
        dist.barrier()
    majority = float(max(np.mean(labels[test_idx] > 0), np.mean(labels[test_idx] < 0)))
    return {
        "config": asdict(config),
        "device": qdev.name,
        "workers": ctx.world,
        "per_worker_batch": local_batch,
        "learning_rate": lr,
        "history": history,
        "test_accuracy": history[-1]["test_accuracy"] if history else None,
        "best_test_accuracy": best,
        "majority_class_rate": majority,
        "stopped_early": stopped_early,
        "train_rows": len(train_idx),
        "test_rows": len(test_idx),
        "phase_seconds": dict(timer.seconds),
        "samples_per_second": _throughput(history, len(train_idx)),
        "parameters": {k: v.detach().reshape(-1).tolist() for k, v in model.state_dict().items()},
    }


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


def _save_checkpoint(
    path: Path,
    config: Config,
    identity: dict[str, str],
    model: Any,
    optimizer: Any,
    scheduler: Any,
    epoch: int,
    history: list[dict[str, Any]],
    best: float,
    since_best: int,
) -> None:
    import io

    import torch

    state = {
        "config": asdict(config),
        "run": identity,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": epoch,
        "torch_rng": torch.get_rng_state(),
        "history": [
            [h["epoch"], h["train_loss"], h["test_loss"], h["test_accuracy"], h["lr"], h["train_seconds"]] for h in history
        ],
        "best": best,
        "since_best": since_best,
    }
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write(path, lambda fh: fh.write(buffer.getvalue()))


def _history_from(state: dict[str, Any]) -> list[dict[str, Any]]:
    keys = ("epoch", "train_loss", "test_loss", "test_accuracy", "lr", "train_seconds")
    return [dict(zip(keys, row, strict=True)) for row in state["history"]]


def _same_run(saved: Any, config: Config) -> bool:
    """A checkpoint continues a run of the same settings; only the epoch budget may grow."""
    ignored = ("epochs", "patience")
    current = {k: v for k, v in asdict(config).items() if k not in ignored}
    return isinstance(saved, dict) and {k: v for k, v in saved.items() if k not in ignored} == current


def _digest(features: np.ndarray, labels: np.ndarray) -> str:
    """The data a run trains on, by content: a file replaced under the same name is another run."""
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(features).tobytes() + np.ascontiguousarray(labels).tobytes()).hexdigest()


_IDENTITY_WORDS = {
    "data": "the data differ",
    "device": "it was made on another device",
    "workers": "it had another number of workers",
}


def _load_checkpoint(path: Path, config: Config, identity: dict[str, str]) -> dict[str, Any]:
    """A checkpoint of exactly this run, checked field by field; anything else is refused by name."""
    import torch

    try:
        state = torch.load(path, weights_only=True)  # never unpickles arbitrary objects
        recorded = state["run"]
    except Exception as exc:
        raise WorkloadInputError(f"Checkpoint {str(path)!r} is unreadable: {exc}.", "remove it to start over.") from exc
    if not _same_run(state.get("config"), config):
        raise WorkloadInputError(
            f"Checkpoint {str(path)!r} is of another configuration ({state.get('config')}).",
            "resume with the same options, or remove the checkpoint.",
        )
    differences = [
        f"{words} ({recorded.get(key)!r} then, {identity[key]!r} now)" if key != "data" else words
        for key, words in _IDENTITY_WORDS.items()
        if recorded.get(key) != identity[key]
    ]
    if differences:
        raise WorkloadInputError(
            f"Checkpoint {str(path)!r} is of another run: {'; '.join(differences)}.",
            "resume with the same data, --device and --workers, or remove the checkpoint to start over.",
        )
    _check_state(path, state, config)
    return state


def _check_state(path: Path, state: dict[str, Any], config: Config) -> None:
    import torch

    def bad(what: str) -> WorkloadInputError:
        return WorkloadInputError(f"Checkpoint {str(path)!r} is corrupt: {what}.", "remove it to start over.")

    epoch = state.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or not 1 <= epoch <= config.epochs:
        raise bad(f"epoch {epoch!r} is not a whole number from 1 to --epochs {config.epochs}")
    history = state.get("history")
    if not isinstance(history, list) or len(history) != epoch or any(not isinstance(r, list) or len(r) != 6 for r in history):
        raise bad(f"its history does not hold {epoch} epochs of 6 numbers")
    weights = state.get("model")
    if not isinstance(weights, dict) or not all(isinstance(t, torch.Tensor) for t in weights.values()):
        raise bad("the model's weights are missing")
    if not all(bool(torch.isfinite(t).all()) for t in weights.values()):
        raise bad("a model weight is not finite")


# ---- entry points ---------------------------------------------------------------------------


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
        from ..errors import QBackendsError

        message = failure.message.get("message", "") if isinstance(failure.message, dict) else failure.message
        why = message or f"killed by signal {failure.signal_name()}" if failure.exitcode < 0 else message or "no error message"
        raise QBackendsError(
            f"QNN training failed: worker rank {rank} exited with code {failure.exitcode} ({why}); the other workers were stopped.",
            "see the worker's output above; rerun with --resume to continue from the last finished epoch.",
        ) from None
    return results[0]


def main() -> int:
    """Entry point for a hybrid job: device, hyperparameters, data, checkpoints and results from ``AMZN_BRAKET_*``."""
    from ..hybridjob import JobEnvironment, config_from_hyperparameters, save_job_result

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


if __name__ == "__main__":
    from ..hybridjob import entry

    raise SystemExit(entry(main))
