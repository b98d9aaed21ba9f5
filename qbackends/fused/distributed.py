"""fused.qubit over MPI ranks (``mpi=True``). Ranks that are all on one node share one state (``shared``; the
default): each runs one process's sweeps over its part of every pass, and nothing is exchanged. Otherwise (several
nodes, or ``share_node=False``) each of R ranks holds 2^n / R amplitudes of the state, as below.

Layout: the state index's top m = log2 R bits are the rank, the other L = n - m bits the local index.
``exchange`` (pairwise, in place) swaps the m global bits with the m top local bits; the layout records
whether they are swapped, and nothing swaps them back. So:

- a diagonal block or observable needs no communication: each term's rank bits are a sign on this rank,
  its local bits a mask of the local state, and the single-process kernels run on the local part;
- the first product layer's fixed gates on rank bits (QAOA's Hadamards) are a factor of the rank's part;
- a later product layer applies its gates on local bits, then, if any gate is on a global bit, exchanges once
  and applies the rest (now local): one exchange per layer that touches the global bits;
- the steps between exchanges (a part) run through the one-process engine and its fused sweeps;
- the energy is a local sum and one float64 all-reduce; the adjoint pass undoes the parts in reverse
  (exchanging φ and λ where the forward pass exchanged ψ) and all-reduces the moments once.

Supported: the circuits of the QAOA workload and ``qml.qaoa`` (product layers of single-qubit gates,
diagonal blocks) with one expectation of a sum of Z products, values and adjoint gradients.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .. import probe
from ..capabilities import describe_bytes
from ..errors import (
    InsufficientMemoryError,
    MPIUnavailableError,
    RankCountError,
    UnsupportedCircuitError,
    UnsupportedOptionError,
)
from ..simbase.measurements import CHUNK, magnitudes
from . import engine
from . import shared as node_sharing
from .program import DIAGONAL_TERMS, FIXED_SINGLE, ROTATIONS, DiagonalBlock, ProductLayer, Segment, compile_operations, z_terms

# An exchange sends and receives a block in pieces of this size, each received into a buffer of its own and
# copied in place: on MPICH's shared memory, pieces of 16 MiB exchanged a 64 MiB block 3.4x as fast as
# MPI_Sendrecv_replace in 4 MiB pieces (11 ms against 38 ms), pieces of 4-8 MiB no faster than it.
EXCHANGE_PIECE_BYTES = 16 << 20
MIN_LOCAL_BITS = 10  # 2^10 amplitudes per rank at least: fewer and the exchanges are all there is
RUNS = frozenset(DIAGONAL_TERMS) | frozenset(FIXED_SINGLE) | frozenset(ROTATIONS) | {"CommutingRotations"}
INSTALL = "pip install 'qbackends[mpi]' and start the ranks with mpiexec -n R"


def world() -> Any:
    """MPI's world communicator (MPI initialised here if it is not yet).

    Raises:
        MPIUnavailableError: mpi4py is not installed or loads no MPI library.
    """
    try:
        import mpi4py

        mpi4py.rc.initialize = True
        from mpi4py import MPI

        if not MPI.Is_initialized():
            MPI.Init()
    except (ImportError, RuntimeError) as exc:
        raise MPIUnavailableError(f"mpi=True: no MPI here ({exc}).", f"{INSTALL}.") from None
    _abort_on_uncaught(MPI.COMM_WORLD)
    return MPI.COMM_WORLD


def local_bits(nwires: int, ranks: int) -> int:
    """Bits of the local index on each of ``ranks`` ranks, checked before anything is allocated.

    Raises:
        RankCountError: ranks not a power of two, or so many that a rank's share falls below 2^MIN_LOCAL_BITS.
    """
    if ranks < 1 or ranks & (ranks - 1):
        below, above = 1 << (ranks.bit_length() - 1), 1 << ranks.bit_length()
        raise RankCountError(
            f"mpi=True on {ranks} ranks: fused.qubit splits the state over a power of two of ranks.",
            f"start {below} or {above} ranks (mpiexec -n {below}).",
        )
    m = ranks.bit_length() - 1
    if nwires < MIN_LOCAL_BITS:  # not even one rank: fewer ranks cannot help
        raise RankCountError(
            f"mpi=True: {nwires} wires are too few to split over ranks (a rank holds at least 2^{MIN_LOCAL_BITS} amplitudes).",
            f"leave out mpi=True (--mpi): one process runs {nwires} wires; or run at least {MIN_LOCAL_BITS} wires.",
        )
    if nwires - m < max(MIN_LOCAL_BITS, m):
        most = 1 << max(0, min(nwires - MIN_LOCAL_BITS, nwires // 2))
        raise RankCountError(
            f"mpi=True: {ranks} ranks are too many for {nwires} wires (each rank would hold 2^{nwires - m} amplitudes; "
            f"at least 2^{max(MIN_LOCAL_BITS, m)} are needed).",
            f"start at most {most} ranks for {nwires} wires, or run more wires.",
        )
    return nwires - m


def _bytes(count: int) -> str:
    return f"{count} byte{'' if count == 1 else 's'}"


@dataclass
class Layout:
    """Where the state index's bits are: bit b < L local, else rank bit b - L; ``swapped``: the global
    bits and the top m local bits are exchanged."""

    nwires: int
    local: int  # L
    rank: int
    swapped: bool = False

    @property
    def m(self) -> int:
        return self.nwires - self.local

    def position(self, bit: int) -> int:
        """Where logical bit ``bit`` of the state index is now (>= L: a rank bit)."""
        if self.swapped and self.local - self.m <= bit < self.local:
            return bit + self.m
        if self.swapped and bit >= self.local:
            return bit - self.m
        return bit

    def split(self, mask: int) -> tuple[int, int]:
        """(local mask, sign on this rank) of the Z product over ``mask``'s bits."""
        physical = sum(1 << self.position(b) for b in range(self.nwires) if mask >> b & 1)
        sign = -1 if bin((physical >> self.local) & self.rank).count("1") % 2 else 1
        return physical & ((1 << self.local) - 1), sign

    def global_indices(self, local_indices: np.ndarray) -> np.ndarray:
        """The logical state indices of amplitudes ``local_indices`` on this rank."""
        physical = np.int64(self.rank << self.local) | local_indices.astype(np.int64)
        out = np.zeros_like(physical)
        for b in range(self.nwires):
            out |= ((physical >> self.position(b)) & 1) << b
        return out


