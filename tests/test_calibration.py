"""Calibration profiles and `auto` choosing from them."""

from __future__ import annotations

import json
import logging
import math

import pytest
from conftest import recorded_facts

import qbackends
from qbackends import calibration, get_registry, kinds, workloaddevices
from qbackends.cli import main


def _profile(facts, seconds):
    return calibration.Profile(calibration.fingerprint(facts), seconds)


def test_predict_interpolates_and_extends_in_log_space():
    p = _profile(recorded_facts("laptop"), {"a": {12: 0.01, 16: 0.16}})
    assert p.predict("a", 12) == pytest.approx(0.01)
    assert p.predict("a", 14) == pytest.approx(0.04)  # geometric midpoint
    assert p.predict("a", 20) == pytest.approx(2.56)  # same slope beyond
    assert p.predict("missing", 12) is None
    assert _profile(recorded_facts("laptop"), {"b": {10: 1.0}}).predict("b", 12) == pytest.approx(4.0)


def test_auto_follows_a_profile_of_this_machine(tmp_path, monkeypatch):
    facts = recorded_facts("h200")
    path = tmp_path / "profile.json"
    monkeypatch.setenv("QBACKENDS_PROFILE", str(path))
    seconds = {  # every backend generic auto may take on this machine
        "pennylane/lightning.gpu": {16: 0.05, 20: 0.08, 24: 0.3},
        "pennylane/lightning.kokkos": {16: 0.012, 20: 0.2, 24: 4.0},
        "pennylane/lightning.qubit": {16: 0.01, 20: 0.25, 24: 5.0},
        "pennylane/default.qubit": {16: 0.5, 20: 8.0, 24: 120.0},
    }
    calibration.save_profile(_profile(facts, seconds))
    assert qbackends.choose("auto", 16, facts=facts).backend.simulator == "lightning.qubit"
    assert qbackends.choose("auto", 22, facts=facts).backend.simulator == "lightning.gpu"
    # without the profile, the preference: lightning.kokkos from 16 wires, the GPU from 18
    path.unlink()
    assert qbackends.choose("auto", 16, facts=facts).backend.simulator == "lightning.kokkos"


def test_a_profile_decides_only_where_it_timed_every_candidate(tmp_path, monkeypatch):
    """On the laptop generic auto may take lightning.qubit or default.qubit. A profile of default.qubit
    alone never decides (lightning.qubit could be faster); one of both decides up to REACH qubits beyond
    the sizes it measured, and the preference (lightning.qubit first) beyond that."""
    facts = recorded_facts("laptop")
    monkeypatch.setenv("QBACKENDS_PROFILE", str(tmp_path / "profile.json"))
    calibration.save_profile(_profile(facts, {"pennylane/default.qubit": {3: 0.001}}))
    assert [qbackends.choose("auto", n, facts=facts).backend.simulator for n in (3, 14)] == ["lightning.qubit"] * 2

    both = {"pennylane/default.qubit": {3: 0.001, 4: 0.002}, "pennylane/lightning.qubit": {3: 0.004, 4: 0.008}}
    calibration.save_profile(_profile(facts, both))
    picks = [qbackends.choose("auto", n, facts=facts).backend.simulator for n in (1, 3, 6, 7, 14)]
    assert picks == ["default.qubit", "default.qubit", "default.qubit", "lightning.qubit", "lightning.qubit"]
    assert calibration.REACH == 2


