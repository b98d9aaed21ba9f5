"""What a simulator measures: the measurement processes its capabilities TOML declares, by exact type.

PennyLane's ``validate_measurements`` asks ``isinstance``, and ``DensityMatrixMP`` is a ``StateMP``: a device
that answers ``StateMP`` with the state answered a density matrix with it too. Here a measurement is taken
only if its own class is declared (``[measurement_processes]``, with ``analytic``/``finiteshots`` conditions);
any other that ``pennylane.measurements`` exports is refused by name at preprocessing, so that ``auto`` passes
the device over. A class it does not export (a user's) is taken by its own definition, as default.qubit takes
it: a state measurement analytically by its ``process_state``, a sample measurement with shots by its
``process_samples``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pennylane as qml
import pennylane.measurements as plm
from pennylane.devices.capabilities import ExecutionCondition
from pennylane.measurements import ExpectationMP, VarianceMP

from ..errors import UnsupportedCircuitError


class UnsupportedMeasurementError(UnsupportedCircuitError, qml.exceptions.DeviceError):
    """A measurement the device does not compute: qbackends' typed refusal, and PennyLane's ``DeviceError``, which
    PennyLane's own devices raise for the same and PennyLane users catch."""


REFERENCE = "local:pennylane/default.qubit"  # computes every measurement PennyLane has


def computed(declared: Mapping[str, Sequence[ExecutionCondition]], shots: bool) -> list[str]:
    """The measurement process classes ``declared`` computes with shots (``shots``) or analytically."""
    excluded = ExecutionCondition.ANALYTIC_MODE_ONLY if shots else ExecutionCondition.FINITE_SHOTS_ONLY
    return sorted(name for name, conditions in declared.items() if excluded not in conditions)


@qml.transform
def refuse_undeclared(tape: Any, *, device: str, declared: Mapping[str, Sequence[ExecutionCondition]]) -> tuple[Any, Any]:
    """``check_declared`` as a preprocessing step."""
    check_declared(tape, device, declared)
    return (tape,), lambda results: results[0]


def check_declared(tape: Any, device: str, declared: Mapping[str, Sequence[ExecutionCondition]]) -> None:
    """Refuse, naming it, a measurement whose exact class ``declared`` does not list for this shot mode (and shots,
    where it lists none for them)."""
    shots = bool(tape.shots)
    choices = computed(declared, shots)
    if shots and not choices:
        raise UnsupportedMeasurementError(
            f"{device} is analytic; this circuit asks for shots={tape.shots.total_shots}.",
            f"drop shots (shots=None), or use a sampling backend such as {REFERENCE} (auto picks one).",
        )
    for m in tape.measurements:
        name = type(m).__name__
        if name not in choices and not _by_its_own_definition(m, shots):
            mode = f"with shots={tape.shots.total_shots}" if shots else "analytically (shots=None)"
            other = "" if name not in declared else " (drop shots)" if shots else " (give shots)"
            raise UnsupportedMeasurementError(
                f"{device} does not compute {m} ({name}) {mode}; it computes {', '.join(choices)} {mode}.",
                f"measure one of those{other}, or use a backend that computes {name}, such as {REFERENCE} (auto picks one).",
            )
    check_sampled(tape, device)


def check_sampled(tape: Any, device: str) -> None:
    """Refuse, naming it and the shots, a sampled measurement of an observable with no diagonalizing gates (a
    ``SparseHamiltonian``): there are no outcomes to sample. default.qubit refuses it by the same rule; lightning
    and PennyLane's sampler fail on it untyped, at execution."""
    if not tape.shots:
        return
    for m in tape.measurements:
        if m.obs is None or (lacking := unsampleable(m.obs)) is None:
            continue
        of = lacking if lacking == m.obs.name else f"{m.obs.name} (its {lacking})"
        raise UnsupportedMeasurementError(
            f"{device} cannot sample {type(m).__name__} of {of} with shots={spelled_shots(tape.shots)}: {lacking} has "
            "no diagonalizing gates, so there are no outcomes to sample.",
            "drop shots (shots=None) for its exact value, or measure its matrix as qml.Hermitian(matrix, wires) or "
            "as a Pauli sum (qml.pauli_decompose(matrix)), which can be sampled.",
        )


def unsampleable(obs: Any) -> str | None:
    """The name of the operator in ``obs`` without diagonalizing gates (so that ``obs`` cannot be sampled), or None;
    default.qubit's rule (``observable_accepts_sampling``), naming what it lacks."""
    if isinstance(obs, qml.ops.CompositeOp):
        return next((name for o in obs.operands if (name := unsampleable(o)) is not None), None)
    if isinstance(obs, qml.ops.SymbolicOp):
        return unsampleable(obs.base)
    return None if obs.has_diagonalizing_gates else obs.name


def spelled_shots(shots: Any) -> Any:
    """Shots as a user gives them: a number, or a shot vector as its list of numbers."""
    return list(shots) if shots.has_partitioned_shots else shots.total_shots


@functools.cache
def _pennylanes() -> frozenset[type]:
    """The measurement process classes ``pennylane.measurements`` exports."""
    return frozenset(c for c in vars(plm).values() if isinstance(c, type) and issubclass(c, plm.MeasurementProcess))


def _by_its_own_definition(m: Any, shots: bool) -> bool:
    """A measurement class PennyLane does not export, computed by its own ``process_state`` or ``process_samples``."""
    if type(m) in _pennylanes():
        return False
    return isinstance(m, plm.SampleMeasurement) if shots else isinstance(m, plm.StateMeasurement)


