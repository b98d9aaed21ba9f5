"""The `qbackends` command: tables, JSON, and one-line errors."""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import subprocess
import sys

import pytest


def cli(*args):
    return subprocess.run([sys.executable, "-m", "qbackends.cli", *args], capture_output=True, text=True)


def test_probe_gpu_on_this_cpu_machine_reports_the_reason():
    out = cli("probe", "local:pennylane/lightning.gpu", "--wires", "20", "--json")
    data = json.loads(out.stdout)
    assert out.returncode == 1
    assert data["ok"] is False and data["device"] == "local:pennylane/lightning.gpu"
    assert "no NVIDIA GPU" in data["reason"] and data["bytes_needed"] == 4 * 16 * 2**20


def test_probe_cpu_backend_lists_rules_and_fit():
    out = cli("probe", "local:pennylane/lightning.qubit", "--wires", "20")
    assert out.returncode == 0
    assert "PauliRot(X|Y|Z) -> RX|RY|RZ" in out.stdout and "0.141 GiB: fits" in out.stdout
    assert "CRot, PCPhase, PauliRot, QubitUnitary, Rot" in out.stdout  # adjoint cannot differentiate: from the TOML


def test_list_json_names_every_builtin():
    data = json.loads(cli("list", "--json").stdout)
    devices = {d["device"] for d in data}
    assert {"local:pennylane/lightning.qubit", "local:pennylane/lightning.gpu", "local:qbackends/fused.qubit"} <= devices
    qubit = next(d for d in data if d["device"] == "local:pennylane/lightning.qubit")
    assert qubit["ok"] and qubit["max_wires"] >= 20 and qubit["plugin"] == "pennylane"


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (("probe", "local:pennylane/lightning.qubt"), "qbackends: error: Unknown simulator 'lightning.qubt'"),
        (
            ("probe", "local:pennylane/lightning qubit"),
            "qbackends: error: Device string 'local:pennylane/lightning qubit' has the character ' '",
        ),
        (
            ("run", "qaoa", "--device", "local:pennylane/lightning.qubit", "--nodes", "40", "--edges", "40"),
            "qbackends: error: 40 wires on local:pennylane/lightning.qubit",
        ),
        (("run", "qaoa", "--device", "arn:aws:braket:::device/quantum-simulator/amazon/sv1"), "qbackends: error: Device string"),
    ],
)
def test_errors_are_one_line(args, start):
    out = cli(*args)
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.startswith("qbackends:")]
    assert len(lines) == 1 and lines[0].startswith(start), out.stderr
    assert "Traceback" not in out.stderr and "Fix:" in lines[0]


def test_probe_says_when_auto_takes_a_backend():
    fused = json.loads(cli("probe", "local:qbackends/fused.qubit", "--json").stdout)
    assert fused["auto"] == "per circuit: when the cost model, or a trial on the circuit, finds it the fastest here"
    kokkos = cli("probe", "local:pennylane/lightning.kokkos").stdout
    assert "per circuit from 16 wires: when the cost model, or a trial on the circuit, finds it the fastest here" in kokkos
    tensor = json.loads(cli("probe", "local:pennylane/lightning.tensor", "--json").stdout)
    assert tensor["auto"] == "never: only when asked for by name"


def _process_settings():
    logger = logging.getLogger("qbackends")
    return dict(os.environ), list(logger.handlers), logger.level, list(logging.root.handlers)


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["list"], 0), (["run", "qaoa", "--nodes", "1"], 2), (["list", "--help"], None), (["probe", "--no-such-option"], None)],
)
def test_the_command_leaves_the_environment_and_logging_as_they_were(argv, code, monkeypatch, capsys):
    """main() sets OMP_WAIT_POLICY and shows log lines for as long as it runs; tests and programs that call it
    in-process find both as they were after it returns, exits or fails."""
    from qbackends import cli

    for name in cli.THREAD_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(logging.root, "handlers", [])  # as in a plain program (pytest's own capture aside)
    before = _process_settings()
    if code is None:
        with pytest.raises(SystemExit):
            cli.main(argv)
    else:
        assert cli.main(argv) == code
    assert _process_settings() == before


def test_the_processes_a_command_starts_inherit_its_thread_settings(monkeypatch, capsys):
    from qbackends import cli

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(logging.root, "handlers", [])
    seen = {}

    def child_sees(args):
        child = "import os; print(os.environ.get('OMP_WAIT_POLICY'))"
        seen["child"] = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout.strip()
        logging.getLogger("qbackends").info("auto: a decision")
        return 0

    monkeypatch.setattr(cli, "cmd_list", child_sees)
    monkeypatch.setattr(cli, "WRITING_COMMANDS", ())
    assert cli.main(["list"]) == 0
    assert seen["child"] == "PASSIVE" and "OMP_WAIT_POLICY" not in os.environ
    assert capsys.readouterr().err == ""  # `list` shows no log lines; `run` and `sweep` do (below)
    monkeypatch.setattr(cli, "cmd_list", lambda args: logging.getLogger("qbackends").info("auto: a decision"))
    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    run_qaoa = parser.parse_args(["run", "qaoa"])
    monkeypatch.setattr(parser, "parse_args", lambda argv: argparse.Namespace(**{**vars(run_qaoa), "func": cli.cmd_list}))
    assert cli.main(["run", "qaoa"]) == 0
    assert capsys.readouterr().err == "auto: a decision\n"
    assert not logging.getLogger("qbackends").handlers


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "qaoa", "--nodes", "-3"],
            "nodes=-3 is out of range: it must be from 2 to 40. Fix: pass --nodes a whole number from 2 to 40.",
        ),
        (["run", "qnn", "--epochs", "0"], "epochs=0 must be at least 1. Fix: pass --epochs 1 or more."),
    ],
)
def test_a_workloads_bad_setting_is_answered_before_torch_or_pennylane_is_imported(args, message):
    """A run's settings are read and checked before torch or PennyLane is imported (PennyLane's import alone took
    6 s on a 2-core machine)."""
    assert importlib.util.find_spec("torch") and importlib.util.find_spec("pennylane")  # installed: their absence means something
    code = f"import sys\nfrom qbackends.cli import main\ncode = main({args!r})\nprint(code, [m for m in ('pennylane', 'torch') if m in sys.modules])\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout == "2 []\n"
    assert out.stderr == f"qbackends: error: {message}\n"
