"""Workloads written once against ``get_device``: QAOA MaxCut and the dressed QNN."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, where: dict[str, tuple[str, str]]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for names ``where`` maps to (module, name there): a name's
    module is imported when the name is first used, so that reading and checking a run's settings imports neither
    torch nor PennyLane (PennyLane's import alone took 6 s on a 2-core machine)."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = where[name]
        value = getattr(importlib.import_module(f"{package}.{module}"), attribute)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
