"""The plugin authors' kit (qbackends.testing) on real installed plugins: passes, and each failure says what to fix."""

from __future__ import annotations

import re

import pytest

from qbackends import get_device, get_registry
from qbackends.errors import UnsupportedOptionError
from qbackends.testing import ConformanceError, check_backend, measure_state_copies


def _failed(report):
    return {r.check: r.detail for r in report.failures}


def test_a_conforming_backend_passes_every_check():
    report = check_backend("local:qbackends/batched.qubit")
    assert report.ok and len(report.results) > 30
    checks = {r.check: r for r in report.results}
    assert checks["registered"].detail == "plugin 'pennylane' (qbackends) loaded whole"
    assert checks["refuses unknown options"].status == "ok" and checks["gate CRot"].status == "ok"
    assert checks["QNN layer value and input gradient"].status == "ok"


def test_a_plugin_whose_rules_were_refused_fails_at_registered():
    with pytest.raises(ConformanceError) as raised:
        check_backend("local:fixture/dup.qubit")
    message = str(raised.value)
    assert message.startswith("local:fixture/dup.qubit: 1 checks, 1 failed")
    assert "FAIL  registered: plugin 'fixture-duplicate' is partly loaded: " in message
    assert "registered rule 'fixture: example raises' whose example raised ZeroDivisionError" in message


def test_a_kwargs_factory_without_declared_options_fails_the_option_check():
    report = check_backend("local:fixture/lenient.qubit", raise_on_failure=False)
    assert _failed(report) == {
        "refuses unknown options": "get_device accepted qbackends_check_unknown_option=1 and passed it on. Fix: a device "
        "(or create) taking **kwargs must declare Backend(options=(...)) with the options it accepts."
    }


def test_a_backend_failing_at_construction_stops_at_builds():
    report = check_backend("local:fixture/failing.qubit", raise_on_failure=False)
    assert [r.check for r in report.results] == ["registered", "runs here", "builds"]
    assert "failed at construction: RuntimeError" in _failed(report)["builds"]


def test_an_unknown_device_string_fails_with_the_registry_s_advice():
    report = check_backend("local:braket/braket.local.qbit", raise_on_failure=False)
    assert "did you mean 'local:braket/braket.local.qubit'?" in _failed(report)["registered"]


def test_a_sampling_only_backend_is_checked_with_shots_and_statistical_tolerances():
    """needs_shots: get_device asks for shots, auto never takes it, the kit samples and allows 5 sigma."""
    with pytest.raises(UnsupportedOptionError, match=r"samples only: .* Fix: pass shots=N"):
        get_device("local:fixture/sampler.qubit", wires=2)
    assert get_registry().backends["fixture/sampler.qubit"].preference == 50
    from qbackends import choose

    assert choose("auto", 4).backend.key != "fixture/sampler.qubit"
    report = check_backend("local:fixture/sampler.qubit")
    qaoa = next(r for r in report.results if r.check == "QAOA value and gradient")
    assert "parameter-shift gradient within" in qaoa.detail and float(qaoa.detail.split()[-1]) > 1e-6  # sampled


def test_measured_state_copies_match_what_lightning_declares():
    measured = measure_state_copies("local:pennylane/lightning.qubit", wires=18)
    declared = get_registry().backends["pennylane/lightning.qubit"].state_copies
    assert 2.0 < measured <= declared * 1.1  # an adjoint holds ψ, λ and more; 7-9 measured here
    report = check_backend("local:pennylane/lightning.qubit", memory_wires=18, raise_on_failure=False)
    memory = next(r for r in report.results if r.check == "memory guard at 18 wires")
    assert memory.status == "ok" and memory.detail.endswith(f"declared {declared}")


def test_a_memory_figure_below_the_measured_peak_fails_with_the_figure_to_declare(monkeypatch):
    """lightning.kokkos peaks at 5 state vectors in an adjoint gradient; declaring 2 would let the
    memory guard pass requests that do not fit."""
    import dataclasses

    registry = get_registry()
    key = "pennylane/lightning.kokkos"
    monkeypatch.setitem(registry.backends, key, dataclasses.replace(registry.backends[key], state_copies=2.0))
    report = check_backend("local:pennylane/lightning.kokkos", memory_wires=18, raise_on_failure=False)
    detail = _failed(report)["memory guard at 18 wires"]
    assert detail.startswith("an adjoint gradient at 18 wires peaked at 5.0 state vectors; the backend declares state_copies=2.0")
    assert re.search(r"Fix: declare state_copies=5(\.\d)?\.$", detail)


def test_a_device_with_the_older_preprocess_hook_gets_its_rules_and_conforms():
    """default.mixed implements preprocess(), not preprocess_transforms(): get_device once failed to
    build it ("should implement either preprocess or ... but not both"); a plugin outside this
    repository wrapping it found that with check_backend."""
    device = get_device("local:fixture/mixed.qubit", wires=2)
    assert type(device).preprocess is not type(device).__mro__[1].preprocess and device.qbackends_rules.names
    assert check_backend("local:fixture/mixed.qubit").ok
