"""Locks and writes: a lock file is never followed or written when it is not its own, every folder a run writes is
held, and a write that fails names its file and leaves the old one intact."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qbackends.errors import StorageError, WorkloadInputError
from qbackends.storage import LOCK_FILE, atomic_write_json, exclusive

QAOA = ["run", "qaoa", "--device", "lightning.qubit", "--nodes", "6", "--edges", "8", "--quiet", "--no-plot"]


def _cli(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qbackends.cli", *args], capture_output=True, text=True, **kwargs)


def test_a_lock_file_that_is_a_link_is_neither_followed_nor_written(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    results = tmp_path / "results"
    results.mkdir()
    (results / LOCK_FILE).symlink_to(victim)
    out = _cli(*QAOA, "--iterations", "1", "--results-dir", str(results))
    assert out.returncode == 2
    assert out.stderr == (
        f"qbackends: error: Results folder {str(results)!r} has a symbolic link as its lock file "
        f"{str(results / LOCK_FILE)!r}; qbackends does not write through it. Fix: remove {str(results / LOCK_FILE)!r} "
        "(or give this run its own folder).\n"
    )
    assert victim.read_text() == "precious\n"


def test_a_lock_file_hard_linked_to_another_file_is_not_written(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.link(victim, tmp_path / LOCK_FILE)
    with pytest.raises(WorkloadInputError, match="is not a plain file of its own; qbackends does not write it"):
        with exclusive(tmp_path / LOCK_FILE, "Results folder 'x'"):
            pass
    assert victim.read_text() == "precious\n"


def test_a_lock_file_that_is_a_pipe_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / LOCK_FILE)
    with pytest.raises(WorkloadInputError, match="is not a plain file of its own"):
        with exclusive(tmp_path / LOCK_FILE, "Results folder 'x'"):
            pass


def test_two_runs_sharing_a_checkpoint_folder_are_refused(tmp_path):
    checkpoints = tmp_path / "shared-checkpoints"
    first = subprocess.Popen(
        [sys.executable, "-m", "qbackends.cli", *QAOA, "--iterations", "100000", "--results-dir", str(tmp_path / "a"),
         "--checkpoint-dir", str(checkpoints)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (checkpoints / "qaoa-checkpoint.json").exists():
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.1)
        held = (checkpoints / "qaoa-checkpoint.json").read_bytes()
        second = _cli(*QAOA, "--iterations", "2", "--results-dir", str(tmp_path / "b"), "--checkpoint-dir", str(checkpoints))
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 2
    assert second.stderr.startswith(
        f"qbackends: error: Checkpoint folder {str(checkpoints)!r} is in use by another run (process {first.pid})"
    )
    assert b'"run"' in held and not (tmp_path / "b" / "qaoa-results.json").exists()


def test_a_checkpoint_folder_that_is_a_file_is_a_typed_error(tmp_path):
    (tmp_path / "afile").write_text("")
    out = _cli(*QAOA, "--iterations", "1", "--results-dir", str(tmp_path / "r"), "--checkpoint-dir", str(tmp_path / "afile"))
    assert out.returncode == 2
    assert out.stderr.startswith(
        f"qbackends: error: Checkpoint folder {str(tmp_path / 'afile')!r} cannot be written: File exists (a file stands "
        "where a folder must go)"
    )


def test_a_run_started_by_the_holder_works_inside_its_hold(tmp_path):
    with exclusive(tmp_path / LOCK_FILE, "Results folder 'r'"):
        child = subprocess.run(
            [sys.executable, "-c", "import sys; from pathlib import Path; from qbackends.storage import exclusive\n"
             f"with exclusive(Path({str(tmp_path / LOCK_FILE)!r}), 'r'): print('inside')"],
            capture_output=True,
            text=True,
        )  # fmt: skip
    assert child.stdout == "inside\n", child.stderr


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs, where the machine allows mounting one."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_is_a_typed_error_naming_the_file_and_the_old_file_is_kept(tiny_disk):
    target = tiny_disk / "results.json"
    atomic_write_json(target, {"kept": True})
    with pytest.raises(StorageError) as full:
        atomic_write_json(target, {"big": "x" * 200_000})
    assert str(full.value) == (
        f"{str(target)!r} cannot be written: No space left on device. Fix: free space on the disk that holds "
        f"{str(tiny_disk)!r}, or write elsewhere."
    )
    assert target.read_text() == '{\n  "kept": true\n}\n'
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["results.json"]  # no temporary file left


def test_a_deleted_working_folder_is_one_line(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    shell = f"cd {gone} && rmdir {gone} && {sys.executable} -m qbackends.cli run qaoa --nodes 4 --edges 3"
    out = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, env={**os.environ, "PYTHONSAFEPATH": "1"})
    assert out.returncode == 2
    assert out.stderr == (
        "qbackends: error: The current folder no longer exists (it was removed after this shell entered it); relative "
        "paths such as results/ cannot be made in it. Fix: cd to an existing folder and run the command again.\n"
    )


def test_the_lock_records_its_holder(tmp_path):
    with exclusive(tmp_path / LOCK_FILE, "r"):
        assert Path(tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
