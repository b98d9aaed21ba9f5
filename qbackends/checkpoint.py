"""A checkpoint of this exact run: what every workload's checkpoint records of its run, and the one check on resume.

A checkpoint holds ``"config"`` (every setting, by name) and ``"run"`` (``RunIdentity.record()``: the schema,
a digest of the settings that fix the result, a digest of the inputs' contents, the device and the workers);
the workload stores the rest (its progress) in its own format. Resuming refuses a checkpoint of another
run by naming each difference, its saved and given value, and the fix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CheckpointError
from .fixes import Spell

# The "run" record's layout; a record without one is of the layout before it (still read). 2: the checkpoint holds
# a seal of its progress (``seal``), so that a resumed run continues what was saved, or is refused; 1 had none.
SCHEMA = 2
SEALED = 2


def digest(*parts: bytes) -> str:
    """SHA-256 of the parts, one after another: inputs by content (a file replaced under its name is another run)."""
    return hashlib.sha256(b"".join(parts)).hexdigest()


def settings_digest(settings: Mapping[str, Any]) -> str:
    """The digest of settings by name and value (JSON, sorted by name)."""
    return digest(json.dumps(dict(settings), sort_keys=True).encode())


@dataclass(frozen=True)
class Inputs:
    """What a workload's inputs are called in a refusal: ``noun`` in the fix, ``changed`` as the difference."""

    noun: str  # "graph"
    changed: str  # "the graph differs (the edge list's contents changed)"


@dataclass(frozen=True)
class RunIdentity:
    """What makes a run this run; a checkpoint continues only the run of the same identity.

    Attributes:
        settings: every setting that fixes the result, by name (those a resumed run may change left out).
        inputs: ``digest`` of the inputs' contents (a graph, a data set).
        device: the PennyLane name of the backend that ran it (under ``auto``, the one auto took).
        words: how the workload calls its inputs.
        workers: the processes that shared it, for a workload that runs on several (None: one, always).
        defaults: settings left out of ``settings`` because they hold the value every run had before the
            setting existed (a checkpoint from then resumes), by name: that value.
        ranks: the MPI ranks that shared its state (``--mpi``; None: one process).
    """

    settings: Mapping[str, Any]
    inputs: str
    device: str
    words: Inputs
    workers: int | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    ranks: int | None = None

    def record(self) -> dict[str, Any]:
        """The ``"run"`` entry of a checkpoint."""
        record: dict[str, Any] = {
            "schema": SCHEMA,
            "settings": settings_digest(self.settings),
            "inputs": self.inputs,
            "device": self.device,
        }
        if self.workers is not None:
            record["workers"] = self.workers
        if self.ranks is not None:
            record["ranks"] = self.ranks
        return record

    def fix(self, spell: Spell) -> str:
        """What to resume with, or what to do instead, as ``spell``'s user gives settings."""
        names = [spell.settings, f"the {self.words.noun}", spell.device]
        if self.workers is not None and (workers := spell.named("workers")):
            names.append(workers)
        if self.ranks is not None:
            names.append("the number of MPI ranks (mpiexec -n R)")
        return f"resume with {', '.join(names[:-1])} and {names[-1]} it was made with, or {spell.new_run}."


def saved_run(path: Path, state: Any, spell: Spell) -> dict[str, Any]:
    """``state``'s checks as a checkpoint: its settings and run record are there, of a schema this reads
    (``spell`` words the fix)."""
    if not isinstance(state, dict) or not isinstance(state.get("config"), dict) or not isinstance(state.get("run"), dict):
        raise unreadable(path, "no configuration or run record", spell)
    schema = state["run"].get("schema", 0)
    if not isinstance(schema, int) or isinstance(schema, bool) or not 0 <= schema <= SCHEMA:
        raise CheckpointError(
            f"Checkpoint {str(path)!r} is of schema {schema!r}; this qbackends reads schemas up to {SCHEMA}.",
            f"resume it with the qbackends that wrote it, or {spell.new_run}.",
        )
    return state


def recorded_device(state: Mapping[str, Any] | None) -> str | None:
    """The device a checkpoint was made on (a PennyLane device name), if it says: under ``auto``, a resumed run
    continues on it (the device functions of ``workloaddevices`` take it as ``resumed_on``)."""
    device = state["run"].get("device") if state is not None else None
    return device if isinstance(device, str) else None


def _upgraded(run: Mapping[str, Any], saved: Mapping[str, Any], identity: RunIdentity) -> dict[str, Any]:
    """A run record of schema 0 in today's layout: QAOA's named its inputs "graph"; the QNN's named them "data",
    held its workers as text and no settings digest (it compared the settings themselves, as this does)."""
    if run.get("schema", 0) == SCHEMA:
        return dict(run)
    upgraded = {k: v for k, v in run.items() if k not in ("graph", "data")}
    upgraded["inputs"] = run.get("graph", run.get("data"))
    upgraded.setdefault("settings", settings_digest({k: saved.get(k) for k in identity.settings}))
    if isinstance(run.get("workers"), str) and run["workers"].isdigit():
        upgraded["workers"] = int(run["workers"])
    return upgraded


