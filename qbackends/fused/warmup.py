"""The fused simulator's one-time cost: its numba kernels compile on first use and are cached on disk.
This module says whether that has happened in this installation and how long it takes here, and does
it on request (``qbackends warmup``). Each precision compiles its own kernels (c64 is opted in:
``qbackends warmup --precision c64``).
"""

from __future__ import annotations

from ..simbase.warmup import Compilation, timing_compiles

COMPILE_SECONDS = 150.0  # every kernel from an empty numba cache on 2 cores (151 s measured); until timed here
QAOA_WIRES = 17  # the warm-up's QAOA: above one tile at c128 and c64, so its mixers take the two-pass kernels
SMALL_QAOA_WIRES = 5  # ... and in one tile: a mixer in one pass, the first state written
COMPILATION = Compilation(
    "fused.qubit", ("qbackends.fused.kernels",), COMPILE_SECONDS, "qbackends-kernels", "qbackends.fused.warmup:run_circuits"
)
SECONDS_FILE = COMPILATION.seconds_file  # beside the marker: how long the last compile here took
compiled = COMPILATION.done
compile_seconds = COMPILATION.seconds
mark_compiled = COMPILATION.record
__all__ = ["COMPILATION", "compile_kernels", "compile_seconds", "compiled", "mark_compiled", "timing_compiles"]


def compile_kernels(precision: str = "c128") -> None:
    """Compile (or load) every kernel of ``precision`` (``run_circuits``), then mark them compiled."""
    COMPILATION.compile(precision)


def run_circuits(precision: str) -> None:
    """Values and gradients of circuits that take every kernel of ``precision`` (``tests/test_kernel_cache.py``
    checks that QAOA and users' templates compile nothing after them)."""
    import numpy as np
    import pennylane as qml

    from .device import FusedQubit

    dtype = np.complex64 if precision == "c64" else np.complex128

    hamiltonian = qml.Hamiltonian([1.0, 0.5], [qml.Z(0) @ qml.Z(1), qml.Z(2)])

    @qml.qnode(FusedQubit(wires=3, c_dtype=dtype), diff_method="adjoint")
    def circuit(x):  # every segment kind: product layer, diagonal block, CNOT; a layer between others
        for w in range(3):
            qml.Hadamard(w)
        qml.IsingZZ(x[0], wires=[0, 1])
        qml.RX(x[1], wires=0)
        qml.CNOT([0, 1])
        qml.RY(x[1], wires=2)
        qml.RX(x[0], wires=1)
        qml.CNOT([1, 2])
        qml.IsingZZ(x[0], wires=[1, 2])
        qml.RZ(x[1], wires=0)  # a block of two parameters: applied from phase tables
        qml.CNOT([0, 2])
        qml.IsingZZ(x[1], wires=[0, 2])  # a block of one: applied by level
        qml.CNOT([0, 1])
        return qml.expval(hamiltonian)

    def qaoa(cost: qml.Hamiltonian, wires: int) -> qml.QNode:
        ring = range(wires)
        mixer = qml.Hamiltonian([1.0] * wires, [qml.X(w) for w in ring])

        @qml.qnode(FusedQubit(wires=wires, c_dtype=dtype), diff_method="adjoint")
        def circuit(p):  # the sweeps that fuse a mixer, a cost layer and the next mixer
            for w in ring:
                qml.Hadamard(w)
            for layer in range(2):
                qml.qaoa.cost_layer(p[0][layer], cost)
                qml.qaoa.mixer_layer(p[1][layer], mixer)
            return qml.expval(cost)

        return circuit

    def weights(wires: int) -> list[float]:
        return [0.3 + 0.1 * w for w in range(wires)]

    def costs(wires: int) -> tuple[qml.Hamiltonian, qml.Hamiltonian]:
        """An unweighted cut's cost (swept by level) and a weighted one's (by angle): each its own kernels."""
        edges = [qml.Z(w) @ qml.Z((w + 1) % wires) for w in range(wires)]
        return qml.Hamiltonian([0.5] * wires, edges), qml.Hamiltonian(weights(wires), edges)

    weighted = costs(QAOA_WIRES)[1]

    @qml.qnode(FusedQubit(wires=QAOA_WIRES, c_dtype=dtype), diff_method="adjoint")
    def by_gates(p):  # a weighted QAOA written gate by gate, as the qaoa workload's "fast" formulation is
        for w in range(QAOA_WIRES):
            qml.Hadamard(w)
        for layer in range(2):
            for w, weight in enumerate(weights(QAOA_WIRES)):
                qml.IsingZZ(p[0][layer] * weight, wires=[w, (w + 1) % QAOA_WIRES])
            for w in range(QAOA_WIRES):
                qml.RX(2 * p[1][layer], wires=w)
        return qml.expval(weighted)

    qml.grad(circuit)(qml.numpy.array([0.1, 0.2], requires_grad=True))
    circuit(qml.numpy.array([0.1, 0.2], requires_grad=False))  # a value alone
    angles = [[0.1, 0.2], [0.3, 0.4]]
    for wires in (QAOA_WIRES, SMALL_QAOA_WIRES):
        for cost in costs(wires):
            qml.grad(qaoa(cost, wires))(qml.numpy.array(angles, requires_grad=True))
            qaoa(cost, wires)(qml.numpy.array(angles, requires_grad=False))
    qml.grad(by_gates)(qml.numpy.array(angles, requires_grad=True))
