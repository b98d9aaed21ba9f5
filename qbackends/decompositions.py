"""Decomposition rules attached to devices, applied with PennyLane's graph decomposition.

A device from ``get_device`` lowers, before its own preprocessing:
- operators targeted by a rule (the backend's default rules and the user's), with those rules;
- under adjoint differentiation, operators the device declares but cannot differentiate.
Everything else reaches the device untouched. Importing this module imports PennyLane.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pennylane as qml
from pennylane.decomposition import DecompositionRule, gate_sets
from pennylane.exceptions import DecompositionWarning
from pennylane.transforms.core import BoundTransform

from .backend import RuleRegistration
from .capabilities import DeclaredOperations
from .errors import UnsupportedOptionError

# ---- default rules: same result, fewer passes over the state ------------------------------

_PAULI_ROTATION = {"X": qml.RX, "Y": qml.RY, "Z": qml.RZ}


@qml.register_condition(lambda pauli_word, **_: len(pauli_word) == 1 and pauli_word in _PAULI_ROTATION)
@qml.register_resources(lambda pauli_word, **_: {_PAULI_ROTATION[pauli_word]: 1})
def pauli_rot_single_qubit(theta: Any, wires: Any, pauli_word: str, **_: Any) -> None:
    """PauliRot(θ, "X") = RX(θ) (likewise Y, Z): one pass instead of H·MultiRZ·H."""
    _PAULI_ROTATION[pauli_word](theta, wires=wires)


@qml.register_condition(lambda pauli_word, **_: pauli_word == "ZZ")
@qml.register_resources({qml.IsingZZ: 1})
def pauli_rot_zz(theta: Any, wires: Any, **_: Any) -> None:
    """PauliRot(θ, "ZZ") = IsingZZ(θ): one diagonal pass."""
    qml.IsingZZ(theta, wires=wires)


@qml.register_resources({qml.resource_rep(qml.MultiRZ, num_wires=2): 1})
def ising_zz_as_multi_rz(theta: Any, wires: Any, **_: Any) -> None:
    """IsingZZ(θ) = MultiRZ(θ) on two wires: Lightning-Kokkos' MultiRZ kernel is the faster one."""
    qml.MultiRZ(theta, wires=wires)


# Measured on the 2-core CI machine, QAOA p=2 value+gradient (benchmarks/test_bench_qaoa.py): on
# lightning.qubit IsingZZ beats a two-wire MultiRZ (18 nodes 0.066 s vs 0.094 s); on lightning.kokkos
# MultiRZ wins from 20 nodes (0.36 s vs 0.42 s at 20, 2.33 s vs 2.50 s at 22).
ISING_ZZ_FASTER = frozenset({"pennylane/lightning.qubit", "pennylane/default.qubit"})
MULTI_RZ_FASTER = frozenset({"pennylane/lightning.kokkos"})


def builtin_rules() -> list[RuleRegistration]:
    """The rules every backend gets unless the user opts out."""
    return [
        RuleRegistration(
            "PauliRot",
            pauli_rot_single_qubit,
            name="PauliRot(X|Y|Z) -> RX|RY|RZ",
            example=lambda theta, wires: qml.PauliRot(theta, "Y", wires=wires[:1]),
        ),
        RuleRegistration(
            "PauliRot",
            pauli_rot_zz,
            backends=ISING_ZZ_FASTER,
            name="PauliRot(ZZ) -> IsingZZ",
            example=lambda theta, wires: qml.PauliRot(theta, "ZZ", wires=wires[:2]),
        ),
        RuleRegistration(
            "IsingZZ",
            ising_zz_as_multi_rz,
            backends=MULTI_RZ_FASTER,
            name="IsingZZ -> MultiRZ",
            example=lambda theta, wires: qml.IsingZZ(theta, wires=wires[:2]),
        ),
    ]


# ---- user rules ---------------------------------------------------------------------------


