"""numba for the simulators' kernels, imported once ``NUMBA_NUM_THREADS`` is known to be a count it takes.

numba reads the variable as it is imported and refuses a count below 1 with a bare ``ValueError``;
this says which variable and what to set it to instead.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

from ..errors import EnvironmentSettingError


def _cores() -> int:
    """numba's default thread count: the cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def import_numba() -> ModuleType:
    """``import numba``.

    Raises:
        EnvironmentSettingError: ``NUMBA_NUM_THREADS`` is below 1 (numba ignores, with a warning, a value
            that is not a number).
    """
    value = os.environ.get("NUMBA_NUM_THREADS")
    if "numba" not in sys.modules and value is not None:
        try:
            count = int(value)
        except ValueError:
            count = 1
        if count < 1:
            cores = _cores()
            raise EnvironmentSettingError(
                f"NUMBA_NUM_THREADS={value} asks numba for no threads; fused.qubit and batched.qubit need 1 or more "
                f"(numba's default here: {cores}, the cores this process may use).",
                f"unset NUMBA_NUM_THREADS, or set it to a count from 1 to {cores}.",
            )
    import numba

    return numba
