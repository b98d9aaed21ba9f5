"""What the workloads' checkpoints share: the words for a checkpoint that cannot continue this run."""

from __future__ import annotations

from pathlib import Path

from .errors import WorkloadInputError


def further_along(path: Path, done: int, asked: int, unit: str, option: str) -> WorkloadInputError:
    """A sound checkpoint of this run that holds more finished steps than the run asks for (nothing is wrong with it)."""
    return WorkloadInputError(
        f"Checkpoint {str(path)!r} holds {done} finished {unit}, more than {option} {asked} asks for.",
        f"pass {option} {done} or more to continue it, or another --results-dir (or --checkpoint-dir) to start a "
        "new run beside it.",
    )
