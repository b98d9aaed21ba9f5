"""Conformance checks for a plugin's backend: ``check_backend("local:<provider>/<simulator>")``.

A plugin's test suite needs nothing else::

    from qbackends.testing import check_backend

    def test_conformance():
        check_backend("local:myprovider/my.simulator")

``check_backend`` resolves the device string through the installed entry points and checks, each
on its own: the plugin loaded whole, ``probe`` says the backend runs here, unknown options are
refused, values and gradients agree with default.qubit on a QAOA circuit, the QNN's quantum layer
(with torch installed) and a circuit around every declared gate, and every rule registered for the
backend lowers its example and keeps value and gradient exact. It raises ``ConformanceError`` (an
``AssertionError``) listing every check, each failure with what to fix. A backend declared
``needs_shots`` runs with shots and is compared within five standard errors. ``memory_wires=n``
also measures the peak memory of an adjoint gradient at n wires (``measure_state_copies``) against
the backend's ``state_copies``. The pytest plugin adds the ``qbackends_registry`` fixture (a freshly
built registry per test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

UNKNOWN_OPTION = "qbackends_check_unknown_option"
DEFAULT_SHOTS = 20_000
SAMPLING_SIGMAS = 5.0


class ConformanceError(AssertionError):
    """A backend failed a conformance check; the message is the whole report."""


class _Failed(Exception):
    """A check's own failure: its message says what is wrong and what to fix."""


@dataclass(frozen=True)
class Result:
    check: str
    status: str  # "ok", "FAIL" or "skip"
    detail: str


@dataclass
class Report:
    """Every check of one backend, in order."""

    device_string: str
    results: list[Result] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.status != "FAIL" for r in self.results)

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if r.status == "FAIL"]

    def run(self, check: str, fn: Callable[[], str | None]) -> bool:
        """Run one check: its detail on success, ``skip`` when it returns None, the error otherwise."""
        from .errors import QBackendsError

        try:
            detail = fn()
        except _Failed as exc:
            self.results.append(Result(check, "FAIL", str(exc)))
            return False
        except QBackendsError as exc:
            self.results.append(Result(check, "FAIL", exc.one_line()))
            return False
        except Exception as exc:  # the plugin's own error: reported, the other checks go on
            self.results.append(Result(check, "FAIL", f"{type(exc).__name__}: {' '.join(str(exc).split())}"))
            return False
        self.results.append(Result(check, "ok" if detail is not None else "skip", detail or "not applicable"))
        return True

    def __str__(self) -> str:
        head = f"{self.device_string}: {len(self.results)} checks, {len(self.failures)} failed"
        return "\n".join([head, *(f"  {r.status:<4}  {r.check}: {r.detail}" for r in self.results)])


def check_backend(
    device_string: str,
    *,
    wires: int = 4,
    shots: int | None = None,
    tolerance: float = 1e-8,
    memory_wires: int | None = None,
    raise_on_failure: bool = True,
) -> Report:
    """Check an installed plugin's backend against default.qubit; see the module docstring.

    Args:
        device_string: ``local:<provider>/<simulator>``.
        wires: the size of the compared circuits (at least 3).
        shots: sample with this many shots (default: analytic, or 20,000 for ``needs_shots``).
        tolerance: for values and gradients of analytic runs.
        memory_wires: also measure the peak memory of an adjoint gradient at this size.
        raise_on_failure: raise ``ConformanceError`` when a check fails (else return the report).
    """
    from . import capabilities
    from .devicestring import parse
    from .registry import get_registry
    from .screening import facts_for

    report = Report(device_string)
    registry = get_registry()
    found: dict[str, Any] = {}

    def registered() -> str:
        backend = found["backend"] = registry.lookup(parse(device_string))
        plugin = registry.owners[backend.key]
        registry.rules()  # rules are collected and checked on first use: their failures count here
        failed = [f for f in registry.failures if f.plugin == plugin]
        if failed:
            raise _Failed(
                f"plugin {plugin!r} is partly loaded: "
                + "; ".join(f.error for f in failed)
                + ". Fix: see `qbackends plugins -v` for the traceback."
            )
        return f"plugin {plugin!r} ({registry.plugins[plugin]}) loaded whole"

    if not report.run("registered", registered):
        return _finish(report, raise_on_failure)
    backend = found["backend"]
    facts = facts_for(registry)

    def runs_here() -> str:
        caps = capabilities.evaluate(backend, facts)
        if not caps.ok:
            raise _Failed(f"`qbackends probe` says it cannot run here: {caps.reason}. Fix: {caps.fix}")
        return f"{caps.hardware}; max qubits {caps.max_wires if caps.max_wires is not None else '-'}"

    if not report.run("runs here", runs_here):
        return _finish(report, raise_on_failure)
    if backend.needs_shots and shots is None:
        shots = DEFAULT_SHOTS
    options: dict[str, Any] = {"shots": shots} if shots else {}
    check = _Checker(device_string, backend, max(wires, 3), options, tolerance, shots)

    def refuses_unknown_options() -> str:
        from .device import get_device
        from .errors import UnsupportedOptionError

        try:
            get_device(device_string, wires=1, **{**options, UNKNOWN_OPTION: 1})
        except UnsupportedOptionError as exc:
            if UNKNOWN_OPTION not in str(exc):
                raise _Failed(f"refused, but without naming the option: {exc.one_line()}") from exc
            return "an unknown option is refused by name"
        raise _Failed(
            f"get_device accepted {UNKNOWN_OPTION}=1 and passed it on. Fix: a device (or create) taking **kwargs "
            "must declare Backend(options=(...)) with the options it accepts."
        )

    if not report.run("builds", check.builds):
        return _finish(report, raise_on_failure)
    report.run("refuses unknown options", refuses_unknown_options)
    report.run("declares operations", check.declared)
    report.run("QAOA value and gradient", check.qaoa)
    report.run("QNN layer value and input gradient", check.qnn_layer)
    for name in check.gates:
        report.run(f"gate {name}", partial(check.gate, name))
    for rule in registry.rules():
        if rule.applies_to(backend.key):
            report.run(f"rule {rule.operator}: {rule.name}", partial(check.rule, rule))
    if memory_wires is not None:
        method = check._diff_method(check.device())
        report.run(f"memory guard at {memory_wires} wires", partial(_memory, device_string, backend, memory_wires, method))
    return _finish(report, raise_on_failure)