@dataclass
class Plan:
    """The steps of a circuit on this rank: ("block", local DiagonalBlock), ("layer", local ProductLayer), ("exchange",)."""

    steps: list[tuple] = field(default_factory=list)
    exchanges: int = 0


def plan(segments: list[Segment], layout: Layout) -> Plan:
    """The local steps of ``segments``; ``layout`` is left as the last step leaves it."""
    out = Plan()
    for seg in segments:
        if isinstance(seg, DiagonalBlock):
            out.steps.append(("block", _local_block(seg, layout)))
            continue
        assert isinstance(seg, ProductLayer)  # refuse() let nothing else through
        now, later = ProductLayer(), ProductLayer()
        for w, gate in seg.gates.items():
            p = layout.position(layout.nwires - 1 - w)
            (now if p < layout.local else later).gates[w] = gate
        if now.gates:
            out.steps.append(("layer", _local_layer(now, layout)))
        if later.gates:
            layout.swapped = not layout.swapped
            out.steps.append(("exchange",))
            out.exchanges += 1
            out.steps.append(("layer", _local_layer(later, layout)))
    return out


def _parts(steps: Plan) -> list[list[Segment]]:
    """The plan's local segments as parts, an exchange between each two."""
    parts: list[list[Segment]] = [[]]
    for step in steps.steps:
        if step[0] == "exchange":
            parts.append([])
        else:
            parts[-1].append(step[1])
    return parts


