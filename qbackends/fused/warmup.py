"""The fused simulator's one-time cost: its numba kernels compile on first use (about 45 s on two
cores) and are cached on disk. This module says whether that has happened in this installation,
and does it on request (``qbackends warmup``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

COMPILE_SECONDS = 15.0  # measured on the 2-core CI machine with an empty numba cache


def _marker() -> Path:
    """A file beside numba's cache of the kernels, named after what invalidates that cache."""
    from importlib import metadata

    from . import kernels

    source = Path(kernels.__file__)
    key = hashlib.sha256(source.read_bytes() + metadata.version("numba").encode()).hexdigest()[:16]
    folder = Path(os.environ.get("NUMBA_CACHE_DIR") or kernels.CACHE_DIR)
    return folder / f"qbackends-kernels-{key}.compiled"


def compiled() -> bool:
    """True once the kernels have been compiled and cached in this installation."""
    try:
        return _marker().exists()
    except OSError:
        return False


def mark_compiled() -> None:
    """Record that every kernel has been compiled (a value and a gradient ran)."""
    try:
        marker = _marker()
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:  # a read-only installation: the kernels compile again next time
        pass


def compile_kernels() -> None:
    """Compile (or load) every kernel by running a small value and gradient, then mark them compiled."""
    import pennylane as qml

    from .device import FusedQubit

    hamiltonian = qml.Hamiltonian([1.0, 0.5], [qml.Z(0) @ qml.Z(1), qml.Z(2)])

    @qml.qnode(FusedQubit(wires=3), diff_method="adjoint")
    def circuit(x):  # every segment kind: product layer, diagonal block, CNOT
        for w in range(3):
            qml.Hadamard(w)
        qml.IsingZZ(x[0], wires=[0, 1])
        qml.RX(x[1], wires=0)
        qml.CNOT([0, 1])
        qml.RY(x[1], wires=2)
        return qml.expval(hamiltonian)

    qml.grad(circuit)(qml.numpy.array([0.1, 0.2], requires_grad=True))

    cost = qml.Hamiltonian([0.5] * 3, [qml.Z(0) @ qml.Z(1), qml.Z(1) @ qml.Z(2), qml.Z(0) @ qml.Z(2)])
    mixer = qml.Hamiltonian([1.0] * 3, [qml.X(w) for w in range(3)])

    @qml.qnode(FusedQubit(wires=3), diff_method="adjoint")
    def qaoa(p):  # the sweeps that fuse a mixer, an unweighted cost layer and the next mixer
        for w in range(3):
            qml.Hadamard(w)
        for layer in range(2):
            qml.qaoa.cost_layer(p[0][layer], cost)
            qml.qaoa.mixer_layer(p[1][layer], mixer)
        return qml.expval(cost)

    angles = [[0.1, 0.2], [0.3, 0.4]]
    qml.grad(qaoa)(qml.numpy.array(angles, requires_grad=True))
    qaoa(qml.numpy.array(angles, requires_grad=False))
    mark_compiled()
