"""The vector intrinsics of the fused kernels against numpy, in both precisions."""

import platform

import numpy as np
import pytest
from numba import njit

from qbackends.fused import engine, lanes

L = lanes.LANES
rng = np.random.default_rng(7)


@njit
def _rx(re, im, j, k, c, s):
    lanes.rx_lanes(re, im, j, k, c, s)


@njit
def _gate(re, im, j, k, m):
    lanes.gate_lanes(re, im, j, k, m)


@njit
def _pair(re, im, a, b, c, d, c1, s1, c2, s2):
    lanes.rx_pair_lanes(re, im, a, b, c, d, c1, s1, c2, s2)


@njit
def _scaled_pair(re, im, a, b, c, d, k1, k2, form):
    lanes.rx_pair_scaled_lanes(re, im, a, b, c, d, k1, k2, form)


@njit
def _moments(pre, pim, lre, lim, j, k, step1, step2):
    x = lanes.x_moment_lanes(pre, pim, lre, lim, j, k)
    y = lanes.y_moment_lanes(pre, pim, lre, lim, j, k)
    return x, y, lanes.x_moment_pair_sweep(pre, pim, lre, lim, step1, step2)


@njit
def _split_join(re, im, row, psi, start, out):
    lanes.split_lanes(re, im, row, psi, start)
    lanes.join_lanes(re, im, row, out, start)


def _buffers(dtype, count=1, size=4 * L):
    return [rng.normal(size=size).astype(dtype) for _ in range(2 * count)]


def _gate_on(z, j, k, u):
    x, y = z[j : j + L].copy(), z[k : k + L].copy()
    z[j : j + L], z[k : k + L] = u[0, 0] * x + u[0, 1] * y, u[1, 0] * x + u[1, 1] * y


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-14), (np.float32, 1e-6)])
def test_gates_on_lanes_match_the_matrix_product(dtype, tol):
    re, im = _buffers(dtype)
    z = re.astype(complex) + 1j * im
    c, s = np.cos(0.3), -np.sin(0.3)
    _rx(re, im, 1, 2 * L + 1, c, s)
    _gate_on(z, 1, 2 * L + 1, np.array([[c, 1j * s], [1j * s, c]]))
    u = rng.normal(size=(2, 2)) + 1j * rng.normal(size=(2, 2))
    _gate(re, im, 0, L, tuple(float(x) for entry in u.ravel() for x in (entry.real, entry.imag)))
    _gate_on(z, 0, L, u)
    np.testing.assert_allclose(re + 1j * im, z, atol=tol * 10, rtol=0)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-14), (np.float32, 1e-6)])
def test_a_pair_on_lanes_is_the_two_gates_one_after_the_other(dtype, tol):
    re, im = _buffers(dtype)
    z = re.astype(complex) + 1j * im
    (c1, s1), (c2, s2) = (np.cos(0.4), np.sin(0.4)), (np.cos(-1.1), np.sin(-1.1))
    _pair(re, im, 0, L, 2 * L, 3 * L, c1, s1, c2, s2)
    for (j, k), (c, s) in (((0, L), (c1, s1)), ((2 * L, 3 * L), (c1, s1)), ((0, 2 * L), (c2, s2)), ((L, 3 * L), (c2, s2))):
        _gate_on(z, j, k, np.array([[c, 1j * s], [1j * s, c]]))
    np.testing.assert_allclose(re + 1j * im, z, atol=tol * 10, rtol=0)


