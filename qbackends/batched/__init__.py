"""The batched simulator: a whole parameter-broadcast minibatch as one state table (numba kernels)."""
