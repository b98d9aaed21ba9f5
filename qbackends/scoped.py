"""What a program entry point sets up for as long as it runs, and undoes when it returns.

``qbackends.cli.main`` (and ``python -m qbackends.jobentry``, a job's own process) run inside these; importing
qbackends, building a device or calling a workload sets up neither. Tests call ``cli.main()`` in-process: after it
returns, the process's environment and logging are as they were.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def environment(defaults: Mapping[str, str]) -> Iterator[None]:
    """``defaults`` in ``os.environ`` where the user has not set them, for as long as the block runs (the processes
    it starts inherit them); then as they were."""
    added = [name for name in defaults if name not in os.environ]
    os.environ.update({name: defaults[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@contextlib.contextmanager
def log_lines_shown() -> Iterator[None]:
    """qbackends' log lines (auto's decisions at INFO, warnings) on stderr, as the command's own output, for as long
    as the block runs; nothing where the program has set up logging itself."""
    logger = logging.getLogger("qbackends")
    if logging.root.handlers or logger.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
