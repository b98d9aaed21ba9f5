"""Screening: which backends a request names, and which of them run here and fit.

Machine facts (``probe``), each backend's capabilities (``capabilities.evaluate``) and the memory guard decide;
``choose`` is the whole screening of a request without building anything. Nothing here imports PennyLane.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import auto, calibration, capabilities, devicestring, launchers, probe
from .backend import Backend
from .context import Context, get_context
from .deviceoptions import accepts_precision
from .devicestring import AUTO
from .errors import BackendUnavailableError, InsufficientMemoryError, QBackendsError, UnsupportedOptionError
from .registry import Registry
from .request import Request, naming_source, parse_request

log = logging.getLogger("qbackends")

# auto's screening of a setup is kept (``Context.screened``) while every backend it took would still fit in 1/1024 of
# the memory it had then: a new auto device of the same setup, one per sample in a loop, is not screened again.
MEMORY_HEADROOM_WIRES = 10


@dataclass(frozen=True)
class Choice:
    """A backend chosen for a request, with its capabilities record."""

    backend: Backend
    capabilities: capabilities.Capabilities


def facts_for(registry: Registry) -> probe.MachineFacts:
    """This machine's facts for the registered backends."""
    return probe.machine_facts(tuple(b.distribution for b in registry.backends.values()))


def machine(context: Context) -> probe.MachineFacts:
    """``facts_for`` the context's registry."""
    return facts_for(context.registry)


def requested_chain(request: Request, registry: Registry, facts: probe.MachineFacts) -> list[Backend]:
    """The backends a request names, in the order to try them: its backend then its ``fallback``; for ``auto``
    without a circuit, what ``auto.without_circuit`` ranks."""
    if request.auto:
        return without_circuit(registry, facts, request.count)
    chain = [naming_source(request.given, lambda: registry.lookup(request.spec))]
    for name in request.fallback or ():
        named = devicestring.parse(name)
        if named.is_auto:
            raise UnsupportedOptionError(
                f"fallback={list(request.fallback or ())!r:.120} names auto, which is no one backend to fall back on.",
                f"name backends there, e.g. fallback=['local:pennylane/lightning.qubit'], or pass {AUTO!r} as the device string.",
            )
        backend = registry.lookup(named)
        if backend not in chain:
            chain.append(backend)
    return chain


def without_circuit(registry: Registry, facts: probe.MachineFacts, wires: int | None) -> list[Backend]:
    """``auto.without_circuit`` with this machine's workload profile (``qbackends calibrate --workload qaoa``), read
    when a wire count is given."""
    profile = calibration.load_profile(facts) if wires is not None else None
    return auto.without_circuit(registry.backends.values(), wires, profile, lambda b: capabilities.evaluate(b, facts).ok)


def auto_candidates(
    context: Context,
    wires: int | None,
    precision: str = "c128",
    diff_method: str | None = "adjoint",
    ignore_memory: bool = False,
    exclude: Iterable[str] = (),
) -> list[Choice]:
    """The backends ``auto`` weighs for circuits of ``wires`` qubits, in order of preference: those that run here
    and fit, GPUs only from their ``min_auto_wires``, less the excluded ones.

    Raises:
        BackendUnavailableError, InsufficientMemoryError: when none does (each one's reason is listed).
        UnsupportedOptionError: an excluded name that is not a device string.
    """
    facts, skip = machine(context), auto.excluded(also=exclude)
    key = (wires, precision, diff_method, ignore_memory, frozenset(skip), tuple(context.build_failures), facts.without_memory())
    kept = context.screened.get(key)
    if kept is not None:
        return list(kept)
    chain = auto.weighed(context.registry.backends.values(), wires, skip)
    fit, refusals = screen(chain, wires, precision, diff_method, ignore_memory, facts, every=True, context=context)
    if not any(isinstance(r, InsufficientMemoryError) for r in refusals) and all(_roomy(c, wires, ignore_memory) for c in fit):
        context.screened[key] = fit
    return list(fit)


def _roomy(choice: Choice, wires: int | None, ignore_memory: bool) -> bool:
    """Whether the memory available could fall ``MEMORY_HEADROOM_WIRES`` wires' worth before ``choice`` stopped fitting."""
    most = choice.capabilities.max_wires
    return ignore_memory or wires is None or most is None or wires + MEMORY_HEADROOM_WIRES <= most


