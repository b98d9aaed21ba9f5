"""QAOA checkpoints: JSON, written atomically after every iteration, resumed only into the very same run."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ... import checkpoint as run_checkpoint
from ...checkpoint import Inputs, RunIdentity, check_seal, corrupt, further_along, seal, unreadable
from ...fixes import Spell
from ...storage import atomic_write_json
from .config import Config
from .graph import Graph
from .optimizer import OptimizerState

FILE = "qaoa-checkpoint.json"
# Settings a resumed run may change: the iteration budget, and the graph file's name (its contents count).
GROWABLE = ("iterations", "graph_file")
GRAPH = Inputs("graph", "the graph differs (the edge list's contents changed)")


@dataclass
class Progress:
    """What a checkpoint holds: the state after ``iteration`` finished iterations."""

    iteration: int
    params: list[list[float]]
    costs: list[float]
    seconds: list[float]
    optimizer: OptimizerState


def identity(config: Config, graph: Graph, device: str, ranks: int | None = None) -> RunIdentity:
    """This run: its settings (not the iteration budget), the graph itself (a file's contents, not its name),
    the device and, under ``--mpi``, the ranks that share the state."""
    settings = {k: v for k, v in asdict(config).items() if k not in GROWABLE}
    defaults = {"precision": settings.pop("precision")} if config.precision == "c128" else {}  # as before c64 existed
    edges = json.dumps([graph.nodes, [list(e) for e in graph.edges]])
    return RunIdentity(settings, run_checkpoint.digest(edges.encode()), device, GRAPH, defaults=defaults, ranks=ranks)


def save(path: Path, config: Config, run: RunIdentity, progress: Progress) -> None:
    done = asdict(progress)
    atomic_write_json(path, {"config": asdict(config), "run": run.record(), "progress": done, "seal": seal(done)})


def read(path: Path, spell: Spell) -> dict[str, Any]:
    """A checkpoint's contents, or a typed error when it is not one (``spell`` words the fix)."""
    try:
        state = json.loads(path.read_text())
    except (ValueError, OSError) as exc:
        raise unreadable(path, exc, spell) from exc
    return run_checkpoint.saved_run(path, state, spell)


def progress(path: Path, state: dict[str, Any], config: Config, run: RunIdentity, spell: Spell) -> Progress:
    """The progress of a checkpoint of exactly this run, checked field by field; anything else is refused by name
    (``spell`` words the fix)."""
    run_checkpoint.check(path, state, run, spell)
    p = state.get("progress")
    entries = ("iteration", "params", "costs", "seconds", "optimizer")
    if not isinstance(p, dict) or any(k not in p for k in entries):
        raise unreadable(path, f"its progress holds no {', '.join(entries)}", spell)
    if not isinstance(p["optimizer"], dict) or set(p["optimizer"]) != {"step", "m", "v"}:
        raise unreadable(path, "its optimizer state is not the step and the m and v moments", spell)
    done = Progress(p["iteration"], p["params"], p["costs"], p["seconds"], OptimizerState(**p["optimizer"]))
    _check(path, done, config, spell)
    check_seal(path, state, p, spell)
    if done.iteration > config.iterations:  # a sound checkpoint, further along than asked
        raise further_along(path, done.iteration, config.iterations, "iterations", spell)
    return Progress(  # JSON's integers as the floats they stand for
        done.iteration,
        [_floats(row) for row in done.params],
        _floats(done.costs),
        _floats(done.seconds),
        OptimizerState(done.optimizer.step, _floats(done.optimizer.m), _floats(done.optimizer.v)),
    )


def _floats(values: list[Any]) -> list[float]:
    return [float(v) for v in values]


def _check(path: Path, progress: Progress, config: Config, spell: Spell) -> None:
    """Every field of a checkpoint's progress: type, shape, range, finiteness (``spell`` words the fix)."""
    n = progress.iteration
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise corrupt(path, f"iteration {n!r} is not a whole number of at least 0", spell)
    for name in ("costs", "seconds"):
        values = getattr(progress, name)
        if not isinstance(values, list) or len(values) != n:
            raise corrupt(
                path, f"{name} holds {len(values) if isinstance(values, list) else values!r} entries for {n} iterations", spell
            )
    for name in ("m", "v"):  # lists before they are added: two numbers add up to a number
        if not isinstance(getattr(progress.optimizer, name), list):
            raise corrupt(
                path, f"its optimizer's {name} moments are {getattr(progress.optimizer, name)!r:.40}, not a list", spell
            )
    try:
        params = np.asarray(progress.params, dtype=float)
        numbers = np.asarray(progress.costs + progress.seconds, dtype=float)
        moments = np.asarray(progress.optimizer.m + progress.optimizer.v, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise corrupt(path, "a value is not a number (or is beyond what a float holds)", spell) from None
    if params.shape != (2, config.layers):
        raise corrupt(path, f"parameters of shape {params.shape}, not (2, {config.layers})", spell)
    step = progress.optimizer.step
    if not isinstance(step, int) or isinstance(step, bool) or step != n:  # one optimizer step per iteration
        raise corrupt(path, f"its optimizer took {step!r} steps in {n} iterations", spell)
    expected = 0 if n == 0 or config.optimizer == "gd" else params.size  # Adam's, one per parameter; none before a step
    for name in ("m", "v"):
        values = getattr(progress.optimizer, name)
        if len(values) != expected:
            raise corrupt(path, f"its optimizer holds {len(values)} {name} moments, not {expected}", spell)
    if (np.asarray(progress.optimizer.v, dtype=float) < 0).any():  # (a None there is NaN: refused as not finite below)
        raise corrupt(path, "a second moment of its optimizer is negative", spell)
    if not (np.isfinite(params).all() and np.isfinite(numbers).all() and np.isfinite(moments).all()):
        raise corrupt(path, "a parameter, cost or optimizer moment is not finite", spell)
