"""Facts about this machine: installed distributions, GPUs, Kokkos build, memory, cores.

Each gatherer returns data and never raises. ``MachineFacts`` is plain data, so the
capability logic can be fed facts recorded on other machines (see tests/facts/).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import importlib
import importlib.util
import mmap
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any

from .backend import Backend


@dataclass(frozen=True)
class GPU:
    """One GPU: name, compute capability (NVIDIA) or gfx target (AMD), memory in bytes."""

    name: str
    arch: str
    memory_free: int
    memory_total: int


@dataclass(frozen=True)
class MachineFacts:
    """What probing found. ``*_error`` fields say why a probe found nothing."""

    host_memory_available: int
    cores: int
    distributions: dict[str, str] = field(default_factory=dict)
    nvidia_gpus: tuple[GPU, ...] = ()
    nvidia_error: str = ""
    amd_gpus: tuple[GPU, ...] = ()
    amd_error: str = ""
    kokkos_space: str = ""  # "OpenMP", "Serial", "Threads", "CUDA", "HIP", or "" if not installed
    threads: dict[str, str] = field(default_factory=dict)  # the thread-count variables set here (THREAD_VARIABLES)
    shared_memory_available: int | None = None  # room in SHARED_MEMORY (ranks of a node share a state there); None: none

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def without_memory(self) -> tuple[Any, ...]:
        """Every fact but the memory available (it changes from one read to the next), as a key."""
        values = ((f.name, getattr(self, f.name)) for f in fields(self) if f.name not in MEMORY_FACTS)
        return tuple((name, tuple(sorted(v.items())) if isinstance(v, dict) else v) for name, v in values)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MachineFacts:
        data = dict(data)
        for key in ("nvidia_gpus", "amd_gpus"):
            data[key] = tuple(GPU(**g) for g in data.get(key, ()))
        return cls(**data)


def distribution_version(name: str) -> str | None:
    """The installed version of a distribution, from its metadata (nothing is imported)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


MEMORY_FACTS = ("host_memory_available", "shared_memory_available")  # read again for every request
SHARED_MEMORY = "/dev/shm"


def shared_memory_available() -> int | None:
    """Bytes ``SHARED_MEMORY`` can still take (a container's is 64 MiB unless ``--shm-size`` says more); None
    where there is none."""
    try:
        stat = os.statvfs(SHARED_MEMORY)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def host_memory_available(
    meminfo: str = "/proc/meminfo", cgroup_root: str = "/sys/fs/cgroup", cgroups: str = "/proc/self/cgroup"
) -> int:
    """Bytes this process can still take: MemAvailable (physical pages where /proc is absent), or less where its
    memory cgroup allows less (``cgroup_room``: a container's or a Slurm job's limit)."""
    available = None
    try:
        with open(meminfo, "rb") as f:
            text = f.read()
        at = text.find(b"MemAvailable:")
        if at >= 0:
            available = int(text[at + 13 : text.index(b"\n", at)].split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            available = 0
    room = cgroup_room(cgroup_root, cgroups)
    return available if room is None else min(available, room)


UNLIMITED = 1 << 60  # a cgroup v1 limit this large is none (the kernel shows "no limit" as about 2^63)


def cgroup_room(root: str = "/sys/fs/cgroup", cgroups: str = "/proc/self/cgroup") -> int | None:
    """Bytes this process's memory cgroup may still take: the least, over its cgroup and those above it, of the limit
    less what is in use but the page cache it can drop (inactive files). cgroup v2 (``memory.max``) or v1 (the memory
    controller's ``memory.limit_in_bytes``); None where no limit is set, or there are no cgroups."""
    rooms = [room for level in _limited_cgroups(root, cgroups) if (room := _cgroup_level_room(*level)) is not None]
    return max(0, min(rooms)) if rooms else None


@functools.cache
def _limited_cgroups(root: str, cgroups: str) -> tuple[tuple[Path, str, str, str], ...]:
    """The memory cgroups of this process, and those above them, that have a limit (found once: a process does not
    change cgroups), with the names of their limit, usage and inactive page-cache figures."""
    try:
        lines = Path(cgroups).read_text().splitlines()
    except OSError:
        return ()
    levels = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "" and Path(root, "cgroup.controllers").exists():  # v2: one hierarchy
            base, names = Path(root), ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):  # v1: the memory controller's hierarchy
            base, names = Path(root, "memory"), ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        here = base / path.lstrip("/")
        for folder in [here, *here.parents]:
            if len(folder.parts) < len(base.parts):
                break
            if _cgroup_level_room(folder, *names) is not None:
                levels.append((folder, *names))
    return tuple(levels)


