"""auto in the loops people write: decisions kept between processes, trials within a share of the work, a family's
trials correcting the model, decisions that prove far off revisited, and "best" as the chosen backend's best."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pennylane as qml

from qbackends import auto, get_device, get_registry, registry
from qbackends.cli import main
from qbackends.context import get_context

SCRIPT = """
import logging, sys
import pennylane as qml
from pennylane import numpy as np
from qbackends import get_device
logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
dev = get_device("auto", wires=4)

@qml.qnode(dev, diff_method="adjoint")
def energy(x):
    for w in range(4):
        qml.RY(x[w], wires=w)
    for w in range(3):
        qml.CNOT(wires=[w, w + 1])
    return qml.expval(qml.PauliZ(3))

x = np.array([0.1, 0.2, 0.3, 0.4], requires_grad=True)
for _ in range(3):
    g = qml.grad(energy)(x)
print("took", dev.last_choice, "gradient", list(g))
"""


def _run_script(folder: Path) -> str:
    env = {**os.environ, "QBACKENDS_DECISIONS": str(folder)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600, check=True)
    return out.stdout


def test_a_second_process_running_the_same_script_uses_the_stored_decision(tmp_path):
    folder = tmp_path / "decisions"
    first = _run_script(folder)
    assert "measured" in first and "no trial" not in first  # the first process tried the backends
    stored = list(folder.glob("*.decision.json"))
    assert len(stored) == 1 and (folder.stat().st_mode & 0o777) == 0o700
    second = _run_script(folder)
    assert "the decision stored" in second and "no trial" in second
    took = [line for line in first.splitlines() if line.startswith("took")]
    assert took == [line for line in second.splitlines() if line.startswith("took")]  # same backend, same gradient


def _circuit(dev, wires=4):
    @qml.qnode(dev, diff_method="adjoint")
    def energy(x):
        for w in range(wires):
            qml.RY(x[w], wires=w)
        for w in range(wires - 1):
            qml.CNOT(wires=[w, w + 1])
        return qml.expval(qml.PauliZ(wires - 1))

    return energy


def _step(dev, wires=4):
    x = qml.numpy.array(np.linspace(0.1, 0.4, wires), requires_grad=True)
    return qml.grad(_circuit(dev, wires))(x)


def _new_process_context():
    """What a new process starts from: an empty context (the store on disk stays)."""
    registry.reset_registry()
    return get_context()


def test_a_folder_others_can_write_is_neither_read_nor_written(tmp_path, monkeypatch, caplog):
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("QBACKENDS_DECISIONS", str(folder))
    _step(get_device("auto", wires=4))
    assert len(list(folder.glob("*.decision.json"))) == 1
    folder.chmod(0o777)  # now another user could plant a decision here
    _new_process_context()
    with caplog.at_level(logging.INFO, logger="qbackends"):
        dev = get_device("auto", wires=4)
        _step(dev)
    assert dev.decisions[-1].measured and "stored" not in dev.decisions[-1].source
    assert f"{folder} is writable by other users" in caplog.text and "QBACKENDS_DECISIONS" in caplog.text


def test_a_link_planted_in_place_of_a_decision_is_not_followed(tmp_path, monkeypatch):
    folder = tmp_path / "decisions"
    monkeypatch.setenv("QBACKENDS_DECISIONS", str(folder))
    _step(get_device("auto", wires=4))
    (path,) = folder.glob("*.decision.json")
    elsewhere = tmp_path / "planted.json"
    data = json.loads(path.read_text())
    elsewhere.write_text(json.dumps({**data, "backend": "pennylane/default.qubit", "measured": {}}))
    path.unlink()
    path.symlink_to(elsewhere)
    _new_process_context()
    dev = get_device("auto", wires=4)
    _step(dev)
    assert "stored" not in dev.decisions[-1].source and dev.decisions[-1].measured


def test_a_damaged_decision_is_decided_again_and_written_over(tmp_path, monkeypatch):
    folder = tmp_path / "decisions"
    monkeypatch.setenv("QBACKENDS_DECISIONS", str(folder))
    _step(get_device("auto", wires=4))
    (path,) = folder.glob("*.decision.json")
    path.write_text('{"schema": 1, "backend": ')
    _new_process_context()
    dev = get_device("auto", wires=4)
    _step(dev)
    assert dev.decisions[-1].measured
    assert json.loads(path.read_text())["backend"] == dev.decisions[-1].backend


def test_off_keeps_decisions_in_the_process(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("QBACKENDS_DECISIONS", "off")
    _step(get_device("auto", wires=4))
    assert not (tmp_path / "cache").exists()


def test_probe_auto_lists_the_stored_decisions_and_clear_removes_them(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "decisions"
    monkeypatch.setenv("QBACKENDS_DECISIONS", str(folder))
    dev = get_device("auto", wires=4)
    _step(dev)
    assert main(["probe", "auto"]) == 0
    out = capsys.readouterr().out
    assert f"1 stored decision in {folder}" in out and dev.decisions[-1].backend in out
    assert main(["probe", "auto", "--clear"]) == 0
    assert capsys.readouterr().out.strip() == f"removed 1 stored decision from {folder}"
    assert not list(folder.glob("*.decision.json"))
    assert main(["probe", "local:pennylane/lightning.qubit", "--clear"]) == 2
    assert "--clear removes auto's stored decisions" in capsys.readouterr().err


def test_a_decision_made_by_another_setup_is_not_taken(tmp_path, monkeypatch):
    monkeypatch.setenv("QBACKENDS_DECISIONS", str(tmp_path / "decisions"))
    _step(get_device("auto", wires=4))
    _new_process_context()
    dev = get_device("auto", wires=4, exclude=["local:pennylane/default.qubit"])
    _step(dev)
    assert "stored" not in dev.decisions[-1].source


def test_trials_stop_when_they_would_exceed_their_share_of_the_work(tmp_path, monkeypatch):
    folder = tmp_path / "decisions"
    monkeypatch.setenv("QBACKENDS_DECISIONS", str(folder))
    dev = get_device("auto", wires=4)
    _step(dev)
    assert dev.decisions[-1].measured  # the first decision is tried within the allowance
    context = get_context()
    assert context.trial_seconds > 0 and context.work_seconds > 0
    context.trial_seconds = auto.TRIAL_ALLOWANCE + auto.WORK_SHARE * context.work_seconds + 1.0
    _step(dev, wires=3)  # a new structure, with the share spent: decided on predictions
    assert not dev.decisions[-1].measured and dev.decisions[-1].untried
    assert len(list(folder.glob("*.decision.json"))) == 1  # and not stored: the next process tries it
    context.work_seconds += (context.trial_seconds + 10) / auto.WORK_SHARE  # much work since: trials again
    _step(dev, wires=2)
    assert dev.decisions[-1].measured


def test_a_familys_trials_correct_the_prediction_of_its_next_circuit():
    fast, slow = _backends_for_decide()
    shape = auto.Shape(wires=10, gates=40)
    methods = {fast.key: "adjoint", slow.key: "adjoint"}
    model = {fast.key: FAST, slow.key: SLOW}
    measured = []

    def measure(key):
        measured.append(key)
        return 1e-3

    # Unmeasured, SLOW is 10x FAST: no trial, FAST taken. The family measured FAST 20x slower than predicted.
    assert auto.decide(shape, methods, [fast, slow], model, measure).backend == fast.key and not measured
    corrected = auto.decide(shape, methods, [fast, slow], model, measure, corrections={fast.key: 20.0, slow.key: 1.0})
    assert corrected.backend == slow.key and not measured  # corrected: a clear winner, taken without a trial
    close = auto.decide(shape, methods, [fast, slow], model, measure, corrections={fast.key: 11.0, slow.key: 1.0})
    assert set(measured) == {fast.key, slow.key} and close.measured  # corrected within 1.5x: tried


def test_learn_keeps_measured_over_predicted_as_the_model_saw_it():
    families = {}
    decision = auto.Decision("a", predicted={"a": 2.0, "b": 4.0}, measured={"a": 4.0, "b": 2.0})
    auto.learn(families, "family", decision, {"a": 1.0, "b": 2.0})
    assert families["family"] == {"a": 2.0, "b": 1.0}


FAST = auto.Costs(execution=1e-4, row=0.0, gate=1e-9, diagonal=1e-9, term=1e-9, splits_batch=False)
SLOW = auto.Costs(execution=1e-3, row=1e-4, gate=1e-8, diagonal=1e-8, term=1e-8)


def _backends_for_decide():
    backends = get_registry().backends
    return backends["pennylane/lightning.qubit"], backends["pennylane/default.qubit"]


def test_a_decision_more_than_twice_off_is_revisited_once(caplog):
    dev = get_device("auto", wires=4)
    _step(dev)
    first = dev.decisions[-1]
    first.measured = {k: 1e-9 for k in first.measured} or {first.backend: 1e-9}  # as if the trial had lied
    first.predicted = {k: 1e-9 for k in first.predicted}
    with caplog.at_level(logging.INFO, logger="qbackends"):
        for _ in range(auto.REVISIT_AFTER + 1):
            _step(dev)
    assert "deciding again" in caplog.text and caplog.text.count("deciding again") == 1
    assert first.revisited and dev.decisions[-1] is not first and dev.decisions[-1].revisited
    second = dev.decisions[-1]
    second.measured = {k: 1e-9 for k in second.measured} or {second.backend: 1e-9}
    for _ in range(auto.REVISIT_AFTER + 1):
        _step(dev)
    assert dev.decisions[-1] is second  # once only


def test_best_is_the_chosen_backends_best_never_a_fall_to_parameter_shift():
    """The local-cost demo's circuit: ``1 - probs[0]`` under the QNode's default, "best". A backend with its own
    gradient of probabilities (batched.qubit) answers it; auto does not shift the parameters where one does."""
    wires = 6
    dev = get_device("auto", wires=wires)

    @qml.qnode(dev)  # diff_method="best"
    def cost(x):
        for w in range(wires):
            qml.RY(x[w], wires=w)
        for w in range(wires - 1):
            qml.CNOT(wires=[w, w + 1])
        return qml.probs(wires=range(wires))

    def loss(x):
        return 1 - cost(x)[0]

    x = qml.numpy.array(np.linspace(0.2, 1.2, wires), requires_grad=True)
    with qml.Tracker(dev) as tracker:
        grad = qml.grad(loss)(x)
    reference = qml.QNode(cost.func, qml.device("default.qubit", wires=wires), diff_method="parameter-shift")
    np.testing.assert_allclose(grad, qml.grad(lambda x: 1 - reference(x)[0])(x), atol=1e-10)
    assert len(dev.decisions) == 1  # decided once, for "best": not again for a parameter shift
    chosen = dev.last_backend
    assert qml.device(chosen.device_name, wires=wires).supports_derivatives(qml.devices.ExecutionConfig(gradient_method="best"))
    assert tracker.totals["executions"] <= 2  # its own gradient: not 1 + 2 x 6 shifted circuits


def test_best_where_no_backend_has_a_gradient_of_its_own_is_decided_once():
    """Under "best", a circuit only a parameter shift differentiates is decided once: the shift's executions go
    to the backend decided for "best", not to a second decision."""
    wires = 3
    dev = get_device("auto", wires=wires, shots=None)

    @qml.qnode(dev)
    def cost(x):
        qml.RX(x[0], wires=0)
        qml.measure(0)  # a mid-circuit measurement: no adjoint on any backend here
        qml.RY(x[1], wires=1)
        return qml.expval(qml.PauliZ(1))

    x = qml.numpy.array([0.3, 0.5], requires_grad=True)
    grad = qml.grad(cost)(x)
    np.testing.assert_allclose(grad, [0.0, -np.sin(0.5)], atol=1e-10)
    assert len({d.backend for d in dev.decisions}) == 1


def test_the_store_keeps_at_most_its_limit_the_newest(tmp_path, monkeypatch):
    from qbackends import decisionstore

    monkeypatch.setattr(decisionstore, "KEPT", 8)
    store = decisionstore.DecisionStore(tmp_path / "decisions", {"machine": "test"})
    for i in range(9):
        store.put(f"k{i}", "pennylane/lightning.qubit", {}, {}, {}, None, "")
        os.utime(store.path(f"k{i}"), (1000 + i, 1000 + i))
    kept = sorted(p.name.split("-")[1].split(".")[0] for p in (tmp_path / "decisions").glob("*.decision.json"))
    assert kept == ["k3", "k4", "k5", "k6", "k7", "k8"]


def test_observables_that_differ_only_below_a_wrapper_have_different_keys():
    """An adjoint, a power or an exponential of X is not one of Z, nor a projector onto another state."""
    keys = auto.ObservableKeys()
    pairs = [
        (qml.adjoint(qml.PauliX(0)), qml.adjoint(qml.PauliZ(0))),
        (qml.pow(qml.PauliX(0), 2), qml.pow(qml.PauliZ(0), 2)),
        (qml.exp(qml.PauliX(0), 0.5), qml.exp(qml.PauliZ(0), 0.5)),
        (qml.Projector([0], wires=0), qml.Projector([1], wires=0)),
    ]
    for a, b in pairs:
        assert keys.key(a) != keys.key(b), (a, b)


def test_a_structure_is_stored_under_its_digest_only_where_every_part_means_the_same_in_another_process():
    """A gradient transform by name and an observable by its data are stored; a gradient function (by its address)
    and a wire label that is an object are kept in this process only."""
    from qbackends.decisionstore import stable_digest

    setup = (["pennylane/lightning.qubit"], [0, 1], {"precision": "c128"}, 100)

    def key(tape, gradient):
        return auto.structure_key(tape, [0], gradient, auto.ObservableKeys())

    tape = qml.tape.QuantumScript([qml.RX(0.3, 0), qml.CNOT([0, 1])], [qml.expval(qml.Hermitian(np.eye(2), 1))])
    assert stable_digest(setup, key(tape, "adjoint")) == stable_digest(setup, key(tape.copy(), "adjoint"))
    assert stable_digest(setup, key(tape, qml.gradients.param_shift)) is not None
    assert stable_digest(setup, key(tape, lambda t: t)) is None
    labelled = tape.map_to_standard_wires().copy(operations=[qml.RX(0.3, object())])
    assert stable_digest(setup, key(labelled, "adjoint")) is None


def test_parameter_shift_is_decided_once_for_the_transform_pennylane_runs():
    """PennyLane asks the auto device about "parameter-shift", then runs the transform: one decision, the tried one."""
    dev = get_device("auto", wires=3)

    @qml.qnode(dev, diff_method="parameter-shift")
    def circuit(x):
        qml.RX(x[0], wires=0)
        qml.CNOT(wires=[0, 1])
        qml.RY(x[1], wires=1)
        return qml.expval(qml.PauliZ(1))

    x = qml.numpy.array([0.1, 0.2], requires_grad=True)
    assert np.allclose(qml.grad(circuit)(x), [-np.sin(0.1) * np.cos(0.2), -np.cos(0.1) * np.sin(0.2)])
    qml.grad(circuit)(x)
    assert len({id(d) for d in dev.decisions}) == 1 and dev.decisions[0].measured
