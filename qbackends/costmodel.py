"""Measuring ``auto``'s cost model: a few circuit classes timed on each backend, fitted into ``auto.Costs``.

Each class isolates one term of ``auto.predict``: a one-gate circuit (the fixed cost of an
execution), a broadcast batch against one row (the cost per row), layers of mixing gates, runs of
diagonal gates with one and two gates per wire (per diagonal gate, and per run: a backend that
merges a run costs one pass for it), and a many-term observable at ``SMALL`` qubits (each per
amplitude), the mixing layers at ``LARGE`` qubits (how the cost per amplitude grows once the state
leaves the caches), and the mixing layers with an adjoint gradient (the gradient's factor). ``qbackends calibrate
--workload circuits`` runs it on this machine; the shipped model (``data/auto-model.json``) is its
result on the 2-core reference machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import pennylane as qml

from .context import Context, get_context
from .costs import Costs
from .device import get_device
from .errors import CalibrationError, QBackendsError, report
from .registry import Registry
from .screening import auto_candidates

SMALL = 12  # a gate's fixed cost shows here (its amplitudes are few) ...
LARGE = 20  # ... and its cost per amplitude here, with the state out of the caches (every class is timed here)
LAYERS = 4
BATCH = 32
TERMS = 40
TRIES = 3  # timings of the gate pair before noise is reported rather than fitted


def _timer(step: Callable[[], Any], repeats: int) -> float:
    step()  # allocation, compilation, caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(device_string: str, repeats: int = 5, small: int = SMALL, large: int = LARGE, backprop: bool = False) -> Costs:
    """Fit the cost terms of one backend from the circuit classes (a gate's fixed cost from ``small`` qubits, the rest
    at ``large``); ``backprop``: the backend's results are differentiable (``Backend.backprop``): that step too."""
    rng = np.random.default_rng(1967)

    def qnode(wires: int, body: Callable[[Any], None], observable: Any, diff_method: str | None = None) -> Any:
        device = get_device(device_string, wires=wires, diff_method=diff_method)

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

    def mixing(wires: int) -> Callable[[Any], None]:
        def body(x: Any) -> None:
            for layer in range(LAYERS):
                for w in range(wires):
                    qml.RY(x[layer, w], w)
                for w in range(wires - 1):
                    qml.CNOT([w, w + 1])

        return body

    def runs(wires: int, with_rz: bool) -> Callable[[Any], None]:
        """LAYERS runs of diagonal gates (a ring of IsingZZ, and RZ on every wire if ``with_rz``), each ended by an RX layer."""

        def body(x: Any) -> None:
            for w in range(wires):
                qml.Hadamard(w)
            for layer in range(LAYERS):
                for w in range(wires):
                    qml.IsingZZ(x[layer, w], [w, (w + 1) % wires])
                    if with_rz:
                        qml.RZ(x[layer, w], w)
                for w in range(wires):
                    qml.RX(x[layer, w], w)

        return body

    def weights(wires: int, trainable: bool = False) -> Any:
        return qml.numpy.array(rng.uniform(size=(LAYERS, wires)), requires_grad=trainable)  # forward alone unless trainable

    def seconds(wires: int, body: Callable[[Any], None], observable: Any, times: int) -> float:
        circuit, x = qnode(wires, body, observable), weights(wires)
        return _timer(lambda: circuit(x), times)

    def per_gate(wires: int, times: int = repeats) -> float:
        """Seconds per mixing gate at ``wires`` qubits, the fixed cost of an execution taken off."""
        return max(seconds(wires, mixing(wires), qml.Z(0), times) - execution, 0.0) / (LAYERS * (2 * wires - 1))

    # A gate costs a fixed ``op`` (PennyLane's and the binding's share) plus ``gate`` per amplitude: two sizes tell them
    # apart. A gate on more amplitudes cannot cost less: a pair that says so was swamped by other work, timed again.
    for attempt in range(TRIES):
        times = repeats * 2**attempt
        at_small, at_large = per_gate(small, times), per_gate(large, max(times // 2, 1))
        if at_large > at_small:
            break
    else:
        raise CalibrationError(
            f"Calibrating {device_string!r}: a gate on 2^{large} amplitudes timed no slower than one on 2^{small} "
            f"in {TRIES} tries ({at_large * 1e6:.1f} us against {at_small * 1e6:.1f} us): other work on this machine "
            "swamped the timings.",
            "calibrate again on a quieter machine, or with more --repeats.",
        )
    amplitudes = 2.0**large
    gate = (at_large - at_small) / (amplitudes - 2.0**small)  # positive: the loop above saw to it
    op = max(at_small - 2.0**small * gate, 0.0)
    n = large
    both, zz = (
        seconds(n, runs(n, True), qml.Z(0), max(repeats // 2, 1)),
        seconds(n, runs(n, False), qml.Z(0), max(repeats // 2, 1)),
    )
    diagonal = max(both - zz - LAYERS * n * op, 0.0) / (LAYERS * n * amplitudes)
    mixing_part = (n + LAYERS * n) * (op + gate * amplitudes) + LAYERS * n * (op + diagonal * amplitudes)
    run = max(zz - execution - mixing_part, 0.0) / (LAYERS * amplitudes)
    words = [qml.Z(int(a)) @ qml.Z(int(b)) for a, b in rng.integers(0, n, size=(TERMS, 2)) if a != b]
    hamiltonian = qml.Hamiltonian(list(rng.uniform(size=len(words))), words)
    terms = seconds(n, lambda x: qml.RY(x[0, 0], 0), hamiltonian, max(repeats // 2, 1))
    term = max(terms - execution - op - gate * amplitudes, 0.0) / (len(words) * amplitudes)
    forward = execution + LAYERS * (2 * large - 1) * at_large
    few = max(repeats // 2, 1)
    try:
        adjoint, trainable = qnode(large, mixing(large), qml.Z(0), "adjoint"), weights(large, True)
        gradient = _timer(lambda: qml.grad(adjoint)(trainable), few) / forward
    except Exception:  # noqa: BLE001 - no adjoint method: parameter-shift's factor applies
        gradient = 3.0
    costs: dict[str, Any] = {
        "execution": execution,
        "row": max(rows, 0.0),
        "splits_batch": rows > 0.05 * execution,
        "op": op,
        "gate": gate,
        "diagonal": diagonal,
        "run": run,
        "term": term,
        "gradient": gradient,
    }
    if backprop:
        backprop, trainable = qnode(large, mixing(large), qml.Z(0), "backprop"), weights(large, True)
        costs["backprop"] = _timer(lambda: qml.grad(backprop)(trainable), few) / forward
    return Costs(**costs)


def cpu_backends(registry: Registry) -> list[Any]:
    """The backends on the host that ``auto`` weighs here: what the model is measured for by default."""
    context = get_context()
    if context.registry is not registry:  # another registry: what it has learnt is its own
        context = Context(registry)
    return [c.backend for c in auto_candidates(context, None) if c.backend.hardware in ("cpu", "kokkos")]


def measure_all(backends: list[Any], repeats: int = 5, on_result: Callable[[Any, Costs], None] | None = None) -> dict[str, Costs]:
    """``measure`` of each backend, at sizes it runs in seconds (default.qubit's simulation is slow: smaller)."""
    costs = {}
    for backend in backends:
        small, large = (SMALL, LARGE) if not backend.dense_adjoint_observables else (8, 14)
        costs[backend.key] = measure(backend.device_string, repeats, small, large, backend.backprop)
        if on_result is not None:
            on_result(backend, costs[backend.key])
    return costs


def main(argv: list[str] | None = None) -> int:
    """``python -m qbackends.costmodel [--repeats N]``: the model of every CPU backend ``auto`` may take here, as
    JSON (the shipped ``data/auto-model.json``); a typed error ends it in one line."""
    parser = argparse.ArgumentParser(
        prog="python -m qbackends.costmodel",
        description="Measure the cost model of every CPU backend auto may take here; print it as JSON.",
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per circuit class (the median is kept)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats} times nothing; pass --repeats 1 or more")

    def show(backend: Any, costs: Costs) -> None:
        print(backend.key, costs, file=sys.stderr, flush=True)

    try:
        costs = measure_all(cpu_backends(get_context().registry), args.repeats, on_result=show)
    except QBackendsError as exc:
        return report(exc)
    model = {
        key: {k: v if isinstance(v, bool) else float(f"{v:.4g}") for k, v in asdict(c).items() if v is not None}
        for key, c in costs.items()
    }
    measured = (
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores: python -m qbackends.costmodel (default.qubit at 8 and 14 wires)"
    )
    print(json.dumps({"schema": 1, "measured": measured, "backends": model}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
