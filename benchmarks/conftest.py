"""Benchmarks: shared helpers, and a ratio table per group printed at the end of the run.

Each benchmark records its median under a group; the summary prints every member of a group as a
ratio to the group's baseline (the member named in ``BASELINES``, else the slowest), so one run
shows the comparison side by side.
"""

from __future__ import annotations

import os

# As the qbackends command does (cli.THREAD_DEFAULTS): OpenMP threads that spin after one backend's step
# slow whichever backend runs next in an interleaved round. Set before any OpenMP runtime starts.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("KOKKOS_DISABLE_WARNINGS", "1")

import statistics
import subprocess
import sys
import time
from collections import defaultdict
from contextlib import contextmanager

import pytest

from qbackends import capabilities, get_registry
from qbackends.device import facts_for

_MEDIANS: dict[str, dict[str, float]] = defaultdict(dict)
_EXTRA: dict[str, dict[str, str]] = defaultdict(dict)
_CHOSEN: dict[str, str] = {}  # group -> the backend its "auto" member took
_NOTES: dict[str, dict[str, str]] = defaultdict(dict)  # group -> member -> why it was not timed
_RATIOS: dict[str, tuple[str, float]] = {}  # group -> (fastest, auto ÷ fastest) as the benchmark paired them


def skip_reason(key: str) -> str | None:
    """Why the backend ``key`` ("pennylane/lightning.qubit") cannot run here, as the probe says; None when it can."""
    registry = get_registry()
    backend = registry.backends[key]
    caps = capabilities.evaluate(backend, facts_for(registry))
    return None if caps.ok else f"{backend.device_string}: {caps.reason}"


def runnable_cpu_backends() -> list:
    """pytest params for the backends `qbackends list` says run here; the others skip with the probe's reason."""
    params = []
    for key in (
        "pennylane/lightning.qubit",
        "pennylane/lightning.kokkos",
        "pennylane/lightning.gpu",
        "pennylane/lightning.amdgpu",
    ):
        reason = skip_reason(key)
        marks = [] if reason is None else [pytest.mark.skip(reason=reason)]
        params.append(pytest.param(key.split("/")[1], marks=marks, id=key.split("/")[1]))
    return params


@pytest.fixture
def record(benchmark):
    """``record(group, name, extra="")`` after a benchmark ran: keep its median for the ratio table."""

    def _record(group: str, name: str, extra: str = "") -> None:
        _MEDIANS[group][name] = benchmark.stats.stats.median
        if extra:
            _EXTRA[group][name] = extra

    return _record


@contextmanager
def busy_process(on: bool = True):
    """One process spinning on a core for as long as the block runs (users' machines are never idle)."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if on else None
    try:
        yield
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


def interleaved_medians(
    benchmark,
    steps: dict,
    rounds: int,
    consecutive: int | dict[str, int] = 1,
    per_round: dict | None = None,
    then: tuple[int, list[str]] | None = None,
) -> dict[str, float]:
    """Median seconds of each step, the steps run in turn round by round (``consecutive`` times each
    per round, or as many as it gives by name, 1 otherwise): on a shared machine, one after another
    they drift apart by tens of percent. The order rotates by one each round, so each step follows
    every other equally often (a step that leaves caches cold or threads spinning slows the next).
    ``per_round``, when given, gets each step's median within each round, by round (for paired ratios).
    ``then`` = (more rounds, names): after ``rounds``, that many more of the named steps alone (the
    measuring time goes to the close comparisons)."""
    seconds: dict[str, list[float]] = {name: [] for name in steps}
    counts = {name: consecutive.get(name, 1) if isinstance(consecutive, dict) else consecutive for name in steps}
    done = 0

    def one_round():
        nonlocal done
        names = list(steps) if then is None or done < rounds else [n for n in steps if n in then[1]]
        shift = done % len(names)
        for name in names[shift:] + names[:shift]:
            for _ in range(counts[name]):
                start = time.perf_counter()
                steps[name]()
                seconds[name].append(time.perf_counter() - start)
            if per_round is not None:
                per_round.setdefault(name, {})[done] = statistics.median(seconds[name][-counts[name] :])
        done += 1

    benchmark.pedantic(one_round, rounds=rounds + (then[0] if then else 0), iterations=1)
    return {name: statistics.median(times) for name, times in seconds.items()}


def record_seconds(group: str, name: str, seconds: float, extra: str = "") -> None:
    """Keep a time measured by the workload itself (not by pytest-benchmark) for the ratio table."""
    _MEDIANS[group][name] = seconds
    if extra:
        _EXTRA[group][name] = extra


def record_note(group: str, name: str, note: str) -> None:
    """Say under the group's table why ``name`` has no time (skipped, refused, dropped)."""
    _NOTES[group][name] = note


def record_choice(group: str, backend: str) -> None:
    """Keep the backend the group's ``auto`` member took, for the "auto ÷ fastest" table."""
    _CHOSEN[group] = backend


def auto_over_fastest(
    medians: dict[str, float], per_round: dict[str, dict[int, float]] | None = None
) -> tuple[str, float] | None:
    """(the fastest member whose name does not start with "auto", auto's time over its time); None
    without both. With ``per_round`` (each member's median within each round, by round), the median of
    the ratios of the rounds both ran in: the two ran seconds apart in every round, so the machine's drift cancels. Else
    the ratio of the medians (a ratio pinned by ``record_ratio`` wins in the summary)."""
    others = {name: m for name, m in medians.items() if not name.startswith("auto")}
    if "auto" not in medians or not others:
        return None
    fastest = min(others, key=others.__getitem__)
    if per_round is not None:
        ratios = [a / per_round[fastest][r] for r, a in per_round["auto"].items() if r in per_round[fastest]]
        return fastest, statistics.median(ratios)
    return fastest, medians["auto"] / others[fastest]


def record_ratio(group: str, fastest: str, ratio: float) -> None:
    """Keep the group's auto ÷ fastest as the benchmark measured it (paired by round) for the summary."""
    _RATIOS[group] = (fastest, ratio)


def pytest_terminal_summary(terminalreporter):
    if not _MEDIANS:
        return
    terminalreporter.section("qbackends: ratios within each group (median, baseline = 1.00)")
    for group, medians in sorted(_MEDIANS.items()):
        baseline = max(medians.values())
        terminalreporter.write_line(f"{group}")
        for name, median in sorted(medians.items(), key=lambda kv: -kv[1]):
            extra = _EXTRA[group].get(name, "")
            terminalreporter.write_line(
                f"    {name:<42} {median:10.4f} s   x{baseline / median:5.2f} faster than slowest  {extra}"
            )
        for name, note in sorted(_NOTES.get(group, {}).items()):
            if name not in medians:
                terminalreporter.write_line(f"    {name:<42} not timed: {note}")
    ratios = {group: _RATIOS.get(group) or auto_over_fastest(medians) for group, medians in sorted(_MEDIANS.items())}
    if any(ratios.values()):
        terminalreporter.section("qbackends: auto ÷ fastest per circuit (median of auto over the fastest other member)")
        terminalreporter.write_line(f"    {'group':<34} {'auto took':<34} {'fastest':<34} {'auto ÷ fastest':>14}")
        for group, ratio in ratios.items():
            if ratio is not None:
                chosen = _CHOSEN.get(group, "?")
                terminalreporter.write_line(f"    {group:<34} {chosen:<34} {ratio[0]:<34} {ratio[1]:14.2f}")
