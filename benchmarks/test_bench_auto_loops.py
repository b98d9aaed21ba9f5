"""Issue: auto in the loops people write. Each loop on ``get_device("auto")`` and on every backend auto weighs here
by name (``get_device``), in one interleaved run: the loops that change the circuit, build a device per sample or
use the QNode's default ``diff_method="best"``.

Each member's first pass is run untimed and recorded apart ("first pass"): for auto it holds the decisions' one-time
cost (trials), for the others their own first-call costs. Auto's decisions go to a store folder of this run's own
(``QBACKENDS_DECISIONS``), so an earlier run's are not reused. A backend that refuses a loop's circuit is noted.
"""

from __future__ import annotations

import tempfile
import time

import numpy as np
import pennylane as qml
import pytest
import zoo
from conftest import auto_over_fastest, interleaved_medians, record_choice, record_note, record_ratio, record_seconds
from pennylane import numpy as pnp

from qbackends import QBackendsError, get_device
from qbackends.context import get_context
from qbackends.screening import auto_candidates

ROUNDS = 7
PENNYLANE_ERRORS = tuple(
    c for c in vars(qml.exceptions).values() if isinstance(c, type) and issubclass(c, Exception) and not issubclass(c, Warning)
)


@pytest.fixture(autouse=True)
def own_decisions(monkeypatch):
    monkeypatch.setenv("QBACKENDS_DECISIONS", tempfile.mkdtemp(prefix="qbackends-bench-decisions-"))


def barren_plateau(spec: str):
    """PennyLane's barren-plateau demo: per sample a new device and QNode, a random rotation per qubit, one gradient."""
    wires, rng = 4, np.random.default_rng(0)
    observable = np.zeros((2**wires, 2**wires))
    observable[0, 0] = 1.0
    gates = [qml.RX, qml.RY, qml.RZ]

    def step():
        dev = get_device(spec, wires=wires)
        chosen = [gates[i] for i in rng.integers(3, size=wires)]

        @qml.qnode(dev)
        def circuit(params):
            for w in range(wires):
                qml.RY(np.pi / 4, wires=w)
            for w in range(wires):
                chosen[w](params[w], wires=w)
            for w in range(wires - 1):
                qml.CZ(wires=[w, w + 1])
            return qml.expval(qml.Hermitian(observable, wires=range(wires)))

        return qml.grad(circuit)(pnp.array(rng.uniform(0, 2 * np.pi, wires), requires_grad=True))

    return step


def adaptive(spec: str):
    """An adaptive loop: 20 circuits of growing depth (RY layer + CNOT ladder, 6 wires), 5 gradients each."""
    wires = 6

    def step():
        dev = get_device(spec, wires=wires)
        for depth in range(1, 21):

            @qml.qnode(dev, diff_method="adjoint")
            def circuit(params):
                for layer in range(len(params)):  # (depth rows)
                    for w in range(wires):
                        qml.RY(params[layer, w], wires=w)
                    for w in range(wires - 1):
                        qml.CNOT(wires=[w, w + 1])
                return qml.expval(qml.PauliZ(0))

            params = pnp.full((depth, wires), 0.3, requires_grad=True)
            for _ in range(5):
                qml.grad(circuit)(params)

    return step


def local_cost(spec: str):
    """PennyLane's local-cost-functions demo: ``1 - probs(...)[0]`` on 6 wires under the default ("best")."""
    wires = 6
    dev = get_device(spec, wires=wires)

    @qml.qnode(dev)
    def circuit(rotations):
        for w in range(wires):
            qml.RX(rotations[0, w], wires=w)
            qml.RY(rotations[1, w], wires=w)
        for w in range(wires - 1):
            qml.CZ(wires=[w, w + 1])
        return qml.probs(wires=range(wires))

    rotations = pnp.array(np.random.default_rng(2).uniform(0, np.pi, (2, wires)), requires_grad=True)
    return lambda: qml.grad(lambda r: 1 - circuit(r)[0])(rotations)


def reuploading(spec: str):
    """PennyLane's data re-uploading classifier: 32 one-qubit circuits of ``Rot`` gates per step, ``Hermitian``."""
    dev = get_device(spec, wires=1)
    label = np.array([[1, 0], [0, 0]])
    data = np.random.default_rng(3).uniform(-1, 1, (32, 3))

    @qml.qnode(dev)
    def fidelity(params, x):
        for layer in range(3):
            qml.Rot(*x, wires=0)
            qml.Rot(*params[layer], wires=0)
        return qml.expval(qml.Hermitian(label, wires=0))

    params = pnp.array(np.random.default_rng(4).uniform(0, np.pi, (3, 3)), requires_grad=True)
    return lambda: qml.grad(lambda p: sum((1 - fidelity(p, x)) ** 2 for x in data))(params)


def hamiltonian_300(spec: str):
    """A 12-wire ``StronglyEntanglingLayers`` circuit measuring a 300-term Hamiltonian: value + gradient."""
    return zoo.vqe_template(get_device(spec, wires=12), qml.StronglyEntanglingLayers, 12, 2, 300)


LOOPS = {  # the loop, its wires, and its rounds: one sample a round where the loop samples (the demo takes 200)
    "barren-plateau, a new device per sample (4 wires, best)": (barren_plateau, 4, 50),
    "adaptive, 20 depths x 5 gradients (6 wires, adjoint)": (adaptive, 6, ROUNDS),
    "local cost, 1 - probs[0] (6 wires, best)": (local_cost, 6, ROUNDS),
    "re-uploading, 32 Rot circuits per step (1 wire, best)": (reuploading, 1, ROUNDS),
    "300-term Hamiltonian, StronglyEntanglingLayers (12 wires, adjoint)": (hamiltonian_300, 12, ROUNDS),
}


@pytest.mark.parametrize("loop", list(LOOPS))
def test_auto_in_loops(benchmark, loop):
    make, wires, rounds = LOOPS[loop]
    group = f"auto in loops: {loop}"
    specs = [c.backend.device_string for c in auto_candidates(get_context(), wires, "c128", "adjoint")]
    steps, first = {}, {}
    for spec in [*specs, "auto"]:
        try:
            start = time.perf_counter()
            step = make(spec)
            step()
            first[spec] = time.perf_counter() - start
            steps[spec] = step
        except (QBackendsError, *PENNYLANE_ERRORS) as exc:
            record_note(group, spec, f"refused: {' '.join(str(exc).split())[:160]}")
    per_round: dict = {}
    medians = interleaved_medians(benchmark, steps, rounds=rounds, per_round=per_round)
    for spec, seconds in medians.items():
        # one-time costs past the first pass (a new circuit family's trial): the rounds' time over their median
        later = sum(max(t - seconds, 0.0) for t in per_round[spec].values())
        record_seconds(group, spec, seconds, f"first pass {first[spec]:.3g} s, later rounds {later:.3g} s over the median")
    paired = auto_over_fastest(medians, per_round)
    assert paired is not None, f"auto or every backend failed: {group}"
    record_ratio(group, *paired)
    record_choice(group, _took())
    benchmark.extra_info.update(medians=medians, first_pass=first, auto_over_fastest=paired[1], fastest=paired[0])


def _took() -> str:
    decisions = [d for per_setup in get_context().decisions.values() for d in per_setup.values()]
    return ", ".join(sorted({d.backend for d in decisions})) or "-"
