"""Numba kernels of the fused simulator. The state is split as k = (hi, lo) with ``lo`` the ``L`` low bits.

Diagonal blocks: angle(k) = A[lo] + Σ_j bcoef_j z(hi & bmask_j) + Σ_g z(hi & gmask_g) C[g, lo], where
z(x) = (-1)^popcount(x). One pass applies exp(i·sign·angle) to the state (and to λ in the adjoint pass),
as a product of precomputed phase tables, without trigonometry per amplitude. Inside the sweeps of the
product layers around it a block is applied by level (its angle takes few values, an unweighted cut:
a table indexed by each amplitude's level) or by angle (a weighted cut: from a kept diagonal, with a
polynomial exp(i·x) that vectorises).
Product layers: single-qubit gates on distinct wires, tile by tile in split real/imaginary buffers.
Kernels are compiled on first use and cached on disk where that is safe (``simbase.cachedir``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..simbase.cachedir import kernel_cache
from ..simbase.threads import import_numba
from . import lanes
from .lanes import (
    gate_lanes,
    join_lanes,
    join_transposed_lanes,
    level_sums_lanes,
    phase_by_level_lanes,
    rx_lanes,
    rx_pair_lanes,
    rx_pair_scaled_lanes,
    split_lanes,
    split_transposed_lanes,
    store_fence,
    stream_lanes,
    stream_transposed_lanes,
    x_moment_lanes,
    x_moment_pair_sweep,
    y_moment_lanes,
)

numba = import_numba()  # a NUMBA_NUM_THREADS numba refuses is a typed error
prange = numba.prange
CACHE = kernel_cache(Path(__file__))  # decided before the first kernel: where it is cached, or not at all
njit = CACHE.njit  # numba.njit, with caching as CACHE decided

DIAG_LOW_BITS = 11  # diagonal blocks: low-bit tables of 2^L entries
LOW_BITS = 11  # product states: runs of 2048 amplitudes
SPECTATORS = 3  # the first pass of a product layer: ungated bits at the bottom of its tiles
TILE_BITS = 15  # ... and the tile of every pass: 2^15 amplitudes; the adjoint holds four split buffers, 1 MiB (L2)
MAX_TILE_BITS = 19  # above 24 wires tiles grow (engine.tile_bits) rather than a layer take a third pass over the state
TRANSPOSE_BYTES = 16384  # transposed tiles (contiguous: a first pass's) are moved 16 KiB at a time, through L1
PAIR_MIN_BIT = lanes.LANES.bit_length() - 1  # gates on bits below pair badly: runs shorter than a vector
LANES = np.uint64(lanes.LANES)  # amplitudes a vector instruction takes, as the kernels' index type
STREAM_BYTES = 1 << 26  # states of 64 MiB and more are stored past the caches (_streams; 16 MiB ones ran slower so)
MIN_RUN_BITS = 6  # later passes gather runs of at least 64 amplitudes (and hold the spectators)


@njit(inline="always")
def parity(x):
    x ^= x >> 32
    x ^= x >> 16
    x ^= x >> 8
    x ^= x >> 4
    x ^= x >> 2
    x ^= x >> 1
    return x & 1


@njit(inline="always")
def zsign(x):
    return 1.0 - 2.0 * parity(x)


@njit(inline="always")
def _tiles_of_thread(t, tiles, nthreads):
    """The chunks (tiles) thread t of nthreads takes: [first, last)."""
    per = (tiles + nthreads - 1) // nthreads
    return t * per, min(tiles, (t + 1) * per)


@njit()
def _chunk_angles(hi, low_bits, table_a, bmask, bcoef, gmask, table_c, out):
    base = 0.0
    for j in range(bmask.size):
        base += bcoef[j] * zsign(hi & bmask[j])
    size = 1 << low_bits
    for lo in range(size):
        out[lo] = table_a[lo] + base
    for g in range(gmask.size):
        s = zsign(hi & gmask[g])
        for lo in range(size):
            out[lo] += s * table_c[g, lo]


@njit(inline="always")
def _chunk_phases(hi, low_bits, phase_a, bmask, bcoef, gmask, phase_c, sign, re, im):
    """(re, im) = exp(i·sign·angle(hi, lo)) for the chunk ``hi``, without trigonometry per amplitude:
    phase_a[p, lo] = exp(i·sign·A[lo]) and phase_c[g, ±, p, lo] = exp(±i·sign·C[g, lo]) (p: real,
    imaginary part) are multiplied in, one vectorised sweep per group; the high-only terms are one
    scalar phase per chunk."""
    base = 0.0
    for j in range(bmask.size):
        base += bcoef[j] * zsign(hi & bmask[j])
    br, bi = np.cos(sign * base), np.sin(sign * base)
    size = np.uint64(1) << np.uint64(low_bits)
    for lo in range(size):
        ar, ai = phase_a[0, lo], phase_a[1, lo]
        re[lo] = ar * br - ai * bi
        im[lo] = ar * bi + ai * br
    for g in range(gmask.size):
        table = phase_c[g, 0 if zsign(hi & gmask[g]) > 0 else 1]
        for lo in range(size):
            xr, xi, cr, ci = re[lo], im[lo], table[0, lo], table[1, lo]
            re[lo] = xr * cr - xi * ci
            im[lo] = xr * ci + xi * cr


@njit(parallel=True, fastmath=True)
def diag_phase_tables(psi, low_bits, phase_a, bmask, bcoef, gmask, phase_c, sign):
    """psi[k] *= exp(i·sign·angle(k)): a whole block of commuting diagonal gates in one pass, from phase tables."""
    size = 1 << low_bits
    for hi in prange(psi.size >> low_bits):
        re = np.empty(size)
        im = np.empty(size)
        _chunk_phases(hi, low_bits, phase_a, bmask, bcoef, gmask, phase_c, sign, re, im)
        off = hi * size
        for lo in range(size):
            psi[off + lo] *= complex(re[lo], im[lo])


@njit(parallel=True, fastmath=True)
def diag_adjoint_tables(phi, lam, low_bits, phase_a, bmask, bcoef, gmask, phase_c, rowsum, moments, nthreads, undo):
    """One adjoint pass over a diagonal block.

    With q(k) = Im(conj(λ_k) φ_k) at the point after the block, accumulates
    rowsum[hi] = Σ_lo q, moments[t, 0, lo] = Σ_hi q, moments[t, 1+g, lo] = Σ_hi z(hi & gmask_g) q
    (one slice per thread t), then, if ``undo``, undoes the block on φ and λ (tables built for sign -1).
    """
    size = 1 << low_bits
    for t in prange(nthreads):
        re = np.empty(size)
        im = np.empty(size)
        q = np.empty(size)
        first, last = _tiles_of_thread(t, phi.size >> low_bits, nthreads)
        for hi in range(first, last):
            _chunk_phases(hi, low_bits, phase_a, bmask, bcoef, gmask, phase_c, -1.0, re, im)
            off = hi * size
            for lo in range(size):
                p, lm = phi[off + lo], lam[off + lo]
                q[lo] = lm.real * p.imag - lm.imag * p.real
                if undo:
                    phase = complex(re[lo], im[lo])
                    phi[off + lo] = p * phase
                    lam[off + lo] = lm * phase
            rowsum[hi] = _accumulate_moments(q, hi, gmask, moments, t)


@njit(parallel=True)
def diag_values(out, low_bits, table_a, bmask, bcoef, gmask, table_c):
    """out[k] = angle(k): the diagonal of a sum of Z products (an observable or a block's generator)."""
    size = 1 << low_bits
    for hi in prange(out.size >> low_bits):
        _chunk_angles(hi, low_bits, table_a, bmask, bcoef, gmask, table_c, out[hi * size : (hi + 1) * size])


@njit(inline="always")
def _accumulate_moments(q, hi, gmask, moments, t):
    """moments[t, 0] += q, moments[t, 1+g] += z(hi & gmask_g) q; returns Σ q (vectorised rows)."""
    size = np.uint64(q.size)
    total = 0.0
    row = moments[t, 0]
    for lo in range(size):
        total += q[lo]
        row[lo] += q[lo]
    for g in range(gmask.size):
        sign = zsign(hi & gmask[g])
        row = moments[t, 1 + g]
        for lo in range(size):
            row[lo] += sign * q[lo]
    return total


@njit(parallel=True)
def diag_levels(out, low_bits, table_a, bmask, bcoef, gmask, table_c, offset):
    """out[k] = angle(k) + offset as an integer: with coefficients -1/2 and offset T/2, the number of
    the T masks with odd parity at k (an unweighted cut's size)."""
    size = 1 << low_bits
    for hi in prange(out.size >> low_bits):
        angles = np.empty(size)
        _chunk_angles(hi, low_bits, table_a, bmask, bcoef, gmask, table_c, angles)
        off = hi * size
        for lo in range(size):
            out[off + lo] = np.uint16(angles[lo] + offset + 0.5)


@njit(parallel=True)
def phase_by_level(psi, levels, table):
    """psi[k] *= table[levels[k]]: a diagonal block whose angle takes few values, without trigonometry."""
    for k in prange(psi.size):
        psi[k] *= table[levels[k]]


@njit(parallel=True, fastmath=True)
def diag_adjoint_levels(phi, lam, levels, table, low_bits, gmask, rowsum, moments, nthreads, undo):
    """diag_adjoint_tables for a block applied by level: the undo multiplies by table[levels[k]]."""
    size = 1 << low_bits
    for t in prange(nthreads):
        q = np.empty(size)
        first, last = _tiles_of_thread(t, phi.size >> low_bits, nthreads)
        for hi in range(first, last):
            off = hi * size
            for lo in range(size):
                p, lm = phi[off + lo], lam[off + lo]
                q[lo] = lm.real * p.imag - lm.imag * p.real
                if undo:
                    phase = table[levels[off + lo]]
                    phi[off + lo] = p * phase
                    lam[off + lo] = lm * phase
            rowsum[hi] = _accumulate_moments(q, hi, gmask, moments, t)


@njit(parallel=True)
def product_state(psi, low_bits, low_vectors, high_vectors, levels, phases):
    """psi = ⊗ single-qubit states: low_vectors[b] / high_vectors[b] are the (2,) vectors of bit b;
    then, unless ``levels`` is empty, a diagonal block's phases (``_phase_tile``), in the same pass."""
    size = 1 << low_bits
    table = np.ones(size, dtype=np.complex128)
    for lo in range(size):
        for b in range(low_bits):
            table[lo] *= low_vectors[b, (lo >> b) & 1]
    for hi in prange(psi.size >> low_bits):
        factor = complex(1.0, 0.0)
        for b in range(high_vectors.shape[0]):
            factor *= high_vectors[b, (hi >> b) & 1]
        off = hi * size
        if levels.size:  # the block's phases on split buffers (_phase_tile), then written back
            re = np.empty(size, dtype=psi.real.dtype)
            im = np.empty(size, dtype=psi.real.dtype)
            for lo in range(size):
                v = factor * table[lo]
                re[lo] = v.real
                im[lo] = v.imag
            _phase_tile(re, im, levels[off : off + size], phases)
            for lo in range(size):
                psi[off + lo] = complex(re[lo], im[lo])
        else:
            for lo in range(size):
                psi[off + lo] = factor * table[lo]


@njit(inline="always")
def _tile_base(tile, rest_bits):
    """Global index of a tile's first amplitude: the tile's number spread over its rest bits."""
    index = np.uint64(0)
    for i in range(rest_bits.size):
        index |= np.uint64((tile >> i) & 1) << np.uint64(rest_bits[i])
    return index


@njit(inline="always")
def _run_offsets(high_bits):
    """Each run's first amplitude less its tile's (one run per value of the high bits): the same for every tile."""
    offsets = np.zeros(1 << high_bits.size, dtype=np.uint64)
    for run in range(offsets.size):
        for i in range(high_bits.size):
            offsets[run] |= np.uint64((run >> i) & 1) << np.uint64(high_bits[i])
    return offsets


# The tile kernels index with unsigned integers: numba then drops its negative-index handling and
# LLVM vectorises the loops (about 3x faster than signed indices on split buffers). The per-tile
# helpers are compiled once, not inlined into every kernel: inlined, the kernels ran about a tenth
# faster but took 165 s instead of 45 s to compile on two cores.


@njit(inline="always")
def _transpose_block(runs, size, itemsize):
    """Runs a transposed tile moves per block: TRANSPOSE_BYTES of them (at least one run)."""
    return min(runs, max(np.uint64(1), np.uint64(TRANSPOSE_BYTES) // (size * np.uint64(itemsize))))


@njit(inline="always")
def _split_buffers(state, width):
    """Four tile buffers (φ and λ, real and imaginary parts) in the state's real precision:
    complex64 states are worked on in float32, twice the numbers per vector instruction."""
    real = state.real.dtype
    return np.empty(width, dtype=real), np.empty(width, dtype=real), np.empty(width, dtype=real), np.empty(width, dtype=real)


@njit()
def _gather(re, im, psi, base, offsets, run_bits, transposed):
    """Copy a tile of psi (its first amplitude ``base``, its runs' ``offsets``: ``_run_offsets``) into
    split real and imaginary buffers (the butterflies then vectorise); ``transposed``: the high bits
    are the tile's lowest bits."""
    size = np.uint64(1) << np.uint64(run_bits)
    runs = np.uint64(offsets.size)
    if transposed:  # the runs follow each other: a block of them (in L1) is read once per run offset j
        block = _transpose_block(runs, size, psi.itemsize)
        if size >= LANES and block >= LANES:  # LANES x LANES blocks transposed in registers
            for first in range(np.uint64(0), runs, block):
                start = base + offsets[first]
                for r in range(np.uint64(0), block, LANES):
                    for j in range(np.uint64(0), size, LANES):
                        split_transposed_lanes(re, im, j * runs + first + r, runs, psi, start + r * size + j, size)
            return
        for first in range(np.uint64(0), runs, block):
            start = base + offsets[first]
            for j in range(size):
                row = j * runs + first
                for run in range(block):
                    p = psi[start + run * size + j]
                    re[row + run] = p.real
                    im[row + run] = p.imag
        return
    for run in range(runs):
        start, row = base + offsets[run], run * size
        if size >= LANES:
            for j in range(np.uint64(0), size, LANES):
                split_lanes(re, im, row + j, psi, start + j)
            continue
        for j in range(size):
            p = psi[start + j]
            re[row + j] = p.real
            im[row + j] = p.imag


@njit(inline="always")
def _streams(psi):
    """Whether stores into psi go past the caches (``lanes.stream_lanes``): a state of STREAM_BYTES or
    more (it is read back from memory anyway, and a cached store first reads each line it writes),
    at an address STREAM_ALIGN-aligned (``engine.state_buffer``)."""
    return psi.size * psi.itemsize >= STREAM_BYTES and psi.ctypes.data % lanes.STREAM_ALIGN == 0


@njit()
def _scatter(re, im, psi, base, offsets, run_bits, transposed):
    size = np.uint64(1) << np.uint64(run_bits)
    runs = np.uint64(offsets.size)
    streaming = _streams(psi) and (base | offsets[-1]) % LANES == 0  # every run starts on a whole vector
    if transposed:  # as in _gather, backwards
        block = _transpose_block(runs, size, psi.itemsize)
        if size >= LANES and block >= LANES:
            for first in range(np.uint64(0), runs, block):
                start = base + offsets[first]
                for r in range(np.uint64(0), block, LANES):
                    for j in range(np.uint64(0), size, LANES):
                        if streaming:
                            stream_transposed_lanes(re, im, j * runs + first + r, runs, psi, start + r * size + j, size)
                        else:
                            join_transposed_lanes(re, im, j * runs + first + r, runs, psi, start + r * size + j, size)
            if streaming:
                store_fence()
            return
        for first in range(np.uint64(0), runs, block):
            start = base + offsets[first]
            for j in range(size):
                row = j * runs + first
                for run in range(block):
                    psi[start + run * size + j] = complex(re[row + run], im[row + run])
        return
    for run in range(runs):
        start, row = base + offsets[run], run * size
        if size >= LANES:
            for j in range(np.uint64(0), size, LANES):
                if streaming:
                    stream_lanes(re, im, row + j, psi, start + j)
                else:
                    join_lanes(re, im, row + j, psi, start + j)
            continue
        for j in range(size):
            psi[start + j] = complex(re[row + j], im[row + j])
    if streaming and size >= LANES:
        store_fence()


@njit(inline="always")
def _is_rx_shaped(m):
    return m[0, 0].imag == 0.0 and m[0, 1].real == 0.0 and m[1, 0].real == 0.0 and m[0, 0] == m[1, 1] and m[0, 1] == m[1, 0]


@njit(inline="always")
def _apply_2x2(re, im, bit, m, scale=1.0):
    """Buffers ← scale·U buffers on ``bit``; an RX-shaped U (real diagonal, imaginary off-diagonal) takes half the multiplies."""
    step = np.uint64(1) << np.uint64(bit)
    size = np.uint64(re.size)
    base = np.uint64(0)
    if step >= LANES:  # runs of whole vectors
        if _is_rx_shaped(m):
            c, s = scale * m[0, 0].real, scale * m[0, 1].imag
            while base < size:
                for j in range(base, base + step, LANES):
                    rx_lanes(re, im, j, j + step, c, s)
                base += step + step
            return
        entries = (
            scale * m[0, 0].real, scale * m[0, 0].imag, scale * m[0, 1].real, scale * m[0, 1].imag,
            scale * m[1, 0].real, scale * m[1, 0].imag, scale * m[1, 1].real, scale * m[1, 1].imag,
        )  # fmt: skip
        while base < size:
            for j in range(base, base + step, LANES):
                gate_lanes(re, im, j, j + step, entries)
            base += step + step
        return
    if _is_rx_shaped(m):  # U = [[c, is], [is, c]]
        c, s = scale * m[0, 0].real, scale * m[0, 1].imag
        while base < size:
            for j in range(base, base + step):
                k = j + step
                xr, xi, yr, yi = re[j], im[j], re[k], im[k]
                re[j] = c * xr - s * yi
                im[j] = c * xi + s * yr
                re[k] = c * yr - s * xi
                im[k] = c * yi + s * xr
            base += step + step
        return
    m0, m1, m2, m3 = scale * m[0, 0].real, scale * m[0, 0].imag, scale * m[0, 1].real, scale * m[0, 1].imag
    m4, m5, m6, m7 = scale * m[1, 0].real, scale * m[1, 0].imag, scale * m[1, 1].real, scale * m[1, 1].imag
    while base < size:
        for j in range(base, base + step):
            k = j + step
            xr, xi, yr, yi = re[j], im[j], re[k], im[k]
            re[j] = m0 * xr - m1 * xi + m2 * yr - m3 * yi
            im[j] = m0 * xi + m1 * xr + m2 * yi + m3 * yr
            re[k] = m4 * xr - m5 * xi + m6 * yr - m7 * yi
            im[k] = m4 * xi + m5 * xr + m6 * yi + m7 * yr
        base += step + step


@njit(inline="always")
def _undo_with_moment(pre, pim, lre, lim, bit, inverse, generator):
    """φ, λ ← U† φ, U† λ on ``bit``; returns Im⟨λ|P|φ⟩ for P = X (1) or Y (2), taken before undoing
    (P commutes with U); 0 for a gate without a parameter (0)."""
    if generator == 1 and _is_rx_shaped(inverse):
        step = np.uint64(1) << np.uint64(bit)
        size = np.uint64(pre.size)
        acc = 0.0
        base = np.uint64(0)  # RX: moment and both undos in one sweep
        c, s = inverse[0, 0].real, inverse[0, 1].imag
        if step >= LANES:
            while base < size:
                for j in range(base, base + step, LANES):
                    acc += x_moment_lanes(pre, pim, lre, lim, j, j + step)
                    rx_lanes(pre, pim, j, j + step, c, s)
                    rx_lanes(lre, lim, j, j + step, c, s)
                base += step + step
            return acc
        while base < size:
            for j in range(base, base + step):
                k = j + step
                ar, ai, br, bi = pre[j], pim[j], pre[k], pim[k]
                xr, xi, yr, yi = lre[j], lim[j], lre[k], lim[k]
                acc += (xr * bi - xi * br) + (yr * ai - yi * ar)
                pre[j] = c * ar - s * bi
                pim[j] = c * ai + s * br
                pre[k] = c * br - s * ai
                pim[k] = c * bi + s * ar
                lre[j] = c * xr - s * yi
                lim[j] = c * xi + s * yr
                lre[k] = c * yr - s * xi
                lim[k] = c * yi + s * xr
            base += step + step
        return acc
    acc = _moment(pre, pim, lre, lim, bit, generator)
    _apply_2x2(pre, pim, bit, inverse)
    _apply_2x2(lre, lim, bit, inverse)
    return acc


@njit(inline="always")
def _moment(pre, pim, lre, lim, bit, generator):
    """Im⟨λ|P|φ⟩ on ``bit`` for P = X (1) or Y (2); 0 for a gate without a parameter (0)."""
    step = np.uint64(1) << np.uint64(bit)
    size = np.uint64(pre.size)
    acc = 0.0
    base = np.uint64(0)
    if generator == 0:
        return acc
    if step >= LANES:
        while base < size:
            for j in range(base, base + step, LANES):
                acc += (
                    x_moment_lanes(pre, pim, lre, lim, j, j + step)
                    if generator == 1
                    else y_moment_lanes(pre, pim, lre, lim, j, j + step)
                )
            base += step + step
        return acc
    while base < size:
        if generator == 1:  # X φ = (φ_k, φ_j)
            for j in range(base, base + step):
                k = j + step
                acc += (lre[j] * pim[k] - lim[j] * pre[k]) + (lre[k] * pim[j] - lim[k] * pre[j])
        else:  # Y φ = (-i φ_k, i φ_j)
            for j in range(base, base + step):
                k = j + step
                acc += (lre[k] * pre[j] + lim[k] * pim[j]) - (lre[j] * pre[k] + lim[j] * pim[k])
        base += step + step
    return acc


SUBTILE_BYTES = 32768  # four split buffers of an L1-sized block: 2^10 amplitudes of float64, 2^11 of float32


@njit(inline="always")
def _subtile_bits(buffer):
    """An L1-sized block of split buffers like ``buffer`` holds 2^this amplitudes."""
    bits = 0
    while (4 * buffer.itemsize) << (bits + 1) <= SUBTILE_BYTES:
        bits += 1
    return bits


@njit(inline="always")
def _inner_count(tile_bits, buffer):
    """How many leading gates (sorted by tile bit) act inside an L1-sized block."""
    if buffer.size <= 1 << _subtile_bits(buffer):
        return tile_bits.size
    count = 0
    while count < tile_bits.size and tile_bits[count] < _subtile_bits(buffer):
        count += 1
    return count


@njit(inline="always")
def _quad_start(q0, step1, step2):
    """The first amplitude ``a`` of quadruple number ``q0`` (a multiple of step1): q0 with zero bits
    put in at the two gates' bits. Its quadruple is a, a + step1, a + step2, a + step1 + step2."""
    low = step1 - np.uint64(1)
    mid = (step2 >> np.uint64(1)) - np.uint64(1)
    return ((q0 & ~mid) << np.uint64(2)) | ((q0 & mid & ~low) << np.uint64(1))


@njit(inline="always")
def _apply_rx_pair(re, im, bit1, bit2, c1, s1, c2, s2):
    """Two RX-shaped gates [[c, i·s], [i·s, c]], on bits PAIR_MIN_BIT ≤ bit1 < bit2, in one sweep: each
    quadruple of amplitudes is loaded and stored once, not twice."""
    step1 = np.uint64(1) << np.uint64(bit1)
    step2 = np.uint64(1) << np.uint64(bit2)
    for q0 in range(np.uint64(0), np.uint64(re.size) >> np.uint64(2), step1):
        start = _quad_start(q0, step1, step2)
        for a in range(start, start + step1, LANES):
            rx_pair_lanes(re, im, a, a + step1, a + step2, a + step2 + step1, c1, s1, c2, s2)


@njit(inline="always")
def _scaled_rx(m):
    """An RX-shaped gate as factor·(its scaled form, ``lanes._scaled_rotate``): (k, unit diagonal, factor),
    the factor its larger entry's, so |k| ≤ 1 and a sweep of them grows no amplitude more than √2 a gate."""
    c, s = m[0, 0].real, m[0, 1].imag
    if abs(c) >= abs(s):
        return s / c, 1, c
    return c / s, 0, s


@njit(inline="always")
def _pairs_at(tile_bits, mats, i, last):
    """Whether gates i and i + 1 (< last) take one sweep: both RX-shaped, on runs long enough to vectorise."""
    return i + 1 < last and tile_bits[i] >= PAIR_MIN_BIT and _is_rx_shaped(mats[i]) and _is_rx_shaped(mats[i + 1])


@njit(inline="always")
def _apply_range(re, im, tile_bits, mats, first, last, factor):
    """Gates first..last-1 (on ascending bits), two RX-shaped ones per sweep where they follow each
    other (``_pairs_at``). The pairs are applied less their factors (a multiply-add a number, not two
    multiplies: c64 sweeps are bound by them), all but gate 0's, which is applied times ``factor``, the
    product of the others' (``_scaled_factor``)."""
    i = first
    while i < last:
        if _pairs_at(tile_bits, mats, i, last):
            if i == 0:
                m1, m2 = mats[0], mats[1]
                c1, s1 = factor * m1[0, 0].real, factor * m1[0, 1].imag
                _apply_rx_pair(re, im, tile_bits[0], tile_bits[1], c1, s1, m2[0, 0].real, m2[0, 1].imag)
            else:
                k1, unit1, _ = _scaled_rx(mats[i])
                k2, unit2, _ = _scaled_rx(mats[i + 1])
                _apply_scaled_pair(re, im, tile_bits[i], tile_bits[i + 1], k1, k2, unit1 | (unit2 << 1))
            i += 2
        else:
            _apply_2x2(re, im, tile_bits[i], mats[i], factor if i == 0 else 1.0)
            i += 1


@njit(inline="always")
def _apply_scaled_pair(re, im, bit1, bit2, k1, k2, form):
    """As _apply_rx_pair, both gates less their factors (``lanes.rx_pair_scaled_lanes``); bit1 ≥ PAIR_MIN_BIT."""
    step1 = np.uint64(1) << np.uint64(bit1)
    step2 = np.uint64(1) << np.uint64(bit2)
    for q0 in range(np.uint64(0), np.uint64(re.size) >> np.uint64(2), step1):
        start = _quad_start(q0, step1, step2)
        for a in range(start, start + step1, LANES):
            rx_pair_scaled_lanes(re, im, a, a + step1, a + step2, a + step2 + step1, k1, k2, form)


@njit(inline="always")
def _scaled_factor(tile_bits, mats, inner):
    """The product of the factors the scaled pairs of ``_apply_range`` leave out (pairs are formed
    within the gates on the low bits, 0..inner-1, and within the rest)."""
    factor = 1.0
    for first, last in ((0, inner), (inner, mats.shape[0])):
        i = first
        while i < last:
            if _pairs_at(tile_bits, mats, i, last):
                if i != 0:
                    factor *= _scaled_rx(mats[i])[2] * _scaled_rx(mats[i + 1])[2]
                i += 2
            else:
                i += 1
    return factor


@njit(fastmath=True)
def _apply_gates(re, im, tile_bits, mats):
    """All of a pass's gates on a tile: those on the low tile bits one L1-sized block at a time."""
    width = re.size
    inner = _inner_count(tile_bits, re)
    factor = _scaled_factor(tile_bits, mats, inner)
    subtile = 1 << _subtile_bits(re)
    for block in range(0, width, subtile):
        _apply_range(re[block : block + subtile], im[block : block + subtile], tile_bits, mats, 0, inner, factor)
    _apply_range(re, im, tile_bits, mats, inner, mats.shape[0], factor)


@njit(parallel=True, fastmath=True)
def layer_adjoint(phi, lam, run_bits, high_bits, rest_bits, transposed, inverses, tile_bits, generators, out, nthreads, undo):
    """One adjoint pass over a product layer: out[t, i] += Im⟨λ|P_i|φ⟩ (P = X for 1, Y for 2) and
    φ, λ ← U_i† φ, U_i† λ (``inverses[i]``) for every gate of the pass. The gates act on distinct
    wires and P_i commutes with U_i, so each moment may be taken before or after any undoing."""
    width = 1 << (run_bits + high_bits.size)
    offsets = _run_offsets(high_bits)
    for t in prange(nthreads):
        pre, pim, lre, lim = _split_buffers(phi, width)
        first, last = _tiles_of_thread(t, 1 << rest_bits.size, nthreads)
        for tile in range(first, last):
            base = _tile_base(tile, rest_bits)
            _gather(pre, pim, phi, base, offsets, run_bits, transposed)
            _gather(lre, lim, lam, base, offsets, run_bits, transposed)
            inner = _inner_count(tile_bits, pre)
            subtile = 1 << _subtile_bits(pre)
            for block in range(0, width, subtile):
                end = block + subtile
                a, b, c, d = pre[block:end], pim[block:end], lre[block:end], lim[block:end]
                for i in range(inner):
                    out[t, i] += _undo_with_moment(a, b, c, d, tile_bits[i], inverses[i], generators[i])
            for i in range(inner, inverses.shape[0]):
                out[t, i] += _undo_with_moment(pre, pim, lre, lim, tile_bits[i], inverses[i], generators[i])
            if undo:  # the last segment differentiated: moments only, φ and λ are not needed after it
                _scatter(pre, pim, phi, base, offsets, run_bits, transposed)
                _scatter(lre, lim, lam, base, offsets, run_bits, transposed)


@njit(inline="always")
def _x_moment_pair(pre, pim, lre, lim, bit1, bit2):
    """Im⟨λ|X|φ⟩ on bit1 and on bit2 (PAIR_MIN_BIT ≤ bit1 < bit2) in one sweep over the quadruples."""
    return x_moment_pair_sweep(pre, pim, lre, lim, np.uint64(1) << np.uint64(bit1), np.uint64(1) << np.uint64(bit2))


@njit(inline="always")
def _moments_range(pre, pim, lre, lim, tile_bits, generators, out, t, first, last):
    """out[t, i] += the moment of gate i, for gates first..last-1, two X moments per sweep where they follow each other."""
    i = first
    while i < last:
        if i + 1 < last and tile_bits[i] >= PAIR_MIN_BIT and generators[i] == 1 and generators[i + 1] == 1:
            m1, m2 = _x_moment_pair(pre, pim, lre, lim, tile_bits[i], tile_bits[i + 1])
            out[t, i] += m1
            out[t, i + 1] += m2
            i += 2
        else:
            out[t, i] += _moment(pre, pim, lre, lim, tile_bits[i], generators[i])
            i += 1


@njit(fastmath=True)
def _tile_moments(pre, pim, lre, lim, tile_bits, generators, out, t):
    width = pre.size
    inner = _inner_count(tile_bits, pre)
    subtile = 1 << _subtile_bits(pre)
    for block in range(0, width, subtile):
        end = block + subtile
        _moments_range(pre[block:end], pim[block:end], lre[block:end], lim[block:end], tile_bits, generators, out, t, 0, inner)
    _moments_range(pre, pim, lre, lim, tile_bits, generators, out, t, inner, tile_bits.size)


@njit()
def _tile_values(levels, base, offsets, run_bits, transposed, out):
    """out ← levels[k] (any per-amplitude array) of a tile's amplitudes, in the tile's order (as
    ``_gather`` lays them out); returns out."""
    size = np.uint64(1) << np.uint64(run_bits)
    runs = np.uint64(offsets.size)
    if transposed:  # blocked, as in _gather (the block's runs follow each other)
        block = _transpose_block(runs, size, levels.itemsize)
        for first in range(np.uint64(0), runs, block):
            start = base + offsets[first]
            for j in range(size):
                row = j * runs + first
                for run in range(block):
                    out[row + run] = levels[start + run * size + j]
    else:
        for run in range(runs):
            start, row = base + offsets[run], run * size
            for j in range(size):
                out[row + j] = levels[start + j]
    return out


# exp(i·x) without a library call, so that its loops vectorise: x = n·π/2 + r, |r| ≤ π/4 (π/2 in two
# parts, the first exact in n·PIO2_HI), then Taylor polynomials of r (the next terms are below 5e-17).
TWO_OVER_PI = 0.6366197723675814
PIO2_HI = 1.57079632673412561417e00
PIO2_LO = 6.07710050650619224932e-11
SIN_TAYLOR = (-1 / 6, 1 / 120, -1 / 5040, 1 / 362880, -1 / 39916800, 1 / 6227020800, -1 / 1307674368000)
COS_TAYLOR = (-1 / 2, 1 / 24, -1 / 720, 1 / 40320, -1 / 3628800, 1 / 479001600, -1 / 87178291200, 1 / 20922789888000)
S1, S2, S3, S4, S5, S6, S7 = SIN_TAYLOR
C1, C2, C3, C4, C5, C6, C7, C8 = COS_TAYLOR


# Every fast-math flag but reassociation, which would fold the two parts of π/2 into one.
@njit(fastmath={"contract", "nsz", "arcp", "ninf", "nnan"})
def _phase_tile_by_angle(re, im, tile_values, offset, slope):
    """Buffers *= exp(i·(offset + slope·value)) per amplitude, in float64 whatever the buffers' precision."""
    for t in range(np.uint64(re.size)):
        x = offset + slope * np.float64(tile_values[t])
        n = np.floor(x * TWO_OVER_PI + 0.5)
        r = (x - n * PIO2_HI) - n * PIO2_LO
        r2 = r * r
        s = r + r * r2 * (S1 + r2 * (S2 + r2 * (S3 + r2 * (S4 + r2 * (S5 + r2 * (S6 + r2 * S7))))))
        c = 1.0 + r2 * (C1 + r2 * (C2 + r2 * (C3 + r2 * (C4 + r2 * (C5 + r2 * (C6 + r2 * (C7 + r2 * C8)))))))
        q = np.int64(n) & 3  # exp(i·x) = i^q (c + i·s)
        odd = np.float64(q & 1)
        cos_sign = 1.0 - 2.0 * np.float64(((q + 1) >> 1) & 1)
        sin_sign = 1.0 - 2.0 * np.float64((q >> 1) & 1)
        pr = cos_sign * (c + odd * (s - c))
        pi = sin_sign * (s + odd * (c - s))
        xr, xi = np.float64(re[t]), np.float64(im[t])
        re[t] = xr * pr - xi * pi
        im[t] = xr * pi + xi * pr


def _phase_tile(re, im, tile_values, phases):
    """Buffers *= a diagonal block's phases on a gathered tile. By level (uint16 values: an unweighted
    cut): phases[level]. By angle (float values: a weighted cut's diagonal): exp(i·(phases[0] + phases[1]·value)),
    ``phases`` then two float64 numbers, the angle's offset and slope (``engine.sweep_block``)."""


@numba.extending.overload(_phase_tile)
def _phase_tile_for(re, im, tile_values, phases):
    if isinstance(tile_values.dtype, numba.types.Integer):

        def by_level(re, im, tile_values, phases):
            whole = np.uint64(re.size) - np.uint64(re.size) % LANES
            for t in range(np.uint64(0), whole, LANES):
                phase_by_level_lanes(re, im, t, tile_values, phases)
            for t in range(whole, np.uint64(re.size)):
                p = phases[tile_values[t]]
                xr, xi = re[t], im[t]
                re[t] = xr * p.real - xi * p.imag
                im[t] = xr * p.imag + xi * p.real

        return by_level

    def by_angle(re, im, tile_values, phases):
        _phase_tile_by_angle(re, im, tile_values, phases[0], phases[1])

    return by_angle


def _level_sums(pre, pim, lre, lim, tile_levels, sums, t):
    """sums[t] += (Σ q, Σ q·value) over a tile, q = Im(conj(λ) φ): a swept block's moments. By level
    (uint16 values) in vectors of float64 sums; by a diagonal's float values in LLVM's own loop (as
    fast in a step: 22 qubits weighted, in-process A/B)."""


@numba.extending.overload(_level_sums, jit_options={"fastmath": True})
def _level_sums_for(pre, pim, lre, lim, tile_levels, sums, t):
    by_level = isinstance(tile_levels.dtype, numba.types.Integer)

    def level_sums(pre, pim, lre, lim, tile_levels, sums, t):
        s0 = 0.0
        s1 = 0.0
        rest = np.uint64(0)
        if by_level:
            s0, s1 = level_sums_lanes(pre, pim, lre, lim, tile_levels)
            rest = np.uint64(pre.size) - np.uint64(pre.size) % LANES
        for k in range(rest, np.uint64(pre.size)):
            q = lre[k] * pim[k] - lim[k] * pre[k]
            s0 += q
            s1 += q * tile_levels[k]
        sums[t, 0] += s0
        sums[t, 1] += s1

    return level_sums


@njit(fastmath=True)
def _product_tile(re, im, tile, rest_bits, run_bits, transposed, source, tile_levels):
    """Write a tile of a product state times phases[level] (``source``: see ``engine._source_tables``):
    amplitude (run, j) = Π rest factors · high_table[run] · run_table[j] · phases[level], the tables
    as real and imaginary rows in the buffers' precision."""
    rest_vectors, high_table, run_table, _, phases = source
    factor = complex(1.0, 0.0)
    for i in range(rest_bits.size):
        factor *= rest_vectors[i, (tile >> i) & 1]
    outer, inner = (run_table, high_table) if transposed else (high_table, run_table)  # tile index outer·inner + inner
    width = np.uint64(inner.shape[1])
    g = np.empty(2, dtype=re.dtype)  # factor · outer[o], in the buffers' precision
    for o in range(np.uint64(outer.shape[1])):
        g[0] = factor.real * outer[0, o] - factor.imag * outer[1, o]
        g[1] = factor.real * outer[1, o] + factor.imag * outer[0, o]
        gr, gi, base = g[0], g[1], o * width
        for k in range(width):
            re[base + k] = gr * inner[0, k] - gi * inner[1, k]
            im[base + k] = gr * inner[1, k] + gi * inner[0, k]
    if tile_levels.size:
        _phase_tile(re, im, tile_levels, phases)


@njit()
def _load(re, im, psi, tile, rest_bits, base, offsets, run_bits, transposed, source, tile_levels):
    """A tile of psi, or, when ``source`` has tables, of the product state it describes
    (``tile_levels``: a tile's buffer for the levels of its diagonal block, if it has one)."""
    if source[2].size:
        levels = source[3]
        if levels.size:
            _tile_values(levels, base, offsets, run_bits, transposed, tile_levels)
        _product_tile(re, im, tile, rest_bits, run_bits, transposed, source, tile_levels if levels.size else levels[:0])
    else:
        _gather(re, im, psi, base, offsets, run_bits, transposed)


@njit(parallel=True, fastmath=True)
def layer_apply(
    source,
    psi,
    run_bits,
    high_bits,
    rest_bits,
    transposed,
    mats,
    tile_bits,
    product,
    diagonal,
    levels,
    lam,
    lam_undo,
    generators,
    moments,
    nthreads,
):
    """psi ← single-qubit gates (mats[i] on tile bit tile_bits[i]) applied to ``source`` (psi itself,
    another buffer that keeps the state before the gates, or, if ``product`` has tables, the product
    state it describes), tile by tile; psi is left alone if empty. With a real ``diagonal`` D (not
    empty; or D[k] = diagonal[levels[k]] if ``levels`` is not empty): returns ⟨ψ|D|ψ⟩ of the result
    and writes λ = Dψ into ``lam`` unless it is empty, with the gates ``lam_undo`` (the inverses, for
    the adjoint pass; none if empty) applied to it; ``moments`` (a row per tile, unless empty):
    moments[tile, i] += Im⟨λ|P_i|ψ⟩ there, before the undoing (``generators`` as in layer_adjoint_lambda).
    The tiles are split in ``nthreads`` ranges, one a thread, each with its buffers."""
    width = 1 << (run_bits + high_bits.size)
    offsets = _run_offsets(high_bits)
    tiles = 1 << rest_bits.size
    real = psi.real.dtype
    total = 0.0
    for t in prange(nthreads):  # a thread's buffers are made once, not per tile
        re, im = np.empty(width, dtype=real), np.empty(width, dtype=real)
        lre, lim = (np.empty(width, dtype=real), np.empty(width, dtype=real)) if moments.size else (re, im)
        d = np.empty(width if diagonal.size else 0, dtype=diagonal.dtype)
        tile_levels = np.empty(width if levels.size else 0, dtype=levels.dtype)
        source_levels = np.empty(width if product[3].size else 0, dtype=product[3].dtype)
        first, last = _tiles_of_thread(t, tiles, nthreads)
        for tile in range(first, last):
            base = _tile_base(tile, rest_bits)
            _load(re, im, source, tile, rest_bits, base, offsets, run_bits, transposed, product, source_levels)
            _apply_gates(re, im, tile_bits, mats)
            if psi.size:
                _scatter(re, im, psi, base, offsets, run_bits, transposed)
            if not diagonal.size:
                continue
            if levels.size:
                _tile_values(levels, base, offsets, run_bits, transposed, tile_levels)
                for k in range(width):
                    d[k] = diagonal[tile_levels[k]]
            else:
                _tile_values(diagonal, base, offsets, run_bits, transposed, d)
            part = 0.0
            for k in range(width):
                part += d[k] * (re[k] * re[k] + im[k] * im[k])
            total += part
            if lam.size:  # λ = Dψ in place of ψ, unless ψ is still needed for the moments
                for k in range(width):
                    lre[k] = d[k] * re[k]
                    lim[k] = d[k] * im[k]
                if moments.size:
                    _tile_moments(re, im, lre, lim, tile_bits, generators, moments, tile)
                if lam_undo.shape[0]:
                    _apply_gates(lre, lim, tile_bits, lam_undo)
                _scatter(lre, lim, lam, base, offsets, run_bits, transposed)
    return total


@njit(parallel=True, fastmath=True)
def layers_with_diagonal(
    psi, keep, run_bits, high_bits, rest_bits, transposed, mats1, bits1, levels, phases, mats2, bits2, nthreads
):
    """psi ← gates2 · D · gates1 psi in one pass: a pass of one layer, the diagonal block D after it
    (``_phase_tile``: levels and phases) and a pass of the next layer, all of one tiling. ``keep`` (unless empty) is left
    holding the state after the block. ``nthreads``: as in layer_apply."""
    width = 1 << (run_bits + high_bits.size)
    offsets = _run_offsets(high_bits)
    tiles = 1 << rest_bits.size
    for t in prange(nthreads):  # a thread's buffers are made once, not per tile
        re, im = np.empty(width, dtype=psi.real.dtype), np.empty(width, dtype=psi.real.dtype)
        tile_levels = np.empty(width, dtype=levels.dtype)
        first, last = _tiles_of_thread(t, tiles, nthreads)
        for tile in range(first, last):
            base = _tile_base(tile, rest_bits)
            _gather(re, im, psi, base, offsets, run_bits, transposed)
            _apply_gates(re, im, bits1, mats1)
            _phase_tile(re, im, _tile_values(levels, base, offsets, run_bits, transposed, tile_levels), phases)
            if keep.size:
                _scatter(re, im, keep, base, offsets, run_bits, transposed)
            _apply_gates(re, im, bits2, mats2)
            _scatter(re, im, psi, base, offsets, run_bits, transposed)


NO_DIAGONAL, DIAGONAL_AT_OUTPUT, DIAGONAL_AT_INPUT = 0, 1, 2


@njit(parallel=True, fastmath=True)
def layer_adjoint_lambda(
    phi,
    lam,
    run_bits,
    high_bits,
    rest_bits,
    transposed,
    inverses,
    tile_bits,
    generators,
    out,
    nthreads,
    before,
    undo,
    after,
    write,
    diagonal,
    block,
    carried,
    source,
):
    """An adjoint pass over a product layer that leaves φ in memory alone: λ ← U_i† λ for every gate
    of the pass (``undo``; ``write``: λ is stored back), with the moments out[t, i] += Im⟨λ|P_i|φ⟩
    taken ``before`` or ``after`` it. φ must be at the position λ is at then: every moment of the
    layer may be taken at its output (before any undoing) or at its input (after all of it).

    A diagonal block (``block``: its values, phases that undo it (``_phase_tile``), sums) joins the pass: ``DIAGONAL_AT_OUTPUT``,
    the block right after the layer: first the moments of a later layer's gates of this tiling
    (``carried``: tile bits, generators, out; φ and λ at that layer's input, the block's output), then the block's sums
    (``_level_sums``), then it is undone on φ and λ (in the tile) before the gates' pass.
    ``DIAGONAL_AT_INPUT``, the block right before the layer: its sums at the layer's input, once
    the gates are undone; not undone. ``source`` with tables: φ is that product state, computed, not read.
    ``carried`` may hold the later pass's inverses too: it is undone on λ first, its moments taken after."""
    levels, phases, sums = block
    carried_bits, carried_generators, carried_out, carried_inverses = carried
    width = 1 << (run_bits + high_bits.size)
    offsets = _run_offsets(high_bits)
    for t in prange(nthreads):
        pre, pim, lre, lim = _split_buffers(lam, width)
        tile_levels = np.empty(width if diagonal else 0, dtype=levels.dtype)
        source_levels = np.empty(width if source[3].size else 0, dtype=source[3].dtype)
        first, last = _tiles_of_thread(t, 1 << rest_bits.size, nthreads)
        for tile in range(first, last):
            base = _tile_base(tile, rest_bits)
            _gather(lre, lim, lam, base, offsets, run_bits, transposed)
            if before or after or diagonal != NO_DIAGONAL:
                _load(pre, pim, phi, tile, rest_bits, base, offsets, run_bits, transposed, source, source_levels)
            if diagonal:
                _tile_values(levels, base, offsets, run_bits, transposed, tile_levels)
            if diagonal == DIAGONAL_AT_OUTPUT:
                if carried_inverses.shape[0]:
                    _apply_gates(lre, lim, carried_bits, carried_inverses)
                _tile_moments(pre, pim, lre, lim, carried_bits, carried_generators, carried_out, t)
                _level_sums(pre, pim, lre, lim, tile_levels, sums, t)
                _phase_tile(pre, pim, tile_levels, phases)
                _phase_tile(lre, lim, tile_levels, phases)
            if before:
                _tile_moments(pre, pim, lre, lim, tile_bits, generators, out, t)
            if undo:
                _apply_gates(lre, lim, tile_bits, inverses)
                if write:
                    _scatter(lre, lim, lam, base, offsets, run_bits, transposed)
            if after:
                _tile_moments(pre, pim, lre, lim, tile_bits, generators, out, t)
            if diagonal == DIAGONAL_AT_INPUT:
                _level_sums(pre, pim, lre, lim, tile_levels, sums, t)


@njit(parallel=True)
def cnot(psi, control, target):
    """Swap the target pair wherever the control bit is set."""
    lo_bit, hi_bit = min(control, target), max(control, target)
    for r in prange(psi.size >> 2):
        low = r & ((1 << lo_bit) - 1)
        mid = (r >> lo_bit) & ((1 << (hi_bit - lo_bit - 1)) - 1)
        high = r >> (hi_bit - 1)
        k = low | (mid << (lo_bit + 1)) | (high << (hi_bit + 1)) | (1 << control)
        k1 = k | (1 << target)
        psi[k], psi[k1] = psi[k1], psi[k]


@njit(parallel=True)
def expval_and_lambda(psi, diagonal, lam):
    """⟨ψ|D|ψ⟩ and λ = D ψ for a real diagonal D, in one pass."""
    total = 0.0
    for k in prange(psi.size):
        p = psi[k]
        total += diagonal[k] * (p.real * p.real + p.imag * p.imag)
        lam[k] = diagonal[k] * p
    return total


@njit(parallel=True)
def expval(psi, diagonal):
    total = 0.0
    for k in prange(psi.size):
        p = psi[k]
        total += diagonal[k] * (p.real * p.real + p.imag * p.imag)
    return total


def threads() -> int:
    return numba.get_num_threads()
