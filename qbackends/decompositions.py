"""Decomposition rules attached to devices, applied with PennyLane's graph decomposition.

A device from ``get_device`` lowers, before its own preprocessing:
- operators targeted by a rule (the backend's default rules and the user's), with those rules;
- under adjoint differentiation, operators the device declares but cannot differentiate (where every one is
  trainable and its own adjoint lowers it alike, ``Backend.adjoint_lowers``, the circuit is left to it), and on a
  device that declares no differentiable gates, gates of several parameters (Rot, CRot, U3:
  PennyLane's adjoint gives wrong gradients past a fixed one).
Everything else reaches the device untouched. Importing this module imports PennyLane.
"""

from __future__ import annotations

import difflib
import functools
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pennylane as qml

# PennyLane 0.45's own steps of qml.transforms.decompose (pinned <0.46), taken apart so that the graph it
# solves is solved once per device and set of operators rather than on every execution.
from pennylane.allocation import Allocate, Deallocate
from pennylane.decomposition import DecompositionRule, gate_sets, resource_rep
from pennylane.decomposition.reconstruct import decomps_use_reconstructor
from pennylane.exceptions import DecompositionWarning
from pennylane.templates import SubroutineOp
from pennylane.transforms.core import BoundTransform
from pennylane.transforms.decompose import _construct_and_solve_decomp_graph, _operator_decomposition_gen, _resolve_gate_set

from .backend import Backend, RuleRegistration
from .capabilities import DeclaredOperations
from .errors import UnsupportedCircuitError, UnsupportedOptionError, shown
from .operators import WRAPPERS as _WRAPPERS
from .operators import pennylane_operator
from .shiftrules import hadamard_refusal, method_name, misdifferentiated, misread_by_hadamard, refusal, shifted, standard_hadamard
from .simbase.measured import check_sampled

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


def builtin_rules(backends: Iterable[Backend] = ()) -> list[RuleRegistration]:
    """The rules every backend gets unless the user opts out; the ZZ rules for the ``backends`` whose declared
    ``faster_zz`` says which form runs faster there."""
    backends = list(backends)
    ising_zz = frozenset(b.key for b in backends if b.faster_zz == "IsingZZ")
    multi_rz = frozenset(b.key for b in backends if b.faster_zz == "MultiRZ")
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
            backends=ising_zz,
            name="PauliRot(ZZ) -> IsingZZ",
            example=lambda theta, wires: qml.PauliRot(theta, "ZZ", wires=wires[:2]),
        ),
        RuleRegistration(
            "IsingZZ",
            ising_zz_as_multi_rz,
            backends=multi_rz,
            name="IsingZZ -> MultiRZ",
            example=lambda theta, wires: qml.IsingZZ(theta, wires=wires[:2]),
        ),
    ]


# ---- exact rules: replace PennyLane rules that change results ------------------------------
#
# PennyLane 0.45's graph rule for Evolution/Exp keeps a coefficient only when the simplified base
# is an SProd: evolve(Hamiltonian([0.5], [Z(0)]), t) becomes RZ(2t) instead of RZ(t), and duplicate
# terms that merge into one lose theirs the same way (docs/upstream.md). These rules take every
# coefficient from the base's Pauli sentence instead, and lower commuting multi-term sums exactly
# as a product of rotations, which lightning can then run too.


def commuting_pauli_terms(base: Any) -> list[tuple[Any, Any]] | None:
    """``[(PauliWord, coefficient)]`` of a Pauli-sum ``base`` whose terms all commute, else None."""
    with qml.QueuingManager.stop_recording():
        sentence = base.pauli_rep if base.pauli_rep is not None else None
    if sentence is None:
        return None
    terms = [(word, coef) for word, coef in sentence.items() if not _is_zero(coef)]
    words = [word for word, _ in terms]
    if any(not a.commutes_with(b) for i, a in enumerate(words) for b in words[i + 1 :]):
        return None
    return terms


def _is_zero(coef: Any) -> bool:
    try:
        return bool(qml.math.allclose(coef, 0.0, atol=0.0, rtol=0.0))
    except (TypeError, ValueError):  # traced values: keep the term
        return False


