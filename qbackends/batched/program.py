"""Lower a tape to the batched kernels' tables: operations, parameter slots, Pauli terms of measurements.

Every native parameterised operation becomes rotations whose angle *is* one of its parameters (Rot
and CRot as three rotations, Pauli rotations as a basis change around MultiRZ), so a slot maps to a
tape parameter unchanged and a gradient needs no chain rule here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UnsupportedCircuitError
from .kernels import MATRIX, MULTI_RZ, PHASE, ROT_X, ROT_Y, ROT_Z, SWAP, apply_paulis, pauli_expvals

NAME = "qbackends.batched.qubit"
ROTATION = {"RX": ROT_X, "RY": ROT_Y, "RZ": ROT_Z, "CRX": ROT_X, "CRY": ROT_Y, "CRZ": ROT_Z}
PHASES = {"PhaseShift": 0, "U1": 0, "ControlledPhaseShift": 1}
EULER = {"Rot": 0, "CRot": 1}  # RZ(φ) RY(θ) RZ(ω), with this many controls
PAULI_ROTATIONS = {"MultiRZ", "IsingZZ", "IsingXX", "IsingYY", "PauliRot"}
CONTROLLED_FIXED = {"CNOT": ("PauliX", 1), "CZ": ("PauliZ", 1), "CY": ("PauliY", 1), "CH": ("Hadamard", 1)}
CONTROLLED_FIXED |= {"Toffoli": ("PauliX", 2), "CCZ": ("PauliZ", 2)}
SWAPS = {"SWAP": 0, "CSWAP": 1}
DROPPED = {"GlobalPhase", "Identity", "Barrier", "Snapshot"}  # no effect on expectations or probabilities
NATIVE = frozenset(ROTATION) | frozenset(PHASES) | frozenset(EULER) | PAULI_ROTATIONS
NATIVE |= frozenset(CONTROLLED_FIXED) | frozenset(SWAPS) | DROPPED


FIXED = frozenset({"Hadamard", "PauliX", "PauliY", "PauliZ", "S", "T", "SX"})  # PennyLane's, lowered as their matrix


def is_native(op: Any) -> bool:
    """Whether the kernels run ``op`` as it is (else PennyLane decomposes it first)."""
    return op.name in NATIVE or (op.num_params == 0 and len(op.wires) == 1 and op.has_matrix)


@dataclass
class Program:
    """The kernels' tables for one circuit structure."""

    nwires: int
    ops: np.ndarray  # (K, 6) int64 rows, see kernels
    groups: np.ndarray  # (G, 2): rows [start, end) run in one sweep
    matrices: np.ndarray  # (M, 2, 2) complex
    slot_param: np.ndarray  # slot -> index of the tape parameter it reads (op parameters in tape order)

    @property
    def nslots(self) -> int:
        return len(self.slot_param)


@dataclass
class _Builder:
    bit: dict[Any, int]
    rows: list[list[int]] = field(default_factory=list)
    matrices: list[np.ndarray] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)

    def mask(self, wires: Any) -> int:
        return sum(1 << self.bit[w] for w in wires)

    def rotation(self, kind: int, target: Any, controls: Any, param: int) -> None:
        self.slots.append(param)
        self.rows.append([kind, self.bit[target], self.mask(controls), len(self.slots) - 1, -1, 0])

    def multirz(self, wires: Any, param: int) -> None:
        self.slots.append(param)
        self.rows.append([MULTI_RZ, 0, 0, len(self.slots) - 1, -1, self.mask(wires)])

    def matrix(self, matrix: np.ndarray, target: Any, controls: Any = ()) -> None:
        self.matrices.append(np.asarray(matrix, dtype=complex))
        self.rows.append([MATRIX, self.bit[target], self.mask(controls), -1, len(self.matrices) - 1, 0])

    def swap(self, a: Any, b: Any, controls: Any) -> None:
        self.rows.append([SWAP, self.bit[a], self.mask(controls), -1, -1, self.bit[b]])


def _pauli_word(op: Any) -> dict[Any, str]:
    if op.name == "PauliRot":
        return {w: p for w, p in zip(op.wires, op.hyperparameters["pauli_word"], strict=True) if p != "I"}
    letter = {"MultiRZ": "Z", "IsingZZ": "Z", "IsingXX": "X", "IsingYY": "Y"}[op.name]
    return dict.fromkeys(op.wires, letter)


def _basis_change(letter: str) -> np.ndarray:
    """V with V P V† = Z for the Pauli ``letter``."""
    import pennylane as qml

    gates = {"X": qml.X(0), "Y": qml.Y(0)}[letter].diagonalizing_gates()
    return qml.matrix(qml.prod(*reversed(gates))) if len(gates) > 1 else qml.matrix(gates[0])


def structure(operations: Any, wires: Any) -> tuple[Any, ...] | None:
    """All that ``lower`` reads of a circuit (names, wires, parameter counts, Pauli words), not its parameters: the
    same structure lowers to the same program. None where a gate runs as its matrix and is not one of the fixed
    gates (``FIXED``): a product or a user's gate may have settings that make its matrix."""
    parts = []
    for op in operations:
        fixed = op.name in FIXED and type(op).__module__.startswith("pennylane.") and not op.hyperparameters
        if op.name not in NATIVE and not fixed:  # NATIVE: lowered by name, whatever else the operator holds
            return None
        parts.append(
            (op.name, op.wires.labels, len(op.data), op.hyperparameters["pauli_word"] if op.name == "PauliRot" else None)
        )
    return tuple(wires), tuple(parts)