def operator_name(key: Any) -> str:
    """``"MultiRZ"`` or ``qml.MultiRZ`` -> ``"MultiRZ"``."""
    if isinstance(key, str):
        name = key
    elif isinstance(key, type) and issubclass(key, qml.operation.Operator):
        name = key.__name__
    else:
        raise UnsupportedOptionError(
            f"decompositions key {key!r} is neither an operator name nor a PennyLane operator class.",
            'use e.g. decompositions={"MultiRZ": fn} or {qml.MultiRZ: fn}.',
        )
    if not hasattr(qml.ops, name) and not hasattr(qml, name):
        raise UnsupportedOptionError(
            f"decompositions key {name!r} is not a PennyLane operator.",
            "use the operator's class name as PennyLane spells it, e.g. 'MultiRZ', 'CRot', 'PauliRot'.",
        )
    return name


def as_rule(function: Callable[..., Any]) -> DecompositionRule:
    """A decomposition rule from a rule or a plain ``f(*params, wires, **hyperparameters) -> ops``.

    Plain functions (``qml.MultiRZ.compute_decomposition``, the old ``custom_decomps`` style)
    declare no resources: they are used as fixed rules, and what they return is lowered further
    only where the device needs it.
    """
    if isinstance(function, DecompositionRule):
        return function
    if not callable(function):
        raise UnsupportedOptionError(
            f"decompositions value {function!r} is not callable.",
            "pass a function f(*params, wires, **hyperparameters) returning operators, or a qml.register_resources rule.",
        )

    @qml.register_resources({})
    def rule(*params: Any, wires: Any, **hyperparameters: Any) -> None:
        with qml.QueuingManager.stop_recording():
            ops = function(*params, wires=wires, **hyperparameters)
        for op in ops:
            qml.apply(op)

    rule.__name__ = getattr(function, "__qualname__", "user_rule")
    return rule


# ---- what a device applies ----------------------------------------------------------------


@dataclass(frozen=True)
class RuleSet:
    """The rules in force on one device.

    Attributes:
        fixed: operator name -> the user's rule (always used for that operator).
        alternatives: operator name -> default rules (used where they apply and are cheaper).
        declared: the device's declared operations, for lowering what adjoint cannot differentiate.
        names: what ``qbackends probe`` shows.
        preferred: gates the default rules produce; they win ties in the graph (e.g. IsingZZ over
            a two-wire MultiRZ, both one pass) so the lowering is deterministic.
    """

    fixed: Mapping[str, DecompositionRule]
    alternatives: Mapping[str, tuple[DecompositionRule, ...]]
    declared: DeclaredOperations
    names: tuple[str, ...]
    preferred: frozenset[str] = frozenset()

    @property
    def targets(self) -> frozenset[str]:
        return frozenset(self.fixed) | frozenset(self.alternatives)

    @functools.cached_property
    def _kept_plain(self) -> frozenset[str]:
        return _kept(self, adjoint=False)

    @functools.cached_property
    def _kept_adjoint(self) -> frozenset[str]:
        return _kept(self, adjoint=True)

    def kept(self, adjoint: bool) -> frozenset[str]:
        """Operators that reach the device as they are."""
        return self._kept_adjoint if adjoint else self._kept_plain

    def is_empty(self) -> bool:
        return not self.targets and not self.declared.adjoint_differentiable


def build_ruleset(
    registrations: Iterable[RuleRegistration],
    backend_key: str,
    declared: DeclaredOperations,
    user: Mapping[Any, Callable[..., Any]] | None = None,
    defaults: bool = True,
) -> RuleSet:
    """Combine the registered rules for ``backend_key`` with the user's."""
    alternatives: dict[str, list[DecompositionRule]] = {}
    names: list[str] = []
    preferred: set[str] = set()
    if defaults:
        for reg in registrations:
            if reg.applies_to(backend_key):
                alternatives.setdefault(reg.operator, []).append(reg.rule)
                names.append(reg.name or f"{reg.operator} -> {getattr(reg.rule, '__name__', 'rule')}")
                preferred |= _outputs(reg)
    fixed = {operator_name(k): as_rule(v) for k, v in (user or {}).items()}
    names.extend(f"{op} -> {getattr(rule, '__name__', 'rule')} (user)" for op, rule in fixed.items())
    for op in fixed:
        alternatives.pop(op, None)
    if declared.native and declared.adjoint_differentiable:
        names.append(
            f"adjoint: lower {len(set(declared.native) - set(declared.adjoint_differentiable))} declared non-differentiable operators"
        )
    return RuleSet(fixed, {k: tuple(v) for k, v in alternatives.items()}, declared, tuple(names), frozenset(preferred))


