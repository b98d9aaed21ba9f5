"""QNN checkpoints: saved atomically after every epoch, resumed only into the very same run."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

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


def _same_run(saved: Any, config: Config) -> bool:
    """A checkpoint continues a run of the same settings; only the epoch budget may grow."""
    ignored = ("epochs", "patience")
    current = {k: v for k, v in asdict(config).items() if k not in ignored}
    return isinstance(saved, dict) and {k: v for k, v in saved.items() if k not in ignored} == current


def digest(features: np.ndarray, labels: np.ndarray) -> str:
    """The data a run trains on, by content: a file replaced under the same name is another run."""
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(features).tobytes() + np.ascontiguousarray(labels).tobytes()).hexdigest()


_IDENTITY_WORDS = {
    "data": "the data differ",
    "device": "it was made on another device",
    "workers": "it had another number of workers",
}


def load(path: Path, config: Config, identity: dict[str, str]) -> dict[str, Any]:
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
    check_state(path, state, config)
    return state


def check_state(path: Path, state: dict[str, Any], config: Config) -> None:
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
