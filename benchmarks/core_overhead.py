"""``get_device`` by name against ``qml.device`` on the same backend: construction, and per-execution overhead on a
small 2-qubit value + adjoint gradient. Prints one JSON line of per-round seconds (each round the mean of
``--inner`` repeats of each, interleaved), so two trees can be run in turn and compared:

    for i in 1 2 3; do for t in BEFORE AFTER; do  # two checkouts PYTHONPATH=$t python benchmarks/core_overhead.py; done; done
"""

from __future__ import annotations

import argparse
import json
import time

import pennylane as qml

import qbackends
from qbackends import get_device

NAME = "lightning.qubit"


def step_of(device):
    @qml.qnode(device, diff_method="adjoint")
    def circuit(x):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(0) @ qml.Z(1))

    x = qml.numpy.array([0.3, 0.7], requires_grad=True)
    return lambda: (circuit(x), qml.grad(circuit)(x))


def mean_seconds(run, inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        run()
    return (time.perf_counter() - start) / inner


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inner", type=int, default=20)
    args = parser.parse_args()
    variants = {
        "get_device": lambda: get_device(f"local:pennylane/{NAME}", wires=4),
        "qml.device": lambda: qml.device(NAME, wires=4),
    }
    steps = {k: step_of(make()) for k, make in variants.items()}
    for step in steps.values():
        step()  # warm up: compiled code, caches
    rounds: dict[str, list[float]] = {f"{k} {what}": [] for k in variants for what in ("build", "step")}
    for _ in range(args.rounds):
        for key, make in variants.items():
            rounds[f"{key} build"].append(mean_seconds(make, args.inner))
            rounds[f"{key} step"].append(mean_seconds(steps[key], args.inner))
    print(json.dumps({"tree": str(qbackends.__file__), "rounds": rounds}))


if __name__ == "__main__":
    main()
