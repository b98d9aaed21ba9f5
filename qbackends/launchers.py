"""Who started this process: rank, world size and rendezvous from torchrun's, MPI's or Slurm's environment.

``from_environment`` is a pure function of the variables (tests feed it recorded environments). ``adopt``
writes what it found as the variables torch.distributed reads (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), so processes started by ``mpiexec`` or ``srun``
then run the same code as torchrun's.

- torchrun (and ``--workers``): ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``...
- Open MPI's mpiexec: ``OMPI_COMM_WORLD_RANK``/``_SIZE``/``_LOCAL_RANK``/``_LOCAL_SIZE``, ``PMIX_NAMESPACE``.
- MPICH's mpiexec (Hydra): ``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``, ``MPI_LOCALNRANKS``.
- srun: ``SLURM_PROCID``, ``SLURM_STEP_NUM_TASKS`` (else ``SLURM_NTASKS``), ``SLURM_LOCALID``, ``SLURM_NODEID``,
  ``SLURM_STEP_TASKS_PER_NODE`` (else ``SLURM_TASKS_PER_NODE``), ``SLURM_STEP_NODELIST`` (else
  ``SLURM_JOB_NODELIST``, ``SLURM_NODELIST``), ``SLURM_JOB_ID``, ``SLURM_STEP_ID``. Only a step srun started
  counts (``SLURM_STEP_ID`` set): a batch script's own shell is one process.

The rendezvous is ``MASTER_ADDR``/``MASTER_PORT`` where set. Otherwise the address is loopback when every
rank is on this node, else the first host of Slurm's node list; the port is derived from the job's
identity (the same on every rank, another for another job), in ``PORTS``.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from .errors import EnvironmentSettingError

PORTS = range(20000, 30000)  # below Linux's ephemeral ports (32768 on)
DEFAULT_PORT = 29500  # torchrun's, when nothing identifies the job
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Launch:
    """This process's place in a multi-process run, and where its ranks meet."""

    launcher: str  # "torchrun", "mpiexec (Open MPI)", "mpiexec (MPICH)" or "srun"
    rank: int
    world: int
    local_rank: int
    local_world: int
    master_addr: str
    master_port: int

    def torch_variables(self) -> dict[str, str]:
        """The variables torch.distributed's ``env://`` rendezvous reads."""
        return {
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.world),
            "LOCAL_RANK": str(self.local_rank),
            "LOCAL_WORLD_SIZE": str(self.local_world),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }


def from_environment(env: Mapping[str, str], parent_pid: int = 0) -> Launch | None:
    """The run this process belongs to, from its launcher's variables; None for a single process.

    ``parent_pid`` names an MPICH job (Hydra starts every local rank from one proxy, and sets no job
    identity of its own).

    Raises:
        EnvironmentSettingError: a launcher's variable that is not what that launcher writes.
    """
    found = _srun(env) or _open_mpi(env) or _mpich(env, parent_pid)
    if "RANK" in env and "WORLD_SIZE" in env:  # torchrun's, or ours adopted; a launcher that agrees keeps its name
        rank, world = _whole(env, "RANK"), _whole(env, "WORLD_SIZE", least=1)
        if found is not None and (found.rank, found.world) == (rank, world):
            return found
        local_world = _whole(env, "LOCAL_WORLD_SIZE", world, least=1)
        addr, port = env.get("MASTER_ADDR", LOOPBACK), _port(env, DEFAULT_PORT)
        return Launch("torchrun", rank, world, _whole(env, "LOCAL_RANK", 0), local_world, addr, port)
    return found if found is not None and found.world > 1 else None


def current() -> Launch | None:
    """``from_environment`` of this process."""
    return from_environment(os.environ, os.getppid())


def adopt(environ: MutableMapping[str, str] | None = None, parent_pid: int | None = None) -> Launch | None:
    """Find this process's run and set torch.distributed's variables from it (those unset); the run, or None."""
    env = os.environ if environ is None else environ
    launch = from_environment(env, os.getppid() if parent_pid is None else parent_pid)
    if launch is not None:
        for name, value in launch.torch_variables().items():
            env.setdefault(name, value)
    return launch