def _rotation_counts(base: Any) -> dict[Any, int]:
    counts: dict[Any, int] = {}
    for word, _ in commuting_pauli_terms(base) or ():
        key = qml.resource_rep(qml.PauliRot, pauli_word=_word_string(word)) if word else qml.resource_rep(qml.GlobalPhase)
        counts[key] = counts.get(key, 0) + 1
    return counts


def _word_string(word: Any) -> str:
    return "".join(word[w] for w in word.wires)


def _apply_rotations(base: Any, wires: Any, rotation: Callable[[Any], Any], phase: Callable[[Any], Any]) -> None:
    """exp(-i Σ θ_k/2 P_k) as Π PauliRot(θ_k, P_k): exact because the P_k commute."""
    for word, coef in commuting_pauli_terms(base) or ():
        if word:
            qml.PauliRot(rotation(coef), _word_string(word), wires=word.wires)
        else:
            qml.GlobalPhase(phase(coef), wires=wires)


@qml.register_condition(lambda base, **_: commuting_pauli_terms(base) is not None)
@qml.register_resources(lambda base, **_: _rotation_counts(base))
def evolution_as_rotations(t: Any, *_: Any, wires: Any, base: Any, **__: Any) -> None:
    """Evolution(H, t) = exp(-i t Σ c_k P_k) = Π PauliRot(2 c_k t, P_k) · GlobalPhase(c_I t)."""
    _apply_rotations(base, wires, lambda c: 2 * qml.math.real(c) * t, lambda c: qml.math.real(c) * t)


@qml.register_condition(lambda base, **_: commuting_pauli_terms(base) is not None)
@qml.register_resources(lambda base, **_: _rotation_counts(base))
def exp_as_rotations(coeff: Any, *_: Any, wires: Any, base: Any, **__: Any) -> None:
    """Exp(H, a) = exp(a Σ c_k P_k) for imaginary a·c_k: PauliRot(2i·a·c_k, P_k) on each term."""

    def angle(c: Any, factor: complex) -> Any:
        value = factor * coeff * c
        if not qml.math.is_abstract(value) and not qml.math.allclose(qml.math.imag(value), 0.0):
            raise UnsupportedCircuitError(
                f"{qml.exp(base, coeff)} is not unitary (its exponent has a real part), so no gate sequence gives it.",
                "use an imaginary coefficient (qml.exp(H, -1j * t)) or qml.evolve(H, t).",
            )
        return qml.math.real(value)

    _apply_rotations(base, wires, lambda c: angle(c, 2j), lambda c: angle(c, 1j))


def exact_rules() -> dict[str, DecompositionRule]:
    """Rules every device gets, always: they replace PennyLane rules that change results."""
    return {"Evolution": evolution_as_rotations, "Exp": exp_as_rotations}


# ---- user rules ---------------------------------------------------------------------------


@functools.cache
def _operator_names() -> tuple[str, ...]:
    return tuple(sorted({n for module in (qml.ops, qml) for n in dir(module) if pennylane_operator(n) == n}))


def operator_name(key: Any) -> str:
    """``"MultiRZ"``, ``qml.MultiRZ`` -> ``"MultiRZ"``; an alias (``"X"``, ``qml.X``) -> the name PennyLane's
    operators carry (``"PauliX"``).

    Raises:
        UnsupportedOptionError: a key that names no PennyLane operator (with the closest name there is).
    """
    if isinstance(key, str):
        name = key
    elif isinstance(key, type) and issubclass(key, qml.operation.Operator):
        name = key.__name__
    else:
        raise UnsupportedOptionError(
            f"decompositions key {shown(key)} is neither an operator name nor a PennyLane operator class.",
            'use e.g. decompositions={"MultiRZ": fn} or {qml.MultiRZ: fn}.',
        )
    canonical = pennylane_operator(name)
    if canonical is None:
        close = difflib.get_close_matches(name, _operator_names(), n=1, cutoff=0.75)
        raise UnsupportedOptionError(
            f"decompositions key {name[:80]!r} is not a PennyLane operator"
            + (" (it is not one operator: its instances are named after the operator they hold)." if name in _WRAPPERS else "."),
            (f"did you mean {close[0]!r}? " if close else "")
            + "use the operator's class name as PennyLane spells it, e.g. 'MultiRZ', 'CRot', 'PauliRot'.",
        )
    return canonical


