// Gates and moments on N amplitudes at a time, as GCC/Clang vector types: the real and imaginary parts of
// a tile live in split buffers, so every operation below is a plain vector multiply-add. N is LANES (the
// layouts' unit) or WIDE<T> (a register of T: twice LANES for float32), as the gate's distance allows.
// Every index given is the first of N consecutive ones, all inside the buffers: the caller checks.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace qb {

using u64 = std::uint64_t;
// One machine register: wider vectors than the registers spill to the stack.
#if defined(__AVX512F__)
constexpr u64 VECTOR_BYTES = 64;
#elif defined(__AVX__)
constexpr u64 VECTOR_BYTES = 32;
#else
constexpr u64 VECTOR_BYTES = 16;
#endif
constexpr u64 LANES = VECTOR_BYTES / sizeof(double);  // the unit of the tiles' layouts: a register of float64
template <class T>
constexpr u64 WIDE = VECTOR_BYTES / sizeof(T);  // a register of T: gates whose pairs are that far apart
constexpr u64 STREAM_ALIGN = 64;   // bytes: a streaming store writes whole, aligned vectors

#define QB_INLINE inline __attribute__((always_inline))

template <class T, u64 N = LANES>
struct Vec {
    typedef T v __attribute__((vector_size(N * sizeof(T))));  // N numbers
};

template <class V, class T>
QB_INLINE V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <class V, class T>
QB_INLINE void store(T* p, const V& v) {
    std::memcpy(p, &v, sizeof v);
}

template <class V, class S>
QB_INLINE V splat(S s) {  // a broadcast (a lane-by-lane fill compiles to masked inserts in every loop)
    return V{} + s;
}

template <class V>
QB_INLINE double total(const V& v) {  // the sum of a vector's lanes, in float64
    double s = 0.0;
    for (u64 i = 0; i < sizeof(V) / sizeof(v[0]); ++i) s += double(v[i]);
    return s;
}

// An RX-shaped gate on (x, y): x, y <- c·x + i·s·y, c·y + i·s·x.
template <class V>
QB_INLINE void rotate(V c, V s, V& xr, V& xi, V& yr, V& yi) {
    V a = c * xr - s * yi, b = c * xi + s * yr, e = c * yr - s * xi, f = c * yi + s * xr;
    xr = a, xi = b, yr = e, yi = f;
}

// The same gate less the factor of its larger entry: x + i·k·y (unit diagonal, k = s/c) or k·x + i·y (k = c/s).
template <class V, bool UNIT>
QB_INLINE void scaled_rotate(V k, V& xr, V& xi, V& yr, V& yi) {
    V a, b, e, f;
    if (UNIT) a = xr - k * yi, b = xi + k * yr, e = yr - k * xi, f = yi + k * xr;
    else a = k * xr - yi, b = k * xi + yr, e = k * yr - xi, f = k * yi + xr;
    xr = a, xi = b, yr = e, yi = f;
}

template <u64 N, class T>
QB_INLINE void rx_lanes(T* __restrict re, T* __restrict im, u64 j, u64 k, T c, T s) {
    using V = typename Vec<T, N>::v;
    V xr = load<V>(re + j), xi = load<V>(im + j), yr = load<V>(re + k), yi = load<V>(im + k);
    rotate(splat<V>(c), splat<V>(s), xr, xi, yr, yi);
    store(re + j, xr), store(im + j, xi), store(re + k, yr), store(im + k, yi);
}

// (x, y) <- U (x, y); m: the real and imaginary parts of U's entries, row by row.
template <u64 N, class T>
QB_INLINE void gate_lanes(T* __restrict re, T* __restrict im, u64 j, u64 k, const T* m) {
    using V = typename Vec<T, N>::v;
    V xr = load<V>(re + j), xi = load<V>(im + j), yr = load<V>(re + k), yi = load<V>(im + k);
    V u[8];
    for (int i = 0; i < 8; ++i) u[i] = splat<V>(m[i]);
    store(re + j, (u[0] * xr - u[1] * xi) + (u[2] * yr - u[3] * yi));
    store(im + j, (u[0] * xi + u[1] * xr) + (u[2] * yi + u[3] * yr));
    store(re + k, (u[4] * xr - u[5] * xi) + (u[6] * yr - u[7] * yi));
    store(im + k, (u[4] * xi + u[5] * xr) + (u[6] * yi + u[7] * yr));
}

