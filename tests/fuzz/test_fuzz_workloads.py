"""QAOA and QNN settings, run for real on a few wires, and their checkpoints: a resumed run is the same run or refused."""

from __future__ import annotations

import copy
import functools
import json
import math
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st

from qbackends.errors import CheckpointError, QBackendsError
from qbackends.workloads import qaoa, qnn

from . import budget
from .strategies import json_values, mostly, scalars

DEVICES = ["lightning.qubit", "default.qubit", "fused.qubit", "auto", "local:braket/braket.local.qubit"]
QAOA_VALID = {
    "nodes": st.integers(2, 5),
    "edges": st.integers(1, 6),
    "seed": st.integers(0, 2**32 - 1),
    "layers": st.integers(1, 2),
    "iterations": st.integers(1, 3),
    "stepsize": st.floats(1e-4, 2.0),
    "optimizer": st.sampled_from(qaoa.OPTIMIZERS),
    "diff_method": st.sampled_from(["adjoint", "parameter-shift", "backprop", "finite-diff", "hadamard", "device", "best"]),
    "formulation": st.sampled_from(qaoa.FORMULATIONS),
    "init_scale": st.floats(0, 3.0),
    "precision": st.sampled_from(["c128", "c64"]),
}
QAOA_JUNK = {
    **{name: scalars for name in QAOA_VALID},
    "nodes": st.integers(-3, 1) | st.integers(41, 10**9) | scalars,
    "layers": st.integers(-1, 0) | st.integers(1001, 10**6),
    "iterations": st.integers(-1, 0) | st.integers(10**7 + 1, 10**12),
}


def _config(small, valid, junk):
    """Settings: a small run's (the defaults train for minutes), some drawn, some spoiled."""
    chosen = st.fixed_dictionaries({}, optional=valid).map(lambda drawn: {**small, **drawn})
    spoiled = st.fixed_dictionaries({}, optional=junk)
    return mostly(chosen, st.tuples(chosen, spoiled).map(lambda p: {**p[0], **p[1]}), 7)


def _finite(value) -> bool:
    return all(math.isfinite(v) for v in np.ravel(np.asarray(value, dtype=float)))


@budget(60)
@given(_config({"nodes": 4, "edges": 4, "layers": 1, "iterations": 2}, QAOA_VALID, QAOA_JUNK), st.sampled_from(DEVICES))
def test_a_qaoa_run_gives_its_results_or_a_typed_error(settings, device):
    try:
        config = qaoa.Config(**settings)
        result = qaoa.run(config, device)
    except QBackendsError as exc:
        event(f"refused: {type(exc).__name__}: {exc.message[:40]}")
        assert exc.fix and "\n" not in exc.one_line(), exc.message
        return
    event(f"ran on {result['device']}")
    assert len(result["costs"]) == config.iterations and _finite(result["costs"]) and _finite(result["params"])
    assert 0 <= result["expected_cut"] <= result["max_cut"] + 1e-9


# ---- QAOA checkpoints ---------------------------------------------------------------------------

QAOA_RUN = qaoa.Config(nodes=4, edges=4, layers=1, iterations=3, seed=5)


@functools.cache
def _qaoa_reference(device: str) -> tuple[dict, dict]:
    """(the checkpoint after 2 of 3 iterations, the whole 3-iteration run's results), on ``device``."""
    with tempfile.TemporaryDirectory() as folder:
        qaoa.run(qaoa.Config(**{**asdict(QAOA_RUN), "iterations": 2}), device, checkpoint_dir=folder)
        saved = json.loads((Path(folder) / qaoa.CHECKPOINT_FILE).read_text())
    return saved, qaoa.run(QAOA_RUN, device)


def _paths(tree, prefix=()):
    """Every (path, value) in a JSON tree."""
    yield prefix, tree
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _paths(v, (*prefix, i))


def _mutated(state, data):
    """The checkpoint with one to three of its values replaced, removed, nudged, or lists cut or lengthened."""
    state = copy.deepcopy(state)
    for _ in range(data.draw(st.integers(1, 3), "mutations")):
        paths = [p for p, _ in _paths(state) if p]
        path = data.draw(st.sampled_from(paths), "path")
        parent = functools.reduce(lambda t, k: t[k], path[:-1], state)
        value = parent[path[-1]]
        how = data.draw(st.sampled_from(["replace", "remove", "nudge", "lengthen", "shorten"]), "how")
        if how == "remove" and isinstance(parent, dict):
            del parent[path[-1]]
        elif how == "nudge" and isinstance(value, (int, float)) and not isinstance(value, bool):
            parent[path[-1]] = value + data.draw(st.sampled_from([1, -1, 1e-9, 0.5, 1e300]), "by")
        elif how == "lengthen" and isinstance(value, list):
            value.append(value[-1] if value else 0.0)
        elif how == "shorten" and isinstance(value, list) and value:
            value.pop()
        else:
            parent[path[-1]] = data.draw(json_values | st.sampled_from([float("nan"), float("inf"), -1, 10**30]), "value")
    return state


