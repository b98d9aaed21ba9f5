"""qbackends: one device string, the right PennyLane simulator for this machine.

    >>> from qbackends import get_device
    >>> dev = get_device("local:pennylane/lightning.qubit", wires=18)

Importing qbackends imports neither PennyLane nor torch.
"""

from __future__ import annotations

from .backend import Backend, RuleRegistration
from .device import choose, get_device
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
