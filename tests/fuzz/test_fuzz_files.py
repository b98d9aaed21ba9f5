"""The files users hand qbackends: data CSVs (bytes, encodings, sizes), graph edge lists, hyperparameter files,
benchmark results and prices, calibration profiles and cost models."""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from qbackends import benchreport, calibration, decisionstore
from qbackends.builtin import BACKENDS
from qbackends.errors import WorkloadInputError
from qbackends.hybridjob import config_from_hyperparameters, read_hyperparameters
from qbackends.probe import MachineFacts
from qbackends.workloads import qaoa, qnn, sonar

from . import budget
from .strategies import json_values, mostly

SONAR = sonar.sonar_text().splitlines()
ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "latin-1", "cp1252"]


_FOLDER = tempfile.TemporaryDirectory(prefix="qbackends-fuzz-files-")  # removed as the session ends


def _file(content: bytes) -> Path:
    """The example's file (each example overwrites the last's)."""
    path = Path(_FOLDER.name) / "input"
    path.write_bytes(content)
    return path


def _refused(exc: WorkloadInputError, path: Path) -> None:
    event(f"refused: {exc.message.replace(str(path), 'FILE')[:50]}")
    assert str(path) in exc.message and exc.fix and "\n" not in exc.one_line(), exc.message


def _csv_text():
    rows = st.lists(st.sampled_from(SONAR), min_size=1, max_size=8).map("\n".join)
    cells = st.lists(
        st.lists(
            st.sampled_from(["0.1", "1e308", "-0", "nan", "inf", "x", "", " 2 ", "1_0", "0x10", "٣"]), min_size=1, max_size=4
        ).map(lambda c: ",".join([*c, "M"])),
        min_size=1,
        max_size=5,
    ).map("\n".join)
    return mostly(rows, cells | st.text(max_size=200), 6)


@budget(120)
@given(_csv_text(), st.sampled_from(ENCODINGS), st.sampled_from(["\n", "\r\n", "\r"]), st.binary(max_size=6), st.booleans())
def test_a_data_file_is_the_rows_it_holds_or_refused_by_line(text, encoding, newline, tail, spoil):
    content = text.replace("\n", newline).encode(encoding, errors="replace") + (tail if spoil else b"")
    path = _file(content)
    try:
        data = sonar.load(path)
    except WorkloadInputError as exc:
        _refused(exc, path)
        return
    event(f"read: {encoding}")
    assert data.features.ndim == 2 and len(data) == data.features.shape[0] >= 1
    assert set(data.labels.tolist()) <= {1.0, -1.0} and bool((abs(data.features) < math.inf).all())
    if not spoil and encoding in ("utf-8", "utf-8-sig"):  # the same rows, whatever the mark and line ends
        assert data.features.tolist() == sonar.parse(text, "x").features.tolist()


@budget(100)
@given(
    mostly(
        st.lists(
            st.tuples(st.integers(0, 6), st.integers(0, 6), st.sampled_from(["", " 1.5", " -2", " 1e7", " nan"])), max_size=6
        ).map(lambda edges: "\n".join(f"{u} {v}{w}" for u, v, w in edges)),
        st.text(max_size=100),
        7,
    ),
    st.sampled_from(["utf-8", "utf-8-sig", "utf-16"]),
)
def test_a_graph_file_is_a_graph_or_refused_by_line(text, encoding):
    path = _file(text.encode(encoding, errors="replace"))
    try:
        graph = qaoa.read_edge_list(path)
    except WorkloadInputError as exc:
        _refused(exc, path)
        return
    event("graph")
    assert 2 <= graph.nodes <= qaoa.MAX_GRAPH_NODES and graph.edges
    assert all(0 <= e.u < e.v < graph.nodes and abs(e.weight) <= qaoa.MAX_WEIGHT for e in graph.edges)


GOOD_VALUES = {  # a value each setting takes, as a job's JSON writes it (numbers, or Braket's strings)
    "nodes": ["4", 5],
    "edges": ["4", 3],
    "seed": [7, "0"],
    "layers": [1, "2"],
    "iterations": [2, "3"],
    "stepsize": [0.1, "0.05"],
    "optimizer": ["adam", "gd"],
    "diff_method": ["adjoint", "parameter-shift"],
    "formulation": ["fast", "qml.qaoa"],
    "init_scale": [0.01],
    "precision": ["c64", "c128"],
    "nwires": [2, "3"],
    "ndata": [12, "16"],
    "batch_size": [4, "8"],
    "epochs": [1, "2"],
    "lr": [0.03, "0.1"],
    "gamma": [0.99],
    "margin": [0.1],
    "test_fraction": [0.25, "0.5"],
    "patience": [1, "null"],
    "scale_lr": ["true", False],
    "data": [None],
}


