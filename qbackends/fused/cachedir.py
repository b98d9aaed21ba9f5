"""Where numba caches kernels: moved to ``qbackends.simbase.cachedir``, which both simulators use."""

from __future__ import annotations

from ..simbase.cachedir import KernelCache, kernel_cache

__all__ = ["KernelCache", "kernel_cache"]