def choose(
    spec: str | None = None,
    wires: int | None = None,
    *,
    fallback: Sequence[str] | None = None,
    precision: str = "c128",
    diff_method: str | None = "adjoint",
    ignore_memory: bool = False,
    registry: Registry | None = None,
    facts: probe.MachineFacts | None = None,
) -> Choice:
    """Pick the backend for a request without building anything.

    Raises:
        DeviceStringError, UnknownBackendError: for a bad or unknown string.
        BackendUnavailableError: when no candidate runs here (each one's reason is listed).
        InsufficientMemoryError: when the request fits on no candidate.
    """
    request = parse_request(
        spec, wires, fallback=fallback, precision=precision, diff_method=diff_method, ignore_memory=ignore_memory
    )
    context = get_context()
    if registry is not None and registry is not context.registry:  # another registry: what it has learnt is its own
        context = Context(registry)
    facts = facts or machine(context)
    chain = requested_chain(request, context.registry, facts)
    fit, refusals = screen(chain, request.count, precision, diff_method, ignore_memory, facts, context=context)
    if refusals and fit and request.given is not None and not request.auto:
        log.warning(
            "qbackends: using %s instead of %s: %s", fit[0].backend.device_string, chain[0].device_string, refusals[0].message
        )
    return fit[0]


def screen(
    chain: Sequence[Backend],
    wires: int | None,
    precision: str,
    diff_method: str | None,
    ignore_memory: bool,
    facts: probe.MachineFacts,
    every: bool = False,
    context: Context | None = None,
    mpi: int = 0,
    shared: bool = False,
) -> tuple[list[Choice], list[QBackendsError]]:
    """The backends of ``chain`` that run here and fit the request (the first only, unless ``every``), and why
    the others do not: among them, those the context saw fail at construction (``Context.build_failures``).
    ``mpi``: the ranks of an MPI job on this node (``node_ranks``), ``wires`` their shares' worth (``guarded_wires``),
    each sized with the backend's ``rank_state_copies``, ``rank_table_bytes`` and ``rank_buffer_bytes``; ``shared``:
    the ranks hold one state between them (``ranks_share_state``), sized with its ``shared_table_bytes``.

    Raises:
        BackendUnavailableError, InsufficientMemoryError: when none of them does.
    """
    context = context or get_context()
    fit: list[Choice] = []
    refusals: list[QBackendsError] = []
    for backend in chain:
        failure = context.build_failures.get(backend.device_name)
        caps = capabilities.evaluate(backend, facts, precision, diff_method, failure, mpi, shared)
        if not caps.ok:
            refusals.append(BackendUnavailableError(f"{backend.device_string} cannot run here: {caps.reason}.", caps.fix))
        elif wires is not None and caps.max_wires is not None and wires > caps.max_wires and not ignore_memory:
            refusals.append(memory_error(backend, caps, wires, precision, diff_method, context, mpi, shared))
        else:
            fit.append(Choice(backend, caps))
            if not every:
                break
    if fit:
        return fit, refusals
    if len(refusals) == 1:
        raise refusals[0]
    kinds = {type(r) for r in refusals}
    error_type = kinds.pop() if len(kinds) == 1 else BackendUnavailableError
    raise error_type(
        "No backend can run this request: " + " | ".join(r.message for r in refusals),
        refusals[0].fix if len(refusals) == 1 else "see each backend's reason above; `qbackends list` shows what runs here.",
    )


