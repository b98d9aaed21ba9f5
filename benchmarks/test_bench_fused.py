"""Issue: fused simulator. Seed QAOA value + gradient at 18, 20, 22 nodes on fused.qubit, lightning.qubit, lightning.kokkos."""

from __future__ import annotations

import tracemalloc

import pytest
from qaoa_circuits import value_and_gradient

from qbackends import get_device

BACKENDS = ["local:qbackends/fused.qubit", "local:pennylane/lightning.kokkos", "local:pennylane/lightning.qubit"]
SIZES = [18, pytest.param(20, marks=pytest.mark.slow), pytest.param(22, marks=pytest.mark.slow)]


@pytest.mark.parametrize("nodes", SIZES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_fused_against_lightning(benchmark, record, backend, nodes):
    step, *_ = value_and_gradient(get_device(backend, wires=nodes), nodes, "fast")
    step()
    if backend.endswith("fused.qubit"):
        tracemalloc.start()
        step()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        benchmark.extra_info["peak_bytes_in_a_step"] = peak
    benchmark.pedantic(step, rounds=5 if nodes <= 20 else 3, iterations=1)
    record(f"fused: QAOA {nodes} nodes p=2 value+gradient", backend)
