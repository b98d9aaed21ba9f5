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