def rank_factor(segments: list[Segment], layout: Layout) -> tuple[list[Segment], complex]:
    """The segments without the first product layer's fixed gates on rank bits, and what those gates make of this
    rank's part of the state: a factor, U|0⟩ at the rank's bit for each (no exchange). A rank bit without such a gate
    is still |0⟩ there: the factor is 0 on ranks where that bit is set."""
    first = segments[0] if segments and isinstance(segments[0], ProductLayer) else ProductLayer()
    factor = complex(1.0)
    for j in range(layout.m):
        wire = layout.nwires - 1 - (layout.local + j)
        bit = layout.rank >> j & 1
        gate = first.gates.get(wire)
        if gate is not None and gate[1] < 0:
            factor *= complex(gate[0][bit, 0])
        elif bit:
            factor = 0j
    if not first.gates:
        return segments, factor
    rest = ProductLayer({w: g for w, g in first.gates.items() if layout.nwires - 1 - w < layout.local or g[1] >= 0})
    return ([rest] if rest.gates else []) + segments[1:], factor


def with_factor(part: list[Segment], factor: complex, local: int) -> list[Segment]:
    """A rank's first part (from |0...0⟩) times ``factor``: folded into a fixed gate of its first product layer, or a
    gate factor·I on a wire that layer leaves free; a layer of its own before it where that layer has parameters
    (the adjoint pass takes their moments undoing the layer's gates on φ, and factor·U is not unitary)."""
    if factor == 1:
        return part
    own = [ProductLayer({0: (factor * np.eye(2, dtype=complex), -1, 0, 0.0)})]
    first = part[0] if part and isinstance(part[0], ProductLayer) else ProductLayer()
    if engine.has_parameters(first):
        return own + part
    gates = dict(first.gates)
    fixed = next((w for w, g in gates.items() if g[1] < 0), None)
    if fixed is not None:
        matrix, param, generator, rate = gates[fixed]
        gates[fixed] = (factor * matrix, param, generator, rate)
    else:
        gates[next(w for w in range(local) if w not in gates)] = own[0].gates[0]
    return [ProductLayer(gates)] + part[1 if first.gates else 0 :]


def _local_block(block: DiagonalBlock, layout: Layout) -> DiagonalBlock:
    local = DiagonalBlock(params=list(block.params))
    for mask, coef, alpha in zip(block.masks, block.coefs, block.alphas, strict=True):
        lmask, sign = layout.split(mask)
        local.masks.append(lmask)
        local.coefs.append(sign * coef)
        local.alphas.append(sign * alpha)
    return local


def _local_layer(layer: ProductLayer, layout: Layout) -> ProductLayer:
    """The layer on local wires: wire w (logical bit n-1-w) at local wire L-1-position."""
    out = ProductLayer()
    for w, gate in layer.gates.items():
        out.gates[layout.local - 1 - layout.position(layout.nwires - 1 - w)] = gate
    return out