@budget(80)
@given(st.data())
def test_a_resumed_qaoa_run_is_the_same_run_or_refused(data):
    device = data.draw(st.sampled_from(["lightning.qubit", "default.qubit"]), "device")
    saved, whole = _qaoa_reference(device)
    state = _mutated(saved, data)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / qaoa.CHECKPOINT_FILE
        text = json.dumps(state)
        path.write_text(text)
        try:
            resumed = qaoa.run(QAOA_RUN, device, checkpoint_dir=folder, resume=True)
        except CheckpointError as exc:
            event(f"refused: {exc.message.replace(str(path), 'FILE')[:60]}")
            assert exc.fix and path.read_text() == text  # refused, and the checkpoint kept as it was
            return
    event("resumed")
    assert resumed["costs"] == whole["costs"] and resumed["params"] == whole["params"], "resumed as another run"


# ---- the QNN --------------------------------------------------------------------------------------

QNN_VALID = {
    "nwires": st.integers(1, 2),
    "ndata": st.integers(4, 16),
    "batch_size": st.integers(1, 8),
    "epochs": st.integers(1, 2),
    "lr": st.floats(1e-4, 1.0),
    "gamma": st.floats(0.01, 1.0),
    "margin": st.floats(0, 2.0),
    "seed": st.integers(0, 2**32 - 1),
    "test_fraction": st.floats(0.05, 0.95),
    "patience": st.none() | st.integers(1, 3),
    "scale_lr": st.booleans(),
    "diff_method": st.sampled_from(["adjoint", "parameter-shift", "backprop", "best", "device", "hadamard"]),
}
QNN_JUNK = {
    **{name: scalars for name in QNN_VALID},
    "ndata": st.integers(-1, 3) | st.integers(209, 10**9),
    "nwires": st.integers(-2, 0),
}


@budget(20)
@given(
    _config({"nwires": 2, "ndata": 8, "epochs": 1, "batch_size": 4}, QNN_VALID, QNN_JUNK),
    st.sampled_from(["default.qubit", "lightning.qubit", "batched.qubit", "auto"]),
)
def test_a_qnn_run_gives_its_results_or_a_typed_error(settings, device):
    try:
        result = qnn.train(qnn.Config(**settings), device)
    except QBackendsError as exc:
        event(f"refused: {type(exc).__name__}: {exc.message[:40]}")
        assert exc.fix and "\n" not in exc.one_line(), exc.message
        return
    event(f"trained on {result['device']}")
    assert 1 <= len(result["history"]) <= result["config"]["epochs"]
    assert 0 <= result["test_accuracy"] <= 1 and all(_finite(v) for v in result["parameters"].values())


QNN_RUN = qnn.Config(nwires=2, ndata=12, batch_size=4, epochs=2, seed=3)


@functools.cache
def _qnn_reference() -> tuple[bytes, dict]:
    with tempfile.TemporaryDirectory() as folder:
        qnn.train(qnn.Config(**{**asdict(QNN_RUN), "epochs": 1}), "default.qubit", checkpoint_dir=folder)
        saved = (Path(folder) / qnn.CHECKPOINT_FILE).read_bytes()
    return saved, qnn.train(QNN_RUN, "default.qubit")


@budget(16)
@given(st.data())
def test_a_resumed_qnn_run_is_the_same_run_or_refused(data):
    import io

    import torch

    saved, whole = _qnn_reference()
    if data.draw(st.booleans(), "bytes"):  # the file damaged
        content = bytearray(saved)
        for _ in range(data.draw(st.integers(1, 4), "flips")):
            content[data.draw(st.integers(0, len(content) - 1), "at")] ^= data.draw(st.integers(1, 255), "bits")
        content = bytes(content[: data.draw(st.integers(0, len(content)), "length")])
    else:  # a value in it changed
        state = torch.load(io.BytesIO(saved), weights_only=True)
        key = data.draw(st.sampled_from(sorted(state)), "key")
        state[key] = data.draw(st.sampled_from([None, -1, 0, 7, "x", [], {}, float("nan"), torch.zeros(2)]), "value")
        buffer = io.BytesIO()
        torch.save(state, buffer)
        content = buffer.getvalue()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / qnn.CHECKPOINT_FILE
        path.write_bytes(content)
        try:
            resumed = qnn.train(QNN_RUN, "default.qubit", checkpoint_dir=folder, resume=True)
        except CheckpointError as exc:
            event(f"refused: {exc.message.replace(str(path), 'FILE')[:60]}")
            assert exc.fix and path.read_bytes() == content
            return
    event("resumed")
    assert resumed["history"][-1]["test_accuracy"] == whole["history"][-1]["test_accuracy"]
    assert resumed["parameters"] == whole["parameters"], "resumed as another run"