def _cgroup_level_room(folder: Path, limit_file: str, usage_file: str, inactive_key: str) -> int | None:
    try:
        limit = (folder / limit_file).read_text().strip()
        if limit == "max" or int(limit) >= UNLIMITED:
            return None
        used = int((folder / usage_file).read_text().strip())
        stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines() if line.count(" ") == 1)
    except (OSError, ValueError):
        return None
    return int(limit) - used + int(stat.get(inactive_key, 0))


def cpu_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# ---- NVIDIA -----------------------------------------------------------------------------


class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def nvidia_gpus_from_nvml(library: str = "libnvidia-ml.so.1") -> tuple[tuple[GPU, ...], str]:
    """GPUs from the NVIDIA driver's management library, or () and why not."""
    try:
        nvml = ctypes.CDLL(library)
    except OSError as exc:
        return (), f"NVIDIA driver library {library} not found ({exc})"
    if nvml.nvmlInit_v2() != 0:
        return (), "NVIDIA driver library present but nvmlInit failed (driver not loaded?)"
    try:
        count = ctypes.c_uint()
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return (), "nvmlDeviceGetCount failed"
        gpus = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle))
            name = ctypes.create_string_buffer(96)
            nvml.nvmlDeviceGetName(handle, name, 96)
            major, minor = ctypes.c_int(), ctypes.c_int()
            nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor))
            mem = _NvmlMemory()
            nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem))
            gpus.append(GPU(name.value.decode(), f"{major.value}.{minor.value}", mem.free, mem.total))
        return tuple(gpus), "" if gpus else "NVIDIA driver reports no GPU"
    finally:
        nvml.nvmlShutdown()


NVIDIA_SMI_QUERY = ["--query-gpu=name,compute_cap,memory.free,memory.total", "--format=csv,noheader,nounits"]


def parse_nvidia_smi(output: str) -> tuple[GPU, ...]:
    """Parse ``nvidia-smi --query-gpu=name,compute_cap,memory.free,memory.total --format=csv,noheader,nounits``."""
    gpus = []
    for line in output.strip().splitlines():
        name, cap, free, total = (part.strip() for part in line.rsplit(",", 3))
        gpus.append(GPU(name, cap, int(free) * 2**20, int(total) * 2**20))
    return tuple(gpus)


def nvidia_gpus() -> tuple[tuple[GPU, ...], str]:
    """NVIDIA GPUs from the driver library, else nvidia-smi; () and the reason when none."""
    gpus, nvml_error = nvidia_gpus_from_nvml()
    if gpus:
        return gpus, ""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return (), f"no NVIDIA GPU: {nvml_error}, and nvidia-smi is not on PATH"
    try:
        out = subprocess.run([smi, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=20, check=True).stdout
        gpus = parse_nvidia_smi(out)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return (), f"no NVIDIA GPU: {nvml_error}; nvidia-smi failed ({exc})"
    return gpus, "" if gpus else "no NVIDIA GPU: nvidia-smi lists none"


# ---- AMD --------------------------------------------------------------------------------


def amd_gpus(root: str = "/") -> tuple[tuple[GPU, ...], str]:
    """AMD GPUs from the ROCm kernel driver (/dev/kfd and its sysfs topology); () and why not."""
    base = Path(root)
    if not (base / "dev/kfd").exists():
        return (), "no AMD GPU: /dev/kfd is absent (ROCm kernel driver not loaded)"
    gpus = []
    for node in sorted((base / "sys/class/kfd/kfd/topology/nodes").glob("*")):
        props = _kfd_properties(node / "properties")
        if props.get("simd_count", 0) == 0:  # CPU nodes have no SIMDs
            continue
        name = (node / "name").read_text().strip() if (node / "name").exists() else "AMD GPU"
        gfx = props.get("gfx_target_version", 0)
        arch = f"gfx{gfx // 10000}{(gfx // 100) % 100:x}{gfx % 100:x}" if gfx else "unknown"
        total = sum(_kfd_properties(bank).get("size_in_bytes", 0) for bank in (node / "mem_banks").glob("*/properties"))
        gpus.append(GPU(name, arch, total, total))
    if not gpus:
        return (), "no AMD GPU: the ROCm driver lists no GPU node"
    if _rocm_runtime() is None:
        return tuple(gpus), "AMD GPU present but the ROCm runtime (libamdhip64) was not found"
    return tuple(gpus), ""


def _kfd_properties(path: Path) -> dict[str, int]:
    try:
        pairs = (line.split() for line in path.read_text().splitlines())
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isascii() and p[1].isdigit()}
    except OSError:
        return {}