def _hyperparameters(kind):
    names = sorted(asdict(kind()))
    good = st.dictionaries(
        st.sampled_from(names), st.sampled_from([v for n in names for v in GOOD_VALUES.get(n, [1])]), max_size=4
    )
    keys = st.sampled_from([*names, "workers", "nosuch", ""])
    junk = st.dictionaries(keys, json_values | st.sampled_from(["1e400", "-1", "1.5", "NaN", "true", "", "2.0"]), max_size=4)
    return mostly(good, junk, 6).map(lambda d: json.dumps(d).encode())


@budget(150)
@given(
    st.sampled_from([qaoa.Config, qnn.Config]).flatmap(
        lambda kind: st.tuples(
            st.just(kind),
            mostly(_hyperparameters(kind), st.binary(max_size=60) | json_values.map(lambda v: json.dumps(v).encode()), 8),
        )
    )
)
def test_hyperparameters_make_a_checked_config_or_a_typed_error(drawn):
    kind, content = drawn
    path = _file(content)
    try:
        hps = read_hyperparameters(path)
        hps.pop("workers", None)
        config = config_from_hyperparameters(kind, hps)
        config.validate()
    except WorkloadInputError as exc:
        event(f"refused: {type(exc).__name__}")
        assert exc.fix and "\n" not in exc.one_line()
        return
    event(f"config: {kind.__module__.rsplit('.', 2)[-2]}")
    for name, value in asdict(config).items():
        assert not isinstance(value, float) or math.isfinite(value), (name, value)


def _benchmark():
    backends = st.sampled_from([b.device_string for b in BACKENDS])
    params = st.fixed_dictionaries({"backend": backends, "nodes": st.integers(4, 30)}, optional={"depth": st.integers(1, 3)})
    medians = st.dictionaries(backends, st.floats(0.001, 10), min_size=1, max_size=3)
    extra = st.fixed_dictionaries(
        {},
        optional={
            "medians": medians | st.dictionaries(st.sampled_from(["value", "gradient"]), medians, min_size=1, max_size=2),
            "bytes_moved": st.dictionaries(backends, st.floats(0, 1e12), max_size=2),
            "copy_bytes_per_second": st.floats(0, 1e12),
            "chosen": st.dictionaries(backends, backends, max_size=1),
        },
    )
    good = st.fixed_dictionaries(
        {"stats": st.fixed_dictionaries({"median": st.floats(1e-6, 100)}), "params": params},
        optional={"name": st.text(max_size=20), "group": st.sampled_from(["qaoa", "qnn"]), "extra_info": extra},
    )
    junk = st.fixed_dictionaries(
        {"stats": st.fixed_dictionaries({"median": mostly(st.floats(1e-6, 100), json_values, 5)})},
        optional={"name": json_values, "group": json_values, "params": json_values, "extra_info": json_values},
    )
    return mostly(good, junk, 8)


@budget(150)
@given(mostly(st.lists(_benchmark(), max_size=5).map(lambda b: {"benchmarks": b}), json_values, 8))
def test_benchmark_results_make_a_table_or_a_typed_error(data):
    path = _file(json.dumps(data).encode())
    try:
        table = benchreport.rows(benchreport.read_results(path))
    except WorkloadInputError as exc:
        _refused(exc, path)
        return
    event(f"{len(table)} rows")
    text = benchreport.format_table(table)
    assert isinstance(text, str) and all(r.ratio >= 1.0 - 1e-12 and r.median > 0 for r in table)


prices = st.dictionaries(
    st.sampled_from([b.device_string for b in BACKENDS] + ["lightning.qubit"]) | st.text(max_size=10),
    st.dictionaries(
        st.sampled_from([*benchreport.UNITS, "per_day"]),
        st.floats(allow_nan=False) | st.integers(-5, 5) | st.booleans(),
        max_size=2,
    ),
    max_size=3,
)


def _toml(table: dict) -> str:
    lines = []
    for backend, entry in table.items():
        lines.append(f"[prices.{json.dumps(backend)}]")
        lines += [
            f"{k} = {'true' if v is True else 'false' if v is False else repr(v).replace('inf', 'inf')}" for k, v in entry.items()
        ]
    return "\n".join(lines)


@budget(100)
@given(mostly(prices.map(_toml), st.text(max_size=80), 7))
def test_prices_are_per_second_or_a_typed_error(text):
    path = _file(text.encode())
    try:
        found = benchreport.read_prices(path)
    except WorkloadInputError as exc:
        _refused(exc, path)
        return
    event("prices")
    assert found and all(0 <= v < math.inf for v in found.values())


FACTS = MachineFacts(host_memory_available=1 << 34, cores=2, distributions={"pennylane-lightning": "0.45.0"})


