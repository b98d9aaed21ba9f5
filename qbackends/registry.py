"""The plugin manager and the registry of backends it builds.

Plugins are entry points in the ``qbackends`` group, built-ins included. Each is loaded on its
own: one that fails is recorded with its traceback and never breaks the others.
"""

from __future__ import annotations

import difflib
import functools
import logging
import math
import os
import re
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, get_args

import pluggy

from . import hookspecs
from .backend import Backend, Hardware, RuleRegistration
from .devicestring import AUTO, AUTO_DEVICE, DeviceSpec
from .errors import PluginError, UnknownBackendError, shown
from .operators import pennylane_operator

log = logging.getLogger("qbackends")

ENTRY_POINT_GROUP = "qbackends"
PLUGINS_ENV = "QBACKENDS_PLUGINS"
BUILTIN_PLUGIN = "pennylane"


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that did not load, or whose registration the host refused."""

    plugin: str
    distribution: str
    error: str
    traceback: str = ""


@dataclass
class Registry:
    """Backends and rules registered by the loaded plugins."""

    backends: dict[str, Backend] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)
    plugins: dict[str, str] = field(default_factory=dict)  # plugin name -> distribution
    failures: list[PluginFailure] = field(default_factory=list)
    manager: pluggy.PluginManager | None = None
    rule_failures: dict[str, list[str]] = field(default_factory=dict)  # plugin -> its refused rules, not yet warned of
    _rules: list[RuleRegistration] | None = None

    def lookup(self, spec: DeviceSpec) -> Backend:
        """The backend a parsed device string names.

        Raises:
            UnknownBackendError: with did-you-mean, what is registered, and how to add it.
        """
        if spec.provider is not None:
            backend = self.backends.get(f"{spec.provider}/{spec.simulator}") or next(
                (b for b in self.backends.values() if b.provider == spec.provider and b.device_name == spec.simulator), None
            )  # the PennyLane name works too: local:qbackends/qbackends.fused.qubit (see Backend.braket_string)
            if backend is not None:
                return backend
            providers = sorted({b.provider for b in self.backends.values()})
            if spec.provider not in providers:
                raise UnknownBackendError(
                    f"Unknown provider {spec.provider!r} in {str(spec)!r}; registered providers: "
                    f"{', '.join(providers)}.{self._failed_hint(spec.provider)}",
                    self._fix_failed_plugin(spec.provider)
                    or self._did_you_mean(spec.provider, providers, "provider")
                    or "install the plugin package that adds this provider (see `qbackends plugins`).",
                )
            return self._unknown_simulator(spec, [b for b in self.backends.values() if b.provider == spec.provider])
        matches = [b for b in self.backends.values() if b.simulator == spec.simulator] or [
            b for b in self.backends.values() if b.device_name == spec.simulator
        ]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            choices = ", ".join(sorted(b.device_string for b in matches))
            raise UnknownBackendError(
                f"Simulator {spec.simulator!r} is offered by several providers: {choices}.",
                "name the provider: local:<provider>/<simulator>.",
            )
        return self._unknown_simulator(spec, list(self.backends.values()))

    def _unknown_simulator(self, spec: DeviceSpec, candidates: list[Backend]) -> Backend:
        names = sorted(b.simulator for b in candidates)
        known = ", ".join(sorted(b.device_string for b in candidates))
        close = difflib.get_close_matches(spec.simulator, names, n=1, cutoff=0.6)
        if close:
            match = next(b for b in candidates if b.simulator == close[0])
            fix = f"did you mean {match.device_string!r}?"
        else:
            fix = "pick one of those, or install the plugin package that adds it (see `qbackends plugins`)."
        raise UnknownBackendError(
            f"Unknown simulator {spec.simulator!r} in {str(spec)!r}; registered: {known}."
            f"{self._failed_hint(spec.provider or '')}",
            fix,
        )

    @staticmethod
    def _did_you_mean(word: str, choices: Iterable[str], what: str) -> str:
        close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
        return f"did you mean {what} {close[0]!r}?" if close else ""

    def _fix_failed_plugin(self, name: str) -> str:
        """The fix for a provider whose plugin is installed but failed to load: mend the plugin."""
        if any(f.plugin == name for f in self.failures):
            return f"fix plugin {name!r}: it is installed but failed to load (`qbackends plugins -v` shows why)."
        return ""

    def _failed_hint(self, name: str) -> str:
        failed = [f for f in self.failures if f.plugin == name or not name]
        if not failed:
            return ""
        return " Plugins that failed to load: " + "; ".join(f"{f.plugin}: {f.error}" for f in failed) + "."

    def rules(self) -> list[RuleRegistration]:
        """Decomposition rules from every plugin; collected and checked on first use.

        Each registration is checked inside its plugin's isolation (a ``RuleRegistration`` of a
        PennyLane operator, with a decomposition rule, whose ``example`` builds that operator); one
        that fails is the plugin's recorded error, never reaches a device, and is warned of once,
        when a device of that plugin's backends is built.
        """
        if self._rules is None:
            self._rules = []
            if self.manager is not None:
                for impl in self.manager.hook.register_decompositions.get_hookimpls():
                    self._call_plugin(impl, functools.partial(self._add_rule, impl.plugin_name))
        return self._rules

    def _add_rule(self, plugin: str, registration: Any) -> None:
        problem = _rule_problem(registration)
        if problem is None:
            assert self._rules is not None
            self._rules.append(registration)
            return
        self.failures.append(PluginFailure(plugin, self.plugins.get(plugin, "?"), f"Plugin {plugin!r} {problem}"))
        self.rule_failures.setdefault(plugin, []).append(problem)

    def warn_of_refused_rules(self, backend: Backend) -> None:
        """Once per registry, when a device of ``backend`` is built: the rules its plugin lost."""
        plugin = self.owners.get(backend.key, "")
        for problem in self.rule_failures.pop(plugin, []):
            log.warning("qbackends: plugin %r %s; that rule is left out (`qbackends plugins -v`).", plugin, problem)

    def _call_plugin(self, impl: Any, register: Callable[[Any], None]) -> None:
        try:
            impl.function(register=register)
        except Exception as exc:  # a broken plugin must not break the host
            self.failures.append(
                PluginFailure(impl.plugin_name, self.plugins.get(impl.plugin_name, "?"), _describe(exc), traceback.format_exc())
            )


def _rule_problem(registration: Any) -> str | None:
    """Why a rule registration cannot be used, or None. Imports PennyLane (rules are for devices)."""
    import pennylane as qml  # rules are checked on first use only: building the registry stays light

    if not isinstance(registration, RuleRegistration):
        return f"registered {registration!r}, not a qbackends.RuleRegistration"
    label = registration.name or registration.operator
    if not isinstance(registration.operator, str) or pennylane_operator(registration.operator) is None:
        return f"registered rule {label!r} for {registration.operator!r}, which is not a PennyLane operator"
    if not hasattr(registration.rule, "compute_resources"):
        return f"registered rule {label!r} whose rule is not a qml.register_resources decomposition rule"
    if registration.example is not None:
        try:
            with qml.QueuingManager.stop_recording():
                example = registration.example(0.5, list(range(8)))
        except Exception as exc:  # noqa: BLE001 - the plugin's code, isolated
            return f"registered rule {label!r} whose example raised {_describe(exc)}"
        if getattr(example, "name", None) != registration.operator:
            return f"registered rule {label!r} whose example builds {example!r}, not a {registration.operator}"
    return None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _selected(names: str | None) -> set[str] | None:
    if not names:
        return None
    return {n.strip() for n in names.split(",") if n.strip()} | {BUILTIN_PLUGIN}


def build_registry(entry_points: Iterable[metadata.EntryPoint] | None = None, only: str | None = None) -> Registry:
    """Load plugins and collect their backends.

    Args:
        entry_points: the entry points to load; default: the installed ``qbackends`` group.
        only: comma-separated plugin names to load (the built-in plugin always loads);
            default: the ``QBACKENDS_PLUGINS`` environment variable, else all.
    """
    if entry_points is None:
        entry_points = metadata.entry_points(group=ENTRY_POINT_GROUP)
    wanted = _selected(only if only is not None else os.environ.get(PLUGINS_ENV))
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    registry = Registry(manager=manager)
    for ep in sorted(entry_points, key=lambda e: (e.name != BUILTIN_PLUGIN, e.name)):
        if wanted is not None and ep.name not in wanted:
            continue
        dist = ep.dist.name if ep.dist is not None else "?"
        registry.plugins[ep.name] = dist
        try:
            manager.register(ep.load(), name=ep.name)
        except Exception as exc:
            registry.failures.append(PluginFailure(ep.name, dist, _describe(exc), traceback.format_exc()))
    installed = sorted(ep.name for ep in entry_points)
    for name in sorted((wanted or set()) - set(installed)):
        registry.failures.append(
            PluginFailure(
                name, "-", f"{PLUGINS_ENV} names {name!r}, which no installed package provides; installed: {', '.join(installed)}"
            )
        )
    for impl in manager.hook.register_backends.get_hookimpls():
        registry._call_plugin(impl, functools.partial(_add_backend, registry, impl.plugin_name))
    return registry


def _name(value: Any) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None and len(value) <= 100


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# What each field of a registered Backend must hold, in words for the plugin's author: a record that holds
# anything else would fail later, in every command that lists or weighs it.
_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "provider": (_name, "a name of letters, digits, '_', '-' and '.' (the <provider> of local:<provider>/<simulator>)"),
    "simulator": (_name, "a name of letters, digits, '_', '-' and '.' (the <simulator> of local:<provider>/<simulator>)"),
    "device_name": (_name, "the PennyLane name of the device, e.g. 'lightning.qubit'"),
    "distribution": (_name, "the name of the PyPI distribution that provides the device"),
    "hardware": (lambda v: v in get_args(Hardware), f"one of {', '.join(get_args(Hardware))}"),
    "state_copies": (lambda v: v is None or (_number(v) and v > 0), "None or a positive, finite number"),
    "rank_state_copies": (lambda v: v is None or (_number(v) and v > 0), "None or a positive, finite number"),
    "table_bytes": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number of 0 or more"),
    "rank_table_bytes": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number of 0 or more"),
    "rank_buffer_bytes": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number of 0 or more"),
    "shared_table_bytes": (
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0),
        "None or a whole number of 0 or more",
    ),
    "dense_adjoint_observables": (lambda v: isinstance(v, bool), "True or False"),
    "preference": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    "min_auto_wires": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number of 0 or more"),
    "description": (lambda v: isinstance(v, str), "a string"),
    "capabilities_file": (
        lambda v: v is None or (isinstance(v, tuple) and len(v) == 2 and all(isinstance(p, str) and p for p in v)),
        "None or (distribution, path of its TOML inside it)",
    ),
    "extra": (lambda v: v is None or _name(v), "None or the name of a qbackends extra"),
    "create": (lambda v: v is None or callable(v), "None or a factory create(wires, **options)"),
    "options": (
        lambda v: v is None or (isinstance(v, tuple) and all(isinstance(o, str) and o.isidentifier() for o in v)),
        "None or a tuple of option names",
    ),
    "needs_shots": (lambda v: isinstance(v, bool), "True or False"),
    "install": (lambda v: v is None or (isinstance(v, str) and bool(v.strip())), "None or how to install it, as a fix says it"),
    "backprop": (lambda v: isinstance(v, bool), "True or False"),
    "faster_zz": (lambda v: v in (None, "IsingZZ", "MultiRZ"), "None, 'IsingZZ' or 'MultiRZ'"),
    "mpi_module": (
        lambda v: v is None or (isinstance(v, str) and all(p.isidentifier() for p in v.split("."))),
        "None or a module name",
    ),
}
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def backend_problem(backend: Backend) -> str | None:
    """What a registered Backend holds that it must not (in the plugin author's words), or None."""
    for name, (valid, wanted) in _FIELDS.items():
        value = getattr(backend, name)
        if not valid(value):
            return f"whose {name} is {shown(value, 60)}; it must be {wanted}"
    if backend.key in (f"qbackends/{AUTO}", f"qbackends/{AUTO_DEVICE}"):
        return f"named {backend.device_string!r}, which is auto's own name"
    return None


def _add_backend(registry: Registry, plugin: str, backend: Backend) -> None:
    """Keep ``backend``, or record why not as the plugin's error; its other registrations still count."""
    problem = backend_problem(backend) if isinstance(backend, Backend) else None
    if not isinstance(backend, Backend):
        refusal = PluginError(
            f"Plugin {plugin!r} registered {backend!r:.80}, not a qbackends.Backend.",
            "call register(Backend(provider=..., simulator=..., device_name=..., distribution=...)).",
        )
    elif problem is not None:
        refusal = PluginError(
            f"Plugin {plugin!r} registered a Backend {problem}.", "fix that field of the plugin's Backend(...); it is left out."
        )
    elif (owner := registry.owners.get(backend.key)) is not None:
        refusal = PluginError(
            f"Plugin {plugin!r} registered {backend.device_string!r}, which plugin {owner!r} "
            "registered already; the first registration is kept.",
            f"rename the simulator in plugin {plugin!r}, or uninstall one of the two plugins.",
        )
    else:
        registry.backends[backend.key] = backend
        registry.owners[backend.key] = plugin
        return
    registry.failures.append(PluginFailure(plugin, registry.plugins.get(plugin, "?"), _describe(refusal)))


@functools.cache
def get_registry() -> Registry:
    """The registry of installed plugins, built once per process."""
    return build_registry()


def reset_registry() -> None:
    """Forget the cached registry (after installing a plugin, or between tests)."""
    get_registry.cache_clear()
