"""Turn a tape's operations into segments the kernels run: diagonal blocks, product layers, CNOTs.

Each operation is scheduled as early as the operations on its wires allow, into a segment of its
kind: diagonal gates all commute, so a block takes any of them; a product layer takes single-qubit
gates on distinct wires. Inside a segment every generator commutes with every gate, so the adjoint
pass takes all of a segment's derivatives at one point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UnsupportedCircuitError
from ..simbase.values import NUMBERS

HALF = 0.5
QUARTER = 0.25

# name -> terms (wire-index tuple, alpha, beta): angle contribution (alpha·θ + beta)·Π z_w.
# The gate is exp(i Σ angle·Z...Z); the empty wire tuple is a global phase.
DIAGONAL_TERMS = {
    "RZ": lambda w: [((w[0],), -HALF, 0.0)],
    "MultiRZ": lambda w: [(tuple(w), -HALF, 0.0)],
    "IsingZZ": lambda w: [((w[0], w[1]), -HALF, 0.0)],
    "PhaseShift": lambda w: [((), HALF, 0.0), ((w[0],), -HALF, 0.0)],
    "CRZ": lambda w: [((w[1],), -QUARTER, 0.0), ((w[0], w[1]), QUARTER, 0.0)],
    "ControlledPhaseShift": lambda w: [
        ((), QUARTER, 0.0),
        ((w[0],), -QUARTER, 0.0),
        ((w[1],), -QUARTER, 0.0),
        ((w[0], w[1]), QUARTER, 0.0),
    ],
    "CZ": lambda w: [
        ((), 0.0, math.pi / 4),
        ((w[0],), 0.0, -math.pi / 4),
        ((w[1],), 0.0, -math.pi / 4),
        ((w[0], w[1]), 0.0, math.pi / 4),
    ],
    "PauliZ": lambda w: [((), 0.0, math.pi / 2), ((w[0],), 0.0, -math.pi / 2)],
    "S": lambda w: [((), 0.0, math.pi / 4), ((w[0],), 0.0, -math.pi / 4)],
    "T": lambda w: [((), 0.0, math.pi / 8), ((w[0],), 0.0, -math.pi / 8)],
    "Identity": lambda w: [],
    "GlobalPhase": lambda w: [((), -1.0, 0.0)],  # exp(-iφ)
}
_SQ2 = 1 / math.sqrt(2)
FIXED_SINGLE = {
    "Hadamard": np.array([[_SQ2, _SQ2], [_SQ2, -_SQ2]], dtype=complex),
    "PauliX": np.array([[0, 1], [1, 0]], dtype=complex),
    "PauliY": np.array([[0, -1j], [1j, 0]], dtype=complex),
    "SX": 0.5 * np.array([[1 + 1j, 1 - 1j], [1 - 1j, 1 + 1j]], dtype=complex),
}
ROTATIONS = {"RX": 1, "RY": 2}  # generator: 1 = X, 2 = Y
OTHER = {"CNOT"}
SUPPORTED = frozenset(DIAGONAL_TERMS) | frozenset(FIXED_SINGLE) | frozenset(ROTATIONS) | OTHER


def z_terms(observable: Any) -> list[tuple[list[Any], float]] | None:
    """(wires with Z, real coefficient) of a sum of Z products; None for anything else."""
    rep = getattr(observable, "pauli_rep", None)
    if rep is None:
        return None
    import pennylane as qml

    terms = []
    for word, coefficient in rep.items():
        if isinstance(coefficient, NUMBERS):
            value = complex(coefficient)
        else:  # trainable coefficients: their value
            value = complex(qml.math.toarray(qml.math.unwrap(coefficient)))
        if any(letter != "Z" for letter in word.values()) or abs(value.imag) > 1e-15:
            return None
        terms.append((list(word.keys()), value.real))
    return terms


def _real(coefficient: Any) -> Any:
    """A coefficient's real part in its own interface (a trainable one stays trainable); a plain number as it is."""
    if isinstance(coefficient, NUMBERS):
        return coefficient.real
    import pennylane as qml

    return qml.math.real(coefficient)


def evolution_terms(op: Any) -> list[tuple[str, list[Any], Any]] | None:
    """An ``ApproxTimeEvolution`` (``qml.qaoa.cost_layer``/``mixer_layer``) whose terms commute, as
    (gate, wires, h): exactly Π gate(2 h t), one round whatever its Trotter number. The terms commute
    when all are Z words, or all act on one wire each, distinct wires. Identity terms are dropped,
    as PennyLane's decomposition drops them; h keeps its interface (it may be trainable). None: the
    terms do not commute."""
    if op.name != "ApproxTimeEvolution":
        return None

    rep = op.hyperparameters["hamiltonian"].pauli_rep
    words = [(w, _real(c)) for w, c in rep.items() if len(w)] if rep is not None else []
    if not words:  # not a sum of Pauli words, or only an identity: left to PennyLane
        return None
    if all(set(word.values()) == {"Z"} for word, _ in words):
        return [("MultiRZ" if len(word) > 1 else "RZ", list(word), h) for word, h in words]
    if all(len(word) == 1 for word, _ in words) and len({w for word, _ in words for w in word}) == len(words):
        return [("R" + next(iter(word.values())), list(word), h) for word, h in words]
    return None


def rotation_matrix(name: str, theta: float) -> np.ndarray:
    """RX or RY(θ); a θ that is not finite (a diverged optimisation's) gives NaNs, as lightning's gates do."""
    c, s = (math.cos(theta / 2), math.sin(theta / 2)) if math.isfinite(theta) else (math.nan, math.nan)
    if name == "RX":
        return np.array([[c, -1j * s], [-1j * s, c]])
    return np.array([[c, -s], [s, c]], dtype=complex)