def rank_bytes(local: int, itemsize: int, ranks: int, adjoint: bool, table_bytes: int) -> int:
    """Bytes a rank holds for a run: ψ (and λ for a gradient) of its 2^``local`` amplitudes of ``itemsize`` bytes, the
    cost's tables (``table_bytes`` an amplitude, ``engine.CostTables.bytes``) and the exchange's receiving piece (at
    most a peer's block)."""
    share = 1 << local
    piece = min(share // ranks * itemsize, EXCHANGE_PIECE_BYTES) if ranks > 1 else 0
    return share * ((1 + adjoint) * itemsize + table_bytes) + piece


def refuse(tape: Any) -> None:
    """Refuse, by name, what the distributed state does not run.

    Raises:
        UnsupportedCircuitError: finite shots, an operation other than single-qubit gates and diagonal gates, or
            measurements other than one expectation of a sum of Z products.
    """
    fix = "run it without mpi=True (one process), or change the circuit to single-qubit and diagonal gates."
    if tape.shots:
        raise UnsupportedCircuitError("fused.qubit with mpi=True gives analytic results only; shots were given.", fix)
    for op in tape.operations:
        if op.name not in RUNS:
            raise UnsupportedCircuitError(
                f"fused.qubit with mpi=True cannot run the operation {op.name!r}; it runs single-qubit gates and "
                f"diagonal gates ({', '.join(sorted(RUNS - {'CommutingRotations'}))}).",
                fix,
            )
    from pennylane.measurements import ExpectationMP

    ms = tape.measurements
    if len(ms) != 1 or type(ms[0]) is not ExpectationMP or z_terms(ms[0].obs) is None:
        named = ", ".join(repr(m) for m in ms)
        raise UnsupportedCircuitError(
            f"fused.qubit with mpi=True measures one expectation of a sum of Z products; this circuit measures {named}.",
            "measure qml.expval of a Z-sum Hamiltonian (a QAOA cost), or run without mpi=True.",
        )


class Ranks:
    """The distributed state of a fused.qubit device: this rank's share, the exchanges, the reductions."""

    def __init__(
        self, wires: Any, dtype: np.dtype, comm: Any = None, ignore_memory: bool = False, share_node: bool = True
    ) -> None:
        self.comm = comm if comm is not None else world()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.dtype = dtype
        if wires is not None:
            local_bits(len(wires), self.size)  # a mismatch is refused before anything is allocated
        from mpi4py import MPI

        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED)  # the ranks that share this node's memory
        self.node_ranks = node.Get_size()
        # every rank on one node: they run one state in shared memory, with no exchanges (see shared)
        self.memory = node_sharing.NodeMemory(node) if share_node and 1 < self.size == self.node_ranks else None
        self.ignore_memory = ignore_memory
        self.sized = 0  # bytes a rank holds for the runs since the cost's tables last changed (rank_bytes)
        self._tables: engine.CostTables | None = None  # the tables the cache holds
        self._mpi_type = MPI.C_FLOAT_COMPLEX if dtype == np.complex64 else MPI.C_DOUBLE_COMPLEX
        self._sum = MPI.SUM
        self._buffers: dict[str, np.ndarray] = {}
        self._cache = self._new_cache(2, np.float32 if dtype == np.complex64 else np.float64)
        self.last: tuple[np.ndarray, Layout, int, int] | None = None  # the last final state, its layout, this rank's span
        self.exchanges = 0  # exchanges of a state so far (each sends (R-1)/R of this rank's share)

    def _buffer(self, name: str, size: int) -> np.ndarray:
        buf = self._buffers.get(name)
        if buf is None or buf.size != size:
            buf = self._buffers[name] = (
                self.memory.array(size, self.dtype) if self.memory else engine.state_buffer(size, self.dtype)
            )
        return buf

    def _new_cache(self, size: int, real: type) -> engine.DiagonalCache:
        return engine.DiagonalCache(size=size, real=real, allocate=self.memory.array if self.memory else None)

    def exchange(self, state: np.ndarray) -> np.ndarray:
        """``state`` with the global and top local bits swapped, in place: this rank's block t (top local bits t) goes
        to rank t, whose block for this rank comes back in its place. Pairwise, in pieces of EXCHANGE_PIECE_BYTES
        received into one buffer of that size: no second state is held (an all-to-all needs a receiving buffer as
        large as the share)."""
        block = state.size // self.size
        received = self._buffer("piece", min(block, max(1, EXCHANGE_PIECE_BYTES // state.itemsize)))
        for step in range(1, self.size):
            peer = self.rank ^ step  # both ranks of a pair name each other at the same step
            mine = state[peer * block : (peer + 1) * block]
            for start in range(0, block, received.size):
                piece = mine[start : start + received.size]
                into = received[: piece.size]
                self.comm.Sendrecv([piece, self._mpi_type], dest=peer, recvbuf=[into, self._mpi_type], source=peer)
                piece[:] = into
        self.exchanges += 1
        return state

    def size_run(self, tables: engine.CostTables, local: int, adjoint: bool) -> None:
        """Refuse a run whose rank holds ψ (and λ, ``adjoint``) of its 2^``local`` amplitudes, ``tables`` and the
        exchange's piece (``rank_bytes``) when the ranks on some node cannot hold them, before it allocates anything.
        Tables other than ``tables`` are dropped first (what the run holds is then that); what each rank has still to
        allocate, times the ranks on its node, is set against the memory its node has available, and every rank
        refuses alike; the cache keeps every table of ``tables``. ``get_device`` sized the ranks for the least a cost
        needs (levels of one coefficient); a circuit that needs more (a weighted cost) is sized here. Ranks sharing
        one state (``memory``) hold it, and the tables, once for the node (``local``: every wire), in ``/dev/shm``.

        Raises:
            InsufficientMemoryError: naming what a rank holds, and the fixes.
        """
        if tables != self._tables:  # a cache that keeps them all (they are sized so): none is built twice
            kept = max(2, len(tables.levels), len(tables.diagonals))
            self._cache = self._new_cache(kept, self._cache.real)
            self._tables, self.sized = tables, 0
        itemsize, table_bytes = np.dtype(self.dtype).itemsize, tables.bytes(self._cache.real)
        shared = self.memory is not None
        need = rank_bytes(local, itemsize, 1 if shared else self.size, adjoint, table_bytes)
        if need <= self.sized:
            return
        from mpi4py import MPI

        held = sum(buf.nbytes for buf in self._buffers.values()) + self._cache.nbytes  # this circuit's, or none
        more = (need - held) * (1 if shared else self.node_ranks)
        available = room = probe.host_memory_available()
        if shared:  # the shared state's files take room in /dev/shm too
            room = min(room, node_sharing.room())
        short = self.comm.allreduce(more - room, op=MPI.MAX)  # on the node with least room
        if short > 0 and not self.ignore_memory:
            wires = local if shared else local + self.size.bit_length() - 1
            what = (
                f"{wires} wires at {'c64' if itemsize == 8 else 'c128'} on {self.size} rank{'s' if self.size > 1 else ''}: "
                f"the state of its 2^{local} amplitudes{' and λ for the gradient' if adjoint else ''}; the cost's "
                f"tables, {_bytes(table_bytes)} an amplitude ({len(tables.levels)} of levels: {_bytes(tables.level_bytes())}, "
                f"{len(tables.diagonals)} diagonals of weighted terms at {_bytes(np.dtype(self._cache.real).itemsize)})"
                + ("; the exchange's piece" if self.size > 1 and not shared else "")
            )
            fixes = ["start the ranks across more nodes (each then holds a smaller share of the state)"]
            if itemsize == 16:
                fixes.insert(0, "precision='c64' halves the state's memory")
            if room < available:  # /dev/shm, not the node's memory, is what is short
                fixes.insert(
                    0,
                    f"give {node_sharing.SHARED_MEMORY} more room (in a container: docker run --shm-size) or "
                    "pass share_node=False to the device (each rank then holds its share in its own memory)",
                )
            if shared:
                held_by = f"the ranks of this node share {describe_bytes(need)} in {node_sharing.SHARED_MEMORY}"
                short_by = f"the node needs {describe_bytes(short)} more than its memory and {node_sharing.SHARED_MEMORY} have"
            else:
                held_by = f"a rank holds {describe_bytes(need)}"
                short_by = f"the ranks on the node with the least room need {describe_bytes(short)} more than it has"
            raise InsufficientMemoryError(
                f"fused.qubit with mpi=True cannot hold this circuit: {held_by} ({what}), and {short_by} available.",
                "; ".join(fixes) + "; or pass ignore_memory=True (to get_device or the device) if you know better.",
            )
        self.sized = need

    def allreduce(self, values: np.ndarray) -> np.ndarray:
        out = np.empty_like(values, dtype=np.float64)
        self.comm.Allreduce(np.ascontiguousarray(values, dtype=np.float64), out, op=self._sum)
        return out

    def simulate(self, tape: Any, wires: Any, gradient: bool, traffic: engine.Traffic) -> tuple[Any, Any]:
        """(value, Jacobian or None) of a tape the device has preprocessed, as ``FusedQubit._simulate`` returns them.

        The rank's parts between exchanges run through the one-process engine's sweeps: the first from |0...0⟩ (with
        the first product layer's fixed gates on rank bits as this rank's factor), the others from the exchanged
        state; the adjoint pass undoes them in reverse, exchanging φ and λ where the forward pass exchanged ψ."""
        from .device import _format_jacobian, _masks_and_coefficients, _refuse_untracked_gradients

        refuse(tape)
        if self.memory is not None:
            return self._simulate_shared(tape, wires, gradient, traffic)
        n = len(wires)
        layout = Layout(n, local_bits(n, self.size), self.rank)
        index = {w: i for i, w in enumerate(wires)}
        segments, nparams = compile_operations(tape.operations, index, n)
        if gradient:
            _refuse_untracked_gradients(tape, segments, nparams)
        segments, factor = rank_factor(segments, layout)
        steps = plan(segments, layout)
        parts = _parts(steps)
        local = layout.local
        if factor != 0:
            parts[0] = with_factor(parts[0], factor, local)
        terms = z_terms(tape.measurements[0].obs)
        assert terms is not None
        masks, coefs = _masks_and_coefficients(terms, index, n)
        split = [layout.split(int(mask)) for mask in masks]
        lmasks = np.array([lm for lm, _ in split], dtype=np.int64)
        lcoefs = np.array([sign * c for (_, sign), c in zip(split, coefs, strict=True)])
        adjoint = gradient and bool(tape.trainable_params)
        tables = engine.cost_tables([step[1] for step in steps.steps if step[0] == "block"], lmasks, lcoefs)
        self.size_run(tables, local, adjoint)
        by_level = engine.values_by_level(local, lmasks, lcoefs, self._cache)
        if by_level is None:  # kept first: weighted cost layers proportional to it are applied from it
            self._cache.get(local, lmasks, lcoefs)
        measure = engine.Measure(partial(self._cache.get, local, lmasks, lcoefs), by_level=by_level)
        psi = self._buffer("psi", 1 << local)
        lam = self._buffer("lambda", psi.size) if adjoint else None
        tiling = engine.tiling_for(local, psi.itemsize, adjoint)  # the forward pass's passes are the adjoint's
        # The last layer's input kept as φ, λ written undone through that layer's last pass (see engine.forward's
        # keep): one part from |0...0⟩ (φ in λ's buffer, λ in ψ's place), or a last part of one layer (φ in ψ).
        single = len(parts) == 1 and factor != 0 and engine.keeps_last_input(parts[0])
        last_layer = len(parts) > 1 and len(parts[-1]) == 1 and isinstance(parts[-1][0], ProductLayer)
        kept = adjoint and (single or last_layer)
        if kept:
            measure.write_state, measure.undo, measure.lam = False, True, psi if single else lam
        elif adjoint:
            measure.lam = lam
        for k, part in enumerate(parts):
            if k:
                psi = self.exchange(psi)
            last = measure if k == len(parts) - 1 else None
            if k == 0 and factor == 0:  # this rank's part of the state is 0 until an exchange
                psi[:] = 0
                if last is not None:
                    last.value = 0.0
                    if last.lam is not None:
                        last.lam[:] = 0
                continue
            if last is not None and kept and last_layer:
                engine.apply_layer(part[0], psi, lam, local, traffic, last, tiling)  # ψ left as it was: the kept φ
            else:
                keep = lam if kept and single else None
                engine.forward(part, local, psi, self._cache, traffic, keep=keep, measure=last, initial=k == 0, tiling=tiling)
        if not adjoint:
            self.last = (psi, layout, 0, psi.size)
            value = self.allreduce(np.array([measure.value]))[0]
            return np.array(value), (_format_jacobian(np.zeros((1, 0))) if gradient else None)
        self.last = None  # the adjoint pass overwrites ψ
        assert lam is not None
        grad = np.zeros(nparams + 1)
        grad[nparams] = measure.value
        phi, lam = (lam, psi) if kept and single else (psi, lam)
        self._adjoint(parts, factor, phi, lam, local, traffic, grad[:nparams], kept, measure.undone, tiling)
        grad = self.allreduce(grad)
        value, grad = grad[nparams], grad[:nparams]
        return np.array(value), _format_jacobian(np.array([grad[list(tape.trainable_params)]]))

    def _simulate_shared(self, tape: Any, wires: Any, gradient: bool, traffic: engine.Traffic) -> tuple[Any, Any]:
        """``simulate`` for ranks sharing one state: each runs one process's sweeps (``engine.expectation``) over its
        part of every pass, and the value and moments of all parts are summed."""
        from .device import _format_jacobian, _masks_and_coefficients, _refuse_untracked_gradients

        assert self.memory is not None
        n = len(wires)
        index = {w: i for i, w in enumerate(wires)}
        segments, nparams = compile_operations(tape.operations, index, n)
        if gradient:
            _refuse_untracked_gradients(tape, segments, nparams)
        terms = z_terms(tape.measurements[0].obs)
        assert terms is not None
        masks, coefs = _masks_and_coefficients(terms, index, n)
        adjoint = gradient and bool(tape.trainable_params)
        self.size_run(engine.cost_tables([s for s in segments if isinstance(s, DiagonalBlock)], masks, coefs), n, adjoint)
        with self.memory.team():
            value, grad, psi = engine.expectation(
                segments, nparams, n, masks, coefs, self._cache, self._buffer, traffic, adjoint, keep_state=True
            )
        self.last = (psi, Layout(n, n, 0), *self.memory.span(psi.size)) if psi is not None else None
        sums = self.allreduce(np.append(grad if grad is not None else np.zeros(0), value))
        if not gradient:
            return np.array(sums[-1]), None
        return np.array(sums[-1]), _format_jacobian(np.array([sums[:-1][list(tape.trainable_params)] if adjoint else []]))

    def _adjoint(
        self,
        parts: list[list[Segment]],
        factor: complex,
        phi: np.ndarray,
        lam: np.ndarray,
        local: int,
        traffic: engine.Traffic,
        grad: np.ndarray,
        kept: bool,
        undone: tuple[int, np.ndarray] | None,
        tiling: engine.Tiling,
    ) -> None:
        """This rank's part of d⟨H⟩/dθ into ``grad``: the parts undone in reverse on φ and λ down to the first with
        parameters (the parts before it need no undoing), exchanging both between parts. ``kept``: φ holds the
        last layer's input, and λ has that layer's pass ``undone[0]`` undone (``Measure.undone``)."""
        first = next((k for k, part in enumerate(parts) if any(engine.has_parameters(seg) for seg in part)), None)
        if first is None:
            return
        nparams = grad.size
        last = len(parts) - 1
        for k in range(last, first - 1, -1):
            if not (k == 0 and factor == 0):  # a part of 0 amplitudes: no moments
                grad += engine.adjoint_gradient(
                    parts[k],
                    nparams,
                    phi,
                    lam,
                    local,
                    self._cache,
                    traffic,
                    kept=kept and k == last,
                    undone=undone if kept and k == last else None,
                    from_zero=k == 0,
                    through=k > first,
                    tiling=tiling,
                )
            if k > first:
                phi = self.exchange(phi)
                lam = self.exchange(lam)

    def most_probable(self, ties: float = 0.0) -> tuple[int, float]:
        """(state index, probability) of the most probable basis state of the last final state, over all ranks:
        the lowest index among those within ``ties`` (relative) of the largest probability."""
        if self.last is None:
            raise UnsupportedCircuitError(
                "most_probable reads the final state of the last circuit run without a gradient; there is none.",
                "run the circuit once with constant parameters (requires_grad=False) first.",
            )
        state, layout, begin, end = self.last
        psi = state[begin:end]  # this rank's part of a shared state, or its whole share
        from mpi4py import MPI

        largest = self.comm.allreduce(max((float(p.max()) for _, p in _probabilities(psi)), default=0.0), op=MPI.MAX)
        mine = (1 << layout.nwires, 0.0)
        for start, p in _probabilities(psi, begin):
            near = np.flatnonzero(p >= largest * (1 - ties))
            if near.size:
                indices = layout.global_indices(near + start)
                first = int(np.argmin(indices))
                mine = min(mine, (int(indices[first]), float(p[near[first]])))
        index = self.comm.allreduce(mine[0], op=MPI.MIN)
        return index, self.comm.allreduce(mine[1] if mine[0] == index else 0.0, op=MPI.MAX)


def _probabilities(psi: np.ndarray, offset: int = 0) -> Any:
    """(first index + ``offset``, |ψ|² in float64) of ``psi`` a CHUNK at a time, as one process squares it: the whole
    share's probabilities would take half of it again (a 29-qubit run on 2 ranks ran out of memory)."""
    for start in range(0, psi.size, CHUNK):
        yield offset + start, magnitudes(psi[start : start + CHUNK])


def ranks_of(device: Any) -> Ranks:
    """The ranks that share ``device``'s state: a fused.qubit device built with mpi=True.

    Raises:
        UnsupportedOptionError: any other device.
    """
    ranks = getattr(device, "_mpi", None)
    if not isinstance(ranks, Ranks):
        raise UnsupportedOptionError(
            f"--mpi splits the state of local:qbackends/fused.qubit over MPI ranks; {device.name} was built instead.",
            "pass --device local:qbackends/fused.qubit (or leave --device out) with --mpi.",
        )
    return ranks


def most_probable(device: Any) -> tuple[int, float]:
    """(index, probability) of the most probable bitstring of ``device``'s last final state (mpi=True devices)."""
    return ranks_of(device).most_probable()


RANK_ZERO_GRACE = 2.0  # seconds another failing rank leaves rank 0 to say an error they all share
# seconds a failing rank leaves mpiexec to forward what it said before MPI_Abort ends the job (an Abort right after
# the write lost the line once in a loaded CI run: the launcher ended before it read the rank's pipe)
SAID_GRACE = 0.3


def started() -> bool:
    """Whether this process is in an MPI job of several ranks that has started MPI."""
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() and mpi.COMM_WORLD.Get_size() > 1


def end_job(say: Callable[[], int]) -> None:
    """End every rank of the job after this one failed: ``say`` prints its one line and gives the exit code, then
    ``MPI_Abort`` (no rank waits for ever in a collective on this one). A rank other than 0 first leaves rank 0 a
    moment to say the same error (one that every rank meets alike is then said once)."""
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() != 0:
        time.sleep(RANK_ZERO_GRACE)
    code = say()
    sys.stdout.flush()
    sys.stderr.flush()
    time.sleep(SAID_GRACE)
    quiet = os.open(os.devnull, os.O_WRONLY)  # MPICH's own "Abort(2) on node 0 ..." lines would follow the one line said
    os.dup2(quiet, sys.stderr.fileno())
    MPI.COMM_WORLD.Abort(code or 1)


def _abort_on_uncaught(comm: Any) -> None:
    """A script's uncaught exception on one rank ends the job: its traceback, then Abort."""
    if comm.Get_size() == 1 or getattr(sys.excepthook, "qbackends_aborts", False):
        return
    previous = sys.excepthook

    def hook(kind: Any, value: Any, tb: Any) -> None:
        previous(kind, value, tb)
        sys.stderr.flush()
        time.sleep(SAID_GRACE)
        comm.Abort(1)

    hook.qbackends_aborts = True  # type: ignore[attr-defined]
    sys.excepthook = hook