def _profile():
    seconds = st.dictionaries(
        st.sampled_from([b.key for b in BACKENDS]) | st.text(max_size=8),
        st.dictionaries(
            st.integers(-(10**6), 10**6).map(str) | st.text(max_size=4), st.floats(1e-9, 1e3) | json_values, max_size=4
        )
        | json_values,
        max_size=3,
    )
    good = st.fixed_dictionaries(
        {"fingerprint": st.just(calibration.fingerprint(FACTS)), "seconds": seconds},
        optional={
            "schema": st.sampled_from([calibration.SCHEMA, 0, "1", None]),
            "kind": st.sampled_from(["qaoa", "qnn", 3]),
            "workload": json_values,
        },
    )
    return mostly(good, json_values, 8)


@budget(150)
@given(_profile(), st.integers(-(2**40), 2**40))
def test_a_calibration_profile_is_used_or_ignored_never_a_crash(data, wires):
    path = _file(json.dumps(data).encode())
    profile = calibration.load_profile(FACTS, path)
    event("used" if profile is not None else "ignored")
    if profile is None:
        return
    for key in profile.seconds:
        predicted = profile.predict(key, wires)
        assert predicted is None or (predicted >= 0 and not math.isnan(predicted)), predicted
    calibration.fastest(profile, [b for b in BACKENDS if b.key in profile.seconds], wires)


@budget(80)
@given(
    mostly(
        st.fixed_dictionaries(
            {
                "schema": st.just(calibration.SCHEMA),
                "kind": st.just("circuits"),
                "fingerprint": st.just(calibration.fingerprint(FACTS)),
                "backends": st.dictionaries(
                    st.sampled_from([b.key for b in BACKENDS]),
                    st.dictionaries(
                        st.sampled_from(["execution", "gate", "diagonal", "gradient", "x"]),
                        st.floats(0, 1) | json_values,
                        max_size=4,
                    )
                    | json_values,
                    max_size=2,
                ),
            }
        ),
        json_values,
        8,
    )
)
def test_a_cost_model_is_used_or_ignored_never_a_crash(data):
    model = calibration.load_model(FACTS, _file(json.dumps(data).encode()))
    event(f"{len(model)} backends")
    for costs in model.values():
        assert all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in asdict(costs).values()), costs


@budget(60)
@given(
    st.integers(0, 4096),
    st.integers(0, 4096),
    st.sampled_from([b"", b"\xef\xbb\xbf", b"\xff\xfe"]),
    st.sampled_from([b"a", b"\xc3\xa9", b"\n"]),
)
def test_a_file_is_read_whole_up_to_its_limit_and_refused_past_it(size, limit, start, unit):
    from qbackends.userfiles import read_text

    content = start + unit * (size // len(unit))
    path = _file(content)
    try:
        text = read_text(path, "Data file", "pass a smaller file.", limit)
    except WorkloadInputError as exc:
        event("refused: over" if len(content) > limit else "refused: not UTF-8")
        assert (len(content) > limit and "is over" in exc.message) or (start == b"\xff\xfe" and "UTF-16" in exc.message)
        return
    event("read")
    assert len(content) <= limit and text == content.decode("utf-8-sig")


def test_a_device_that_never_ends_is_read_no_further_than_the_limit():
    from qbackends.userfiles import read_text

    with pytest.raises(WorkloadInputError) as err:
        read_text("/dev/zero", "Data file", "pass a CSV file.", 1024)
    assert str(err.value) == "Data file '/dev/zero' is over 1024 bytes. Fix: pass a CSV file."


@budget(80)
@given(
    mostly(
        st.fixed_dictionaries(
            {
                "schema": st.just(decisionstore.SCHEMA) | json_values,
                "backend": st.sampled_from([b.key for b in BACKENDS]) | json_values,
                "predicted": st.dictionaries(st.sampled_from([b.key for b in BACKENDS]), st.floats() | json_values, max_size=3)
                | json_values,
                "measured": st.dictionaries(st.text(max_size=8), st.floats(), max_size=2) | json_values,
                "refused": st.dictionaries(st.text(max_size=8), st.text(max_size=8) | json_values, max_size=2),
                "shape": st.dictionaries(st.sampled_from(["wires", "gates", "x"]), st.integers(0, 30) | json_values)
                | json_values,
                "stored": st.just("2026-12-03T17:00:00+00:00") | json_values,
            }
        ),
        json_values,
        8,
    ),
    st.binary(max_size=8),
)
def test_a_stored_decision_is_read_as_numbers_or_ignored_never_a_crash(data, tail):
    store = decisionstore.DecisionStore(Path(_FOLDER.name) / "decisions", {"machine": "fuzz"})
    path = store.path("key")
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_bytes(json.dumps(data).encode() + tail)
    stored = store.get("key")
    event("read" if stored is not None else "ignored")
    if stored is not None:
        assert isinstance(stored.backend, str)
        assert all(math.isfinite(v) and v >= 0 for v in [*stored.predicted.values(), *stored.measured.values()])
