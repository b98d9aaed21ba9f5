from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from qbackends import get_registry
from qbackends.devicestring import parse
from qbackends.errors import UnknownBackendError
from qbackends.registry import build_registry

BUILTINS = {
    "default.qubit",
    "lightning.qubit",
    "lightning.gpu",
    "lightning.kokkos",
    "lightning.amdgpu",
    "lightning.tensor",
    "fused.qubit",
    "batched.qubit",
}


def test_builtins_come_through_the_public_entry_point_group():
    eps = {ep.name: ep for ep in metadata.entry_points(group="qbackends")}
    assert eps["pennylane"].value == "qbackends.builtin"
    registry = get_registry()
    ours = {b.simulator for k, b in registry.backends.items() if registry.owners[k] == "pennylane"}
    assert ours == BUILTINS
    assert registry.plugins["pennylane"] == "qbackends"


def test_lookup_full_and_bare():
    registry = get_registry()
    assert registry.lookup(parse("local:pennylane/lightning.qubit")).device_name == "lightning.qubit"
    assert registry.lookup(parse("lightning.kokkos")).key == "pennylane/lightning.kokkos"


def test_unknown_simulator_did_you_mean():
    with pytest.raises(UnknownBackendError) as err:
        get_registry().lookup(parse("local:pennylane/lightning.qubt"))
    text = str(err.value)
    assert "'lightning.qubt'" in text and "local:pennylane/lightning.kokkos" in text
    assert err.value.fix == "did you mean 'local:pennylane/lightning.qubit'?"


def test_unknown_provider_lists_providers():
    with pytest.raises(UnknownBackendError) as err:
        get_registry().lookup(parse("local:pennylan/lightning.qubit"))
    assert "registered providers: " in str(err.value) and "pennylane" in str(err.value)
    assert err.value.fix == "did you mean provider 'pennylane'?"


def test_plugin_selection_env_keeps_builtin(monkeypatch):
    registry = build_registry(only="nonexistent")
    assert set(registry.plugins) == {"pennylane"}


def test_list_and_registry_do_not_import_pennylane_or_torch():
    code = (
        "import sys, qbackends; from qbackends.cli import main; main(['list']); main(['plugins']);"
        "bad = [m for m in ('pennylane', 'torch', 'pennylane_lightning') if m in sys.modules];"
        "sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "local:pennylane/lightning.qubit" in result.stdout


def test_a_plugin_named_in_the_environment_but_not_installed_is_reported(monkeypatch):
    from qbackends import registry

    monkeypatch.setenv("QBACKENDS_PLUGINS", "nosuch")
    registry.reset_registry()
    failures = registry.get_registry().failures
    assert [f.plugin for f in failures] == ["nosuch"]
    assert failures[0].error.startswith("QBACKENDS_PLUGINS names 'nosuch', which no installed package provides; installed: ")
