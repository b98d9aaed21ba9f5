"""This tree against a baseline build in one interleaved run: the steps the compiled kernels must hold
(issue "Ready at install"), each timed in a new process of each build, the builds alternating round by
round, medians of the rounds. The baseline is another interpreter (a venv with an earlier qbackends) and/or
an earlier checkout on PYTHONPATH:

    QBACKENDS_AB_PYTHON=/path/to/old-venv/bin/python \
        python -m pytest benchmarks/test_bench_ab.py --benchmark-only -s
    QBACKENDS_AB_PYTHONPATH=/path/to/old-checkout python -m pytest benchmarks/test_bench_ab.py --benchmark-only -s

Without either, the tests skip. ``QBACKENDS_AB_ROUNDS`` (default 3) sets the rounds; ``-m "not slow"`` leaves
out the 26- and 28-qubit steps (tens of minutes on two cores). Each script prints the median of its own repeats after one warm-up, so a build's
first-call costs stay out of the step it is compared on.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import record_seconds

BASE_PYTHON = os.environ.get("QBACKENDS_AB_PYTHON")
BASE_PATH = os.environ.get("QBACKENDS_AB_PYTHONPATH")
ROUNDS = int(os.environ.get("QBACKENDS_AB_ROUNDS", "3"))
# Both builds run from a folder with no checkout in it: `python -c` puts the working folder first on sys.path,
# so run from a checkout, the baseline would import this tree.
NEUTRAL = tempfile.gettempdir()

pytestmark = pytest.mark.skipif(
    not (BASE_PYTHON or BASE_PATH), reason="no baseline: set QBACKENDS_AB_PYTHON and/or QBACKENDS_AB_PYTHONPATH"
)

QAOA = """
import statistics, sys, time
import networkx as nx, numpy as np, pennylane as qml
from pennylane import numpy as pnp
from qbackends import get_device

