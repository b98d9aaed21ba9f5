"""Run at start-up by the suite's child processes (conftest puts this folder first on their PYTHONPATH).

PennyLane imports jax whenever it is installed, and ``[test]`` installs it for the interface tests: 2.6 s of each
child's 6-7 s start, in some 150 children a run. None of them uses jax, and a user without jax (the common install)
starts them this way. Tests where jax's presence matters in a child keep it: ``@pytest.mark.jax_in_children``.
Another ``sitecustomize`` further along the path (a venv's, or one that measures coverage) still runs.
"""

import importlib.machinery
import importlib.util
import os
import sys

sys.modules.setdefault("jax", None)  # PennyLane's find_spec("jax") then finds none

_here = os.path.normpath(os.path.dirname(__file__))  # as PYTHONPATH gives it: no call on the current folder, which may be gone
sys.path[:] = [p for p in sys.path if os.path.normpath(p) != _here]
_next = importlib.machinery.PathFinder.find_spec(__name__, sys.path)
if _next is not None and _next.loader is not None:  # it takes this module's place, as importing it would have
    _module = importlib.util.module_from_spec(_next)
    _next.loader.exec_module(_module)
    sys.modules[__name__] = _module