def test_a_calibration_of_one_backend_does_not_steer_the_qaoa_workload(tmp_path, monkeypatch, capsys):
    """`qbackends calibrate --backends local:pennylane/default.qubit --sizes 4` used to send a 14-node
    `run qaoa` to default.qubit (50x slower than fused.qubit): the profile timed none of the others."""
    monkeypatch.setenv("QBACKENDS_PROFILE", str(tmp_path / "profile.json"))
    args = ["calibrate", "--backends", "local:pennylane/default.qubit", "--sizes", "4", "--repeats", "1"]
    assert main(args) == 0
    assert capsys.readouterr().out.endswith(f"profile: {tmp_path / 'profile.json'}\n")
    facts = qbackends.device.facts_for(get_registry())
    measured = calibration.load_profile(facts)
    assert measured is not None and set(measured.seconds) == {"pennylane/default.qubit"}
    assert qbackends.choose("auto", 14).backend.simulator != "default.qubit"
    assert qbackends.choose("auto", 4).backend.simulator != "default.qubit"

    # a profile of every candidate (measured default.qubit's time, the others slower) decides near its size
    candidates = [b.key for b in kinds.calibration_candidates()]
    slower = {key: {4: 10 * measured.seconds["pennylane/default.qubit"][4]} for key in candidates}
    calibration.save_profile(calibration.Profile(calibration.fingerprint(facts), {**slower, **measured.seconds}))
    assert qbackends.choose("auto", 4).backend.simulator == "default.qubit"
    assert qbackends.choose("auto", 6).backend.simulator == "default.qubit"
    assert qbackends.choose("auto", 14).backend.simulator != "default.qubit"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--sizes", "1"],
            "--sizes 1: 1 is below the 4 qubits the qaoa step needs: its graph, gnm_random_graph(n, 1.5n), has room for "
            "1.5n edges only from n = 4. Fix: pass sizes of 4 or more, e.g. --sizes 12,16,20.",
        ),
        (
            ["--sizes", "12,3"],
            "--sizes 12,3: 3 is below the 4 qubits the qaoa step needs: its graph, gnm_random_graph(n, 1.5n), has room for "
            "1.5n edges only from n = 4. Fix: pass sizes of 4 or more, e.g. --sizes 12,16,20.",
        ),
        (
            ["--workload", "qnn", "--sizes", "0"],
            "--sizes '0' is not a comma-separated list of positive integers. Fix: pass e.g. --sizes 4,8,12,16.",
        ),
        (
            ["--repeats", "0"],
            "--repeats 0 times nothing: the profile keeps the median of the timed repeats. Fix: pass --repeats 1 or more.",
        ),
        (
            ["--sizes", "4", "--repeats", "-2"],
            "--repeats -2 times nothing: the profile keeps the median of the timed repeats. Fix: pass --repeats 1 or more.",
        ),
    ],
)
def test_calibrate_refuses_sizes_and_repeats_it_cannot_time(tmp_path, capsys, args, message):
    output = tmp_path / "profile.json"
    assert main(["calibrate", "--backends", "local:pennylane/default.qubit", "--output", str(output), *args]) == 2
    assert capsys.readouterr().err == f"qbackends: error: {message}\n"
    assert not output.exists()


def test_calibrate_times_the_qnn_layer_on_one_qubit(tmp_path, capsys):
    """The QNN's step runs from one qubit, so qnn's sizes start there."""
    output = tmp_path / "profile-qnn.json"
    args = ["--workload", "qnn", "--backends", "local:pennylane/default.qubit", "--sizes", "1", "--repeats", "1"]
    assert main(["calibrate", *args, "--output", str(output)]) == 0
    assert capsys.readouterr().err == ""
    assert set(json.loads(output.read_text())["seconds"]) == {"pennylane/default.qubit"}


def test_stale_profile_is_ignored_with_a_warning(tmp_path, monkeypatch, caplog):
    facts = recorded_facts("h200")
    monkeypatch.setenv("QBACKENDS_PROFILE", str(tmp_path / "p.json"))
    stale = _profile(recorded_facts("laptop"), {"pennylane/lightning.qubit": {12: 0.001, 24: 0.002}})
    calibration.save_profile(stale)
    with caplog.at_level(logging.WARNING, logger="qbackends"):
        choice = qbackends.choose("auto", 24, facts=facts)
    assert choice.backend.simulator == "lightning.gpu"
    assert "ignoring stale calibration profile" in caplog.text and "distributions" in caplog.text


def test_calibrate_measures_and_round_trips(tmp_path):
    registry = get_registry()
    backend = registry.backends["pennylane/lightning.qubit"]
    facts = qbackends.device.facts_for(registry)
    profile = calibration.calibrate([backend], facts, kinds.calibration_step("qaoa"), sizes=(4, 6), repeats=1)
    assert set(profile.seconds["pennylane/lightning.qubit"]) == {4, 6} and profile.kind == "qaoa"
    assert all(s > 0 for s in profile.seconds["pennylane/lightning.qubit"].values())
    path = calibration.save_profile(profile, tmp_path / "p.json")
    loaded = calibration.load_profile(facts, path)
    assert loaded is not None and loaded.seconds == profile.seconds
    assert json.loads(path.read_text())["schema"] == calibration.SCHEMA


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: p.mkdir(), "IsADirectoryError"),
        (lambda p: p.write_text('{"seconds": [1, 2], "fingerprint": {}}'), "AttributeError"),
        (lambda p: p.write_text("[" * 100000 + "]" * 100000), "RecursionError"),
        (lambda p: p.write_bytes(b"\xff\xfe\x00"), "UnicodeDecodeError"),
        (lambda p: p.write_text('{"seconds": {"a/b": {"12": -1}}, "fingerprint": {}}'), "ValueError"),
    ],
)
def test_a_broken_profile_is_ignored_with_a_warning(tmp_path, make, kind, caplog):
    path = tmp_path / "profile.json"
    make(path)
    facts = recorded_facts("laptop")
    with caplog.at_level("WARNING", logger="qbackends"):
        assert calibration.load_profile(facts, path) is None
    assert f"ignoring unreadable calibration profile {path} ({kind}" in caplog.text


def test_a_profile_that_cannot_be_written_is_a_typed_error(tmp_path):
    from qbackends.errors import WorkloadInputError

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(WorkloadInputError, match="cannot be written to .*pass --output PATH"):
        calibration.save_profile(calibration.Profile({}, {}), blocker / "profile.json")