def _outputs(reg: RuleRegistration) -> set[str]:
    """Names of the gates a rule produces on its example operator."""
    if reg.example is None:
        return set()
    with qml.QueuingManager.stop_recording():
        sample = reg.example(0.5, list(range(8)))
    return {getattr(k, "name", str(k)) for k in reg.rule.compute_resources(**sample.resource_params).gate_counts}


def _kept(ruleset: RuleSet, adjoint: bool) -> frozenset[str]:
    """Operators the device gets as they are: native, not targeted, and (under adjoint) differentiable.

    A device that declares nothing is taken to run PennyLane's own operators.
    """
    native = frozenset(ruleset.declared.native) or frozenset(str(name) for name in gate_sets.ALL_OPS)
    keep = native - ruleset.targets
    differentiable = frozenset(ruleset.declared.adjoint_differentiable)
    if adjoint and differentiable:
        keep = frozenset(n for n in keep if n in differentiable or _parameterless(n))
    return keep


def _parameterless(name: str) -> bool:
    op = getattr(qml.ops, name, None) or getattr(qml, name, None)
    return getattr(op, "num_params", None) == 0


@qml.transform
def apply_rules(tape: qml.tape.QuantumScript, *, ruleset: RuleSet, adjoint: bool) -> tuple[Any, Any]:
    """Lower the operators ``ruleset`` targets with its rules, by graph decomposition."""
    keep = ruleset.kept(adjoint)
    if all(op.name in keep for op in tape.operations):
        return (tape,), _identity
    # Every kept gate costs one pass; the default rules' outputs win ties.
    gate_set = {name: 0.99 if name in ruleset.preferred else 1.0 for name in keep}
    with qml.decomposition.toggle_graph_ctx(True), warnings.catch_warnings():
        # strict=False: what the graph cannot lower is left to the device, whose own
        # preprocessing decomposes it or says it cannot.
        warnings.simplefilter("ignore", DecompositionWarning)
        return qml.transforms.decompose(
            tape,
            gate_set=gate_set,
            fixed_decomps=dict(ruleset.fixed) or None,
            alt_decomps={k: list(v) for k, v in ruleset.alternatives.items()} or None,
            strict=False,
        )


def _identity(results: Any) -> Any:
    return results[0]


# ---- attaching rules to a device ------------------------------------------------------------


@functools.cache
def _with_rules(device_class: Any) -> type:
    """A subclass of ``device_class`` whose preprocessing applies its ``qbackends_rules`` first."""

    def preprocess_transforms(self: Any, execution_config: Any = None) -> Any:
        pipeline = device_class.preprocess_transforms(self, execution_config)
        kwargs = {"ruleset": self.qbackends_rules, "adjoint": _is_adjoint(execution_config)}
        pipeline.insert(0, BoundTransform(apply_rules, kwargs=kwargs))
        return pipeline

    def supports_derivatives(self: Any, execution_config: Any = None, circuit: Any = None) -> Any:
        # Judge the circuit the device will run: with the rules applied (cheap, and it spares
        # the device decomposing e.g. CRot itself just to check).
        if circuit is not None:
            (circuit,), _ = apply_rules(circuit, ruleset=self.qbackends_rules, adjoint=_is_adjoint(execution_config))
        return device_class.supports_derivatives(self, execution_config, circuit)

    namespace = {
        "preprocess_transforms": preprocess_transforms,
        "supports_derivatives": supports_derivatives,
        "__module__": device_class.__module__,
    }
    return type(device_class.__name__, (device_class,), namespace)


def _is_adjoint(execution_config: Any) -> bool:
    return execution_config is not None and execution_config.gradient_method == "adjoint"


def attach(device: Any, ruleset: RuleSet) -> Any:
    """Make every QNode on ``device`` apply ``ruleset``; a device with no rules is left as it is."""
    if ruleset.is_empty():
        return device
    device.__class__ = _with_rules(type(device))  # type: ignore[arg-type]  # classes are hashable
    device.qbackends_rules = ruleset
    return device
