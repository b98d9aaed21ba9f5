"""Run at start-up by the suite's child processes (conftest puts this folder first on their PYTHONPATH).

PennyLane imports jax whenever it is installed, and ``[test]`` installs it for the interface tests: 2.6 s of each
child's 6-7 s start, in some 150 children a run. None of them uses jax, and a user without jax (the common install)
starts them this way. Tests where jax's presence matters in a child keep it: ``@pytest.mark.jax_in_children``.
"""

import sys

sys.modules.setdefault("jax", None)  # PennyLane's find_spec("jax") then finds none