def _rocm_runtime() -> str | None:
    for candidate in ("/opt/rocm/lib/libamdhip64.so",):
        if Path(candidate).exists():
            return candidate
    return ctypes.util.find_library("amdhip64")


# ---- Kokkos -----------------------------------------------------------------------------

_KOKKOS_SPACES = (
    ("CUDA", b"Kokkos::Cuda"),
    ("HIP", b"Kokkos::HIP"),
    ("OpenMP", b"Kokkos::OpenMP"),
    ("Threads", b"Kokkos::Threads"),
)


def kokkos_execution_space(distribution: str = "pennylane-lightning-kokkos") -> str:
    """The execution space the installed lightning.kokkos binary was built for.

    Read from the compiled module's symbols: importing it is not needed, and asking Kokkos
    before it is initialised aborts the process.
    """
    try:
        files = metadata.distribution(distribution).files or []
    except metadata.PackageNotFoundError:
        return ""
    for file in files:
        if file.name.startswith("lightning_kokkos_ops") and file.suffix in (".so", ".pyd"):
            return kokkos_space_of(Path(str(file.locate())))
    return ""


@functools.cache
def kokkos_space_of(binary: Path) -> str:
    try:
        with binary.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            for space, marker in _KOKKOS_SPACES:
                if data.find(marker) != -1:
                    return space
    except (OSError, ValueError):
        return ""
    return "Serial"


# ---- all together -----------------------------------------------------------------------


def gather(distributions: tuple[str, ...]) -> MachineFacts:
    """Probe this machine for the given distributions."""
    nvidia, nvidia_error = nvidia_gpus()
    amd, amd_error = amd_gpus()
    versions = {d: v for d in distributions if (v := distribution_version(d)) is not None}
    return MachineFacts(
        host_memory_available=host_memory_available(),
        cores=cpu_cores(),
        distributions=versions,
        nvidia_gpus=nvidia,
        nvidia_error=nvidia_error,
        amd_gpus=amd,
        amd_error=amd_error,
        kokkos_space=kokkos_execution_space() if "pennylane-lightning-kokkos" in versions else "",
        threads=thread_settings(),
        shared_memory_available=shared_memory_available(),
    )


@functools.cache
def _cached(distributions: tuple[str, ...]) -> MachineFacts:
    return gather(distributions)


def machine_facts(distributions: tuple[str, ...]) -> MachineFacts:
    """``gather``, cached per process (memory and the thread variables are read again each call: they change)."""
    facts = _cached(tuple(sorted(set(distributions))))
    fresh = {"host_memory_available": host_memory_available(), "shared_memory_available": shared_memory_available()}
    return MachineFacts(**{**facts.__dict__, **fresh, "threads": thread_settings()})


# What Kokkos' host builds (lightning.kokkos) start their thread team with, the first that is set.
THREAD_VARIABLES = ("KOKKOS_NUM_THREADS", "OMP_NUM_THREADS")


def thread_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The thread-count variables set in ``environ`` (this process's by default), by name."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in THREAD_VARIABLES if name in env}


def clear_cache() -> None:
    _cached.cache_clear()


MPI_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS")


def mpi_support(backend: Backend) -> tuple[bool, str]:
    """(ok, reason): whether ``backend`` can run with ``mpi=True`` in this installation.

    Its compiled module (``Backend.mpi_module``) must carry an MPI manager (the PyPI wheels are built without one)
    and ``mpi4py`` must be importable.
    """
    device_name, module_name = backend.device_name, backend.mpi_module
    if module_name is None:
        return False, f"{device_name} has no MPI mode of a compiled Lightning module"
    if importlib.util.find_spec(module_name.rpartition(".")[0]) is None:
        return False, f"{device_name} is not installed"
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        return False, f"{module_name} does not load: {exc}"
    if not any("MPI" in name for name in dir(module)):
        return False, f"this {device_name} build has no MPI support (the PyPI wheels are built without it)"
    if importlib.util.find_spec("mpi4py") is None:
        return False, "mpi4py is not installed"
    return True, ""


def mpi_world_size(environ: dict[str, str] | None = None) -> int:
    """Processes of the MPI job this process belongs to, from the launcher's environment (1 outside one)."""
    env = os.environ if environ is None else environ
    for name in MPI_SIZE_VARIABLES:
        value = env.get(name, "")
        if value.isascii() and value.isdigit() and int(value) > 0:
            return int(value)
    return 1
