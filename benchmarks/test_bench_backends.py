"""Issue: benchmark suite. QAOA per iteration on every backend that runs here, and auto, 12-22 qubits.

`qbackends bench report RESULTS.json` turns these into a backend x size table (params: backend, nodes).
Backends that cannot run here are skipped with the probe's reason; peers from plugins (Braket's local
simulator, Qulacs, and Qiskit Aer when pennylane-qiskit is installed) run in the value-only group.
"""

from __future__ import annotations

import time
from importlib import metadata

import pennylane as qml
import pytest
from conftest import interleaved_medians
from qaoa_circuits import value_and_gradient

from qbackends import QBackendsError, capabilities, get_device, get_registry
from qbackends.device import facts_for

SIZES = [
    12,
    14,
    16,
    pytest.param(18, marks=pytest.mark.slow),
    pytest.param(20, marks=pytest.mark.slow),
    pytest.param(22, marks=pytest.mark.slow),
]


def _backends() -> list:
    registry = get_registry()
    facts = facts_for(registry)
    params = [pytest.param("auto", id="auto"), pytest.param("auto: QAOA workload", id="auto-qaoa-workload")]
    for backend in sorted(registry.backends.values(), key=lambda b: b.key):
        if backend.provider == "fixture":
            continue
        caps = capabilities.evaluate(backend, facts)
        marks = [] if caps.ok else [pytest.mark.skip(reason=f"{backend.device_string}: {caps.reason}")]
        params.append(pytest.param(backend.device_string, marks=marks, id=backend.key))
    aer = "qiskit.aer" in {ep.name for ep in metadata.entry_points(group="pennylane.plugins")}
    params.append(
        pytest.param(
            "qiskit.aer",
            id="qiskit.aer",
            marks=[] if aer else [pytest.mark.skip(reason="pennylane-qiskit is not installed: pip install pennylane-qiskit")],
        )
    )
    return params


def _device(backend: str, nodes: int):
    if backend == "auto: QAOA workload":  # what `qbackends run qaoa` takes under auto (workloaddevices.qaoa_device)
        from qbackends import workloaddevices

        return workloaddevices.qaoa_device("auto", nodes, "adjoint")
    if backend == "qiskit.aer":  # a peer without a qbackends plugin: through PennyLane directly
        return qml.device("qiskit.aer", wires=nodes)
    try:
        return get_device(backend, wires=nodes)
    except QBackendsError as exc:
        pytest.skip(exc.one_line())


def _adjoint(device) -> bool:
    return device.supports_derivatives(qml.devices.ExecutionConfig(gradient_method="adjoint"))


DEFAULT_QUBIT_ADJOINT_MAX = 14  # default.qubit's adjoint: 2.1 s at 14 qubits, about 8x per 2 more


@pytest.mark.parametrize("nodes", SIZES)
def test_qaoa_value_and_gradient(benchmark, nodes):
    """Every adjoint-capable backend that runs here, generic auto and the QAOA workload's auto,
    interleaved round by round: timed one after another, two rows of the same device differed by up
    to 50% on this machine. Medians in ``extra_info`` for ``qbackends bench report``."""
    steps, skipped, warm, chosen = {}, {}, {}, {}
    for param in _backends():
        backend = param.values[0]
        if param.marks:
            skipped[backend] = param.marks[0].kwargs["reason"]
            continue
        if backend.endswith("/default.qubit") and nodes > DEFAULT_QUBIT_ADJOINT_MAX:
            skipped[backend] = f"adjoint above {DEFAULT_QUBIT_ADJOINT_MAX} qubits takes minutes"
            continue
        try:
            device = _device(backend, nodes)
        except pytest.skip.Exception as exc:
            skipped[backend] = str(exc)
            continue
        if not _adjoint(device):
            skipped[backend] = "no adjoint gradient; see the value-only group"
            continue
        if backend.startswith("auto"):  # the report names the backend auto took
            chosen[backend] = next(
                (b.device_string for b in get_registry().backends.values() if b.device_name == device.name), device.name
            )
        step, *_ = value_and_gradient(device, nodes, "fast")
        step()
        start = time.perf_counter()
        step()
        warm[backend] = time.perf_counter() - start
        steps[backend] = step
    benchmark.group = "QAOA p=2 value + adjoint gradient per iteration"
    # steps under a second run three times in a row per round: the rows that decide whether auto is
    # within 10% of the fastest rest on 6-15 steps, not 2-5
    repeats = {backend: 3 for backend, seconds in warm.items() if seconds < 1.0}
    medians = interleaved_medians(benchmark, steps, rounds=5 if nodes <= 18 else 2, consecutive=repeats)
    benchmark.extra_info.update(medians=medians, skipped=skipped, chosen=chosen)


@pytest.mark.parametrize("nodes", SIZES)
@pytest.mark.parametrize("backend", _backends())
def test_qaoa_value(benchmark, backend, nodes):
    benchmark.group = "QAOA p=2 energy per evaluation"
    device = _device(backend, nodes)
    _, energy, params = value_and_gradient(device, nodes, "fast", diff_method="best")
    energy(params)
    benchmark.extra_info["device"] = device.name
    benchmark.pedantic(energy, args=(params,), rounds=5 if nodes <= 18 else 2, iterations=1)
