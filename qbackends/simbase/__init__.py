"""What qbackends' two simulators share: the PennyLane device glue, measurements, numba's setup."""
