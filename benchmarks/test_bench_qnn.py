"""Issue: dressed QNN. Training throughput with 1 and 2 gloo workers, and the quantum share of a step."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import interleaved_medians, record_seconds

from qbackends.workloads import qnn


@pytest.mark.parametrize("nwires", [8, pytest.param(12, marks=pytest.mark.slow)])
@pytest.mark.parametrize("workers", [1, 2])
def test_qnn_training_throughput(benchmark, tmp_path, nwires, workers):
    """Samples per second over the epochs after the first (the launcher's start-up is not counted)."""
    config = qnn.Config(nwires=nwires, ndata=208, batch_size=16, epochs=3)
    result = benchmark.pedantic(
        qnn.launch,
        args=(config, "local:pennylane/lightning.qubit", workers, str(tmp_path), None, False, True),
        rounds=1,
        iterations=1,
    )
    phases = result["phase_seconds"]
    step = sum(phases.values())
    quantum_share = (phases["quantum"] + phases["backward"]) / step
    rate = result["samples_per_second"]
    benchmark.extra_info.update(samples_per_second=rate, quantum_share=quantum_share, phases=phases)
    record_seconds(
        f"qnn: training, nwires {nwires} (seconds per sample)",
        f"{workers} worker(s)",
        1 / rate,
        f"{rate:.0f} samples/s; quantum forward+backward {quantum_share:.0%} of step time; all-reduce {phases['allreduce']:.2f}s",
    )


BATCH = 16


def _pennylane_step(layer, inputs):
    def step():
        x = inputs.clone().requires_grad_(True)
        out = layer(x)
        out.sum().backward()
        return out.detach()

    return step


def _pyqtorch_step(nwires, layer, inputs):
    """The same circuit written for pyqtorch (batched state, torch autograd), the same weights."""
    import pyqtorch as pyq

    ops = [pyq.RX(w, f"x{w}") for w in range(nwires)]
    for block, distance in enumerate(qnn.RANGES):
        ops += [g(w, f"r{block}_{w}_{k}") for w in range(nwires) for k, g in enumerate((pyq.RZ, pyq.RY, pyq.RZ))]
        if nwires > 1:
            step = distance % nwires or 1
            ops += [
                g(w, (w + step) % nwires, f"c{block}_{w}_{k}")
                for w in range(nwires)
                for k, g in enumerate((pyq.CRZ, pyq.CRY, pyq.CRZ))
            ]
    ops += [g(0, f"f{k}") for k, g in enumerate((pyq.RZ, pyq.RY, pyq.RZ))]
    circuit, observable = pyq.QuantumCircuit(nwires, ops), pyq.Observable(pyq.Z(0))
    weights = {name: p.detach().clone().requires_grad_(True) for name, p in layer.qnode_weights.items()}

    def step():
        x = inputs.clone().requires_grad_(True)
        values = {f"x{w}": x[:, w] for w in range(nwires)}
        for block in range(len(qnn.RANGES)):
            for w in range(nwires):
                for k in range(3):
                    values[f"r{block}_{w}_{k}"] = weights["block_rot"][block, w, k]
                    values[f"c{block}_{w}_{k}"] = weights["block_crot"][block, w, k]
        values.update({f"f{k}": weights["final_rot"][k] for k in range(3)})
        out = pyq.expectation(circuit, pyq.zero_state(nwires, batch_size=len(x)), values, observable).reshape(-1)
        out.sum().backward()
        return out.detach()

    return step


def _tensorcircuit_step(nwires, layer, inputs):
    """The same circuit on tensorcircuit-ng with jax: vmap over the batch, value_and_grad, jit (compiled here, untimed)."""
    import jax
    import jax.numpy as jnp
    import tensorcircuit as tc

    jax.config.update("jax_enable_x64", True)
    backend = tc.set_backend("jax")
    tc.set_dtype("complex128")

    def sample(x, block_rot, block_crot, final_rot):
        c = tc.Circuit(nwires)
        for w in range(nwires):
            c.rx(w, theta=x[w])
        for block, distance in enumerate(qnn.RANGES):
            for w in range(nwires):
                c.rz(w, theta=block_rot[block, w, 0])
                c.ry(w, theta=block_rot[block, w, 1])
                c.rz(w, theta=block_rot[block, w, 2])
            if nwires > 1:
                step = distance % nwires or 1
                for w in range(nwires):
                    target = (w + step) % nwires
                    c.crz(w, target, theta=block_crot[block, w, 0])
                    c.cry(w, target, theta=block_crot[block, w, 1])
                    c.crz(w, target, theta=block_crot[block, w, 2])
        c.rz(0, theta=final_rot[0])
        c.ry(0, theta=final_rot[1])
        c.rz(0, theta=final_rot[2])
        return backend.real(c.expectation_ps(z=[0]))

    batch = jax.vmap(sample, in_axes=(0, None, None, None))

    @jax.jit
    def forward_backward(x, *w):  # values of the batch, and the gradients of their sum
        values, pullback = jax.vjp(batch, x, *w)
        return values, pullback(jnp.ones_like(values))

    weights = [jnp.asarray(layer.qnode_weights[k].detach().numpy()) for k in ("block_rot", "block_crot", "final_rot")]
    x = jnp.asarray(inputs.numpy())

    def step():
        values, grads = jax.block_until_ready(forward_backward(x, *weights))
        return torch.as_tensor(np.asarray(values))

    return step


PATHS = [
    "lightning.qubit adjoint (per sample)",
    "default.qubit backprop (broadcast)",
    "auto: batched.qubit",
    "batched.qubit c64",
    "pyqtorch",
    "tensorcircuit-ng (jax, vmap+jit)",
]


@pytest.mark.parametrize("nwires", [4, 8, 12, 16])
def test_qnn_layer_batch_step(benchmark, nwires):
    """Issue "Fast QML": the QNN's quantum layer, a batch of 16, forward + backward to inputs and weights.

    Each round runs every path in turn for a few consecutive steps, as a training loop runs its layer
    (a single step after another library's has cold caches, which triples a 0.3 ms step); the figure
    is the median over all rounds. Every path agrees with default.qubit to 1e-10 first (batched.qubit's c64
    to 1e-6)."""
    import torch

    from qbackends import workloaddevices
    from qbackends.device import get_device

    inputs = torch.rand(BATCH, nwires, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3
    torch.manual_seed(1)
    reference = qnn.quantum_layer(nwires, get_device("default.qubit", wires=nwires, diff_method="backprop"), "backprop").double()
    layers = {
        PATHS[0]: qnn.quantum_layer(nwires, get_device("lightning.qubit", wires=nwires), "adjoint"),
        PATHS[1]: reference,
        PATHS[2]: qnn.quantum_layer(nwires, *workloaddevices.qnn_device("auto", nwires, "adjoint")),
        PATHS[3]: qnn.quantum_layer(
            nwires, get_device("local:qbackends/batched.qubit", wires=nwires, precision="c64"), "adjoint"
        ),
    }
    steps = {}
    for name, layer in layers.items():
        layer.load_state_dict(reference.state_dict())
        steps[name] = _pennylane_step(layer.double(), inputs)
    for name, make in ((PATHS[4], _pyqtorch_step), (PATHS[5], _tensorcircuit_step)):
        try:  # the QML simulators that install beside torch 2.13.0, where they are installed
            steps[name] = make(nwires, reference, inputs)
        except ImportError:
            pass
    expected = steps[PATHS[1]]()
    for name, step in steps.items():
        tolerance = 1e-6 if name.endswith(" c64") else 1e-10  # c64: tests/test_batched.py's, with room for 16 wires
        assert torch.allclose(step(), expected, atol=tolerance, rtol=0), name  # also warms up (compiles) every path
    consecutive = 5 if nwires <= 8 else 2 if nwires <= 12 else 1
    benchmark.group = "QNN quantum layer, batch 16, forward+backward"
    medians = interleaved_medians(benchmark, steps, rounds=7 if nwires <= 12 else 3, consecutive=consecutive)
    lightning = medians[PATHS[0]]
    benchmark.extra_info["medians"] = medians  # bench report
    for name, median in medians.items():
        record_seconds(
            f"qnn: quantum layer, batch 16, forward+backward, {nwires} wires",
            name,
            median,
            f"{median * 1e3:8.2f} ms  x{lightning / median:6.1f} vs lightning.qubit",
        )
