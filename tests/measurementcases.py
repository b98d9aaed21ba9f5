"""Every measurement PennyLane has, as cases a backend computes or refuses, and how a result is judged.

``MEASUREMENT_CLASSES`` is PennyLane's own list (the concrete ``MeasurementProcess`` subclasses that
``pennylane.measurements`` exports), so a measurement added upstream shows up as one without a case. A case is
the issue's 3-wire circuit (RY, CNOT, RX, CRZ, Hadamard), maybe with a mid-circuit measurement, measured one or
several ways, analytic or sampled (shots, a shot vector), maybe broadcast. ``judge`` compares a result with
default.qubit's: analytic to 1e-10; a sampled one within 5 standard deviations of the exact distribution
(exact moments and probabilities from default.qubit, analytic).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pennylane as qml
import pennylane.measurements as plm

VALUE_TOL = 1e-10
GRAD_TOL = 1e-8
SIGMAS = 5.0
SHOTS = 4000
MCM_SHOTS = 500  # a device that measures mid-circuit runs each shot on its own (one-shot)
WIRES = 3
X = np.array([0.4, 0.7, 0.3])  # RY, RX, CRZ angles
XB = np.array([[0.4, 0.7, 0.3], [1.1, -0.5, 2.0], [-2.3, 0.2, -0.9]])  # a broadcast batch of three


def measurement_classes() -> list[type]:
    """The concrete measurement process classes ``pennylane.measurements`` exports."""
    found = {
        obj
        for obj in vars(plm).values()
        if inspect.isclass(obj) and issubclass(obj, plm.MeasurementProcess) and obj is not plm.MeasurementProcess
    }
    return sorted((c for c in found if not inspect.isabstract(c)), key=lambda c: c.__name__)


MEASUREMENT_CLASSES = measurement_classes()

HERMITIAN = np.array([[1.0, 0.5 - 0.2j, 0, 0.1], [0.5 + 0.2j, -1.0, 0.3, 0], [0, 0.3, 0.4, -0.7j], [0.1, 0, 0.7j, 0.2]])
HERMITIAN_1 = np.array([[1.0, 0.5], [0.5, -1.0]])


PREPARED = np.array([0.1, 0.5j, -0.3, 0.2 + 0.4j, 0.35, -0.25j, 0.15, 0.45])
PREPARED = PREPARED / np.linalg.norm(PREPARED)


def pauli_sum() -> Any:
    return 0.5 * qml.X(0) + 0.3 * qml.Z(1) @ qml.Y(2) - 0.2 * qml.Z(0) @ qml.Z(1)


SPARSE = qml.Hamiltonian([0.4, -0.8, 0.25], [qml.X(0) @ qml.X(1), qml.Z(2), qml.Y(0) @ qml.Z(1)]).sparse_matrix(
    wire_order=range(WIRES)
)  # built here, not in a circuit, where the Hamiltonian would be queued as an operation


def sparse_hamiltonian() -> Any:
    return qml.SparseHamiltonian(SPARSE, wires=range(WIRES))


@dataclass(frozen=True)
class Case:
    """One circuit and what it measures.

    Attributes:
        name: the case's id.
        measure: the measurements, given the mid-circuit measurement value (None without one).
        shots: None (analytic), a number, or a shot vector (a tuple).
        broadcast: the angles are a batch of three.
        mcm: the circuit measures wire 1 mid-circuit and conditions an RY on wire 2 on it.
        grad: the Jacobian is compared too (default.qubit's by backpropagation).
        body, labels, params: another circuit (``body(x)``), its wire labels and its angles, for random cases.
    """

    name: str
    measure: Callable[[Any], Any]
    shots: Any = None
    broadcast: bool = False
    mcm: bool = False
    grad: bool = False
    body: Callable[[Any], Any] | None = None
    labels: tuple[Any, ...] | None = None
    params: tuple[float, ...] | None = None

    @property
    def wires(self) -> Any:
        if self.labels is not None:
            return list(self.labels)
        return WIRES + self.mcm  # a deferred mid-circuit measurement takes a wire of its own

    @property
    def x(self) -> np.ndarray:
        if self.params is not None:
            return np.array(self.params)
        return XB if self.broadcast else X

    def apply(self, x: Any) -> Any:
        if self.body is not None:
            self.body(x)
            return self.measure(None)
        qml.RY(x[..., 0], 0)
        qml.CNOT([0, 1])
        qml.RX(x[..., 1], 1)
        qml.CRZ(x[..., 2], [1, 2])
        qml.Hadamard(2)
        mv = None
        if self.mcm:
            mv = qml.measure(1)
            qml.cond(mv, qml.RY)(0.8, 2)
            qml.RX(x[..., 1], 1)
        return self.measure(mv)

    def measurements(self) -> list[Any]:
        """The case's measurement processes."""
        with qml.queuing.AnnotatedQueue() as q:
            self.apply(qml.numpy.array(self.x))
        return qml.tape.QuantumScript.from_queue(q).measurements

    def classes(self) -> frozenset[str]:
        """The measurement process classes the case measures."""
        return _classes(self)


@functools.cache
def _classes(case: Case) -> frozenset[str]:
    return frozenset(type(m).__name__ for m in case.measurements())


def _c(name: str, measure: Callable[[Any], Any], **kw: Any) -> Case:
    return Case(name, measure, **kw)


CASES = [
    # ---- analytic: expectations and variances of every kind of observable
    _c("expval-word", lambda m: qml.expval(qml.X(0) @ qml.Y(2)), grad=True),
    _c("expval-sum", lambda m: qml.expval(pauli_sum()), grad=True),
    _c("expval-prod-identity", lambda m: qml.expval(qml.Z(0) @ qml.Identity(1) @ qml.X(2)), grad=True),
    _c("expval-hermitian", lambda m: qml.expval(qml.Hermitian(HERMITIAN, wires=[2, 0])), grad=True),
    _c("expval-projector", lambda m: qml.expval(qml.Projector([1, 0], wires=[0, 2])), grad=True),
    _c("expval-sparse", lambda m: qml.expval(sparse_hamiltonian()), grad=True),
    _c("var-word", lambda m: qml.var(qml.Y(1) @ qml.X(2)), grad=True),
    _c("var-sum", lambda m: qml.var(pauli_sum()), grad=True),
    _c("var-prod-identity", lambda m: qml.var(qml.Identity(0) @ qml.X(1)), grad=True),
    _c("var-hermitian", lambda m: qml.var(qml.Hermitian(HERMITIAN_1, wires=1)), grad=True),
    _c("var-projector", lambda m: qml.var(qml.Projector([0, 1], wires=[1, 2]))),
    # ---- probabilities, the state and what is computed from it
    _c("probs-wires", lambda m: qml.probs(wires=[2, 0]), grad=True),
    _c("probs-all", lambda m: qml.probs()),
    _c("probs-op", lambda m: qml.probs(op=qml.X(1)), grad=True),
    _c("probs-op-hermitian", lambda m: qml.probs(op=qml.Hermitian(HERMITIAN_1, wires=0))),
    _c("state", lambda m: qml.state()),
    _c("density-matrix-0", lambda m: qml.density_matrix(wires=[0])),
    _c("density-matrix-20", lambda m: qml.density_matrix(wires=[2, 0])),
    _c("density-matrix-012", lambda m: qml.density_matrix(wires=[0, 1, 2])),
    _c("expval-and-density-matrix", lambda m: (qml.expval(qml.Z(0)), qml.density_matrix(wires=[1]))),
    _c("purity", lambda m: qml.purity(wires=[0]), grad=True),
    _c("vn-entropy", lambda m: qml.vn_entropy(wires=[0], log_base=2), grad=True),
    _c("mutual-info", lambda m: qml.mutual_info(wires0=[0], wires1=[1, 2]), grad=True),
    _c("mutual-info-reversed", lambda m: qml.mutual_info(wires0=[2], wires1=[0], log_base=2)),
    _c("null", lambda m: plm.NullMeasurement()),
    _c(
        "state-after-state-prep",
        lambda m: qml.state(),
        body=lambda x: (qml.StatePrep(PREPARED, wires=range(WIRES)), qml.CY([0, 1])),
        labels=tuple(range(WIRES)),
        params=(),
    ),
    _c(
        "several",
        lambda m: (qml.expval(qml.X(0)), qml.var(qml.Z(1)), qml.probs(wires=[2]), qml.expval(qml.Hermitian(HERMITIAN_1, 1))),
    ),
    _c("several-non-commuting", lambda m: (qml.expval(qml.X(0)), qml.expval(qml.Z(0)), qml.state())),
    # ---- broadcast batches
    _c("broadcast-expval-sum", lambda m: qml.expval(pauli_sum()), broadcast=True, grad=True),
    _c("broadcast-var-sum", lambda m: qml.var(pauli_sum()), broadcast=True),
    _c("broadcast-probs", lambda m: qml.probs(wires=[1, 0]), broadcast=True),
    _c("broadcast-density-matrix", lambda m: qml.density_matrix(wires=[2, 0]), broadcast=True),
    _c("broadcast-state-measurements", lambda m: (qml.purity([1]), qml.vn_entropy([2]), qml.state()), broadcast=True),
    # ---- mid-circuit measurement statistics, analytic
    _c("mcm-expval", lambda m: qml.expval(m), mcm=True),
    _c("mcm-probs", lambda m: qml.probs(op=m), mcm=True),
    _c("mcm-var", lambda m: qml.var(m), mcm=True),
    _c("mcm-with-observable", lambda m: (qml.expval(m), qml.expval(qml.X(2)), qml.probs(wires=[0, 1])), mcm=True),
    # ---- what the reference refuses analytically: every backend refuses it too
    _c("sample-analytic", lambda m: qml.sample(wires=[0])),
    _c("counts-analytic", lambda m: qml.counts(qml.Z(0))),
    _c("shadow-analytic", lambda m: qml.classical_shadow(wires=[0, 1])),
    _c("shadow-expval-analytic", lambda m: qml.shadow_expval(qml.X(0) @ qml.Z(1))),
    # ---- sampled
    _c("shots-expval-word", lambda m: qml.expval(qml.X(0) @ qml.Y(2)), shots=SHOTS),
    _c("shots-expval-sum", lambda m: qml.expval(pauli_sum()), shots=SHOTS),
    _c("shots-expval-hermitian", lambda m: qml.expval(qml.Hermitian(HERMITIAN, wires=[2, 0])), shots=SHOTS),
    _c("shots-var-word", lambda m: qml.var(qml.Y(1) @ qml.X(2)), shots=SHOTS),
    _c("shots-var-sum", lambda m: qml.var(pauli_sum()), shots=SHOTS),
    _c("shots-probs-wires", lambda m: qml.probs(wires=[2, 0]), shots=SHOTS),
    _c("shots-probs-op", lambda m: qml.probs(op=qml.X(1)), shots=SHOTS),
    _c("shots-sample-wires", lambda m: qml.sample(wires=[0, 2]), shots=SHOTS),
    _c("shots-sample-op", lambda m: qml.sample(qml.X(0) @ qml.Z(1)), shots=SHOTS),
    _c("shots-counts-wires", lambda m: qml.counts(wires=[1, 2]), shots=SHOTS),
    _c("shots-counts-op", lambda m: qml.counts(qml.Y(2)), shots=SHOTS),
    _c("shots-counts-all-outcomes", lambda m: qml.counts(wires=[0, 1, 2], all_outcomes=True), shots=SHOTS),
    _c("shots-classical-shadow", lambda m: qml.classical_shadow(wires=[0, 1], seed=11), shots=SHOTS),
    _c("shots-shadow-expval", lambda m: qml.shadow_expval(0.7 * qml.X(0) @ qml.Z(1) + 0.2 * qml.Y(2), seed=12), shots=SHOTS),
    _c("shots-one-term-sum-and-var", lambda m: (qml.expval(qml.Hamiltonian([1.0], [qml.X(0)])), qml.var(qml.X(0))), shots=SHOTS),
    _c("shots-null", lambda m: plm.NullMeasurement(), shots=SHOTS),
    _c(
        "shots-identity-and-var",
        lambda m: (qml.expval(qml.Hamiltonian([0.5], [qml.Identity(0)])), qml.var(qml.Z(1))),
        shots=SHOTS,
    ),
    _c("shots-several", lambda m: (qml.expval(qml.X(0)), qml.probs(wires=[1]), qml.counts(wires=[2])), shots=SHOTS),
    _c("shot-vector", lambda m: (qml.expval(qml.Z(0) @ qml.X(2)), qml.probs(wires=[1])), shots=(1000, 3000)),
    _c("shots-broadcast-expval", lambda m: qml.expval(qml.Z(1)), shots=SHOTS, broadcast=True),
    _c("shots-mcm-expval", lambda m: qml.expval(m), shots=MCM_SHOTS, mcm=True),
    _c("shots-mcm-probs", lambda m: qml.probs(op=m), shots=MCM_SHOTS, mcm=True),
    _c("shots-mcm-counts", lambda m: qml.counts(op=m), shots=MCM_SHOTS, mcm=True),
    _c("shots-mcm-sample", lambda m: qml.sample(m), shots=MCM_SHOTS, mcm=True),
    # ---- what the reference refuses with shots
    _c("shots-state", lambda m: qml.state(), shots=SHOTS),
    _c("shots-density-matrix", lambda m: qml.density_matrix(wires=[0]), shots=SHOTS),
    _c("shots-purity", lambda m: qml.purity(wires=[0]), shots=SHOTS),
    _c("shots-vn-entropy", lambda m: qml.vn_entropy(wires=[0]), shots=SHOTS),
    _c("shots-mutual-info", lambda m: qml.mutual_info(wires0=[0], wires1=[1]), shots=SHOTS),
    _c("shots-expval-sparse", lambda m: qml.expval(sparse_hamiltonian()), shots=SHOTS),  # no diagonalizing gates
    _c("shot-vector-expval-sparse", lambda m: qml.expval(sparse_hamiltonian()), shots=(5, 5)),
]


# ---- judging a result ---------------------------------------------------------------------------


class Mismatch(AssertionError):
    """A result that is not the reference's."""


def _leaves(case: Case, result: Any, count: int) -> list[Any]:
    """The result per measurement (and per shot partition: partition-major)."""
    partitions = list(result) if isinstance(case.shots, tuple) else [result]
    out = []
    for part in partitions:
        out.extend([part] if count == 1 else list(part))
    return out


def judge_exact(got: Any, expected: Any, tol: float = VALUE_TOL, what: str = "value") -> None:
    """``got`` is ``expected`` (same nesting and shapes) within ``tol``."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            raise Mismatch(f"{what}: {type(got).__name__} of {len(got) if hasattr(got, '__len__') else '-'} != {len(expected)}")
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            judge_exact(g, e, tol, f"{what}[{i}]")
        return
    g, e = np.asarray(qml.math.unwrap(got)), np.asarray(qml.math.unwrap(expected))
    if g.shape != e.shape:
        raise Mismatch(f"{what}: shape {g.shape} != {e.shape}")
    if not np.allclose(g, e, atol=tol, rtol=0, equal_nan=True):
        raise Mismatch(f"{what}: off by {np.nanmax(np.abs(g - e)):.3g} (tolerance {tol:g})")


def companions(m: Any) -> list[Any]:
    """The analytic measurements (on default.qubit) that give the exact distribution behind sampled ``m``."""
    with qml.QueuingManager.stop_recording():  # the observables built here are measured, not applied
        wanted = _companions(m)
    return [qml.apply(c) for c in wanted] if qml.QueuingManager.recording() else wanted


def _companions(m: Any) -> list[Any]:
    if isinstance(m, plm.ClassicalShadowMP):
        return [qml.expval(w) for w in _shadow_words(m.wires)]
    if isinstance(m, plm.ShadowExpvalMP):
        return [qml.expval(m.H), *(qml.var(t) for t in _terms(m.H))]
    if isinstance(m, plm.NullMeasurement):
        return []
    if type(m) is plm.ExpectationMP and m.obs is not None and m.obs.pauli_rep is not None:
        return [qml.expval(m.obs), *(qml.var(t) for t in _terms(m.obs))]
    if m.mv is not None:
        return [qml.probs(op=m.mv)]
    if m.obs is not None:
        return [qml.probs(op=m.obs)]
    return [qml.probs(wires=m.wires)]


def _terms(obs: Any) -> list[Any]:
    if obs.pauli_rep is None:
        return [obs]
    return [qml.pauli.PauliWord(w).operation(wire_order=obs.wires) if w else qml.Identity(obs.wires[0]) for w in obs.pauli_rep]


def _coefficients(obs: Any) -> list[float]:
    return [float(abs(c)) for c in obs.pauli_rep.values()] if obs.pauli_rep is not None else [1.0]


def _shadow_words(wires: Any) -> list[Any]:
    w = list(wires)
    return [qml.X(w[0]), qml.Z(w[0]) @ qml.Z(w[1]), qml.Y(w[1]), qml.X(w[0]) @ qml.Y(w[1])]


def _eigvals(m: Any) -> np.ndarray:
    if m.mv is not None:
        return np.asarray(m.eigvals(), dtype=float)
    if m.obs is not None:
        return np.asarray(m.obs.eigvals(), dtype=float)
    return np.arange(2 ** len(m.wires), dtype=float)


def judge_sampled(m: Any, got: Any, exact: list[Any], shots: int, reference: Any) -> None:
    """``got`` (one row) is a sample of the exact distribution ``exact`` (``companions(m)``'s values) within 5σ,
    and has the reference's form."""
    got = got if isinstance(got, dict) else qml.math.unwrap(got)
    if isinstance(m, plm.NullMeasurement):
        if not np.isnan(np.asarray(got)).all():
            raise Mismatch(f"null measurement gave {got}")
        return
    if isinstance(m, plm.ClassicalShadowMP):
        bits, recipes = np.asarray(got)
        if np.asarray(got).shape != np.asarray(reference).shape or not set(np.unique(recipes)) <= {0, 1, 2}:
            raise Mismatch(f"shadow of shape {np.asarray(got).shape}, recipes {np.unique(recipes)}")
        shadow = qml.ClassicalShadow(bits, recipes, wire_map=list(m.wires))
        for word, mu in zip(_shadow_words(m.wires), exact, strict=True):
            estimate = float(np.mean(shadow.expval(word, k=1)))
            _within(estimate, float(mu), np.sqrt(3.0 ** len(word.wires) / shots), f"shadow estimate of {word}")
        return
    if isinstance(m, plm.ShadowExpvalMP):
        sigma = sum(c * np.sqrt(3.0 ** len(t.wires) / shots) for c, t in zip(_coefficients(m.H), _terms(m.H), strict=True))
        _within(float(got), float(exact[0]), sigma, "shadow expectation")
        return
    if type(m) is plm.ExpectationMP and m.obs is not None and m.obs.pauli_rep is not None:  # term by term: σ <= Σ|c| σ_term
        sigma = sum(c * np.sqrt(max(float(v), 0.0) / shots) for c, v in zip(_coefficients(m.obs), exact[1:], strict=True))
        _within(float(got), float(exact[0]), sigma, "expectation")
        return
    p = np.asarray(exact[0], dtype=float)
    lam = _eigvals(m)
    mu = float(p @ lam)
    v = float(p @ (lam - mu) ** 2)
    if type(m) is plm.ExpectationMP:
        _within(float(got), mu, np.sqrt(v / shots), "expectation")
    elif type(m) is plm.VarianceMP:
        m4 = float(p @ (lam - mu) ** 4)
        _within(float(got), v, np.sqrt(max(m4 - v * v, 0.0) / shots) + v / shots, "variance")
    elif type(m) is plm.ProbabilityMP:
        _frequencies(np.asarray(got, dtype=float), p, shots)
    elif type(m) is plm.SampleMP:
        samples = np.asarray(got)
        if samples.shape != np.asarray(reference).shape:
            raise Mismatch(f"samples of shape {samples.shape} != {np.asarray(reference).shape}")
        values, p = _outcomes(m, p, lam)
        _frequencies(_histogram(m, samples, values), p, shots)
    elif type(m) is plm.CountsMP:
        values, p = _outcomes(m, p, lam)
        _counts(m, got, reference, p, values, shots)
    else:
        raise Mismatch(f"no sampled check for {type(m).__name__}")


def _within(value: float, mean: float, sigma: float, what: str) -> None:
    if abs(value - mean) > SIGMAS * sigma + 1e-12:
        raise Mismatch(f"{what} {value:.6g}, exact {mean:.6g}: {abs(value - mean) / max(sigma, 1e-300):.1f}σ (σ {sigma:.3g})")


def _frequencies(f: np.ndarray, p: np.ndarray, shots: int) -> None:
    if f.shape != p.shape:
        raise Mismatch(f"distribution of shape {f.shape} != {p.shape}")
    sigma = np.sqrt(p * (1 - p) / shots)
    worst = np.abs(f - p) - SIGMAS * sigma
    if worst.max() > 1e-12:
        k = int(worst.argmax())
        raise Mismatch(f"outcome {k}: frequency {f[k]:.5f}, exact {p[k]:.5f} (σ {sigma[k]:.3g})")


def _outcomes(m: Any, p: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct outcomes of a sample of ``m`` and their probabilities (an eigenvalue may repeat)."""
    if m.obs is None and m.mv is None:
        return lam, p
    values = np.unique(np.round(lam, 12))
    return values, np.array([p[np.isclose(lam, v)].sum() for v in values])


def _histogram(m: Any, samples: np.ndarray, lam: np.ndarray) -> np.ndarray:
    if m.obs is None and m.mv is None:  # rows of bits, wire 0 the highest
        index = samples.reshape(samples.shape[0], -1) @ (1 << np.arange(len(m.wires))[::-1])
        return np.bincount(index.astype(int), minlength=lam.size) / samples.shape[0]
    return np.array([np.mean(np.isclose(samples, v)) for v in lam])


def _counts(m: Any, got: dict, reference: dict, p: np.ndarray, lam: np.ndarray, shots: int) -> None:
    if not isinstance(got, dict) or sum(int(c) for c in got.values()) != shots:
        raise Mismatch(f"counts {got!r} of {shots} shots")
    if m.all_outcomes and sorted(map(str, got)) != sorted(map(str, reference)):
        raise Mismatch(f"all_outcomes keys {sorted(got)} != {sorted(reference)}")
    if m.obs is None and m.mv is None:
        f = np.zeros(lam.size)
        for key, count in got.items():
            f[int(key, 2)] += int(count) / shots
    else:
        f = np.array([sum(int(c) for k, c in got.items() if np.isclose(float(k), v)) / shots for v in lam])
    _frequencies(f, p, shots)


def as_tuple(measurements: Any) -> tuple[Any, ...]:
    return tuple(measurements) if isinstance(measurements, Sequence) else (measurements,)


# ---- random cases (the slow set) ------------------------------------------------------------------------

RANDOM_ANALYTIC = ("expval", "var", "probs", "probs-op", "state", "density-matrix", "purity", "vn-entropy", "mutual-info",
                   "hermitian", "projector")  # fmt: skip
RANDOM_SAMPLED = ("expval", "var-word", "probs", "sample", "sample-op", "counts-op")
DIFFERENTIATED = ("expval", "var", "probs")  # the random cases whose gradient is compared (one measurement)


def _word(draw: Any, st: Any, wires: Sequence[Any]) -> Any:
    chosen = draw(st.lists(st.sampled_from(list(wires)), min_size=1, max_size=min(3, len(wires)), unique=True))
    ops = [draw(st.sampled_from([qml.X, qml.Y, qml.Z]))(w) for w in chosen]
    return ops[0] if len(ops) == 1 else qml.prod(*ops)


def _observable(draw: Any, st: Any, wires: Sequence[Any]) -> Any:
    if draw(st.booleans()):
        return _word(draw, st, wires)
    terms = [_word(draw, st, wires) for _ in range(draw(st.integers(1, 3)))]
    if draw(st.booleans()):
        terms.append(qml.Identity(wires[0]))
    h = qml.Hamiltonian([draw(st.floats(-1.5, 1.5).filter(lambda c: abs(c) > 0.05)) for _ in terms], terms)
    # terms that cancel to a multiple of the identity meet PennyLane's sampler defect (knowndefects): a word then
    return h if any(word and abs(c) > 1e-9 for word, c in h.pauli_rep.items()) else terms[0]


def _subset(draw: Any, st: Any, wires: Sequence[Any], most: int = 3) -> list[Any]:
    return draw(st.lists(st.sampled_from(list(wires)), min_size=1, max_size=min(most, len(wires)), unique=True))


def random_measurement(draw: Any, st: Any, kind: str, wires: Sequence[Any]) -> Callable[[], Any]:
    """A measurement of ``kind`` on random wires (in a random order) or a random observable, built once."""
    with qml.QueuingManager.stop_recording():
        if kind in ("expval", "var", "var-word", "sample-op", "counts-op", "probs-op"):
            obs = (
                _word(draw, st, wires)
                if kind in ("var-word", "sample-op", "counts-op", "probs-op")
                else _observable(draw, st, wires)
            )
            make = {"expval": qml.expval, "var": qml.var, "var-word": qml.var, "sample-op": qml.sample, "counts-op": qml.counts}
            return (lambda: qml.probs(op=obs)) if kind == "probs-op" else (lambda: make[kind](obs))
        if kind == "hermitian":
            on = _subset(draw, st, wires, 2)
            rng = np.random.default_rng(draw(st.integers(0, 2**16)))
            a = rng.normal(size=(2 ** len(on),) * 2) + 1j * rng.normal(size=(2 ** len(on),) * 2)
            obs = qml.Hermitian(a + a.conj().T, wires=on)
            return lambda: qml.expval(obs)
        if kind == "projector":
            on = _subset(draw, st, wires)
            bits = draw(st.lists(st.integers(0, 1), min_size=len(on), max_size=len(on)))
            return lambda: qml.expval(qml.Projector(bits, wires=on))
    on = _subset(draw, st, wires)
    if kind == "mutual-info":
        rest = [w for w in wires if w not in on] or list(wires)
        if rest == list(wires):  # every wire in the first part: split it
            on, rest = list(wires)[:1], list(wires)[1:] or list(wires)[:1]
        return lambda: qml.mutual_info(wires0=on, wires1=rest)
    return {
        "probs": lambda: qml.probs(wires=on),
        "sample": lambda: qml.sample(wires=on),
        "state": lambda: qml.state(),
        "density-matrix": lambda: qml.density_matrix(wires=on),
        "purity": lambda: qml.purity(wires=on),
        "vn-entropy": lambda: qml.vn_entropy(wires=on),
    }[kind]
