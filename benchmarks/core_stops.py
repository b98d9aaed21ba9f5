"""How far ``get_device`` by name travels: its stops, the device string's parses, and the core's shape.

    python benchmarks/core_stops.py          # figures for this checkout (PYTHONPATH picks the tree)

A *stop* is one call of a qbackends function (lambdas, comprehensions and generator bodies aside) made
directly by the facade (``get_device``): a qbackends frame at depth 1 below it; *steps* count depth 1 and 2
(the functions those call too). Both are counted on a second call (the registry built, the machine probed: the path, not the
one-time loading). *Parses* are calls of ``devicestring.parse`` in that call. The core modules are
``CORE``; a function-level import is an ``import`` statement inside a function of one of them, counted as
``sibling`` when it names another core module (an import to dodge a cycle) and ``other`` otherwise (a lazy
third-party import).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path
from typing import Any

CORE = (
    "auto",
    "autodevice",
    "backend",
    "builtin",
    "calibration",
    "capabilities",
    "context",
    "costmodel",
    "costs",
    "decompositions",
    "device",
    "deviceoptions",
    "devicestring",
    "errors",
    "factory",
    "gradients",
    "kinds",
    "launchers",
    "mpiinfo",
    "operators",
    "policy",
    "probe",
    "registry",
    "request",
    "screening",
    "shiftrules",
    "workloaddevices",
)  # fmt: skip; the modules of get_device's way down and what they read (policy: before it was split)
SPEC = "local:pennylane/lightning.qubit"


def core_files(root: Path) -> dict[str, Path]:
    """The core modules present under ``root`` (the ``qbackends`` package folder), by module name."""
    return {name: root / f"{name}.py" for name in CORE if (root / f"{name}.py").exists()}


def _imported(node: ast.AST, module: str) -> list[str]:
    """Sibling modules of ``qbackends`` an import statement in ``module`` names (relative or absolute)."""
    if isinstance(node, ast.ImportFrom):
        if node.level == 1 and node.module is None:
            return [alias.name for alias in node.names]
        if node.level == 1 and node.module:
            return [node.module.split(".")[0]]
        if node.level == 0 and node.module and node.module.startswith("qbackends."):
            return [node.module.split(".")[1]]
        if node.level == 0 and node.module == "qbackends":
            return [alias.name for alias in node.names]
    if isinstance(node, ast.Import):
        return [a.name.split(".")[1] for a in node.names if a.name.startswith("qbackends.")]
    return []


def import_graph(root: Path, functions: bool = False) -> dict[str, set[str]]:
    """Core module -> the core modules it imports at module level (``if TYPE_CHECKING:`` blocks aside);
    ``functions``: inside functions too (the graph as it runs)."""
    files = core_files(root)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text())
        edges: set[str] = set()
        for node in ast.walk(tree) if functions else tree.body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            edges.update(m for m in _imported(node, name) if m in files and m != name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (each is a cycle), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def function_imports(root: Path) -> dict[str, list[tuple[str, int, str]]]:
    """``sibling`` and ``other`` function-level imports of the core modules: (module, line, statement)."""
    files = core_files(root)
    result: dict[str, list[tuple[str, int, str]]] = {"sibling": [], "other": []}
    for name, path in files.items():
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    siblings = [m for m in _imported(node, name) if m in files]
                    kind = "sibling" if siblings or (isinstance(node, ast.ImportFrom) and node.level) else "other"
                    result[kind].append((name, node.lineno, ast.unparse(node)))
    return result


def stops(call: Any, deepest: int = 1) -> tuple[list[str], int]:
    """(the qbackends calls of ``call()`` at depth 1 to ``deepest`` below ``get_device``, as ``module.function`` in
    call order; how often it called ``devicestring.parse``)."""
    import qbackends

    package = str(Path(qbackends.__file__).parent)
    seen: list[str] = []
    parses = 0
    depth = [0]  # qbackends frames open below the facade (0: outside it)
    inside: list[bool] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal parses
        code = frame.f_code
        ours = code.co_filename.startswith(package) and not code.co_name.startswith("<")
        if event == "call":
            inside.append(ours)
            if not ours:
                return
            if code.co_name == "parse" and code.co_filename.endswith("devicestring.py"):
                parses += 1
            if depth[0] == 0 and code.co_name == "get_device":
                depth[0] = 1
                return
            if depth[0] >= 1:
                if depth[0] <= deepest:
                    module = Path(code.co_filename).relative_to(package).with_suffix("").as_posix().replace("/", ".")
                    seen.append(f"{module}.{code.co_qualname}")
                depth[0] += 1
        elif event == "return" and inside:
            if inside.pop() and depth[0] >= 1:
                depth[0] -= 1
                if depth[0] == 1 and code.co_name == "get_device":
                    depth[0] = 0

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen, parses


def by_name_stops(deepest: int = 1) -> tuple[list[str], int]:
    """The stops (``deepest=2``: steps) and parses of ``get_device(SPEC, wires=4)``, warm."""
    from qbackends import get_device

    get_device(SPEC, wires=4)
    return stops(lambda: get_device(SPEC, wires=4), deepest)


def main() -> None:
    import qbackends

    root = Path(qbackends.__file__).parent
    path, parses = by_name_stops()
    steps, _ = by_name_stops(2)
    print(f"qbackends from {root}")
    print(f"get_device({SPEC!r}, wires=4): {len(path)} stops ({len(steps)} steps), the string parsed {parses} times")
    for name, n in Counter(path).items():
        print(f"  {n} x {name}")
    graph = import_graph(root)
    print(f"core modules: {len(graph)}; cycles at module level: {cycles(graph) or 'none'}")
    print(f"cycles with the imports inside functions: {cycles(import_graph(root, functions=True)) or 'none'}")
    imports = function_imports(root)
    print(f"function-level imports: {len(imports['sibling'])} of a sibling core module, {len(imports['other'])} other")
    for module, line, text in imports["sibling"]:
        print(f"  {module}.py:{line}: {text}")


if __name__ == "__main__":
    main()