def lower(operations: Any, wires: Any) -> Program:
    """The program of ``operations`` (native ones, see ``is_native``) on the device's ``wires``."""
    import pennylane as qml

    n = len(wires)
    b = _Builder({w: n - 1 - i for i, w in enumerate(wires)})
    param = 0
    for op in operations:
        name, w = op.name, op.wires
        if name in ROTATION:
            b.rotation(ROTATION[name], w[-1], w[:-1], param)
        elif name in PHASES:
            b.rotation(PHASE, w[-1], w[: PHASES[name]], param)
        elif name in EULER:
            controls = w[: EULER[name]]
            for offset, kind in enumerate((ROT_Z, ROT_Y, ROT_Z)):
                b.rotation(kind, w[-1], controls, param + offset)
        elif name in PAULI_ROTATIONS:
            word = _pauli_word(op)
            changes = {wire: _basis_change(p) for wire, p in word.items() if p != "Z"}
            for wire, v in changes.items():
                b.matrix(v, wire)
            if word:
                b.multirz(list(word), param)
            for wire, v in changes.items():
                b.matrix(v.conj().T, wire)
        elif name in CONTROLLED_FIXED:
            base, ncontrols = CONTROLLED_FIXED[name]
            b.matrix(qml.matrix(getattr(qml, base)(0)), w[-1], w[:ncontrols])
        elif name in SWAPS:
            b.swap(w[-2], w[-1], w[: SWAPS[name]])
        elif name not in DROPPED:
            if not is_native(op):
                raise UnsupportedCircuitError(
                    f"{NAME} cannot run {name}: it has no decomposition into the gates it runs.",
                    "use another backend for this circuit (for example local:pennylane/default.qubit).",
                )
            b.matrix(qml.matrix(op), w[0])
        param += len(op.data)
    rows, groups = _grouped(b.rows)
    matrices = np.array(b.matrices, dtype=complex).reshape(-1, 2, 2)
    return Program(n, rows, groups, matrices, np.array(b.slots, dtype=np.int64))


SINGLE_QUBIT = (ROT_X, ROT_Y, ROT_Z, PHASE, MATRIX)


def _grouped(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows reordered into groups: a single-qubit operation joins the group of the same target and
    controls that last touched its wires (everything after that group commutes with it)."""
    groups: list[list[list[int]]] = []
    touched: list[int] = []
    for row in rows:
        kind, target, controls, _, _, mask = row
        wires = controls | (mask if kind == MULTI_RZ else 1 << target) | (1 << mask if kind == SWAP else 0)
        last = next((groups[g] for g in range(len(groups) - 1, -1, -1) if touched[g] & wires), None)
        if kind in SINGLE_QUBIT and last is not None and last[0][0] in SINGLE_QUBIT and last[0][1:3] == [target, controls]:
            last.append(row)
        else:
            groups.append([row])
            touched.append(wires)
    flat = [row for group in groups for row in group]
    ends = np.cumsum([len(group) for group in groups], dtype=np.int64)
    bounds = np.stack([ends - [len(group) for group in groups], ends], axis=1) if groups else np.zeros((0, 2), np.int64)
    return np.array(flat, dtype=np.int64).reshape(-1, 6), bounds.astype(np.int64)


@dataclass
class PauliTerms:
    """Σ_t coefs[t]·P_t with P_t|i> = phases[t]·(-1)^|i & zmasks[t]|·|i ^ xmasks[t]>."""

    xmasks: np.ndarray
    zmasks: np.ndarray
    phases: np.ndarray
    coefs: np.ndarray

    def expvals(self, states: np.ndarray) -> np.ndarray:
        """<ψ_b|O|ψ_b> for every row b."""
        per_term = np.empty((states.shape[0], len(self.xmasks)))
        pauli_expvals(states, self.xmasks, self.zmasks, self.phases, per_term)
        return per_term @ np.real(self.coefs)

    def apply(self, states: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """weights_b·O ψ_b for every row b (``weights``: one per row): λ of a vector-Jacobian product."""
        out = np.empty_like(states)
        apply_paulis(states, self.xmasks, self.zmasks, self.phases, weights.reshape(-1, 1) * np.real(self.coefs), out)
        return out


def pauli_terms(observable: Any, wires: Any) -> PauliTerms:
    """The Pauli terms of an observable, or a typed refusal for one without a Pauli form."""
    sentence = observable.pauli_rep
    if sentence is None:
        raise UnsupportedCircuitError(
            f"{NAME} measures Pauli words and sums of them; {observable.name} has no Pauli form.",
            "measure Pauli words or a Hamiltonian, or use another backend (e.g. local:pennylane/default.qubit).",
        )
    n = len(wires)
    bit = {w: n - 1 - i for i, w in enumerate(wires)}
    xs, zs, phases, coefs = [], [], [], []
    for word, coef in sentence.items():
        x = sum(1 << bit[w] for w, p in word.items() if p in "XY")
        z = sum(1 << bit[w] for w, p in word.items() if p in "ZY")
        ny = sum(p == "Y" for p in word.values())
        xs.append(x)
        zs.append(z)
        phases.append(1j**ny)
        coefs.append(coef)
    return PauliTerms(
        np.array(xs, dtype=np.int64), np.array(zs, dtype=np.int64), np.array(phases, dtype=complex), np.array(coefs)
    )
