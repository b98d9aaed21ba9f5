"""Which backend runs a circuit fastest here: the one place qbackends decides.

One predicate says which backends ``auto`` may take (``Backend.auto_eligible``), one ordering ranks them before
any circuit is known (``ranked``; a measured workload profile first where there is one: ``without_circuit``),
and ``decide`` orders them for a circuit. ``auto`` decides per circuit. It reads what the circuit says (``Shape``: wires, broadcast batch, gate mix,
parameters, observables, shots, the gradient asked for), predicts each candidate's step from a cost
model measured on the reference machine (``data/auto-model.json``), and, where the step is cheap
enough to try, runs the circuit on the close contenders and keeps the fastest. The decision is made
once per circuit structure and kept in the context (``qbackends.context``); ``qbackends probe auto`` explains the rules.
"""

from __future__ import annotations

import logging
import math
import os
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import calibration, decisionstore, probe
from .backend import Backend
from .calibration import Profile
from .context import Context
from .costs import (
    DIAGONAL,
    Costs,
    ObservableKeys,
    Shape,
    as_run,
    predict,
    shape_of,
    shipped_model,
    structure_key,
)
from .decisionstore import DecisionStore
from .devicestring import parse
from .errors import (
    BackendUnavailableError,
    DeviceStringError,
    EnvironmentSettingError,
    QBackendsError,
    UnsupportedCircuitError,
    UnsupportedOptionError,
)

log = logging.getLogger("qbackends")

