"""Numba kernels of the batched simulator: B states of n qubits, one per row of a (B, 2^n) array.

A program is a table of operations, one row each: (kind, target bit, control mask, parameter slot,
matrix index, wire mask). Bits count from the least significant (PennyLane's wire 0 is the most
significant). Parameters are a (B, slots) table, so every row of the batch has its own angles.

Consecutive single-qubit operations on one target with the same controls form a group (``groups``
holds each group's rows [start, end)): the forward pass applies a group's product in one sweep.
The adjoint pass runs the groups backwards on ψ and λ = Oψ together (O may differ per row: a VJP's
cotangent-weighted observable) in one sweep per group, undoing its operations pair by pair and
adding each dU/dθ's contribution, 2c·Im<λ|Gψ> for U = exp(-icθG), to the (row, slot) of the
gradient table.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..fused.kernels import zsign as _zsign  # (-1)^popcount(x), inlined; its tests pin it to fused.kernels
from ..simbase.cachedir import kernel_cache
from ..simbase.threads import import_numba

prange = import_numba().prange
CACHE = kernel_cache(Path(__file__))  # decided before the first kernel: where it is cached, or not at all
njit = CACHE.njit  # numba.njit, with caching as CACHE decided

ROT_X, ROT_Y, ROT_Z, PHASE, MULTI_RZ, MATRIX, SWAP = range(7)
KIND, TARGET, CONTROLS, SLOT, MATRIX_INDEX, MASK = range(6)


@njit(inline="always")
def _matrix(kind, theta, m_const):
    """The 2x2 matrix (m00, m01, m10, m11) of a single-qubit operation (``m_const`` for MATRIX)."""
    if kind == MATRIX:
        return m_const[0, 0], m_const[0, 1], m_const[1, 0], m_const[1, 1]
    if kind == PHASE:
        return 1.0 + 0j, 0j, 0j, np.cos(theta) + 1j * np.sin(theta)
    c = np.cos(theta / 2) + 0j
    s = np.sin(theta / 2)
    if kind == ROT_X:
        return c, -1j * s, -1j * s, c
    if kind == ROT_Y:
        return c, -s + 0j, s + 0j, c
    return c - 1j * s, 0j, 0j, c + 1j * s


@njit(inline="always")
def _mm(a, b):
    return (
        a[0] * b[0] + a[1] * b[2],
        a[0] * b[1] + a[1] * b[3],
        a[2] * b[0] + a[3] * b[2],
        a[2] * b[1] + a[3] * b[3],
    )


@njit(inline="always")
def _dagger(a):
    return np.conj(a[0]), np.conj(a[2]), np.conj(a[1]), np.conj(a[3])


@njit(inline="always")
def _overlap(kind, r):
    """2c·Im Tr(G R) with R = Σ_pairs ψ_pair λ_pair^† (U = exp(-icθG); PHASE: c = 1, G = -|1><1|)."""
    if kind == ROT_X:
        return (r[2] + r[1]).imag
    if kind == ROT_Y:
        return (-1j * r[2] + 1j * r[1]).imag
    if kind == ROT_Z:
        return (r[0] - r[3]).imag
    return -2.0 * r[3].imag


@njit(inline="always")
def _op_matrix(ops, k, params_b, matrices):
    slot = ops[k, SLOT]
    return _matrix(ops[k, KIND], params_b[slot] if slot >= 0 else 0.0, matrices[max(ops[k, MATRIX_INDEX], 0)])


@njit(inline="always")
def _group_matrix(ops, start, end, params_b, matrices):
    """The product of the group's single-qubit operations, for one batch row."""
    m = _op_matrix(ops, start, params_b, matrices)
    for k in range(start + 1, end):
        m = _mm(_op_matrix(ops, k, params_b, matrices), m)
    return m


@njit(fastmath=True)
def _forward_group(psi, ops, start, end, params_b, matrices):
    kind = ops[start, KIND]
    controls = ops[start, CONTROLS]
    if kind == MULTI_RZ:
        slot = ops[start, SLOT]
        theta = params_b[slot]
        plus = np.cos(theta / 2) - 1j * np.sin(theta / 2)  # exp(-iθ/2) where Z..Z = +1
        minus = np.conj(plus)
        mask = ops[start, MASK]
        for i in range(psi.size):
            if i & controls == controls:
                psi[i] *= plus if _zsign(i & mask) > 0 else minus
        return
    if kind == SWAP:
        a, b = ops[start, TARGET], ops[start, MASK]
        for i in range(psi.size):
            if (i >> a) & 1 == 1 and (i >> b) & 1 == 0 and i & controls == controls:
                j = i ^ ((1 << a) | (1 << b))
                psi[i], psi[j] = psi[j], psi[i]
        return
    m00, m01, m10, m11 = _group_matrix(ops, start, end, params_b, matrices)
    step = 1 << ops[start, TARGET]
    for base in range(0, psi.size, 2 * step):  # pairs (i, i + step), i running over a contiguous run
        for i in range(base, base + step):
            if i & controls == controls:
                a = psi[i]
                c = psi[i + step]
                psi[i] = m00 * a + m01 * c
                psi[i + step] = m10 * a + m11 * c