def _finish(report: Report, raise_on_failure: bool) -> Report:
    if raise_on_failure and not report.ok:
        raise ConformanceError(str(report))
    return report


class _Checker:
    """The circuits ``check_backend`` compares with default.qubit."""

    def __init__(self, device_string: str, backend: Any, wires: int, options: dict, tolerance: float, shots: int | None):
        self.device_string, self.backend, self.wires, self.options = device_string, backend, wires, options
        self.tolerance, self.shots = tolerance, shots
        self.gates: list[str] = []
        self.adjoint_gates: set[str] = set()
        self.rng = np.random.default_rng(1967)

    def device(self, wires: int | None = None) -> Any:
        from .device import get_device

        return get_device(self.device_string, wires=wires or self.wires, **self.options)

    def builds(self) -> str:
        device = self.device()
        return f"{type(device).__name__} ({device.name})"

    def declared(self) -> str | None:
        """Reads the declared operations (the TOML, else the device's code) for the gate checks."""
        from . import capabilities

        ops = capabilities.declared_operations(self.backend)
        if not ops.native:
            ops = capabilities.declared_by_device(self.device(1))
        if not ops.native:
            return None  # it decomposes in code: no gate list to check (a capabilities TOML would give one)
        self.gates = sorted(ops.native)
        self.adjoint_gates = set(ops.adjoint_differentiable)
        return f"{len(ops.native)} ({ops.source})"

    def _diff_method(self, device: Any) -> str:
        import pennylane as qml

        adjoint = qml.devices.ExecutionConfig(gradient_method="adjoint")
        return "adjoint" if not self.shots and device.supports_derivatives(adjoint) else "parameter-shift"

    def _limits(self, norm: float) -> tuple[float, float]:
        """Value and gradient tolerances: exact, or five standard errors of ``shots`` samples."""
        if not self.shots:
            return self.tolerance, self.tolerance
        sigma = norm / np.sqrt(self.shots)
        return SAMPLING_SIGMAS * sigma, SAMPLING_SIGMAS * sigma * np.sqrt(2)

    def compare(
        self, body: Callable[[Any], Any], observable: Any, nparams: int, nwires: int | None = None, diff_method: str = ""
    ) -> str:
        """``body(x)`` then expval(observable), value and gradient, here and on default.qubit."""
        import pennylane as qml

        nwires = nwires or self.wires
        device = self.device(nwires)

        def circuit(x: Any) -> Any:
            body(x)
            return qml.expval(observable)

        ours = qml.QNode(circuit, device, diff_method=diff_method or self._diff_method(device))
        # default.qubit's adjoint gradient: exact, and without the ComplexWarning that autograd's
        # backpropagation through PhaseShift and GlobalPhase raises
        reference = qml.QNode(circuit, qml.device("default.qubit", wires=nwires), diff_method="adjoint")
        x = qml.numpy.array(self.rng.uniform(-np.pi, np.pi, nparams), requires_grad=True)
        value_tol, grad_tol = self._limits(float(sum(abs(c) for c in observable.terms()[0])))
        value, expected = float(ours(x)), float(reference(x))
        if abs(value - expected) > value_tol:
            raise _Failed(f"value {value:.12g}, default.qubit {expected:.12g} (tolerance {value_tol:.1e})")
        grad, grad_expected = np.asarray(qml.grad(ours)(x)), np.asarray(qml.grad(reference)(x))
        worst = float(np.max(np.abs(grad - grad_expected))) if nparams else 0.0
        if worst > grad_tol:
            raise _Failed(f"gradient off by {worst:.3g} (tolerance {grad_tol:.1e}; {ours.diff_method})")
        return f"value and {ours.diff_method} gradient within {max(abs(value - expected), worst):.1e}"

    def qaoa(self) -> str:
        import pennylane as qml

        edges = [(i, (i + 1) % self.wires) for i in range(self.wires)]
        cost = qml.Hamiltonian([0.5] * len(edges), [qml.Z(a) @ qml.Z(b) for a, b in edges])
        mixer = qml.Hamiltonian([1.0] * self.wires, [qml.X(w) for w in range(self.wires)])

        def body(x: Any) -> None:
            for w in range(self.wires):
                qml.Hadamard(w)
            for layer in range(2):
                qml.qaoa.cost_layer(x[2 * layer], cost)
                qml.qaoa.mixer_layer(x[2 * layer + 1], mixer)

        return self.compare(body, cost, 4)

    def qnn_layer(self) -> str | None:
        try:
            import torch
        except ImportError:
            return None  # the QNN needs torch: pip install torch
        import pennylane as qml

        from .workloads.qnn import quantum_layer

        diff = "parameter-shift" if self.shots else self._diff_method(self.device())
        torch.manual_seed(0)
        ours = quantum_layer(self.wires, self.device(), diff).double()
        reference = quantum_layer(self.wires, qml.device("default.qubit", wires=self.wires), "backprop").double()
        reference.load_state_dict(ours.state_dict())
        for weight in (*ours.parameters(), *reference.parameters()):
            weight.requires_grad_(False)  # only the inputs' gradients are compared: no shifts of the weights
        inputs = torch.rand(4, self.wires, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 3
        outputs = []
        for layer in (ours, reference):
            x = inputs.clone().requires_grad_(True)
            y = layer(x)
            y.sum().backward()
            assert x.grad is not None
            outputs.append((y.detach().numpy(), x.grad.numpy()))
        (y1, g1), (y2, g2) = outputs
        value_tol, grad_tol = self._limits(1.0)
        if np.max(np.abs(y1 - y2)) > value_tol or np.max(np.abs(g1 - g2)) > grad_tol * np.sqrt(inputs.shape[0]):
            raise _Failed(
                f"batch of 4: values off by {np.max(np.abs(y1 - y2)):.3g}, input gradients by {np.max(np.abs(g1 - g2)):.3g}"
            )
        return f"batch of 4 within {max(np.max(np.abs(y1 - y2)), np.max(np.abs(g1 - g2))):.1e}"

    def gate(self, name: str) -> str | None:
        import pennylane as qml

        build = _gate_builder(name)
        if build is None:
            return None  # the kit cannot guess this operator's arguments
        nwires = max(self.wires, build.nwires)
        observable = _observable()

        def body(x: Any) -> None:
            for w in range(nwires):
                qml.RY(x[w], wires=w)
            qml.CNOT([0, 1])
            build.apply(x[nwires:], [1, 2, 0, 3][: build.nwires] if build.nwires <= 4 else list(range(build.nwires)))
            qml.CNOT([2, 0])

        # a gate the device declares but cannot differentiate by adjoint: its gradient by parameter-shift
        declared_differentiable = not self.adjoint_gates or name in self.adjoint_gates
        return self.compare(
            body, observable, nwires + build.nparams, nwires, "" if declared_differentiable else "parameter-shift"
        )

    def rule(self, rule: Any) -> str:
        import pennylane as qml

        if rule.example is None:
            raise _Failed("the rule has no example. Fix: RuleRegistration(..., example=lambda theta, wires: Operator(...)).")
        observable = _observable()

        def body(x: Any) -> None:
            for w in range(3):
                qml.RY(x[w], wires=w)
            qml.CNOT([0, 1])
            rule.example(x[3], [1, 2, 0])
            qml.CNOT([2, 0])
            rule.example(x[4], [0, 1, 2])

        detail = self.compare(body, observable, 5, max(3, self.wires))
        device = self.device(max(3, self.wires))

        def circuit(x: Any) -> Any:
            body(x)
            return qml.expval(observable)

        qnode = qml.QNode(circuit, device, diff_method=self._diff_method(device))
        tape = qml.workflow.construct_batch(qnode, level="device")(qml.numpy.array(np.full(5, 0.3)))[0][0]
        if rule.operator in {op.name for op in tape.operations}:
            raise _Failed(f"{rule.operator} still reaches the device: the rule was not applied")
        return f"lowered; {detail}"


def _observable() -> Any:
    """What the gate and rule circuits measure: X, Y and Z on the first three wires."""
    import pennylane as qml

    return qml.Hamiltonian([1.0, 0.5, 0.3], [qml.Z(0) @ qml.X(1), qml.Y(2), qml.Z(1)])


@dataclass(frozen=True)
class _GateBuilder:
    nparams: int
    nwires: int
    apply: Callable[[Any, list[int]], Any]


def _gate_builder(name: str) -> _GateBuilder | None:
    """How to put a declared gate in a circuit with trainable angles, for the gates whose arguments
    are angles (and a few that need more); None for the others."""
    import pennylane as qml

    cls = getattr(qml, name, None)
    if name == "PauliRot":
        return _GateBuilder(1, 3, lambda x, w: qml.PauliRot(x[0], "XYZ", wires=w[:3]))
    if name == "MultiRZ":
        return _GateBuilder(1, 3, lambda x, w: qml.MultiRZ(x[0], wires=w[:3]))
    if name == "GlobalPhase":
        return _GateBuilder(1, 1, lambda x, w: qml.GlobalPhase(x[0], wires=w[:1]))
    if cls is None or not isinstance(cls.num_params, int) or not isinstance(cls.num_wires, int) or cls.num_wires < 1:
        return None
    if name in ("QubitUnitary", "PCPhase", "DiagonalQubitUnitary", "BlockEncode"):
        return None
    nparams, nwires = cls.num_params, cls.num_wires
    return _GateBuilder(nparams, nwires, lambda x, w: cls(*x[:nparams], wires=w[:nwires]))


# ---- memory -----------------------------------------------------------------------------------

_MEASURE = """
import json, sys
import numpy as np, pennylane as qml
from qbackends import get_device
spec, wires, diff_method = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))
def step(n):
    dev = get_device(spec, wires=n, diff_method=diff_method, ignore_memory=True)
    h = qml.Hamiltonian([0.5] * n, [qml.Z(i) @ qml.Z((i + 1) % n) for i in range(n)])
    @qml.qnode(dev, diff_method=diff_method)
    def c(x):
        for w in range(n):
            qml.Hadamard(w)
        qml.qaoa.cost_layer(x[0], h)
        qml.qaoa.mixer_layer(x[1], qml.Hamiltonian([1.0] * n, [qml.X(w) for w in range(n)]))
        return qml.expval(h)
    qml.grad(c)(qml.numpy.array([0.3, 0.2], requires_grad=True))
step(4)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak resident size starts again from now
base = status("VmRSS")
step(wires)
print(json.dumps({"peak_bytes": max(status("VmHWM") - base, 0)}))
"""


def measure_state_copies(device_string: str, wires: int = 20, diff_method: str = "adjoint") -> float:
    """Peak memory of one value + gradient at ``wires``, in state vectors (complex128, 2^wires): the
    figure to declare as ``Backend.state_copies``. Measured in a fresh process (Linux) as the growth
    of its peak resident memory over the step (the kernel's high-water mark, reset before it); take
    18 wires or more, so that the state dominates."""
    # a fixed mmap threshold: every state-sized block is fresh memory (glibc would otherwise reuse freed heap)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, device_string, str(wires), diff_method],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if out.returncode != 0:
        raise _Failed(f"the measuring process failed: {' '.join(out.stderr.split()[-40:])}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["peak_bytes"]) / (16 * 2**wires)


def _memory(device_string: str, backend: Any, wires: int, diff_method: str) -> str | None:
    if backend.state_copies is None:
        return None
    measured = measure_state_copies(device_string, wires, diff_method)
    declared = backend.state_copies + backend.table_bytes / 16  # in complex128 states, as measured
    if measured > declared * 1.1:
        tables = f" and table_bytes={backend.table_bytes}" if backend.table_bytes else ""
        raise _Failed(
            f"an {diff_method} gradient at {wires} wires peaked at {measured:.1f} state vectors; the backend declares "
            f"state_copies={backend.state_copies}{tables}, so the memory guard lets too large a request through. "
            f"Fix: declare state_copies={np.ceil((measured - backend.table_bytes / 16) * 10) / 10:g}."
        )
    tables = (
        f" and {backend.table_bytes} byte{'s' if backend.table_bytes != 1 else ''} an amplitude of tables"
        if backend.table_bytes
        else ""
    )
    return f"peak {measured:.1f} state vectors, declared {backend.state_copies}{tables}"
