"""One check for every workload's checkpoints: a checkpoint of this exact run, or a refusal that names the difference."""

from __future__ import annotations

from pathlib import Path

import pytest

from qbackends import checkpoint
from qbackends.errors import CheckpointError, WorkloadInputError
from qbackends.fixes import hyperparameter, option

DATA = checkpoint.Inputs("data", "the data differ (the file's contents changed)")
PATH = Path("run/qnn-checkpoint.pt")


def _run(workers: int = 1, lr: float = 0.03, device: str = "lightning.qubit") -> checkpoint.RunIdentity:
    return checkpoint.RunIdentity({"lr": lr, "seed": 1}, checkpoint.digest(b"rows"), device, DATA, workers)


def _saved(run: checkpoint.RunIdentity) -> dict:
    return checkpoint.saved_run(PATH, {"config": {**run.settings, "epochs": 3}, "run": run.record()}, option)


ANOTHER_RUN = (
    "Checkpoint 'run/qnn-checkpoint.pt' is of another run: its settings differ (lr: 0.03 then, 0.2 now); it was "
    "made on another device ('lightning.qubit' then, 'lightning.kokkos' now); it had another number of workers "
    "(1 then, 2 now). Fix: "
)


@pytest.mark.parametrize(
    ("spell", "fix"),
    [
        (
            option,
            "resume with the settings, the data, --device and --workers it was made with, or pass another "
            "--results-dir (or --checkpoint-dir) to start a new run beside it.",
        ),
        (  # a job's workers are among its hyperparameters; its device is the job's
            hyperparameter,
            "resume with the hyperparameters, the data and the job's device it was made with, or start a new job that "
            "does not take this checkpoint (another job name; no copy_checkpoints_from_job).",
        ),
    ],
)
def test_the_same_run_passes_and_every_difference_is_named_with_the_fix(spell, fix):
    checkpoint.check(PATH, _saved(_run()), _run(), spell)
    with pytest.raises(CheckpointError) as refused:
        checkpoint.check(PATH, _saved(_run()), _run(workers=2, lr=0.2, device="lightning.kokkos"), spell)
    assert isinstance(refused.value, WorkloadInputError)
    assert str(refused.value) == ANOTHER_RUN + fix


@pytest.mark.parametrize(
    ("spell", "fix"),
    [
        (
            option,
            "pass --epochs 3 or more to continue it, or pass another --results-dir (or --checkpoint-dir) to start a new "
            "run beside it.",
        ),
        (
            hyperparameter,
            "set epochs to 3 or more in the hyperparameters to continue it, or start a new job that does not take this "
            "checkpoint (another job name; no copy_checkpoints_from_job).",
        ),
    ],
)
def test_a_checkpoint_further_along_says_how_to_continue_it_in_its_callers_words(spell, fix):
    refused = checkpoint.further_along(PATH, 3, 2, "epochs", spell)
    assert str(refused) == f"Checkpoint 'run/qnn-checkpoint.pt' holds 3 finished epochs, more than the 2 asked for. Fix: {fix}"


def test_changed_inputs_are_said_in_the_workloads_words():
    saved = _saved(_run())
    saved["run"]["inputs"] = checkpoint.digest(b"other rows")
    with pytest.raises(CheckpointError, match=r"is of another run: the data differ \(the file's contents changed\)\."):
        checkpoint.check(PATH, saved, _run(), option)


@pytest.mark.parametrize("state", [[], {"config": {}}, {"config": {}, "run": "x"}])
@pytest.mark.parametrize(
    ("spell", "fix"),
    [
        (option, "remove it to start over."),
        (hyperparameter, "start a new job that does not take it (another job name; no copy_checkpoints_from_job)."),
    ],
)
def test_a_file_without_settings_or_run_record_is_unreadable(state, spell, fix):
    with pytest.raises(CheckpointError) as refused:
        checkpoint.saved_run(PATH, state, spell)
    assert str(refused.value) == (f"Checkpoint 'run/qnn-checkpoint.pt' is unreadable: no configuration or run record. Fix: {fix}")


def test_the_device_a_checkpoint_was_made_on():
    assert checkpoint.recorded_device(_saved(_run(device="lightning.kokkos"))) == "lightning.kokkos"
    assert checkpoint.recorded_device(None) is None
    assert checkpoint.recorded_device({"config": {}, "run": {"device": 3}}) is None
