"""The batched simulator's one-time cost: its numba kernels compile on first use and are cached on disk
(``simbase.warmup``). ``run_circuits`` runs every kernel once, serial and parallel (``qbackends warmup``).
"""

from __future__ import annotations

from ..simbase.warmup import Compilation

COMPILE_SECONDS = 7.0  # every kernel from an empty numba cache on 2 cores; until this installation times its own
# Its kernels inline fused.qubit's zsign: a change there is a change here.
COMPILATION = Compilation(
    "batched.qubit",
    ("qbackends.batched.kernels", "qbackends.fused.kernels"),
    COMPILE_SECONDS,
    "qbackends-batched-kernels",
    "qbackends.batched.warmup:run_circuits",
)


def compile_kernels() -> None:
    """Compile (or load) every kernel (``run_circuits``), then mark them compiled."""
    COMPILATION.compile()


def run_circuits(precision: str = "c128") -> None:
    """A value and a VJP of a circuit with each kind of operation, at a batch small enough for the serial
    kernels and at one large enough for the parallel ones (batched.qubit is c128 only)."""
    import pennylane as qml

    from . import kernels
    from .device import BatchedQubit

    wires = 10
    for rows in (2, kernels.PARALLEL_AMPLITUDES >> wires):

        @qml.qnode(BatchedQubit(wires=wires), diff_method="adjoint")
        def circuit(x, w):  # rotations, a phase, a Pauli rotation, a fixed matrix, controls, a swap
            qml.RX(x, wires=0)
            qml.RY(w[0], wires=1)
            qml.RZ(w[1], wires=2)
            qml.PhaseShift(w[0], wires=3)
            qml.IsingXX(w[1], wires=[0, 4])
            qml.Hadamard(5)
            qml.CNOT([5, 6])
            qml.SWAP([6, 7])
            return qml.expval(qml.Z(0) @ qml.X(1) + 0.5 * qml.Y(2)), qml.probs(wires=[0, 1])

        def cost(x, w):
            value, probs = circuit(x, w)
            return qml.math.sum(value) + qml.math.sum(probs[:, 0])

        x = qml.numpy.linspace(0.1, 1.0, rows, requires_grad=True)
        w = qml.numpy.array([0.3, 0.4], requires_grad=True)
        qml.grad(cost, argnums=[0, 1])(x, w)
