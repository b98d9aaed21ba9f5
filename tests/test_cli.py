"""The `qbackends` command: tables, JSON, and one-line errors."""

from __future__ import annotations

import json
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
