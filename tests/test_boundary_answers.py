"""Inputs that once ended in "internal error", an abort or a silent acceptance: each now answers in one typed line
(exit 2) naming the input, the choices and the fix, or is read as the data it is."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pennylane as qml
import pytest

from qbackends import cli, get_device, probe
from qbackends.capabilities import kokkos_threads_problem
from qbackends.errors import UnsupportedOptionError
from qbackends.workloads import sonar

MPIEXEC = Path(sys.executable).parent / "mpiexec"
SONAR_ROWS = sonar.sonar_text().splitlines()[:12]


def one_line(capsys) -> str:
    """The one line a refused command printed on stderr (nothing on stdout but what ran before)."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_device_without_the_asked_gradient_is_named_with_the_methods_it_has(tmp_path, capsys):
    pytest.importorskip("braket.pennylane_plugin", reason="the Braket plugin: pip install ./plugins/qbackends-braket")
    argv = ["run", "qaoa", "--device", "local:braket/braket.local.qubit", "--diff-method", "adjoint", "--nodes", "4"]
    assert cli.main([*argv, "--edges", "4", "--results-dir", str(tmp_path / "r"), "--quiet", "--no-plot"]) == 2
    assert one_line(capsys) == (
        "qbackends: error: diff_method 'adjoint' cannot differentiate this circuit on local:braket/braket.local.qubit: "
        "it has no adjoint method for its operations; methods that can there: parameter-shift, direct-hadamard, "
        "reversed-direct-hadamard, finite-diff, spsa. Fix: pass --diff-method parameter-shift."
    )
    assert not (tmp_path / "r" / "qaoa-results.json").exists()


def test_a_gradient_that_needs_a_free_wire_is_refused_before_it_runs(tmp_path, capsys):
    argv = ["run", "qaoa", "--device", "lightning.qubit", "--diff-method", "hadamard", "--nodes", "4", "--edges", "4"]
    assert cli.main([*argv, "--results-dir", str(tmp_path), "--quiet", "--no-plot"]) == 2
    assert one_line(capsys) == (
        "qbackends: error: diff_method 'hadamard' cannot differentiate this circuit on local:pennylane/lightning.qubit: "
        "hadamard needs an auxiliary wire, and the circuit takes all 4 of the device's; methods that can there: adjoint, "
        "parameter-shift, direct-hadamard, reversed-direct-hadamard, finite-diff, spsa. Fix: pass --diff-method adjoint."
    )


def test_the_qnn_asks_its_device_for_the_gradient_before_it_trains(tmp_path, capsys):
    argv = ["run", "qnn", "--device", "lightning.qubit", "--diff-method", "backprop", "--nwires", "2", "--ndata", "8"]
    assert cli.main([*argv, "--epochs", "1", "--results-dir", str(tmp_path), "--quiet"]) == 2
    assert one_line(capsys) == (
        "qbackends: error: diff_method 'backprop' cannot differentiate this circuit on local:pennylane/lightning.qubit: "
        "its results are not differentiable by backpropagation; methods that can there: adjoint, parameter-shift, "
        "direct-hadamard, reversed-direct-hadamard, finite-diff, spsa. Fix: pass --diff-method adjoint."
    )


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (
            b'{"layers": ' + b"[" * 3000 + b"]" * 3000 + b"}",
            "qbackends: error: Hyperparameter file '{hp}' is nested 3001 levels deep; qbackends reads JSON of up to 64. "
            'Fix: write a JSON object such as {{"layers": 2, "stepsize": 0.1}}.',
        ),
        (
            b'{"layers": "\xe9"}',
            "qbackends: error: Hyperparameter file '{hp}' is not UTF-8 text (byte 0xe9 at offset 12). "
            'Fix: save it as UTF-8; write a JSON object such as {{"layers": 2, "stepsize": 0.1}}.',
        ),
        (
            '{"layers": 2}'.encode("utf-16"),
            "qbackends: error: Hyperparameter file '{hp}' is not UTF-8 text (it starts with a UTF-16 byte-order mark). "
            'Fix: save it as UTF-8; write a JSON object such as {{"layers": 2, "stepsize": 0.1}}.',
        ),
    ],
)
def test_a_hyperparameter_file_too_deep_or_not_utf8_is_one_line(tmp_path, capsys, content, line):
    script, hp = tmp_path / "job.py", tmp_path / "hp.json"
    script.write_text("")
    hp.write_bytes(content)
    argv = ["job", "run", str(script), "--device", "lightning.qubit", "--hyperparameters", str(hp)]
    assert cli.main([*argv, "--jobs-dir", str(tmp_path / "jobs")]) == 2
    assert one_line(capsys) == line.format(hp=hp)
    assert not (tmp_path / "jobs").exists()