def _pauli_variance(m: Any) -> bool:
    return type(m) is VarianceMP and m.obs is not None and m.obs.pauli_rep is not None


def _square(obs: Any) -> Any:
    """H² as a Pauli sum, its (real: H² is Hermitian) coefficients; the products' imaginary parts cancel in pairs.
    A multiple of the identity (H a Pauli word) is that number: nothing to measure."""
    square = obs.pauli_rep @ obs.pauli_rep
    square.simplify()
    real = qml.pauli.PauliSentence({word: qml.math.real(c) for word, c in square.items()})
    if set(real) <= {qml.pauli.PauliWord({})}:
        return real.get(qml.pauli.PauliWord({}), 0.0)
    return real.operation(wire_order=obs.wires)


@qml.transform
def variances_as_expectations(tape: Any) -> tuple[Any, Any]:
    """Analytic variances of Pauli observables (words, sums, products) as ⟨H²⟩ - ⟨H⟩²: two expectations the
    engine takes on its own path (a sum of non-commuting terms too) and differentiates; H² is a Pauli sum."""
    if tape.shots or not any(_pauli_variance(m) for m in tape.measurements):
        return (tape,), lambda results: results[0]
    measurements, plan = [], []  # plan: (index of ⟨H²⟩ or None, its value then, index of ⟨H⟩), or an index kept
    for m in tape.measurements:
        if _pauli_variance(m):
            square = _square(m.obs)
            if isinstance(square, qml.operation.Operator):
                measurements.append(ExpectationMP(square))
                plan.append((len(measurements) - 1, None, len(measurements)))
            else:
                plan.append((None, square, len(measurements)))
            measurements.append(ExpectationMP(m.obs))
        else:
            plan.append(len(measurements))
            measurements.append(m)

    def variances(results: Any) -> Any:
        values = results[0] if len(measurements) > 1 else (results[0],)
        out = []
        for p in plan:
            if isinstance(p, tuple):
                at, constant, h = p
                out.append((values[at] if at is not None else constant) - values[h] ** 2)
            else:
                out.append(values[p])
        return out[0] if len(out) == 1 else tuple(out)

    return (tape.copy(measurements=measurements),), variances


def _sampled_terms(m: Any) -> list[tuple[Any, Any]] | None:
    """A sampled expectation of a Pauli observable as (coefficient, word) pairs (the identity's word None), and a
    variance of a multiple of one word as that word's, once; None for any other measurement."""
    if type(m) not in (ExpectationMP, VarianceMP) or m.obs is None or m.obs.pauli_rep is None:
        return None
    words = [(c, w) for w, c in m.obs.pauli_rep.items()]
    if type(m) is VarianceMP and len(words) > 1:
        return None  # the sampler diagonalizes a sum's matrix: it keeps that
    if len(words) == 1 and words[0][0] == 1 and words[0][1] and m.obs.name != "LinearCombination":
        return None  # already a word
    return [(c, qml.pauli.PauliWord(w).operation(wire_order=m.obs.wires) if w else None) for c, w in words]


@qml.transform
def sampled_pauli_terms(tape: Any) -> tuple[Any, Any]:
    """Sampled expectations of Pauli sums as their words' expectations, recombined, and a variance of c·P as
    c²·Var(P) (of c·I as 0): PennyLane 0.45's sampler loses the results after a sum, or a wire-less identity,
    beside other measurements (``docs/upstream.md``)."""
    if not tape.shots:  # analytic: nothing to do (and a 300-term sum's words cost milliseconds to build)
        return (tape,), lambda results: results[0]
    plans = [_sampled_terms(m) for m in tape.measurements]
    if all(p is None for p in plans):
        return (tape,), lambda results: results[0]
    measurements, recipes = [], []  # recipe: the index of a measurement kept, or [(coefficient, index or None)]
    for m, plan in zip(tape.measurements, plans, strict=True):
        if plan is None:
            recipes.append(len(measurements))
            measurements.append(m)
            continue
        recipe = []
        for c, word in plan:
            if word is not None:
                measurements.append(type(m)(word))
            recipe.append((c, len(measurements) - 1 if word is not None else None))
        recipes.append((type(m), recipe))
    if not measurements:  # only constants: a measurement the sampler takes, its result unused
        measurements.append(qml.probs(wires=tape.wires[:1]))

    def value(row: tuple, recipe: Any) -> Any:
        if isinstance(recipe, int):
            return row[recipe]
        kind, terms = recipe
        if kind is VarianceMP:  # one term: c² Var(P), and 0 for the identity
            c, at = terms[0]
            return np.float64(0.0) if at is None else qml.math.real(c) ** 2 * row[at]
        return sum((qml.math.real(c) * (row[at] if at is not None else 1.0) for c, at in terms), np.float64(0.0))

    def recombined(results: Any) -> Any:
        rows = results[0] if tape.shots.has_partitioned_shots else (results[0],)
        out = []
        for row in rows:
            row = (row,) if len(measurements) == 1 else tuple(row)
            values = tuple(value(row, recipe) for recipe in recipes)
            out.append(values[0] if len(values) == 1 else values)
        return tuple(out) if tape.shots.has_partitioned_shots else out[0]

    return (tape.copy(measurements=measurements),), recombined
