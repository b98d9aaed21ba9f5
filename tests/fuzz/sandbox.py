"""A working folder per example, holding a user's own files, and the property every fuzzed command keeps there:
one typed line (exit 2) or success, and nothing changed outside the folders the command names as its own."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from qbackends import cli

USER_FILES = {  # what a user had before the command: it must be there, unchanged, after
    "mine/notes.txt": b"my notes\n",
    "mine/data/points.csv": b"0.1,0.2,M\n0.3,0.4,R\n",
    "results/keep.txt": b"an older run's file\n",
    "jobs/old-job/results/results.json": b'{"dataDictionary": {}}\n',
}


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    @property
    def said(self) -> list[str]:
        """qbackends' own lines on stderr."""
        return [line for line in self.err.splitlines() if line.startswith("qbackends:")]


def snapshot(root: Path) -> dict[str, str]:
    """relative path -> digest of its contents ("dir" for a folder) of everything under ``root``."""
    found = {}
    for path in root.rglob("*"):
        rel = str(path.relative_to(root))
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            found[rel] = "other"
        elif path.is_dir():
            found[rel] = "dir"
        else:
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@contextlib.contextmanager
def sandbox() -> Iterator[Path]:
    """A fresh working folder with ``USER_FILES`` in it; the command runs there (the process's folder, restored after)."""
    before = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="qbackends-fuzz-") as folder:
        root = Path(folder)
        for rel, content in USER_FILES.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(content)
        os.chdir(root)
        try:
            yield root
        finally:
            os.chdir(before)


def run(argv: Sequence[str]) -> Outcome:
    """``qbackends ARGV`` in this process, its output captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:  # argparse's own refusals
            code = exc.code if isinstance(exc.code, int) else 2
    return Outcome(code, out.getvalue(), err.getvalue())


def check_outcome(outcome: Outcome, argv: Sequence[str]) -> None:
    """Success, or one typed line: never an internal error, a traceback or a second line of qbackends' own."""
    assert "Traceback" not in outcome.err, (argv, outcome.err)
    assert not any(" internal error: " in line for line in outcome.said), (argv, outcome.said)
    if outcome.code == 2:
        assert len(outcome.said) == 1, (argv, outcome.err)
        assert outcome.said[0].startswith("qbackends: error: "), (argv, outcome.said)
    else:
        assert outcome.code in (0, 1), (argv, outcome.code, outcome.err)
        assert not any(line.startswith("qbackends: error: ") for line in outcome.said), (argv, outcome.said)


def check_files(root: Path, before: dict[str, str], own: Sequence[str]) -> None:
    """Nothing outside the folders in ``own`` (relative to ``root``, or absolute) was made, changed or removed, and
    the user's files are all there, unchanged, wherever they lie."""
    after = snapshot(root)
    folders = [Path(os.path.normpath(root / p)) for p in own]

    def owned(rel: str) -> bool:
        path = Path(os.path.normpath(root / rel))
        return any(path == f or f in path.parents for f in folders)

    for rel, content in USER_FILES.items():
        assert after.get(rel) == hashlib.sha256(content).hexdigest(), f"the user's {rel} was changed or removed"
    changed = sorted(rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel) and not owned(rel))
    # a folder the command made on its way to its own (results/ for results/qaoa) is no change to anything
    changed = [rel for rel in changed if not (after.get(rel) == "dir" and rel not in before and _leads_to(root / rel, folders))]
    assert not changed, f"changed outside the run's own folders {list(own)}: {changed}"


def _leads_to(path: Path, folders: Sequence[Path]) -> bool:
    path = Path(os.path.normpath(path))
    return any(path in f.parents for f in folders)