def test_a_hyperparameter_file_with_a_byte_order_mark_is_read(tmp_path):
    from qbackends.hybridjob import read_hyperparameters

    path = tmp_path / "hp.json"
    path.write_bytes(b'\xef\xbb\xbf{"layers": 3}')
    assert read_hyperparameters(path) == {"layers": "3"}


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "expval",
            "decompositions key 'expval' is not a PennyLane operator. Fix: use the operator's class name as PennyLane "
            "spells it, e.g. 'MultiRZ', 'CRot', 'PauliRot'.",
        ),
        (
            "MultiRx",
            "decompositions key 'MultiRx' is not a PennyLane operator. Fix: did you mean 'MultiRZ'? use the operator's "
            "class name as PennyLane spells it, e.g. 'MultiRZ', 'CRot', 'PauliRot'.",
        ),
        (
            qml.operation.Operation,
            "decompositions key 'Operation' is not a PennyLane operator. Fix: use the operator's class name as PennyLane "
            "spells it, e.g. 'MultiRZ', 'CRot', 'PauliRot'.",
        ),
        (
            "Adjoint",
            "decompositions key 'Adjoint' is not a PennyLane operator (it is not one operator: its instances are named "
            "after the operator they hold). Fix: use the operator's class name as PennyLane spells it, e.g. 'MultiRZ', "
            "'CRot', 'PauliRot'.",
        ),
    ],
)
@pytest.mark.parametrize("spec", ["local:pennylane/lightning.qubit", "auto"])
def test_a_decomposition_key_that_names_no_operator_is_refused(spec, key, message):
    with pytest.raises(UnsupportedOptionError) as err:
        get_device(spec, wires=2, decompositions={key: qml.MultiRZ.compute_decomposition})
    assert str(err.value) == message


def test_an_alias_key_is_the_operator_it_stands_for():
    dev = get_device("lightning.qubit", wires=1, decompositions={"X": lambda wires: [qml.RX(np.pi, wires=wires)]})
    assert "PauliX" in dev.qbackends_rules.fixed

    @qml.qnode(dev)
    def circuit():
        qml.X(0)
        return qml.state()

    assert np.allclose(circuit(), [0, -1j])  # RX(π), not PauliX: the rule ran
    with pytest.raises(UnsupportedOptionError, match=r"both name PauliX; one operator takes one rule\."):
        get_device("lightning.qubit", wires=1, decompositions={"X": qml.X.compute_decomposition, qml.PauliX: qml.X})


def test_a_sweep_checks_every_size_before_it_trains_any(tmp_path, capsys):
    argv = ["sweep", "qnn", "--device", "lightning.qubit", "--nwires", "2,40", "--results-dir", str(tmp_path), "--quiet"]
    assert cli.main(argv) == 2
    line = one_line(capsys)
    assert line.startswith("qbackends: error: --nwires 2,40, size 40: 40 wires on local:pennylane/lightning.qubit at c128 need ")
    assert " available. Nothing was trained. Fix: use at most " in line
    assert sorted(p.name for p in tmp_path.iterdir()) == [".qbackends.lock"]  # no nwires-2, no table


def test_thread_counts_lightning_kokkos_cannot_start_with_are_refused_before_it_starts(tmp_path):
    cores = probe.cpu_cores()
    command = [sys.executable, "-m", "qbackends.cli", "run", "qaoa", "--device", "lightning.kokkos", "--nodes", "4"]
    env = {**os.environ, "OMP_NUM_THREADS": "1000"}
    run = subprocess.run([*command, "--edges", "4", "--quiet", "--results-dir", str(tmp_path)], env=env, capture_output=True)
    assert run.returncode == 2 and run.stdout == b""
    assert run.stderr.decode().splitlines() == [
        "qbackends: error: local:pennylane/lightning.kokkos cannot run here: OMP_NUM_THREADS=1000 asks lightning.kokkos "
        f"for 1000 threads, more than the {cores} cores this process may use (Kokkos crashes the process past 512). Fix: "
        f"unset OMP_NUM_THREADS, or set it to a count from 1 to {cores} (KOKKOS_NUM_THREADS sets lightning.kokkos' "
        "threads alone)"
    ]


