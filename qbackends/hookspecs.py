"""The hooks a qbackends plugin implements. Each receives a ``register`` callback."""

from __future__ import annotations

from collections.abc import Callable

import pluggy

from .backend import Backend, RuleRegistration

PROJECT = "qbackends"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_backends(register: Callable[[Backend], None]) -> None:
    """Register the simulators this plugin provides.

    Called once, when the registry is first built (first ``get_device``, ``qbackends list``, ...).
    Must not import PennyLane or the simulator: only describe it.

    Args:
        register: call ``register(Backend(...))`` once per simulator. The host refuses a
            ``provider/simulator`` key that another plugin registered already, and records
            that refusal as this plugin's error.
    """


@hookspec
def register_decompositions(register: Callable[[RuleRegistration], None]) -> None:
    """Register decomposition rules that devices apply before execution.

    Called once, when the first device that needs rules is built (PennyLane is importable then).

    Args:
        register: call ``register(RuleRegistration(operator, rule, backends, name))`` once per
            rule. The host attaches every rule whose ``backends`` match to devices of those
            backends, unless the user turns default rules off.
    """
