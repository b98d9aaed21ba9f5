"""`qbackends bench report`: a recorded pytest-benchmark file, prices, the table and the plot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qbackends import benchreport
from qbackends.cli import main
from qbackends.errors import WorkloadInputError

SAMPLE = Path(__file__).parent / "data" / "bench-sample.json"
GRADIENT = "QAOA p=2 value + adjoint gradient per iteration"


def test_rows_rank_backends_per_size():
    rows = benchreport.rows(benchreport.read_results(SAMPLE))
    at12 = [r for r in rows if r.group == GRADIENT and r.size == 12]
    assert [r.backend for r in at12] == [
        "local:pennylane/lightning.qubit",
        "auto",
        "local:pennylane/lightning.kokkos",
        "local:qbackends/fused.qubit",
    ]
    assert at12[0].ratio == 1.0
    assert at12[2].ratio == pytest.approx(0.008293595999930403 / 0.005249673999969673)
    assert all(r.cost is None for r in rows)
    assert {r.group for r in rows} == {GRADIENT, "QAOA p=2 energy per evaluation"}


def test_prices_per_minute_and_short_names(tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text(
        '[prices."local:pennylane/lightning.qubit"]\nper_minute = 0.00768\n[prices."lightning.kokkos"]\nper_hour = 3.825\n'
    )
    rows = benchreport.rows(benchreport.read_results(SAMPLE), benchreport.read_prices(prices))
    qubit = next(r for r in rows if r.group == GRADIENT and r.size == 16 and r.backend.endswith("lightning.qubit"))
    kokkos = next(r for r in rows if r.group == GRADIENT and r.size == 16 and r.backend.endswith("lightning.kokkos"))
    assert qubit.cost == pytest.approx(0.022924498999600473 * 0.00768 / 60)
    assert kokkos.cost == pytest.approx(0.02013714999975491 * 3.825 / 3600)
    assert next(r for r in rows if r.backend == "auto").cost is None


PRICES_FIX = ' Fix: pass a TOML file of [prices."BACKEND"] tables.'
RESULTS_FIX = " Fix: pass the file written by pytest --benchmark-json=FILE."
PRICE_RULE = "must be exactly one of per_second, per_minute, per_hour with a non-negative, finite number."


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[prices."x"]\nper_minute = 1\nper_hour = 2\n', "Price of 'x' in {p} (per_minute = 1, per_hour = 2) " + PRICE_RULE),
        ('[prices."x"]\nper_minute = -1\n', "Price of 'x' in {p} (per_minute = -1) " + PRICE_RULE),
        ('[prices."x"]\nper_minute = nan\n', "Price of 'x' in {p} (per_minute = nan) " + PRICE_RULE),
        ('[prices."x"]\nper_hour = inf\n', "Price of 'x' in {p} (per_hour = inf) " + PRICE_RULE),
        ('[prices."x"]\nper_minute = "0.5"\n', "Price of 'x' in {p} (per_minute = '0.5') " + PRICE_RULE),
        ('[prices."x"]\nper_minute = true\n', "Price of 'x' in {p} (per_minute = True) " + PRICE_RULE),
        ('[prices."x"]\n', "Price of 'x' in {p} (an empty table) " + PRICE_RULE),
        ("[prices]\nx = 3\n", "Price of 'x' in {p} (3) " + PRICE_RULE),
    ],
)
def test_a_bad_price_is_refused_naming_the_backend(tmp_path, text, message):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(WorkloadInputError) as err:
        benchreport.read_prices(path)
    fix = 'Fix: write e.g. [prices."x"] then per_minute = 0.00768.'
    assert str(err.value) == message.format(p=repr(str(path))) + " " + fix


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b"[other]\na = 1\n",
            'Price file {p} has no [prices."BACKEND"] tables. '
            'Fix: write e.g. [prices."local:pennylane/lightning.qubit"] then per_minute = 0.00768.',
        ),
        (b"prices = 3\n", "Price file {p}: prices must be a table, not 3." + PRICES_FIX),
        (b"prices = [1]\n", "Price file {p}: prices must be a table, not a list." + PRICES_FIX),
        (
            b"\xff\xfe\x00",
            "Price file {p} is not UTF-8 text (it starts with a UTF-16 byte-order mark)."
            + PRICES_FIX.replace("Fix: ", "Fix: save it as UTF-8; "),
        ),
        (
            b"\x80abc",
            "Price file {p} is not UTF-8 text (byte 0x80 at offset 0)." + PRICES_FIX.replace("Fix: ", "Fix: save it as UTF-8; "),
        ),
        (b"a = " + b"[" * 100000 + b"]" * 100000, "Price file {p} is nested too deeply to be a price file." + PRICES_FIX),
    ],
)
def test_a_file_that_is_not_a_price_file_is_refused(tmp_path, content, message):
    path = tmp_path / "p.toml"
    path.write_bytes(content)
    with pytest.raises(WorkloadInputError) as err:
        benchreport.read_prices(path)
    assert str(err.value) == message.format(p=repr(str(path)))


def test_a_price_file_that_is_not_toml(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("prices = [")
    with pytest.raises(WorkloadInputError, match="is not TOML"):
        benchreport.read_prices(path)


def _entry(median, backend="a"):
    return {"name": f"t[{backend}-12]", "group": "g", "params": {"backend": backend, "nodes": 12}, "stats": {"median": median}}


def _interleaved(medians):
    return {"name": "q[8]", "params": {"nwires": 8}, "stats": {"median": 1.0}, "extra_info": {"medians": medians}}


BAD_MEDIAN = "a median must be a positive, finite number of seconds."


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (_entry(float("nan")), "entry 1 ('t[a-12]') has median nan; " + BAD_MEDIAN),
        (_entry(float("inf")), "entry 1 ('t[a-12]') has median inf; " + BAD_MEDIAN),
        (_entry(-0.5), "entry 1 ('t[a-12]') has median -0.5; " + BAD_MEDIAN),
        (_entry(0), "entry 1 ('t[a-12]') has median 0; " + BAD_MEDIAN),
        (_entry("0.5"), "entry 1 ('t[a-12]') has median '0.5'; " + BAD_MEDIAN),
        (_entry(True), "entry 1 ('t[a-12]') has median True; " + BAD_MEDIAN),
        ({"name": "t[a-12]", "params": {"backend": "a", "nodes": 12}}, "entry 1 ('t[a-12]') has no stats.median."),
        ({"name": "t[a-12]", "stats": {"mean": 0.5}}, "entry 1 ('t[a-12]') has no stats.median."),
        ({"name": "t", "params": [12], "stats": {"median": 0.5}}, "entry 1 ('t'): params must be an object, not a list."),
        ({"name": 5, "stats": {"median": 0.5}}, "entry 1: name must be a string, not 5."),
        ({**_entry(0.5), "extra_info": "x"}, "entry 1 ('t[a-12]'): extra_info must be an object, not 'x'."),
        (_interleaved({"a": 0.1, "b": float("nan")}), "entry 1 ('q[8]') has extra_info.medians['b'] = nan; " + BAD_MEDIAN),
        (_interleaved({"energy": {"a": -2}}), "entry 1 ('q[8]') has extra_info.medians['energy']['a'] = -2; " + BAD_MEDIAN),
        (_interleaved([0.1]), "entry 1 ('q[8]'): extra_info.medians must be an object, not a list."),
    ],
)
def test_a_bad_entry_is_refused_naming_its_index_and_name(tmp_path, entry, problem):
    """NaN, negative, zero, infinite or non-numeric medians, a missing stats, or parts of the wrong type:
    the whole file is refused (no ratio of the other rows is then nan, nor a negative time the fastest)."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"benchmarks": [_entry(0.5, "b"), entry]}))
    with pytest.raises(WorkloadInputError) as err:
        benchreport.read_results(path)
    fix = "Fix: rerun that benchmark with pytest --benchmark-json=FILE, or remove the entry."
    assert str(err.value) == f"Benchmark results {str(path)!r}: {problem} {fix}"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'{"benchmarks": [1]}',
            "Benchmark results {p}: entry 0 must be an object, not 1. "
            "Fix: remove that entry, or pass the file written by pytest --benchmark-json=FILE.",
        ),
        (
            b"\xff\xfe\x00",
            "Benchmark results file {p} is not UTF-8 text (it starts with a UTF-16 byte-order mark)."
            + RESULTS_FIX.replace("Fix: ", "Fix: save it as UTF-8; "),
        ),
        (
            b'{"benchmarks": ' + b"[" * 100000 + b"]" * 100000 + b"}",
            "Benchmark results file {p} is nested 100001 levels deep; qbackends reads JSON of up to 64." + RESULTS_FIX,
        ),
        (b'{"foo": 1}', "{p} is not a pytest-benchmark results file (no 'benchmarks' list)." + RESULTS_FIX),
    ],
)
def test_a_file_that_is_not_a_results_file_is_refused(tmp_path, content, message):
    path = tmp_path / "r.json"
    path.write_bytes(content)
    with pytest.raises(WorkloadInputError) as err:
        benchreport.read_results(path)
    assert str(err.value) == message.format(p=repr(str(path)))


