"""Typed errors. Every message names what the user asked for, the choices, and the fix."""

from __future__ import annotations

import sys

EXIT_USAGE = 2  # what a command ends with after a typed error


class QBackendsError(Exception):
    """Base of every error qbackends raises on purpose.

    Attributes:
        fix: one sentence telling the user what to do, or "" when there is nothing to do.
    """

    def __init__(self, message: str, fix: str = "") -> None:
        self.message = message
        self.fix = fix
        super().__init__(f"{message} Fix: {fix}" if fix else message)

    def one_line(self) -> str:
        """The message as one line, for the CLI."""
        return " ".join(str(self).split())


class DeviceStringError(QBackendsError, ValueError):
    """A device string that is not of the form ``local:<provider>/<simulator>``."""


class UnknownBackendError(QBackendsError, LookupError):
    """A well-formed device string that names no registered backend."""


class BackendUnavailableError(QBackendsError, RuntimeError):
    """A registered backend that cannot run here (package or hardware missing, or it failed)."""


class InsufficientMemoryError(QBackendsError, MemoryError):
    """The requested wires do not fit in the memory the backend can use."""


class UnsupportedOptionError(QBackendsError, TypeError):
    """A device option the backend does not accept."""


class PluginError(QBackendsError, RuntimeError):
    """A plugin that failed to load, or registered something the host refused."""


class WorkloadInputError(QBackendsError, ValueError):
    """Bad input to a workload or job: a file, a hyperparameter, a data row."""


class CheckpointError(WorkloadInputError):
    """A checkpoint that cannot continue this run: of another run, unreadable, corrupt, or further along than asked."""


class UnsupportedCircuitError(QBackendsError, ValueError):
    """A circuit the chosen device cannot run exactly: an operator it cannot lower, a measurement it lacks."""


class JobFailedError(QBackendsError, RuntimeError):
    """A hybrid job that ended with an error or a signal; ``exit_code`` is what the command exits with."""

    def __init__(self, message: str, fix: str = "", exit_code: int = 1) -> None:
        super().__init__(message, fix)
        self.exit_code = exit_code


class JobSetupError(QBackendsError, RuntimeError):
    """A job container that cannot set up its job: the code not named, not downloadable from S3 or not unpackable,
    or its requirements not installable."""


class StorageError(QBackendsError, RuntimeError):
    """A file or folder qbackends must write that cannot be written (disk full, read-only, a file in the way).

    Attributes:
        path: the file or folder.
        reason: the system's words for it (``strerror``).
    """

    def __init__(self, message: str, fix: str = "", path: str = "", reason: str = "") -> None:
        super().__init__(message, fix)
        self.path = path
        self.reason = reason


class CalibrationError(QBackendsError, RuntimeError):
    """Timings that cannot be fitted: other work on the machine swamped what a calibration measures."""


class MPIUnavailableError(QBackendsError, RuntimeError):
    """MPI asked for where there is none: mpi4py not installed, or no MPI library it can load."""


class RankCountError(QBackendsError, ValueError):
    """MPI ranks that cannot share the state: not a power of two, or too many for the wires."""


class PeerLostError(QBackendsError, RuntimeError):
    """Another rank of a distributed run stopped. The command ends this process at once once it has said so: the
    communication threads of the lost peer would otherwise abort the interpreter's teardown, loudly."""


class EnvironmentSettingError(QBackendsError, ValueError):
    """An environment variable set to a value that cannot work, e.g. ``OMP_NUM_THREADS=1000`` for lightning.kokkos."""


def shown(value: object, width: int = 80) -> str:
    """``value`` as a message shows it: its repr, cut to ``width`` characters; a value whose repr fails (a user's
    object may raise there) by its type, so that formatting the message never raises in its place."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - whatever the object's own __repr__ raises
        text = f"<{type(value).__qualname__} object that cannot be shown>"
    return text if len(text) <= width else text[: width - 1] + "…"


def report(exc: QBackendsError) -> int:
    """Print a typed error as the one line every qbackends command and job entry point ends with; the exit code."""
    print(f"qbackends: error: {exc.one_line()}", file=sys.stderr)
    return int(getattr(exc, "exit_code", EXIT_USAGE))
