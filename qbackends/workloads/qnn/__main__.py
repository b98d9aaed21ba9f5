"""``python -m qbackends.workloads.qnn``: the QNN as a hybrid job's entry point."""

from ...hybridjob import entry
from .launch import main

raise SystemExit(entry(main))
