"""What the decision reads of a circuit (``Shape``) and what a backend's step costs (``Costs``, ``predict``).

``Shape`` is read from a tape once per circuit structure (``shape_of``; ``as_run`` from one backend's
preprocessing); ``Costs`` are measured (the shipped model, ``data/auto-model.json``, from the 2-core reference
machine; ``qbackends calibrate --workload circuits`` here); ``predict`` turns both into seconds. PennyLane is
imported only where a tape is read.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from .decisionstore import plain

# Gates that only multiply amplitudes by phases: fused.qubit merges runs of them into one pass.
DIAGONAL = frozenset(
    {
        "RZ", "PhaseShift", "S", "T", "Z", "PauliZ", "CZ", "CCZ", "IsingZZ", "MultiRZ", "ControlledPhaseShift",
        "CPhase", "CRZ", "U1", "DiagonalQubitUnitary", "GlobalPhase", "Identity", "PCPhase", "Adjoint(S)", "Adjoint(T)",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Shape:
    """What the decision reads of a circuit.

    Attributes:
        wires: qubits of the state.
        batch: rows of a parameter broadcast (1 without one).
        gates: operations, templates expanded; ``diagonal`` of them phase-only, in ``runs`` runs of consecutive ones.
        parameters: trainable parameters (the gradient's length).
        terms: Pauli terms measured (a Hamiltonian's count).
        shots: finite shots, or None for analytic results.
        gradient: the differentiation method asked for (None: values only).
        groups: executions a backend makes of each row (its preprocessing splits the measured terms into
            groups it measures one by one); 1 where it measures them all in one execution.
        native: operations per execution after a backend's preprocessing (its own gate set: a
            DoubleExcitation is one operation on lightning, many on others); None: ``gates``.
    """

    wires: int
    batch: int = 1
    gates: int = 0
    diagonal: int = 0
    runs: int = 0
    parameters: int = 0
    terms: int = 1
    shots: int | None = None
    gradient: str | None = None
    groups: int = 1
    native: int | None = None

    def describe(self) -> str:
        batch = f", batch {self.batch}" if self.batch > 1 else ""
        grad = f", {self.gradient} gradient of {self.parameters} parameters" if self.gradient else ", no gradient"
        shots = f", {self.shots} shots" if self.shots else ""
        diagonal = f"{self.diagonal} diagonal in {self.runs} runs"
        return f"{self.wires} wires{batch}, {self.gates} gates ({diagonal}), {self.terms} terms{grad}{shots}"


def shape_of(tape: Any, wires: int, gradient: Any, trainable: Sequence[int]) -> Shape:
    """The ``Shape`` of a tape (templates expanded: call it once per circuit structure)."""
    import pennylane as qml  # a tape is read here: PennyLane is loaded already; importing costs stays light
    from pennylane.devices.preprocess import decompose

    try:
        (expanded,), _ = decompose(tape, stopping_condition=lambda op: len(op.wires) <= 2 or not op.has_decomposition)
        ops = expanded.operations
    except Exception:  # noqa: BLE001 - a template that does not expand here: count it as written
        ops = tape.operations
    terms = 0
    for m in tape.measurements:
        obs = getattr(m, "obs", None)
        try:
            terms += len(obs.terms()[0]) if isinstance(obs, (qml.ops.Sum, qml.ops.SProd, qml.ops.Prod)) else 1
        except Exception:  # noqa: BLE001 - an observable without terms
            terms += 1
    method = gradient if isinstance(gradient, str) or gradient is None else getattr(gradient, "__name__", "transform")
    diagonal = [_diagonal(op) for op in ops]
    return Shape(
        wires=wires,
        batch=tape.batch_size or 1,
        gates=len(ops),
        diagonal=sum(diagonal),
        runs=sum(d and (i == 0 or not diagonal[i - 1]) for i, d in enumerate(diagonal)),
        parameters=len(trainable) if method else 0,
        terms=max(terms, 1),
        shots=tape.shots.total_shots if tape.shots else None,
        gradient=method,
    )


def as_run(shape: Shape, tapes: Sequence[Any]) -> Shape:
    """``shape`` as one backend runs it: ``tapes`` are what that backend's preprocessing made of the circuit
    (its own operations; a broadcast split into rows, measured terms split into groups)."""
    rows = shape.batch if shape.batch > 1 and all(t.batch_size is None for t in tapes) else 1
    native = round(sum(len(t.operations) for t in tapes) / max(len(tapes), 1))
    return replace(shape, groups=max(len(tapes) // rows, 1), native=native)


def _diagonal(op: Any) -> bool:
    """Whether a gate only multiplies amplitudes by phases (its matrix is diagonal)."""
    if op.name in DIAGONAL:
        return True
    if op.name == "PauliRot":
        return set(op.hyperparameters["pauli_word"]) <= {"Z", "I"}
    if len(op.wires) > 2 or not op.has_matrix or op.batch_size:
        return False
    import numpy as np  # as in shape_of: only where a tape is read
    import pennylane as qml

    try:  # at a generic angle: RX(0) is diagonal, RX(x) is not
        generic = qml.ops.functions.bind_new_parameters(op, [np.full(np.shape(d), 0.7311) for d in op.data])
        matrix = np.asarray(generic.matrix(), dtype=complex)
    except Exception:  # noqa: BLE001 - an operator whose matrix needs more than its data
        return False
    return bool(np.allclose(matrix, np.diag(np.diag(matrix))))


def structure_key(tape: Any, trainable: Sequence[int], gradient: Any, observables: ObservableKeys) -> tuple[Any, ...]:
    """What makes two circuits the same for the decision: operations and wires, parameter shapes, measurements.
    Computed on every execution, so kept cheap (tens of microseconds for a few hundred gates). A stored decision is
    keyed by its digest (``decisionstore.stable_digest``): none where a part means something in this process only."""
    ops = tuple((op.name, op.wires.labels, tuple(getattr(d, "shape", ()) for d in op.data)) for op in tape.operations)
    measurements = tuple((type(m).__name__, m.wires.labels, observables.key(m.obs)) for m in tape.measurements)
    method = str(gradient)  # a transform by its name; a function by its address, which means nothing in another process
    return ops, measurements, tape.shots.total_shots, tuple(trainable), ProcessOnly(method) if " at 0x" in method else method


def _stable_observable(obs: Any) -> Any:
    if obs is None:
        return None
    operands = getattr(obs, "operands", None)
    if isinstance(operands, (list, tuple)):  # a sum or product of terms
        return [obs.name, [_stable_observable(o) for o in operands]]
    base = getattr(obs, "base", None)
    if base is not None:  # a scalar times, a power, an adjoint or an exponential of an observable
        return [obs.name, _data_digest(obs.data), _stable_observable(base)]
    settings = [[k, v] for k, v in sorted(obs.hyperparameters.items()) if plain(v)]
    return [obs.name, list(obs.wires.labels), _data_digest(obs.data), settings]


def _frozen_list(value: Any) -> Any:
    return tuple(_frozen_list(v) for v in value) if isinstance(value, list) else value


def _data_digest(data: Sequence[Any]) -> str:
    import hashlib

    import numpy as np
    import pennylane as qml  # a tape is read here: PennyLane is loaded already

    digest = hashlib.sha256()
    for d in data:
        if hasattr(d, "toarray"):  # a sparse matrix: where its values are, then the values
            d = d.tocsr()
            digest.update(np.asarray(d.indptr, dtype=np.int64).tobytes() + np.asarray(d.indices, dtype=np.int64).tobytes())
            d = d.data
        digest.update(np.ascontiguousarray(np.asarray(qml.math.unwrap(d), dtype=complex)).tobytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class ProcessOnly:
    """A key part that means the same only within this process (PennyLane's hash of an observable)."""

    value: Any


class ObservableKeys:
    """An observable's key (name, wires, a digest of its data: ``_stable_observable``), kept while the observable
    lives: a Hamiltonian of many terms is read once, not on every execution (a user's circuit measures the same
    object each time)."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, int]] = {}

    def key(self, obs: Any) -> Any:
        if obs is None:
            return None
        known = self._known.get(id(obs))
        if known is not None and known[0]() is obs:
            return known[1]
        try:
            key = _frozen_list(_stable_observable(obs))  # by name, wires and a digest of its data: quicker than
        except Exception:  # noqa: BLE001 - (traced data)                    PennyLane's hash, which prints arrays
            key = ProcessOnly(obs.hash)
        try:
            ref = weakref.ref(obs)
        except TypeError:  # not weakly referable: read each time
            return key
        if len(self._known) > 256:
            self._known.clear()
        self._known[id(obs)] = (ref, key)
        return key


@dataclass(frozen=True)
class Costs:
    """One backend's measured costs (seconds), from which a step is predicted.

    Attributes:
        execution: fixed cost of one device call (preprocessing, binding, results).
        row: cost of each row a broadcast batch is split into (0 where the backend runs the batch at once).
        gate: per gate and amplitude; ``diagonal`` per diagonal gate and amplitude; ``run`` per run of
            consecutive diagonal gates and amplitude (a backend that merges a run pays one pass for it).
        term: per measured Pauli term and amplitude.
        op: the fixed cost of each gate (PennyLane's and the binding's share), whatever the state's size.
        splits_batch: whether a broadcast batch runs as one circuit per row (lightning, fused.qubit) rather than at once.
        gradient: the step with an adjoint gradient, as a multiple of the forward step.
        backprop: the same for backpropagation through the ML framework (default.qubit).
    """

    execution: float
    row: float
    gate: float
    diagonal: float
    term: float
    run: float = 0.0
    op: float = 0.0
    splits_batch: bool = True
    gradient: float = 3.0
    backprop: float | None = None


@cache
def shipped_model() -> dict[str, Costs]:
    """The cost model measured on the 2-core reference machine (``benchmarks/fit_auto_model.py``)."""
    data = json.loads(resources.files("qbackends").joinpath("data/auto-model.json").read_text())
    return {key: Costs(**values) for key, values in data["backends"].items()}


def predict(costs: Costs, shape: Shape, gradient_method: str | None) -> float:
    """Predicted seconds of one step of ``shape`` on a backend with ``costs``."""
    amplitudes = float(2**shape.wires)
    mixing = shape.gates - shape.diagonal
    per_amplitude = mixing * costs.gate + shape.diagonal * costs.diagonal + shape.runs * costs.run + shape.terms * costs.term
    work = shape.batch * amplitudes * per_amplitude
    fixed = (shape.gates if shape.native is None else shape.native) * costs.op
    if costs.splits_batch:  # each row is its own circuit: every fixed cost again
        step = costs.execution + shape.batch * (costs.row + fixed) + work
    else:
        step = costs.execution + shape.batch * costs.row + fixed + work
    step *= shape.groups
    if gradient_method in ("adjoint", "device"):
        step *= costs.gradient
    elif gradient_method == "backprop":
        step *= costs.backprop or costs.gradient
    elif gradient_method:  # parameter-shift and other transforms: two executions per parameter
        step *= 1 + 2 * shape.parameters
    return step
