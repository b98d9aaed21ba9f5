"""How a run words its fixes: as the CLI takes its settings, or as a hybrid job does."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Spell:
    """How the user of a run gives its settings; ``spell(name, value)`` is the fix for one, without its full stop.

    Attributes:
        template: a setting's fix, from ``name`` (as the code names it), ``option`` (as a flag spells it) and ``value``.
        settings: what a resumed run must give again, the settings as a whole.
        device: where the run's device is chosen.
        flag: how a setting that is not among ``settings`` is named (``--workers``); None: it is among them.
        new_run: how a new run starts beside a checkpoint of another.
        resume: how a stopped run continues from its checkpoint.
        start_over: what to do with a checkpoint that cannot be read (or is damaged).
    """

    template: str
    settings: str
    device: str
    flag: str | None
    new_run: str
    resume: str
    start_over: str

    def __call__(self, name: str, value: str) -> str:
        return self.template.format(name=name, option=name.replace("_", "-"), value=value)

    def named(self, name: str) -> str | None:
        """A setting outside ``settings`` as the run takes it, or None when it is one of them."""
        return self.flag.format(option=name.replace("_", "-")) if self.flag is not None else None


# ``pass --batch-size 1 or more``
option = Spell(
    "pass --{option} {value}",
    settings="the settings",
    device="--device",
    flag="--{option}",
    new_run="pass another --results-dir (or --checkpoint-dir) to start a new run beside it",
    resume="rerun with --resume",
    start_over="remove it to start over",
)
# a job's checkpoint is its folder's (the same job name) or one copied in (copy_checkpoints_from_job)
_NEW_JOB = "start a new job that does not take {} (another job name; no copy_checkpoints_from_job)"
# ``set batch_size to 1 or more in the hyperparameters``
hyperparameter = Spell(
    "set {name} to {value} in the hyperparameters",
    settings="the hyperparameters",
    device="the job's device",
    flag=None,
    new_run=_NEW_JOB.format("this checkpoint"),
    resume="run the job again with its checkpoints (the same job name, or copy_checkpoints_from_job)",
    start_over=_NEW_JOB.format("it"),
)
