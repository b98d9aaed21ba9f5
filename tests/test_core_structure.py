"""The core reads one way: request -> screening -> costs -> decision -> factory -> device (issue 43).

The core modules are ``benchmarks/core_stops.py``'s ``CORE`` (``qbackends/__init__.py``, the package's namespace,
is not one: it loads ``get_device`` on first use). Checked here with ``ast`` and on real devices:
- no import cycle among them, at module level nor with the imports inside functions counted;
- no function-level import of a sibling core module, but the built-in plugin's ``register_decompositions`` hook
  (the hook contract: PennyLane is imported inside it, so that loading plugins stays light);
- ``get_device`` by name parses the device string once and makes at most half the stops it made before the
  refactor (14: ``benchmarks/core_stops.py``); ``get_device("auto")``'s first circuit builds each candidate with
  the factory, never through ``get_device``;
- backend names stand in code only where backends are declared (``builtin.py``) and where a workload decides
  its own device (``workloaddevices.py``: the MPI run's device); elsewhere a fact about a backend is a field of
  its ``Backend``. Prose (docstrings, messages that name an example) is not code.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pennylane as qml
import pytest

import qbackends
from qbackends import devicestring, factory, get_device, get_registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(qbackends.__file__).parent
STOPS_BEFORE = 14  # get_device by name before the refactor (main at 7d0b1c2): benchmarks/core_stops.py
NAMES_ALLOWED_IN = {"builtin", "workloaddevices"}
LAZY_HOOKS = {("builtin", "register_decompositions")}


def _core_stops():
    spec = importlib.util.spec_from_file_location("core_stops", ROOT / "benchmarks" / "core_stops.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("core_stops", module)
    spec.loader.exec_module(module)
    return module


core_stops = _core_stops()


def test_the_core_modules_import_one_way():
    graph = core_stops.import_graph(PACKAGE)
    assert {"device", "auto", "autodevice", "request", "screening", "factory", "context"} <= set(graph)
    assert core_stops.cycles(graph) == []
    assert core_stops.cycles(core_stops.import_graph(PACKAGE, functions=True)) == []


def test_no_function_imports_a_sibling_core_module():
    files = core_stops.core_files(PACKAGE)
    found = []
    for name, path in files.items():
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or (name, func.name) in LAZY_HOOKS:
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom) and node.level:
                    found.append(f"{name}.py:{node.lineno}: {ast.unparse(node)}")
                elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(m in files for m in core_stops._imported(node, name)):
                    found.append(f"{name}.py:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_get_device_by_name_parses_once_in_half_the_stops(monkeypatch):
    spec = "local:pennylane/lightning.qubit"
    get_device(spec, wires=4)  # the registry built, the machine probed: the path, not the loading
    parses = []
    parse = devicestring.parse
    monkeypatch.setattr(devicestring, "parse", lambda text: parses.append(text) or parse(text))
    device = get_device(spec, wires=4)
    assert device.name == "lightning.qubit" and parses == [spec]
    stops, _ = core_stops.by_name_stops()
    assert len(stops) <= STOPS_BEFORE // 2, stops


def test_auto_builds_its_candidates_with_the_factory_not_get_device():
    device = get_device("auto", wires=2)
    calls = {"get_device": 0, "build": 0}
    codes = {get_device.__code__: "get_device", factory.build.__code__: "build"}

    def count(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            calls[codes[frame.f_code]] += 1

    def body(x):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        qml.CNOT([0, 1])
        qml.IsingZZ(x[0], [0, 1])
        return qml.expval(qml.Z(0) @ qml.Z(1) + 0.5 * qml.X(1))

    circuit = qml.QNode(body, device, diff_method="adjoint")
    reference = qml.QNode(body, qml.device("default.qubit", wires=2), diff_method="backprop")
    x = qml.numpy.array([0.3, 0.7], requires_grad=True)
    sys.setprofile(count)
    try:
        value, gradient = circuit(x), qml.grad(circuit)(x)
    finally:
        sys.setprofile(None)
    built = len(device._devices) + len(device._trial_devices)
    assert calls == {"get_device": 0, "build": built} and built >= 1
    assert np.allclose(value, reference(x)) and np.allclose(gradient, qml.grad(reference)(x))


def _literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


@pytest.mark.parametrize("module", sorted(set(core_stops.core_files(PACKAGE)) - NAMES_ALLOWED_IN))
def test_backend_names_stand_only_in_the_declarations_and_the_decisions(module):
    names = set()
    for backend in get_registry().backends.values():
        names |= {backend.simulator, backend.device_name, backend.key, backend.device_string, backend.braket_string}
    found = [(line, text) for line, text in _literals(PACKAGE / f"{module}.py") if text in names]
    assert found == [], f"{module}.py names backends in code; declare the fact on Backend instead"
