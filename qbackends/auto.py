"""Which backend runs a circuit fastest here: the one place qbackends decides.

``auto`` decides per circuit. It reads what the circuit says (``Shape``: wires, broadcast batch, gate mix,
parameters, observables, shots, the gradient asked for), predicts each candidate's step from a cost
model measured on the reference machine (``data/auto-model.json``), and, where the step is cheap
enough to try, runs the circuit on the close contenders and keeps the fastest. The decision is made
once per circuit structure and kept in the registry; ``qbackends probe auto`` explains the rules.
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

from .backend import Backend
from .errors import EnvironmentSettingError, QBackendsError

log = logging.getLogger("qbackends")

EXCLUDE_ENV = "QBACKENDS_AUTO_EXCLUDE"
RULES = (
    "auto decides per circuit structure, once per process: it reads the circuit (wires, broadcast batch, gates and how "
    "many are diagonal, measured terms, trainable parameters, shots, the gradient asked for), predicts each backend's "
    "step from the cost model below (measured on the 2-core reference machine: python -m qbackends.costmodel), tries "
    "the backends predicted within 4x of the best on the circuit itself when that costs under about 3 s (with finite "
    "shots on instances seeded apart, so the samples a seeded program gets are untouched; never a backend with a "
    "one-time cost still to pay), and takes the fastest measured, else the best "
    "predicted that accepts the circuit. A backend that refuses the circuit is passed over. QBACKENDS_AUTO_EXCLUDE "
    "(device strings, comma-separated) or get_device('auto', exclude=[...]) removes backends; GPUs are weighed from "
    "their min_auto_wires. dev.last_choice and dev.decisions show what it took and why; each new decision is logged "
    "once at INFO on the 'qbackends' logger."
)
TRIAL_BUDGET_SECONDS = 3.0  # at most this much trying, once per circuit structure
CONTENDERS = 4.0  # a backend is tried when predicted within this factor of the best prediction
TRIAL_ROUNDS = 7  # at most: each contender runs this often, interleaved; the first round (allocation, caches) is not counted
TIMED_ROUNDS = 2  # at least, within the budget or not
TRIAL_SHARE = 0.05  # more rounds only while the trial stays within this share of the run's expected steps

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
    import pennylane as qml
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
    import numpy as np
    import pennylane as qml

    try:  # at a generic angle: RX(0) is diagonal, RX(x) is not
        generic = qml.ops.functions.bind_new_parameters(op, [np.full(np.shape(d), 0.7311) for d in op.data])
        matrix = np.asarray(generic.matrix(), dtype=complex)
    except Exception:  # noqa: BLE001 - an operator whose matrix needs more than its data
        return False
    return bool(np.allclose(matrix, np.diag(np.diag(matrix))))


def structure_key(tape: Any, trainable: Sequence[int], gradient: Any, observables: ObservableKeys) -> tuple[Any, ...]:
    """What makes two circuits the same for the decision: operations and wires, parameter shapes, measurements.
    Computed on every execution, so kept cheap (tens of microseconds for a few hundred gates)."""
    ops = tuple((op.name, op.wires.labels, tuple(getattr(d, "shape", ()) for d in op.data)) for op in tape.operations)
    measurements = tuple((type(m).__name__, m.wires.labels, observables.key(m.obs)) for m in tape.measurements)
    return ops, measurements, tape.shots.total_shots, tuple(trainable), str(gradient)


class ObservableKeys:
    """PennyLane's hash of an observable, kept while the observable lives: a Hamiltonian of many terms is
    hashed once, not on every execution (a user's circuit measures the same object each time)."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, int]] = {}

    def key(self, obs: Any) -> int | None:
        if obs is None:
            return None
        import weakref

        known = self._known.get(id(obs))
        if known is not None and known[0]() is obs:
            return known[1]
        try:
            ref = weakref.ref(obs)
        except TypeError:  # not weakly referable: hashed each time
            return int(obs.hash)
        if len(self._known) > 256:
            self._known.clear()
        self._known[id(obs)] = (ref, int(obs.hash))
        return self._known[id(obs)][1]


# ---- the candidates -------------------------------------------------------------------------


def may_take(backend: Backend) -> bool:
    """Whether ``auto`` may take a backend at all: not marked "by name only" (a negative preference), analytic,
    and a state vector (the cost model's kind)."""
    return backend.preference >= 0 and not backend.needs_shots and backend.state_copies is not None


def candidates(
    registry: Any,
    wires: int | None,
    precision: str = "c128",
    diff_method: str | None = "adjoint",
    ignore_memory: bool = False,
    exclude: Iterable[str] = (),
    shots: Any = None,
) -> list[Backend]:
    """The backends ``auto`` weighs for circuits of ``wires`` qubits, in order of preference: those that run here
    and fit, GPUs only from their ``min_auto_wires``, less the excluded ones.

    Raises:
        BackendUnavailableError, InsufficientMemoryError: when none does (each one's reason is listed).
        UnsupportedOptionError: an excluded name that is not a device string.
    """
    from .device import facts_for, screen

    skip = excluded(also=exclude)
    chain = [
        b
        for b in sorted(registry.backends.values(), key=lambda b: -b.preference)
        if may_take(b) and not matches(b, skip) and (wires is None or wires >= b.min_auto_wires)
    ]
    if not chain:
        from .errors import BackendUnavailableError

        raise BackendUnavailableError(
            f"auto has no backend to weigh: every one is excluded ({', '.join(sorted(skip))}).",
            f"remove some from {EXCLUDE_ENV} or exclude=.",
        )
    fit, _ = screen(chain, wires, precision, diff_method, ignore_memory, facts_for(registry), every=True)
    return [choice.backend for choice in fit]


def without_circuit(registry: Any, facts: Any, wires: int | None) -> list[Backend]:
    """What ``auto`` takes when it is told no circuit, only a wire count (``choose("auto", n)``, a job's check that
    something runs here), best first: the fastest at this size in a workload profile measured on this machine
    (``qbackends calibrate --workload qaoa``), then the documented preference (GPUs only from their
    ``min_auto_wires``). Circuits themselves are decided by ``decide``."""
    from . import calibration, capabilities

    eligible = [b for b in registry.backends.values() if b.generic_auto]
    size = wires or 0
    eligible.sort(key=lambda b: (size >= b.min_auto_wires, b.preference), reverse=True)
    profile = calibration.load_profile(facts) if wires is not None else None
    if profile is not None:
        runnable = [b for b in eligible if capabilities.evaluate(b, facts).ok]
        best = calibration.fastest(profile, runnable, size)
        if best is not None:
            eligible.remove(best)
            eligible.insert(0, best)
    return eligible


DEVICE_GRADIENTS = ("adjoint", "backprop", "device", "best")
BACKPROP = frozenset({"pennylane/default.qubit"})  # backends whose results an ML framework differentiates through


def gradient_methods(backends: Sequence[Backend], requested: Any, shots: bool) -> tuple[dict[str, str | None], dict[str, str]]:
    """Backend key -> the gradient method it would use for a circuit asking for ``requested`` (what its
    ``setup_execution_config`` makes of "best"), without building it; and why the others cannot give it.

    Every state-vector backend here differentiates by adjoint (analytic only); default.qubit also by
    backprop; a gradient transform (parameter-shift, finite-diff, ...) runs on any of them.
    """
    methods: dict[str, str | None] = {}
    refused: dict[str, str] = {}
    name = requested if isinstance(requested, str) or requested is None else getattr(requested, "__name__", "transform")
    for backend in backends:
        backprop = backend.key in BACKPROP
        if name is None or name not in DEVICE_GRADIENTS:
            methods[backend.key] = name
        elif name == "best":
            methods[backend.key] = "backprop" if backprop else "parameter-shift" if shots else "adjoint"
        elif name == "backprop" and not backprop:
            refused[backend.key] = "no backprop gradient (only default.qubit's results are differentiable by the ML framework)"
        elif name in ("adjoint", "device") and shots:
            refused[backend.key] = f"no {name} gradient with finite shots"
        else:
            methods[backend.key] = name if name != "device" else "adjoint"
    return methods, refused


# ---- the cost model --------------------------------------------------------------------------


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


def model(registry: Any) -> dict[str, Costs]:
    """The cost model ``auto`` predicts with: the shipped one, each backend measured on this machine
    (``qbackends calibrate --workload circuits``) in its place; read once per registry."""
    if registry.auto_model is None:
        from .calibration import load_model
        from .device import facts_for

        registry.auto_model = {**shipped_model(), **load_model(facts_for(registry))}
    return registry.auto_model


BACKPROP_FACTOR = 3.0  # a backprop step against its forward pass alone, for a backend the model has not measured


def backprop_factor(registry: Any, key: str) -> float:
    """A backprop step against its forward pass (what a trial times: the backward pass is the ML framework's)."""
    costs = model(registry).get(key)
    return costs.backprop if costs is not None and costs.backprop else BACKPROP_FACTOR


def log_decision(decision: Decision, backend: Backend, precision: str = "c128") -> None:
    """One line the first time ``auto`` takes a backend for a circuit structure."""
    log.info("qbackends: %s", decision.explain())


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


# ---- the decision ----------------------------------------------------------------------------


@dataclass
class Decision:
    """The backend ``auto`` took for one circuit structure, and why."""

    backend: str
    predicted: dict[str, float] = field(default_factory=dict)
    measured: dict[str, float] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    shape: Shape | None = None

    def explain(self) -> str:
        def seconds(s: float) -> str:
            return f"{s * 1e3:.3g} ms"

        def predicted(k: str, p: float) -> str:
            return f"{k} {seconds(p)} predicted"

        others = [
            f"{k} {seconds(self.measured[k])} measured" if k in self.measured else predicted(k, p)
            for k, p in sorted(self.predicted.items(), key=lambda kv: self.measured.get(kv[0], kv[1]))
            if k != self.backend
        ]
        took = self.measured.get(self.backend, self.predicted.get(self.backend))
        how = "measured" if self.backend in self.measured else "predicted"
        text = f"auto: {self.backend} ({seconds(took) + ' ' + how if took is not None else 'only candidate'})"
        if self.shape is not None:
            text += f" for {self.shape.describe()}"
        if others:
            text += "; runners-up: " + ", ".join(others)
        if self.refused:
            text += "; refused by " + ", ".join(f"{k} ({why})" for k, why in self.refused.items())
        return text


def excluded(environ: dict[str, str] | None = None, also: Iterable[str] = ()) -> set[str]:
    """Backend keys removed from ``auto`` by ``QBACKENDS_AUTO_EXCLUDE`` (comma-separated device strings) and ``also``."""
    from .devicestring import parse
    from .errors import DeviceStringError, UnsupportedOptionError

    text = (os.environ if environ is None else environ).get(EXCLUDE_ENV, "")
    if isinstance(also, str) or not isinstance(also, Iterable):
        raise UnsupportedOptionError(
            f"exclude={also!r:.80} is not a list of device strings.", "pass e.g. exclude=['local:pennylane/lightning.qubit']."
        )
    keys = set()
    for item, source in [*((t, EXCLUDE_ENV) for t in text.split(",")), *((a, "exclude") for a in also)]:
        if not isinstance(item, str):
            raise UnsupportedOptionError(f"exclude holds {item!r:.60}, not a device string.", "pass device strings only.")
        if item.strip():
            try:
                spec = parse(item.strip())
            except DeviceStringError as exc:
                raise DeviceStringError(f"{exc.message.rstrip('.')} (in {source}).", exc.fix) from None
            keys.add(f"{spec.provider}/{spec.simulator}" if spec.provider else spec.simulator)
    return keys


def matches(backend: Backend, keys: set[str]) -> bool:
    return backend.key in keys or backend.simulator in keys or backend.device_name in keys


def decide(
    shape: Shape,
    gradient_methods: dict[str, str | None],
    candidates: Sequence[Backend],
    model: dict[str, Costs],
    measure: Callable[[str], float] | None,
    steps: int = 100,
    accepts: Callable[[str], None] | None = None,
    precision: str = "c128",
    runs: dict[str, Shape] | None = None,
) -> Decision:
    """The fastest candidate for ``shape``.

    Args:
        shape: the circuit.
        gradient_methods: backend key -> the gradient method it would use for this circuit (what its
            ``setup_execution_config`` resolves "best" to).
        candidates: backends that can take this circuit here, in order of preference.
        model: measured costs by backend key; a backend without any (a plugin's, a GPU) is tried when trying is
            cheap, else taken only after every measured one.
        measure: ``measure(key)`` runs the circuit once on that backend and returns its seconds, raising
            for a backend that refuses it; None: decide on predictions alone.
        steps: how often the circuit will run: trials stay a small share of that.
        accepts: ``accepts(key)`` raises for a backend whose preprocessing refuses the circuit: a backend
            taken without a trial is checked with it first, and the next best taken if it refuses.
        precision: the amplitudes asked for.
        runs: backend key -> ``shape`` as that backend runs it (``as_run``), where its preprocessing was seen.
    """
    predicted = {}
    for backend in candidates:
        costs = model.get(backend.key)
        seen = (runs or {}).get(backend.key, shape)
        predicted[backend.key] = predict(costs, seen, gradient_methods.get(backend.key)) if costs else math.inf
    order = sorted((b.key for b in candidates), key=lambda k: predicted[k])  # stable: preference breaks ties
    decision = Decision(order[0], predicted={k: v for k, v in predicted.items() if math.isfinite(v)}, shape=shape)
    best = predicted[order[0]]
    # Close contenders are tried; so is a backend the model has not measured (a plugin's, a GPU), when trying is cheap.
    cheap = best * (TIMED_ROUNDS + 1) * 2 < TRIAL_BUDGET_SECONDS
    contenders = [k for k in order if predicted[k] <= CONTENDERS * best or (not math.isfinite(predicted[k]) and cheap)]
    if measure is None or len(contenders) < 2:
        return _first_accepted(decision, order, accepts)
    return _tried(decision, order, contenders, measure, accepts, steps)


def _tried(
    decision: Decision,
    order: Sequence[str],
    contenders: Sequence[str],
    measure: Callable[[str], float],
    accepts: Callable[[str], None] | None,
    steps: int = 100,
) -> Decision:
    """The contenders run in turn: a first round that warms up (and drops the refusing), a timed round after which
    the clearly slower leave (over ``CONTENDERS`` x the fastest), then more while the budget lasts; the lowest
    median is taken (not the lowest time: a backend whose times scatter, as lightning.kokkos' do on a busy
    machine, is not taken for its one lucky round). More rounds than ``TIMED_ROUNDS`` run while the trial stays
    within ``TRIAL_BUDGET_SECONDS`` and ``TRIAL_SHARE`` of the run's expected ``steps``. Past
    ``TRIAL_BUDGET_SECONDS``, a round stops after its first contender: warm-ups go in order of prediction, timed rounds quickest first (a slow
    backend the model mispredicted costs its warm-up, not the whole trial again)."""
    timed: dict[str, list[float]] = {}
    last: dict[str, float] = {}  # each contender's latest time: a round runs the quickest first
    spent, budget = 0.0, TRIAL_BUDGET_SECONDS
    for round_ in range(TRIAL_ROUNDS):
        if round_ > 1 and len(timed) < 2 or round_ > TIMED_ROUNDS and spent > budget:
            break
        keys = [k for k in contenders if k not in decision.refused] if round_ == 0 else sorted(timed, key=last.__getitem__)
        for i, key in enumerate(keys):
            if i > 0 and spent > TRIAL_BUDGET_SECONDS:
                break  # over budget: the rest of this round (the slowest so far) is left out
            try:
                seconds = measure(key)
            except EnvironmentSettingError:
                raise  # the user's setting, not this backend's refusal
            except Exception as exc:  # noqa: BLE001 - a backend that refuses this circuit is passed over
                if _refusal(exc):
                    decision.refused[key] = reason(exc)
                timed.pop(key, None)  # (another failure is the trial's: the backend is left to its prediction)
                continue
            spent, last[key] = spent + seconds, seconds
            if round_ > 0:  # the first round warms up: allocation, caches, compiled code loaded
                timed[key].append(seconds)
            else:
                timed[key] = []
        if round_ == 1 and timed:  # the clearly slower leave after the first timed round
            fastest = min(min(v) for v in timed.values() if v)
            timed = {k: v for k, v in timed.items() if v and min(v) <= CONTENDERS * fastest}
            budget = min(TRIAL_BUDGET_SECONDS, TRIAL_SHARE * max(steps, 1) * fastest)
    if not timed:  # every contender refused: the best prediction among the rest that accepts the circuit
        return _first_accepted(decision, [k for k in order if k not in decision.refused], accepts)
    decision.measured = {k: statistics.median(v) for k, v in timed.items() if v}
    decision.backend = min(decision.measured, key=lambda k: decision.measured[k]) if decision.measured else next(iter(timed))
    return decision


def _refusal(exc: BaseException) -> bool:
    """Whether a trial's error is the backend refusing the circuit (a typed refusal of qbackends' or PennyLane's),
    rather than the trial failing to rebuild the step (a gradient transform's shift rule for a template, say)."""
    import pennylane as qml

    return isinstance(exc, (QBackendsError, qml.exceptions.DeviceError, qml.exceptions.QuantumFunctionError))


def reason(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:400]


def _first_accepted(decision: Decision, order: Sequence[str], accepts: Callable[[str], None] | None) -> Decision:
    """The best-predicted backend whose preprocessing takes the circuit."""
    for key in order:
        try:
            if accepts is not None:
                accepts(key)
        except EnvironmentSettingError:
            raise  # the user's setting, not this backend's refusal
        except Exception as exc:  # noqa: BLE001 - a backend that refuses this circuit is passed over
            decision.refused[key] = reason(exc)
            continue
        decision.backend = key
        return decision
    raise_refused(decision)
    return decision  # unreachable: raise_refused raises


def raise_refused(decision: Decision) -> None:
    from .errors import UnsupportedCircuitError

    raise UnsupportedCircuitError(
        "No backend auto may take runs this circuit: " + "; ".join(f"{k}: {why}" for k, why in decision.refused.items()) + ".",
        "change the circuit as the messages say, or name a backend (e.g. local:pennylane/default.qubit).",
    )
