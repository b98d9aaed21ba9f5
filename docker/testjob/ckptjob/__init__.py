"""A job docker/test.sh uploads beside Braket's QAOA example: checkpoints, an input channel, hyperparameters bound to
a signature, a requirements.txt, and an entry point that fails."""
