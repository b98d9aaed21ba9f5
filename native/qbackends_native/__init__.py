"""The compiled kernels of qbackends' own simulators: ``fused`` (fused.qubit) and ``batched`` (batched.qubit).

Built from C++ when this package is installed, for the instruction set ``ARCH`` names (``native``: the
machine that built it; set ``QBACKENDS_ARCH`` at build time for a stated baseline such as ``x86-64-v3``);
``BUILD_CPU``: for a native build, the CPU the compiler took that to mean, and a key of its instruction sets.
"""

from ._kernels import ARCH, BUILD_CPU, VECTOR_ISA, batched, fused

__all__ = ["ARCH", "BUILD_CPU", "VECTOR_ISA", "batched", "fused"]