@pytest.mark.parametrize(
    ("threads", "problem"),
    [
        ({}, ""),
        ({"OMP_NUM_THREADS": "4"}, "OMP_NUM_THREADS=4 asks lightning.kokkos for 4 threads, more than the 2 cores"),
        ({"OMP_NUM_THREADS": "2,8"}, ""),  # nested teams: the outer one is Kokkos'
        ({"OMP_NUM_THREADS": "abc"}, ""),  # OpenMP ignores what it cannot read
        ({"OMP_NUM_THREADS": "1000", "KOKKOS_NUM_THREADS": "2"}, ""),  # Kokkos' own variable wins
        ({"KOKKOS_NUM_THREADS": "0"}, "KOKKOS_NUM_THREADS='0' is not a thread count from 1 to 2"),
        ({"KOKKOS_NUM_THREADS": ""}, "KOKKOS_NUM_THREADS='' is not a thread count from 1 to 2"),
        ({"KOKKOS_NUM_THREADS": "-1"}, "KOKKOS_NUM_THREADS='-1' is not a thread count from 1 to 2"),
    ],
)
def test_kokkos_thread_variables_are_judged_from_recorded_facts(threads, problem):
    from conftest import recorded_facts

    facts = probe.MachineFacts(**{**recorded_facts("laptop").__dict__, "cores": 2, "threads": threads})
    why, fix = kokkos_threads_problem(facts)
    assert why.startswith(problem) and bool(why) == bool(problem)
    assert bool(fix) == bool(problem)


def test_a_device_needs_a_wire():
    for wires, message in (
        (0, "wires=0 is out of range (1 to 512)"),
        ([], "wires=[] names no wires; a device has at least one."),
    ):
        with pytest.raises(UnsupportedOptionError) as err:
            get_device("local:pennylane/lightning.qubit", wires=wires)
        assert str(err.value).startswith(message)


def test_a_csv_with_a_byte_order_mark_is_the_data_it_holds(tmp_path, capsys):
    plain, marked = tmp_path / "plain.csv", tmp_path / "marked.csv"
    plain.write_text("\n".join(SONAR_ROWS) + "\n")
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes().replace(b"\n", b"\r\n"))  # as a spreadsheet saves it
    a, b = sonar.load(plain), sonar.load(marked)
    assert np.array_equal(a.features, b.features) and np.array_equal(a.labels, b.labels) and len(b) == 12
    argv = ["run", "qnn", "--device", "lightning.qubit", "--data", str(marked), "--nwires", "2", "--ndata", "12"]
    assert cli.main([*argv, "--epochs", "1", "--results-dir", str(tmp_path / "r"), "--quiet"]) == 0
    assert json.loads((tmp_path / "r" / "qnn-results.json").read_text())["train_rows"] == 9


@pytest.mark.skipif(
    not MPIEXEC.exists() or importlib.util.find_spec("mpi4py") is None,
    reason=f"no mpiexec next to {sys.executable} or no mpi4py: pip install 'qbackends[mpi]'",
)
def test_a_typed_error_under_mpi_is_one_line(tmp_path):
    checkpoint = tmp_path / "checkpoints" / "qaoa-checkpoint.json"
    checkpoint.parent.mkdir()
    checkpoint.write_text("garbage")
    command = [sys.executable, "-m", "qbackends.cli", "run", "qaoa", "--mpi", "--nodes", "12", "--edges", "14", "--resume"]
    run = subprocess.run(
        [str(MPIEXEC), "-n", "2", *command, "--quiet", "--no-plot", "--results-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        f"qbackends: error: Checkpoint '{checkpoint}' is unreadable: Expecting value: line 1 column 1 (char 0). "
        "Fix: remove it to start over."
    ]
    assert checkpoint.read_text() == "garbage"  # nothing the user had is lost