@dataclass
class DiagonalBlock:
    """Terms (bit mask, coefficient) with, per term, the parameter it depends on and d coef / d θ."""

    masks: list[int] = field(default_factory=list)
    coefs: list[float] = field(default_factory=list)
    params: list[int] = field(default_factory=list)  # -1: no parameter
    alphas: list[float] = field(default_factory=list)
    wires: set[int] = field(default_factory=set)
    plans: dict = field(default_factory=dict, repr=False, compare=False)  # engine.sweep_block's, made once per block


@dataclass
class ProductLayer:
    """Single-qubit gates on distinct wires: wire -> (matrix, parameter index or -1, generator,
    d angle / d parameter)."""

    gates: dict[int, tuple[np.ndarray, int, int, float]] = field(default_factory=dict)
    plans: dict = field(default_factory=dict, repr=False, compare=False)  # engine._layer_passes', made once per layer

    @property
    def wires(self) -> set[int]:
        return set(self.gates)


@dataclass
class Cnot:
    control: int
    target: int

    @property
    def wires(self) -> set[int]:
        return {self.control, self.target}


@dataclass
class Dense:
    """An operator without a decomposition, applied by its matrix (no parameters to differentiate).

    Attributes:
        matrix: 2^k x 2^k, rows and columns in the order of ``axes``.
        axes: the state-tensor axes (wire indices) it acts on.
        params: the tape's parameter indices it holds; adjoint gradients refuse them when trainable.
    """

    matrix: np.ndarray
    axes: tuple[int, ...]
    params: tuple[int, ...] = ()

    @property
    def wires(self) -> set[int]:
        return set(self.axes)


Segment = DiagonalBlock | ProductLayer | Cnot | Dense


def applied_by_matrix(op: Any) -> bool:
    """Operators the device runs by their matrix: no decomposition, a small matrix."""
    return op.name not in SUPPORTED and not op.has_decomposition and op.has_matrix and len(op.wires) <= DENSE_MAX_WIRES


DENSE_MAX_WIRES = 8


def unsupported(name: str) -> UnsupportedCircuitError:
    return UnsupportedCircuitError(
        f"fused.qubit cannot run the operation {name!r}; it runs: {', '.join(sorted(SUPPORTED))}.",
        "get_device lowers other operations with its decomposition rules; add a rule for this one, or choose a lightning backend.",
    )


def compile_operations(operations: list, wire_index: dict, nwires: int) -> tuple[list[Segment], int]:
    """Schedule the operations into segments; returns the segments and the number of parameters."""
    segments: list[Segment] = []
    last_touch: dict[int, int] = {}  # wire -> index of the last segment that does not commute with a diagonal gate
    last_any: dict[int, int] = {}  # wire -> index of the last segment using the wire

    def place(name: str, wires: list[int], theta: float, param: int, scale: float, op: Any) -> None:
        """One gate of angle theta = scale·(parameter ``param``), or fixed (param -1)."""
        bits = [nwires - 1 - w for w in wires]
        if name in DIAGONAL_TERMS:
            start = max((last_touch.get(w, -1) for w in wires), default=-1)
            target = next((i for i in range(start + 1, len(segments)) if isinstance(segments[i], DiagonalBlock)), None)
            if target is None:
                segments.append(DiagonalBlock())
                target = len(segments) - 1
            block = segments[target]
            assert isinstance(block, DiagonalBlock)
            for term_wires, alpha, beta in DIAGONAL_TERMS[name](bits):
                block.masks.append(sum(1 << b for b in term_wires))
                block.coefs.append(alpha * theta + beta)
                block.params.append(param)
                block.alphas.append(alpha * scale)
            block.wires.update(wires)
            for w in wires:
                last_any[w] = max(last_any.get(w, -1), target)
        elif name in FIXED_SINGLE or name in ROTATIONS:
            w = wires[0]
            start = last_any.get(w, -1)
            target = next(
                (
                    i
                    for i in range(start + 1, len(segments))
                    if isinstance(segments[i], ProductLayer) and w not in segments[i].wires
                ),
                None,
            )
            if target is None:
                segments.append(ProductLayer())
                target = len(segments) - 1
            layer = segments[target]
            assert isinstance(layer, ProductLayer)
            if name in ROTATIONS:
                layer.gates[w] = (rotation_matrix(name, theta), param, ROTATIONS[name], scale)
            else:
                layer.gates[w] = (FIXED_SINGLE[name], -1, 0, 0.0)
            last_any[w] = last_touch[w] = target
        elif name == "CNOT" or applied_by_matrix(op):
            if name == "CNOT":
                segments.append(Cnot(bits[0], bits[1]))
            else:
                import pennylane as qml

                segments.append(Dense(qml.matrix(op), tuple(wires), tuple(range(param, param + len(op.data)))))
            for w in wires:
                last_any[w] = last_touch[w] = len(segments) - 1
        else:
            raise unsupported(name)

    param = 0
    for op in operations:
        first_param = param
        param += len(op.data)
        if op.name == "CommutingRotations":  # Π gate(2 h t): each gate on the one parameter t
            t = float(op.data[0])
            for gate, term_wires, h in op.hyperparameters["terms"]:
                place(gate, [wire_index[w] for w in term_wires], 2 * h * t, first_param, 2 * h, op)
        elif op.name == "CNOT" or applied_by_matrix(op):
            place(op.name, [wire_index[w] for w in op.wires], 0.0, first_param, 1.0, op)
        else:
            theta = float(op.data[0]) if op.data else 0.0
            place(op.name, [wire_index[w] for w in op.wires], theta, first_param if op.data else -1, 1.0, op)
    return segments, param