EXCLUDE_ENV = "QBACKENDS_AUTO_EXCLUDE"
RULES = (
    "auto decides per circuit structure, once per machine (decisions are stored: qbackends probe auto lists them, "
    "--clear removes them): it reads the circuit (wires, broadcast batch, gates and how "
    "many are diagonal, measured terms, trainable parameters, shots, the gradient asked for), predicts each backend's "
    "step from the cost model below (measured on the 2-core reference machine: python -m qbackends.costmodel), tries "
    "the backends predicted within 4x of the best on the circuit itself when that costs under about 3 s, all trials "
    "within 1 s plus 10% of the work done (with finite "
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
TRIAL_ALLOWANCE = 1.0  # seconds of trials a process may spend before any work is seen ...
WORK_SHARE = 0.1  # ... and beyond that, this share of the work its chosen backends have done
REVISIT_AFTER = 5  # steps a decision's backend runs before its times are held against what was expected
REVISIT_FACTOR = 2.0  # ... and more than this many times slower than expected: decided again, once
FAMILY_REACH = 2.0  # a family's decision is taken for its circuits within this factor of its gate count, untried
FAMILY_CONTENDERS = 1.5  # where the family's trials corrected both predictions: tried only when this close

# ---- the candidates: one predicate (``Backend.auto_eligible``), one ordering ---------------------------------


def ranked(backends: Iterable[Backend], size: int | None) -> list[Backend]:
    """The backends ``auto`` may take (``Backend.auto_eligible``) in its order of preference for circuits of ``size``
    qubits: those weighed at this size (a GPU only from its ``min_auto_wires``) first, then by declared preference
    (higher first); ``size`` None: of any size, by preference alone. Every list ``auto`` weighs is this one,
    filtered; circuits themselves are ordered by ``decide``."""
    eligible = [b for b in backends if b.auto_eligible]
    return sorted(eligible, key=lambda b: (size is None or size >= b.min_auto_wires, b.preference), reverse=True)


def weighed(backends: Iterable[Backend], wires: int | None, skip: set[str]) -> list[Backend]:
    """The backends ``auto`` weighs for circuits of ``wires`` qubits (``None``: any), best first, less ``skip``.

    Raises:
        BackendUnavailableError: when every one is excluded.
    """
    chain = [b for b in ranked(backends, wires) if not matches(b, skip) and (wires is None or wires >= b.min_auto_wires)]
    if not chain:
        raise BackendUnavailableError(
            f"auto has no backend to weigh: every one is excluded ({', '.join(sorted(skip))}).",
            f"remove some from {EXCLUDE_ENV} or exclude=.",
        )
    return chain


def without_circuit(
    backends: Iterable[Backend], wires: int | None, profile: Profile | None, runs_here: Callable[[Backend], bool]
) -> list[Backend]:
    """What ``auto`` takes when it is told no circuit, only a wire count (``choose("auto", n)``, a job's check that
    something runs here), best first: the fastest at this size in a workload ``profile`` measured on this machine
    (``qbackends calibrate --workload qaoa``), among those that ``runs_here``, then ``ranked`` (no wire count:
    the smallest circuit's order)."""
    eligible = ranked(backends, wires or 0)
    if profile is not None:
        best = calibration.fastest(profile, [b for b in eligible if runs_here(b)], wires or 0)
        if best is not None:
            eligible.remove(best)
            eligible.insert(0, best)
    return eligible


DEVICE_GRADIENTS = ("adjoint", "backprop", "device", "best")


def gradient_methods(backends: Sequence[Backend], requested: Any, shots: bool) -> tuple[dict[str, str | None], dict[str, str]]:
    """Backend key -> the gradient method it would use for a circuit asking for ``requested`` (what its
    ``setup_execution_config`` makes of "best"), without building it; and why the others cannot give it.

    Every state-vector backend here differentiates by adjoint (analytic only); one that declares ``backprop``
    also by backprop; a gradient transform (parameter-shift, finite-diff, ...) runs on any of them.
    """
    methods: dict[str, str | None] = {}
    refused: dict[str, str] = {}
    name = requested if isinstance(requested, str) or requested is None else getattr(requested, "__name__", "transform")
    for backend in backends:
        backprop = backend.backprop
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


BACKPROP_FACTOR = 3.0  # a backprop step against its forward pass alone, for a backend the model has not measured


def model(context: Context) -> dict[str, Costs]:
    """The cost model ``auto`` predicts with: the shipped one, each backend measured on this machine
    (``qbackends calibrate --workload circuits``) in its place; read once per context."""
    if context.model is None:
        dists = tuple(b.distribution for b in context.registry.backends.values())
        context.model = {**shipped_model(), **calibration.load_model(probe.machine_facts(dists))}
    return context.model


def backprop_factor(context: Context, key: str) -> float:
    """A backprop step against its forward pass (what a trial times: the backward pass is the ML framework's)."""
    costs = model(context).get(key)
    return costs.backprop if costs is not None and costs.backprop else BACKPROP_FACTOR


def log_decision(decision: Decision, backend: Backend, precision: str = "c128") -> None:
    """One line the first time ``auto`` takes a backend for a circuit structure."""
    if log.isEnabledFor(logging.INFO):  # (explained only where it is logged: a loop of new circuits decides often)
        log.info("qbackends: %s", decision.explain())


def store(context: Context) -> DecisionStore:
    """The decisions kept between processes for this machine (``qbackends.decisionstore``), opened once per context."""
    if context.store is None:
        dists = tuple(b.distribution for b in context.registry.backends.values())
        facts = probe.machine_facts(dists)
        machine = {
            **calibration.fingerprint(facts),
            "threads": facts.threads,
            "versions": {d: probe.distribution_version(d) for d in ("qbackends", "pennylane", "numpy")},
        }
        context.store = DecisionStore(decisionstore.folder(), machine)
    return context.store


def trial_budget(context: Context) -> float:
    """Seconds the next decision may spend trying backends: what is left of ``TRIAL_ALLOWANCE`` plus ``WORK_SHARE``
    of the work seen so far, at most ``TRIAL_BUDGET_SECONDS``; 0 or less: decide on predictions."""
    left = TRIAL_ALLOWANCE + WORK_SHARE * context.work_seconds - context.trial_seconds
    return min(TRIAL_BUDGET_SECONDS, left)


def family_key(tape: Any, wires: int, gradient: Any) -> tuple[Any, ...]:
    """Circuits the model mispredicts alike and whose decisions carry over: the same gate kinds, wire count, batch,
    measurements, gradient and shots, whatever the gates' order, wires, angles and number. Read without expanding
    anything: it is computed for every new circuit structure."""
    kinds = tuple(sorted({op.name for op in tape.operations}))
    measured = tuple(sorted((type(m).__name__, getattr(getattr(m, "obs", None), "name", "")) for m in tape.measurements))
    method = gradient if isinstance(gradient, str) or gradient is None else str(gradient)
    return kinds, wires, tape.batch_size or 1, measured, method, bool(tape.shots)


def family_member(members: Sequence[tuple[int, Decision]], gates: int) -> tuple[int, Decision] | None:
    """The decided member of a family whose size is within ``FAMILY_REACH`` of ``gates`` (the nearest), if any."""
    near = [(g, d) for g, d in members if g / FAMILY_REACH <= gates <= g * FAMILY_REACH]
    return min(near, key=lambda m: abs(m[0] - gates)) if near else None


def learn(families: dict[Any, dict[str, float]], family: Any, decision: Decision, corrections: dict[str, float]) -> None:
    """Keep how far the model was off (measured ÷ predicted) for each backend a trial timed, for ``family``'s next
    circuits; ``corrections`` are the factors the prediction already carried."""
    known = families.setdefault(family, {})
    for key, seconds in decision.measured.items():
        predicted = decision.predicted.get(key)
        if predicted and math.isfinite(predicted) and predicted > 0:
            known[key] = seconds / predicted * corrections.get(key, 1.0)


# ---- the decision ----------------------------------------------------------------------------


@dataclass
class Decision:
    """The backend ``auto`` took for one circuit structure, and why."""

    backend: str
    predicted: dict[str, float] = field(default_factory=dict)
    measured: dict[str, float] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    shape: Shape | None = None
    source: str = ""  # where it came from when not from this circuit's own trial: "stored ...", "family ..."
    steps: int = 0  # steps run on it so far, and their device seconds (``revisit``)
    seconds: float = 0.0
    revisited: bool = False
    untried: bool = False  # close contenders were left untried (the trials' share of the work was spent): not stored
    derivatives: dict[Any, bool] = field(default_factory=dict, repr=False, compare=False)
    # gradient method -> whether the backend differentiates this structure by it (``AutoQubit._differentiates``)

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
        if self.source:
            text += f"; {self.source}"
        return text

    def expected(self) -> float | None:
        """The step this decision expects of its backend: measured in the trial, else predicted."""
        return self.measured.get(self.backend, self.predicted.get(self.backend))

    def off(self) -> bool:
        """Whether the backend's real steps, after ``REVISIT_AFTER`` of them, took over ``REVISIT_FACTOR`` times
        what the decision expected: revisited once (``revisited``)."""
        expected = self.expected()
        if self.revisited or self.steps < REVISIT_AFTER or not expected:
            return False
        return self.seconds / self.steps > REVISIT_FACTOR * expected


def excluded(environ: dict[str, str] | None = None, also: Iterable[str] = ()) -> set[str]:
    """Backend keys removed from ``auto`` by ``QBACKENDS_AUTO_EXCLUDE`` (comma-separated device strings) and ``also``."""
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
    budget: float = TRIAL_BUDGET_SECONDS,
    corrections: dict[str, float] | None = None,
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
        budget: seconds the trial may spend (``trial_budget``); 0 or less: no trial.
        corrections: backend key -> measured ÷ predicted on earlier circuits of this family (``learn``): the
            prediction is scaled by it, and two corrected predictions are tried only within ``FAMILY_CONTENDERS``.
    """
    corrections = corrections or {}
    predicted = {}
    for backend in candidates:
        costs = model.get(backend.key)
        seen = (runs or {}).get(backend.key, shape)
        predicted[backend.key] = (
            predict(costs, seen, gradient_methods.get(backend.key)) * corrections.get(backend.key, 1.0) if costs else math.inf
        )
    order = sorted((b.key for b in candidates), key=lambda k: predicted[k])  # stable: preference breaks ties
    decision = Decision(order[0], predicted={k: v for k, v in predicted.items() if math.isfinite(v)}, shape=shape)
    best = predicted[order[0]]

    def close(key: str) -> bool:
        factor = FAMILY_CONTENDERS if key in corrections and order[0] in corrections else CONTENDERS
        return predicted[key] <= factor * best

    # Close contenders are tried; so is a backend the model has not measured (a plugin's, a GPU), when trying is cheap.
    cheap = best * (TIMED_ROUNDS + 1) * 2 < min(budget, TRIAL_BUDGET_SECONDS)
    contenders = [k for k in order if close(k) or (not math.isfinite(predicted[k]) and cheap)]
    if measure is None or len(contenders) < 2 or budget <= 0:
        decision.untried = measure is not None and len(contenders) >= 2
        return _first_accepted(decision, order, accepts)
    return _tried(decision, order, contenders, measure, accepts, steps, min(budget, TRIAL_BUDGET_SECONDS))


def _tried(
    decision: Decision,
    order: Sequence[str],
    contenders: Sequence[str],
    measure: Callable[[str], float],
    accepts: Callable[[str], None] | None,
    steps: int = 100,
    limit: float = TRIAL_BUDGET_SECONDS,
) -> Decision:
    """The contenders run in turn: a first round that warms up (and drops the refusing), a timed round after which
    the clearly slower leave (over ``CONTENDERS`` x the fastest), then more while the budget lasts; the lowest
    median is taken (not the lowest time: a backend whose times scatter, as lightning.kokkos' do on a busy
    machine, is not taken for its one lucky round). More rounds than ``TIMED_ROUNDS`` run while the trial stays
    within ``limit`` (at most ``TRIAL_BUDGET_SECONDS``) and ``TRIAL_SHARE`` of the run's expected ``steps``. Past
    ``limit``, a round stops after its first contender: warm-ups go in order of prediction, timed rounds quickest first (a slow
    backend the model mispredicted costs its warm-up, not the whole trial again)."""
    timed: dict[str, list[float]] = {}
    last: dict[str, float] = {}  # each contender's latest time: a round runs the quickest first
    spent, budget = 0.0, limit
    for round_ in range(TRIAL_ROUNDS):
        if round_ > 1 and len(timed) < 2 or round_ > TIMED_ROUNDS and spent > budget:
            break
        keys = [k for k in contenders if k not in decision.refused] if round_ == 0 else sorted(timed, key=last.__getitem__)
        for i, key in enumerate(keys):
            if i > 0 and spent > limit:
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
            budget = min(limit, TRIAL_SHARE * max(steps, 1) * fastest)
    if not timed:  # every contender refused: the best prediction among the rest that accepts the circuit
        return _first_accepted(decision, [k for k in order if k not in decision.refused], accepts)
    decision.measured = {k: statistics.median(v) for k, v in timed.items() if v}
    decision.backend = min(decision.measured, key=lambda k: decision.measured[k]) if decision.measured else next(iter(timed))
    return decision


def _refusal(exc: BaseException) -> bool:
    """Whether a trial's error is the backend refusing the circuit (a typed refusal of qbackends' or PennyLane's),
    rather than the trial failing to rebuild the step (a gradient transform's shift rule for a template, say)."""
    import pennylane as qml  # a trial ran: PennyLane is loaded; the decision module itself stays light

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
    raise UnsupportedCircuitError(
        "No backend auto may take runs this circuit: " + "; ".join(f"{k}: {why}" for k, why in decision.refused.items()) + ".",
        "change the circuit as the messages say, or name a backend (e.g. local:pennylane/default.qubit).",
    )


__all__ = [
    "DIAGONAL", "Costs", "Decision", "ObservableKeys", "Shape", "as_run", "backprop_factor", "decide", "excluded",
    "gradient_methods", "model", "predict", "ranked", "shape_of", "shipped_model", "structure_key", "weighed",
    "without_circuit",
]  # fmt: skip
