"""The auto device (and qbackends' own simulators) under every ``get_device`` option and every differentiation
method, on the measurement cases.

As a workload runs it: ``gradients.check`` first (the run's one question about its method), then the Jacobian. The
property: a typed refusal at either step, or the Jacobian default.qubit gives by "best" (backprop where it has it,
else adjoint, as for a SparseHamiltonian; exact methods to 1e-6, finite differences to 1e-5); what the check let
through never ends in an untyped error but PennyLane's own refusal (the one default.qubit gives); and nothing
default.qubit, one of auto's candidates, computes right is refused.
"""

from __future__ import annotations

import warnings

import numpy as np
import pennylane as qml
from hypothesis import event, given
from hypothesis import strategies as st
from measurementcases import CASES

from qbackends import get_device, gradients
from qbackends.capabilities import DIFF_METHODS
from qbackends.errors import QBackendsError

from . import budget
from .test_fuzz_devices import VALID, typed

AUTO_OPTIONS = ("diff_method", "precision", "decompositions", "default_decompositions", "seed", "exclude", "shots")
NARROWING = {"diff_method", "precision", "exclude"}  # options that can leave default.qubit out of auto's candidates
TOLERANCE = {"finite-diff": 1e-5, "spsa": None}  # spsa's Jacobian is a random estimate; the rest are exact (1e-6)
OWN = ("local:qbackends/fused.qubit", "local:qbackends/batched.qubit")  # qbackends' own simulators, as auto's backends
ANALYTIC = [c for c in CASES if c.shots is None and c.body is None and c.name != "null"]  # (null: NaN by design)


def _spell(name: str, value: str) -> str:
    return f"pass {name}={value!r}"


def _flat(result):
    """The real parts of every measurement's result, as one vector."""
    leaves = result if isinstance(result, (tuple, list)) else (result,)
    return qml.math.concatenate([qml.math.ravel(qml.math.real(leaf)) for leaf in leaves])


def _jacobian(qnode, x):
    return qml.jacobian(lambda v: _flat(qnode(v)))(x)


def _on_default_qubit(case, method, x, shots=None, wires=None):
    """default.qubit's Jacobian of ``case`` by ``method`` (on ``wires``, else the case's), or the exception it raises."""
    try:
        device = qml.device("default.qubit", wires=wires or case.wires, seed=7)
        return _jacobian(qml.QNode(case.apply, device, diff_method=method, shots=shots), x)
    except Exception as exc:  # noqa: BLE001 - PennyLane's own refusal
        return exc


def _computes_right(case, method, x, shots, wires) -> bool:
    """Whether default.qubit computes ``case``'s Jacobian by ``method`` right. Sampled, an estimate is only as right
    as its rule: the rule is checked without shots, a wire to spare for a Hadamard test's auxiliary (PennyLane 0.45's
    standard one gets a mid-circuit measurement's expectation wrong, sampled or not)."""
    theirs = _on_default_qubit(case, method, x, shots, wires)
    if isinstance(theirs, Exception):
        return False
    if shots:
        exact = _on_default_qubit(case, method, x, None, wires + 1)
        return not isinstance(exact, Exception) and _right(exact, case, method, x, wires=wires + 1)
    return _right(theirs, case, method, x, wires=wires)


def _right(jacobian, case, method, x, precision="c128", shots=None, wires=None) -> bool:
    tol = None if shots else TOLERANCE.get(method, 1e-6)  # (sampled: any finite estimate)
    if precision == "c64" and not shots:  # single precision: exact methods to 1e-4, finite differences (h=1e-7) not at all
        tol = None if method in TOLERANCE else 1e-4
    return tol is None or np.allclose(
        jacobian, _on_default_qubit(case, "best", x, wires=wires), atol=tol
    )  # backprop where it has it


@budget(40)
@given(st.data())
def test_auto_differentiates_by_every_method_it_lets_through(data):
    spec = data.draw(st.sampled_from(["auto", *OWN]), "device")
    case = data.draw(st.sampled_from(ANALYTIC), "case")
    method = data.draw(st.sampled_from(DIFF_METHODS), "method")
    chosen = data.draw(st.sets(st.sampled_from(AUTO_OPTIONS), max_size=3), "options")
    options = {name: data.draw(VALID[name], name) for name in sorted(chosen)}
    if "RX" in str(list(options.get("decompositions") or ())):
        options.pop("decompositions")  # a rule for RX changes what the circuit is (test_fuzz_devices runs those)
    x = qml.numpy.array(case.x, requires_grad=True)
    wires = case.wires + data.draw(st.integers(0, 1), "spare wires")  # a spare one: room for a Hadamard test's auxiliary
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PennyLane's deprecation of an automatic auxiliary wire
        try:
            dev = get_device(spec, wires=wires, **options)
            tape = qml.workflow.construct_tape(qml.QNode(case.apply, dev))(x)
            gradients.check(dev, tape, method, "autograd", _spell)  # as a workload asks, before its QNode is built
            jacobian = _jacobian(qml.QNode(case.apply, dev, diff_method=method), x)
        except QBackendsError as exc:
            typed(exc)
            wrong = (
                spec == "auto" and not NARROWING & set(options) and _computes_right(case, method, x, options.get("shots"), wires)
            )
            assert not wrong, f"auto refused what default.qubit computes right ({case.name}, {method}): {exc}"
            return
        except Exception as exc:  # after the check, only PennyLane's own refusal of the method, as default.qubit's
            if type(_on_default_qubit(case, method, x, options.get("shots"), wires)) is not type(exc):
                raise
            event(f"refused by PennyLane: {type(exc).__name__}")
            return
    ran = dev.last_choice if spec == "auto" else spec
    event(f"{method} ran on {ran}")
    assert np.isfinite(jacobian).all(), (case.name, method, ran)
    assert _right(jacobian, case, method, x, options.get("precision", "c128"), options.get("shots"), wires), (
        case.name,
        method,
        ran,
    )