def user_rules(user: Mapping[Any, Callable[..., Any]] | None) -> dict[str, DecompositionRule]:
    """The user's ``decompositions``, by the operator name each key stands for, each value a rule.

    Raises:
        UnsupportedOptionError: a key that names no operator, a value that is not callable, or two keys for one operator.
    """
    rules: dict[str, DecompositionRule] = {}
    keys: dict[str, Any] = {}
    for key, value in (user or {}).items():
        name = operator_name(key)
        if name in keys:
            raise UnsupportedOptionError(
                f"decompositions keys {keys[name]!r} and {key!r} both name {name}; one operator takes one rule.",
                f"keep one of the two rules for {name}.",
            )
        keys[name] = key
        rules[name] = as_rule(value)
    return rules


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
            f"decompositions value {shown(function)} is not callable.",
            "pass a function f(*params, wires, **hyperparameters) returning operators, or a qml.register_resources rule.",
        )

    @qml.register_resources({})
    def rule(*params: Any, wires: Any, **hyperparameters: Any) -> None:
        with qml.QueuingManager.stop_recording():
            ops = function(*params, wires=wires, **hyperparameters)
        for op in ops:
            qml.apply(op)

    rule.__name__ = _name_of(function)
    return rule


def _name_of(function: Callable[..., Any]) -> str:
    """What ``qbackends probe`` calls a user's rule: its qualified name, or "user_rule" for an object without one
    (a callable object whose name is not a string, or raises)."""
    try:
        name = getattr(function, "__qualname__", None)
    except Exception:  # noqa: BLE001 - a user's object's own __getattr__
        name = None
    return name if isinstance(name, str) and name else "user_rule"


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
        adjoint_lowers: declared non-differentiable gates the device's own adjoint lowers (``Backend.adjoint_lowers``).
    """

    fixed: Mapping[str, DecompositionRule]
    alternatives: Mapping[str, tuple[DecompositionRule, ...]]
    declared: DeclaredOperations
    names: tuple[str, ...]
    preferred: frozenset[str] = frozenset()
    adjoint_lowers: frozenset[str] = frozenset()

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

    @functools.cached_property
    def _lowering_plain(self) -> Lowering:
        return Lowering(self, adjoint=False)

    @functools.cached_property
    def _lowering_adjoint(self) -> Lowering:
        return Lowering(self, adjoint=True)

    def lowering(self, adjoint: bool) -> Lowering:
        """The lowering to the kept operators, its solved graphs kept for the device's life."""
        return self._lowering_adjoint if adjoint else self._lowering_plain

    def is_empty(self) -> bool:
        return not self.targets and not self.declared.adjoint_differentiable


def build_ruleset(
    registrations: Iterable[RuleRegistration],
    backend: Backend,
    declared: DeclaredOperations,
    user: Mapping[Any, Callable[..., Any]] | None = None,
    defaults: bool = True,
) -> RuleSet:
    """Combine the registered rules for ``backend`` with the user's."""
    alternatives: dict[str, list[DecompositionRule]] = {}
    names: list[str] = []
    preferred: set[str] = set()
    if defaults:
        for reg in registrations:
            if reg.applies_to(backend.key):
                alternatives.setdefault(reg.operator, []).append(reg.rule)
                names.append(reg.name or f"{reg.operator} -> {getattr(reg.rule, '__name__', 'rule')}")
                preferred |= _outputs(reg)
    user_fixed = user_rules(user)
    exact = {op: rule for op, rule in exact_rules().items() if op not in user_fixed}
    names.extend(f"{op} -> commuting Pauli rotations (exact)" for op in exact)
    names.extend(f"{op} -> {getattr(rule, '__name__', 'rule')} (user)" for op, rule in user_fixed.items())
    fixed = {**exact, **user_fixed}
    for op in fixed:
        alternatives.pop(op, None)
    left = frozenset(backend.adjoint_lowers) - frozenset(fixed) - frozenset(alternatives)  # a rule for one is applied
    if declared.native and declared.adjoint_differentiable:
        names.append(
            f"adjoint: lower {len(set(declared.native) - set(declared.adjoint_differentiable))} declared non-differentiable operators"
            + (f" ({', '.join(sorted(left))}: the device's own adjoint lowers them where trainable)" if left else "")
        )
    return RuleSet(fixed, {k: tuple(v) for k, v in alternatives.items()}, declared, tuple(names), frozenset(preferred), left)


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
    elif adjoint:  # PennyLane's own adjoint miscounts a fixed gate's parameters past one (docs/upstream.md)
        keep = frozenset(n for n in keep if not _several_parameters(n))
    return keep