// Quadruples a, b = a + step1, c = a + step2, d = c + step1: (c1, s1) on the step1 pairs, then (c2, s2)
// on the step2 pairs, each amplitude loaded and stored once.
template <u64 N, class T>
QB_INLINE void rx_pair_lanes(T* __restrict re, T* __restrict im, u64 a, u64 b, u64 c, u64 d, T c1, T s1, T c2, T s2) {
    using V = typename Vec<T, N>::v;
    V ar = load<V>(re + a), ai = load<V>(im + a), br = load<V>(re + b), bi = load<V>(im + b);
    V cr = load<V>(re + c), ci = load<V>(im + c), dr = load<V>(re + d), di = load<V>(im + d);
    V vc1 = splat<V>(c1), vs1 = splat<V>(s1), vc2 = splat<V>(c2), vs2 = splat<V>(s2);
    rotate(vc1, vs1, ar, ai, br, bi);
    rotate(vc1, vs1, cr, ci, dr, di);
    rotate(vc2, vs2, ar, ai, cr, ci);
    rotate(vc2, vs2, br, bi, dr, di);
    store(re + a, ar), store(im + a, ai), store(re + b, br), store(im + b, bi);
    store(re + c, cr), store(im + c, ci), store(re + d, dr), store(im + d, di);
}

template <u64 N, class T, bool UNIT1, bool UNIT2>
QB_INLINE void rx_pair_scaled_lanes(T* __restrict re, T* __restrict im, u64 a, u64 b, u64 c, u64 d, T k1, T k2) {
    using V = typename Vec<T, N>::v;
    V ar = load<V>(re + a), ai = load<V>(im + a), br = load<V>(re + b), bi = load<V>(im + b);
    V cr = load<V>(re + c), ci = load<V>(im + c), dr = load<V>(re + d), di = load<V>(im + d);
    V v1 = splat<V>(k1), v2 = splat<V>(k2);
    scaled_rotate<V, UNIT1>(v1, ar, ai, br, bi);
    scaled_rotate<V, UNIT1>(v1, cr, ci, dr, di);
    scaled_rotate<V, UNIT2>(v2, ar, ai, cr, ci);
    scaled_rotate<V, UNIT2>(v2, br, bi, dr, di);
    store(re + a, ar), store(im + a, ai), store(re + b, br), store(im + b, bi);
    store(re + c, cr), store(im + c, ci), store(re + d, dr), store(im + d, di);
}

// Octuples a + {0, s1} + {0, s2} + {0, s3}: three RX-shaped gates less their factors, on the s1, s2 and s3 pairs,
// each amplitude loaded and stored once (sixteen registers of amplitudes: for machines with 32).
// Member o < 8 of the octuple at a: a plus s1, s2 and s3 where o's bits 0, 1 and 2 are set.
QB_INLINE u64 octuple_member(u64 a, u64 o, u64 s1, u64 s2, u64 s3) { return a + (o & 1 ? s1 : 0) + (o & 2 ? s2 : 0) + (o & 4 ? s3 : 0); }

template <u64 N, class T, bool UNIT1, bool UNIT2, bool UNIT3>
QB_INLINE void rx_triple_scaled_lanes(T* __restrict re, T* __restrict im, u64 a, u64 s1, u64 s2, u64 s3, T k1, T k2, T k3) {
    using V = typename Vec<T, N>::v;
    V r[8], i[8];
    for (u64 o = 0; o < 8; ++o) r[o] = load<V>(re + octuple_member(a, o, s1, s2, s3)), i[o] = load<V>(im + octuple_member(a, o, s1, s2, s3));
    const V v1 = splat<V>(k1), v2 = splat<V>(k2), v3 = splat<V>(k3);
    for (u64 o = 0; o < 8; o += 2) scaled_rotate<V, UNIT1>(v1, r[o], i[o], r[o + 1], i[o + 1]);
    for (u64 o : {0, 1, 4, 5}) scaled_rotate<V, UNIT2>(v2, r[o], i[o], r[o + 2], i[o + 2]);
    for (u64 o = 0; o < 4; ++o) scaled_rotate<V, UNIT3>(v3, r[o], i[o], r[o + 4], i[o + 4]);
    for (u64 o = 0; o < 8; ++o) store(re + octuple_member(a, o, s1, s2, s3), r[o]), store(im + octuple_member(a, o, s1, s2, s3), i[o]);
}

