"""What a plugin registers: a backend (a simulator and how to build it) and decomposition rules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

# Where a backend's state vector lives. "kokkos" means: wherever the installed
# lightning.kokkos build runs (OpenMP/Serial: host, CUDA: NVIDIA, HIP: AMD).
Hardware = Literal["cpu", "nvidia", "amd", "kokkos"]


@dataclass(frozen=True)
class Backend:
    """A simulator a plugin adds.

    Attributes:
        provider: the provider part of ``local:<provider>/<simulator>``.
        simulator: the simulator part.
        device_name: the name PennyLane knows the device by (its ``pennylane.plugins`` entry point).
        distribution: the PyPI distribution that provides the device; ``pip install`` line in errors.
        hardware: where the state vector lives (see ``Hardware``).
        state_copies: peak number of state vectors held during an adjoint gradient, measured;
            the memory guard multiplies the state size by it. None: no state-vector guard
            (e.g. tensor-network simulators).
        table_bytes: bytes an amplitude one process holds besides its state copies (tables of the observable):
            the least any circuit needs, where the device sizes the circuits that need more itself when it runs
            them (and takes ``ignore_memory``).
        rank_state_copies: the same for one rank of an ``mpi=True`` run, in states of the rank's share; None:
            ``state_copies``.
        rank_table_bytes: bytes a rank of an ``mpi=True`` run holds an amplitude of its share besides its state copies,
            whatever the precision (tables of the observable); the least any circuit needs, where a device sizes
            the circuits that need more itself when it runs them.
        rank_buffer_bytes: bytes a rank of an ``mpi=True`` run holds besides its share's copies, whatever its size
            (at most half its share is counted: a rank's buffer for an exchange need not be larger).
        shared_table_bytes: bytes an amplitude of tables when the ranks of an ``mpi=True`` run hold one state
            between them (every rank of the job on one node, or one rank alone): the node then holds
            ``rank_state_copies`` of the whole state, these tables and no rank buffers. None: its ranks always
            hold a share each.
        dense_adjoint_observables: True when the device's adjoint method turns a Hamiltonian into a
            dense 2^n x 2^n matrix (default.qubit), so adjoint memory grows as 4^n.
        preference: order for ``auto`` without a calibration profile; higher wins.
        min_auto_wires: ``auto`` chooses this backend only from this many wires on (GPU
            backends lose to CPUs on small circuits: transfers and launches dominate).
        description: one line for ``qbackends list``.
        capabilities_file: (distribution, path inside it) of the device's declared capabilities
            TOML, read without importing the device.
        extra: the pip extra of qbackends that installs the distribution, if any.
        install: how to install the distribution, as the fix errors show, when it is not
            ``pip install <distribution>`` (a package built from a qbackends checkout).
        create: optional factory ``create(wires, **options) -> Device`` for devices that need
            more than ``qml.device(device_name, ...)``.
        options: the device options ``get_device`` accepts, for a device whose constructor takes
            ``**kwargs`` (its signature then says nothing); None: read them from the signature.
        needs_shots: True for a sampling-only device (no analytic results): ``get_device`` asks
            for ``shots``, ``auto`` never takes it, and tests compare it with statistical tolerances.
        backprop: True when an ML framework differentiates through its results (``diff_method="backprop"``).
        faster_zz: which form of a two-wire ZZ rotation runs faster on it, measured: ``"IsingZZ"`` (the default
            rules lower ``PauliRot("ZZ")`` to it) or ``"MultiRZ"`` (they lower ``IsingZZ`` to it); None: neither.
        mpi_module: the compiled module whose MPI manager ``mpi=True`` needs (a Lightning build's); None: the
            device takes ``mpi`` as its own option, or refuses it by name.
        adjoint_lowers: declared gates its capabilities mark not differentiable that its own adjoint preprocessing
            lowers, where trainable, with PennyLane's decomposition, as the rules would: a circuit whose only such
            gates are these, trainable, is left to it (lowering them in front cost 10% of a step of one-qubit
            ``Rot`` circuits).
    """

    provider: str
    simulator: str
    device_name: str
    distribution: str
    hardware: Hardware = "cpu"
    state_copies: float | None = 4.0
    table_bytes: int = 0
    rank_state_copies: float | None = None
    rank_table_bytes: int = 0
    rank_buffer_bytes: int = 0
    shared_table_bytes: int | None = None
    dense_adjoint_observables: bool = False
    preference: int = 0
    min_auto_wires: int = 0
    description: str = ""
    capabilities_file: tuple[str, str] | None = None
    extra: str | None = None
    create: Callable[..., Any] | None = field(default=None, compare=False)
    options: tuple[str, ...] | None = None
    needs_shots: bool = False
    install: str | None = None
    backprop: bool = False
    faster_zz: str | None = None
    mpi_module: str | None = None
    adjoint_lowers: tuple[str, ...] = ()

    def copies(self, mpi: bool = False) -> float | None:
        """The state copies the memory guard sizes: a rank's (of its share) with ``mpi``, else one process's."""
        return self.rank_state_copies if mpi and self.rank_state_copies is not None else self.state_copies

    @property
    def auto_eligible(self) -> bool:
        """Whether ``auto`` may take it at all: not marked "by name only" (a negative preference), analytic, and a
        state vector (the cost model's kind). The one predicate: every list ``auto`` weighs is filtered by it."""
        return self.preference >= 0 and not self.needs_shots and self.state_copies is not None

    @property
    def key(self) -> str:
        return f"{self.provider}/{self.simulator}"

    @property
    def device_string(self) -> str:
        return f"local:{self.key}"

    @property
    def braket_string(self) -> str:
        """``local:<provider>/<device_name>``: what a Braket job script can open with
        ``qml.device(string.split("/")[-1])``, and qbackends resolves to this same backend."""
        return f"local:{self.provider}/{self.device_name}"

    @property
    def pip_install(self) -> str:
        return f"pip install {self.distribution}"

    @property
    def install_fix(self) -> str:
        """How to install it, as an error's fix says it."""
        if self.install:
            return self.install
        return f"`{self.pip_install}`" + (f" (or `pip install 'qbackends[{self.extra}]'`)" if self.extra else "")


@dataclass(frozen=True)
class RuleRegistration:
    """A decomposition rule a plugin contributes.

    Attributes:
        operator: the PennyLane operator name the rule lowers (e.g. ``"PauliRot"``).
        rule: a ``qml.register_resources``-decorated decomposition rule.
        backends: backend keys (``provider/simulator``) the rule applies to; empty means all.
        name: a short name shown by ``qbackends probe``.
        example: ``example(theta, wires) -> Operator`` builds an operator the rule lowers; the
            test matrix runs every rule on it, so a rule without an example fails the tests.
    """

    operator: str
    rule: Any
    backends: frozenset[str] = frozenset()
    name: str = ""
    example: Callable[[Any, Any], Any] | None = field(default=None, compare=False)

    def applies_to(self, key: str) -> bool:
        return not self.backends or key in self.backends
