"""The slow set: random circuits (``randomcircuits``: every declared gate, templates, state preparation, random wire
labels) measured by random measurements, one or several, analytic or sampled, on every backend and auto, judged
by the measurement harness against default.qubit."""

from __future__ import annotations

import pennylane as qml
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from knowndefects import KNOWN
from measurementcases import DIFFERENTIATED, RANDOM_ANALYTIC, RANDOM_SAMPLED, SHOTS, Case, random_measurement
from measurementharness import BACKENDS, outcome
from randomcircuits import random_circuits

from qbackends import capabilities
from qbackends.device import facts_for

_FACTS = facts_for(__import__("qbackends").get_registry())
GATES = sorted({op for b in BACKENDS if hasattr(b, "provider") for op in capabilities.evaluate(b, _FACTS).operations.native})
# The random kinds that can draw a defect recorded for a fixed case (``knowndefects``): those backends draw around it.
_DEFECTS = {
    "var": ("var-sum", "shots-var-sum"),
    "var-word": ("shots-one-term-sum-and-var",),
    "sample": ("shots-sample-wires",),
    "state": ("state-after-state-prep",),
}


def _kinds(key: str, kinds: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(k for k in kinds if not any((key, case) in KNOWN for case in _DEFECTS.get(k, ())))


@st.composite
def random_cases(draw, key: str):
    circuit = draw(random_circuits(GATES, max_wires=4, max_steps=5), label="circuit")
    sampled = draw(st.booleans())
    kinds = _kinds(key, RANDOM_SAMPLED if sampled else RANDOM_ANALYTIC)
    chosen = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3))
    if len(circuit.wires) < 2:
        chosen = [k for k in chosen if k != "mutual-info"] or ["probs"]
    makers = [random_measurement(draw, st, k, circuit.wires) for k in chosen]
    params = tuple(draw(st.lists(st.floats(-3.1, 3.1), min_size=circuit.nparams, max_size=circuit.nparams), label="x"))
    grad = not sampled and len(chosen) == 1 and chosen[0] in DIFFERENTIATED and circuit.nparams > 0
    with qml.QueuingManager.stop_recording():
        named = [str(make()) for make in makers]
    return Case(
        f"random {circuit} {named}",
        (lambda m: makers[0]()) if len(makers) == 1 else (lambda m: tuple(make() for make in makers)),
        shots=SHOTS if sampled else None,
        grad=grad and draw(st.booleans()),
        body=circuit.apply,
        labels=tuple(circuit.wires),
        params=params,
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.key)
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_measurements_are_computed_right_or_refused_typed(backend, data):
    case = data.draw(random_cases(backend.key), label="case")
    result = outcome(backend, case)
    assert result == "computed" or result.startswith("refused: "), result
