"""``python -m qbackends.workloads.qaoa``: QAOA as a hybrid job's entry point."""

from ...hybridjob import entry
from .job import main

raise SystemExit(entry(main))
