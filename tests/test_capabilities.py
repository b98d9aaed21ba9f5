"""The capability logic for CUDA/ROCm machines, fed facts recorded on them."""

from __future__ import annotations

import pytest
from conftest import builtin, recorded_facts, recorded_failures

import qbackends
from qbackends import capabilities
from qbackends.context import get_context
from qbackends.errors import BackendUnavailableError, InsufficientMemoryError


def test_h200_runs_lightning_gpu_with_gpu_memory():
    caps = capabilities.evaluate(builtin("lightning.gpu"), recorded_facts("h200"))
    assert caps.ok and caps.reason == ""
    assert caps.hardware == "1x NVIDIA H200 (compute 9.0)"
    # 4 state copies of 16 * 2^n bytes in 149250113536 free bytes: 2^n <= 2.33e9 -> n = 31
    assert caps.max_wires == 31
    assert caps.memory_available == 149250113536


def test_real_cuda_driver_error_makes_lightning_gpu_unavailable():
    failure = recorded_failures("cpu_with_gpu_package")["lightning.gpu"]
    caps = capabilities.evaluate(builtin("lightning.gpu"), recorded_facts("cpu_with_gpu_package"), construction_error=failure)
    assert not caps.ok
    assert "CUDA driver version is insufficient for CUDA runtime version" in caps.reason
    assert "update the NVIDIA driver" in caps.fix


def test_old_gpu_refused_by_compute_capability():
    caps = capabilities.evaluate(builtin("lightning.gpu"), recorded_facts("old_nvidia"))
    assert not caps.ok
    assert caps.reason == "no NVIDIA GPU with compute capability >= 7.0: Tesla P100-PCIE-16GB (compute 6.0)"


def test_amd_machine_runs_amdgpu_and_hip_kokkos_lives_on_the_gpu():
    facts = recorded_facts("mi250_hip_kokkos")
    amd = capabilities.evaluate(builtin("lightning.amdgpu"), facts)
    kokkos = capabilities.evaluate(builtin("lightning.kokkos"), facts)
    assert amd.ok and kokkos.ok
    assert kokkos.hardware == "2x gfx90a (gfx90a) (Kokkos HIP)"
    assert kokkos.memory_available == 68702699520
    gpu = capabilities.evaluate(builtin("lightning.gpu"), facts)
    assert not gpu.ok and "pennylane-lightning-gpu is not installed" in gpu.reason and "no NVIDIA GPU" in gpu.reason


def test_laptop_has_no_kokkos_and_says_how_to_install():
    caps = capabilities.evaluate(builtin("lightning.kokkos"), recorded_facts("laptop"))
    assert not caps.ok
    assert caps.reason == "package pennylane-lightning-kokkos is not installed"
    assert caps.fix == "`pip install pennylane-lightning-kokkos`"


def test_working_set_and_max_wires_arithmetic():
    lq = builtin("lightning.qubit")
    assert capabilities.state_bytes(20) == 16 * 2**20
    assert capabilities.state_bytes(20, "c64") == 8 * 2**20
    assert capabilities.working_set_bytes(lq, 20) == 9 * 16 * 2**20
    assert capabilities.max_wires(lq, 9 * 16 * 2**20) == 20
    assert capabilities.max_wires(lq, 9 * 16 * 2**20 - 1) == 19
    assert capabilities.max_wires(lq, 9 * 16 * 2**20, "c64") == 21
    dq = builtin("default.qubit")
    # adjoint: dense 2^n x 2^n complex128 observable on top of the state copies
    assert capabilities.working_set_bytes(dq, 16) == 4 * 16 * 2**16 + 16 * 4**16
    assert capabilities.working_set_bytes(dq, 16, diff_method="backprop") == 4 * 16 * 2**16


def test_auto_picks_gpu_only_for_large_circuits_on_h200():
    facts = recorded_facts("h200")
    assert qbackends.choose("auto", 24, facts=facts).backend.simulator == "lightning.gpu"
    assert qbackends.choose("auto", 16, facts=facts).backend.simulator == "lightning.kokkos"
    assert qbackends.choose("auto", 10, facts=facts).backend.simulator == "lightning.qubit"  # kokkos only ties there


def test_auto_on_driver_broken_machine_falls_to_cpu():
    facts = recorded_facts("cpu_with_gpu_package")
    get_context().build_failures.update(recorded_failures("cpu_with_gpu_package"))  # as the factory records them
    assert qbackends.choose("auto", 20, facts=facts).backend.simulator == "lightning.kokkos"


def test_explicit_gpu_on_broken_driver_raises_the_real_reason():
    get_context().build_failures.update(recorded_failures("cpu_with_gpu_package"))
    with pytest.raises(BackendUnavailableError, match="CUDA driver version is insufficient"):
        qbackends.choose("local:pennylane/lightning.gpu", 20, facts=recorded_facts("cpu_with_gpu_package"))


def test_fallback_chain_on_recorded_machine(caplog):
    facts = recorded_facts("laptop")
    chain = ["local:pennylane/lightning.kokkos", "local:pennylane/lightning.qubit"]
    with caplog.at_level("WARNING", logger="qbackends"):
        choice = qbackends.choose("local:pennylane/lightning.gpu", 20, fallback=chain, facts=facts)
    assert choice.backend.simulator == "lightning.qubit"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "using local:pennylane/lightning.qubit instead of local:pennylane/lightning.gpu" in warnings[0]
    assert "pennylane-lightning-gpu is not installed" in warnings[0]


def test_memory_guard_uses_gpu_memory():
    with pytest.raises(InsufficientMemoryError) as err:
        qbackends.choose("local:pennylane/lightning.gpu", 33, facts=recorded_facts("h200"))
    text = str(err.value)
    assert "33 wires on local:pennylane/lightning.gpu at c128 need 512 GiB (549755813888 bytes)" in text
    assert "149250113536 bytes" in text and "use at most 31 wires" in text