def test_cli_prints_table_and_writes_plot(tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text('[prices."lightning.qubit"]\nper_minute = 0.00768\n')
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "qbackends.cli",
            "bench",
            "report",
            str(SAMPLE),
            "--prices",
            str(prices),
            "--plot",
            str(tmp_path / "p.png"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"## {GRADIENT}" in out.stdout
    assert "| 12 | local:pennylane/lightning.qubit | 0.00525 | 1.00 | 6.72e-07 |" in out.stdout
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    bad = subprocess.run(
        [sys.executable, "-m", "qbackends.cli", "bench", "report", str(tmp_path / "missing.json")], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.startswith("qbackends: error: Benchmark results") and "Traceback" not in bad.stderr


def test_a_benchmark_of_several_backends_side_by_side_gives_a_row_each():
    """The QNN layer benchmark times every path in one test (interleaved) and keeps their medians."""
    bench = {
        "group": "QNN quantum layer, batch 16, forward+backward",
        "name": "test_qnn_layer_batch_step[8]",
        "params": {"nwires": 8},
        "stats": {"median": 0.5},
        "extra_info": {"medians": {"auto: batched.qubit": 0.0016, "lightning.qubit adjoint (per sample)": 0.257}},
    }
    rows = benchreport.rows([bench])
    assert [(r.backend, r.size, r.ratio) for r in rows] == [
        ("auto: batched.qubit", 8, 1.0),
        ("lightning.qubit adjoint (per sample)", 8, pytest.approx(0.257 / 0.0016)),
    ]


def test_the_roofline_column_for_a_backend_that_counts_its_bytes():
    """The QAOA roofline benchmark: medians per kind of step, fused.qubit's bytes moved, and the copy
    bandwidth measured in the same run give a table per kind with GB/s and the fraction of copy."""
    bench = {
        "group": "QAOA p=2, qml.qaoa layers",
        "name": "test_qaoa_roofline[22-unweighted]",
        "params": {"nodes": 22, "weighted": False},
        "stats": {"median": 9.0},
        "extra_info": {
            "medians": {
                "value+gradient": {"local:qbackends/fused.qubit": 0.25, "local:pennylane/lightning.qubit": 7.5},
                "energy": {"local:qbackends/fused.qubit": 0.1, "local:pennylane/lightning.qubit": 1.5},
            },
            "bytes_moved": {
                "value+gradient": {"local:qbackends/fused.qubit": 2.5e9},
                "energy": {"local:qbackends/fused.qubit": 1.0e9},
            },
            "copy_bytes_per_second": 20e9,
        },
    }
    rows = benchreport.rows([bench])
    fused = {r.group: r for r in rows if r.backend.endswith("fused.qubit")}
    assert fused["QAOA p=2, qml.qaoa layers: value+gradient"].of_copy == pytest.approx(0.5)
    assert fused["QAOA p=2, qml.qaoa layers: energy"].bytes_per_second == pytest.approx(10e9)
    lightning = next(r for r in rows if r.group.endswith("value+gradient") and r.backend.endswith("lightning.qubit"))
    assert lightning.ratio == pytest.approx(30.0) and lightning.of_copy is None
    text = benchreport.format_table(rows)
    assert "| 22 | local:qbackends/fused.qubit | 0.25 | 1.00 | - | 10.0 | 50% |" in text
    assert "| 22 | local:pennylane/lightning.qubit | 7.5 | 30.00 | - | - | - |" in text


def test_an_auto_row_names_the_backend_it_took_and_that_backends_ratio():
    """Two rows of one device differ by the machine's noise alone: the auto row says which backend it
    took and how that backend's row compares with the fastest backend's."""
    bench = {
        "group": GRADIENT,
        "name": "test_qaoa_value_and_gradient[20]",
        "params": {"nodes": 20},
        "stats": {"median": 9.0},
        "extra_info": {
            "medians": {
                "local:qbackends/fused.qubit": 0.084,
                "local:pennylane/lightning.qubit": 0.62,
                "auto: QAOA workload": 0.065,
                "auto": 0.6,
            },
            "chosen": {"auto: QAOA workload": "local:qbackends/fused.qubit", "auto": "local:pennylane/lightning.qubit"},
        },
    }
    rows = {r.backend: r for r in benchreport.rows([bench])}
    assert rows["auto: QAOA workload"].chose == "local:qbackends/fused.qubit, x1.00 of the fastest backend"
    assert rows["auto"].chose == "local:pennylane/lightning.qubit, x7.38 of the fastest backend"
    assert rows["local:qbackends/fused.qubit"].chose is None
    text = benchreport.format_table(list(rows.values()))
    line = "| 20 | auto: QAOA workload (took local:qbackends/fused.qubit, x1.00 of the fastest backend) | 0.065 | 1.00 | - |"
    assert line in text


def test_cli_refuses_a_bad_results_file_in_one_line(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"benchmarks": [_entry(float("nan")), _entry(0.5, "b")]}))
    assert main(["bench", "report", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == (
        f"qbackends: error: Benchmark results {str(path)!r}: entry 0 ('t[a-12]') has median nan; a median must be a "
        "positive, finite number of seconds. Fix: rerun that benchmark with pytest --benchmark-json=FILE, or remove the entry.\n"
    )


def test_cli_refuses_a_plot_that_names_a_folder(tmp_path, capsys):
    assert main(["bench", "report", str(SAMPLE), "--plot", str(tmp_path)]) == 2
    out = capsys.readouterr()
    assert f"## {GRADIENT}" in out.out  # the table is printed before the plot is drawn
    assert out.err == (
        f"qbackends: error: The plot cannot be written to {str(tmp_path)!r}: Is a directory. "
        "Fix: pass --plot FILE.png naming a file (not a folder) in a writable place.\n"
    )
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind
