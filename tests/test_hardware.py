"""On GPU machines: the GPU backends give lightning.qubit's values and gradients.

Skipped elsewhere with the probe's reason (the `requires` marker, tests/conftest.py).
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from circuits import qaoa_qnode, random_params

from qbackends import get_device


def _same_as_lightning_qubit(spec: str) -> None:
    params = random_params((2, 2))
    ours = qaoa_qnode(get_device(spec, wires=12), nodes=12, edges=18)
    reference = qaoa_qnode(qml.device("lightning.qubit", wires=12), nodes=12, edges=18)
    assert abs(ours(params) - reference(params)) < 1e-10
    np.testing.assert_allclose(qml.grad(ours)(params), qml.grad(reference)(params), atol=1e-10)


@pytest.mark.requires("cuda")
def test_lightning_gpu_matches_lightning_qubit():
    _same_as_lightning_qubit("local:pennylane/lightning.gpu")
    assert get_device("auto", wires=24).name == "lightning.gpu"


@pytest.mark.requires("rocm")
def test_lightning_amdgpu_matches_lightning_qubit():
    _same_as_lightning_qubit("local:pennylane/lightning.amdgpu")
