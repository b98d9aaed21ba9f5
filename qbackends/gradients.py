"""Whether a device can differentiate a circuit by the method a run asks for: asked once, before the run starts.

PennyLane finds out only at the first gradient and says it in its own words (``QuantumFunctionError: ... does
not support adjoint``, ``WireError: The device has no free wire``). A workload asks here first, on the backend
that will run the circuit (under ``auto``, the one auto takes for it), so the refusal is one typed line naming
the method, the device, the methods that work there and the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pennylane.devices import ExecutionConfig

from .autodevice import AutoQubit
from .capabilities import DIFF_METHODS
from .errors import UnsupportedOptionError
from .registry import get_registry

DEVICE_METHODS = ("adjoint", "backprop", "device")  # the device computes these itself, or PennyLane refuses it
AUXILIARY_WIRE = ("hadamard", "reversed-hadamard")  # gradient transforms that need a wire the circuit leaves free
_LACKS = {
    "adjoint": "it has no adjoint method for its operations",
    "backprop": "its results are not differentiable by backpropagation",
    "device": "it computes no gradient of its own",
}


def refusal(device: Any, circuit: Any, method: str, interface: str) -> str | None:
    """Why ``device`` (a backend's, not auto's) cannot differentiate ``circuit`` by ``method``, or None."""
    if method in DEVICE_METHODS:
        config = ExecutionConfig(gradient_method=method, interface=interface)
        return None if device.supports_derivatives(config, circuit) else _LACKS[method]
    if method in AUXILIARY_WIRE and device.wires is not None and not set(device.wires) - set(circuit.wires):
        return f"{method} needs an auxiliary wire, and the circuit takes all {len(device.wires)} of the device's"
    return None


def check(device: Any, circuit: Any, method: str, interface: str, spell: Callable[[str, str], str]) -> None:
    """Refuse ``method`` where the backend that runs ``circuit`` on ``device`` cannot differentiate it by it.

    Args:
        device: from ``get_device`` (the auto device decides for ``circuit`` here).
        circuit: a tape of the run's circuit.
        interface: the run's ML interface, e.g. ``"autograd"`` or ``"torch"``.
        spell: ``spell(name, value)`` words the fix as the caller takes settings (``fixes.option``: ``pass --diff-method X``).

    Raises:
        UnsupportedOptionError: naming the method, the device, the methods that work there, and the fix.
    """
    runner = device.backend_for(circuit, method, interface) if isinstance(device, AutoQubit) else device
    why = refusal(runner, circuit, method, interface)
    if why is None:
        return
    usable = [m for m in DIFF_METHODS if m != "best" and refusal(runner, circuit, m, interface) is None]
    raise UnsupportedOptionError(
        f"diff_method {method!r} cannot differentiate this circuit on {device_string(runner)}: {why}; "
        f"methods that can there: {', '.join(usable)}.",
        f"{spell('diff_method', usable[0])}.",
    )


def device_string(device: Any) -> str:
    """The device string of the backend whose PennyLane device ``device`` is (its PennyLane name where none is)."""
    name = str(device.name)
    return next((b.device_string for b in get_registry().backends.values() if b.device_name == name), name)
