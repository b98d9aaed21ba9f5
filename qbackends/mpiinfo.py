"""The MPI this installation runs on (``probe --mpi``): library, ranks, and each rank's share of this node's memory.

mpi4py is loaded without initialising MPI (``MPI_Get_library_version`` needs no ``MPI_Init``), so the probe
joins no MPI job and cannot hang on one; the ranks come from the launcher's variables (``launchers``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import MPIUnavailableError
from .launchers import Launch

INSTALL = "pip install 'qbackends[mpi]' (mpi4py and MPICH, both from wheels)"


@dataclass(frozen=True)
class MPIInfo:
    library: str  # the first line of MPI_Get_library_version, e.g. "MPICH Version: 5.0.2"
    library_file: str  # the libmpi mpi4py loaded ("" where /proc is absent)
    standard: str  # the MPI standard it implements, e.g. "5.0"
    launcher: str  # who started the ranks ("" for one process started alone)
    ranks: int
    ranks_on_node: int
    memory_per_rank: int  # bytes: this node's available memory over its ranks

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def mpi_info(memory_available: int, launch: Launch | None, maps: str = "/proc/self/maps") -> MPIInfo:
    """What ``probe --mpi`` reports.

    Raises:
        MPIUnavailableError: mpi4py is not installed, or loads no MPI library.
    """
    try:
        import mpi4py  # optional, and loading it loads an MPI library: only when --mpi asks
    except ImportError:
        raise MPIUnavailableError("--mpi: mpi4py is not installed, so there is no MPI here.", f"{INSTALL}.") from None
    mpi4py.rc.initialize = False  # a probe joins no job
    mpi4py.rc.finalize = False
    try:
        from mpi4py import MPI

        library = " ".join(MPI.Get_library_version().splitlines()[0].split())
        major, minor = MPI.Get_version()
    except (ImportError, RuntimeError) as exc:
        raise MPIUnavailableError(f"--mpi: mpi4py is installed but loads no MPI library ({exc}).", f"{INSTALL}.") from None
    ranks, local = (launch.world, launch.local_world) if launch is not None else (1, 1)
    return MPIInfo(
        library=library,
        library_file=_loaded_library(maps),
        standard=f"{major}.{minor}",
        launcher=launch.launcher if launch is not None else "",
        ranks=ranks,
        ranks_on_node=local,
        memory_per_rank=memory_available // max(local, 1),
    )


def _loaded_library(maps: str) -> str:
    try:
        files = {line.split()[-1] for line in Path(maps).read_text().splitlines() if "/libmpi" in line}
    except OSError:
        return ""
    return ", ".join(sorted(files))
