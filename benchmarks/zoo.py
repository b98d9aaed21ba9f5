"""The auto zoo: circuits written the way PennyLane's demos write them, one training (or sampling) step each.

Each entry's ``make(device)`` builds its circuit on ``device`` with fixed, seeded inputs and returns
``step()``, which runs one value (and its gradient, where the circuit has one) exactly as a user's
training loop would, and returns them as a tuple of arrays or tensors: what the benchmark compares
across backends before it times them. Nothing here knows about qbackends; ``device`` is any
PennyLane device.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import pennylane as qml
from pennylane import numpy as pnp

Step = Callable[[], tuple[Any, ...]]


@dataclass(frozen=True)
class Circuit:
    """One zoo entry.

    Attributes:
        name: stable id, the benchmark's parameter and group ("qaoa-16").
        wires: number of wires ``make`` needs.
        make: ``make(device) -> step``; ``step()`` runs one value (+ gradient) and returns them.
        source: the PennyLane demo (or documentation page) the circuit is written after.
        batch: the minibatch (broadcast) size, None for a single circuit.
        diff_method: the QNode's differentiation method (None: value only); also what the memory
            guard of ``get_device`` is told.
        shots: finite shots of the QNode, None when analytic.
        atol: how far a backend's results may be from lightning.qubit's (float64 results; float32
            ones are compared to float32 precision).
        slow: long (benchmarks marked ``slow``).
    """

    name: str
    wires: int
    make: Callable[[Any], Step]
    source: str
    batch: int | None = None
    diff_method: str | None = "adjoint"
    shots: int | None = None
    atol: float = 1e-8
    slow: bool = False


def value_and_grad(cost: Callable[..., Any], *args: Any) -> Step:
    """A step as ``qml.GradientDescentOptimizer.step_and_cost`` runs it: one forward pass that also
    gives the value (``qml.grad``'s ``forward``), and the gradient."""
    grad_fn = qml.grad(cost)

    def step() -> tuple[Any, ...]:
        grad = grad_fn(*args)
        return (grad_fn.forward, *(grad if isinstance(grad, tuple) else (grad,)))

    return step


# ---- QAOA MaxCut: "Intro to QAOA" (tutorial_qaoa_intro) ---------------------------------------


def qaoa_maxcut(device: Any, nodes: int, edges: int, weighted: bool = False, depth: int = 2) -> Step:
    """``qml.qaoa.maxcut`` cost and mixer layers after Hadamards, p = ``depth``; weighted: random
    edge weights and the cost Hamiltonian written out, sum of w/2 (Z Z - 1)."""
    graph = nx.gnm_random_graph(nodes, edges, seed=1967)
    wires = range(nodes)
    if weighted:
        rng = np.random.default_rng(5)
        coeffs, terms = [], []
        for u, v in graph.edges:
            w = float(rng.uniform(0.1, 1.0))
            coeffs += [w / 2, -w / 2]
            terms += [qml.Z(u) @ qml.Z(v), qml.Identity(u) @ qml.Identity(v)]
        cost_h, mixer_h = qml.Hamiltonian(coeffs, terms), qml.qaoa.x_mixer(wires)
    else:
        cost_h, mixer_h = qml.qaoa.maxcut(graph)

    def qaoa_layer(gamma, alpha):
        qml.qaoa.cost_layer(gamma, cost_h)
        qml.qaoa.mixer_layer(alpha, mixer_h)

    @qml.qnode(device, diff_method="adjoint")
    def cost_function(params):
        for w in wires:
            qml.Hadamard(wires=w)
        qml.layer(qaoa_layer, depth, params[0], params[1])
        return qml.expval(cost_h)

    params = pnp.array(np.random.default_rng(1).uniform(0, 1, (2, depth)), requires_grad=True)
    return value_and_grad(cost_function, params)


# ---- Quantum transfer learning: the dressed quantum circuit (tutorial_quantum_transfer_learning) --


def dressed_qnn(device: Any, n_qubits: int, batch: int, q_depth: int = 6, features: int = 512) -> Step:
    """Linear(512, n) -> tanh * pi/2 -> ``qml.qnn.TorchLayer`` (H on every wire, RY embedding,
    ``q_depth`` CNOT ladders + RY weights, <Z> per wire) -> Linear(n, 2); cross-entropy, backward.
    torch's default dtype (float32) as the demo leaves it; the quantum output is cast back with
    ``.float()`` as the demo does."""
    import torch

    def entangling_layer(nqubits):
        for i in range(0, nqubits - 1, 2):
            qml.CNOT(wires=[i, i + 1])
        for i in range(1, nqubits - 1, 2):
            qml.CNOT(wires=[i, i + 1])

    @qml.qnode(device, interface="torch", diff_method="adjoint")
    def quantum_net(inputs, q_weights):
        for idx in range(n_qubits):
            qml.Hadamard(wires=idx)
        for idx in range(n_qubits):
            qml.RY(inputs[..., idx], wires=idx)
        for k in range(q_depth):
            entangling_layer(n_qubits)
            for idx in range(n_qubits):
                qml.RY(q_weights[k, idx], wires=idx)
        return [qml.expval(qml.Z(i)) for i in range(n_qubits)]

    class DressedQuantumNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pre_net = torch.nn.Linear(features, n_qubits)
            self.q_layer = qml.qnn.TorchLayer(quantum_net, {"q_weights": (q_depth, n_qubits)})
            self.post_net = torch.nn.Linear(n_qubits, 2)
            self.q_out = None

        def forward(self, input_features):
            q_in = torch.tanh(self.pre_net(input_features)) * np.pi / 2.0
            q_out = self.q_layer(q_in)
            self.q_out = q_out.detach()  # the quantum layer's own output, compared before the cast
            return self.post_net(q_out.float())

    generator = torch.Generator().manual_seed(7)
    torch.manual_seed(7)  # the layers' initial weights
    model = DressedQuantumNet()
    inputs = torch.randn(batch, features, generator=generator)
    labels = torch.randint(0, 2, (batch,), generator=generator)
    criterion = torch.nn.CrossEntropyLoss()

    def step() -> tuple[Any, ...]:
        model.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        return (model.q_out, loss.detach(), *(p.grad for p in model.parameters()))

    return step


# ---- Data re-uploading classifier (tutorial_data_reuploading_classifier) -----------------------


def reuploading_classifier(device: Any, batch: int = 64, num_layers: int = 4) -> Step:
    """One qubit, Rot(x) then Rot(weights) per layer, <Z>; a minibatch of points as one broadcast
    (inputs of shape (batch, 3)), mean squared error against +-1 labels, autograd."""
    rng = np.random.default_rng(11)
    points = rng.uniform(-1, 1, (batch, 2))
    x = pnp.array(np.column_stack([points, np.zeros(batch)]) * np.pi, requires_grad=False)  # the demo's [x1, x2, 0]
    y = pnp.array(np.where(np.linalg.norm(points, axis=1) < np.sqrt(2 / np.pi), 1.0, -1.0), requires_grad=False)
    params = pnp.array(rng.uniform(0, 2 * np.pi, (num_layers, 3)), requires_grad=True)

    @qml.qnode(device)
    def qcircuit(params, x):
        for p in params:
            qml.Rot(x[:, 0], x[:, 1], x[:, 2], wires=0)
            qml.Rot(*p, wires=0)
        return qml.expval(qml.Z(0))

    def cost(params):
        return pnp.mean((y - qcircuit(params, x)) ** 2)

    return value_and_grad(cost, params)


# ---- A broadcast classifier on templates (qml.AngleEmbedding, qml.BasicEntanglerLayers docs) ----


def broadcast_classifier(device: Any, n_wires: int, batch: int, n_layers: int = 2) -> Step:
    """AngleEmbedding of a minibatch (shape (batch, n_wires)) then BasicEntanglerLayers, <Z0>;
    mean squared error, autograd, the QNode's default differentiation method."""
    rng = np.random.default_rng(16)
    x = pnp.array(rng.uniform(0, np.pi, (batch, n_wires)), requires_grad=False)
    y = pnp.array(rng.choice([-1.0, 1.0], batch), requires_grad=False)
    weights = pnp.array(rng.uniform(0, 2 * np.pi, (n_layers, n_wires)), requires_grad=True)

    @qml.qnode(device)
    def circuit(weights, x):
        qml.AngleEmbedding(x, wires=range(n_wires))
        qml.BasicEntanglerLayers(weights, wires=range(n_wires))
        return qml.expval(qml.Z(0))

    def cost(weights):
        return pnp.mean((y - circuit(weights, x)) ** 2)

    return value_and_grad(cost, weights)


# ---- VQE with templates (tutorial_vqe, qml.StronglyEntanglingLayers / qml.BasicEntanglerLayers docs) --


def random_pauli_hamiltonian(n_wires: int, n_terms: int, seed: int, max_weight: int = 4) -> qml.Hamiltonian:
    """``n_terms`` random Pauli words on 1..``max_weight`` wires, normal coefficients, seeded."""
    rng = np.random.default_rng(seed)
    paulis = (qml.X, qml.Y, qml.Z)
    coeffs, words = [], []
    for _ in range(n_terms):
        weight = int(rng.integers(1, max_weight + 1))
        on = sorted(rng.choice(n_wires, weight, replace=False).tolist())
        factors = [paulis[int(rng.integers(3))](w) for w in on]
        words.append(factors[0] if len(factors) == 1 else qml.prod(*factors))
        coeffs.append(float(rng.normal()))
    return qml.Hamiltonian(coeffs, words)


def vqe_template(device: Any, template: Any, n_wires: int, n_layers: int, n_terms: int) -> Step:
    """``template(weights, wires)`` against a random Pauli Hamiltonian, adjoint value + gradient."""
    hamiltonian = random_pauli_hamiltonian(n_wires, n_terms, seed=n_wires)
    shape = template.shape(n_layers=n_layers, n_wires=n_wires)
    weights = pnp.array(np.random.default_rng(3).uniform(0, 2 * np.pi, shape), requires_grad=True)

    @qml.qnode(device, diff_method="adjoint")
    def energy(weights):
        template(weights, wires=range(n_wires))
        return qml.expval(hamiltonian)

    return value_and_grad(energy, weights)


def molecular_like_hamiltonian(n_qubits: int, doubles: list, seed: int) -> qml.Hamiltonian:
    """The shape of a Jordan-Wigner molecular Hamiltonian without a chemistry package: a constant,
    Z_i, Z_i Z_j, and for each double excitation its XXYY-type terms (the four with an odd number
    of Y's have opposite signs)."""
    rng = np.random.default_rng(seed)
    coeffs, terms = [-1.0], [qml.Identity(0)]
    for i in range(n_qubits):
        coeffs.append(float(rng.normal(0, 0.3)))
        terms.append(qml.Z(i))
    for i in range(n_qubits):
        for j in range(i + 1, n_qubits):
            coeffs.append(float(rng.normal(0, 0.1)))
            terms.append(qml.Z(i) @ qml.Z(j))
    letters = {"X": qml.X, "Y": qml.Y}
    for wires in doubles:
        c = float(rng.normal(0, 0.05))
        for word, sign in (("XXYY", 1), ("YYXX", 1), ("XYYX", -1), ("YXXY", -1)):
            coeffs.append(sign * c)
            terms.append(qml.prod(*(letters[p](w) for p, w in zip(word, wires, strict=True))))
    return qml.Hamiltonian(coeffs, terms)


def uccsd_like(device: Any, electrons: int = 4, qubits: int = 8) -> Step:
    """HF state by ``qml.BasisState``, then a DoubleExcitation per double and a SingleExcitation per
    single (``qml.qchem.excitations``), a molecular-like Hamiltonian; adjoint value + gradient."""
    hf = qml.qchem.hf_state(electrons, qubits)
    singles, doubles = qml.qchem.excitations(electrons, qubits)
    hamiltonian = molecular_like_hamiltonian(qubits, doubles, seed=8)
    params = pnp.array(np.random.default_rng(2).normal(0, 0.2, len(singles) + len(doubles)), requires_grad=True)

    @qml.qnode(device, diff_method="adjoint")
    def energy(params):
        qml.BasisState(hf, wires=range(qubits))
        for i, excitation in enumerate(doubles):
            qml.DoubleExcitation(params[i], wires=excitation)
        for j, excitation in enumerate(singles):
            qml.SingleExcitation(params[len(doubles) + j], wires=excitation)
        return qml.expval(hamiltonian)

    return value_and_grad(energy, params)


# ---- Finite shots: a hardware-efficient ansatz, parameter-shift (tutorial_vqe shots, qml.set_shots docs) --


def hardware_efficient_shots(device: Any, n_wires: int, n_layers: int, shots: int) -> Step:
    """RY, RZ on every wire and a CNOT ladder per layer; three expectations (Z0, Z0 Z1, X on the last
    wire) combined into a cost; ``qml.set_shots``, parameter-shift gradient."""
    weights = pnp.array(np.random.default_rng(4).uniform(0, 2 * np.pi, (n_layers, n_wires, 2)), requires_grad=True)

    @qml.set_shots(shots)
    @qml.qnode(device, diff_method="parameter-shift")
    def circuit(weights):
        for layer in weights:
            for w in range(n_wires):
                qml.RY(layer[w, 0], wires=w)
                qml.RZ(layer[w, 1], wires=w)
            for w in range(n_wires - 1):
                qml.CNOT(wires=[w, w + 1])
        return qml.expval(qml.Z(0)), qml.expval(qml.Z(0) @ qml.Z(1)), qml.expval(qml.X(n_wires - 1))

    def cost(weights):
        z0, zz, x = circuit(weights)
        return z0 + 0.5 * zz - 0.3 * x

    return value_and_grad(cost, weights)


# ---- A random circuit's probabilities, no gradient (tutorial_qsim_beyond_classical) -------------


def random_circuit_probs(device: Any, rows: int, cols: int, cycles: int) -> Step:
    """Cycles of random sqrt(X), sqrt(Y), sqrt(W) on a rows x cols grid, then fSim(pi/2, pi/6)
    couplers (iSWAP^dagger and a controlled phase) on one of four patterns ABCD; ``qml.probs``."""
    rng = np.random.default_rng(14)
    n_wires = rows * cols
    at = np.arange(n_wires).reshape(rows, cols)
    patterns = [
        [(at[r, c], at[r, c + 1]) for r in range(rows) for c in range(0, cols - 1, 2)],
        [(at[r, c], at[r + 1, c]) for r in range(rows - 1) for c in range(cols)],
        [(at[r, c], at[r, c + 1]) for r in range(rows) for c in range(1, cols - 1, 2)],
        [(at[r, c], at[r + 1, c]) for r in range(rows - 1) for c in range(1, cols, 2)],
    ]
    gates = [rng.integers(3, size=n_wires) for _ in range(cycles)]

    def sqrt_w(wires):
        qml.RZ(-np.pi / 4, wires=wires)
        qml.SX(wires=wires)
        qml.RZ(np.pi / 4, wires=wires)

    single = [qml.SX, lambda wires: qml.RY(np.pi / 2, wires=wires), sqrt_w]

    @qml.qnode(device, diff_method=None)
    def circuit():
        for cycle in range(cycles):
            for w in range(n_wires):
                single[gates[cycle][w]](wires=w)
            for a, b in patterns[cycle % 4]:
                qml.adjoint(qml.ISWAP(wires=[int(a), int(b)]))
                qml.ControlledPhaseShift(-np.pi / 6, wires=[int(a), int(b)])
        return qml.probs(wires=range(n_wires))

    return lambda: (circuit(),)


P = functools.partial
ZOO: tuple[Circuit, ...] = (
    Circuit("qaoa-12", 12, P(qaoa_maxcut, nodes=12, edges=16), "tutorial_qaoa_intro (qml.qaoa.maxcut, p=2)"),
    Circuit("qaoa-16", 16, P(qaoa_maxcut, nodes=16, edges=22), "tutorial_qaoa_intro (qml.qaoa.maxcut, p=2)"),
    Circuit("qaoa-20", 20, P(qaoa_maxcut, nodes=20, edges=30), "tutorial_qaoa_intro (qml.qaoa.maxcut, p=2)"),
    Circuit("qaoa-22", 22, P(qaoa_maxcut, nodes=22, edges=33), "tutorial_qaoa_intro (qml.qaoa.maxcut, p=2)", slow=True),
    Circuit(
        "qaoa-weighted-16",
        16,
        P(qaoa_maxcut, nodes=16, edges=22, weighted=True),
        "tutorial_qaoa_intro, weighted edges (cost Hamiltonian by hand)",
    ),
    Circuit(
        "qnn-dressed-4",
        4,
        P(dressed_qnn, n_qubits=4, batch=16),
        "tutorial_quantum_transfer_learning (dressed circuit, qml.qnn.TorchLayer)",
        batch=16,
    ),
    Circuit(
        "qnn-dressed-8",
        8,
        P(dressed_qnn, n_qubits=8, batch=32),
        "tutorial_quantum_transfer_learning (dressed circuit, qml.qnn.TorchLayer)",
        batch=32,
    ),
    Circuit(
        "reupload-1",
        1,
        P(reuploading_classifier, batch=64),
        "tutorial_data_reuploading_classifier (broadcast minibatch)",
        batch=64,
        diff_method="best",
    ),
    Circuit(
        "broadcast-16",
        16,
        P(broadcast_classifier, n_wires=16, batch=16),
        "qml.AngleEmbedding + qml.BasicEntanglerLayers docs (broadcast minibatch)",
        batch=16,
        diff_method="best",
    ),
    Circuit(
        "vqe-sel-12",
        12,
        P(vqe_template, template=qml.StronglyEntanglingLayers, n_wires=12, n_layers=2, n_terms=30),
        "tutorial_vqe with qml.StronglyEntanglingLayers, 30 random Pauli words",
    ),
    Circuit(
        "vqe-basic-18",
        18,
        P(vqe_template, template=qml.BasicEntanglerLayers, n_wires=18, n_layers=2, n_terms=20),
        "tutorial_vqe with qml.BasicEntanglerLayers, 20 random Pauli words",
    ),
    Circuit("vqe-uccsd-8", 8, uccsd_like, "tutorial_vqe / tutorial_givens_rotations (HF + Single/DoubleExcitation)"),
    Circuit(
        "hea-shots-8",
        8,
        P(hardware_efficient_shots, n_wires=8, n_layers=2, shots=1000),
        "hardware-efficient ansatz, qml.set_shots(1000), parameter-shift",
        diff_method="parameter-shift",
        shots=1000,
        atol=0.3,  # about 9 standard deviations of the difference of two 1000-shot estimates (largest: 0.034)
    ),
    Circuit(
        "probs-14",
        14,
        P(random_circuit_probs, rows=2, cols=7, cycles=12),
        "tutorial_qsim_beyond_classical (random circuit, qml.probs)",
        diff_method=None,
    ),
)
BY_NAME: dict[str, Circuit] = {c.name: c for c in ZOO}