def _num_params(name: str) -> Any:
    op = getattr(qml.ops, name, None) or getattr(qml, name, None)
    return getattr(op, "num_params", None)


def _parameterless(name: str) -> bool:
    return _num_params(name) == 0


def _several_parameters(name: str) -> bool:
    count = _num_params(name)
    return isinstance(count, int) and count > 1


class Lowering:
    """What ``qml.transforms.decompose`` does with the graph on, for one rule set and gradient method, with
    each graph solved once per set of operator kinds it lowers (a kind: the operator's type and resource
    parameters, all the graph sees of it), and each kind's rule looked up once, not on every execution."""

    def __init__(self, ruleset: RuleSet, adjoint: bool) -> None:
        # Every kept gate costs one pass; the default rules' outputs win ties.
        self.keep = ruleset.kept(adjoint)
        self.gate_set, self._in_gate_set = _resolve_gate_set(
            {name: 0.99 if name in ruleset.preferred else 1.0 for name in self.keep}, None
        )
        self.fixed = dict(ruleset.fixed) or None
        self.alternatives = {k: list(v) for k, v in ruleset.alternatives.items()} or None
        self.solutions: dict[frozenset, tuple[Any, dict]] = {}  # kinds lowered -> (solution, kind -> rule or None)
        # The last circuit lowered, its trainable parameters and the result: PennyLane asks
        # supports_derivatives about a circuit, then preprocesses that same circuit.
        self.last: tuple[Any, tuple, Any] | None = None

    def stops(self, op: Any) -> bool:
        return op.name in self.keep or self._in_gate_set(op)

    def operations(self, operations: list[Any]) -> list[Any]:
        """``operations`` with every one not kept lowered, in order."""
        lowered = [op for op in operations if not self.stops(op)]
        kinds = [_kind(op) for op in lowered]
        key = None if None in kinds else frozenset(kinds)
        solution, rules = self.solutions.get(key) or (None, {})
        if solution is None:
            # strict=False: what the graph cannot lower is left to the device, whose own
            # preprocessing decomposes it or says it cannot.
            solution = _construct_and_solve_decomp_graph(lowered, self.gate_set, 0, False, self.fixed, self.alternatives, False)
            if key is not None:
                self.solutions[key] = solution, rules
        return [new for op in operations for new in self._lower(op, solution, rules)]

    def _lower(self, op: Any, solution: Any, rules: dict) -> list[Any]:
        if self.stops(op):
            return [op]
        kind = _kind(op)
        if kind is None or kind not in rules:
            rule = _plain_rule(op, solution)
            if kind is not None:
                rules[kind] = rule
        else:
            rule = rules[kind]
        if rule is None:  # PennyLane's own path: conditionals, what the graph did not solve, rules with work wires
            return list(
                _operator_decomposition_gen(op, self.stops, num_work_wires=solution.num_work_wires, graph_solution=solution)
            )
        rule, kwargs = rule
        with qml.QueuingManager.stop_recording(), qml.queuing.AnnotatedQueue() as queue:
            rule(*op.parameters, wires=op.wires, **(op.resource_params if kwargs == "resources" else op.hyperparameters))
        return [new for sub in queue.queue for new in self._lower(sub, solution, rules)]