// The lanes of Im<λ|P|φ> over the pairs (j, k): P = X (GEN 1) or Y (GEN 2).
template <int GEN, class V>
QB_INLINE V moment_terms(V prj, V pij, V prk, V pik, V lrj, V lij, V lrk, V lik) {
    if (GEN == 1) return (lrj * pik - lij * prk) + (lrk * pij - lik * prj);  // X φ = (φ_k, φ_j)
    return (lrk * prj + lik * pij) - (lrj * prk + lij * pik);                 // Y φ = (-i φ_k, i φ_j)
}

template <int GEN, u64 N, class T>
QB_INLINE double moment_lanes(const T* pre, const T* pim, const T* lre, const T* lim, u64 j, u64 k) {
    using V = typename Vec<T, N>::v;
    return total(moment_terms<GEN>(load<V>(pre + j), load<V>(pim + j), load<V>(pre + k), load<V>(pim + k),
                                   load<V>(lre + j), load<V>(lim + j), load<V>(lre + k), load<V>(lim + k)));
}

// ---- between a state (interleaved complex numbers) and split buffers -------------------------------------
// LANES complex numbers are two vectors of LANES numbers (each a machine register or two): their even lanes
// are the real parts, the odd ones the imaginary parts.

template <int... I>
using lane_indices = std::integer_sequence<int, I...>;
using each_lane = std::make_integer_sequence<int, int(LANES)>;

template <class V, int... I>
QB_INLINE void deinterleave(const V& lo, const V& hi, V& re, V& im, lane_indices<I...>) {
    re = __builtin_shufflevector(lo, hi, (2 * I)...);
    im = __builtin_shufflevector(lo, hi, (2 * I + 1)...);
}

template <class V>
QB_INLINE void deinterleave(const V& lo, const V& hi, V& re, V& im) {
    deinterleave(lo, hi, re, im, each_lane{});
}

template <class V, int... I>
QB_INLINE void interleave(const V& re, const V& im, V& lo, V& hi, lane_indices<I...>) {
    constexpr int L = int(sizeof...(I));
    lo = __builtin_shufflevector(re, im, (I / 2 + (I % 2) * L)...);
    hi = __builtin_shufflevector(re, im, (L / 2 + I / 2 + (I % 2) * L)...);
}

template <class V>
QB_INLINE void interleave(const V& re, const V& im, V& lo, V& hi) {
    interleave(re, im, lo, hi, each_lane{});
}

template <class T>
QB_INLINE void split_lanes(T* __restrict re, T* __restrict im, u64 row, const T* psi, u64 start) {
    using V = typename Vec<T>::v;
    V r, i;
    deinterleave(load<V>(psi + 2 * start), load<V>(psi + 2 * start + LANES), r, i);
    store(re + row, r), store(im + row, i);
}

// A store of one vector past the caches (no read of the line first), at an address aligned to its size.
template <class T, class V>
QB_INLINE void stream_store(T* p, const V& v) {
    constexpr u64 bytes = sizeof v;
#if defined(__x86_64__) && defined(__AVX512F__)
    if constexpr (bytes == 64) return _mm512_stream_pd(reinterpret_cast<double*>(p), (__m512d)v);
#endif
#if defined(__x86_64__) && defined(__AVX__)
    if constexpr (bytes == 32) return _mm256_stream_pd(reinterpret_cast<double*>(p), (__m256d)v);
#endif
#if defined(__x86_64__)
    if constexpr (bytes == 16) return _mm_stream_pd(reinterpret_cast<double*>(p), (__m128d)v);
#endif
    store(p, v);
}

// Streaming stores are weakly ordered: sfence drains them (a locked instruction need not, on every x86), then a
// full fence orders them ahead of every later access.
QB_INLINE void store_fence() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_sfence();
#endif
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

template <bool STREAM, class T>
QB_INLINE void store_pair(T* p, const typename Vec<T>::v& lo, const typename Vec<T>::v& hi) {
    if (STREAM) stream_store(p, lo), stream_store(p + LANES, hi);
    else store(p, lo), store(p + LANES, hi);
}

