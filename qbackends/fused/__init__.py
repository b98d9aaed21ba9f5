"""A fused-diagonal state-vector simulator (``local:qbackends/fused.qubit``), kernels in numba."""
