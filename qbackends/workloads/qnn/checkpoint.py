"""QNN checkpoints: saved atomically after every epoch, resumed only into the very same run."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...checkpoint import further_along
from ...errors import WorkloadInputError
from ...storage import atomic_write

if TYPE_CHECKING:
    from .training import Config

FILE = "qnn-checkpoint.pt"


def save(
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


def history_from(state: dict[str, Any]) -> list[dict[str, Any]]:
    keys = ("epoch", "train_loss", "test_loss", "test_accuracy", "lr", "train_seconds")
    return [dict(zip(keys, row, strict=True)) for row in state["history"]]


def digest(features: np.ndarray, labels: np.ndarray) -> str:
    """The data a run trains on, by content: a file replaced under the same name is another run."""
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(features).tobytes() + np.ascontiguousarray(labels).tobytes()).hexdigest()


_IDENTITY_WORDS = {
    "data": "the data differ (the file's contents changed)",
    "device": "it was made on another device ({!r} then, {!r} now)",
    "workers": "it had another number of workers ({!r} then, {!r} now)",
}
# Settings a resumed run may change: the epoch budget and when to stop early.
GROWABLE = ("epochs", "patience")


def read(path: Path) -> dict[str, Any]:
    """A checkpoint's contents, or a typed error when it is not one."""
    import torch

    try:
        state = torch.load(path, weights_only=True)  # never unpickles arbitrary objects
        if not isinstance(state.get("config"), dict) or not isinstance(state.get("run"), dict):
            raise ValueError("no configuration or run record")
    except Exception as exc:
        raise WorkloadInputError(f"Checkpoint {str(path)!r} is unreadable: {exc}.", "remove it to start over.") from exc
    return state


def device_of(state: dict[str, Any] | None) -> str | None:
    """The device a checkpoint was made on (a PennyLane device name), if it says."""
    device = state["run"].get("device") if state is not None else None
    return device if isinstance(device, str) else None


def check(path: Path, state: dict[str, Any], config: Config, identity: dict[str, str]) -> None:
    """A checkpoint of exactly this run, checked field by field; anything else is refused by name."""
    saved, recorded = state["config"], state["run"]
    settings = [
        f"{k}: {saved.get(k)!r} then, {v!r} now" for k, v in asdict(config).items() if k not in GROWABLE and saved.get(k) != v
    ]
    differences = [f"its settings differ ({', '.join(settings)})"] if settings else []
    differences += [
        words.format(recorded.get(key), identity[key])
        for key, words in _IDENTITY_WORDS.items()
        if recorded.get(key) != identity[key]
    ]
    if differences:
        raise WorkloadInputError(
            f"Checkpoint {str(path)!r} is of another run: {'; '.join(differences)}.",
            "resume with the settings, data, --device and --workers it was made with, or pass another --results-dir "
            "(or --checkpoint-dir) to start a new run beside it.",
        )
    check_state(path, state, config)


def check_state(path: Path, state: dict[str, Any], config: Config) -> None:
    import torch

    def bad(what: str) -> WorkloadInputError:
        return WorkloadInputError(f"Checkpoint {str(path)!r} is corrupt: {what}.", "remove it to start over.")

    epoch = state.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
        raise bad(f"epoch {epoch!r} is not a whole number of 1 or more")
    history = state.get("history")
    if not isinstance(history, list) or len(history) != epoch or any(not isinstance(r, list) or len(r) != 6 for r in history):
        raise bad(f"its history does not hold {epoch} epochs of 6 numbers")
    weights = state.get("model")
    if not isinstance(weights, dict) or not all(isinstance(t, torch.Tensor) for t in weights.values()):
        raise bad("the model's weights are missing")
    if not all(bool(torch.isfinite(t).all()) for t in weights.values()):
        raise bad("a model weight is not finite")
    if epoch > config.epochs:  # a sound checkpoint, further along than asked
        raise further_along(path, epoch, config.epochs, "epochs", "--epochs")
