"""Issue: QAOA at the memory-bandwidth limit. The circuit as users write it (qml.qaoa cost and mixer
layers, expval(H_C)), p=2, on gnm_random_graph(n, 1.5 n, seed=1967): value + adjoint gradient, and
the energy alone. fused.qubit against lightning.qubit and lightning.kokkos, interleaved round by
round in one benchmark (lightning.kokkos slows sharply on a busy machine: medians over rounds).

Roofline: the bytes fused.qubit's kernels move in a step (its tracker's ``bytes_moved``) over the
step's median time, against this machine's copy bandwidth for an array of the state's size,
measured in the same run. ``qbackends bench report`` prints both.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc

import networkx as nx
import numpy as np
import pennylane as qml
import pytest
from conftest import interleaved_medians, record_seconds, skip_reason
from numba import njit, prange

from qbackends import get_device
from qbackends.workloads import qaoa

FUSED = "local:qbackends/fused.qubit"
LIGHTNING = ("local:pennylane/lightning.qubit", "local:pennylane/lightning.kokkos")


def user_circuit(device, nodes: int, weighted: bool):
    """(value + gradient step, energy step) for the user's p=2 QAOA on ``device``."""
    graph = nx.gnm_random_graph(nodes, 3 * nodes // 2, seed=1967)
    if weighted:  # non-integer cuts: qml.qaoa.maxcut ignores weights, so H_C is built from them
        rng = np.random.default_rng(5)
        edges = tuple((int(u), int(v), float(rng.uniform(0.1, 2.0))) for u, v in graph.edges)
        cost = qaoa.cost_hamiltonian(qaoa.Graph(nodes, edges))
        mixer = qml.Hamiltonian([1.0] * nodes, [qml.X(w) for w in range(nodes)])
    else:
        cost, mixer = qml.qaoa.maxcut(graph)

    @qml.qnode(device, diff_method="adjoint")
    def energy(params):
        for w in range(nodes):
            qml.Hadamard(w)
        for layer in range(2):
            qml.qaoa.cost_layer(params[0][layer], cost)
            qml.qaoa.mixer_layer(params[1][layer], mixer)
        return qml.expval(cost)

    values = np.random.default_rng(1).uniform(0, 1, (2, 2))
    trainable, fixed = qml.numpy.array(values, requires_grad=True), qml.numpy.array(values, requires_grad=False)
    value_and_grad = qml.grad(energy)  # the adjoint step computes the value with the gradient
    return (lambda: value_and_grad(trainable)), (lambda: energy(fixed))


@njit(parallel=True, cache=True)
def _copy(src, dst):
    for i in prange(src.size):
        dst[i] = src[i]


def copy_bandwidth(nodes: int, rounds: int = 7) -> float:
    """Bytes per second (read + written) copying a complex128 array of 2^nodes amplitudes, 2 threads."""
    src = np.ones(2**nodes, dtype=complex)
    dst = np.empty_like(src)
    _copy(src, dst)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        _copy(src, dst)
        times.append(time.perf_counter() - start)
    return 2 * src.nbytes / statistics.median(times)


def _fused_bytes(nodes: int, weighted: bool) -> tuple[dict[str, int], float, dict]:
    """Bytes a fused step moves (value+gradient, energy), the peak memory (traced from the device's
    creation on) in state vectors, and the two steps."""
    tracemalloc.start()
    device = get_device(FUSED, wires=nodes)
    gradient, energy = user_circuit(device, nodes, weighted)
    with qml.Tracker(device) as tracker:
        gradient()
    grad_bytes = tracker.totals["bytes_moved"]
    with qml.Tracker(device) as tracker:
        energy()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return (
        {"value+gradient": grad_bytes, "energy": tracker.totals["bytes_moved"]},
        peak / (16 * 2**nodes),
        {
            "value+gradient": gradient,
            "energy": energy,
        },
    )


CASES = [
    pytest.param(22, False, id="22-unweighted"),
    pytest.param(22, True, id="22-weighted", marks=pytest.mark.slow),
    pytest.param(24, False, id="24-unweighted", marks=pytest.mark.slow),
    pytest.param(26, False, id="26-unweighted", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("nodes", "weighted"), CASES)
def test_qaoa_roofline(benchmark, nodes, weighted):
    """fused.qubit's value + gradient and energy against lightning (22 wires; fused alone above),
    with the fraction of copy bandwidth fused.qubit reaches and its peak memory in state vectors."""
    moved, peak_states, fused_steps = _fused_bytes(nodes, weighted)
    candidates = {f"{FUSED}: {kind}": step for kind, step in fused_steps.items()}
    if nodes <= 22:
        for backend in LIGHTNING if not weighted else LIGHTNING[:1]:
            if skip_reason(backend.removeprefix("local:")) is None:
                gradient, energy = user_circuit(get_device(backend, wires=nodes), nodes, weighted)
                candidates[f"{backend}: value+gradient"] = gradient
                candidates[f"{backend}: energy"] = energy
    energies = [
        float(qml.math.toarray(step())) for name, step in candidates.items() if name.endswith("energy")
    ]  # warm up: compiles and caches
    assert max(energies) - min(energies) < 1e-10, energies
    for name, step in candidates.items():
        if name.endswith("value+gradient"):
            step()
    benchmark.group = f"QAOA p=2, qml.qaoa layers{', weighted' if weighted else ''}"
    bandwidth = copy_bandwidth(nodes)
    # fused.qubit's steps are short: three in a row per round, as an optimiser runs them (the medians
    # then rest on 15 of its steps and 5 of each lightning's at 22 wires)
    fused_runs = {name: 3 for name in candidates if name.startswith(FUSED)}
    medians = interleaved_medians(benchmark, candidates, rounds=5 if nodes <= 22 else 2, consecutive=fused_runs)
    bandwidth = (bandwidth + copy_bandwidth(nodes)) / 2  # before and after the rounds
    label = f"{nodes} nodes{' weighted' if weighted else ''}"
    kinds = ("value+gradient", "energy")  # bench report: a table per kind, the roofline column from bytes_moved
    benchmark.extra_info.update(
        medians={k: {n.rsplit(": ", 1)[0]: t for n, t in medians.items() if n.endswith(k)} for k in kinds},
        bytes_moved={k: {FUSED: moved[k]} for k in kinds},
        copy_bytes_per_second=bandwidth,
        peak_state_vectors=peak_states,
    )
    for kind in ("value+gradient", "energy"):
        fused = medians[f"{FUSED}: {kind}"]
        reached = moved[kind] / fused
        record_seconds(
            f"qaoa roofline: {label}, {kind}",
            FUSED,
            fused,
            f"{reached / 1e9:5.1f} GB/s = {reached / bandwidth:4.0%} of copy ({bandwidth / 1e9:.1f} GB/s); "
            f"{moved[kind] / (16 * 2**nodes):.1f} state passes; peak {peak_states:.2f} states",
        )
        for backend in LIGHTNING:
            if f"{backend}: {kind}" in medians:
                other = medians[f"{backend}: {kind}"]
                record_seconds(f"qaoa roofline: {label}, {kind}", backend, other, f"fused.qubit x{other / fused:.1f} faster")
    assert peak_states <= 3 + 0.5 + 0.25  # three states, the diagonal (8 B), level tables (2 B each)
