"""``get_device``: a device string in, a ready PennyLane device out: the facade over one way down.

``parse_request`` (``request``) → screening (``screening``: machine facts, capabilities, memory) → for ``auto``,
the per-circuit auto device (``autodevice``, which decides with ``auto`` and builds its candidates with the
factory), else the factory (``factory``: one named backend, its rules attached). Importing this module imports
PennyLane; ``import qbackends`` loads it on first use of ``get_device``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pennylane as qml

from .autodevice import AutoQubit
from .context import get_context
from .decompositions import user_rules
from .deviceoptions import GLOBAL_SEED_BOUND, accepts_option
from .factory import build, build_requested, construct
from .request import (
    DEVICE_ENV_VARS,
    MAX_SHOTS,
    MAX_WIRES,
    Request,
    check_request,
    check_shots,
    device_string_from_env,
    parse_request,
    requested_spec,
    wire_count,
)
from .screening import Choice, choose, facts_for, rank_share_wires, requested_chain, screen


def get_device(
    spec: str | None = None,
    wires: int | Sequence[Any] | None = None,
    *,
    fallback: Sequence[str] | None = None,
    precision: str = "c128",
    decompositions: Mapping[Any, Callable[..., Any]] | None = None,
    default_decompositions: bool = True,
    diff_method: str | None = "adjoint",
    ignore_memory: bool = False,
    **options: Any,
) -> Any:
    """A PennyLane device for a device string.

    Args:
        spec: ``local:<provider>/<simulator>``, a bare simulator name, or ``"auto"``; None reads
            ``AMZN_BRAKET_DEVICE_ARN``, then ``QBACKENDS_DEVICE``, then uses ``"auto"``.
        wires: number of wires, or their labels.
        fallback: device strings to try, in order, when ``spec`` cannot run here.
        precision: ``"c128"`` (default) or ``"c64"``.
        decompositions: operator (class or name) -> decomposition rule or function; always used.
        default_decompositions: False turns the backend's default rules off.
        diff_method: the differentiation method planned, for the memory guard.
        ignore_memory: build even when the memory guard says the request does not fit.
        **options: device options (shots, seed, batch_obs, mpi, ...), checked against the device.

    Raises:
        QBackendsError: a typed subclass saying what is wrong and how to fix it.
    """
    request = parse_request(
        spec,
        wires,
        fallback=fallback,
        precision=precision,
        decompositions=decompositions,
        default_decompositions=default_decompositions,
        diff_method=diff_method,
        ignore_memory=ignore_memory,
        options=options,
        check_rules=user_rules,
    )
    # The per-circuit auto device runs tapes: with mpi=True or program capture, auto is the decision on no circuit.
    if request.auto and not options.get("mpi") and not qml.capture.enabled():
        return AutoQubit.from_request(request)
    return build_requested(request, get_context())


__all__ = [
    "DEVICE_ENV_VARS", "GLOBAL_SEED_BOUND", "MAX_SHOTS", "MAX_WIRES", "Choice", "Request", "accepts_option", "build",
    "check_request", "check_shots", "choose", "construct", "device_string_from_env", "facts_for", "get_device",
    "parse_request", "rank_share_wires", "requested_chain", "requested_spec", "screen", "wire_count",
]  # fmt: skip
