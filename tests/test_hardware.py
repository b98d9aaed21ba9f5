"""On GPU machines: the GPU backends give lightning.qubit's values and gradients. What ``auto`` takes on a GPU
machine is checked everywhere, from the facts recorded on one (tests/facts/h200.json).

The GPU runs are skipped elsewhere with the probe's reason (the `requires` marker, tests/conftest.py).
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from circuits import qaoa_qnode, random_params
from conftest import recorded_facts

from qbackends import choose, get_device
from qbackends.context import get_context
from qbackends.screening import auto_candidates


def _same_as_lightning_qubit(spec: str) -> None:
    params = random_params((2, 2))
    ours = qaoa_qnode(get_device(spec, wires=12), nodes=12, edges=18)
    reference = qaoa_qnode(qml.device("lightning.qubit", wires=12), nodes=12, edges=18)
    assert abs(ours(params) - reference(params)) < 1e-10
    np.testing.assert_allclose(qml.grad(ours)(params), qml.grad(reference)(params), atol=1e-10)


@pytest.mark.parametrize(
    ("wires", "taken"), [(24, "pennylane/lightning.gpu"), (18, "pennylane/lightning.gpu"), (12, "pennylane/lightning.qubit")]
)
def test_auto_on_an_h200_takes_lightning_gpu_from_its_min_auto_wires(wires, taken):
    """With no circuit yet (``choose("auto", n)``, what a job checks), auto on the recorded H200 takes lightning.gpu
    from 18 wires and a CPU backend below: GPUs are weighed only from their ``min_auto_wires``."""
    assert choose("auto", wires, facts=recorded_facts("h200")).backend.key == taken


@pytest.mark.requires("cuda")
def test_lightning_gpu_matches_lightning_qubit():
    _same_as_lightning_qubit("local:pennylane/lightning.gpu")
    dev = get_device("auto", wires=24)
    assert dev.name == "qbackends.auto"  # the per-circuit device; which backend a circuit gets is measured there
    assert "pennylane/lightning.gpu" in [c.backend.key for c in auto_candidates(get_context(), 24)]


@pytest.mark.requires("rocm")
def test_lightning_amdgpu_matches_lightning_qubit():
    _same_as_lightning_qubit("local:pennylane/lightning.amdgpu")
