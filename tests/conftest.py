"""Shared fixtures: recorded machine facts, a fresh registry per test, hardware markers."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from qbackends import capabilities, probe, registry
from qbackends.builtin import BACKENDS

FACTS = Path(__file__).parent / "facts"
NO_JAX = Path(__file__).parent / "nojax"  # its sitecustomize: child processes start without jax
SESSION_START = time.time()


def recorded_facts(name: str) -> probe.MachineFacts:
    """Facts recorded on another machine (tests/facts/NAME.json)."""
    data = json.loads((FACTS / f"{name}.json").read_text())
    data.pop("construction_errors", None)
    return probe.MachineFacts.from_json(data)


def recorded_failures(name: str) -> dict[str, str]:
    """PennyLane device name -> why it failed at construction on that machine (what a ``Context`` records)."""
    return json.loads((FACTS / f"{name}.json").read_text()).get("construction_errors", {})


def builtin(simulator: str):
    return next(b for b in BACKENDS if b.simulator == simulator)


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch, tmp_path_factory, request):
    """Every test starts from a freshly built registry, no device-selection environment, no calibration profile and
    no stored auto decisions; the processes it starts import no jax unless it is marked ``jax_in_children``."""
    for var in ("AMZN_BRAKET_DEVICE_ARN", "QBACKENDS_DEVICE", "QBACKENDS_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    if request.node.get_closest_marker("jax_in_children") is None:
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(NO_JAX), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("QBACKENDS_PROFILE", str(tmp_path_factory.mktemp("profile") / "none.json"))
    monkeypatch.setenv("QBACKENDS_DECISIONS", str(tmp_path_factory.mktemp("decisions") / "decisions"))
    registry.reset_registry()
    yield
    registry.reset_registry()


def _mapped_paths() -> set[str]:
    """The files some other live process maps (this one is ending: what it maps goes with it)."""
    paths = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        if maps.parent.name == str(os.getpid()):
            continue
        try:
            lines = maps.read_text().splitlines()
        except OSError:  # the process ended, or is not ours to read
            continue
        paths.update(fields[5] for fields in (line.split(maxsplit=5) for line in lines) if len(fields) == 6)
    return paths


@pytest.hookimpl(trylast=True)  # with -n: after xdist has ended the workers
def pytest_sessionfinish(session, exitstatus):
    """MPICH leaves its shared-memory segment in /dev/shm when one of its ranks is killed or aborts (the tests of a
    failing rank do both), or when this process started MPI itself, and /dev/shm is memory: the segments this session
    left, that no other process maps, go. With ``-n``, the main process does this once every worker has ended (a
    worker ending early would race the others' runs)."""
    if hasattr(session.config, "workerinput"):
        return
    mapped = None
    for segment in Path("/dev/shm").glob("mpich_shm_*"):
        try:
            if segment.stat().st_mtime < SESSION_START:
                continue
            mapped = _mapped_paths() if mapped is None else mapped
            if str(segment) not in mapped:
                segment.unlink()
        except FileNotFoundError:
            continue


def _hardware_reason(kind: str) -> str:
    """Why this machine lacks ``kind`` hardware ("" when it has it), from the real probes."""
    if kind == "cuda":
        gpus, reason = probe.nvidia_gpus()
        return "" if gpus else reason
    if kind == "rocm":
        gpus, reason = probe.amd_gpus()
        return "" if gpus and not reason else reason
    raise ValueError(kind)


def pytest_collection_modifyitems(config, items):
    """Hardware tests skip with the probe's reason; ``slow`` tests run only when asked (``-m slow``)."""
    run_slow = "slow" in (config.getoption("-m") or "")
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="long run: python -m pytest tests -m slow"))
        for mark in item.iter_markers("requires"):
            reason = _hardware_reason(mark.args[0])
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


__all__ = ["recorded_facts", "builtin", "capabilities"]
