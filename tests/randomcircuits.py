"""Random circuits for differential tests: every gate a runnable backend declares, the workloads' templates,
state preparation, random wire labels, Pauli-word and Hamiltonian observables.

A circuit is data (``RandomCircuit``) whose ``apply(x)`` queues it with the trainable parameters ``x``,
so the same circuit runs on any device and on the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pennylane as qml
from hypothesis import strategies as st

PAULIS = "XYZ"

# Declared gates the generic recipe (random angles, fixed wire count) cannot build, with theirs.
SPECIAL_GATES = {"PauliRot", "QubitUnitary", "PCPhase", "GlobalPhase", "MultiRZ", "ApproxTimeEvolution"}
# The workloads' templates and the ops the issue asks to cover beyond declared gates.
TEMPLATES = ("qaoa", "evolve", "angle_embedding", "pauli_rot", "rot", "crot")
STATE_PREPS = ("StatePrep", "BasisState", "AmplitudeEmbedding", "BasisEmbedding")


@dataclass
class Step:
    """One operator (or template) of a random circuit, reading ``nparams`` trainable parameters."""

    label: str
    nparams: int
    queue: Callable[[Sequence[Any]], None]


@dataclass
class RandomCircuit:
    wires: list[Any]  # the circuit's wire labels, in the order the device is built with
    prep: Step | None
    steps: list[Step]
    observable: Any
    probs_wires: list[Any]
    commuting_evolutions: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def nparams(self) -> int:
        return sum(s.nparams for s in self.steps)

    def apply(self, x: Sequence[Any]) -> None:
        if self.prep is not None:
            self.prep.queue(())
        i = 0
        for step in self.steps:
            step.queue(x[i : i + step.nparams])
            i += step.nparams

    def __repr__(self) -> str:
        prep = f"{self.prep.label}; " if self.prep else ""
        return f"RandomCircuit(wires={self.wires}, {prep}{[s.label for s in self.steps]}, obs={self.observable})"


def gate_class(name: str) -> Any:
    return getattr(qml, name, None) or getattr(qml.ops, name)


def generic_gate(name: str) -> bool:
    """True when ``name`` is built by the generic recipe: a fixed wire count, angles as parameters."""
    cls = gate_class(name)
    return name not in SPECIAL_GATES and isinstance(cls.num_params, int)


def _wire_count(cls: Any) -> int:
    return cls.num_wires if isinstance(cls.num_wires, int) else 1  # Identity: any wires


def _pauli_word(draw: Any, wires: Sequence[Any], max_len: int = 3) -> dict[Any, str]:
    chosen = draw(st.lists(st.sampled_from(list(wires)), min_size=1, max_size=min(max_len, len(wires)), unique=True))
    return {w: draw(st.sampled_from(PAULIS)) for w in chosen}


def _pauli_op(word: dict[Any, str]) -> Any:
    ops = [{"X": qml.X, "Y": qml.Y, "Z": qml.Z}[p](w) for w, p in word.items()]
    return ops[0] if len(ops) == 1 else qml.prod(*ops)


def _hamiltonian(draw: Any, wires: Sequence[Any], commuting: bool) -> Any:
    """1-3 terms; ``commuting`` draws Z words only (diagonal), plus sometimes a duplicate or identity term."""
    terms = []
    for _ in range(draw(st.integers(1, 3))):
        word = _pauli_word(draw, wires)
        if commuting:
            word = dict.fromkeys(word, "Z")
        terms.append(_pauli_op(word))
    if draw(st.booleans()):
        terms.append(terms[0])  # duplicate terms merge into one
    if draw(st.booleans()):
        terms.append(qml.Identity(wires[0]))
    coeffs = [draw(st.floats(-1.5, 1.5).filter(lambda c: abs(c) > 0.05)) for _ in terms]
    return qml.Hamiltonian(coeffs, terms)


def _angle() -> st.SearchStrategy[float]:
    return st.floats(-np.pi, np.pi)


@st.composite
def steps_for(draw: Any, gates: Sequence[str], wires: Sequence[Any], commuting_only: bool) -> Step:
    """One random step: a declared gate or a template, on random wires."""
    kind = draw(st.sampled_from(sorted(gates) + list(TEMPLATES)))
    n = len(wires)
    if kind in TEMPLATES:
        return _template(draw, kind, wires, commuting_only)
    cls = gate_class(kind)
    if kind == "PauliRot":
        return _template(draw, "pauli_rot", wires, commuting_only)
    if kind == "MultiRZ":
        on = draw(st.lists(st.sampled_from(list(wires)), min_size=1, max_size=min(4, n), unique=True))
        return Step(f"MultiRZ{on}", 1, lambda x, on=on: qml.MultiRZ(x[0], wires=on))
    if kind == "GlobalPhase":
        return Step("GlobalPhase", 1, lambda x: qml.GlobalPhase(x[0], wires=wires))
    if kind == "ApproxTimeEvolution":
        h = _hamiltonian(draw, wires, commuting_only or draw(st.booleans()))
        rounds = draw(st.integers(1, 3))
        return Step(f"ApproxTimeEvolution({h}, {rounds})", 1, lambda x: qml.ApproxTimeEvolution(h, x[0], rounds))
    if kind == "QubitUnitary":
        k = min(draw(st.integers(1, 2)), n)
        on = draw(st.lists(st.sampled_from(list(wires)), min_size=k, max_size=k, unique=True))
        seed = draw(st.integers(0, 2**16))
        u = _random_unitary(2**k, seed)
        return Step(f"QubitUnitary{on}", 0, lambda x, on=on, u=u: qml.QubitUnitary(u, wires=on))
    if kind == "PCPhase":
        k = min(draw(st.integers(1, 2)), n)
        on = draw(st.lists(st.sampled_from(list(wires)), min_size=k, max_size=k, unique=True))
        dim = draw(st.integers(1, 2**k - 1)) if k > 1 else 1
        return Step(f"PCPhase{on}", 1, lambda x, on=on, dim=dim: qml.PCPhase(x[0], dim=dim, wires=on))
    k = _wire_count(cls)
    if k > n:
        return Step(f"RX({kind} needs {k} wires)", 1, lambda x: qml.RX(x[0], wires=wires[0]))
    on = draw(st.lists(st.sampled_from(list(wires)), min_size=k, max_size=k, unique=True))
    if cls.grad_method is None and cls.num_params:  # not differentiable anywhere (BlockEncode): constants
        values = draw(st.lists(st.floats(-0.9, 0.9), min_size=cls.num_params, max_size=cls.num_params))
        return Step(f"{kind}{on}{values}", 0, lambda x, on=on, cls=cls, v=values: cls(*v, wires=on))
    return Step(f"{kind}{on}", cls.num_params, lambda x, on=on, cls=cls: cls(*x, wires=on))


def _template(draw: Any, kind: str, wires: Sequence[Any], commuting_only: bool) -> Step:
    n = len(wires)
    if kind == "rot":
        w = draw(st.sampled_from(list(wires)))
        return Step(f"Rot[{w}]", 3, lambda x: qml.Rot(*x, wires=w))
    if kind == "crot" and n >= 2:
        on = draw(st.lists(st.sampled_from(list(wires)), min_size=2, max_size=2, unique=True))
        return Step(f"CRot{on}", 3, lambda x: qml.CRot(*x, wires=on))
    if kind == "pauli_rot" or kind == "crot":
        word = _pauli_word(draw, wires, max_len=4)
        text = "".join(word.values())
        return Step(f"PauliRot({text}){list(word)}", 1, lambda x: qml.PauliRot(x[0], text, wires=list(word)))
    if kind == "angle_embedding":
        k = draw(st.integers(1, n))
        on = draw(st.lists(st.sampled_from(list(wires)), min_size=k, max_size=k, unique=True))
        rotation = draw(st.sampled_from(PAULIS))
        return Step(
            f"AngleEmbedding({rotation}){on}", k, lambda x: qml.AngleEmbedding(qml.math.stack(x), wires=on, rotation=rotation)
        )
    if kind == "qaoa" and n >= 2:
        pairs = [(a, b) for i, a in enumerate(wires) for b in wires[i + 1 :]]
        edges = draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=min(6, len(pairs)), unique=True))
        import networkx as nx

        graph = nx.Graph()
        graph.add_edges_from(edges)
        cost, mixer = qml.qaoa.maxcut(graph)
        return Step(f"qaoa{edges}", 2, lambda x: (qml.qaoa.cost_layer(x[0], cost), qml.qaoa.mixer_layer(x[1], mixer)))
    commuting = commuting_only or draw(st.booleans())
    h = _hamiltonian(draw, wires, commuting)
    return Step(f"evolve({h})", 1, lambda x: qml.evolve(h, x[0]))


@st.composite
def state_prep(draw: Any, wires: Sequence[Any]) -> Step:
    kind = draw(st.sampled_from(STATE_PREPS))
    n = len(wires)
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    if kind == "StatePrep":
        v = rng.normal(size=2**n) + 1j * rng.normal(size=2**n)
        v /= np.linalg.norm(v)
        return Step("StatePrep", 0, lambda x: qml.StatePrep(v, wires=wires))
    bits = rng.integers(0, 2, size=n)
    if kind == "BasisState":
        return Step(f"BasisState{list(bits)}", 0, lambda x: qml.BasisState(bits, wires=wires))
    if kind == "BasisEmbedding":
        return Step(f"BasisEmbedding{list(bits)}", 0, lambda x: qml.BasisEmbedding(bits, wires=wires))
    v = rng.uniform(0.1, 1.0, size=2**n)
    return Step("AmplitudeEmbedding", 0, lambda x: qml.AmplitudeEmbedding(v, wires=wires, normalize=True))


def _random_unitary(dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.normal(size=(dim, dim)) + 1j * rng.normal(size=(dim, dim)))
    return q * (np.diag(r) / np.abs(np.diag(r)))


WIRE_LABELS = (list(range(20)), ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n"], [7, "q", 3.5, "z", -1])


@st.composite
def random_circuits(draw: Any, gates: Sequence[str], max_wires: int = 14, max_steps: int = 8) -> RandomCircuit:
    """A random circuit on 1..max_wires wires with random labels, in a random device order."""
    n = draw(st.one_of(st.integers(1, 5), st.integers(1, max_wires)))
    pool = draw(st.sampled_from([labels for labels in WIRE_LABELS if len(labels) >= n] or [WIRE_LABELS[0]]))
    wires = draw(st.permutations(list(pool)[: max(n, 1)]))[:n]
    if len(wires) < n:
        wires = list(range(n))
    commuting_only = draw(st.booleans())
    prep = draw(state_prep(wires)) if draw(st.integers(0, 3)) == 0 else None
    steps = draw(st.lists(steps_for(gates, wires, commuting_only), min_size=1, max_size=max_steps))
    if draw(st.booleans()):
        observable = _pauli_op(_pauli_word(draw, wires))
    else:
        observable = _hamiltonian(draw, wires, commuting=False)
    k = draw(st.integers(1, min(3, n)))
    probs_wires = draw(st.lists(st.sampled_from(list(wires)), min_size=k, max_size=k, unique=True))
    return RandomCircuit(list(wires), prep, steps, observable, probs_wires, commuting_only)
