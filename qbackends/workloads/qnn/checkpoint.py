"""QNN checkpoints: saved atomically after every epoch, resumed only into the very same run."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import checkpoint as run_checkpoint
from ...checkpoint import Inputs, RunIdentity, check_seal, corrupt, further_along, seal, unreadable
from ...fixes import Spell
from ...storage import atomic_write

if TYPE_CHECKING:
    from .config import Config

FILE = "qnn-checkpoint.pt"


def save(
    path: Path,
    config: Config,
    identity: RunIdentity,
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
        "run": identity.record(),
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
    state["seal"] = seal(progress_of(state))
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write(path, lambda fh: fh.write(buffer.getvalue()))


def progress_of(state: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint's seal covers: all but its settings, its run record and the seal itself."""
    return {k: v for k, v in state.items() if k not in ("config", "run", "seal")}


def history_from(state: dict[str, Any]) -> list[dict[str, Any]]:
    keys = ("epoch", "train_loss", "test_loss", "test_accuracy", "lr", "train_seconds")
    return [dict(zip(keys, row, strict=True)) for row in state["history"]]


# Settings a resumed run may change: the epoch budget and when to stop early.
GROWABLE = ("epochs", "patience")
DATA = Inputs("data", "the data differ (the file's contents changed)")


def identity(config: Config, features: np.ndarray, labels: np.ndarray, device: str, workers: int) -> RunIdentity:
    """This run: its settings (not the epoch budget nor the patience), the data it trains on by content (a file
    replaced under the same name is another run), the device and the workers."""
    settings = {k: v for k, v in asdict(config).items() if k not in GROWABLE}
    data = run_checkpoint.digest(np.ascontiguousarray(features).tobytes(), np.ascontiguousarray(labels).tobytes())
    return RunIdentity(settings, data, device, DATA, workers)


def read(path: Path, spell: Spell) -> dict[str, Any]:
    """A checkpoint's contents, or a typed error when it is not one (``spell`` words the fix)."""
    import torch

    try:
        state = torch.load(path, weights_only=True)  # never unpickles arbitrary objects
    except Exception as exc:
        raise unreadable(path, exc, spell) from exc
    return run_checkpoint.saved_run(path, state, spell)


def check(path: Path, state: dict[str, Any], config: Config, run: RunIdentity, spell: Spell) -> None:
    """A checkpoint of exactly this run, checked field by field; anything else is refused by name (``spell`` words
    the fix)."""
    run_checkpoint.check(path, state, run, spell)
    check_state(path, state, config, spell)


def check_state(path: Path, state: dict[str, Any], config: Config, spell: Spell) -> None:
    import torch

    epoch = state.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
        raise corrupt(path, f"epoch {epoch!r} is not a whole number of 1 or more", spell)
    history = state.get("history")
    if not isinstance(history, list) or len(history) != epoch or any(not isinstance(r, list) or len(r) != 6 for r in history):
        raise corrupt(path, f"its history does not hold {epoch} epochs of 6 numbers", spell)
    weights = state.get("model")
    if not isinstance(weights, dict) or not all(isinstance(t, torch.Tensor) for t in weights.values()):
        raise corrupt(path, "the model's weights are missing", spell)
    if not all(bool(torch.isfinite(t).all()) for t in weights.values()):
        raise corrupt(path, "a model weight is not finite", spell)
    check_seal(path, state, progress_of(state), spell)
    if epoch > config.epochs:  # a sound checkpoint, further along than asked
        raise further_along(path, epoch, config.epochs, "epochs", spell)