template <bool STREAM, class T>
QB_INLINE void join_lanes(const T* re, const T* im, u64 row, T* psi, u64 start) {
    using V = typename Vec<T>::v;
    V lo, hi;
    interleave(load<V>(re + row), load<V>(im + row), lo, hi);
    store_pair<STREAM>(psi + 2 * start, lo, hi);
}

// join_lanes a register of T at a time (WIDE<T> numbers: twice LANES for float32); ``row`` a multiple of WIDE<T>.
template <bool STREAM, class T>
QB_INLINE void join_wide_lanes(const T* re, const T* im, u64 row, T* psi, u64 start) {
    constexpr u64 N = WIDE<T>;
    using V = typename Vec<T, N>::v;
    V lo, hi;
    interleave(load<V>(re + row), load<V>(im + row), lo, hi, std::make_integer_sequence<int, int(N)>{});
    if (STREAM) stream_store(psi + 2 * start, lo), stream_store(psi + 2 * start + N, hi);
    else store(psi + 2 * start, lo), store(psi + 2 * start + N, hi);
}

// The LANES x LANES transpose of LANES vectors, by swapping blocks of LANES/2, ..., 2 and 1 lanes: with
// blocks of H, lane j of the first vector of a pair takes the second's lane j - H where j & H, and the second
// takes the first's lane j + H where not.
template <int H, class V, int... I>
QB_INLINE void swap_blocks(V* r, lane_indices<I...>) {
    constexpr int L = int(LANES);
    for (int i = 0; i < L; ++i) {
        if (i & H) continue;
        const V a = r[i], b = r[i + H];
        r[i] = __builtin_shufflevector(a, b, ((I & H) ? L + I - H : I)...);
        r[i + H] = __builtin_shufflevector(a, b, ((I & H) ? L + I : I + H)...);
    }
}

template <int H = int(LANES) / 2, class V>
QB_INLINE void transpose(V* r) {
    swap_blocks<H>(r, each_lane{});
    if constexpr (H > 1) transpose<H / 2>(r);
}

// re/im[row + j·row_stride + r] <- psi[start + r·run_stride + j] for r, j < LANES.
template <class T>
QB_INLINE void split_transposed_lanes(T* re, T* im, u64 row, u64 row_stride, const T* psi, u64 start, u64 run_stride) {
    using V = typename Vec<T>::v;
    V real[LANES], imag[LANES];
    for (u64 r = 0; r < LANES; ++r) {
        const T* run = psi + 2 * (start + r * run_stride);
        deinterleave(load<V>(run), load<V>(run + LANES), real[r], imag[r]);
    }
    transpose(real);
    transpose(imag);
    for (u64 j = 0; j < LANES; ++j) store(re + row + j * row_stride, real[j]), store(im + row + j * row_stride, imag[j]);
}

// out[row + j·row_stride + r] <- values[start + r·run_stride + j] for r, j < LANES (levels or a diagonal's values).
template <class V>
QB_INLINE void transposed_lanes(V* out, u64 row, u64 row_stride, const V* values, u64 start, u64 run_stride) {
    using W = typename Vec<V>::v;
    W r[LANES];
    for (u64 i = 0; i < LANES; ++i) r[i] = load<W>(values + start + i * run_stride);
    transpose(r);
    for (u64 j = 0; j < LANES; ++j) store(out + row + j * row_stride, r[j]);
}

// The inverse: psi[start + r·run_stride + j] <- re/im[row + j·row_stride + r].
template <bool STREAM, class T>
QB_INLINE void join_transposed_lanes(const T* re, const T* im, u64 row, u64 row_stride, T* psi, u64 start, u64 run_stride) {
    using V = typename Vec<T>::v;
    V real[LANES], imag[LANES];
    for (u64 j = 0; j < LANES; ++j) real[j] = load<V>(re + row + j * row_stride), imag[j] = load<V>(im + row + j * row_stride);
    transpose(real);
    transpose(imag);
    for (u64 r = 0; r < LANES; ++r) {
        V lo, hi;
        interleave(real[r], imag[r], lo, hi);
        store_pair<STREAM>(psi + 2 * (start + r * run_stride), lo, hi);
    }
}

}  // namespace qb
