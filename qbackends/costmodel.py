"""Measuring ``auto``'s cost model: a few circuit classes timed on each backend, fitted into ``auto.Costs``.

Each class isolates one term of ``auto.predict``: a one-gate circuit (the fixed cost of an
execution), a broadcast batch against one row (the cost per row), layers of mixing gates, of
diagonal gates, and a many-term observable at ``WIRES`` qubits (each per gate and amplitude), and
the same mixing layers with an adjoint gradient (the gradient's factor). ``qbackends calibrate
--workload circuits`` runs it on this machine; the shipped model (``data/auto-model.json``) is its
result on the 2-core reference machine.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from .auto import Costs

WIRES = 16
LAYERS = 4
BATCH = 32
TERMS = 40


def _timer(step: Callable[[], Any], repeats: int) -> float:
    step()  # allocation, compilation, caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(device_string: str, repeats: int = 5, wires: int = WIRES) -> Costs:
    """Fit the cost terms of one backend from the circuit classes (at ``wires`` qubits)."""
    import numpy as np
    import pennylane as qml

    from .device import get_device

    rng = np.random.default_rng(1967)

    def qnode(wires: int, body: Callable[[Any], None], observable: Any, diff_method: str | None = None) -> Any:
        device = get_device(device_string, wires=wires)

        @qml.qnode(device, diff_method=diff_method or "best")
        def circuit(x: Any) -> Any:
            body(x)
            return qml.expval(observable)

        return circuit

    def one_gate(x: Any) -> None:
        qml.RX(x, 0)
        qml.RY(0.3, 1)

    tiny = qnode(2, one_gate, qml.Z(0))
    execution = _timer(lambda: tiny(0.1), repeats)
    batch = rng.uniform(size=BATCH)
    rows = (_timer(lambda: tiny(batch), repeats) - execution) / (BATCH - 1)

    def mixing(x: Any) -> None:
        for layer in range(LAYERS):
            for w in range(wires):
                qml.RY(x[layer, w], w)
            for w in range(wires - 1):
                qml.CNOT([w, w + 1])

    def diagonal(x: Any) -> None:
        for w in range(wires):
            qml.Hadamard(w)
        for layer in range(LAYERS):
            for w in range(wires):
                qml.IsingZZ(x[layer, w], [w, (w + 1) % wires])
                qml.RZ(x[layer, w], w)

    amplitudes = 2.0**wires
    weights = qml.numpy.array(rng.uniform(size=(LAYERS, wires)), requires_grad=True)
    constants = qml.numpy.array(weights, requires_grad=False)  # a forward pass alone (lightning differentiates on execution)
    mixing_gates = LAYERS * (2 * wires - 1)
    mixing_circuit, diagonal_circuit = qnode(wires, mixing, qml.Z(0)), qnode(wires, diagonal, qml.Z(0))
    forward = _timer(lambda: mixing_circuit(constants), repeats)
    gate = max(forward - execution, 0.0) / (mixing_gates * amplitudes)
    diag_time = _timer(lambda: diagonal_circuit(constants), repeats)
    diag = max(diag_time - execution - wires * gate * amplitudes, 0.0) / (2 * LAYERS * wires * amplitudes)
    words = [qml.Z(int(a)) @ qml.Z(int(b)) for a, b in rng.integers(0, wires, size=(TERMS, 2)) if a != b]
    hamiltonian = qml.Hamiltonian(list(rng.uniform(size=len(words))), words)
    terms_circuit = qnode(wires, lambda x: qml.RY(x[0, 0], 0), hamiltonian)
    term_time = _timer(lambda: terms_circuit(constants), repeats)
    term = max(term_time - execution - gate * amplitudes, 0.0) / (len(words) * amplitudes)
    adjoint = qnode(wires, mixing, qml.Z(0), "adjoint")
    try:
        gradient = _timer(lambda: qml.grad(adjoint)(weights), repeats) / forward
    except Exception:  # noqa: BLE001 - no adjoint method: parameter-shift's factor applies
        gradient = 3.0
    costs = {"execution": execution, "row": max(rows, 0.0), "gate": gate, "diagonal": diag, "term": term, "gradient": gradient}
    if device_string.endswith("default.qubit"):
        backprop = qnode(wires, mixing, qml.Z(0), "backprop")
        costs["backprop"] = _timer(lambda: qml.grad(backprop)(weights), repeats) / forward
    return Costs(**costs)


def main() -> None:
    """``python -m qbackends.costmodel``: the model of every CPU backend ``auto`` may take here, as JSON."""
    import json
    import sys
    import time as clock
    from dataclasses import asdict

    from .auto import candidates
    from .registry import get_registry

    model = {}
    for backend in candidates(get_registry(), WIRES):
        if backend.hardware in ("cpu", "kokkos"):
            model[backend.key] = {
                k: float(f"{v:.4g}") for k, v in asdict(measure(backend.device_string)).items() if v is not None
            }
            print(backend.key, model[backend.key], file=sys.stderr, flush=True)
    print(json.dumps({"schema": 1, "measured": clock.strftime("%Y-%m-%d"), "backends": model}, indent=2))


if __name__ == "__main__":
    main()