def _srun(env: Mapping[str, str]) -> Launch | None:
    if "SLURM_PROCID" not in env or not ("SLURM_STEP_ID" in env or "SLURM_STEPID" in env):
        return None
    rank = _whole(env, "SLURM_PROCID")
    world_name = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in env else "SLURM_NTASKS"
    world = _whole(env, world_name, 1, least=1)
    per_node = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
    node = _whole(env, "SLURM_NODEID", 0)
    local_world = tasks_on_node(per_node, node) if per_node else None
    if local_world == 0:  # this task runs on that node
        name = "SLURM_STEP_TASKS_PER_NODE" if env.get("SLURM_STEP_TASKS_PER_NODE") else "SLURM_TASKS_PER_NODE"
        raise EnvironmentSettingError(
            f"{name}={per_node!r:.60} gives node {node} no task, though this task runs there.",
            "unset the Slurm variables left from another run, or start the run with srun as usual.",
        )
    if local_world is None:
        nodes = _whole(env, "SLURM_STEP_NUM_NODES", _whole(env, "SLURM_NNODES", 1, least=1), least=1)
        local_world = -(-world // nodes)
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    if "MASTER_ADDR" in env:
        addr = env["MASTER_ADDR"]
    elif local_world >= world or not nodelist:
        addr = LOOPBACK
    else:
        addr = first_host(nodelist)
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID", "")
    port = _port(env, derived_port(f"slurm:{job}.{step}") if job else DEFAULT_PORT)
    return Launch("srun", rank, world, _whole(env, "SLURM_LOCALID", 0), local_world, addr, port)


def _open_mpi(env: Mapping[str, str]) -> Launch | None:
    if "OMPI_COMM_WORLD_RANK" not in env:
        return None
    world = _whole(env, "OMPI_COMM_WORLD_SIZE", least=1)
    local_world = _whole(env, "OMPI_COMM_WORLD_LOCAL_SIZE", world, least=1)
    addr = _mpi_address(env, local_world, world, "mpiexec -x MASTER_ADDR=<host of rank 0>")
    key = env.get("PMIX_NAMESPACE") or env.get("OMPI_MCA_ess_base_jobid", "")
    port = _port(env, derived_port(f"ompi:{key}") if key else DEFAULT_PORT)
    rank, local_rank = _whole(env, "OMPI_COMM_WORLD_RANK"), _whole(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0)
    return Launch("mpiexec (Open MPI)", rank, world, local_rank, local_world, addr, port)


def _mpich(env: Mapping[str, str], parent_pid: int) -> Launch | None:
    if "PMI_RANK" not in env or "PMI_SIZE" not in env:
        return None
    world = _whole(env, "PMI_SIZE", least=1)
    local_world = _whole(env, "MPI_LOCALNRANKS", world, least=1)
    addr = _mpi_address(env, local_world, world, "mpiexec -genv MASTER_ADDR <host of rank 0>")
    port = _port(env, derived_port(f"hydra:{parent_pid}") if parent_pid else DEFAULT_PORT)
    rank, local_rank = _whole(env, "PMI_RANK"), _whole(env, "MPI_LOCALRANKID", 0)
    return Launch("mpiexec (MPICH)", rank, world, local_rank, local_world, addr, port)


def _mpi_address(env: Mapping[str, str], local_world: int, world: int, how: str) -> str:
    """Rank 0's host: MASTER_ADDR, loopback on one node, else the first of the Slurm allocation mpiexec runs in."""
    if "MASTER_ADDR" in env:
        return env["MASTER_ADDR"]
    if local_world >= world:
        return LOOPBACK
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if nodelist:
        return first_host(nodelist)
    raise EnvironmentSettingError(
        f"mpiexec started {world} ranks on more than one host ({local_world} on this one), and nothing here names the "
        "host of rank 0 (MASTER_ADDR is unset and this is not a Slurm allocation).",
        f"pass it to every rank: {how}.",
    )


def derived_port(key: str) -> int:
    """A port in ``PORTS`` from a job's identity: every rank of one job derives the same one."""
    return PORTS.start + zlib.crc32(key.encode()) % len(PORTS)


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list: ``node[01-04,07]`` -> ``node01``, ``a,b`` -> ``a``, ``r[1-2]-n[3-4]`` -> ``r1-n3``.

    Raises:
        EnvironmentSettingError: an empty list or unbalanced brackets.
    """
    text = nodelist.strip()
    depth, end = 0, len(text)
    for index, char in enumerate(text):  # the first host ends at the first comma outside brackets
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            break
        if char == "," and depth == 0:
            end = index
            break
    host = re.sub(r"\[([^\[\]]*)\]", lambda m: m.group(1).split(",")[0].split("-")[0], text[:end])
    if depth != 0 or not host or any(c in host for c in "[],"):
        raise EnvironmentSettingError(
            f"The Slurm node list {nodelist!r} is not one Slurm writes (e.g. node[01-04] or a,b).",
            "set MASTER_ADDR to the host of rank 0.",
        )
    return host


def tasks_on_node(tasks_per_node: str, node: int) -> int | None:
    """Tasks on node ``node`` from Slurm's ``2(x3),1`` form (two on each of three nodes, then one); None if unreadable."""
    counts: list[int] = []
    for part in tasks_per_node.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if match is None:
            return None
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts[node] if 0 <= node < len(counts) else None


def _port(env: Mapping[str, str], derived: int) -> int:
    port = _whole(env, "MASTER_PORT", derived, least=1)
    if port > 65535:
        raise EnvironmentSettingError(f"MASTER_PORT={port} is not a TCP port.", "set MASTER_PORT to a free port, 1-65535.")
    return port


def _whole(env: Mapping[str, str], name: str, default: int | None = None, least: int = 0) -> int:
    """A whole-number variable, at least ``least``; ``default`` where unset (None: it must be set)."""
    text = env.get(name)
    if text is None and default is not None:
        return default
    if text is None:
        raise EnvironmentSettingError(
            f"{name} is not set, though variables a launcher sets with it are; a launcher sets them all together.",
            "unset the launcher variables left from another run, or start the run with mpiexec, srun or torchrun as usual.",
        )
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit()) or int(digits) < least:
        raise EnvironmentSettingError(
            f"{name}={text!r} is not a whole number of {least} or more, as the launcher that set it writes.",
            f"unset {name}, or start the run with mpiexec, srun or torchrun as usual.",
        )
    return int(digits)
