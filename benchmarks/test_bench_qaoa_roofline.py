"""Issue: QAOA at the memory-bandwidth limit. The circuit as users write it (qml.qaoa cost and mixer
layers, expval(H_C)), p=2, on gnm_random_graph(n, 1.5 n, seed=1967): value + adjoint gradient, and
the energy alone. fused.qubit at c128 and c64 against lightning.qubit and lightning.kokkos,
interleaved round by round in one benchmark (lightning.kokkos slows sharply on a busy machine:
medians over rounds). 22-28 qubits take both precisions side by side; 30 qubits c64 alone (a c128
state is 16 GiB); a p=6 energy at 28 qubits against QOKit's published 11.5 s (48 cores, c128).

Roofline: the bytes fused.qubit's kernels move in a step (its tracker's ``bytes_moved``) over the
step's median time, against this machine's copy bandwidth for an array of the state's size (at
most 1 GiB: beyond the caches either way), measured in the same run. ``qbackends bench report``
prints both.
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc

import networkx as nx
import numpy as np
import pennylane as qml
import pytest
from conftest import busy_process, interleaved_medians, record_note, record_seconds, skip_reason

from qbackends import get_device
from qbackends.fused import engine, kernels
from qbackends.fused.kernels import copy as _copy
from qbackends.workloads import qaoa

FUSED = "local:qbackends/fused.qubit"
LIGHTNING = ("local:pennylane/lightning.qubit", "local:pennylane/lightning.kokkos")
AMPLITUDE_BYTES = {"c128": 16, "c64": 8}


def user_circuit(device, nodes: int, weighted: bool, layers: int = 2):
    """(value + gradient step, energy step) for the user's QAOA of ``layers`` on ``device``."""
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
        for layer in range(layers):
            qml.qaoa.cost_layer(params[0][layer], cost)
            qml.qaoa.mixer_layer(params[1][layer], mixer)
        return qml.expval(cost)

    values = np.random.default_rng(1).uniform(0, 1, (2, layers))
    trainable, fixed = qml.numpy.array(values, requires_grad=True), qml.numpy.array(values, requires_grad=False)
    value_and_grad = qml.grad(energy)  # the adjoint step computes the value with the gradient
    return (lambda: value_and_grad(trainable)), (lambda: energy(fixed))


