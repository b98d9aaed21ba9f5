"""qbackends: one device string, the right PennyLane simulator for this machine.

    >>> from qbackends import get_device
    >>> dev = get_device("local:pennylane/lightning.qubit", wires=18)

Importing qbackends imports neither PennyLane nor torch: ``get_device`` (``qbackends.device``, which builds
PennyLane devices) and the submodules are loaded when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .backend import Backend, RuleRegistration
from .errors import (
    BackendUnavailableError,
    CheckpointError,
    DeviceStringError,
    InsufficientMemoryError,
    JobFailedError,
    JobSetupError,
    PluginError,
    QBackendsError,
    StorageError,
    UnknownBackendError,
    UnsupportedCircuitError,
    UnsupportedOptionError,
    WorkloadInputError,
)
from .hookspecs import hookimpl
from .registry import get_registry, reset_registry
from .screening import choose

if TYPE_CHECKING:
    from .device import get_device

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "CheckpointError",
    "DeviceStringError",
    "InsufficientMemoryError",
    "JobFailedError",
    "JobSetupError",
    "PluginError",
    "QBackendsError",
    "RuleRegistration",
    "StorageError",
    "UnknownBackendError",
    "UnsupportedCircuitError",
    "UnsupportedOptionError",
    "WorkloadInputError",
    "choose",
    "get_device",
    "get_registry",
    "hookimpl",
    "reset_registry",
]


def __getattr__(name: str) -> Any:
    """``get_device`` and the submodules (``qbackends.device``, ``qbackends.auto``, ...), imported on first use."""
    if name == "get_device":
        return importlib.import_module(".device", __name__).get_device
    try:
        return importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
