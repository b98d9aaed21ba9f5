"""A fused-diagonal state-vector simulator (``local:qbackends/fused.qubit``), kernels compiled in ``qbackends_native``."""