def copy_bandwidth(nbytes: int, rounds: int = 7) -> float:
    """Bytes per second (read + written) copying an array of ``nbytes`` (at most 1 GiB), 2 threads."""
    src = np.ones(min(nbytes, 2**30) // 16, dtype=complex)
    dst = np.empty_like(src)
    _copy(src, dst)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        _copy(src, dst)
        times.append(time.perf_counter() - start)
    return 2 * src.nbytes / statistics.median(times)


WARM_NODES = 18  # the kernels' types do not depend on the size: compiled on 18 qubits, they serve 30


def _fused_steps(nodes: int, weighted: bool, precision: str, layers: int = 2) -> tuple[dict[str, int], float, dict]:
    """Bytes a fused step moves (value+gradient, energy), the peak memory (traced from the device's
    creation on) in state vectors of the precision, and the two steps. The kernels are compiled
    first, on a smaller state, so that the compiler's memory is not counted as the simulator's."""
    small = min(nodes, WARM_NODES)
    for step in user_circuit(get_device(FUSED, wires=small, precision=precision), small, weighted, layers):
        step()
    tracemalloc.start()
    device = get_device(FUSED, wires=nodes, precision=precision)
    gradient, energy = user_circuit(device, nodes, weighted, layers)
    with qml.Tracker(device) as tracker:
        gradient()
    grad_bytes = tracker.totals["bytes_moved"]
    with qml.Tracker(device) as tracker:
        energy()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return (
        {"value+gradient": grad_bytes, "energy": tracker.totals["bytes_moved"]},
        peak / (AMPLITUDE_BYTES[precision] * 2**nodes),
        {"value+gradient": gradient, "energy": energy},
    )


def _name(precision: str) -> str:
    return FUSED if precision == "c128" else f"{FUSED} c64"


CASES = [
    pytest.param(22, False, ("c128", "c64"), id="22-unweighted"),
    pytest.param(22, True, ("c128", "c64"), id="22-weighted", marks=pytest.mark.slow),
    pytest.param(24, False, ("c128", "c64"), id="24-unweighted", marks=pytest.mark.slow),
    pytest.param(24, True, ("c128", "c64"), id="24-weighted", marks=pytest.mark.slow),
    pytest.param(26, False, ("c128", "c64"), id="26-unweighted", marks=pytest.mark.slow),
    pytest.param(26, True, ("c128", "c64"), id="26-weighted", marks=pytest.mark.slow),
    pytest.param(28, False, ("c128", "c64"), id="28-unweighted", marks=pytest.mark.slow),
    pytest.param(28, True, ("c128", "c64"), id="28-weighted", marks=pytest.mark.slow),
    pytest.param(30, False, ("c64",), id="30-unweighted-c64", marks=pytest.mark.slow),
    pytest.param(30, True, ("c64",), id="30-weighted-c64", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("nodes", "weighted", "precisions"), CASES)
def test_qaoa_roofline(benchmark, nodes, weighted, precisions):
    """fused.qubit's value + gradient and energy at each precision, against lightning (22 wires;
    fused alone above), with the fraction of copy bandwidth it reaches and its peak memory."""
    moved, peaks, candidates = {}, {}, {}
    state_bytes = max(AMPLITUDE_BYTES[p] for p in precisions) << nodes
    bandwidth = copy_bandwidth(state_bytes)  # before the devices: at 30 wires its 2 GiB would not fit beside them
    for precision in precisions:
        moved[precision], peaks[precision], steps = _fused_steps(nodes, weighted, precision)
        candidates.update({f"{_name(precision)}: {kind}": step for kind, step in steps.items()})
    if nodes <= 22:
        for backend in LIGHTNING if not weighted else LIGHTNING[:1]:
            if skip_reason(backend.removeprefix("local:")) is None:
                gradient, energy = user_circuit(get_device(backend, wires=nodes), nodes, weighted)
                candidates[f"{backend}: value+gradient"] = gradient
                candidates[f"{backend}: energy"] = energy
    energies = {name: float(qml.math.toarray(step())) for name, step in candidates.items() if name.endswith("energy")}
    exact = {name: e for name, e in energies.items() if " c64" not in name}
    assert not exact or max(exact.values()) - min(exact.values()) < 1e-10, exact
    for name, energy in energies.items():  # c64: the tolerance tests/test_fused.py states, against c128
        if " c64" in name and exact:
            assert abs(energy - next(iter(exact.values()))) < 2.2e-6 * (3 * nodes // 2) * 2.0, energies
    for name, step in candidates.items():
        if name.endswith("value+gradient"):
            step()
    benchmark.group = f"QAOA p=2, qml.qaoa layers{', weighted' if weighted else ''}"
    # fused.qubit's steps are short: three in a row per round, as an optimiser runs them (the medians
    # then rest on 15 of its steps and 5 of each lightning's at 22 wires)
    fused_runs = {name: 3 for name in candidates if name.startswith(FUSED)}
    medians = interleaved_medians(benchmark, candidates, rounds=5 if nodes <= 22 else 2, consecutive=fused_runs)
    candidates.clear()  # the devices go: the copy after the rounds takes their room
    steps.clear()
    gc.collect()
    bandwidth = (bandwidth + copy_bandwidth(state_bytes)) / 2  # before and after the rounds
    label = f"{nodes} nodes{' weighted' if weighted else ''}"
    kinds = ("value+gradient", "energy")  # bench report: a table per kind, the roofline column from bytes_moved
    benchmark.extra_info.update(
        medians={k: {n.rsplit(": ", 1)[0]: t for n, t in medians.items() if n.endswith(k)} for k in kinds},
        bytes_moved={k: {_name(p): moved[p][k] for p in precisions} for k in kinds},
        copy_bytes_per_second=bandwidth,
        peak_state_vectors={_name(p): peaks[p] for p in precisions},
    )
    for kind in kinds:
        for precision in precisions:
            fused = medians[f"{_name(precision)}: {kind}"]
            reached = moved[precision][kind] / fused
            passes = moved[precision][kind] / (2 * AMPLITUDE_BYTES[precision] * 2**nodes)
            versus = ""
            if precision == "c64" and "c128" in precisions:
                versus = f"; x{fused / medians[f'{FUSED}: {kind}']:.2f} of c128's time"
            record_seconds(
                f"qaoa roofline: {label}, {kind}",
                _name(precision),
                fused,
                f"{reached / 1e9:5.1f} GB/s = {reached / bandwidth:4.0%} of copy ({bandwidth / 1e9:.1f} GB/s); "
                f"{passes:.1f} state passes; peak {peaks[precision]:.2f} states{versus}",
            )
        for backend in LIGHTNING:
            if f"{backend}: {kind}" in medians:
                other = medians[f"{backend}: {kind}"]
                fused = medians[f"{FUSED}: {kind}"]
                record_seconds(f"qaoa roofline: {label}, {kind}", backend, other, f"fused.qubit x{other / fused:.1f} faster")
    for precision in precisions:  # ψ and λ, the levels or a weighted cost's diagonal (half a state), tiles
        assert peaks[precision] <= 2.6, (precision, peaks[precision])


DEEP_LAYERS = (2, 4, 6)


@pytest.mark.parametrize("busy", [False, True], ids=["quiet", "beside-one-busy-process"])
def test_deep_qaoa_gradient_per_layer(benchmark, busy):
    """The value + gradient of the ``qml.qaoa`` circuit at p = 2, 4, 6 (22 nodes, c128 and c64), quiet and beside one
    process that keeps a core busy. Past two layers the adjoint pass chains its fused sweeps (each undoes a mixer's
    pass, the cost layer and a pass of the mixer before): reported, the state passes (the tracker's bytes) and those
    each layer past the previous depth adds, the time per layer, and each step against p = 2's."""
    nodes, steps, passes, grads = 22, {}, {}, {}
    for precision in ("c128", "c64"):
        device = get_device(FUSED, wires=nodes, precision=precision)
        for layers in DEEP_LAYERS:
            gradient, _ = user_circuit(device, nodes, False, layers)
            name = f"{_name(precision)}: p={layers}"
            with qml.Tracker(device) as tracker:
                grads[name] = np.asarray(gradient())
            passes[name] = tracker.totals["bytes_moved"] / (2 * AMPLITUDE_BYTES[precision] * 2**nodes)
            steps[name] = gradient
    for layers in DEEP_LAYERS:  # c64 against c128: the same gradient, to c64's accuracy
        np.testing.assert_allclose(grads[f"{_name('c64')}: p={layers}"], grads[f"{FUSED}: p={layers}"], atol=1e-4 * nodes)
    benchmark.group = f"QAOA value + gradient by depth, 22 nodes, {'beside one busy process' if busy else 'quiet'}"
    with busy_process(busy):
        medians = interleaved_medians(benchmark, steps, rounds=5, consecutive=3)
    benchmark.extra_info.update(medians=medians, state_passes=passes)
    for name, seconds in medians.items():
        backend, layers = name.rsplit("p=", 1)[0], int(name.rsplit("p=", 1)[1])
        shallower = [p for p in DEEP_LAYERS if p < layers]
        added = ""
        if shallower:
            added = f", {(passes[name] - passes[backend + f'p={shallower[-1]}']) / (layers - shallower[-1]):.2f} a layer past p={shallower[-1]}"
        record_seconds(
            f"qaoa by depth: 22 nodes, value+gradient, {'one busy process beside' if busy else 'quiet'}",
            name,
            seconds,
            f"{passes[name]:.1f} state passes{added}; {seconds / layers * 1e3:.1f} ms a layer; "
            f"x{seconds / medians[backend + f'p={DEEP_LAYERS[0]}']:.2f} of p={DEEP_LAYERS[0]}'s time",
        )


def _with_adjoint_tiles(step, tiles_bytes: int):
    """``step`` run with ``kernels.ADJOINT_TILES_BYTES`` set to ``tiles_bytes`` (engine.tiling_for reads it at each call)."""

    def run():
        saved = kernels.ADJOINT_TILES_BYTES
        kernels.ADJOINT_TILES_BYTES = tiles_bytes
        try:
            return step()
        finally:
            kernels.ADJOINT_TILES_BYTES = saved

    return run


@pytest.mark.slow
@pytest.mark.parametrize("busy", [False, True], ids=["quiet", "beside-one-busy-process"])
@pytest.mark.parametrize("nodes", [27, 28])
def test_adjoint_tiling(benchmark, nodes, busy):
    """The c128 value + gradient at 27 and 28 nodes in the adjoint's tiling (2^17 tiles, runs of 64: φ's and λ's tiles
    fit ADJOINT_TILES_BYTES, 4 MiB) against the one of a 2 MiB limit (2^16 tiles, runs of 16), on one device,
    interleaved, quiet and beside one busy process; the same gradient either way."""
    label = "beside one busy process" if busy else "quiet"
    gradient, _ = user_circuit(get_device(FUSED, wires=nodes), nodes, False)
    steps = {"2^17 tiles, runs of 64": gradient, "2^16 tiles, runs of 16": _with_adjoint_tiles(gradient, 2 << 20)}
    assert engine.tiling_for(nodes, 16, adjoint=True).bits == 17
    np.testing.assert_allclose(*(np.asarray(step()) for step in steps.values()), atol=1e-12)
    benchmark.group = f"QAOA adjoint tiling, {nodes} nodes c128, {label}"
    with busy_process(busy):
        medians = interleaved_medians(benchmark, steps, rounds=3)
    for name, seconds in medians.items():
        other = next(t for n, t in medians.items() if n != name)
        record_seconds(
            f"qaoa adjoint tiling: {nodes} nodes c128 value+gradient, {label}",
            name,
            seconds,
            f"x{seconds / other:.2f} of the other",
        )


QOKIT_P6_28_SECONDS = 11.5  # QOKit's benchmark notebook: a p=6 objective at 28 qubits, 48-core Xeon, c128


@pytest.mark.slow
def test_qaoa_p6_energy_at_28_qubits(benchmark):
    """The energy alone of a p=6 QAOA at 28 qubits, c128 and c64 side by side, beside QOKit's figure."""
    nodes, steps, moved = 28, {}, {}
    for precision in ("c128", "c64"):
        device = get_device(FUSED, wires=nodes, precision=precision)
        _, energy = user_circuit(device, nodes, False, layers=6)
        with qml.Tracker(device) as tracker:
            energy()
        moved[_name(precision)] = tracker.totals["bytes_moved"]
        steps[_name(precision)] = energy
    benchmark.group = "QAOA p=6 energy, 28 qubits"
    medians = interleaved_medians(benchmark, steps, rounds=3)
    benchmark.extra_info.update(medians=medians, bytes_moved=moved)
    for name, seconds in medians.items():
        record_seconds("qaoa p=6 energy: 28 nodes", name, seconds, f"QOKit x{QOKIT_P6_28_SECONDS / seconds:.2f} (48 cores, c128)")
    record_note("qaoa p=6 energy: 28 nodes", "QOKit", f"{QOKIT_P6_28_SECONDS} s published, not run here")


@pytest.mark.parametrize("nodes", [22, pytest.param(26, marks=pytest.mark.slow)])
def test_run_qaoa_default_formulation_against_the_qml_qaoa_form(benchmark, nodes):
    """``qbackends run qaoa``'s circuit (``qaoa.energy_function``, the default formulation) against the ``qml.qaoa``
    form of the same run on fused.qubit, c128 and c64: state passes a value + gradient step makes, and its time."""
    graph = qaoa.random_graph(nodes, 3 * nodes // 2, 1967)
    params = qml.numpy.array(np.random.default_rng(1).uniform(0, 1, (2, 2)), requires_grad=True)
    steps, passes, values = {}, {}, {}
    for precision in ("c128", "c64"):
        device = get_device(FUSED, wires=nodes, precision=precision)
        for formulation in ("fast", "qml.qaoa"):
            name = f"{_name(precision)}: {'run qaoa default' if formulation == 'fast' else 'qml.qaoa form'}"
            step = qml.grad(qaoa.energy_function(device, graph, 2, formulation))
            with qml.Tracker(device) as tracker:
                step(params)
            passes[name] = tracker.totals["bytes_moved"] / (2 * AMPLITUDE_BYTES[precision] * 2**nodes)
            values[name] = float(qaoa.energy_function(device, graph, 2, formulation)(params))
            steps[name] = lambda step=step: step(params)
    exact = [v for n, v in values.items() if " c64" not in n]
    assert max(exact) - min(exact) < 1e-10, values
    benchmark.group = f"run qaoa default formulation, {nodes} nodes"
    medians = interleaved_medians(benchmark, steps, rounds=5 if nodes <= 22 else 2, consecutive=3)
    benchmark.extra_info.update(medians=medians, state_passes=passes)
    for name, seconds in medians.items():
        form = name.replace("run qaoa default", "qml.qaoa form")
        record_seconds(
            f"run qaoa formulation: {nodes} nodes",
            name,
            seconds,
            f"{passes[name]:.1f} state passes; x{seconds / medians[form]:.2f} of the qml.qaoa form's time",
        )
