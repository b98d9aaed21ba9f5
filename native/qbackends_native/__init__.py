"""The compiled kernels of qbackends' own simulators: ``fused`` (fused.qubit) and ``batched`` (batched.qubit).

Built from C++ when this package is installed, for the instruction set ``ARCH`` names (``native``: the
machine that built it; set ``QBACKENDS_ARCH`` at build time for a stated baseline such as ``x86-64-v3``, or
for several x86-64 levels, ``x86-64-v3,x86-64-v4``: a build of the kernels each, ``BUILDS``, of which the best
this CPU runs is loaded); ``BUILD_CPU``: for a native build, the CPU the compiler took that to mean, and a
key of its instruction sets.
"""

import re
from importlib import import_module

from . import _cpu

BUILDS = tuple(_cpu.BUILDS.split(","))


def _is_level(arch: str) -> bool:
    return re.fullmatch(r"x86-64(-v[234])?", arch) is not None


def _level(arch: str) -> int:
    return int(arch.rpartition("-v")[2]) if "-v" in arch else 1  # x86-64 is level 1


def _best_build(builds: tuple[str, ...], runs) -> str:
    """The build of the highest x86-64 level that ``runs`` (level -> bool) says this CPU runs."""
    runnable = [arch for arch in builds if runs(arch)]
    if not runnable:
        raise ImportError(
            f"qbackends-native was built for {', '.join(builds)}, and this CPU runs none of them: reinstall it here "
            "(pip install ./native builds for this machine), or with QBACKENDS_ARCH naming a level it runs"
        )
    return max(runnable, key=_level)


if len(BUILDS) == 1:
    if _is_level(BUILDS[0]):  # a stated level: refused by name on a CPU without it, not an illegal instruction
        _best_build(BUILDS, _cpu.runs)
    from . import _kernels
else:
    _kernels = import_module(f"._kernels_{_best_build(BUILDS, _cpu.runs).replace('-', '_')}", __name__)

ARCH, BUILD_CPU, VECTOR_ISA, batched, fused = (
    _kernels.ARCH,
    _kernels.BUILD_CPU,
    _kernels.VECTOR_ISA,
    _kernels.batched,
    _kernels.fused,
)

__all__ = ["ARCH", "BUILDS", "BUILD_CPU", "VECTOR_ISA", "batched", "fused"]