@pytest.mark.parametrize("form", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-14), (np.float32, 1e-6)])
def test_a_scaled_pair_on_lanes_is_the_two_gates_less_their_factors(dtype, tol, form):
    re, im = _buffers(dtype)
    z = re.astype(complex) + 1j * im
    (c1, s1), (c2, s2) = (np.cos(0.4), np.sin(0.4)), (np.cos(-1.1), np.sin(-1.1))
    # bit 0 of form: the first gate scaled by its diagonal (k = s/c), else by its off-diagonal (k = c/s)
    k1, f1 = (s1 / c1, c1) if form & 1 else (c1 / s1, s1)
    k2, f2 = (s2 / c2, c2) if form & 2 else (c2 / s2, s2)
    _scaled_pair(re, im, 0, L, 2 * L, 3 * L, k1, k2, form)
    for (j, k), (c, s) in (((0, L), (c1, s1)), ((2 * L, 3 * L), (c1, s1)), ((0, 2 * L), (c2, s2)), ((L, 3 * L), (c2, s2))):
        _gate_on(z, j, k, np.array([[c, 1j * s], [1j * s, c]]))
    np.testing.assert_allclose((re + 1j * im) * f1 * f2, z, atol=tol * 10, rtol=0)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_moments_on_lanes_are_the_imaginary_part_of_the_generators_expectation(dtype, tol):
    pre, pim, lre, lim = _buffers(dtype, 2, size=16 * L)
    phi, lam = pre.astype(complex) + 1j * pim, lre.astype(complex) + 1j * lim

    def moment(pairs, p):
        total = 0.0
        for j, k in pairs:
            x, y = phi[j : j + L], phi[k : k + L]
            total += np.vdot(
                np.concatenate([lam[j : j + L], lam[k : k + L]]),
                np.concatenate([p[0, 0] * x + p[0, 1] * y, p[1, 0] * x + p[1, 1] * y]),
            ).imag
        return total

    X, Y = np.array([[0, 1], [1, 0]]), np.array([[0, -1j], [1j, 0]])
    x, y, (first, second) = _moments(pre, pim, lre, lim, L, 3 * L, np.uint64(L), np.uint64(4 * L))
    assert x == pytest.approx(moment([(L, 3 * L)], X), abs=tol)
    assert y == pytest.approx(moment([(L, 3 * L)], Y), abs=tol)
    # the sweep: every pair of the two steps over the 16 L amplitudes, runs of L at a time
    assert first == pytest.approx(moment([(j, j + L) for j in range(0, 16 * L, L) if not j & L], X), abs=tol)
    assert second == pytest.approx(moment([(j, j + 4 * L) for j in range(0, 16 * L, L) if not j & 4 * L], X), abs=tol)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_split_and_join_move_the_amplitudes_unchanged(dtype):
    psi = (rng.normal(size=3 * L) + 1j * rng.normal(size=3 * L)).astype(dtype)
    real = psi.real.dtype
    re, im, out = np.zeros(2 * L, real), np.zeros(2 * L, real), np.zeros_like(psi)
    _split_join(re, im, 3, psi, L + 5, out)
    np.testing.assert_array_equal(re[3 : 3 + L] + 1j * im[3 : 3 + L], psi[L + 5 : 2 * L + 5])
    np.testing.assert_array_equal(out[L + 5 : 2 * L + 5], psi[L + 5 : 2 * L + 5])
    assert not out[: L + 5].any() and not out[2 * L + 5 :].any()


@njit
def _transposed(re, im, row, row_stride, psi, start, run_stride, out):
    lanes.split_transposed_lanes(re, im, row, row_stride, psi, start, run_stride)
    lanes.join_transposed_lanes(re, im, row, row_stride, out, start, run_stride)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_a_transposed_split_and_join_move_a_block_of_runs_unchanged(dtype):
    run_stride, row_stride = 11, 13  # L runs of 11 amplitudes in psi; L rows of 13 in the buffers
    psi = (rng.normal(size=2 + L * run_stride) + 1j * rng.normal(size=2 + L * run_stride)).astype(dtype)
    re, im, out = np.zeros(3 + L * row_stride, psi.real.dtype), np.zeros(3 + L * row_stride, psi.real.dtype), np.zeros_like(psi)
    _transposed(re, im, 3, row_stride, psi, 2, run_stride, out)
    runs = np.stack([psi[2 + r * run_stride : 2 + r * run_stride + L] for r in range(L)])  # runs[r, j]
    rows = np.stack(
        [re[3 + j * row_stride : 3 + j * row_stride + L] + 1j * im[3 + j * row_stride : 3 + j * row_stride + L] for j in range(L)]
    )
    np.testing.assert_array_equal(rows, runs.T)
    moved = np.zeros(psi.size, dtype=bool)
    for r in range(L):
        moved[2 + r * run_stride : 2 + r * run_stride + L] = True
    np.testing.assert_array_equal(out[moved], psi[moved])
    assert not out[~moved].any()