wires, layers, dtype, mode, repeats = {wires}, {layers}, {dtype!r}, {mode!r}, {repeats}
dev = get_device("local:qbackends/fused.qubit", wires=wires, c_dtype=getattr(np, dtype))
cost, mixer = qml.qaoa.maxcut(nx.gnm_random_graph(wires, 3 * wires // 2, seed=1967))

@qml.qnode(dev, diff_method="adjoint")
def energy(params):
    for w in range(wires):
        qml.Hadamard(w)
    for layer in range(layers):
        qml.qaoa.cost_layer(params[0][layer], cost)
        qml.qaoa.mixer_layer(params[1][layer], mixer)
    return qml.expval(cost)

params = pnp.full((2, layers), 0.5, requires_grad=True)
step = (lambda: qml.grad(energy)(params)) if mode == "gradient" else (lambda: energy(params))
step()
times = []
for _ in range(repeats):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
print(statistics.median(times))
"""

QNN_LAYER = """
import statistics, time
import numpy as np, pennylane as qml, torch
from qbackends import get_device

wires, repeats = {wires}, {repeats}
torch.set_num_threads(1)
dev = get_device("local:qbackends/batched.qubit", wires=wires)

@qml.qnode(dev, interface="torch", diff_method="adjoint")
def circuit(inputs, weights):
    qml.AngleEmbedding(inputs, wires=range(wires))
    qml.BasicEntanglerLayers(weights, wires=range(wires))
    return [qml.expval(qml.Z(w)) for w in range(wires)]

layer = qml.qnn.TorchLayer(circuit, {{"weights": (3, wires)}})
x = torch.tensor(np.random.default_rng(0).uniform(0, np.pi, (16, wires)))
layer(x).sum().backward()
times = []
for _ in range(repeats):
    start = time.perf_counter()
    layer(x).sum().backward()
    times.append(time.perf_counter() - start)
print(statistics.median(times))
"""


def _environment(base: bool) -> tuple[str, dict]:
    env = dict(os.environ)
    if base and BASE_PATH:
        env["PYTHONPATH"] = BASE_PATH + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return (BASE_PYTHON or sys.executable) if base else sys.executable, env


def _seconds(base: bool, script: str) -> float:
    python, env = _environment(base)
    out = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env, timeout=3600, cwd=NEUTRAL)
    if out.returncode:
        raise RuntimeError(f"{'baseline' if base else 'this tree'} failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def _samples_per_second(base: bool, nwires: int) -> float:
    python, env = _environment(base)
    with tempfile.TemporaryDirectory() as results:
        command = [python, "-m", "qbackends.cli", "run", "qnn", "--device", "local:qbackends/batched.qubit"]
        command += ["--nwires", str(nwires), "--epochs", "3", "--quiet", "--results-dir", results]
        out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600, cwd=NEUTRAL)
        if out.returncode:
            raise RuntimeError(f"{'baseline' if base else 'this tree'} failed:\n{out.stderr[-2000:]}")
        return json.loads((Path(results) / "qnn-results.json").read_text())["samples_per_second"]


def _interleaved(measure, rounds: int = ROUNDS) -> tuple[float, float]:
    """Medians (this tree, baseline) over ``rounds``, which build goes first alternating."""
    mine, theirs = [], []
    for r in range(rounds):
        for base in (r % 2 == 1, r % 2 == 0):
            (theirs if base else mine).append(measure(base))
    return statistics.median(mine), statistics.median(theirs)


def _record(group: str, mine: float, theirs: float, unit: str = "s") -> None:
    record_seconds(group, "this tree", mine if unit == "s" else 1 / mine, f"{mine:.4g} {unit}")
    record_seconds(group, "baseline", theirs if unit == "s" else 1 / theirs, f"{theirs:.4g} {unit}")


QAOA_STEPS = [  # 12 and 16 qubits: the kernels take a fraction of the step, the Python around them the rest
    pytest.param(12, 2, "complex64", "gradient", 100, id="12q-p2-c64-value+gradient"),
    pytest.param(16, 2, "complex64", "gradient", 50, id="16q-p2-c64-value+gradient"),
    pytest.param(22, 2, "complex128", "gradient", 10, id="22q-p2-c128-value+gradient"),
    pytest.param(22, 2, "complex64", "gradient", 10, id="22q-p2-c64-value+gradient"),
    pytest.param(26, 2, "complex128", "gradient", 3, id="26q-p2-c128-value+gradient", marks=pytest.mark.slow),
    pytest.param(28, 6, "complex128", "energy", 1, id="28q-p6-c128-energy", marks=pytest.mark.slow),
    pytest.param(28, 6, "complex64", "energy", 1, id="28q-p6-c64-energy", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("wires", "layers", "dtype", "mode", "repeats"), QAOA_STEPS)
def test_fused_qaoa_step(benchmark, wires, layers, dtype, mode, repeats):
    script = QAOA.format(wires=wires, layers=layers, dtype=dtype, mode=mode, repeats=repeats)
    mine, theirs = benchmark.pedantic(lambda: _interleaved(lambda base: _seconds(base, script)), rounds=1, iterations=1)
    benchmark.extra_info.update(this_tree_s=mine, baseline_s=theirs)
    _record(f"A/B: fused.qubit QAOA {wires} q p={layers} {dtype} {mode}", mine, theirs)


@pytest.mark.parametrize("wires", [4, 8, 12, 16])
def test_batched_qnn_layer(benchmark, wires):
    script = QNN_LAYER.format(wires=wires, repeats=30 if wires < 16 else 5)
    mine, theirs = benchmark.pedantic(lambda: _interleaved(lambda base: _seconds(base, script)), rounds=1, iterations=1)
    benchmark.extra_info.update(this_tree_s=mine, baseline_s=theirs)
    _record(f"A/B: batched.qubit QNN layer, batch 16, {wires} wires (forward + backward)", mine, theirs)


@pytest.mark.parametrize("nwires", [4, 8])
def test_run_qnn_throughput(benchmark, nwires):
    mine, theirs = benchmark.pedantic(
        lambda: _interleaved(lambda base: _samples_per_second(base, nwires)), rounds=1, iterations=1
    )
    benchmark.extra_info.update(this_tree_samples_per_s=mine, baseline_samples_per_s=theirs)
    _record(f"A/B: qbackends run qnn --device local:qbackends/batched.qubit, {nwires} wires", mine, theirs, "samples/s")