def check(path: Path, state: Mapping[str, Any], identity: RunIdentity, spell: Spell) -> None:
    """Refuse a checkpoint (read by ``saved_run``) of another run than ``identity``'s, naming every difference
    (``spell`` words the fix)."""
    saved = state["config"]
    recorded, expected = _upgraded(state["run"], saved, identity), identity.record()
    differences = []
    if recorded.get("settings") != expected["settings"]:
        named = [f"{k}: {saved.get(k)!r} then, {v!r} now" for k, v in identity.settings.items() if saved.get(k) != v]
        named += [f"{k}: {saved[k]!r} then, {v!r} now" for k, v in identity.defaults.items() if saved.get(k, v) != v]
        differences.append(f"its settings differ ({', '.join(named) or 'see the checkpoint'})")
    if recorded.get("inputs") != expected["inputs"]:
        differences.append(identity.words.changed)
    if recorded.get("device") != expected["device"]:
        differences.append(f"it was made on another device ({recorded.get('device')!r} then, {identity.device!r} now)")
    if recorded.get("workers") != expected.get("workers"):
        differences.append(f"it had another number of workers ({recorded.get('workers')!r} then, {identity.workers!r} now)")
    if recorded.get("ranks") != expected.get("ranks"):
        then, now = (_ranks_words(r) for r in (recorded.get("ranks"), identity.ranks))
        differences.append(f"it ran on another number of MPI ranks ({then} then, {now} now)")
    if differences:
        raise CheckpointError(f"Checkpoint {str(path)!r} is of another run: {'; '.join(differences)}.", identity.fix(spell))


def _ranks_words(ranks: Any) -> str:
    return "one process" if ranks is None else f"{ranks!r} ranks"


def seal(progress: Any) -> str:
    """The digest of a checkpoint's progress (its workload's part: parameters, moments, history, tensors), by value."""
    return digest(_canonical(progress))


def check_seal(path: Path, state: Mapping[str, Any], progress: Any, spell: Spell) -> None:
    """Refuse a checkpoint (of a sealed schema) whose progress is not what was saved with it: edited or damaged
    (``spell`` words the fix)."""
    if state["run"].get("schema", 0) >= SEALED and state.get("seal") != seal(progress):
        raise corrupt(path, "its progress is not what was saved (the file was edited or damaged)", spell)


def _canonical(value: Any) -> bytes:
    """``value`` as bytes that only an equal value gives: mappings by sorted key, floats exactly, tensors by dtype,
    shape and contents."""
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: repr(kv[0]))
        return b"{" + b",".join(_canonical(k) + b":" + _canonical(v) for k, v in items) + b"}"
    if isinstance(value, (list, tuple)):
        return b"[" + b",".join(_canonical(v) for v in value) + b"]"
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor, without importing torch
        value = value.detach().cpu().contiguous().numpy()
    if hasattr(value, "tobytes") and hasattr(value, "dtype") and hasattr(value, "shape"):
        return f"array({value.dtype},{tuple(value.shape)})".encode() + value.tobytes()
    return f"{type(value).__name__}:{value!r}".encode()


def unreadable(path: Path, why: object, spell: Spell) -> CheckpointError:
    """A file that is no checkpoint at all; ``why`` in words, or the error that said so; ``spell`` words the fix."""
    text = " ".join(str(why).split())[:300]
    if isinstance(why, BaseException) and (not text or isinstance(why, KeyError)):
        text = f"{type(why).__name__}{': ' + text if text else ''}"
    return CheckpointError(f"Checkpoint {str(path)!r} is unreadable: {text.rstrip('.')}.", f"{spell.start_over}.")


def corrupt(path: Path, what: str, spell: Spell) -> CheckpointError:
    """A checkpoint of this run with a field that cannot be (a shape, a count, a value not finite); ``spell`` words
    the fix."""
    return CheckpointError(f"Checkpoint {str(path)!r} is corrupt: {what}.", f"{spell.start_over}.")


def further_along(path: Path, done: int, asked: int, setting: str, spell: Spell) -> CheckpointError:
    """A sound checkpoint of this run that holds more finished steps (``setting``: iterations, epochs) than the run
    asks for (nothing is wrong with it)."""
    return CheckpointError(
        f"Checkpoint {str(path)!r} holds {done} finished {setting}, more than the {asked} asked for.",
        f"{spell(setting, f'{done} or more')} to continue it, or {spell.new_run}.",
    )
