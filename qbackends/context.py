"""What a process has learnt while building devices, in one object: build failures, loaded device classes,
``auto``'s decisions and trials, and its cost model.

The registry says what is registered; a ``Context`` holds what using it found out, each thing recorded once,
where it is read. ``get_context()`` is the context of the current registry: after ``reset_registry()`` (a new
registry) it starts empty by itself, so nothing here is cleared by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .registry import Registry, get_registry


@dataclass
class Context:
    """The registry in use and what building its devices found out.

    Attributes:
        registry: the backends and rules.
        build_failures: PennyLane device name -> why it cannot be built here (a construction that failed even
            with one wire and no options); screening passes over these backends.
        device_classes: PennyLane device name -> its class, once loaded (reading every distribution's entry
            points took 90% of building a device).
        decisions: ``auto``'s decisions (with their trials' times), per auto device setup, then per circuit structure.
        model: ``auto``'s cost model (backend key -> ``Costs``), read once; None until then.
        store: ``auto``'s decisions kept between processes (``decisionstore.DecisionStore``); None until first used.
        families: circuit family (``auto.family_key``) -> backend key -> measured ÷ predicted step, from trials:
            how far the model is off for circuits like these, applied to the family's next circuits.
        family_members: circuit family -> (gate count, decision) of each circuit decided in full: taken again for
            the family's circuits of about that size (``auto.family_member``).
        taken: (circuit family, its trainable observable data, backend key, build options) of each family member a
            backend's preprocessing and gradient took (``AutoQubit._takes``): asked once, not of every member.
        screened: an ``auto`` setup (wires, options, exclusions, build failures, machine facts but the memory) -> the
            backends that run it here (``screening.auto_candidates``), where memory is far from deciding.
        rulesets: (backend key, declared operations, defaults on) -> its decomposition rules without a user's
            own, combined once (``factory.build``): with them the graphs they solved, for every device of that backend.
        trial_seconds: what ``auto``'s trials have cost in this process.
        work_seconds: what the backends ``auto`` took have run for the user in this process (their device calls).
    """

    registry: Registry
    build_failures: dict[str, str] = field(default_factory=dict)
    device_classes: dict[str, Any] = field(default_factory=dict)
    decisions: dict[Any, dict[Any, Any]] = field(default_factory=dict)
    model: dict[str, Any] | None = None
    store: Any = None
    families: dict[Any, dict[str, float]] = field(default_factory=dict)
    family_members: dict[Any, list[tuple[int, Any]]] = field(default_factory=dict)
    taken: set[Any] = field(default_factory=set)
    screened: dict[Any, Any] = field(default_factory=dict)
    rulesets: dict[Any, Any] = field(default_factory=dict)
    trial_seconds: float = 0.0
    work_seconds: float = 0.0


_current: list[Context] = []  # one slot: the context of the registry get_registry() returns


def get_context() -> Context:
    """The context of the current registry (``get_registry()``); a new registry starts a new, empty one."""
    registry = get_registry()
    if not _current or _current[0].registry is not registry:
        _current[:] = [Context(registry)]
    return _current[0]