def test_each_workload_kind_has_its_own_profile(tmp_path, monkeypatch, caplog):
    """`qbackends calibrate --workload qnn` times the QNN's own step into a profile beside the QAOA one; the
    workloads' auto decides per circuit (qbackends.auto), and a profile of another kind is not taken for it."""
    monkeypatch.setenv("QBACKENDS_PROFILE", str(tmp_path / "profile.json"))
    registry = get_registry()
    facts = qbackends.device.facts_for(registry)
    backends = [registry.backends["pennylane/default.qubit"], registry.backends["qbackends/batched.qubit"]]
    measured = calibration.calibrate(backends, facts, kinds.calibration_step("qnn"), sizes=(3,), repeats=1, kind="qnn")
    for key in ("qbackends/batched.qubit", "pennylane/default.qubit"):  # which is faster is the benchmarks' question
        assert 0 < measured.seconds[key][3] < math.inf, measured.seconds
    assert calibration.save_profile(measured, calibration.profile_path("qnn")) == tmp_path / "profile-qnn.json"

    slower = {b.key: {4: 0.05} for b in kinds.calibration_candidates()}  # a profile decides where it timed all
    slow_batched = {**slower, "pennylane/default.qubit": {4: 0.01}, "qbackends/batched.qubit": {4: 0.02}}
    calibration.save_profile(
        calibration.Profile(calibration.fingerprint(facts), slow_batched, kind="qnn"), calibration.profile_path("qnn")
    )
    device, method = workloaddevices.qnn_device("auto", 4, "adjoint")
    assert (device.name, method) == ("qbackends.auto", "best")  # the per-circuit device, each backend's best gradient

    (tmp_path / "profile.json").write_text((tmp_path / "profile-qnn.json").read_text())  # a qnn profile where qaoa's goes
    with caplog.at_level(logging.WARNING, logger="qbackends"):
        assert calibration.load_profile(facts, kind="qaoa") is None
    assert "it times qnn, not qaoa" in caplog.text


def test_calibrating_circuits_gives_auto_this_machines_costs(tmp_path, monkeypatch, caplog):
    """`qbackends calibrate --workload circuits` measures the cost model's classes here; auto predicts with it,
    the shipped model filling in the backends it did not measure; one of another machine is ignored."""
    from qbackends import auto, registry
    from qbackends.context import get_context

    monkeypatch.setenv("QBACKENDS_PROFILE", str(tmp_path / "profile.json"))
    assert main(["calibrate", "--workload", "circuits", "--backends", "local:pennylane/lightning.qubit", "--repeats", "1"]) == 0
    saved = json.loads((tmp_path / "profile-circuits.json").read_text())
    assert list(saved["backends"]) == ["pennylane/lightning.qubit"]
    measured = saved["backends"]["pennylane/lightning.qubit"]
    assert measured["execution"] > 0 and measured["gate"] > 0 and measured["gradient"] > 1
    registry.reset_registry()
    costs = auto.model(get_context())
    assert costs["pennylane/lightning.qubit"] == auto.Costs(**measured)
    assert costs["qbackends/fused.qubit"] == auto.shipped_model()["qbackends/fused.qubit"]

    saved["fingerprint"]["cores"] = 4096
    (tmp_path / "profile-circuits.json").write_text(json.dumps(saved))
    registry.reset_registry()
    with caplog.at_level(logging.WARNING, logger="qbackends"):
        assert auto.model(get_context())["pennylane/lightning.qubit"] == auto.shipped_model()["pennylane/lightning.qubit"]
    assert "ignoring stale cost model" in caplog.text and "changed: cores" in caplog.text


def test_a_gate_fit_the_timings_contradict_is_refused_not_saved():
    """A gate on more amplitudes that times no slower than one on fewer is noise: timed again, then a typed error,
    never a cost of zero saved (here the sizes are swapped, 2^20 amplitudes against 2^4: every try contradicts).
    Six repeats: the 2^4 circuit is then timed three times a try, and one stall of 10 ms in a lone timing (CI met one)
    cannot make its median the slower."""
    from qbackends import costmodel
    from qbackends.errors import CalibrationError

    with pytest.raises(CalibrationError) as refused:
        costmodel.measure("local:pennylane/lightning.qubit", repeats=6, small=20, large=4)
    assert "a gate on 2^4 amplitudes timed no slower than one on 2^20 in 3 tries" in refused.value.message
    assert refused.value.fix == "calibrate again on a quieter machine, or with more --repeats."


def test_the_cost_model_tool_refuses_repeats_it_cannot_time_in_one_line(capsys):
    """``python -m qbackends.costmodel`` takes the ``--repeats`` its calibration error names, and refuses none."""
    from qbackends import costmodel

    with pytest.raises(SystemExit) as ended:
        costmodel.main(["--repeats", "0"])
    assert ended.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m qbackends.costmodel: error: --repeats 0 times nothing; pass --repeats 1 or more"
    )
