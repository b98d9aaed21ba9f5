"""What qbackends' two simulators share: the PennyLane device glue and measurements."""