def _kind(op: Any) -> tuple | None:
    """An operator's type and resource parameters, hashable; None where they are not."""
    try:
        kind = (type(op), tuple(sorted(op.resource_params.items())))
        hash(kind)
        return kind
    except Exception:  # noqa: BLE001 - unhashable or unsortable resource parameters: not cached
        return None


def _plain_rule(op: Any, solution: Any) -> tuple[Any, str] | None:
    """The graph's rule for ``op`` and which arguments it takes, where applying it is all PennyLane would do."""
    if isinstance(op, (qml.ops.Conditional, SubroutineOp, Allocate, Deallocate)) or not isinstance(op, qml.operation.Operator):
        return None
    if not solution.is_solved_for(op, solution.num_work_wires):
        return None
    rule = solution.decomposition(op, solution.num_work_wires)
    if rule.get_work_wire_spec(**op.resource_params).total:
        return None
    rep = resource_rep(type(op), **op.resource_params)
    return rule, "resources" if decomps_use_reconstructor(rep.op_type, rep.params) else "hyperparameters"


@qml.transform
def screen_and_lower(tape: qml.tape.QuantumScript, *, device: str, ruleset: RuleSet | None, adjoint: bool) -> tuple[Any, Any]:
    """A device's first preprocessing step: a sampled observable with no outcomes refused (lightning fails on it
    untyped as it runs), then ``lowered`` by the device's rules, if it has any: one step, not two (each step of
    PennyLane's pipeline costs about 20 µs an execution)."""
    check_sampled(tape, device)
    return (tape if ruleset is None else lowered(tape, ruleset, adjoint),), _identity


def lowered(tape: qml.tape.QuantumScript, ruleset: RuleSet, adjoint: bool) -> qml.tape.QuantumScript:
    """``tape`` with the operators ``ruleset`` targets lowered with its rules, by graph decomposition."""
    keep = ruleset.kept(adjoint)
    if all(op.name in keep or (adjoint and _left_to_device(op, ruleset)) for op in tape.operations):
        return _rebindable(tape)
    lowering = ruleset.lowering(adjoint)
    trainable = tuple(tape.trainable_params)
    if (last := lowering.last) is not None and last[0] is tape and last[1] == trainable:
        return last[2]
    with qml.decomposition.toggle_graph_ctx(True), warnings.catch_warnings():
        warnings.simplefilter("ignore", DecompositionWarning)
        warnings.filterwarnings("ignore", message=".*GlobalPhase is not assumed to have a decomposition")
        try:
            result = tape.copy(operations=lowering.operations(tape.operations))
        except RecursionError:  # a rule whose result needs that rule again (a user's rule for RX that returns RX)
            users = sorted(name for name in ruleset.fixed if name not in exact_rules())
            raise UnsupportedCircuitError(
                "Lowering this circuit with its decomposition rules never ends: a rule's result needs a rule again"
                + (f" (the rules given for {', '.join(users)})." if users else "."),
                "give each rule a result in other gates (a rule for RX must not return RX), or leave that rule out.",
            ) from None
    _refuse_unlowerable(result, ruleset, adjoint)
    lowering.last = (tape, trainable, _rebindable(result))
    return lowering.last[2]


def _left_to_device(op: Any, ruleset: RuleSet) -> bool:
    """Whether the device's own adjoint lowers ``op`` (``Backend.adjoint_lowers``): lightning's lowers only an
    operator with a trainable parameter (its stopping condition); a fixed one it keeps, and its adjoint then fails."""
    return op.name in ruleset.adjoint_lowers and any(qml.math.requires_grad(d) for d in op.data)


