"""The batched simulator: a whole parameter-broadcast minibatch as one state table (kernels compiled in ``qbackends_native``)."""
