"""Issue: dressed QNN. Training throughput with 1 and 2 gloo workers, and the quantum share of a step."""

from __future__ import annotations

import pytest
from conftest import record_seconds

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


@pytest.mark.parametrize("nwires", [4, 8, pytest.param(12, marks=pytest.mark.slow)])
@pytest.mark.parametrize("path", ["lightning.qubit adjoint, per sample", "auto: default.qubit backprop, broadcast batch"])
def test_qnn_layer_batch_step(benchmark, nwires, path):
    """Issue "Fast QML": the quantum layer of the QNN, a batch of 16, forward + backward, side by side."""
    import torch

    from qbackends import policy
    from qbackends.device import get_device

    if path.startswith("auto"):
        device, diff_method = policy.qnn_device("auto", nwires, "adjoint")
    else:
        device, diff_method = get_device("lightning.qubit", wires=nwires), "adjoint"
    layer = qnn.quantum_layer(nwires, device, diff_method).double()
    inputs = torch.rand(16, nwires, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3

    def step():
        x = inputs.clone().requires_grad_(True)
        layer(x).sum().backward()

    step()
    benchmark.pedantic(step, rounds=7, iterations=1)
    record_seconds(f"qnn: quantum layer, batch 16, forward+backward, {nwires} wires", path, benchmark.stats.stats.median)
