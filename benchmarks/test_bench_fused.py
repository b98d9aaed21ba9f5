"""Issue: fused simulator. Seed QAOA value + gradient at 18, 20, 22 nodes on fused.qubit, lightning.qubit, lightning.kokkos."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc

import pytest
from conftest import record_seconds
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


COMPILE = (
    "import time; t = time.perf_counter();"
    "from qbackends import get_device; from qbackends.workloads import qaoa;"
    "qaoa.run(qaoa.Config(nodes=6, edges=8, iterations=1), 'local:qbackends/fused.qubit');"
    "print(time.perf_counter() - t)"
)


@pytest.mark.parametrize("cache", ["disk cache", "empty cache (compiles)"])
def test_first_call_in_a_new_process(benchmark, tmp_path, cache):
    """Import and a first 6-node QAOA run in a fresh process: with the kernels in numba's disk cache,
    and with an empty cache, which compiles them (paid once per installation)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)) if cache.startswith("empty") else None

    def run():
        out = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, check=True, env=env)
        return float(out.stdout.split()[-1])

    seconds = benchmark.pedantic(run, rounds=1, iterations=1)
    record_seconds("fused: first QAOA run in a new process", cache, seconds)


@pytest.mark.parametrize("cache", ["kernels compiled", "fresh install (empty cache)"])
def test_first_qbackends_run_qaoa(benchmark, tmp_path, cache):
    """The README's first command after installing: the default `qbackends run qaoa` (18 nodes, p=2,
    20 iterations, auto), whole process, with fused.qubit's kernels compiled and with an empty numba
    cache (auto then weighs the one-time compilation and runs this short job on lightning)."""
    env = dict(os.environ)
    if cache.startswith("fresh"):
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")
    else:
        from qbackends.fused import warmup

        warmup.compile_kernels()
    command = [sys.executable, "-m", "qbackends.cli", "run", "qaoa", "--quiet", "--no-plot", "--results-dir", str(tmp_path)]

    def run():
        return subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout

    out = benchmark.pedantic(run, rounds=1, iterations=1)
    record_seconds("first run: qbackends run qaoa, whole process", cache, benchmark.stats.stats.median, out.split(":")[0])
