"""The device each workload asks for: its request to ``get_device`` (under ``auto``, told what only the workload
knows: how many steps its run takes, the gradient its layer wants, the device a resumed checkpoint ran on).

The decision itself is ``qbackends.auto``'s, per circuit, for the workloads as for every other caller.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from . import auto
from .device import get_device
from .devicestring import parse
from .registry import get_registry
from .request import requested_spec
from .screening import choose


def qnn_diff_method(device_string: str) -> str:
    """How the QNN differentiates on a backend: what ``auto`` would resolve "best" to there (backprop on
    default.qubit, else adjoint)."""
    backend = get_registry().lookup(parse(device_string))
    return auto.gradient_methods([backend], "best", shots=False)[0][backend.key] or "adjoint"


def _resolve(spec: str | None) -> tuple[str, bool]:
    parsed = requested_spec(spec)
    return str(parsed), parsed.is_auto


MPI_DEVICE = "local:qbackends/fused.qubit"  # the one device here that splits its state over MPI ranks


def qaoa_device(
    spec: str | None,
    wires: int,
    diff_method: str,
    layers: int = 2,
    iterations: int = 1000,
    resumed_on: str | None = None,
    precision: str = "c128",
    mpi: bool = False,
) -> Any:
    """``get_device`` for a QAOA run: under ``auto``, the device a resumed checkpoint was made on (``resumed_on``),
    else the per-circuit auto device, told how many steps the run takes (so its trials stay a small share of
    them); otherwise what was asked for. ``precision`` as the user asked (c64 only then).
    ``mpi``: the state split over the MPI ranks, on fused.qubit unless ``spec`` names another device (which
    then refuses mpi=True by name)."""
    if mpi:
        return get_device(spec or MPI_DEVICE, wires=wires, diff_method=diff_method, precision=precision, mpi=True)
    _, is_auto = _resolve(spec)
    if is_auto and _resumable(resumed_on):
        return get_device(resumed_on, wires=wires, diff_method=diff_method, precision=precision)
    steps: dict[str, Any] = {"expected_steps": iterations} if is_auto else {}
    # None: get_device names the variable it read
    return get_device(spec, wires=wires, diff_method=diff_method, precision=precision, **steps)


def _resumable(resumed_on: str | None) -> TypeGuard[str]:
    """A checkpoint's device that a resumed ``auto`` run continues on (one that names a backend, not auto)."""
    return resumed_on is not None and not parse(resumed_on).is_auto


def qnn_device(
    spec: str | None, wires: int, diff_method: str, resumed_on: str | None = None, steps: int = 100
) -> tuple[Any, str]:
    """(device, diff_method) for the dressed QNN's minibatches: under ``auto``, the device a resumed checkpoint
    was made on (``resumed_on``, differentiated as it was); else, with the default adjoint or best, the per-circuit
    auto device with each backend's best gradient (batched.qubit's adjoint VJPs, default.qubit's backprop), told
    the run's ``steps`` (minibatches: its trials stay a small share of them); otherwise what was
    asked for. A bad string from the environment names its variable (``requested_spec``)."""
    _, is_auto = _resolve(spec)
    tuned = diff_method in ("adjoint", "best")
    if is_auto and _resumable(resumed_on):
        method = qnn_diff_method(resumed_on) if tuned else diff_method
        return get_device(resumed_on, wires=wires, diff_method=method), method
    if is_auto and tuned:
        return get_device(spec, wires=wires, diff_method="best", expected_steps=steps), "best"
    return get_device(spec, wires=wires, diff_method=diff_method), diff_method


def check_qnn_size(spec: str | None, wires: int, diff_method: str) -> None:
    """What ``qnn_device`` would refuse at ``wires`` (a bad device string, no backend here that fits), found without
    building anything: a sweep checks each of its sizes so before it trains any."""
    _, is_auto = _resolve(spec)
    choose(spec, wires, diff_method="best" if is_auto and diff_method in ("adjoint", "best") else diff_method)
