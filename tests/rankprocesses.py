"""Processes of an ``mpiexec`` run, for the tests that kill one of its ranks."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").iterdir():
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except FileNotFoundError:
                children = []
            found += children
            todo += children
    return found


def state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "Z"


def kill_a_rank(run: subprocess.Popen, started: Callable[[], None]) -> None:
    """Once ``started()`` returns, SIGKILL the second of the run's two ranks; the run must end within 30 s,
    nonzero, and no rank be alive 30 s after the kill (a rank may still be exiting as mpiexec returns)."""
    try:
        started()
        ranks = [p for p in descendants(run.pid) if b"qbackends.cli" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(ranks) == 2
        os.kill(ranks[1], signal.SIGKILL)
        killed_at = time.monotonic()
        run.communicate(timeout=60)
        assert time.monotonic() - killed_at < 30
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
    assert run.returncode != 0

    def alive() -> list[int]:
        return [p for p in ranks if Path(f"/proc/{p}").exists() and state(p) != "Z"]

    while alive() and time.monotonic() < killed_at + 30:
        time.sleep(0.1)
    assert not alive(), [(p, state(p)) for p in alive()]
