"""The fused simulator's one-time cost: its numba kernels compile on first use and are cached on disk.
This module says whether that has happened in this installation and how long it takes here, and does
it on request (``qbackends warmup``). Each precision compiles its own kernels (c64 is opted in:
``qbackends warmup --precision c64``).
"""

from __future__ import annotations

from ..simbase.warmup import Compilation, timing_compiles

COMPILE_SECONDS = 45.0  # every kernel from an empty numba cache on 2 cores; until this installation times its own
QAOA_WIRES = 17  # the warm-up's QAOA: above one tile at c128 and c64, so its mixers take the two-pass kernels
COMPILATION = Compilation("fused.qubit", ("qbackends.fused.kernels",), COMPILE_SECONDS, "qbackends-kernels")
SECONDS_FILE = COMPILATION.seconds_file  # beside the marker: how long the last compile here took
compiled = COMPILATION.done
compile_seconds = COMPILATION.seconds
mark_compiled = COMPILATION.record
__all__ = ["COMPILATION", "compile_kernels", "compile_seconds", "compiled", "mark_compiled", "timing_compiles"]


def compile_kernels(precision: str = "c128") -> None:
    """Compile (or load) every kernel of ``precision`` by running a small value and gradient, then mark them compiled."""
    import numpy as np
    import pennylane as qml

    from .device import FusedQubit

    dtype = np.complex64 if precision == "c64" else np.complex128

    hamiltonian = qml.Hamiltonian([1.0, 0.5], [qml.Z(0) @ qml.Z(1), qml.Z(2)])

    @qml.qnode(FusedQubit(wires=3, c_dtype=dtype), diff_method="adjoint")
    def circuit(x):  # every segment kind: product layer, diagonal block, CNOT
        for w in range(3):
            qml.Hadamard(w)
        qml.IsingZZ(x[0], wires=[0, 1])
        qml.RX(x[1], wires=0)
        qml.CNOT([0, 1])
        qml.RY(x[1], wires=2)
        return qml.expval(hamiltonian)

    ring = range(QAOA_WIRES)
    edges = [qml.Z(w) @ qml.Z((w + 1) % QAOA_WIRES) for w in ring]
    mixer = qml.Hamiltonian([1.0] * QAOA_WIRES, [qml.X(w) for w in ring])

    def qaoa(cost: qml.Hamiltonian) -> qml.QNode:
        @qml.qnode(FusedQubit(wires=QAOA_WIRES, c_dtype=dtype), diff_method="adjoint")
        def circuit(p):  # the sweeps that fuse a mixer, a cost layer and the next mixer
            for w in ring:
                qml.Hadamard(w)
            for layer in range(2):
                qml.qaoa.cost_layer(p[0][layer], cost)
                qml.qaoa.mixer_layer(p[1][layer], mixer)
            return qml.expval(cost)

        return circuit

    # an unweighted cut's cost layers are swept by level, a weighted one's by angle: each its own kernels
    costs = (qml.Hamiltonian([0.5] * QAOA_WIRES, edges), qml.Hamiltonian([0.3 + 0.1 * w for w in ring], edges))
    cold, spent = not compiled(precision), [0.0]
    with timing_compiles(spent.append):
        qml.grad(circuit)(qml.numpy.array([0.1, 0.2], requires_grad=True))
        angles = [[0.1, 0.2], [0.3, 0.4]]
        for cost in costs:
            qml.grad(qaoa(cost))(qml.numpy.array(angles, requires_grad=True))
            qaoa(cost)(qml.numpy.array(angles, requires_grad=False))
    mark_compiled(sum(spent) if cold else 0.0, precision)  # the whole compile, not a recompile of a few
