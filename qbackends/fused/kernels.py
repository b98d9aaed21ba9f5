"""Numba kernels of the fused simulator. The state is split as k = (hi, lo) with ``lo`` the ``L`` low bits.

Diagonal blocks: angle(k) = A[lo] + Σ_j bcoef_j z(hi & bmask_j) + Σ_g z(hi & gmask_g) C[g, lo], where
z(x) = (-1)^popcount(x). One pass applies exp(i·sign·angle) to the state (and to λ in the adjoint pass).
Product layers: single-qubit gates on distinct wires applied tile by tile in cache.
Kernels are compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np
from numba import njit, prange

from .cachedir import kernel_cache_dir

CACHE_DIR = kernel_cache_dir(Path(__file__))  # before the first @njit(cache=True): a read-only install moves it

DIAG_LOW_BITS = 11  # diagonal blocks: low-bit tables of 2^L entries
LOW_BITS = 11  # 2048 amplitudes per run: 32 KiB of complex128, cache-resident
TILE_HIGH_BITS = 5  # high bits handled per tile: 32 runs, 1 MiB


@njit(cache=True, inline="always")
def parity(x):
    x ^= x >> 32
    x ^= x >> 16
    x ^= x >> 8
    x ^= x >> 4
    x ^= x >> 2
    x ^= x >> 1
    return x & 1


@njit(cache=True, inline="always")
def zsign(x):
    return 1.0 - 2.0 * parity(x)


@njit(cache=True)
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


@njit(cache=True, parallel=True)
def diag_values(out, low_bits, table_a, bmask, bcoef, gmask, table_c):
    """out[k] = angle(k): the diagonal of a sum of Z products (an observable or a block's generator)."""
    size = 1 << low_bits
    for hi in prange(out.size >> low_bits):
        _chunk_angles(hi, low_bits, table_a, bmask, bcoef, gmask, table_c, out[hi * size : (hi + 1) * size])


@njit(cache=True, parallel=True)
def diag_phase(psi, low_bits, table_a, bmask, bcoef, gmask, table_c, sign):
    """psi[k] *= exp(i·sign·angle(k)): a whole block of commuting diagonal gates in one pass."""
    size = 1 << low_bits
    for hi in prange(psi.size >> low_bits):
        angles = np.empty(size)
        _chunk_angles(hi, low_bits, table_a, bmask, bcoef, gmask, table_c, angles)
        off = hi * size
        for lo in range(size):
            a = sign * angles[lo]
            psi[off + lo] *= complex(np.cos(a), np.sin(a))


@njit(cache=True, parallel=True)
def diag_adjoint(phi, lam, low_bits, table_a, bmask, bcoef, gmask, table_c, rowsum, moments, nthreads):
    """One adjoint pass over a diagonal block.

    With q(k) = Im(conj(λ_k) φ_k) at the point after the block, accumulates
    rowsum[hi] = Σ_lo q, moments[t, 0, lo] = Σ_hi q, moments[t, 1+g, lo] = Σ_hi z(hi & gmask_g) q
    (one slice per thread t), then undoes the block on φ and λ.
    """
    size = 1 << low_bits
    chunks = phi.size >> low_bits
    per = (chunks + nthreads - 1) // nthreads
    for t in prange(nthreads):
        angles = np.empty(size)
        signs = np.empty(gmask.size)
        for hi in range(t * per, min(chunks, (t + 1) * per)):
            _chunk_angles(hi, low_bits, table_a, bmask, bcoef, gmask, table_c, angles)
            for g in range(gmask.size):
                signs[g] = zsign(hi & gmask[g])
            off = hi * size
            total = 0.0
            for lo in range(size):
                p, lm = phi[off + lo], lam[off + lo]
                q = lm.real * p.imag - lm.imag * p.real
                total += q
                moments[t, 0, lo] += q
                for g in range(gmask.size):
                    moments[t, 1 + g, lo] += signs[g] * q
                a = -angles[lo]
                phase = complex(np.cos(a), np.sin(a))
                phi[off + lo] = p * phase
                lam[off + lo] = lm * phase
            rowsum[hi] = total


@njit(cache=True, parallel=True)
def product_state(psi, low_bits, low_vectors, high_vectors):
    """psi = ⊗ single-qubit states: low_vectors[b] / high_vectors[b] are the (2,) vectors of bit b."""
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
        for lo in range(size):
            psi[off + lo] = factor * table[lo]


@njit(cache=True, inline="always")
def _run_start(tile, rest_bits, high_bits, low_bits, run):
    """Global index of the first amplitude of run ``run`` (its chosen high bits) of tile ``tile``."""
    index = 0
    for i in range(rest_bits.size):
        index |= ((tile >> i) & 1) << rest_bits[i]
    for i in range(high_bits.size):
        index |= ((run >> i) & 1) << high_bits[i]
    return index


@njit(cache=True, inline="always")
def _gather(buf, psi, tile, rest_bits, high_bits, low_bits):
    size = 1 << low_bits
    for run in range(1 << high_bits.size):
        start = _run_start(tile, rest_bits, high_bits, low_bits, run)
        buf[run * size : (run + 1) * size] = psi[start : start + size]


@njit(cache=True, inline="always")
def _scatter(buf, psi, tile, rest_bits, high_bits, low_bits):
    size = 1 << low_bits
    for run in range(1 << high_bits.size):
        start = _run_start(tile, rest_bits, high_bits, low_bits, run)
        psi[start : start + size] = buf[run * size : (run + 1) * size]


@njit(cache=True, inline="always")
def _apply_2x2(buf, bit, m):
    """buf ← U buf on ``bit``; an RX-shaped U (real diagonal, imaginary off-diagonal) takes half the multiplies."""
    step = 1 << bit
    if _is_rx_shaped(m):
        c, s = m[0, 0].real, m[0, 1].imag  # U = [[c, is], [is, c]]
        for base in range(0, buf.size, 2 * step):
            for j in range(base, base + step):
                a, b = buf[j], buf[j + step]
                buf[j] = complex(c * a.real - s * b.imag, c * a.imag + s * b.real)
                buf[j + step] = complex(c * b.real - s * a.imag, c * b.imag + s * a.real)
        return
    m00, m01, m10, m11 = m[0, 0], m[0, 1], m[1, 0], m[1, 1]
    for base in range(0, buf.size, 2 * step):
        for j in range(base, base + step):
            a, b = buf[j], buf[j + step]
            buf[j] = m00 * a + m01 * b
            buf[j + step] = m10 * a + m11 * b


@njit(cache=True, inline="always")
def _is_rx_shaped(m):
    return m[0, 0].imag == 0.0 and m[0, 1].real == 0.0 and m[1, 0].real == 0.0 and m[0, 0] == m[1, 1] and m[0, 1] == m[1, 0]


@njit(cache=True, inline="always")
def _undo_rx_with_moment(pbuf, lbuf, bit, m):
    """Both buffers ← U† buffers for an RX-shaped U† = [[c, is], [is, c]], returning Im⟨λ|X|φ⟩ (one sweep)."""
    c, s = m[0, 0].real, m[0, 1].imag
    step = 1 << bit
    acc = 0.0
    for base in range(0, pbuf.size, 2 * step):
        for j in range(base, base + step):
            a0, a1 = pbuf[j], pbuf[j + step]
            l0, l1 = lbuf[j], lbuf[j + step]
            acc += (l0.real * a1.imag - l0.imag * a1.real) + (l1.real * a0.imag - l1.imag * a0.real)
            pbuf[j] = complex(c * a0.real - s * a1.imag, c * a0.imag + s * a1.real)
            pbuf[j + step] = complex(c * a1.real - s * a0.imag, c * a1.imag + s * a0.real)
            lbuf[j] = complex(c * l0.real - s * l1.imag, c * l0.imag + s * l1.real)
            lbuf[j + step] = complex(c * l1.real - s * l0.imag, c * l1.imag + s * l0.real)
    return acc


@njit(cache=True, inline="always")
def _moment(pbuf, lbuf, bit, generator):
    """Im⟨λ|P|φ⟩ over a buffer, P = X (1) or Y (2) on ``bit``."""
    step = 1 << bit
    acc = 0.0
    for base in range(0, pbuf.size, 2 * step):
        for j in range(base, base + step):
            a0, a1 = pbuf[j], pbuf[j + step]
            l0, l1 = lbuf[j], lbuf[j + step]
            if generator == 1:  # X: (a1, a0)
                acc += (l0.real * a1.imag - l0.imag * a1.real) + (l1.real * a0.imag - l1.imag * a0.real)
            else:  # Y: (-i a1, i a0)
                acc += -(l0.real * a1.real + l0.imag * a1.imag) + (l1.real * a0.real + l1.imag * a0.imag)
    return acc


@njit(cache=True, parallel=True)
def layer_apply(psi, low_bits, high_bits, rest_bits, mats, tile_bits):
    """Apply single-qubit gates (mats[i] on tile bit tile_bits[i]) to every tile of psi."""
    width = 1 << (low_bits + high_bits.size)
    for tile in prange(1 << rest_bits.size):
        buf = np.empty(width, dtype=np.complex128)
        _gather(buf, psi, tile, rest_bits, high_bits, low_bits)
        for i in range(mats.shape[0]):
            _apply_2x2(buf, tile_bits[i], mats[i])
        _scatter(buf, psi, tile, rest_bits, high_bits, low_bits)


@njit(cache=True, parallel=True)
def layer_adjoint(phi, lam, low_bits, high_bits, rest_bits, inverses, tile_bits, generators, out, nthreads):
    """One adjoint pass over a product layer: out[t, i] += Im⟨λ|P_i|φ⟩ (P = X for 1, Y for 2) and
    φ, λ ← U_i† φ, U_i† λ (``inverses[i]``) for every gate of the pass. The gates act on distinct
    wires and P_i commutes with U_i, so each moment may be taken before or after any undoing."""
    width = 1 << (low_bits + high_bits.size)
    tiles = 1 << rest_bits.size
    per = (tiles + nthreads - 1) // nthreads
    for t in prange(nthreads):
        pbuf = np.empty(width, dtype=np.complex128)
        lbuf = np.empty(width, dtype=np.complex128)
        for tile in range(t * per, min(tiles, (t + 1) * per)):
            _gather(pbuf, phi, tile, rest_bits, high_bits, low_bits)
            _gather(lbuf, lam, tile, rest_bits, high_bits, low_bits)
            for i in range(inverses.shape[0]):
                if generators[i] == 1 and _is_rx_shaped(inverses[i]):
                    out[t, i] += _undo_rx_with_moment(pbuf, lbuf, tile_bits[i], inverses[i])
                    continue
                if generators[i] != 0:
                    out[t, i] += _moment(pbuf, lbuf, tile_bits[i], generators[i])
                _apply_2x2(pbuf, tile_bits[i], inverses[i])
                _apply_2x2(lbuf, tile_bits[i], inverses[i])
            _scatter(pbuf, phi, tile, rest_bits, high_bits, low_bits)
            _scatter(lbuf, lam, tile, rest_bits, high_bits, low_bits)


@njit(cache=True, parallel=True)
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


@njit(cache=True, parallel=True)
def expval_and_lambda(psi, diagonal, lam):
    """⟨ψ|D|ψ⟩ and λ = D ψ for a real diagonal D, in one pass."""
    total = 0.0
    for k in prange(psi.size):
        p = psi[k]
        total += diagonal[k] * (p.real * p.real + p.imag * p.imag)
        lam[k] = diagonal[k] * p
    return total


@njit(cache=True, parallel=True)
def expval(psi, diagonal):
    total = 0.0
    for k in prange(psi.size):
        p = psi[k]
        total += diagonal[k] * (p.real * p.real + p.imag * p.imag)
    return total


def threads() -> int:
    return numba.get_num_threads()
