"""Run a measurement case (``measurementcases``) on a backend and on default.qubit, and say what happened.

``outcome`` returns "computed" (and the result agreed with default.qubit's) or "refused: <Error>" (a typed
refusal), and raises ``Mismatch`` for a wrong number, a refusal that is not typed, or a refusal by ``auto``
(default.qubit is one of its candidates, so what the reference computes, auto computes).
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

import numpy as np
import pennylane as qml
from measurementcases import GRAD_TOL, Case, Mismatch, as_tuple, companions, judge_exact, judge_sampled

from qbackends import QBackendsError, capabilities, errors, get_device, get_registry
from qbackends.device import accepts_option, facts_for

SEED = 1967
OWN = ("qbackends/fused.qubit", "qbackends/batched.qubit", "auto")  # whose refusals must be qbackends' typed errors


def runnable_backends() -> list[Any]:
    """Every backend ``get_device`` runs here (not the test fixtures), and ``auto``."""
    registry = get_registry()
    facts = facts_for(registry)
    found = [
        b
        for b in registry.backends.values()
        if b.provider != "fixture" and not b.needs_shots and capabilities.evaluate(b, facts).ok
    ]
    return [*found, SimpleNamespace(key="auto", device_string="auto")]


BACKENDS = runnable_backends()
_QBACKENDS_ERRORS = [name for name, obj in vars(errors).items() if isinstance(obj, type) and issubclass(obj, QBackendsError)]


def typed(exc: BaseException, key: str) -> bool:
    """A refusal the user can act on: qbackends' typed errors; for another library's device, PennyLane's too. Under
    jax.jit a device runs in a callback, and jax re-raises what it raised as its own ``JaxRuntimeError``, with the
    original error's type and message in its text."""
    if isinstance(exc, QBackendsError):
        return True
    if type(exc).__name__ == "JaxRuntimeError" and any(f"{name}: " in str(exc) for name in _QBACKENDS_ERRORS):
        return True
    return key not in OWN and type(exc).__module__ == "pennylane.exceptions"


def device(backend: Any, case: Case) -> Any:
    seeded = backend.key == "auto" or accepts_option(backend, "seed")
    return get_device(backend.device_string, wires=case.wires, **({"seed": SEED} if seeded else {}))


def _qnode(case: Case, dev: Any, diff_method: Any = "best") -> Any:
    return qml.QNode(case.apply, dev, diff_method=diff_method, shots=case.shots)


@functools.cache
def reference(case: Case) -> tuple[Any, BaseException | None]:
    """default.qubit's result (or its error) for the case."""
    try:
        return _qnode(case, qml.device("default.qubit", wires=case.wires, seed=SEED), None)(case.x), None
    except Exception as exc:  # noqa: BLE001 - the reference refuses it: every backend must refuse too
        return None, exc


@functools.cache
def reference_jacobian(case: Case) -> Any:
    qnode = _qnode(case, qml.device("default.qubit", wires=case.wires), "best")  # backprop where it has it
    return qml.jacobian(qnode)(qml.numpy.array(case.x, requires_grad=True))


@functools.cache
def exact(case: Case) -> list[list[Any]]:
    """Per measurement of a sampled case, the analytic values of its ``companions`` on default.qubit."""
    out = []
    for at, m in enumerate(case.measurements()):
        if not companions(m):
            out.append([])
            continue

        def circuit(x: Any, at: int = at) -> Any:
            ms = as_tuple(case.apply(x))
            for other in ms:  # measured instead: the companions of the one at ``at`` (its mid-circuit value too)
                qml.queuing.QueuingManager.remove(other)
            return companions(ms[at])

        values = qml.QNode(circuit, qml.device("default.qubit", wires=case.wires))(case.x)
        out.append(list(values) if isinstance(values, (tuple, list)) else [values])
    return out


def outcome(backend: Any, case: Case) -> str:
    """Run ``case`` on ``backend``: "computed" when it agrees with default.qubit, "refused: <Error>" when refused typed."""
    expected, refused_there = reference(case)
    try:
        got = _qnode(case, device(backend, case))(case.x)
    except Exception as exc:  # noqa: BLE001 - judged below
        return _refused(backend, case, exc, refused_there is None)
    if refused_there is not None:
        raise Mismatch(f"a number where default.qubit refuses ({type(refused_there).__name__}: {refused_there}): {got!r:.200}")
    if case.shots is None:
        judge_exact(got, expected)
    else:
        _judge_sampled(case, got, expected)
    if case.grad:
        try:
            jac = qml.jacobian(_qnode(case, device(backend, case)))(qml.numpy.array(case.x, requires_grad=True))
        except Exception as exc:  # noqa: BLE001 - judged below
            return _refused(backend, case, exc, True, "gradient")
        judge_exact(jac, reference_jacobian(case), GRAD_TOL, "gradient")
    return "computed"


def _refused(backend: Any, case: Case, exc: BaseException, computed_there: bool, what: str = "value") -> str:
    if not typed(exc, backend.key):
        raise Mismatch(f"untyped refusal of the {what}: {type(exc).__module__}.{type(exc).__name__}: {exc}") from exc
    if backend.key == "auto" and computed_there:
        raise Mismatch(f"auto refused the {what} default.qubit computes: {exc}") from exc
    return f"refused: {type(exc).__name__}" + (" (gradient)" if what == "gradient" else "")


def _judge_sampled(case: Case, got: Any, expected: Any) -> None:
    ms = case.measurements()
    shots = list(case.shots) if isinstance(case.shots, tuple) else [case.shots]
    per_shots = list(got) if len(shots) > 1 else [got]
    refs = list(expected) if len(shots) > 1 else [expected]
    if len(per_shots) != len(shots):
        raise Mismatch(f"{len(per_shots)} results for the shot vector {case.shots}")
    for s, result, ref in zip(shots, per_shots, refs, strict=True):
        results = as_tuple(result) if len(ms) > 1 else (result,)
        ref_results = as_tuple(ref) if len(ms) > 1 else (ref,)
        ref_results = (*ref_results, *[None] * (len(ms) - len(ref_results)))  # default.qubit's own may be short
        if len(results) != len(ms):
            raise Mismatch(f"{len(results)} results for {len(ms)} measurements: {result!r:.300}")
        for m, r, rr, ex in zip(ms, results, ref_results, exact(case), strict=True):
            rows = range(len(case.x)) if case.broadcast else [None]
            for row in rows:
                pick = (lambda v, row=row: v if row is None else v[row]) if not isinstance(r, dict) else (lambda v: v)
                judge_sampled(m, pick(r), [pick(np.asarray(e)) for e in ex], s, rr if row is None else rr[row])
