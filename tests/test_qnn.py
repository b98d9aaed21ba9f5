"""The dressed QNN: data, training, data parallelism over real gloo processes, checkpoints, jobs."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from qbackends.errors import WorkloadInputError
from qbackends.workloads import qnn, sonar

SMALL = dict(nwires=4, ndata=64, batch_size=8, epochs=1)


def test_shipped_sonar_is_the_uci_file():
    data = sonar.load()
    assert data.features.shape == (208, 60)
    assert (data.labels == 1).sum() == 111 and (data.labels == -1).sum() == 97
    digest = hashlib.sha256(sonar.sonar_text().encode()).hexdigest()
    assert digest == "e90434cdbf00fcf93ffa911fe447ae25606979658e60f1d32e155c3b5240234d"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("0.1,0.2,M\n0.3,0.4,R\n0.5,oops,M\n", "line 3, column 2: 'oops' is not a finite number"),
        ("0.1,0.2,M\n0.3,0.4,X\n", "line 2, column 3: label 'X' is not one of M, R"),
        ("0.1,0.2,M\n0.3,R\n", "line 2: 2 columns where line 1 has 3"),
        ("0.1,nan,M\n", "line 1, column 2: 'nan' is not a finite number"),
    ],
)
def test_malformed_rows_are_named(tmp_path, rows, message):
    path = tmp_path / "bad.csv"
    path.write_text(rows)
    with pytest.raises(WorkloadInputError, match=message):
        sonar.load(path)


def test_stratified_split_keeps_class_proportions():
    labels = sonar.load().labels
    train, test = sonar.stratified_split(labels, 0.25, seed=3)
    assert len(set(train) & set(test)) == 0 and len(train) + len(test) == 208
    assert (labels[test] == 1).sum() == 28 and (labels[test] == -1).sum() == 24


def test_default_settings_beat_the_majority_class_clearly():
    result = qnn.train(qnn.Config(), "local:pennylane/lightning.qubit")
    assert result["majority_class_rate"] == pytest.approx(28 / 52)
    assert result["test_accuracy"] >= result["majority_class_rate"] + 0.12, result["history"]
    assert result["history"][-1]["train_loss"] < result["history"][0]["train_loss"]


def test_two_gloo_workers_match_one_process_with_the_same_global_batch(tmp_path):
    config = qnn.Config(**SMALL)
    one = qnn.launch(config, "lightning.qubit", 1, str(tmp_path / "one"), None, False, quiet=True)
    two = qnn.launch(config, "lightning.qubit", 2, str(tmp_path / "two"), None, False, quiet=True)
    assert two["workers"] == 2 and two["per_worker_batch"] == 4
    for name, values in one["parameters"].items():
        np.testing.assert_allclose(two["parameters"][name], values, atol=1e-6, rtol=0)
    assert two["phase_seconds"]["allreduce"] > 0
    assert json.loads((tmp_path / "two" / qnn.RESULTS_FILE).read_text())["workers"] == 2


def test_scale_lr_keeps_the_per_worker_batch():
    ctx = qnn.Context(rank=0, world=2, distributed=False)  # one shard of a 2-worker run
    result = qnn.train(qnn.Config(**{**SMALL, "ndata": 32}, scale_lr=True), "lightning.qubit", context=ctx)
    assert result["per_worker_batch"] == 8 and result["learning_rate"] == pytest.approx(0.2)
    with pytest.raises(WorkloadInputError, match="batch_size=7 does not split evenly over 2 workers"):
        qnn.train(qnn.Config(**{**SMALL, "batch_size": 7}), "lightning.qubit", context=ctx)


def test_resume_continues_to_the_uninterrupted_result(tmp_path):
    three = qnn.train(qnn.Config(**{**SMALL, "epochs": 3}), "lightning.qubit")
    qnn.train(qnn.Config(**{**SMALL, "epochs": 2}), "lightning.qubit", checkpoint_dir=tmp_path)
    resumed = qnn.train(qnn.Config(**{**SMALL, "epochs": 3}), "lightning.qubit", checkpoint_dir=tmp_path, resume=True)
    assert [h["epoch"] for h in resumed["history"]] == [1, 2, 3]
    for name, values in three["parameters"].items():
        np.testing.assert_allclose(resumed["parameters"][name], values, atol=1e-10, rtol=0)
    with pytest.raises(WorkloadInputError, match="is of another configuration"):
        qnn.train(qnn.Config(**{**SMALL, "epochs": 3, "nwires": 3}), "lightning.qubit", checkpoint_dir=tmp_path, resume=True)


def test_early_stopping(tmp_path):
    result = qnn.train(qnn.Config(**{**SMALL, "epochs": 20, "patience": 1, "lr": 1e-6}), "lightning.qubit")
    assert result["stopped_early"] and len(result["history"]) < 20


def test_user_csv_with_other_feature_count(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(40, 10))
    labels = np.where(x[:, 0] > 0.5, "M", "R")
    (tmp_path / "d.csv").write_text(
        "\n".join(",".join(f"{v:.4f}" for v in row) + f",{lab}" for row, lab in zip(x, labels, strict=True))
    )
    result = qnn.train(qnn.Config(nwires=3, ndata=40, epochs=1, data=str(tmp_path / "d.csv")), "lightning.qubit")
    assert len(result["parameters"]["pre.weight"]) == 3 * 10


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def test_a_dying_worker_ends_the_run_with_a_clear_error(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "qbackends.cli",
        "run",
        "qnn",
        "--device",
        "lightning.qubit",
        "--nwires",
        "4",
        "--ndata",
        "64",
        "--batch-size",
        "8",
        "--epochs",
        "200",
        "--workers",
        "2",
        "--quiet",
        "--results-dir",
        str(tmp_path),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    checkpoint = tmp_path / "checkpoints" / qnn.CHECKPOINT_FILE
    deadline = time.monotonic() + 120
    while not checkpoint.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert checkpoint.exists(), "training never reached its first checkpoint"
    workers = [c for c in _children(proc.pid) if b"spawn" in Path(f"/proc/{c}/cmdline").read_bytes()]
    assert len(workers) >= 2
    os.kill(workers[-1], signal.SIGKILL)
    killed_at = time.monotonic()
    _, stderr = proc.communicate(timeout=90)
    assert time.monotonic() - killed_at < 90
    assert proc.returncode == 2
    errors = [line for line in stderr.splitlines() if line.startswith("qbackends: error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert errors[0].startswith("qbackends: error: QNN training failed: worker rank ")
    assert "exited with code -9 (Signal 9 (SIGKILL) received" in errors[0] or "exited with code 1" in errors[0]
    assert "--resume" in errors[0]


def test_qnn_module_runs_as_a_job_with_input_data(tmp_path):
    data = "\n".join(sonar.sonar_text().splitlines()[::4])  # 52 rows
    (tmp_path / "sonar-subset.csv").write_text(data)
    (tmp_path / "hp.json").write_text(json.dumps({"nwires": 3, "ndata": 52, "epochs": 1}))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "qbackends.cli",
            "job",
            "run",
            "qbackends.workloads.qnn",
            "--device",
            "local:pennylane/lightning.qubit",
            "--hyperparameters",
            str(tmp_path / "hp.json"),
            "--input-data",
            f"train={tmp_path / 'sonar-subset.csv'}",
            "--job-name",
            "qnn",
            "--jobs-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads((tmp_path / "qnn/results/results.json").read_text())["dataDictionary"]
    assert result["config"]["data"].endswith("sonar-subset.csv") and result["train_rows"] + result["test_rows"] == 52
    assert (tmp_path / "qnn/checkpoints" / qnn.CHECKPOINT_FILE).exists()


def test_sweep_writes_table_and_plot(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "qbackends.cli",
            "sweep",
            "qnn",
            "--device",
            "lightning.qubit",
            "--nwires",
            "2,3",
            "--ndata",
            "32",
            "--epochs",
            "1",
            "--quiet",
            "--results-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads((tmp_path / "qnn-sweep.json").read_text())
    assert [r["nwires"] for r in rows] == [2, 3]
    assert "| qubits | held-out accuracy |" in out.stdout
    assert (tmp_path / "qnn-sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_resume_refuses_another_run_or_a_corrupt_checkpoint(tmp_path):
    import torch

    qnn.train(qnn.Config(**{**SMALL, "epochs": 2}), "lightning.qubit", checkpoint_dir=tmp_path)
    with pytest.raises(WorkloadInputError, match=r"another device \('lightning.qubit' then, 'default.qubit' now\)"):
        qnn.train(qnn.Config(**{**SMALL, "epochs": 3}), "default.qubit", checkpoint_dir=tmp_path, resume=True)
    path = tmp_path / qnn.CHECKPOINT_FILE
    pristine = torch.load(path, weights_only=True)
    for edit, message in [
        (lambda s: s.update(epoch=100), "epoch 100 is not a whole number from 1 to --epochs 3"),
        (lambda s: s["model"].update({k: v * float("nan") for k, v in s["model"].items()}), "a model weight is not finite"),
        (lambda s: s["run"].update(data="0" * 64), "the data differ"),
    ]:
        state = {**pristine, "model": dict(pristine["model"]), "run": dict(pristine["run"])}
        edit(state)
        torch.save(state, path)
        with pytest.raises(WorkloadInputError, match=message):
            qnn.train(qnn.Config(**{**SMALL, "epochs": 3}), "lightning.qubit", checkpoint_dir=tmp_path, resume=True)


@pytest.mark.parametrize(
    "backend", ["lightning.qubit", "lightning.kokkos", "local:qbackends/fused.qubit", "local:qbackends/batched.qubit"]
)
def test_the_quantum_layer_keeps_float64_through_torch(backend):
    """PennyLane's torch interface made a Python float result float32 (1e-8 off); get_device's devices
    return float64, so the QNN batch and its gradients agree with default.qubit to 1e-12."""
    import torch

    from qbackends import get_device

    torch.manual_seed(0)
    inputs = torch.rand(16, 4, dtype=torch.float64) * 3
    outputs = []
    for name in (backend, "default.qubit"):
        torch.manual_seed(1)
        layer = qnn.quantum_layer(4, get_device(name, wires=4), "adjoint" if name != "default.qubit" else "backprop").double()
        x = inputs.clone().requires_grad_(True)
        value = layer(x).sum()
        value.backward()
        assert value.dtype == torch.float64
        outputs.append((value.detach(), x.grad, [p.grad for p in layer.parameters()]))
    (v1, g1, w1), (v2, g2, w2) = outputs
    assert abs(float(v1 - v2)) < 1e-12
    torch.testing.assert_close(g1, g2, atol=1e-12, rtol=0)
    for a, b in zip(w1, w2, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_a_split_with_no_held_out_rows_is_refused(tmp_path):
    with pytest.raises(WorkloadInputError, match=r"leaves \d+ to train on and 0 held out"):
        qnn.train(qnn.Config(**{**SMALL, "ndata": 6, "test_fraction": 0.01}), "lightning.qubit")
    binary = tmp_path / "d.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(WorkloadInputError, match="is not UTF-8 text"):
        qnn.train(qnn.Config(**{**SMALL, "data": str(binary)}), "lightning.qubit")


def test_auto_trains_on_the_batched_path_and_matches_lightning():
    """Under auto the QNN takes batched.qubit (the minibatch as one compiled call): the same run,
    parameter for parameter, as on lightning.qubit with adjoint, over several epochs."""
    config = qnn.Config(**{**SMALL, "epochs": 3})
    fast = qnn.train(config, "auto")
    reference = qnn.train(config, "lightning.qubit")
    assert fast["device"] == "qbackends.batched.qubit" and reference["device"] == "lightning.qubit"
    assert fast["history"][-1]["train_loss"] != fast["history"][0]["train_loss"]  # it trained
    for name, values in reference["parameters"].items():
        np.testing.assert_allclose(fast["parameters"][name], values, atol=1e-6, rtol=0)


def test_a_checkpoint_with_wrong_shapes_is_refused_typed(tmp_path):
    import torch

    qnn.train(qnn.Config(**{**SMALL, "epochs": 1}), "lightning.qubit", checkpoint_dir=tmp_path)
    path = tmp_path / qnn.CHECKPOINT_FILE
    state = torch.load(path, weights_only=True)
    name = next(iter(state["model"]))
    state["model"][name] = torch.zeros(7, 7, dtype=torch.float64)
    torch.save(state, path)
    with pytest.raises(WorkloadInputError, match=r"is corrupt: Error\(s\) in loading state_dict"):
        qnn.train(qnn.Config(**{**SMALL, "epochs": 2}), "lightning.qubit", checkpoint_dir=tmp_path, resume=True)


def test_run_qnn_says_when_more_workers_will_not_help(tmp_path):
    """batched.qubit already runs the whole minibatch in one call: two local workers only split it."""
    cmd = [sys.executable, "-m", "qbackends.cli", "run", "qnn", "--nwires", "4", "--ndata", "32", "--epochs", "1"]
    cmd += ["--quiet", "--results-dir", str(tmp_path)]
    two = subprocess.run([*cmd, "--workers", "2"], capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-2000:]
    advice = [line for line in two.stderr.splitlines() if "local workers will not train faster" in line]
    assert len(advice) == 1 and "batched.qubit at 4 wires" in advice[0] and "Pass --workers 1 here" in advice[0]
    one = subprocess.run([*cmd, "--workers", "1"], capture_output=True, text=True, timeout=300)
    per_sample = subprocess.run(
        [*cmd, "--workers", "2", "--device", "lightning.qubit"], capture_output=True, text=True, timeout=300
    )
    assert "will not train faster" not in one.stderr + per_sample.stderr


def test_parameter_shift_trains_the_same_run_a_sample_at_a_time():
    """PennyLane's parameter-shift refuses broadcast inputs (#4462): the layer runs each row on its
    own, and the run equals the adjoint one (it was an internal error)."""
    config = dict(nwires=3, ndata=24, batch_size=8, epochs=1)
    shifted = qnn.train(qnn.Config(**config, diff_method="parameter-shift"), "lightning.qubit")
    adjoint = qnn.train(qnn.Config(**config), "lightning.qubit")
    for name, values in adjoint["parameters"].items():
        np.testing.assert_allclose(shifted["parameters"][name], values, atol=1e-8, rtol=0)