@njit(fastmath=True)
def _adjoint_group(psi, lam, ops, start, end, params_b, matrices, grads_b):
    """Undo the group on ψ and λ in one pass, adding each parameter's derivative on the way."""
    kind = ops[start, KIND]
    controls = ops[start, CONTROLS]
    if kind == MULTI_RZ:
        slot = ops[start, SLOT]
        theta = params_b[slot]
        plus = np.cos(theta / 2) + 1j * np.sin(theta / 2)  # the inverse
        minus = np.conj(plus)
        mask = ops[start, MASK]
        total = 0.0
        for i in range(psi.size):
            if i & controls == controls:
                z = _zsign(i & mask)
                total += z * (np.conj(lam[i]) * psi[i]).imag
                f = plus if z > 0 else minus
                psi[i] *= f
                lam[i] *= f
        grads_b[slot] += total
        return
    if kind == SWAP:
        _forward_group(psi, ops, start, end, params_b, matrices)
        _forward_group(lam, ops, start, end, params_b, matrices)
        return
    # One sweep: R = Σ_pairs ψλ^† at the group's end, and both vectors undone by the group's product.
    # Each operation's derivative then follows from R carried back through the later ones (2x2 work).
    h00, h01, h10, h11 = _dagger(_group_matrix(ops, start, end, params_b, matrices))
    r00 = r01 = r10 = r11 = 0j
    step = 1 << ops[start, TARGET]
    for base in range(0, psi.size, 2 * step):
        for i in range(base, base + step):
            if i & controls == controls:
                p0, p1, l0, l1 = psi[i], psi[i + step], lam[i], lam[i + step]
                c0, c1 = np.conj(l0), np.conj(l1)
                r00 += p0 * c0
                r01 += p0 * c1
                r10 += p1 * c0
                r11 += p1 * c1
                psi[i] = h00 * p0 + h01 * p1
                psi[i + step] = h10 * p0 + h11 * p1
                lam[i] = h00 * l0 + h01 * l1
                lam[i + step] = h10 * l0 + h11 * l1
    r = (r00, r01, r10, r11)
    for k in range(end - 1, start - 1, -1):
        slot = ops[k, SLOT]
        if slot >= 0:
            grads_b[slot] += _overlap(ops[k, KIND], r)
        u = _op_matrix(ops, k, params_b, matrices)
        r = _mm(_mm(_dagger(u), r), u)


@njit()
def _forward_row(psi, ops, groups, params_b, matrices):
    for g in range(groups.shape[0]):
        _forward_group(psi, ops, groups[g, 0], groups[g, 1], params_b, matrices)


@njit()
def _adjoint_row(psi, lam, ops, groups, params_b, matrices, grads_b):
    for g in range(groups.shape[0] - 1, -1, -1):
        _adjoint_group(psi, lam, ops, groups[g, 0], groups[g, 1], params_b, matrices, grads_b)


@njit()
def _forward_serial(states, ops, groups, params, matrices):
    for b in range(states.shape[0]):
        _forward_row(states[b], ops, groups, params[b], matrices)


@njit(parallel=True)
def _forward_parallel(states, ops, groups, params, matrices):
    for b in prange(states.shape[0]):
        _forward_row(states[b], ops, groups, params[b], matrices)


@njit()
def _adjoint_serial(states, lams, ops, groups, params, matrices, grads):
    for b in range(states.shape[0]):
        _adjoint_row(states[b], lams[b], ops, groups, params[b], matrices, grads[b])


@njit(parallel=True)
def _adjoint_parallel(states, lams, ops, groups, params, matrices, grads):
    for b in prange(states.shape[0]):
        _adjoint_row(states[b], lams[b], ops, groups, params[b], matrices, grads[b])


# Below this many amplitudes in the whole batch, waking threads costs more than it saves
# (4-8 wires x 16 rows run in well under a millisecond on one core).
PARALLEL_AMPLITUDES = 1 << 14


def forward(states, ops, groups, params, matrices):
    """Run the program on every row of ``states`` in place."""
    run = _forward_parallel if states.size >= PARALLEL_AMPLITUDES else _forward_serial
    run(states, ops, groups, params, matrices)


def adjoint(states, lams, ops, groups, params, matrices, grads):
    """Walk the program back from the final ψ (``states``) and λ (``lams``), both consumed, adding
    each parameterised operation's derivative to ``grads[row, slot]``."""
    run = _adjoint_parallel if states.size >= PARALLEL_AMPLITUDES else _adjoint_serial
    run(states, lams, ops, groups, params, matrices, grads)


@njit()
def apply_paulis(states, xmasks, zmasks, phases, coefs, out):
    """out[b] = Σ_t coefs[b, t]·P_t states[b], with P_t|i> = phases[t]·(-1)^|i & z_t|·|i ^ x_t>."""
    for b in range(states.shape[0]):
        psi = states[b]
        res = out[b]
        res[:] = 0
        for t in range(xmasks.size):
            w = coefs[b, t] * phases[t]
            if w == 0:
                continue
            for i in range(psi.size):
                res[i ^ xmasks[t]] += w * _zsign(i & zmasks[t]) * psi[i]


@njit()
def pauli_expvals(states, xmasks, zmasks, phases, out):
    """out[b, t] = <ψ_b|P_t|ψ_b>."""
    for b in range(states.shape[0]):
        psi = states[b]
        for t in range(xmasks.size):
            acc = 0j
            for i in range(psi.size):
                acc += np.conj(psi[i ^ xmasks[t]]) * _zsign(i & zmasks[t]) * psi[i]
            out[b, t] = (acc * phases[t]).real
