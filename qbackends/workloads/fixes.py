"""How a workload words the fix for one of its settings: as the CLI takes it, or as a hybrid job does."""

from __future__ import annotations

from collections.abc import Callable

Spell = Callable[[str, str], str]  # (setting, value) -> the fix, without its full stop


def option(name: str, value: str) -> str:
    """A fix as the CLI takes it: ``pass --batch-size 1 or more``."""
    return f"pass --{name.replace('_', '-')} {value}"


def hyperparameter(name: str, value: str) -> str:
    """A fix as a job takes it: ``set batch_size to 1 or more in the hyperparameters``."""
    return f"set {name} to {value} in the hyperparameters"
