"""No silent wrong answer, for every measurement PennyLane has: each case of ``measurementcases`` on every backend
and ``auto``, against default.qubit. A backend computes it (analytic to 1e-10, gradients to 1e-8, sampled within
5σ, seeds fixed) or refuses it typed; auto, whose candidates include default.qubit, computes it.

The fast set runs every case on qbackends' own simulators, auto and lightning.qubit, and on the other backends the
first case of each measurement process class; ``-m slow`` runs every case everywhere.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from knowndefects import KNOWN
from measurementcases import CASES, MEASUREMENT_CLASSES, WIRES, Case, X
from measurementharness import BACKENDS, outcome

from qbackends import get_device

EVERY_CASE_FAST = {"qbackends/fused.qubit", "qbackends/batched.qubit", "auto", "pennylane/lightning.qubit"}


def _first_of_each_class(key: str) -> set[str]:
    """For each measurement process class, the first case of it that is not a known defect of the backend (else the first)."""
    cases = [[c.name for c in CASES if cls.__name__ in c.classes()] for cls in MEASUREMENT_CLASSES]
    return {next((n for n in names if (key, n) not in KNOWN), names[0]) for names in cases}


def _params(fast: bool):
    for backend in BACKENDS:
        firsts = _first_of_each_class(backend.key)
        for case in CASES:
            known = KNOWN.get((backend.key, case.name))
            chosen = backend.key in EVERY_CASE_FAST or case.name in firsts
            if chosen != fast:
                continue
            marks = [pytest.mark.xfail(reason=known, strict=True)] if known else []
            yield pytest.param(backend, case, id=f"{backend.key}-{case.name}", marks=marks)


def test_every_measurement_class_pennylane_exports_has_a_case():
    """Generated from PennyLane's own list: a measurement process added upstream fails here until it has a case."""
    measured = set().union(*(case.classes() for case in CASES))
    assert {c.__name__ for c in MEASUREMENT_CLASSES} - measured == set()
    assert {"ExpectationMP", "DensityMatrixMP", "ShadowExpvalMP", "NullMeasurement"} <= {c.__name__ for c in MEASUREMENT_CLASSES}


def test_every_backend_runs_a_case_of_every_class_in_the_fast_set():
    fast = {(b.key, c.name) for b, c in (p.values for p in _params(fast=True))}
    for backend in BACKENDS:
        for cls in MEASUREMENT_CLASSES:
            assert any(k == backend.key and cls.__name__ in next(c for c in CASES if c.name == n).classes() for k, n in fast)


@pytest.mark.parametrize("backend, case", list(_params(fast=True)))
def test_measurement_is_computed_right_or_refused_typed(backend, case: Case):
    result = outcome(backend, case)  # raises Mismatch on a wrong number or an untyped refusal
    assert result == "computed" or result.startswith("refused: "), result


@pytest.mark.slow
@pytest.mark.parametrize("backend, case", list(_params(fast=False)))
def test_measurement_is_computed_right_or_refused_typed_everywhere(backend, case: Case):
    result = outcome(backend, case)
    assert result == "computed" or result.startswith("refused: "), result


# ---- the issue's table, pinned against the state vector -------------------------------------------------


def _state(x):
    """The issue's circuit's final state, from its matrices (wire 0 the highest bit)."""
    ops = [qml.RY(x[0], 0), qml.CNOT([0, 1]), qml.RX(x[1], 1), qml.CRZ(x[2], [1, 2]), qml.Hadamard(2)]
    psi = np.zeros(2**WIRES, dtype=complex)
    psi[0] = 1
    for op in ops:
        psi = qml.matrix(op, wire_order=range(WIRES)) @ psi
    return psi


def _reduced(psi, keep):
    t = psi.reshape((2,) * WIRES)
    rest = [w for w in range(WIRES) if w not in keep]
    m = np.transpose(t, [*keep, *rest]).reshape(2 ** len(keep), -1)
    return m @ m.conj().T


@pytest.mark.parametrize("backend", ["local:qbackends/fused.qubit", "local:qbackends/batched.qubit", "auto"])
def test_the_issue_table_density_matrices_and_variance_of_a_sum(backend):
    psi = _state(X)

    def run(measure):
        return qml.QNode(lambda x: (Case("", lambda m: None).apply(x), measure())[1], get_device(backend, wires=WIRES))(X)

    for wires in ([0], [2, 0], [0, 1, 2]):
        np.testing.assert_allclose(run(lambda w=wires: qml.density_matrix(wires=w)), _reduced(psi, wires), atol=1e-12)
    z0, rho1 = run(lambda: (qml.expval(qml.Z(0)), qml.density_matrix(wires=[1])))
    assert abs(z0 - np.vdot(psi, qml.matrix(qml.Z(0), wire_order=range(WIRES)) @ psi).real) < 1e-12
    np.testing.assert_allclose(rho1, _reduced(psi, [1]), atol=1e-12)
    h = 0.5 * qml.X(0) + 0.3 * qml.Z(1) @ qml.Y(2)
    hm = qml.matrix(h, wire_order=range(WIRES))
    variance = np.vdot(psi, hm @ hm @ psi).real - np.vdot(psi, hm @ psi).real ** 2
    assert abs(run(lambda: qml.var(h)) - variance) < 1e-12