def _rebindable(tape: qml.tape.QuantumScript) -> qml.tape.QuantumScript:
    """The tape with each evolution left whole at a constant time t as the same operator in the form
    Exp(H, -i·t): PennyLane 0.45 cannot rebind an ``Evolution``'s parameters (docs/upstream.md), and
    its pipeline rebinds every parameter to NumPy before a device runs (an IndexError, even with
    ``diff_method=None``). A trainable time is left as it is: backprop differentiates it as written."""
    ops = [
        qml.exp(op.base, -1j * op.data[0]) if op.name == "Evolution" and not qml.math.requires_grad(op.data[0]) else op
        for op in tape.operations
    ]
    if all(new is old for new, old in zip(ops, tape.operations, strict=True)):
        return tape
    moved, index, shift = {}, 0, 0  # each kept parameter's new index (a replaced op's is constant)
    for old, new in zip(tape.operations, ops, strict=True):
        if new is old:
            moved.update((index + k, index + k + shift) for k in range(len(old.data)))
        index += len(old.data)
        shift += len(new.data) - len(old.data)
    total = len(tape.get_parameters(trainable_only=False))
    moved.update((i, i + shift) for i in range(index, total))  # the observables'
    trainable = [moved[i] for i in tape.trainable_params if i in moved]
    return tape.copy(operations=ops, trainable_params=trainable)


class UnsupportedOperatorError(UnsupportedCircuitError, qml.exceptions.DeviceError):
    """An operator the device can neither run nor lower: qbackends' typed refusal, and PennyLane's ``DeviceError``,
    which PennyLane's own devices raise for the same and PennyLane users catch."""


# Mid-circuit measurements, their conditionals and snapshots are the device pipeline's own business.
_DEVICE_HANDLED = (qml.measurements.MidMeasureMP, qml.ops.Conditional, qml.Snapshot)


def _refuse_unlowerable(tape: qml.tape.QuantumScript, ruleset: RuleSet, adjoint: bool) -> None:
    """A typed refusal for an operator the device can neither run nor lower: not in its declared gate
    set, or, under adjoint differentiation, an evolution left whole (PennyLane 0.45 cannot rebind its
    parameters there and fails with an IndexError)."""
    native = frozenset(ruleset.declared.native)
    for op in tape.operations:
        if isinstance(op, _DEVICE_HANDLED):
            continue
        evolution = op.name in ("Evolution", "Exp") and getattr(op, "base", None) is not None
        unrunnable = bool(native) and op.name not in native and not op.has_decomposition
        if unrunnable or (adjoint and evolution):
            why = (
                "its generator is not a sum of commuting Pauli terms, so no exact gate sequence gives it"
                if evolution
                else "it is not in the device's gate set and has no decomposition"
            )
            raise UnsupportedOperatorError(
                f"{op} cannot run on this device: {why}.",
                "approximate it with qml.TrotterProduct, or use local:pennylane/default.qubit without adjoint (exact matrices)."
                if evolution
                else "decompose it into gates the device has, or use a device whose gate set has it "
                "(local:pennylane/default.qubit applies most operators by their matrix).",
            )


def _identity(results: Any) -> Any:
    return results[0]


# ---- attaching rules to a device ------------------------------------------------------------