@njit
def _phase_and_sums(re, im, levels, phases, lre, lim, values):
    lanes.phase_by_level_lanes(re, im, 0, levels, phases)
    lanes.phase_by_level_lanes(re, im, L, levels, phases)
    return lanes.level_sums_lanes(re, im, lre, lim, levels), lanes.level_sums_lanes(re, im, lre, lim, values)


@pytest.mark.parametrize("dtype, tol", [(np.complex128, 1e-13), (np.complex64, 1e-5)])
def test_phases_by_level_and_level_sums_on_lanes(dtype, tol):
    real = np.dtype(dtype).type(0).real.dtype
    re, im, lre, lim = (rng.normal(size=2 * L + 3).astype(real) for _ in range(4))
    levels = rng.integers(0, 5, size=2 * L + 3).astype(np.uint16)
    values = rng.normal(size=2 * L + 3).astype(real)
    phases = np.exp(1j * rng.normal(size=5)).astype(dtype)
    phi = (re + 1j * im) * np.where(np.arange(re.size) < 2 * L, phases[levels], 1)  # the last 3 are not whole lanes
    by_level, by_value = _phase_and_sums(re, im, levels, phases, lre, lim, values)
    np.testing.assert_allclose(re + 1j * im, phi, atol=tol, rtol=0)
    q = ((lre - 1j * lim) * (re + 1j * im)).imag.astype(float)[: 2 * L]
    assert by_level == pytest.approx((q.sum(), q @ levels[: 2 * L]), abs=tol * 10)
    assert by_value == pytest.approx((q.sum(), q @ values[: 2 * L]), abs=tol * 10)


@njit
def _joined_both_ways(re, im, row, row_stride, start, run_stride, cached, streamed):
    lanes.join_lanes(re, im, row, cached, start)
    lanes.join_transposed_lanes(re, im, row, row_stride, cached, start + 2 * L, run_stride)
    lanes.stream_lanes(re, im, row, streamed, start)
    lanes.stream_transposed_lanes(re, im, row, row_stride, streamed, start + 2 * L, run_stride)
    lanes.store_fence()


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_streaming_stores_write_what_cached_stores_write(dtype):
    """Stores past the caches (aligned to STREAM_ALIGN bytes, as engine.state_buffer allocates) leave
    the state as join_lanes and join_transposed_lanes do, and nothing else written."""
    run_stride, row_stride = 2 * L, L + 3
    real = np.dtype(dtype).type(0).real.dtype
    re, im = rng.normal(size=L * row_stride).astype(real), rng.normal(size=L * row_stride).astype(real)
    cached, streamed = (engine.state_buffer(2 * L + L * run_stride, dtype) for _ in range(2))
    assert streamed.ctypes.data % lanes.STREAM_ALIGN == 0
    cached[:], streamed[:] = 7.0, 7.0
    _joined_both_ways(re, im, 0, row_stride, 0, run_stride, cached, streamed)
    np.testing.assert_array_equal(streamed, cached)
    np.testing.assert_array_equal(cached[:L], re[:L] + 1j * im[:L])
    if platform.machine() == "x86_64":  # the stores really are non-temporal (aarch64 streams only 32-byte pairs)
        assert "movnt" in next(iter(_joined_both_ways.inspect_asm().values()))
    assert (cached == 7.0).sum() == cached.size - L - L * L  # the transposed block wrote L runs of L
