"""Third-party plugins, really installed (plugins/ and tests/plugin_fixtures/, by .ci/run)."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pennylane as qml
import pytest
from circuits import qaoa_qnode, random_params

from qbackends import get_device, get_registry, hookspecs
from qbackends.errors import BackendUnavailableError, UnknownBackendError

ROOT = Path(__file__).parent.parent
INSTALLED = {ep.name for ep in metadata.entry_points(group="qbackends")}
NEEDED = {"braket", "qulacs", "fixture-broken", "fixture-duplicate", "fixture-failing"}


def test_plugin_packages_are_installed():
    missing = NEEDED - INSTALLED
    assert not missing, f"install them: pip install ./plugins/* ./tests/plugin_fixtures/* (missing entry points: {missing})"


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "qbackends.cli", *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


# ---- the hooks: one test each (test_hook_<name>), checked by test_every_hook_is_documented_and_tested


def test_hook_register_backends():
    registry = get_registry()
    assert registry.owners["braket/braket.local.qubit"] == "braket"
    assert registry.plugins["braket"] == "qbackends-braket"
    assert registry.owners["qulacs/qulacs.simulator"] == "qulacs"


def test_hook_register_decompositions():
    params = random_params(3, seed=2)
    dev = get_device("local:qulacs/qulacs.simulator", wires=3)
    assert "IsingZZ -> CNOT RZ CNOT" in dev.qbackends_rules.names

    def circuit(device, diff_method):
        @qml.qnode(device, diff_method=diff_method)
        def f(x):
            qml.RY(x[0], 0)
            qml.Hadamard(1)
            qml.IsingZZ(x[1], wires=[0, 1])
            qml.IsingZZ(x[2], wires=[1, 2])
            return qml.expval(qml.PauliX(1) + qml.PauliZ(0) @ qml.PauliZ(2))

        return f

    ours, reference = circuit(dev, "parameter-shift"), circuit(qml.device("default.qubit", wires=3), "parameter-shift")
    names = {op.name for op in qml.workflow.construct_batch(ours, level="device")(params)[0][0].operations}
    assert "IsingZZ" not in names and {"CNOT", "RZ"} <= names
    assert abs(ours(params) - reference(params)) < 1e-8
    np.testing.assert_allclose(qml.grad(ours)(params), qml.grad(reference)(params), atol=1e-8)
    # the rule is the qulacs plugin's: lightning devices do not get it
    assert "IsingZZ -> CNOT RZ CNOT" not in get_device("lightning.qubit", wires=3).qbackends_rules.names


def test_every_hook_is_documented_and_tested():
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    tests = (Path(__file__).parent / "test_plugins.py").read_text()
    hooks = [name for name, obj in vars(hookspecs).items() if callable(obj) and hasattr(obj, "qbackends_spec")]
    assert set(hooks) == {"register_backends", "register_decompositions"}
    for name in hooks:
        signature = f"{name}{inspect.signature(getattr(hookspecs, name))}".replace("'", "")
        assert signature in contributing, f"CONTRIBUTING.md lacks the exact signature: {signature}"
        assert re.search(rf"^def test_hook_{name}\(", tests, re.M), f"no test_hook_{name}"


# ---- the Braket plugin


@pytest.mark.parametrize("spec", ["local:braket/braket.local.qubit", "local:qulacs/qulacs.simulator"])
def test_qaoa_energy_on_plugin_devices_equals_lightning(spec):
    params = random_params((2, 2))
    ours = qaoa_qnode(get_device(spec, wires=6), nodes=6, edges=8, diff_method="parameter-shift")
    reference = qaoa_qnode(qml.device("lightning.qubit", wires=6), nodes=6, edges=8)
    assert abs(ours(params) - reference(params)) < 1e-8
    np.testing.assert_allclose(qml.grad(ours)(params), qml.grad(reference)(params), atol=1e-8)


def test_qaoa_workload_on_braket():
    from qbackends.workloads import qaoa

    config = qaoa.Config(nodes=6, edges=8, iterations=2, diff_method="parameter-shift")
    braket = qaoa.run(config, "local:braket/braket.local.qubit")
    lightning = qaoa.run(config, "local:pennylane/lightning.qubit")
    np.testing.assert_allclose(braket["costs"], lightning["costs"], atol=1e-8)


def test_braket_probe_when_its_package_is_missing():
    from conftest import recorded_facts

    from qbackends import capabilities

    backend = get_registry().backends["braket/braket.local.qubit"]
    caps = capabilities.evaluate(backend, recorded_facts("laptop"))
    assert not caps.ok
    assert caps.reason == "package amazon-braket-pennylane-plugin is not installed"
    assert caps.fix == "`pip install amazon-braket-pennylane-plugin`"


# ---- isolation


def test_broken_plugin_leaves_the_others_working():
    registry = get_registry()
    failure = next(f for f in registry.failures if f.plugin == "fixture-broken")
    assert failure.error == "ImportError: qbackends_fixture_broken needs the package 'not-installed-sdk'"
    assert failure.distribution == "qbackends-fixture-broken"
    assert "Traceback" in failure.traceback
    assert get_device("local:pennylane/lightning.qubit", wires=2).name == "lightning.qubit"
    out = _cli("plugins")
    assert out.returncode == 0
    assert (
        "fixture-broken (qbackends-fixture-broken): ImportError: qbackends_fixture_broken needs the package 'not-installed-sdk'"
        in out.stdout
    )


def test_asking_for_a_failed_plugins_provider_shows_its_error():
    with pytest.raises(UnknownBackendError, match="Plugins that failed to load: fixture-broken: ImportError"):
        get_device("local:fixture-broken/anything", wires=2)


def test_duplicate_name_is_refused_naming_both_plugins():
    registry = get_registry()
    assert registry.owners["pennylane/lightning.qubit"] == "pennylane"
    assert registry.backends["pennylane/lightning.qubit"].device_name == "lightning.qubit"
    failure = next(f for f in registry.failures if f.plugin == "fixture-duplicate")
    assert (
        "Plugin 'fixture-duplicate' registered 'local:pennylane/lightning.qubit', which plugin 'pennylane' registered already"
        in failure.error
    )
    assert registry.owners["fixture/dup.qubit"] == "fixture-duplicate"  # its other registration stands


def test_backend_failing_at_construction_gets_the_typed_error():
    with pytest.raises(
        BackendUnavailableError,
        match="local:fixture/failing.qubit failed at construction: RuntimeError: .*CUDA driver version is insufficient",
    ):
        get_device("local:fixture/failing.qubit", wires=2)
    out = _cli("run", "qaoa", "--device", "local:fixture/failing.qubit", "--nodes", "4", "--edges", "3", "--quiet")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert out.stderr.startswith("qbackends: error: local:fixture/failing.qubit failed at construction")


def test_plugin_selection_from_the_environment():
    out = _cli("plugins", "--json", env={"QBACKENDS_PLUGINS": "braket"})
    data = json.loads(out.stdout)
    assert sorted(p["plugin"] for p in data["loaded"]) == ["braket", "pennylane"]
    assert data["failed"] == []


def test_an_installed_plugin_that_failed_gets_the_advice_to_fix_it(monkeypatch):
    from qbackends import UnknownBackendError, get_device, registry

    monkeypatch.setenv("QBACKENDS_PLUGINS", "fixture-broken")
    registry.reset_registry()
    with pytest.raises(UnknownBackendError) as err:
        get_device("local:fixture-broken/x.qubit", wires=1)
    assert err.value.fix == "fix plugin 'fixture-broken': it is installed but failed to load (`qbackends plugins -v` shows why)."


def test_probe_reads_declared_operations_from_a_device_without_a_toml(capsys):
    from qbackends.cli import main

    main(["probe", "local:braket/braket.local.qubit"])
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("native operations"))
    count, source = line.split(maxsplit=2)[2].split(" ", 1)
    assert int(count) > 20 and source == "(the device's capabilities)"  # not 0, as when only a TOML was read


@pytest.mark.parametrize("device", ["local:braket/braket.local.qubit", "local:qulacs/qulacs.simulator"])
def test_options_of_a_kwargs_device_are_checked_against_what_the_plugin_declares(device):
    from qbackends import UnsupportedOptionError, get_device

    with pytest.raises(UnsupportedOptionError, match=r"does not accept the option\(s\) bogus; it accepts: "):
        get_device(device, wires=2, bogus=1)
    assert get_device(device, wires=2, shots=None) is not None


def test_rule_registrations_are_checked_one_by_one_inside_the_plugin(caplog):
    """fixture-duplicate registers three rules the host must refuse."""
    registry = get_registry()
    names = [r.name for r in registry.rules()]
    assert not {"fixture: unknown operator", "fixture: example raises"} & set(names)
    errors = [f.error for f in registry.failures if f.plugin == "fixture-duplicate"][1:]  # after its backend clash
    assert errors == [
        "Plugin 'fixture-duplicate' registered 'not a rule', not a qbackends.RuleRegistration",
        "Plugin 'fixture-duplicate' registered rule 'fixture: unknown operator' for 'NotAnOperator', which is not a PennyLane operator",
        "Plugin 'fixture-duplicate' registered rule 'fixture: example raises' whose example raised ZeroDivisionError: division by zero",
    ]
    # other backends never see the refused rules, and their devices work, with no word of them
    with caplog.at_level("WARNING", logger="qbackends"):
        assert get_device("local:pennylane/lightning.qubit", wires=2).name == "lightning.qubit"
        assert not caplog.records
        # a device of the plugin's own backend: one warning per refused rule, once
        get_device("local:fixture/dup.qubit", wires=2)
        get_device("local:fixture/dup.qubit", wires=2)
    assert len(caplog.records) == 3 and "'fixture: example raises' whose example raised" in caplog.records[2].getMessage()


def test_plugins_verbose_shows_a_plugin_whose_rules_were_refused():
    out = _cli("plugins", "-v")
    row = next(line for line in out.stdout.splitlines() if line.startswith("fixture-duplicate "))
    assert "partly loaded" in row
    assert "registered rule 'fixture: example raises' whose example raised ZeroDivisionError" in out.stdout