@functools.cache
def _with_rules(device_class: Any) -> type:
    """A subclass of ``device_class`` whose preprocessing applies its ``qbackends_rules`` first."""

    def preprocess_transforms(self: Any, execution_config: Any = None) -> Any:
        return _screened(self, device_class.preprocess_transforms(self, execution_config), execution_config)

    def preprocess(self: Any, execution_config: Any = None) -> Any:  # devices written against the older hook
        pipeline, config = device_class.preprocess(self, execution_config)
        return _screened(self, pipeline, config), config

    def supports_derivatives(self: Any, execution_config: Any = None, circuit: Any = None) -> Any:
        # Judge the circuit the device will run: as written when the device takes it (lowering a
        # QAOA template here costs 40 ms a step at 22 wires, and preprocessing lowers it again),
        # else with the rules applied (e.g. CRot, which lightning's adjoint refuses as written).
        supported = device_class.supports_derivatives(self, execution_config, circuit)
        if supported or circuit is None or self.qbackends_rules.is_empty():
            return supported
        circuit = lowered(circuit, self.qbackends_rules, _is_adjoint(execution_config))
        return device_class.supports_derivatives(self, execution_config, circuit)

    # Results as NumPy float64, never Python floats: PennyLane's torch interface turns a Python float
    # into a tensor of torch's default dtype (float32), losing 1e-8 of every value and gradient.
    def execute(self: Any, circuits: Any, execution_config: Any = None) -> Any:
        return _float64(device_class.execute(self, circuits, execution_config))

    def execute_and_compute_derivatives(self: Any, circuits: Any, execution_config: Any = None) -> Any:
        return _float64(device_class.execute_and_compute_derivatives(self, circuits, execution_config))

    def compute_derivatives(self: Any, circuits: Any, execution_config: Any = None) -> Any:
        return _float64(device_class.compute_derivatives(self, circuits, execution_config))

    from pennylane.devices import Device  # PennyLane is imported at the top; this name is only needed here

    # A device overrides either preprocess or preprocess_transforms (PennyLane refuses both): wrap that one.
    legacy = device_class.preprocess is not Device.preprocess
    namespace = {
        ("preprocess" if legacy else "preprocess_transforms"): preprocess if legacy else preprocess_transforms,
        "supports_derivatives": supports_derivatives,
        "execute": execute,
        "__module__": device_class.__module__,
    }
    # Only where the device has its own: PennyLane takes an overridden compute_derivatives to mean the
    # device differentiates, and "best" would then ask a device without a gradient for one.
    if device_class.compute_derivatives is not Device.compute_derivatives:
        namespace["compute_derivatives"] = compute_derivatives
    if device_class.execute_and_compute_derivatives is not Device.execute_and_compute_derivatives:
        namespace["execute_and_compute_derivatives"] = execute_and_compute_derivatives
    return type(device_class.__name__, (device_class,), namespace)


def _screened(device: Any, pipeline: Any, config: Any) -> Any:
    """``pipeline`` with, first, a shift rule's gradient that would be wrong or fail untyped refused (under "best"
    too, which takes one where the device has none), a sampled observable with no outcomes refused (lightning fails
    on it untyped as it runs), then the device's rules applied (where it has any)."""
    ruleset = None if device.qbackends_rules.is_empty() else device.qbackends_rules
    pipeline.insert(
        0, BoundTransform(screen_and_lower, kwargs={"device": device.name, "ruleset": ruleset, "adjoint": _is_adjoint(config)})
    )
    if config is not None and shifted(config.gradient_method):
        kwargs = {"device": device.name, "method": method_name(config.gradient_method), "hadamard": standard_hadamard(config)}
        pipeline.insert(0, BoundTransform(refuse_misdifferentiated, kwargs=kwargs))
    return pipeline


@qml.transform
def refuse_misdifferentiated(tape: Any, *, device: str, method: str, hadamard: bool) -> tuple[Any, Any]:
    """Refuse, typed, a circuit PennyLane's ``method`` (a shift rule; ``hadamard``: its standard Hadamard test)
    would differentiate wrongly or fail on untyped."""
    if reason := misdifferentiated(tape):
        raise refusal(device, reason, f"PennyLane would take {method} (as diff_method='best' does where a device has none)")
    if hadamard and (reason := misread_by_hadamard(tape)):
        raise hadamard_refusal(device, reason)
    return (tape,), lambda results: results[0]


def _float64(result: Any) -> Any:
    """Python floats in a (nested) result as NumPy float64 scalars; everything else as it is."""
    if isinstance(result, float):
        return np.float64(result)
    if isinstance(result, (tuple, list)):
        return type(result)(_float64(r) for r in result)
    return result


def _is_adjoint(execution_config: Any) -> bool:
    return execution_config is not None and execution_config.gradient_method == "adjoint"


def attach(device: Any, ruleset: RuleSet) -> Any:
    """Make every QNode on ``device`` apply ``ruleset``, and refuse typed what the device or PennyLane would fail on
    untyped (``_with_rules``), with rules or without."""
    device.__class__ = _with_rules(type(device))  # type: ignore[arg-type]  # classes are hashable
    device.qbackends_rules = ruleset
    return device
