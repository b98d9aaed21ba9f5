"""The dressed QNN: Linear(features, nwires) -> (sigmoid(x) - 0.5)·2π -> the quantum layer -> Linear(1, 1).

The quantum layer: AngleEmbedding; two blocks of Rot on every wire and CRot at ranges 1 and 3; a
final Rot on wire 0; <Z0>. On batched.qubit it runs as one compiled call per minibatch.
"""

from __future__ import annotations

import math
from typing import Any

RANGES = (1, 3)


def layer_circuit(nwires: int) -> Any:
    """The quantum layer's circuit: a quantum function of (inputs, block_rot, block_crot, final_rot) returning <Z0>."""
    import pennylane as qml

    wires = list(range(nwires))

    def circuit(inputs: Any, block_rot: Any, block_crot: Any, final_rot: Any) -> Any:
        qml.AngleEmbedding(inputs, wires=wires)
        for block, distance in enumerate(RANGES):
            for w in wires:
                qml.Rot(*block_rot[block, w], wires=w)
            if nwires > 1:
                step = distance % nwires or 1
                for w in wires:
                    qml.CRot(*block_crot[block, w], wires=[w, (w + step) % nwires])
        qml.Rot(*final_rot, wires=0)
        return qml.expval(qml.PauliZ(0))

    return circuit


def weight_shapes(nwires: int) -> dict[str, tuple[int, ...]]:
    return {"block_rot": (len(RANGES), nwires, 3), "block_crot": (len(RANGES), nwires, 3), "final_rot": (3,)}


def layer_tape(nwires: int, diff_method: str) -> Any:
    """The layer's circuit on a minibatch of two rows (one row where the layer runs its rows one by one), as a
    tape: what a device is asked about before a QNode is made on it."""
    import numpy as np
    import pennylane as qml

    rows = (2, nwires) if diff_method in BROADCAST_GRADIENTS else (nwires,)
    weights = {name: np.full(shape, 0.1) for name, shape in weight_shapes(nwires).items()}
    return qml.tape.make_qscript(layer_circuit(nwires))(np.full(rows, 0.2), **weights)


def quantum_layer(nwires: int, device: Any, diff_method: str = "adjoint") -> Any:
    """The TorchLayer: AngleEmbedding, two entangling blocks, a final Rot on wire 0, <Z0>."""
    import pennylane as qml

    circuit = qml.qnode(device, interface="torch", diff_method=diff_method)(layer_circuit(nwires))
    if diff_method not in BROADCAST_GRADIENTS:
        return _per_sample_layer(qml.qnn.TorchLayer)(circuit, weight_shapes(nwires))
    return _layer_class()(circuit, weight_shapes(nwires))


def _layer_class() -> Any:
    """qbackends' TorchLayer (one compiled call per minibatch wherever the circuit runs on batched.qubit,
    by name or by auto's choice; PennyLane's layer elsewhere), or PennyLane's where qbackends-native is not installed."""
    try:
        from ...batched.layer import TorchLayer
    except ImportError:
        import pennylane as qml

        return qml.qnn.TorchLayer
    return TorchLayer


# Gradient methods that differentiate a broadcast input; PennyLane's others (parameter-shift,
# finite-diff, ...) refuse one (its issue #4462), so the layer runs their minibatch a sample at a time.
BROADCAST_GRADIENTS = ("adjoint", "backprop", "best", "device")


def _per_sample_layer(base: Any) -> Any:
    class PerSampleLayer(base):  # type: ignore[misc, valid-type]
        """The same layer (weights, state dict), each row of a minibatch its own circuit."""

        def _evaluate_qnode(self, x: Any) -> Any:  # the private hook qbackends' TorchLayer overrides too (see there)
            import torch

            if x.ndim < 2:
                return super()._evaluate_qnode(x)
            return torch.stack([super(PerSampleLayer, self)._evaluate_qnode(row) for row in x])

    return PerSampleLayer


def build_model(nfeatures: int, nwires: int, device: Any, diff_method: str = "adjoint") -> Any:
    import torch

    class DressedQNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pre = torch.nn.Linear(nfeatures, nwires)
            self.quantum = quantum_layer(nwires, device, diff_method)
            self.post = torch.nn.Linear(1, 1)

        def encode(self, x: Any) -> Any:
            return (torch.sigmoid(self.pre(x)) - 0.5) * 2 * math.pi

        def forward(self, x: Any) -> Any:
            return self.post(self.quantum(self.encode(x)).reshape(-1, 1)).reshape(-1)

    return DressedQNN().double()


def calibration_step(device_string: str, wires: int) -> Any:
    """The quantum layer on a batch of 16, forward and backward: what ``qbackends calibrate --workload qnn`` times."""
    import torch

    from ...device import get_device
    from ...gradients import check
    from ...workloaddevices import qnn_diff_method

    method = qnn_diff_method(device_string)
    device = get_device(device_string, wires=wires, diff_method=method)
    check(device, layer_tape(wires, method), method, "torch", lambda *_: "time it with --workload circuits")
    layer = quantum_layer(wires, device, method).double()
    inputs = torch.rand(16, wires, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3

    def step() -> None:
        x = inputs.clone().requires_grad_(True)
        layer(x).sum().backward()

    return step