def memory_error(
    backend: Backend,
    caps: capabilities.Capabilities,
    wires: int,
    precision: str,
    diff_method: str | None,
    context: Context,
    mpi: int = 0,
    shared: bool = False,
) -> InsufficientMemoryError:
    need = capabilities.working_set_bytes(backend, wires, precision, diff_method, mpi, shared)
    shared = shared and backend.shared_table_bytes is not None
    if shared:
        held = f"the one state of this node's ranks ({wires} wires)"
    else:
        held = f"this node's ranks' shares of the state ({wires} wires' worth)" if mpi else f"{wires} wires"
    what = f"{held} on {backend.device_string} at {precision} need {capabilities.describe_bytes(need)} "
    if backend.dense_adjoint_observables and diff_method == "adjoint":
        what += "(its adjoint method builds a dense 2^n x 2^n observable matrix) "
    else:
        during = f"{'an' if diff_method[:1] in 'aeiou' else 'a'} {diff_method} gradient" if diff_method else "a run"
        held_copies = f"{backend.copies(bool(mpi)):g} state copies of {capabilities.describe_bytes(capabilities.state_bytes(wires, precision))}"
        tables = backend.shared_table_bytes if shared else backend.rank_table_bytes if mpi else backend.table_bytes
        if tables:
            held_copies += f", {tables} byte{'s' if tables != 1 else ''} an amplitude of tables"
        if mpi and not shared and backend.rank_buffer_bytes:
            held_copies += f" and {int(mpi)} rank buffer{'s' if mpi > 1 else ''} of up to {backend.rank_buffer_bytes >> 20} MiB"
        what += f"({held_copies} during {during}) "
    fixes = [f"use at most {caps.max_wires} wires"]
    if caps.hardware.startswith(probe.SHARED_MEMORY):  # its room, not the node's memory, is what is short
        fixes.insert(
            0,
            f"give {probe.SHARED_MEMORY} more room (in a container: docker run --shm-size) or pass share_node=False "
            "(each rank then holds its share in its own memory)",
        )
    if precision == "c128" and not backend.dense_adjoint_observables and accepts_precision(backend, context):
        fixes.append("precision='c64' halves the memory")
    fixes.append("use a GPU backend with more memory (local:pennylane/lightning.gpu)")
    if backend.dense_adjoint_observables:
        fixes.append("use diff_method='backprop' or lightning.qubit")
    fixes.append("or pass ignore_memory=True if you know better")
    return InsufficientMemoryError(
        f"{what}but {caps.hardware} has {capabilities.describe_bytes(caps.memory_available)} available.", "; ".join(fixes) + "."
    )


def check_request_on(backend: Backend, request: Request) -> None:
    """What a backend needs of the request beyond its options: shots for a sampler, an MPI build for mpi=True."""
    options = request.options
    if backend.needs_shots and not options.get("shots"):
        raise UnsupportedOptionError(
            f"{backend.device_string} samples only: it gives no analytic results, and no shots were given.",
            f"pass shots=N, e.g. get_device({backend.device_string!r}, wires={request.wires!r}, shots=10000).",
        )
    if options.get("mpi") and backend.mpi_module is not None:  # others take mpi as their own option, or refuse it
        ok, reason = probe.mpi_support(backend)
        if not ok:
            raise UnsupportedOptionError(
                f"mpi=True cannot work on {backend.device_string}: {reason}.",
                "drop mpi=True, or build Lightning from source with MPI enabled and install mpi4py, then run under mpirun.",
            )


def rank_share_wires(count: int, launch: Any = None) -> int:
    """The wires whose whole state is as large as what this node's ranks of an MPI job hold of ``count`` wires
    (each rank 2^count / world amplitudes, ``local_world`` ranks on this node): what the memory guard sizes
    against this node's memory. ``launch``: ``launchers.current()`` unless given."""
    launch = launch if launch is not None else launchers.current()
    world = launch.world if launch is not None else probe.mpi_world_size()
    return max(count - (world.bit_length() - 1) + node_ranks(launch).bit_length() - 1, 0)


def node_ranks(launch: Any = None) -> int:
    """The ranks of an MPI job on this node, rounded up to a power of two, as ``rank_share_wires`` counts them."""
    launch = launch if launch is not None else launchers.current()
    local = launch.local_world if launch is not None else 1
    return 1 << (local - 1).bit_length()


def ranks_share_state(options: Mapping[str, Any], launch: Any = None) -> bool:
    """Whether the ranks of a request with these device ``options`` (``mpi=True``) hold one state between them: one
    rank alone, or every rank of the job on this node, unless ``share_node=False`` (for a backend that shares:
    ``shared_table_bytes``)."""
    if not options.get("mpi"):
        return False
    launch = launch if launch is not None else launchers.current()
    world = launch.world if launch is not None else probe.mpi_world_size()
    local = launch.local_world if launch is not None else 1
    return world <= 1 or (local >= world and options.get("share_node", True) is not False)


def guarded_wires(request: Request) -> int | None:
    """The wire count the memory guard sizes: with ``mpi=True``, what this node's ranks hold of the state."""
    if request.options.get("mpi") and request.count is not None:  # each process holds 1/size of the state
        return rank_share_wires(request.count)
    return request.count
