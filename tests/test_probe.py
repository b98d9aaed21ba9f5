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


def _cgroup_file(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def test_a_memory_cgroup_limit_bounds_the_memory_available(tmp_path):
    """A Slurm job's or a container's memory limit shows in its cgroup, not in /proc/meminfo: the memory available is
    the least of MemAvailable and, over the cgroup and those above it, the limit less what is in use but the page
    cache it can drop. cgroup v2 and v1 (as Slurm's v1 plugin lays it out), recorded as the kernel shows them."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       65536000 kB\nMemAvailable:   50000000 kB\n")
    v2, job = tmp_path / "v2", tmp_path / "v2" / "system.slice" / "job"
    _cgroup_file(v2, "cgroup.controllers", "cpu memory\n")
    _cgroup_file(job, "memory.max", f"{8 << 30}\n")
    _cgroup_file(job, "memory.current", f"{3 << 30}\n")
    _cgroup_file(job, "memory.stat", f"anon {2 << 30}\ninactive_file {1 << 30}\n")
    _cgroup_file(job.parent, "memory.max", "max\n")  # no limit above it
    (tmp_path / "self-v2").write_text("0::/system.slice/job\n")
    assert probe.cgroup_room(str(v2), str(tmp_path / "self-v2")) == 6 << 30
    assert probe.host_memory_available(str(meminfo), str(v2), str(tmp_path / "self-v2")) == 6 << 30
    slice_ = tmp_path / "v2b" / "system.slice"  # a tighter limit on the slice above the job
    _cgroup_file(slice_.parent, "cgroup.controllers", "cpu memory\n")
    for folder, limit, used in ((slice_ / "job", 8 << 30, 3 << 30), (slice_, 5 << 30, 4 << 30)):
        _cgroup_file(folder, "memory.max", f"{limit}\n")
        _cgroup_file(folder, "memory.current", f"{used}\n")
        _cgroup_file(folder, "memory.stat", "inactive_file 0\n")
    assert probe.cgroup_room(str(slice_.parent), str(tmp_path / "self-v2")) == 1 << 30

    v1, step = tmp_path / "v1", tmp_path / "v1" / "memory" / "slurm" / "uid_1000" / "job_42"
    _cgroup_file(step, "memory.limit_in_bytes", f"{4 << 30}\n")
    _cgroup_file(step, "memory.usage_in_bytes", f"{1 << 30}\n")
    _cgroup_file(step, "memory.stat", "cache 0\ntotal_inactive_file 0\n")
    _cgroup_file(v1 / "memory", "memory.limit_in_bytes", "9223372036854771712\n")  # the root: no limit
    (tmp_path / "self-v1").write_text("5:cpuset:/slurm/uid_1000/job_42\n4:memory:/slurm/uid_1000/job_42\n0::/\n")
    assert probe.cgroup_room(str(v1), str(tmp_path / "self-v1")) == 3 << 30
    assert probe.host_memory_available(str(meminfo), str(v1), str(tmp_path / "self-v1")) == 3 << 30
    (tmp_path / "self-none").write_text("4:memory:/\n0::/\n")  # the root alone, unlimited: MemAvailable decides
    assert probe.cgroup_room(str(v1), str(tmp_path / "self-none")) is None
    assert probe.host_memory_available(str(meminfo), str(v1), str(tmp_path / "self-none")) == 50000000 * 1024
    assert probe.cgroup_room(str(v1), str(tmp_path / "absent")) is None
