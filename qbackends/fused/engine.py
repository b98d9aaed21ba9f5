"""Run compiled segments on a state vector: forward, and the adjoint pass for gradients."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np

from . import kernels as K
from .program import Dense, DiagonalBlock, ProductLayer, Segment


@dataclass(frozen=True)
class Tables:
    """A sum of Z products split for the kernels (see kernels.py)."""

    low_bits: int
    a: np.ndarray
    bmask: np.ndarray
    bcoef: np.ndarray
    gmask: np.ndarray
    c: np.ndarray
    # per term: which table answers its moment, for the adjoint pass
    kind: np.ndarray  # 0: constant, 1: low only, 2: high only, 3: both (group index in group)
    group: np.ndarray


def _z_table(masks: np.ndarray, bits: int) -> np.ndarray:
    """z(x & mask) for x in [0, 2^bits), one row per mask."""
    v = np.arange(1 << bits, dtype=np.int64)[None, :] & np.asarray(masks, dtype=np.int64)[:, None]
    for shift in (32, 16, 8, 4, 2, 1):  # parity: fold the bits onto bit 0
        v ^= v >> shift
    return 1.0 - 2.0 * (v & 1)


def split_tables(masks: np.ndarray, coefs: np.ndarray, nwires: int) -> Tables:
    low_bits = min(nwires, K.DIAG_LOW_BITS)
    low_mask = (1 << low_bits) - 1
    m_lo, m_hi = masks & low_mask, masks >> low_bits
    a = np.zeros(1 << low_bits)
    kind = np.zeros(len(masks), dtype=np.int64)
    group = np.full(len(masks), -1, dtype=np.int64)
    low_only = m_hi == 0
    if low_only.any():
        a += coefs[low_only] @ _z_table(m_lo[low_only], low_bits)
    kind[low_only & (m_lo != 0)] = 1
    high_only = (m_lo == 0) & (m_hi != 0)
    kind[high_only] = 2
    both = (m_lo != 0) & (m_hi != 0)
    gmask = np.unique(m_hi[both])
    c = np.zeros((gmask.size, 1 << low_bits))
    for g, hm in enumerate(gmask):
        members = both & (m_hi == hm)
        c[g] = coefs[members] @ _z_table(m_lo[members], low_bits)
        group[members] = g
    kind[both] = 3
    return Tables(
        low_bits, a, m_hi[high_only].astype(np.int64), coefs[high_only].astype(float), gmask.astype(np.int64), c, kind, group
    )


def state_buffer(size: int, dtype: type) -> np.ndarray:
    """An uninitialised state of ``size`` amplitudes at an address the kernels can stream stores to
    (``kernels.streams``: aligned to ``K.STREAM_ALIGN`` bytes, which numpy does not promise). States of a
    huge page or more get pages of their own, asked for as huge pages (``kernels.state_buffer``): their first
    touch then costs a fault per 2 MiB, not per 4 KiB."""
    itemsize = np.dtype(dtype).itemsize
    if size * itemsize >= HUGE_PAGE:
        return huge_array(size, dtype)
    raw = np.empty(size + K.STREAM_ALIGN // itemsize, dtype=dtype)
    skip = (-raw.ctypes.data % K.STREAM_ALIGN) // itemsize
    return raw[skip : skip + size]


HUGE_PAGE = 1 << 21


def huge_array(size: int, dtype: type) -> np.ndarray:
    """``np.empty(size, dtype)`` in pages of its own, huge pages asked for (``kernels.huge_buffer``); zeros."""
    return K.huge_buffer(size * np.dtype(dtype).itemsize).view(dtype)


def table_array(size: int, dtype: type) -> np.ndarray:
    """An array for a per-amplitude table (a diagonal, levels): in huge pages from HUGE_PAGE bytes on."""
    return huge_array(size, dtype) if size * np.dtype(dtype).itemsize >= HUGE_PAGE else np.empty(size, dtype=dtype)


@dataclass
class Traffic:
    """Bytes the kernels moved in an execution, the roofline's numerator: per amplitude swept, the
    state amplitudes read and written (``amplitude`` bytes each: 16 at complex128, 8 at complex64),
    the levels (``level_bytes``) and the real diagonal entries (half an amplitude) read."""

    amplitude: int = 16
    bytes: int = 0

    def add(self, amplitudes: int, states: float = 0, values: int = 0, diagonals: int = 0) -> None:
        """``values``: bytes of diagonal blocks' values read per amplitude (a level's itemsize for a level)."""
        each = states * self.amplitude + values + diagonals * self.amplitude // 2
        self.bytes += int(amplitudes * each)


@dataclass
class Measure:
    """⟨ψ|D|ψ⟩ of the final state for a real diagonal D, taken by the forward pass's last sweep when it
    can (``value``): ψ is then written into psi only if ``write_state``, and λ = Dψ into ``lam``
    (None: nowhere; psi itself: in place of ψ). ``diagonal`` builds D (half a state vector) when a
    sweep needs it: one that reads ``by_level`` never does."""

    diagonal: Callable[[], np.ndarray]
    write_state: bool = True
    lam: np.ndarray | None = None
    value: float = 0.0
    by_level: tuple[np.ndarray, np.ndarray] | None = None  # (levels, values): D = values[levels[k]], fewer bytes to read
    undo: bool = False  # the last sweep also undoes its own gates on λ and takes their moments (for the adjoint pass)
    # set by the forward pass: the last layer's pass it undid on λ, and that pass's moments (a row per tile)
    undone: tuple[int, np.ndarray] | None = None


class DiagonalCache:
    """Diagonals of observables and level tables of diagonal blocks, kept for the next executions
    (a QAOA step asks for the same cost and the same blocks every time). Diagonals are kept as
    ``real`` (float32 beside complex64 states: half the bytes, as exact as the state)."""

    def __init__(self, size: int = 2, real: type = np.float64, allocate: Callable[[int, type], np.ndarray] | None = None) -> None:
        self._entries: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._size = size
        self.real = real
        self._allocate = allocate or table_array  # (size, dtype) -> a table's array: shared memory for ranks sharing a state

    @property
    def tables(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return sum(table.nbytes for table in self._entries.values())

    def _remember(self, key: tuple, value: np.ndarray) -> np.ndarray:
        self._entries[key] = value
        kind = key[0]
        while sum(k[0] == kind for k in self._entries) > self._size:
            oldest = next(k for k in self._entries if k[0] == kind)
            del self._entries[oldest]
        return value

    def _lookup(self, key: tuple) -> np.ndarray | None:
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        return None

    def get(self, nwires: int, masks: np.ndarray, coefs: np.ndarray) -> np.ndarray:
        key = ("diagonal", nwires, masks.tobytes(), coefs.tobytes())
        if (found := self._lookup(key)) is not None:
            return found
        t = split_tables(masks, coefs, nwires)
        out: np.ndarray = self._allocate(1 << nwires, self.real)
        K.diag_values(out, t.low_bits, t.a, t.bmask, t.bcoef, t.gmask, t.c)
        return self._remember(key, out)

    def proportional(
        self, nwires: int, masks: np.ndarray, weights: np.ndarray, create: bool = True, rtol: float = 1e-12
    ) -> tuple[np.ndarray, float, float] | None:
        """(D, factor, c0) with Σ weights·z(k & mask) = factor·(D[k] - c0) over non-zero masks: a kept
        diagonal whose varying terms are proportional to these (a weighted cost layer and its cost
        observable share one, half a state vector), else a new one (factor 1, c0 0) if ``create``."""
        wanted_masks, wanted = _varying_terms(masks, weights)
        for key, diagonal in list(self._entries.items()):
            if key[0] != "diagonal" or key[1] != nwires:
                continue
            kept_masks, kept_coefs = np.frombuffer(key[2], dtype=np.int64), np.frombuffer(key[3])
            their_masks, theirs = _varying_terms(kept_masks, kept_coefs)
            if not np.array_equal(their_masks, wanted_masks) or not theirs.size:
                continue
            j = int(np.argmax(np.abs(theirs)))
            factor = float(wanted[j] / theirs[j])
            if np.allclose(wanted, factor * theirs, rtol=rtol, atol=0.0):
                self._entries.move_to_end(key)
                return diagonal, factor, float(kept_coefs[kept_masks == 0].sum())
        return (self.get(nwires, wanted_masks, wanted), 1.0, 0.0) if create else None

    def levels(self, nwires: int, masks: np.ndarray, signs: np.ndarray | None = None) -> np.ndarray:
        """levels[k]: how many of ``masks`` have odd parity at k (``level_dtype``); with ``signs`` (±1 per
        mask), even parity counts where the sign is -1: Σ signs·z(k & mask) = T - 2·levels[k]."""
        flipped = signs is not None and bool((signs < 0).any())
        key = ("levels", nwires, masks.tobytes(), signs.tobytes() if flipped else b"")
        if (found := self._lookup(key)) is not None:
            return found
        t = split_tables(masks, -0.5 * (signs if flipped else np.ones(masks.size)), nwires)
        out = self._allocate(1 << nwires, level_dtype(masks.size))
        K.diag_levels(out, t.low_bits, t.a, t.bmask, t.bcoef, t.gmask, t.c, masks.size / 2)
        return self._remember(key, out)

    def keep(self, count: int) -> None:
        """Keep at least ``count`` tables of a kind from now on (a circuit whose sweeps use them all at once)."""
        self._size = max(self._size, count)

    def holds(self, nwires: int, masks: np.ndarray, coefs: np.ndarray) -> bool:
        """Whether ``get(nwires, masks, coefs)`` finds its diagonal kept."""
        return ("diagonal", nwires, masks.tobytes(), coefs.tobytes()) in self._entries

    def missing_bytes(self, nwires: int, tables: CostTables) -> int:
        """Bytes of ``tables`` (a circuit's, ``cost_tables``) the cache does not hold yet: what running it allocates.
        More of a kind than the cache keeps are all counted: each run then builds them again (the sweeps hold them
        all at once)."""
        diagonal_bytes = np.dtype(self.real).itemsize << nwires
        if len(tables.levels) > self._size or len(tables.diagonals) > self._size:
            return (tables.level_bytes() << nwires) + diagonal_bytes * len(tables.diagonals)
        missing = sum(level_bytes(key) << nwires for key in tables.levels if ("levels", nwires, *key) not in self._entries)
        for masks, coefs in tables.diagonals:
            weights = np.frombuffer(coefs)  # scaled and rounded to 12 places (cost_tables): matched to 1e-9
            if self.proportional(nwires, np.frombuffer(masks, dtype=np.int64), weights, create=False, rtol=1e-9) is None:
                missing += diagonal_bytes
        return missing


MAX_LEVELS = 1 << 16


def level_dtype(count: int) -> type:
    """The dtype of the levels of ``count`` masks (0 to count): one byte up to 255 masks (a level read a pass is
    an eighth of a c64 amplitude's bytes, not a quarter), two up to MAX_LEVELS."""
    return np.uint8 if count < 256 else np.uint16


def level_bytes(key: tuple[bytes, bytes]) -> int:
    """Bytes an amplitude of the levels of a CostTables key (masks as int64 bytes, signs)."""
    return np.dtype(level_dtype(len(key[0]) // 8)).itemsize


class CostTables(NamedTuple):
    """The tables a DiagonalCache builds for a circuit's diagonal blocks and observable, by key: levels (masks, signs)
    and real diagonals (masks, coefficients scaled to a largest of 1: proportional ones share a diagonal)."""

    levels: frozenset
    diagonals: frozenset

    def bytes(self, real: type) -> int:
        """Bytes an amplitude of them all (every one may be in use at once: the cache evicts only what nothing holds)."""
        return self.level_bytes() + np.dtype(real).itemsize * len(self.diagonals)

    def level_bytes(self) -> int:
        """Bytes an amplitude of the levels' tables."""
        return sum(level_bytes(key) for key in self.levels)


def cost_tables(blocks: list[DiagonalBlock], masks: np.ndarray, coefs: np.ndarray) -> CostTables:
    """The tables of ``blocks`` and the observable Σ coefs·z(mask), as sweep_block and values_by_level ask the cache
    for them: levels for terms of one coefficient; else a diagonal for the observable, a block of one parameter
    or a fixed block; none for a block of several parameters."""
    levels: set[tuple[bytes, bytes]] = set()
    diagonals: set[tuple[bytes, bytes]] = set()

    def add(masks: np.ndarray, coefs: np.ndarray, diagonal: bool) -> None:
        if (uniform := _uniform_terms(masks, coefs)) is not None:
            _, _, varying, signs = uniform
            levels.add((varying.tobytes(), signs.tobytes() if (signs < 0).any() else b""))
        elif diagonal:
            varying, summed = _varying_terms(masks, coefs)
            if summed.size and (largest := summed[np.argmax(np.abs(summed))]) != 0:
                diagonals.add((varying.tobytes(), np.round(summed / largest, 12).tobytes()))

    add(np.asarray(masks, dtype=np.int64), np.asarray(coefs, dtype=float), True)
    for block in blocks:
        block_masks = np.array(block.masks, dtype=np.int64)
        if (block_masks != 0).any():
            add(block_masks, np.array(block.coefs, dtype=float), _one_parameter(block) is not None)
    return CostTables(frozenset(levels), frozenset(diagonals))


def _varying_terms(masks: np.ndarray, coefs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The non-zero masks, sorted and each once, with their summed coefficients."""
    masks = np.asarray(masks, dtype=np.int64)
    unique, where = np.unique(masks[masks != 0], return_inverse=True)
    summed = np.zeros(unique.size)
    np.add.at(summed, where, np.asarray(coefs, dtype=float)[masks != 0])
    return unique, summed


def _uniform_terms(masks: np.ndarray, coefs: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray] | None:
    """(constant, c, varying masks, signs) where every varying term's coefficient is c or -c (signs ±1; -c where a
    distributed state's rank bits flip a term), else None."""
    varying = masks != 0
    if not varying.any() or varying.sum() >= MAX_LEVELS:
        return None
    c = float(coefs[varying][0])
    signs = coefs[varying] / c if c != 0.0 else np.where(coefs[varying] == 0.0, 1.0, np.inf)
    if np.any(np.abs(signs) != 1.0):
        return None
    return float(coefs[~varying].sum()), c, masks[varying], signs


def _phase_tables(t: Tables, sign: float) -> tuple[np.ndarray, np.ndarray]:
    """(phase_a, phase_c) for the table kernels: exp(i·sign·A) and exp(±i·sign·C_g) as (real, imaginary) rows."""
    a = np.exp(1j * sign * t.a)
    c = np.exp(1j * sign * t.c[:, None, :] * np.array([1.0, -1.0])[None, :, None])  # (G, ±, 2^L)
    phase_a = np.ascontiguousarray(np.stack([a.real, a.imag]))
    phase_c = np.ascontiguousarray(np.stack([c.real, c.imag], axis=2))  # (G, ±, re/im, 2^L)
    return phase_a, phase_c


def values_by_level(
    nwires: int, masks: np.ndarray, coefs: np.ndarray, cache: DiagonalCache
) -> tuple[np.ndarray, np.ndarray] | None:
    """(levels, values) with the diagonal Σ coef·z(k & mask) = values[levels[k]], when every
    non-constant term has one coefficient (an unweighted cut); None otherwise."""
    if (uniform := _uniform_terms(masks, coefs)) is None:
        return None
    a0, c, varying, signs = uniform
    return cache.levels(nwires, varying, signs), a0 + c * (varying.size - 2.0 * np.arange(varying.size + 1))


class SweepBlock(NamedTuple):
    """A diagonal block as a sweep applies it to a tile (``kernels._phase_tile``; ``sign`` -1 undoes it):
    by level, phases[values[k]] (uint8 or uint16 levels: every varying term has one coefficient, an unweighted
    cut), or by angle, exp(i·(phases[0] + phases[1]·values[k])) (a kept float diagonal: a weighted cut).
    When its varying terms have one parameter ``param`` (-1: none), their derivative by it is
    ``offset + slope·values[k]``: their moment follows from the sums Σ q and Σ q·values. ``param``
    None: it does not (several parameters, or rates no values express)."""

    values: np.ndarray
    phases: np.ndarray
    param: int | None
    offset: float = 0.0
    slope: float = 0.0


def _one_parameter(block: DiagonalBlock) -> int | None:
    """The one parameter of the block's varying terms (-1 for none), or None when they have several."""
    params = {p for m, p in zip(block.masks, block.params, strict=True) if m != 0}
    return params.pop() if len(params) == 1 else None


def sweep_block(
    block: DiagonalBlock, nwires: int, cache: DiagonalCache | None, sign: float, by_angle: bool = True
) -> SweepBlock | None:
    """How a sweep applies the block (see SweepBlock), when a cache keeps its values; None without one
    (the table kernels apply it, in a pass of its own), or when it takes angles and ``by_angle`` is False.
    Made once per block and cache (a step asks several times); None is not kept: the cache may keep a diagonal later."""
    key = (nwires, cache, sign, by_angle)  # a cache is keyed by its identity
    if (found := block.plans.get(key)) is None and (found := _sweep_block(block, nwires, cache, sign, by_angle)) is not None:
        block.plans[key] = found
    return found


def _sweep_block(
    block: DiagonalBlock, nwires: int, cache: DiagonalCache | None, sign: float, by_angle: bool
) -> SweepBlock | None:
    masks, coefs = np.array(block.masks, dtype=np.int64), np.array(block.coefs)
    varying = masks != 0
    if cache is None or not varying.any():
        return None
    a0 = float(coefs[~varying].sum())
    param = _one_parameter(block)
    rates = np.array(block.alphas)[varying]  # d coef / d θ of each varying term
    if (uniform := _uniform_terms(masks, coefs)) is not None:
        _, c, levelled, signs = uniform  # angle = a0 + c·(T - 2·level)
        angles = a0 + c * (levelled.size - 2.0 * np.arange(levelled.size + 1))
        values, phases = cache.levels(nwires, levelled, signs), np.exp(1j * sign * angles)
        rates = rates * signs  # d c / dθ for every term, if they are one
        if param is None or param < 0 or np.ptp(rates) != 0:
            return SweepBlock(values, phases, param if param == -1 else None)
        return SweepBlock(values, phases, param, rates[0] * levelled.size, -2.0 * rates[0])
    if not by_angle:
        return None
    if param is not None and param >= 0:  # coefs = θ·rates: the diagonal of the rates is kept across steps
        j = int(np.argmax(np.abs(rates)))
        theta = coefs[varying][j] / rates[j] if rates[j] else 0.0
        if theta != 0.0 and np.allclose(coefs[varying], theta * rates, rtol=1e-12, atol=0.0):
            found = cache.proportional(nwires, masks[varying], rates)
            assert found is not None
            diagonal, factor, c0 = found  # Σ rates·z = factor·(D - c0), angle = a0 + θ·factor·(D - c0)
            slope = theta * factor
            return SweepBlock(diagonal, np.array([sign * (a0 - slope * c0), sign * slope]), param, -factor * c0, factor)
    # several parameters (coefficients that change every step): only from a diagonal already kept;
    # a fixed block's own is kept
    found = cache.proportional(nwires, masks[varying], coefs[varying], create=param == -1)
    if found is None:
        return None
    diagonal, factor, c0 = found
    return SweepBlock(diagonal, np.array([sign * (a0 - factor * c0), sign * factor]), -1 if param == -1 else None)


def _by_level(block: DiagonalBlock, nwires: int, cache: DiagonalCache | None, sign: float) -> SweepBlock | None:
    """sweep_block when it applies the block by level (``kernels.phase_by_level`` and the diagonal
    adjoint kernels read levels only)."""
    return sweep_block(block, nwires, cache, sign, by_angle=False)


class Tiling(NamedTuple):
    """How a product layer's passes tile the state (``tiling_for``, ``_layer_passes``)."""

    bits: int  # a tile holds 2^bits amplitudes
    min_run_bits: int  # a later pass gathers runs of 2^min_run_bits amplitudes or more


def tiling_for(nwires: int, itemsize: int = 16, adjoint: bool = False) -> Tiling:
    """The tiling of a state of ``nwires`` with amplitudes of ``itemsize`` bytes; ``adjoint``: for the sweeps of an
    adjoint pass, which hold φ's tiles and λ's. Tiles of 2^TILE_BITS amplitudes (in L2); above 24 wires, where a
    layer would take a third pass over the state, the smallest tile that keeps it to two, with runs of
    2^MIN_RUN_BITS, up to 2^MAX_TILE_BITS; where an adjoint sweep's tiles then outgrow ADJOINT_TILES_BYTES but runs of
    2^ADJOINT_RUN_BITS would keep them to it, tiles of that size (29 wires c128: 2^17 tiles, runs of 16, as fast as
    2^18 tiles). Since the sweeps take L2-sized blocks (GateSweeps), 28 wires c128 takes 2^17 tiles (4 MiB of φ and λ),
    0.86-0.89x the time of 2^16 tiles with runs of 16 (side by side, docs/benchmarks.md); c64's shorter runs and one
    state's sweeps in smaller tiles lost before (3-10 %)."""

    def two_passes(run_bits: int) -> int:
        return -(-(nwires + run_bits) // 2)

    bits, run_bits = two_passes(K.MIN_RUN_BITS), K.MIN_RUN_BITS
    fits = (K.ADJOINT_TILES_BYTES // (2 * itemsize)).bit_length() - 1
    short = K.ADJOINT_RUN_BITS.get(itemsize, K.MIN_RUN_BITS)
    if adjoint and bits > fits >= two_passes(short):
        bits, run_bits = fits, short
    return Tiling(min(max(K.TILE_BITS, bits), max(K.TILE_BITS, K.MAX_TILE_BITS)), run_bits)


def _layer_passes(layer: ProductLayer, nwires: int, tiling: Tiling) -> list[Pass]:
    """The passes that apply a product layer.

    Each pass gathers tiles of 2^T amplitudes (T = ``tiling.bits``): runs of 2^run_bits
    contiguous ones, one per value of its high bits. The bits above T are split evenly over the
    fewest later passes (at most T - min_run_bits each, so runs stay 2^min_run_bits long or longer).
    The first pass takes contiguous tiles, the gates on the bits below T except SPECTATORS of them,
    which it puts at the bottom of its tiles ("transposed"): no gate pairs amplitudes closer than
    2^SPECTATORS apart. The later pass with the longest runs takes the spectators' gates, inside
    its runs (runs of 2^4 pair amplitudes 2 and 4 apart there: the kernels' scalar loop). 22 wires take
    two passes, with runs of 2^8; 30 wires two, in tiles of 2^18. Made once per layer and tiling.
    """
    if (found := layer.plans.get((nwires, tiling))) is None:
        found = layer.plans[nwires, tiling] = _plan_passes(layer, nwires, tiling)
    return found


def _plan_passes(layer: ProductLayer, nwires: int, tiling: Tiling) -> list[Pass]:
    items = sorted(((nwires - 1 - w, g) for w, g in layer.gates.items()), key=lambda kv: kv[0])
    tile = tiling.bits
    if nwires <= tile:  # one tile holds the state
        return [_pass(nwires, [], nwires, False, items)]
    top = list(range(tile, nwires))
    count = -(-len(top) // (tile - tiling.min_run_bits))
    chunks = [top[len(top) * i // count : len(top) * (i + 1) // count] for i in range(count)]
    host = min(range(count), key=lambda i: len(chunks[i]))  # the later pass with the longest runs
    run_end = tile - len(chunks[host])
    spectators = list(range(run_end - K.SPECTATORS, run_end))
    gates = dict(items)
    passes = []
    first = [(b, g) for b, g in items if b < tile and b not in spectators]
    if first:
        passes.append(_pass(spectators[0], list(range(spectators[0], tile)), nwires, True, first))
    for i, chunk in enumerate(chunks):
        group = [(b, gates[b]) for b in (spectators if i == host else []) + chunk if b in gates]
        if group:
            passes.append(_pass(tile - len(chunk), chunk, nwires, False, group))
    return passes


class Pass(NamedTuple):
    """One sweep of a product layer over the state, tile by tile (see ``_layer_passes``)."""

    run_bits: int
    high: np.ndarray  # the high bits each tile takes whole
    rest: np.ndarray  # the bits that number the tiles
    transposed: bool  # the high bits are the tile's lowest (a first pass: its runs follow each other in memory)
    mats: np.ndarray  # (gates, 2, 2)
    tile_bits: np.ndarray  # the tile bit each gate acts on, ascending
    generators: np.ndarray  # 0: fixed, 1: X, 2: Y
    params: list[int]  # parameter index per gate, -1: fixed
    scales: list[float]  # d angle / d parameter per gate

    def tiling(self) -> tuple[int, np.ndarray, np.ndarray, bool]:
        """The kernels' first arguments after the state vectors: run bits, high bits, rest bits, transposed."""
        return self.run_bits, self.high, self.rest, self.transposed


def _pass(run_bits: int, chosen: list[int], nwires: int, transposed: bool, gates: list) -> Pass:
    """One pass: gates on run bits or on ``chosen`` high bits; the rest of the bits index the tiles."""
    rest = [b for b in range(run_bits, nwires) if b not in chosen]
    if transposed:  # tile index = (run offset << len(chosen)) | high-bit values
        tile_bits = [len(chosen) + b if b < run_bits else chosen.index(b) for b, _ in gates]
    else:  # tile index = (high-bit values << run_bits) | run offset
        tile_bits = [b if b < run_bits else run_bits + chosen.index(b) for b, _ in gates]
    order = np.argsort(tile_bits, kind="stable")  # the kernels take the gates inside an L1 block first
    tile_bits = [tile_bits[i] for i in order]
    ordered = [gates[i][1] for i in order]
    return Pass(
        run_bits,
        np.array(chosen, dtype=np.int64),
        np.array(rest, dtype=np.int64),
        transposed,
        np.array([g[0] for g in ordered], dtype=complex).reshape(-1, 2, 2),
        np.array(tile_bits, dtype=np.int64),
        np.array([g[2] for g in ordered], dtype=np.int8),
        [g[1] for g in ordered],
        [g[3] for g in ordered],
    )


def _product_vectors(layer: ProductLayer, nwires: int) -> np.ndarray:
    """vectors[b]: the single-qubit state U_w|0⟩ on bit b of a first product layer."""
    vectors = np.zeros((nwires, 2), dtype=complex)
    vectors[:, 0] = 1.0
    for w, (mat, *_) in layer.gates.items():
        vectors[nwires - 1 - w] = mat[:, 0]
    return vectors


class ProductSource(NamedTuple):
    """A state the kernels compute where they need it instead of reading it: a first product layer's
    state, times a diagonal block's phases (``SweepBlock``: its values and phases) unless ``levels`` is empty."""

    layer: ProductLayer
    levels: np.ndarray
    phases: np.ndarray


NO_CARRIED = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int8), np.empty((0, 0)), np.empty((0, 2, 2), dtype=complex))


def _product_source(prefix: list[Segment], nwires: int, cache: DiagonalCache | None) -> ProductSource | None:
    """The state after ``prefix`` as a ProductSource: a product layer, or one and the diagonal block after it."""
    if not prefix or len(prefix) > 2 or not isinstance(prefix[0], ProductLayer):
        return None
    if len(prefix) == 1:
        return ProductSource(prefix[0], np.empty(0, dtype=np.uint16), np.ones(1, dtype=complex))
    block = sweep_block(prefix[1], nwires, cache, 1.0) if isinstance(prefix[1], DiagonalBlock) else None
    return ProductSource(prefix[0], block.values, block.phases) if block else None


def _source_tables(source: ProductSource | None, p: Pass, nwires: int, state: np.ndarray) -> tuple:
    """The kernels' ``source``/``product`` argument for pass ``p``: rest-bit vectors, the product over
    the pass's high bits per run and over its run bits per offset (real and imaginary rows in the
    state's real precision: a tile is written in it), levels, phases (see ``kernels._product_tile``).
    Empty tables, of the same types, without a source."""
    real = state.real.dtype
    if source is None:
        return (
            np.empty((0, 2), state.dtype),
            np.empty((2, 0), real),
            np.empty((2, 0), real),
            np.empty(0, np.uint16),
            np.empty(0, state.dtype),
        )
    vectors = _product_vectors(source.layer, nwires)

    def table(bits: list[int]) -> np.ndarray:
        index = np.arange(1 << len(bits))
        out = np.ones(index.size, dtype=complex)
        for i, b in enumerate(bits):
            out *= vectors[b][(index >> i) & 1]
        return np.stack([out.real, out.imag]).astype(real)

    high, run = table(list(p.high)), table(list(range(p.run_bits)))
    return _cast(state, vectors[p.rest]) + (high, run) + _cast(state, source.levels, source.phases)


def initial_product(layer: ProductLayer, nwires: int, psi: np.ndarray, levels: np.ndarray, phases: np.ndarray) -> np.ndarray:
    """Write the state ⊗_w U_w|0⟩ of a first product layer into ``psi``, in one pass; times
    a diagonal block's phases (``SweepBlock``) unless ``levels`` is empty."""
    low_bits = min(nwires, K.LOW_BITS)
    vectors = _product_vectors(layer, nwires)
    K.product_state(psi, low_bits, vectors[:low_bits].copy(), vectors[low_bits:].copy(), levels, phases)
    return psi


def keeps_last_input(segments: list[Segment]) -> bool:
    """Whether ``forward(..., keep=)`` keeps the state at the input of the last segment: a product
    layer with parameters, after other segments with parameters (a QAOA mixer). The adjoint pass
    then reads that input instead of undoing the layer on ψ."""
    with_parameters = [i for i, seg in enumerate(segments) if has_parameters(seg)]
    return len(with_parameters) >= 2 and with_parameters[-1] == len(segments) - 1 and isinstance(segments[-1], ProductLayer)


class Fusion(NamedTuple):
    """Layer ``i``'s pass ``a``, the diagonal block after it and pass ``b`` of the next layer share
    one tiling: one sweep applies all three (or, in the adjoint, undoes them)."""

    a: int
    b: int
    low: Pass  # layer i's pass a
    high: Pass  # layer i + 2's pass b
    block: SweepBlock


def _same_tiling(p: Pass, q: Pass) -> bool:
    return (
        p.run_bits == q.run_bits
        and p.transposed == q.transposed
        and np.array_equal(p.high, q.high)
        and np.array_equal(p.rest, q.rest)
    )


def _fusion(
    segments: list[Segment],
    i: int,
    nwires: int,
    tiling: Tiling,
    cache: DiagonalCache | None,
    sign: float,
    done: int | None = None,
    high_pass: int | None = None,
) -> Fusion | None:
    """The fusion of segments i, i+1, i+2 (layer, diagonal block a sweep applies, layer), if they are that and
    two of the layers' passes share a tiling; ``done``: a pass of layer i already run elsewhere;
    ``high_pass``: the pass of layer i + 2 it must take."""
    if i < 0 or i + 2 >= len(segments):
        return None
    low, block, high = segments[i : i + 3]
    if not (isinstance(low, ProductLayer) and isinstance(high, ProductLayer) and isinstance(block, DiagonalBlock)):
        return None
    swept = sweep_block(block, nwires, cache, sign)
    if swept is None:
        return None
    lows, highs = _layer_passes(low, nwires, tiling), _layer_passes(high, nwires, tiling)
    for a in reversed(range(len(lows))):
        for b in range(len(highs)):
            if a != done and high_pass in (None, b) and _same_tiling(lows[a], highs[b]):
                return Fusion(a, b, lows[a], highs[b], swept)
    return None


def _forward_fusions(
    segments: list[Segment], start: int, nwires: int, tiling: Tiling, cache: DiagonalCache | None
) -> dict[int, Fusion]:
    """The fusions the forward pass makes from segment ``start`` on, by the index of their first
    layer, left to right: a layer whose pass ran in one fusion may take part in the next with another pass."""
    fusions: dict[int, Fusion] = {}
    for i in range(start, len(segments)):
        previous = fusions.get(i - 2)
        if fusion := _fusion(segments, i, nwires, tiling, cache, 1.0, previous.b if previous else None):
            fusions[i] = fusion
    return fusions


def forward(
    segments: list[Segment],
    nwires: int,
    psi: np.ndarray,
    cache: DiagonalCache | None = None,
    traffic: Traffic | None = None,
    keep: np.ndarray | None = None,
    measure: Measure | None = None,
    initial: bool = True,
    tiling: Tiling | None = None,
) -> np.ndarray:
    """Write the state after all segments, from |0...0⟩, into ``psi`` (2^n complex128); ``initial`` False: from
    the state psi holds (a distributed state's part after an exchange; nothing is kept then).
    ``cache`` keeps blocks' level tables and diagonals between executions; ``traffic`` counts bytes;
    ``keep``: a second buffer that, if ``keeps_last_input(segments)``, is left holding the state at
    the last segment's input (at no extra cost: the segments before it run there, or the pass that
    applies the block before it writes it).

    A layer, a diagonal block and a layer (a QAOA mixer, cost layer, mixer) take one pass
    fewer than one by one: a pass of each layer shares a tiling, and one sweep applies both and the
    block between them. ``measure``: the expectation is taken (and λ written) by the last sweep
    if that applies a layer, else after it. ``tiling``: the adjoint pass's where it reads what this one keeps
    or undoes (``expectation``); by default ``tiling_for`` the state alone."""
    traffic = traffic if traffic is not None else Traffic()
    tiling = tiling or tiling_for(nwires, psi.itemsize)
    keeping = initial and keep is not None and keeps_last_input(segments)
    first_block = _first_block(segments, nwires, cache) if initial else None
    start = 0 if not initial or not segments or not isinstance(segments[0], ProductLayer) else 1 if first_block is None else 2
    fusions = _forward_fusions(segments, start, nwires, tiling, cache)
    if keeping and len(segments) - 3 not in fusions:
        assert keep is not None
        forward(segments[:-1], nwires, keep, cache, traffic, tiling=tiling)
        last = segments[-1]
        assert isinstance(last, ProductLayer)
        apply_layer(last, keep, psi, nwires, traffic, measure, tiling)
        return psi
    # the first layer's first pass computes the initial state where it needs it (unless a fusion takes its only pass)
    source = None
    if 0 < start < len(segments) and isinstance(layer := segments[start], ProductLayer):
        if len(_layer_passes(layer, nwires, tiling)) > (start in fusions):
            source = _product_source(segments[:start], nwires, cache)
    if source is None and initial:
        _initial_state(segments[:start], nwires, psi, first_block, traffic)
    i = start
    measured = False
    while i < len(segments):
        seg = segments[i]
        if not isinstance(seg, ProductLayer):
            apply(seg, psi, nwires, cache, traffic)
            i += 1
            continue
        fusion, previous = fusions.get(i), fusions.get(i - 2)
        passes = _layer_passes(seg, nwires, tiling)
        run = [k for k in range(len(passes)) if not (previous and k == previous.b) and not (fusion and k == fusion.a)]
        for k in run:
            final = i == len(segments) - 1 and k == run[-1]
            _layer_pass(passes[k], psi, psi, nwires, traffic, source, (measure, k) if final and measure is not None else None)
            measured = measured or final
            source = None
        if fusion is None:
            i += 1
            continue
        p, q = fusion.low, fusion.high
        into = keep if keeping and i + 2 == len(segments) - 1 else None
        K.layers_with_diagonal(
            psi,
            into if into is not None else psi[:0],
            *p.tiling(),
            *_cast(psi, p.mats),
            p.tile_bits,
            fusion.block.values,
            *_cast(psi, fusion.block.phases, q.mats),
            q.tile_bits,
            K.threads(),
        )
        traffic.add(psi.size, states=3 if into is not None else 2, values=fusion.block.values.itemsize)
        i += 2
    if measure is not None and not measured:
        _measure(psi, measure, traffic)  # the last sweep did not apply a layer
    return psi


def expectation(
    segments: list[Segment],
    nparams: int,
    nwires: int,
    masks: np.ndarray,
    coefs: np.ndarray,
    cache: DiagonalCache,
    buffer: Callable[[str, int], np.ndarray],
    traffic: Traffic,
    adjoint: bool,
    keep_state: bool = False,
) -> tuple[float, np.ndarray | None, np.ndarray | None]:
    """(⟨H⟩, dH/dθ or None, ψ or None) for H = Σ coefs·z(k & masks) after ``segments`` from |0...0⟩, in two states
    of ``buffer(name, size)``. The forward pass's last sweep takes the value, and writes λ = Hψ for the adjoint
    pass; the second buffer keeps the last layer's input, and λ takes ψ's place. ψ is returned written (a value
    alone, ``keep_state``), else None (the adjoint pass overwrites it; a value alone need not write it)."""
    psi = buffer("psi", 1 << nwires)
    tiling = tiling_for(nwires, psi.itemsize, adjoint)  # the forward pass's passes are the adjoint's
    by_level = values_by_level(nwires, masks, coefs, cache)
    if by_level is None:  # kept first: weighted cost layers proportional to it are applied from it
        cache.get(nwires, masks, coefs)
    measure = Measure(partial(cache.get, nwires, masks, coefs), write_state=keep_state and not adjoint, by_level=by_level)
    keep = None
    if adjoint and keeps_for_adjoint(segments, nwires, tiling, cache):
        keep = buffer("lambda", 1 << nwires)
        measure.lam, measure.undo = psi, True
    elif adjoint:
        measure.write_state, measure.lam = True, buffer("lambda", 1 << nwires)
    psi = forward(segments, nwires, psi, cache, traffic, keep=keep, measure=measure, tiling=tiling)
    if not adjoint:
        return measure.value, None, psi if keep_state else None
    phi, lam = (keep, psi) if keep is not None else (psi, measure.lam)
    assert lam is not None
    grad = adjoint_gradient(
        segments, nparams, phi, lam, nwires, cache, traffic, kept=keep is not None, undone=measure.undone, tiling=tiling
    )
    return measure.value, grad, None


def _measure(psi: np.ndarray, measure: Measure, traffic: Traffic) -> None:
    if measure.by_level is not None:  # from the levels: no diagonal the size of the state
        levels, values = measure.by_level
        lam = measure.lam if measure.lam is not None else psi[:0]
        measure.value = K.expval_by_level(psi, levels, np.asarray(values, dtype=np.float64), lam)
        traffic.add(psi.size, states=1 if measure.lam is None else 2, values=levels.itemsize)
    elif measure.lam is not None:
        measure.value = K.expval_and_lambda(psi, measure.diagonal(), measure.lam)
        traffic.add(psi.size, states=2, diagonals=1)  # ψ and the diagonal read, λ written
    else:
        measure.value = K.expval(psi, measure.diagonal())
        traffic.add(psi.size, states=1, diagonals=1)


def _layer_pass(
    p: Pass,
    source: np.ndarray,
    psi: np.ndarray,
    nwires: int,
    traffic: Traffic,
    product: ProductSource | None = None,
    measured: tuple[Measure, int] | None = None,
) -> None:
    """One pass of a layer from ``source`` (or the ``product`` state) into psi; ``measured``: (the
    measure, the pass's index in its layer) for the last pass: it takes the expectation and writes
    what the measure asks for."""
    measure, index = measured if measured is not None else (None, -1)
    empty = psi[:0]
    diagonal, levels = np.empty(0), np.empty(0, dtype=np.uint16)
    if measure is not None:
        levels, diagonal = measure.by_level if measure.by_level is not None else (levels, measure.diagonal())
        diagonal = diagonal.astype(psi.real.dtype, copy=False)  # products in the state's precision, sums in float64
    lam = measure.lam if measure is not None and measure.lam is not None else empty
    out = psi if measure is None or measure.write_state else empty
    tables = _source_tables(product, p, nwires, psi)
    undoing = measure is not None and measure.undo
    undo = _inverses(p.mats) if undoing else p.mats[:0]
    moments = np.zeros((1 << p.rest.size, len(p.params)) if undoing else (0, 0))
    mats, undo = _cast(psi, p.mats, undo)
    value = K.layer_apply(
        source,
        out,
        *p.tiling(),
        mats,
        p.tile_bits,
        tables,
        diagonal,
        levels,
        lam,
        undo,
        p.generators,
        moments,
        K.threads(),
    )
    if measure is not None:
        measure.value = value
        if undoing:
            measure.undone = index, moments
    values = (product.levels.itemsize if product is not None and product.levels.size else 0) + (
        levels.itemsize if measure is not None and levels.size else 0
    )
    states = int(product is None) + int(out.size > 0) + int(lam.size > 0)
    traffic.add(psi.size, states=states, values=values, diagonals=int(measure is not None and not levels.size))


def _first_block(segments: list[Segment], nwires: int, cache: DiagonalCache | None) -> SweepBlock | None:
    """The diagonal block right after a first product layer (QAOA's first cost layer after |+⟩),
    when a sweep can apply it: applied as the product state is written."""
    if len(segments) > 1 and isinstance(segments[0], ProductLayer) and isinstance(segments[1], DiagonalBlock):
        return sweep_block(segments[1], nwires, cache, 1.0)
    return None


def _initial_state(initial: list[Segment], nwires: int, psi: np.ndarray, block: SweepBlock | None, traffic: Traffic) -> None:
    """Write the state after the ``initial`` segments: none (|0...0⟩), a product layer (a product
    state) or a product layer and the diagonal block after it (``block``)."""
    if not initial:
        K.ground_state(psi)
        traffic.add(psi.size, states=1)
        return
    layer = initial[0]
    assert isinstance(layer, ProductLayer)
    levels, phases = (
        (block.values, block.phases) if len(initial) == 2 and block else (np.empty(0, np.uint16), np.ones(1, complex))
    )
    initial_product(layer, nwires, psi, levels, *_cast(psi, phases))
    traffic.add(psi.size, states=1, values=levels.itemsize if levels.size else 0)


def apply_layer(
    layer: ProductLayer,
    source: np.ndarray,
    psi: np.ndarray,
    nwires: int,
    traffic: Traffic,
    measure: Measure | None = None,
    tiling: Tiling | None = None,
) -> None:
    """psi ← the layer applied to ``source`` (psi itself, or a buffer left as it was); ``measure`` in its last pass."""
    passes = _layer_passes(layer, nwires, tiling or tiling_for(nwires, psi.itemsize))
    for k, p in enumerate(passes):
        measured = (measure, k) if measure is not None and k == len(passes) - 1 else None
        _layer_pass(p, source if k == 0 else psi, psi, nwires, traffic, measured=measured)


def apply(seg: Segment, psi: np.ndarray, nwires: int, cache: DiagonalCache | None = None, traffic: Traffic | None = None) -> None:
    traffic = traffic if traffic is not None else Traffic()
    if isinstance(seg, DiagonalBlock) and (by_level := _by_level(seg, nwires, cache, 1.0)):
        K.phase_by_level(psi, by_level.values, *_cast(psi, by_level.phases))
        traffic.add(psi.size, states=2, values=by_level.values.itemsize)
    elif isinstance(seg, DiagonalBlock):
        t = split_tables(np.array(seg.masks, dtype=np.int64), np.array(seg.coefs), nwires)
        phase_a, phase_c = _phase_tables(t, 1.0)
        K.diag_phase_tables(psi, t.low_bits, phase_a, t.bmask, t.bcoef, t.gmask, phase_c, 1.0)
        traffic.add(psi.size, states=2)
    elif isinstance(seg, ProductLayer):
        apply_layer(seg, psi, psi, nwires, traffic)
    elif isinstance(seg, Dense):
        apply_matrix(seg.matrix, seg.axes, psi, nwires)
        traffic.add(psi.size, states=4)  # tensordot into a new array, then copied back
    else:
        K.cnot(psi, seg.control, seg.target)
        traffic.add(psi.size, states=1)  # half the amplitudes swap


def apply_matrix(matrix: np.ndarray, axes: tuple[int, ...], psi: np.ndarray, nwires: int) -> None:
    """psi <- (matrix on ``axes``) psi, in place; axis i of the state tensor is wire index i."""
    k = len(axes)
    tensor = psi.reshape((2,) * nwires)
    out = np.tensordot(matrix.reshape((2,) * (2 * k)), tensor, axes=(list(range(k, 2 * k)), list(axes)))
    psi[:] = np.moveaxis(out, list(range(k)), list(axes)).reshape(-1)


def has_parameters(seg: Segment) -> bool:
    if isinstance(seg, DiagonalBlock):
        return any(p >= 0 for p in seg.params)
    if isinstance(seg, ProductLayer):
        return any(gate[1] >= 0 for gate in seg.gates.values())
    return False


def adjoint_gradient(
    segments: list[Segment],
    nparams: int,
    phi: np.ndarray,
    lam: np.ndarray,
    nwires: int,
    cache: DiagonalCache | None = None,
    traffic: Traffic | None = None,
    kept: bool = False,
    undone: tuple[int, np.ndarray] | None = None,
    from_zero: bool = True,
    through: bool = False,
    tiling: Tiling | None = None,
) -> np.ndarray:
    """d⟨H⟩/dθ for every parameter: λ = Hψ, φ = ψ on entry (both are overwritten), or, if ``kept``,
    φ = the state at the last segment's input (``forward(..., keep=φ)``) and λ = Hψ with the last
    layer's pass ``undone[0]`` (if not None) undone, its moments taken (``Measure.undone``).
    A distributed state's part between exchanges: ``from_zero`` False where the segments did not start from
    |0...0⟩ (φ is then never recomputed from a prefix), ``through``: every segment undone on φ and λ (earlier
    parts have parameters). ``tiling``: the forward pass's where ``kept``; by default ``tiling_for`` φ and λ."""
    traffic = traffic if traffic is not None else Traffic()
    tiling = tiling or tiling_for(nwires, phi.itemsize, adjoint=True)
    grad = np.zeros(nparams)
    first_needed = 0 if through else _first_with_parameters(segments)
    i = len(segments) - 1
    done = None  # a pass of layer i the sweep of the fusion after it undid, its moments taken
    while i >= first_needed:  # segments before the first parameter need no undoing
        seg = segments[i]
        undo = through or i != first_needed  # nor does the first one: its moments are the last needed
        at_input = None if through else _block_at_input(segments, i, first_needed, nwires, cache)
        took_block = False
        if isinstance(seg, ProductLayer) and kept and i == len(segments) - 1:
            last_done = None  # the pass the forward's last sweep undid on λ
            if undone is not None:
                last_done, moments = undone
                _add_moments(grad, _layer_passes(seg, nwires, tiling)[last_done], moments)
            if from_zero and (fusion := _adjoint_fusion(segments, i, first_needed, nwires, tiling, cache, last_done)):
                i = _fused_adjoint(segments, i, fusion, phi, lam, nwires, tiling, cache, traffic, grad, first_needed, last_done)
                continue  # (done stays None: _fused_adjoint undoes every pass it takes)
            _, took_block = _layer_adjoint_lambda(seg, phi, lam, nwires, tiling, traffic, grad, skip=last_done, at_input=at_input)
        elif isinstance(seg, ProductLayer) and undo and from_zero and _cheap_prefix(segments[:i]):
            refill = partial(forward, segments[:i], nwires, cache=cache, traffic=traffic, tiling=tiling)
            source = _product_source(segments[:i], nwires, cache)
            _, took_block = _layer_adjoint_lambda(
                seg, phi, lam, nwires, tiling, traffic, grad, refill, source, skip=done, at_input=at_input
            )
            if source is not None and i - (2 if took_block else 1) >= first_needed:
                refill(phi)  # segments before it read φ
        elif isinstance(seg, ProductLayer) and (fusion := _both_fusion(segments, i, first_needed, nwires, tiling, cache, done)):
            undo_low = through or i - 2 != first_needed
            done = _fused_layer_adjoint(segments, i, fusion, phi, lam, nwires, tiling, traffic, grad, undo_low, done)
            i -= 2 if done is not None else 3
            continue
        elif isinstance(seg, ProductLayer):
            _layer_adjoint(seg, phi, lam, nwires, tiling, traffic, grad, undo, skip=done)
        elif isinstance(seg, DiagonalBlock):
            _diagonal_adjoint(seg, phi, lam, nwires, cache, traffic, grad, undo)
        elif isinstance(seg, Dense):
            inverse = np.conj(seg.matrix.T)
            apply_matrix(inverse, seg.axes, phi, nwires)
            apply_matrix(inverse, seg.axes, lam, nwires)
            traffic.add(phi.size, states=8)
        else:
            K.cnot(phi, seg.control, seg.target)
            K.cnot(lam, seg.control, seg.target)
            traffic.add(phi.size, states=2)
        i -= 2 if took_block else 1
        done = None
    return grad


def _first_with_parameters(segments: list[Segment]) -> int:
    return next((i for i, seg in enumerate(segments) if has_parameters(seg)), len(segments))


def keeps_for_adjoint(segments: list[Segment], nwires: int, tiling: Tiling, cache: DiagonalCache | None) -> bool:
    """Whether the adjoint pass reads the last layer's input kept by the forward pass (``keeps_last_input``):
    not where one sweep can undo a pass of that layer, the block before it and a pass of the layer before that
    on φ and λ (``_both_fusion``), the layers take two passes or more (each then takes part in two such sweeps:
    a chain through the layers) and the layer before is not refilled from a cheap prefix (a deep QAOA). Kept,
    the block before the last layer would take a pass of its own."""
    if not keeps_last_input(segments):
        return False
    last = len(segments) - 1
    layer = segments[last]
    assert isinstance(layer, ProductLayer)
    chain = _both_fusion(segments, last, _first_with_parameters(segments), nwires, tiling, cache)
    return chain is None or len(_layer_passes(layer, nwires, tiling)) < 2 or _cheap_prefix(segments[: last - 2])


def _block_at_input(
    segments: list[Segment], i: int, first_needed: int, nwires: int, cache: DiagonalCache | None
) -> tuple[DiagonalBlock, SweepBlock] | None:
    """(block, how a sweep applies it) when segment i - 1 is the first segment with parameters and a
    diagonal block whose moments the adjoint pass over layer i takes at its input."""
    block = segments[i - 1] if i - 1 == first_needed else None
    if not isinstance(block, DiagonalBlock):
        return None
    swept = sweep_block(block, nwires, cache, -1.0)
    return (block, swept) if swept is not None and swept.param is not None else None


def _add_block_moments(grad: np.ndarray, block: DiagonalBlock, swept: SweepBlock, sums: np.ndarray) -> None:
    """The block's gradient from sums[t] = (Σ q, Σ q·values): its varying terms' derivative is
    offset + slope·values (SweepBlock), its constant terms' the alphas."""
    s0, s1 = sums.sum(axis=0)
    for mask, param, alpha in zip(block.masks, block.params, block.alphas, strict=True):
        if mask == 0 and param >= 0 and alpha != 0.0:
            grad[param] += -2.0 * alpha * s0
    if swept.param is not None and swept.param >= 0:
        grad[swept.param] += -2.0 * (swept.offset * s0 + swept.slope * s1)


def _adjoint_fusion(
    segments: list[Segment],
    i: int,
    first_needed: int,
    nwires: int,
    tiling: Tiling,
    cache: DiagonalCache | None,
    done: int | None,
) -> Fusion | None:
    """The fusion for the adjoint pass over the kept last layer i, the diagonal block before it and
    the layer before that, when that layer's input is refilled from a cheap prefix. Of a layer of two
    passes, one ``done`` (undone on λ, its moments taken), it takes the other, which the sweep then
    undoes; else the ``done`` one if there is one."""
    block = segments[i - 1] if i - 2 > first_needed else None
    if not isinstance(block, DiagonalBlock) or _one_parameter(block) is None or not _cheap_prefix(segments[: i - 2]):
        return None
    last = segments[i]
    assert isinstance(last, ProductLayer)
    fusion = None
    if done is not None and len(_layer_passes(last, nwires, tiling)) == 2:
        fusion = _fusion(segments, i - 2, nwires, tiling, cache, -1.0, high_pass=1 - done)
    fusion = fusion or _fusion(segments, i - 2, nwires, tiling, cache, -1.0, high_pass=done)
    return fusion if fusion is not None and fusion.block.param is not None else None


def _fused_adjoint(
    segments: list[Segment],
    i: int,
    fusion: Fusion,
    phi: np.ndarray,
    lam: np.ndarray,
    nwires: int,
    tiling: Tiling,
    cache: DiagonalCache | None,
    traffic: Traffic,
    grad: np.ndarray,
    first_needed: int,
    done: int | None,
) -> int:
    """The adjoint pass over layer i (kept: φ holds its input), the block before it and layer i - 2:
    layer i's passes on λ but ``done`` (undone, its moments taken) and the shared-tiling one, which is
    undone first, its moments left to one sweep that also takes the block's moments, undoes it, and
    takes and undoes layer i - 2's pass; or, when that is the only one left, undone by that sweep,
    its moments taken at the layer's input. Then φ is refilled with layer i - 2's input and its
    other passes run. Returns the next segment to undo."""
    high, block, low = segments[i], segments[i - 1], segments[i - 2]
    assert isinstance(high, ProductLayer) and isinstance(block, DiagonalBlock) and isinstance(low, ProductLayer)
    nthreads = K.threads()
    carried, p = fusion.high, fusion.low
    left = [k for k in range(len(_layer_passes(high, nwires, tiling))) if k not in (done, fusion.b)]
    carried_out = None
    if fusion.b == done:  # its moments taken: nothing of layer i is left to the sweep
        _layer_adjoint_lambda(high, phi, lam, nwires, tiling, traffic, grad, skip=done)
        carried_args: tuple = NO_CARRIED
    elif not left:  # the sweep undoes the last pass of layer i on λ, its moments after
        carried_out = np.zeros((nthreads, len(carried.params)))
        carried_args = (carried.tile_bits, carried.generators, carried_out, _inverses(carried.mats))
    else:  # undone first, the sweep takes its moments
        carried_out, _ = _layer_adjoint_lambda(high, phi, lam, nwires, tiling, traffic, grad, first=fusion.b, skip=done)
        carried_args = (carried.tile_bits, carried.generators, carried_out, carried.mats[:0])
    out, sums = np.zeros((nthreads, len(p.params))), np.zeros((nthreads, 2))
    _adjoint_sweep(
        p,
        phi,
        lam,
        out,
        (True, True, False, True),
        K.DIAGONAL_AT_OUTPUT,
        (fusion.block.values, fusion.block.phases, sums),
        carried_args,
        _source_tables(None, p, nwires, lam),
    )
    traffic.add(phi.size, states=3, values=fusion.block.values.itemsize)
    if carried_out is not None:
        _add_moments(grad, carried, carried_out)
    _add_moments(grad, p, out)
    _add_block_moments(grad, block, fusion.block, sums)
    source = _product_source(segments[: i - 2], nwires, cache)  # layer i - 2's input, computed where needed
    if source is None:
        forward(segments[: i - 2], nwires, phi, cache, traffic, tiling=tiling)  # or written into φ
    at_input = _block_at_input(segments, i - 2, first_needed, nwires, cache)
    _, took_block = _layer_adjoint_lambda(
        low, phi, lam, nwires, tiling, traffic, grad, source=source, skip=fusion.a, at_input=at_input
    )
    following = i - 4 if took_block else i - 3
    if source is not None and following >= first_needed:
        forward(segments[: i - 2], nwires, phi, cache, traffic, tiling=tiling)  # segments before it read φ
    return following


def _cheap_prefix(prefix: list[Segment]) -> bool:
    """Whether running ``prefix`` from |0⟩ costs less than undoing a product layer on φ: an initial
    product state and at most one diagonal block (QAOA's |+⟩ and first cost layer)."""
    return len(prefix) <= 2 and all(
        isinstance(seg, DiagonalBlock) or (j == 0 and isinstance(seg, ProductLayer)) for j, seg in enumerate(prefix)
    )


def _diagonal_adjoint(
    seg: DiagonalBlock,
    phi: np.ndarray,
    lam: np.ndarray,
    nwires: int,
    cache: DiagonalCache | None,
    traffic: Traffic,
    grad: np.ndarray,
    undo: bool,
) -> None:
    nthreads = K.threads()
    masks, coefs = np.array(seg.masks, dtype=np.int64), np.array(seg.coefs)
    t = split_tables(masks, coefs, nwires)
    rowsum = np.zeros(phi.size >> t.low_bits)
    moments = np.zeros((nthreads, 1 + t.gmask.size, 1 << t.low_bits))
    if by_level := _by_level(seg, nwires, cache, -1.0):
        K.diag_adjoint_levels(
            phi, lam, by_level.values, *_cast(phi, by_level.phases), t.low_bits, t.gmask, rowsum, moments, nthreads, undo
        )
        traffic.add(phi.size, states=4 if undo else 2, values=by_level.values.itemsize)
    else:
        phase_a, phase_c = _phase_tables(t, -1.0)
        K.diag_adjoint_tables(phi, lam, t.low_bits, phase_a, t.bmask, t.bcoef, t.gmask, phase_c, rowsum, moments, nthreads, undo)
        traffic.add(phi.size, states=4 if undo else 2)
    m = moments.sum(axis=0)  # row 0: Σ over the chunks of q[lo]; row 1 + g: of z(hi & gmask[g]) q[lo]
    params, alphas = np.array(seg.params, dtype=np.int64), np.array(seg.alphas, dtype=float)
    wanted = (params >= 0) & (alphas != 0.0)
    kind, group, masks = t.kind[wanted], t.group[wanted], masks[wanted]
    moment = np.zeros(masks.size)
    low = (kind == 1) | (kind == 3)  # moments from the low-bit table of each term's low mask
    rows = np.where(kind == 3, 1 + group, 0)[low]
    moment[low] = np.einsum("tl,tl->t", m[rows], _z_table(masks[low] & ((1 << t.low_bits) - 1), t.low_bits))
    moment[kind == 0] = m[0].sum()
    high = kind == 2  # high bits only: from the per-chunk sums
    moment[high] = _z_table(masks[high] >> t.low_bits, nwires - t.low_bits) @ rowsum
    np.add.at(grad, params[wanted], -2.0 * alphas[wanted] * moment)


def _inverses(mats: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.conj(np.transpose(mats, (0, 2, 1))))


def _layer_adjoint(
    seg: ProductLayer,
    phi: np.ndarray,
    lam: np.ndarray,
    nwires: int,
    tiling: Tiling,
    traffic: Traffic,
    grad: np.ndarray,
    undo: bool,
    skip: int | tuple[int | None, ...] | None = None,
) -> None:
    """Moments of the layer's gates, undoing it on φ and λ (unless ``undo`` is False); ``skip``: passes done elsewhere."""
    skipped = skip if isinstance(skip, tuple) else (skip,)
    for k, p in enumerate(_layer_passes(seg, nwires, tiling)):
        if k not in skipped:
            _pass_adjoint(p, phi, lam, traffic, grad, undo)


NO_BLOCK = (np.empty(0, dtype=np.uint16), np.empty(0, dtype=complex), np.empty((0, 2)))


def _pass_adjoint(
    p: Pass,
    phi: np.ndarray,
    lam: np.ndarray,
    traffic: Traffic,
    grad: np.ndarray,
    undo: bool,
    after: tuple[SweepBlock, Pass] | None = None,
) -> np.ndarray | None:
    """``kernels.layer_adjoint`` over pass ``p``; ``after``: the diagonal block after the layer and the next layer's pass
    of this tiling, undone first in the same sweep (their moments added; the block's sums returned)."""
    nthreads = K.threads()
    out = np.zeros((nthreads, len(p.params)))
    block, carried = NO_BLOCK, NO_CARRIED
    if after is not None:
        swept, q = after
        block = (swept.values, swept.phases, np.zeros((nthreads, 2)))
        carried = (q.tile_bits, q.generators, np.zeros((nthreads, len(q.params))), _inverses(q.mats))
    levels, phases, sums = block
    bits, generators, carried_out, carried_inverses = carried
    K.layer_adjoint(
        phi,
        lam,
        *p.tiling(),
        *_cast(phi, _inverses(p.mats)),
        p.tile_bits,
        p.generators,
        out,
        nthreads,
        undo,
        (levels, *_cast(phi, phases), sums),
        (bits, generators, carried_out, *_cast(phi, carried_inverses)),
    )
    traffic.add(phi.size, states=4 if undo else 2, values=levels.itemsize if after is not None else 0)
    if after is not None:
        _add_moments(grad, after[1], carried_out)
    _add_moments(grad, p, out)
    return sums if after is not None else None


def _both_fusion(
    segments: list[Segment],
    i: int,
    first_needed: int,
    nwires: int,
    tiling: Tiling,
    cache: DiagonalCache | None,
    done: int | None = None,
) -> Fusion | None:
    """The fusion of layer i - 2, the block and layer i for an adjoint pass that undoes all three on φ and λ,
    when the block's moments follow from a sweep's sums (or it has no parameter); ``done``: a pass of layer i
    already undone (by the fusion after it), which this one cannot take."""
    if i - 2 < first_needed:
        return None
    layer = segments[i]
    if not isinstance(layer, ProductLayer):
        return None
    for b in range(len(_layer_passes(layer, nwires, tiling))):
        if b != done and (fusion := _fusion(segments, i - 2, nwires, tiling, cache, -1.0, high_pass=b)) is not None:
            return fusion if fusion.block.param is not None else None
    return None


def _fused_layer_adjoint(
    segments: list[Segment],
    i: int,
    fusion: Fusion,
    phi: np.ndarray,
    lam: np.ndarray,
    nwires: int,
    tiling: Tiling,
    traffic: Traffic,
    grad: np.ndarray,
    undo_low: bool,
    done: int | None = None,
) -> int | None:
    """The adjoint pass over layer i, the block before it and layer i - 2, on φ and λ: layer i's passes but the
    shared-tiling one (and ``done``, undone already), then one sweep that undoes that pass, the block and layer
    i - 2's pass of the tiling (a layer's gates commute: its passes' moments hold wherever the others stand).
    Returns that pass when layer i - 2 has others, left to the next segment's step (the next such sweep, in a
    chain through the layers), else None."""
    high, block, low = segments[i], segments[i - 1], segments[i - 2]
    assert isinstance(high, ProductLayer) and isinstance(block, DiagonalBlock) and isinstance(low, ProductLayer)
    _layer_adjoint(high, phi, lam, nwires, tiling, traffic, grad, True, skip=(fusion.b, done))
    others = len(_layer_passes(low, nwires, tiling)) > 1
    sums = _pass_adjoint(fusion.low, phi, lam, traffic, grad, undo_low or others, after=(fusion.block, fusion.high))
    assert sums is not None
    _add_block_moments(grad, block, fusion.block, sums)
    return fusion.a if others else None


def _layer_adjoint_lambda(
    seg: ProductLayer,
    phi: np.ndarray,
    lam: np.ndarray,
    nwires: int,
    tiling: Tiling,
    traffic: Traffic,
    grad: np.ndarray,
    refill: Callable[[np.ndarray], object] | None = None,
    source: ProductSource | None = None,
    first: int | None = None,
    skip: int | None = None,
    at_input: tuple[DiagonalBlock, SweepBlock] | None = None,
) -> tuple[np.ndarray | None, bool]:
    """Moments of the layer's gates, undoing it on λ alone: a third fewer butterflies than with φ.
    φ holds the layer's input; or (``refill``) its output, and refill(φ) writes the input there once
    the first pass has taken its moments. ``source``: the layer's input is that product state, which
    the kernels compute where they need it (refill is not called; φ at the input is not read).
    Moments are taken where φ and λ are at the same place: the first pass's at the output, the last
    pass's at the input, any others' in an extra read; a lone pass's at the input when ``source`` computes it.

    ``first``: a pass undone first whose moments are left to the caller (returned, per thread);
    ``skip``: a pass already undone, its moments taken; ``at_input``: (block, SweepBlock) of a
    diagonal block right before the layer, the first with parameters: its moments are taken in the
    last pass, at the layer's input (returns True then)."""
    nthreads = K.threads()
    passes = _layer_passes(seg, nwires, tiling)
    outs = [np.zeros((nthreads, len(p.params))) for p in passes]
    sums = np.zeros((nthreads, 2))

    def run(k: int, before: bool, undo: bool, after: bool, block: bool) -> None:
        p = passes[k]
        no_block = (np.empty(0, dtype=np.uint16), np.empty(0, dtype=complex))  # the phases: unused at the input
        levels, phases = (at_input[1].values, at_input[1].phases[:0]) if block and at_input else no_block
        diagonal = K.DIAGONAL_AT_INPUT if block else K.NO_DIAGONAL
        write = undo and not block  # after the block's moments nothing reads λ
        computed = source is not None and not before  # φ at the input, computed
        tables = _source_tables(source if computed else None, p, nwires, lam)
        _adjoint_sweep(
            p,
            phi,
            lam,
            outs[k],
            (before, undo, after, write),
            diagonal,
            (levels, phases, sums),
            NO_CARRIED,
            tables,
        )
        reads_phi = before or after or block
        # levels: the block's, which are also the computed input's (its prefix ends with that block)
        levels_read = block or (reads_phi and computed and source is not None and source.levels.size > 0)
        values = (levels.itemsize if block else source.levels.itemsize if source is not None else 0) if levels_read else 0
        traffic.add(phi.size, states=1 + (reads_phi and not computed) + write, values=values)

    others = [k for k in reversed(range(len(passes))) if k not in (first, skip)]  # undoing runs the passes backwards
    order = ([first] if first is not None else []) + others
    calls = []  # (pass, before, undo, after)
    at_output = refill is not None and not (source is not None and len(order) == 1)  # one pass: at the computed input
    for position, k in enumerate(order):
        before = at_output and position == 0
        calls.append((k, before, True, position == len(order) - 1 and not before and k != first))
    taken = {k for k, before, _, after in calls if before or after} | {k for k in (first, skip) if k is not None}
    calls += [(k, False, False, True) for k in range(len(passes)) if k not in taken]
    took_block = at_input is not None and bool(calls) and calls[-1][3]  # the last call reads φ and λ at the input
    for position, (k, before, undo, after) in enumerate(calls):
        run(k, before, undo, after, took_block and position == len(calls) - 1)
        if before and refill is not None and source is None:
            refill(phi)
    for k, (p, out) in enumerate(zip(passes, outs, strict=True)):
        if k not in (first, skip):
            _add_moments(grad, p, out)
    if took_block and at_input:
        _add_block_moments(grad, at_input[0], at_input[1], sums)
    return (outs[first] if first is not None else None), took_block


def _adjoint_sweep(
    p: Pass,
    phi: np.ndarray,
    lam: np.ndarray,
    out: np.ndarray,
    flags: tuple[bool, bool, bool, bool],
    diagonal: int,
    block: tuple,
    carried: tuple,
    source: tuple,
) -> None:
    """``kernels.layer_adjoint_lambda`` over pass ``p``; flags: before, undo, after, write; ``out`` has a row per thread."""
    levels, phases, sums = block
    carried_bits, carried_generators, carried_out, carried_inverses = carried
    K.layer_adjoint_lambda(
        phi,
        lam,
        *p.tiling(),
        *_cast(lam, _inverses(p.mats)),
        p.tile_bits,
        p.generators,
        out,
        out.shape[0],
        *flags,
        diagonal,
        (levels, *_cast(lam, phases), sums),
        (carried_bits, carried_generators, carried_out, *_cast(lam, carried_inverses)),
        source,
    )


def _cast(state: np.ndarray, *tables: np.ndarray) -> tuple[np.ndarray, ...]:
    """Complex tables (gates, phases, product vectors) in the state's precision: complex64 tiles are
    then worked on in float32 throughout."""
    return tuple(t.astype(state.dtype) if t.dtype.kind == "c" and t.dtype != state.dtype else t for t in tables)


def _add_moments(grad: np.ndarray, p: Pass, out: np.ndarray) -> None:
    for i, (param, scale) in enumerate(zip(p.params, p.scales, strict=True)):
        if param >= 0:
            grad[param] += scale * out[:, i].sum()
