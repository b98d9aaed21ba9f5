"""Probes on this machine, and the parsers fed recorded outputs."""

from __future__ import annotations

from qbackends import probe

NVIDIA_SMI = "NVIDIA H200, 9.0, 142336, 143771\nNVIDIA A100-SXM4-80GB, 8.0, 80000, 81920\n"


def test_parse_nvidia_smi():
    gpus = probe.parse_nvidia_smi(NVIDIA_SMI)
    assert gpus[0] == probe.GPU("NVIDIA H200", "9.0", 142336 * 2**20, 143771 * 2**20)
    assert gpus[1].name == "NVIDIA A100-SXM4-80GB" and gpus[1].arch == "8.0"


def test_amd_topology_from_recorded_sysfs(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/kfd").write_text("")
    nodes = tmp_path / "sys/class/kfd/kfd/topology/nodes"
    cpu = nodes / "0"
    cpu.mkdir(parents=True)
    (cpu / "properties").write_text("cpu_cores_count 64\nsimd_count 0\n")
    gpu = nodes / "1"
    (gpu / "mem_banks/0").mkdir(parents=True)
    (gpu / "properties").write_text("simd_count 416\ngfx_target_version 90010\n")
    (gpu / "name").write_text("aldebaran\n")
    (gpu / "mem_banks/0/properties").write_text("heap_type 1\nsize_in_bytes 68702699520\n")
    gpus, reason = probe.amd_gpus(str(tmp_path))
    assert gpus == (probe.GPU("aldebaran", "gfx90a", 68702699520, 68702699520),)
    assert reason in ("", "AMD GPU present but the ROCm runtime (libamdhip64) was not found")


def test_no_kfd_means_no_amd_gpu(tmp_path):
    assert probe.amd_gpus(str(tmp_path)) == ((), "no AMD GPU: /dev/kfd is absent (ROCm kernel driver not loaded)")


def test_missing_nvml_library_is_reported_not_raised():
    gpus, reason = probe.nvidia_gpus_from_nvml("libdoes-not-exist.so")
    assert gpus == () and "libdoes-not-exist.so not found" in reason


def test_installed_kokkos_wheel_is_openmp():
    assert probe.kokkos_execution_space() == "OpenMP"
    assert probe.kokkos_execution_space("no-such-distribution") == ""


def test_facts_round_trip_json():
    facts = probe.gather(("pennylane", "pennylane-lightning"))
    assert facts.distributions["pennylane-lightning"].startswith("0.45")
    assert facts.cores >= 1 and facts.host_memory_available > 0
    assert probe.MachineFacts.from_json(facts.to_json()) == facts
