"""`qbackends bench report`: a recorded pytest-benchmark file, prices, the table and the plot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from qbackends import benchreport
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


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[prices."x"]\nper_minute = 1\nper_hour = 2\n', "must be exactly one of per_second, per_minute, per_hour"),
        ('[prices."x"]\nper_minute = -1\n', "non-negative number"),
        ("[other]\na = 1\n", "has no \\[prices"),
        ("prices = [", "is not TOML"),
    ],
)
def test_bad_price_files(tmp_path, text, message):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(WorkloadInputError, match=message):
        benchreport.read_prices(path)


def test_not_a_benchmark_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{"foo": 1}')
    with pytest.raises(WorkloadInputError, match="is not a pytest-benchmark results file"):
        benchreport.read_results(path)


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
