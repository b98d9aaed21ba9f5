#include "fused.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <sched.h>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include "lanes.hpp"

namespace qb {

namespace {

constexpr u64 TRANSPOSE_BYTES = 16384;  // transposed tiles (a first pass's) move 16 KiB at a time, through L1
constexpr u64 SUBTILE_BYTES = 32768;    // an L1-sized block of the split buffers a sweep touches
constexpr int PAIR_MIN_BIT = 3;          // gates on bits below pair badly: runs shorter than a vector
constexpr u64 PARALLEL_AMPLITUDES = u64(1) << 14;  // below, one thread: waking others costs more than it saves

std::atomic<int> thread_count{0};

template <class T>
using cplx = std::complex<T>;

inline double zsign(u64 x) { return 1.0 - 2.0 * double(__builtin_parityll(x)); }

inline void share_of(u64 t, u64 count, u64 shares, u64& first, u64& last) {
    const u64 per = (count + shares - 1) / shares;
    first = std::min(count, t * per);
    last = std::min(count, (t + 1) * per);
}

// Ranks of one node that share one state (a team): each runs every state kernel over its part (a contiguous
// share of the kernel's tiles or chunks), and the kernel ends at the team's barrier, in the shared memory.
// The team is the process's (its OpenMP threads read it): one device of a process runs as a team at a time.
struct Team {
    int part = 0, parts = 1;
    std::atomic<std::uint32_t>* sync = nullptr;  // arrivals, then the barrier's generation
};
Team team;

// [first, last): this rank's part of ``count`` tiles or chunks (all of them outside a team).
inline void part_range(u64 count, u64& first, u64& last) { share_of(u64(team.part), count, u64(team.parts), first, last); }

// Thread t's tiles of this rank's part.
inline void tiles_of_thread(int t, u64 tiles, int nthreads, u64& first, u64& last) {
    u64 from, to;
    part_range(tiles, from, to);
    share_of(u64(t), to - from, u64(nthreads), first, last);
    first += from, last += from;
}

template <class T>
struct Buffer {  // a thread's scratch: 64-byte aligned, uninitialised
    T* p = nullptr;
    explicit Buffer(u64 n) {
        if (n) p = static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t(64)));
    }
    ~Buffer() {
        if (p) ::operator delete[](p, std::align_val_t(64));
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    T* get() const { return p; }
};

// ---- diagonal blocks, from tables -------------------------------------------------------------------

inline void chunk_angles(u64 hi, const Tables& t, double* out) {
    double base = 0.0;
    for (u64 j = 0; j < t.nb; ++j) base += t.bcoef[j] * zsign(hi & u64(t.bmask[j]));
    const u64 size = u64(1) << t.low_bits;
    for (u64 lo = 0; lo < size; ++lo) out[lo] = t.a[lo] + base;
    for (u64 g = 0; g < t.ng; ++g) {
        const double s = zsign(hi & u64(t.gmask[g]));
        const double* c = t.c + g * size;
        for (u64 lo = 0; lo < size; ++lo) out[lo] += s * c[lo];
    }
}

// (re, im) = exp(i·sign·angle(hi, lo)) for the chunk ``hi``: phase_a[p, lo] = exp(i·sign·A[lo]) and
// phase_c[g, ±, p, lo] = exp(±i·sign·C[g, lo]) multiplied in, one sweep per group; the high-only terms
// one scalar phase per chunk.
inline void chunk_phases(u64 hi, const Tables& t, double sign, double* __restrict re, double* __restrict im) {
    double base = 0.0;
    for (u64 j = 0; j < t.nb; ++j) base += t.bcoef[j] * zsign(hi & u64(t.bmask[j]));
    const double br = std::cos(sign * base), bi = std::sin(sign * base);
    const u64 size = u64(1) << t.low_bits;
    const double *ar = t.a, *ai = t.a + size;
    for (u64 lo = 0; lo < size; ++lo) {
        re[lo] = ar[lo] * br - ai[lo] * bi;
        im[lo] = ar[lo] * bi + ai[lo] * br;
    }
    for (u64 g = 0; g < t.ng; ++g) {
        const double* table = t.c + (2 * g + (zsign(hi & u64(t.gmask[g])) > 0 ? 0 : 1)) * 2 * size;
        const double *cr = table, *ci = table + size;
        for (u64 lo = 0; lo < size; ++lo) {
            const double xr = re[lo], xi = im[lo];
            re[lo] = xr * cr[lo] - xi * ci[lo];
            im[lo] = xr * ci[lo] + xi * cr[lo];
        }
    }
}

// moments[0] += q, moments[1 + g] += z(hi & gmask_g) q; returns Σ q.
inline double accumulate_moments(const double* q, u64 size, u64 hi, const i64* gmask, u64 ng, double* moments) {
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (u64 lo = 0; lo < size; ++lo) {
        sum += q[lo];
        moments[lo] += q[lo];
    }
    for (u64 g = 0; g < ng; ++g) {
        const double sign = zsign(hi & u64(gmask[g]));
        double* row = moments + (1 + g) * size;
        for (u64 lo = 0; lo < size; ++lo) row[lo] += sign * q[lo];
    }
    return sum;
}

inline bool parallel(u64 amplitudes) { return amplitudes >= PARALLEL_AMPLITUDES; }

// ---- tiles: gathered from the state into split buffers, and back -----------------------------------

inline u64 tile_base(u64 tile, const Tiling& t) {
    u64 index = 0;
    for (u64 i = 0; i < t.nrest; ++i) index |= ((tile >> i) & 1) << u64(t.rest_bits[i]);
    return index;
}

inline std::vector<u64> run_offsets(const Tiling& t) {  // each run's first amplitude less its tile's
    std::vector<u64> offsets(u64(1) << t.nhigh, 0);
    for (u64 run = 0; run < offsets.size(); ++run)
        for (u64 i = 0; i < t.nhigh; ++i) offsets[run] |= ((run >> i) & 1) << u64(t.high_bits[i]);
    return offsets;
}

inline u64 transpose_block(u64 runs, u64 size, u64 itemsize) {
    return std::min(runs, std::max(u64(1), TRANSPOSE_BYTES / (size * itemsize)));
}

template <class T>
void gather(T* __restrict re, T* __restrict im, const cplx<T>* state, u64 base, const std::vector<u64>& offsets, int run_bits,
            bool transposed) {
    const T* psi = reinterpret_cast<const T*>(state);
    const u64 size = u64(1) << run_bits, runs = offsets.size();
    if (transposed) {  // the runs follow each other: a block of them (in L1) is read once per run offset j
        const u64 block = transpose_block(runs, size, sizeof(cplx<T>));
        if (size >= LANES && block >= LANES) {  // LANES x LANES blocks transposed in registers
            for (u64 first = 0; first < runs; first += block) {
                const u64 start = base + offsets[first];
                for (u64 r = 0; r < block; r += LANES)
                    for (u64 j = 0; j < size; j += LANES)
                        split_transposed_lanes(re, im, j * runs + first + r, runs, psi, start + r * size + j, size);
            }
            return;
        }
        for (u64 first = 0; first < runs; first += block) {
            const u64 start = base + offsets[first];
            for (u64 j = 0; j < size; ++j) {
                const u64 row = j * runs + first;
                for (u64 run = 0; run < block; ++run) {
                    const u64 k = start + run * size + j;
                    re[row + run] = psi[2 * k], im[row + run] = psi[2 * k + 1];
                }
            }
        }
        return;
    }
    for (u64 run = 0; run < runs; ++run) {
        const u64 start = base + offsets[run], row = run * size;
        if (size >= LANES) {
            for (u64 j = 0; j < size; j += LANES) split_lanes(re, im, row + j, psi, start + j);
            continue;
        }
        for (u64 j = 0; j < size; ++j) re[row + j] = psi[2 * (start + j)], im[row + j] = psi[2 * (start + j) + 1];
    }
}

// Whether stores into a state go past the caches: one of STREAM_BYTES or more (it is read back from memory
// anyway, and a cached store first reads each line it writes), at a STREAM_ALIGN-aligned address.
template <class T>
inline bool streams(const cplx<T>* psi, u64 n) {
    return n * sizeof(cplx<T>) >= STREAM_BYTES && reinterpret_cast<std::uintptr_t>(psi) % STREAM_ALIGN == 0;
}

template <bool STREAM, class T>
void scatter_runs(const T* re, const T* im, T* psi, u64 base, const std::vector<u64>& offsets, u64 size, bool transposed) {
    const u64 runs = offsets.size();
    if (transposed) {
        const u64 block = transpose_block(runs, size, sizeof(cplx<T>));
        for (u64 first = 0; first < runs; first += block) {
            const u64 start = base + offsets[first];
            for (u64 r = 0; r < block; r += LANES)
                for (u64 j = 0; j < size; j += LANES)
                    join_transposed_lanes<STREAM>(re, im, j * runs + first + r, runs, psi, start + r * size + j, size);
        }
        return;
    }
    for (u64 run = 0; run < runs; ++run) {
        const u64 start = base + offsets[run], row = run * size;
        if (size % WIDE<T> == 0)  // float32: a register of numbers at a time, not half of one
            for (u64 j = 0; j < size; j += WIDE<T>) join_wide_lanes<STREAM>(re, im, row + j, psi, start + j);
        else
            for (u64 j = 0; j < size; j += LANES) join_lanes<STREAM>(re, im, row + j, psi, start + j);
    }
}

template <class T>
void scatter(const T* re, const T* im, cplx<T>* state, u64 n, u64 base, const std::vector<u64>& offsets, int run_bits,
             bool transposed) {
    T* psi = reinterpret_cast<T*>(state);
    const u64 size = u64(1) << run_bits, runs = offsets.size();
    const bool vectors = size >= LANES && (!transposed || transpose_block(runs, size, sizeof(cplx<T>)) >= LANES);
    if (vectors) {
        if (streams(state, n) && (base | offsets.back()) % LANES == 0) {  // every run starts on a whole vector
            scatter_runs<true>(re, im, psi, base, offsets, size, transposed);
            store_fence();
        } else {
            scatter_runs<false>(re, im, psi, base, offsets, size, transposed);
        }
        return;
    }
    if (transposed) {
        const u64 block = transpose_block(runs, size, sizeof(cplx<T>));
        for (u64 first = 0; first < runs; first += block) {
            const u64 start = base + offsets[first];
            for (u64 j = 0; j < size; ++j) {
                const u64 row = j * runs + first;
                for (u64 run = 0; run < block; ++run) {
                    const u64 k = start + run * size + j;
                    psi[2 * k] = re[row + run], psi[2 * k + 1] = im[row + run];
                }
            }
        }
        return;
    }
    for (u64 run = 0; run < runs; ++run) {
        const u64 start = base + offsets[run], row = run * size;
        for (u64 j = 0; j < size; ++j) psi[2 * (start + j)] = re[row + j], psi[2 * (start + j) + 1] = im[row + j];
    }
}

// out <- values[k] of a tile's amplitudes, in the tile's order (as gather lays them out).
template <class V>
void tile_values_of(const V* values, u64 base, const std::vector<u64>& offsets, int run_bits, bool transposed, V* out) {
    const u64 size = u64(1) << run_bits, runs = offsets.size();
    if (transposed) {
        const u64 block = transpose_block(runs, size, sizeof(V));
        if (size >= LANES && block >= LANES) {  // LANES x LANES blocks transposed in registers
            for (u64 first = 0; first < runs; first += block) {
                const u64 start = base + offsets[first];
                for (u64 r = 0; r < block; r += LANES)
                    for (u64 j = 0; j < size; j += LANES) transposed_lanes(out, j * runs + first + r, runs, values, start + r * size + j, size);
            }
            return;
        }
        for (u64 first = 0; first < runs; first += block) {
            const u64 start = base + offsets[first];
            for (u64 j = 0; j < size; ++j) {
                const u64 row = j * runs + first;
                for (u64 run = 0; run < block; ++run) out[row + run] = values[start + run * size + j];
            }
        }
        return;
    }
    for (u64 run = 0; run < runs; ++run) std::memcpy(out + run * size, values + base + offsets[run], size * sizeof(V));
}

inline u64 value_bytes(int kind) { return kind == U8 ? 1 : kind == U16 ? 2 : kind == F32 ? 4 : 8; }

inline void tile_values(const Values& v, u64 base, const std::vector<u64>& offsets, int run_bits, bool transposed, void* out) {
    switch (v.kind) {
        case U8: return tile_values_of(static_cast<const std::uint8_t*>(v.data), base, offsets, run_bits, transposed, static_cast<std::uint8_t*>(out));
        case U16: return tile_values_of(static_cast<const std::uint16_t*>(v.data), base, offsets, run_bits, transposed, static_cast<std::uint16_t*>(out));
        case F32: return tile_values_of(static_cast<const float*>(v.data), base, offsets, run_bits, transposed, static_cast<float*>(out));
        default: return tile_values_of(static_cast<const double*>(v.data), base, offsets, run_bits, transposed, static_cast<double*>(out));
    }
}

// ---- single-qubit gates on split buffers ------------------------------------------------------------

template <class T>
inline bool is_rx_shaped(const cplx<T>* m) {
    return m[0].imag() == 0 && m[1].real() == 0 && m[2].real() == 0 && m[0] == m[3] && m[1] == m[2];
}

template <u64 N, class T>
void apply_2x2_lanes(T* __restrict re, T* __restrict im, u64 size, u64 step, const cplx<T>* m, double scale) {
    if (is_rx_shaped(m)) {
        const T c = T(scale * m[0].real()), s = T(scale * m[1].imag());
        for (u64 base = 0; base < size; base += 2 * step)
            for (u64 j = base; j < base + step; j += N) rx_lanes<N>(re, im, j, j + step, c, s);
        return;
    }
    T e[8];
    for (int i = 0; i < 4; ++i) e[2 * i] = T(scale * m[i].real()), e[2 * i + 1] = T(scale * m[i].imag());
    for (u64 base = 0; base < size; base += 2 * step)
        for (u64 j = base; j < base + step; j += N) gate_lanes<N>(re, im, j, j + step, e);
}

// Buffers <- scale·U buffers on ``bit``; an RX-shaped U (real diagonal, imaginary off-diagonal) takes half the multiplies.
template <class T>
void apply_2x2(T* __restrict re, T* __restrict im, u64 size, int bit, const cplx<T>* m, double scale = 1.0) {
    const u64 step = u64(1) << bit;
    if (step >= WIDE<T>) return apply_2x2_lanes<WIDE<T>>(re, im, size, step, m, scale);  // runs of whole registers
    if (step >= LANES) return apply_2x2_lanes<LANES>(re, im, size, step, m, scale);
    if (is_rx_shaped(m)) {  // U = [[c, is], [is, c]]
        const double c = scale * m[0].real(), s = scale * m[1].imag();
        for (u64 base = 0; base < size; base += 2 * step)
            for (u64 j = base; j < base + step; ++j) {
                const u64 k = j + step;
                const double xr = re[j], xi = im[j], yr = re[k], yi = im[k];
                re[j] = T(c * xr - s * yi), im[j] = T(c * xi + s * yr), re[k] = T(c * yr - s * xi), im[k] = T(c * yi + s * xr);
            }
        return;
    }
    double u[8];
    for (int i = 0; i < 4; ++i) u[2 * i] = scale * m[i].real(), u[2 * i + 1] = scale * m[i].imag();
    for (u64 base = 0; base < size; base += 2 * step)
        for (u64 j = base; j < base + step; ++j) {
            const u64 k = j + step;
            const double xr = re[j], xi = im[j], yr = re[k], yi = im[k];
            re[j] = T(u[0] * xr - u[1] * xi + u[2] * yr - u[3] * yi);
            im[j] = T(u[0] * xi + u[1] * xr + u[2] * yi + u[3] * yr);
            re[k] = T(u[4] * xr - u[5] * xi + u[6] * yr - u[7] * yi);
            im[k] = T(u[4] * xi + u[5] * xr + u[6] * yi + u[7] * yr);
        }
}

template <u64 N, class T>
double moment_of_lanes(const T* pre, const T* pim, const T* lre, const T* lim, u64 size, u64 step, int generator) {
    double acc = 0.0;
    for (u64 base = 0; base < size; base += 2 * step)
        for (u64 j = base; j < base + step; j += N)
            acc += generator == 1 ? moment_lanes<1, N>(pre, pim, lre, lim, j, j + step) : moment_lanes<2, N>(pre, pim, lre, lim, j, j + step);
    return acc;
}

// Im<λ|P|φ> on ``bit`` for P = X (1) or Y (2); 0 for a gate without a parameter (0).
template <class T>
double moment(const T* pre, const T* pim, const T* lre, const T* lim, u64 size, int bit, int generator) {
    if (generator == 0) return 0.0;
    const u64 step = u64(1) << bit;
    if (step >= WIDE<T>) return moment_of_lanes<WIDE<T>>(pre, pim, lre, lim, size, step, generator);
    if (step >= LANES) return moment_of_lanes<LANES>(pre, pim, lre, lim, size, step, generator);
    double acc = 0.0;
    for (u64 base = 0; base < size; base += 2 * step) {
        if (generator == 1) {
            for (u64 j = base; j < base + step; ++j) {
                const u64 k = j + step;
                acc += (lre[j] * pim[k] - lim[j] * pre[k]) + (lre[k] * pim[j] - lim[k] * pre[j]);
            }
        } else {
            for (u64 j = base; j < base + step; ++j) {
                const u64 k = j + step;
                acc += (lre[k] * pre[j] + lim[k] * pim[j]) - (lre[j] * pre[k] + lim[j] * pim[k]);
            }
        }
    }
    return acc;
}

template <u64 N, class T>
double rx_undo_with_moment(T* pre, T* pim, T* lre, T* lim, u64 size, u64 step, const cplx<T>* inverse) {
    const T c = inverse[0].real(), s = inverse[1].imag();
    double acc = 0.0;
    for (u64 base = 0; base < size; base += 2 * step)
        for (u64 j = base; j < base + step; j += N) {
            acc += moment_lanes<1, N>(pre, pim, lre, lim, j, j + step);
            rx_lanes<N>(pre, pim, j, j + step, c, s);
            rx_lanes<N>(lre, lim, j, j + step, c, s);
        }
    return acc;
}

// φ, λ <- U† φ, U† λ on ``bit``; returns the moment of P (X or Y, commuting with U), taken before undoing.
template <class T>
double undo_with_moment(T* pre, T* pim, T* lre, T* lim, u64 size, int bit, const cplx<T>* inverse, int generator) {
    if (generator == 1 && is_rx_shaped(inverse)) {  // RX: moment and both undos in one sweep
        const u64 step = u64(1) << bit;
        if (step >= WIDE<T>) return rx_undo_with_moment<WIDE<T>>(pre, pim, lre, lim, size, step, inverse);
        if (step >= LANES) return rx_undo_with_moment<LANES>(pre, pim, lre, lim, size, step, inverse);
        double acc = 0.0;
        const double c = inverse[0].real(), s = inverse[1].imag();
        for (u64 base = 0; base < size; base += 2 * step)
            for (u64 j = base; j < base + step; ++j) {
                const u64 k = j + step;
                const double ar = pre[j], ai = pim[j], br = pre[k], bi = pim[k];
                const double xr = lre[j], xi = lim[j], yr = lre[k], yi = lim[k];
                acc += (xr * bi - xi * br) + (yr * ai - yi * ar);
                pre[j] = T(c * ar - s * bi), pim[j] = T(c * ai + s * br), pre[k] = T(c * br - s * ai), pim[k] = T(c * bi + s * ar);
                lre[j] = T(c * xr - s * yi), lim[j] = T(c * xi + s * yr), lre[k] = T(c * yr - s * xi), lim[k] = T(c * yi + s * xr);
            }
        return acc;
    }
    const double acc = moment(pre, pim, lre, lim, size, bit, generator);
    apply_2x2(pre, pim, size, bit, inverse);
    apply_2x2(lre, lim, size, bit, inverse);
    return acc;
}

// An L1-sized block of the split buffers a sweep touches (two: a gate sweep; four: φ's and λ's, its moments)
// holds 2^this amplitudes. Gate sweeps in blocks of 2^11 c128 amplitudes took 0.88x the time of 2^10 on tiles
// of 2^15 and 2^17 (blocks of 2^12 1.2x): docs/fused.md.
template <class T>
constexpr int block_bits(int buffers, u64 bytes) {  // 2^this amplitudes of ``buffers`` split buffers fill ``bytes``
    int bits = 0;
    while ((u64(buffers) * sizeof(T)) << (bits + 1) <= bytes) ++bits;
    return bits;
}

template <class T>
constexpr int subtile_bits(int buffers) {
    return block_bits<T>(buffers, SUBTILE_BYTES);
}

template <class T>
inline u64 inner_count(const Gates<T>& g, u64 width, int buffers) {  // leading gates (by tile bit) inside an L1-sized block
    if (width <= (u64(1) << subtile_bits<T>(buffers))) return g.count;
    u64 count = 0;
    while (count < g.count && g.tile_bits[count] < subtile_bits<T>(buffers)) ++count;
    return count;
}

// inner_count for the sweeps that take gates two at a time: when both ranges are odd, the last inner gate joins
// the outer ones, so that no gate takes a sweep alone (at about half a paired gate's rate; outer pairs, in L2,
// run as fast as inner ones in L1: 14 gates on a 2^17 tile, 0.111 against 0.126 ns per amplitude and gate).
template <class T>
inline u64 paired_inner_count(const Gates<T>& g, u64 width, int buffers) {
    const u64 count = inner_count(g, width, buffers);
    return count % 2 && (g.count - count) % 2 ? count - 1 : count;
}

// x with a zero bit put in at the bit of ``step`` (a power of two).
inline u64 insert_zero(u64 x, u64 step) { return ((x & ~(step - 1)) << 1) | (x & (step - 1)); }

// The first amplitude of quadruple number q0 (a multiple of step1): q0 with zero bits put in at the two gates' bits.
inline u64 quad_start(u64 q0, u64 step1, u64 step2) { return insert_zero(insert_zero(q0, step1), step2); }

// The same for octuple number o0 (a multiple of step1) and three ascending steps.
inline u64 octuple_start(u64 o0, u64 step1, u64 step2, u64 step3) { return insert_zero(quad_start(o0, step1, step2), step3); }

// Whether a sweep of three takes gate i when ``left`` gates from i remain: not when four do (two pairs take as many sweeps).
inline bool three_of(u64 left) { return left == 3 || left >= 5; }

template <u64 N, class T>
void rx_pair_of_lanes(T* re, T* im, u64 size, u64 step1, u64 step2, T c1, T s1, T c2, T s2) {
    for (u64 q0 = 0; q0 < (size >> 2); q0 += step1) {
        const u64 start = quad_start(q0, step1, step2);
        for (u64 a = start; a < start + step1; a += N) rx_pair_lanes<N>(re, im, a, a + step1, a + step2, a + step2 + step1, c1, s1, c2, s2);
    }
}

template <class T>
void apply_rx_pair(T* re, T* im, u64 size, int bit1, int bit2, T c1, T s1, T c2, T s2) {
    const u64 step1 = u64(1) << bit1, step2 = u64(1) << bit2;
    if (step1 >= WIDE<T>) return rx_pair_of_lanes<WIDE<T>>(re, im, size, step1, step2, c1, s1, c2, s2);
    rx_pair_of_lanes<LANES>(re, im, size, step1, step2, c1, s1, c2, s2);
}

template <u64 N, class T, bool U1, bool U2>
void scaled_pair_of_lanes(T* re, T* im, u64 size, u64 step1, u64 step2, T k1, T k2) {
    for (u64 q0 = 0; q0 < (size >> 2); q0 += step1) {
        const u64 start = quad_start(q0, step1, step2);
        for (u64 a = start; a < start + step1; a += N)
            rx_pair_scaled_lanes<N, T, U1, U2>(re, im, a, a + step1, a + step2, a + step2 + step1, k1, k2);
    }
}

template <class T, bool U1, bool U2>
void scaled_pair(T* re, T* im, u64 size, u64 step1, u64 step2, T k1, T k2) {
    if (step1 >= WIDE<T>) return scaled_pair_of_lanes<WIDE<T>, T, U1, U2>(re, im, size, step1, step2, k1, k2);
    scaled_pair_of_lanes<LANES, T, U1, U2>(re, im, size, step1, step2, k1, k2);
}

// Two RX-shaped gates less their factors (half the multiplies); form bit 0: the first has a unit diagonal, bit 1 the second.
template <class T>
void apply_scaled_pair(T* re, T* im, u64 size, int bit1, int bit2, T k1, T k2, int form) {
    const u64 step1 = u64(1) << bit1, step2 = u64(1) << bit2;
    switch (form) {
        case 0: return scaled_pair<T, false, false>(re, im, size, step1, step2, k1, k2);
        case 1: return scaled_pair<T, true, false>(re, im, size, step1, step2, k1, k2);
        case 2: return scaled_pair<T, false, true>(re, im, size, step1, step2, k1, k2);
        default: return scaled_pair<T, true, true>(re, im, size, step1, step2, k1, k2);
    }
}

struct Scaled {
    double k;
    bool unit;
    double factor;
};

// An RX-shaped gate as factor·(its scaled form): the factor its larger entry's, so |k| ≤ 1.
template <class T>
inline Scaled scaled_rx(const cplx<T>* m) {
    const double c = m[0].real(), s = m[1].imag();
    if (std::abs(c) >= std::abs(s)) return {s / c, true, c};
    return {c / s, false, s};
}

template <u64 N, class T, bool U1, bool U2, bool U3>
void scaled_triple_of_lanes(T* re, T* im, u64 size, u64 step1, u64 step2, u64 step3, T k1, T k2, T k3) {
    for (u64 o0 = 0; o0 < (size >> 3); o0 += step1) {
        const u64 start = octuple_start(o0, step1, step2, step3);
        for (u64 a = start; a < start + step1; a += N) rx_triple_scaled_lanes<N, T, U1, U2, U3>(re, im, a, step1, step2, step3, k1, k2, k3);
    }
}

template <class T, bool U1, bool U2, bool U3>
void scaled_triple(T* re, T* im, u64 size, u64 step1, u64 step2, u64 step3, T k1, T k2, T k3) {
    if (step1 >= WIDE<T>) return scaled_triple_of_lanes<WIDE<T>, T, U1, U2, U3>(re, im, size, step1, step2, step3, k1, k2, k3);
    scaled_triple_of_lanes<LANES, T, U1, U2, U3>(re, im, size, step1, step2, step3, k1, k2, k3);
}

// Three RX-shaped gates less their factors on ascending bits; form bit j: gate j has a unit diagonal.
template <class T>
void apply_scaled_triple(T* re, T* im, u64 size, const i64* bits, const Scaled* s) {
    const u64 s1 = u64(1) << bits[0], s2 = u64(1) << bits[1], s3 = u64(1) << bits[2];
    const T k1 = T(s[0].k), k2 = T(s[1].k), k3 = T(s[2].k);
    switch (int(s[0].unit) | (int(s[1].unit) << 1) | (int(s[2].unit) << 2)) {
        case 0: return scaled_triple<T, false, false, false>(re, im, size, s1, s2, s3, k1, k2, k3);
        case 1: return scaled_triple<T, true, false, false>(re, im, size, s1, s2, s3, k1, k2, k3);
        case 2: return scaled_triple<T, false, true, false>(re, im, size, s1, s2, s3, k1, k2, k3);
        case 3: return scaled_triple<T, true, true, false>(re, im, size, s1, s2, s3, k1, k2, k3);
        case 4: return scaled_triple<T, false, false, true>(re, im, size, s1, s2, s3, k1, k2, k3);
        case 5: return scaled_triple<T, true, false, true>(re, im, size, s1, s2, s3, k1, k2, k3);
        case 6: return scaled_triple<T, false, true, true>(re, im, size, s1, s2, s3, k1, k2, k3);
        default: return scaled_triple<T, true, true, true>(re, im, size, s1, s2, s3, k1, k2, k3);
    }
}

// Sweeps of tiles of 2^18 amplitudes or more, past L2, take three gates at once where registers allow (32 of them:
// AVX-512): 14 gates on 2^18 tiles 0.87-0.91x the time of pairs (c128 and c64); on 2^15-2^17 tiles pairs were as
// fast or faster (c64 2^17 1.2x).
constexpr bool TRIPLE_REGISTERS = VECTOR_BYTES == 64;
constexpr u64 TRIPLE_MIN_WIDTH = u64(1) << 18;
inline bool triples_for(u64 width) { return TRIPLE_REGISTERS && width >= TRIPLE_MIN_WIDTH; }

// How many gates of [i, last) one sweep takes from gate i: three RX-shaped ones (with ``triples`` and ``three_of``;
// not from gate 0, which takes the range's factor), two, or one.
template <class T>
inline u64 group_at(const Gates<T>& g, const cplx<T>* mats, u64 i, u64 last, bool triples) {
    if (i + 1 >= last || g.tile_bits[i] < PAIR_MIN_BIT || !is_rx_shaped(mats + 4 * i) || !is_rx_shaped(mats + 4 * (i + 1))) return 1;
    if (triples && i != 0 && three_of(last - i) && is_rx_shaped(mats + 4 * (i + 2))) return 3;
    return 2;
}

// Gates first..last-1 (on ascending bits), two or three RX-shaped ones per sweep where they follow each other,
// less their factors, all but gate 0's, which is applied times ``factor``, the product of the others'.
template <class T>
void apply_range(T* re, T* im, u64 size, const Gates<T>& g, const cplx<T>* mats, u64 first, u64 last, double factor, bool triples) {
    u64 i = first;
    while (i < last) {
        const u64 group = group_at(g, mats, i, last, triples);
        if (group == 3) {
            const Scaled s[3] = {scaled_rx(mats + 4 * i), scaled_rx(mats + 4 * (i + 1)), scaled_rx(mats + 4 * (i + 2))};
            apply_scaled_triple(re, im, size, g.tile_bits + i, s);
        } else if (group == 2 && i == 0) {
            const cplx<T>*m1 = mats, *m2 = mats + 4;
            apply_rx_pair(re, im, size, int(g.tile_bits[0]), int(g.tile_bits[1]), T(factor * m1[0].real()), T(factor * m1[1].imag()),
                          m2[0].real(), m2[1].imag());
        } else if (group == 2) {
            const Scaled a = scaled_rx(mats + 4 * i), b = scaled_rx(mats + 4 * (i + 1));
            apply_scaled_pair(re, im, size, int(g.tile_bits[i]), int(g.tile_bits[i + 1]), T(a.k), T(b.k), int(a.unit) | (int(b.unit) << 1));
        } else {
            apply_2x2(re, im, size, int(g.tile_bits[i]), mats + 4 * i, i == 0 ? factor : 1.0);
        }
        i += group;
    }
}

// The product of the factors apply_range leaves out over ``ranges`` (first, last gate and whether sweeps take three):
// those of the gates in groups of two or three but gate 0's group.
struct GateRange {
    u64 first, last;
    bool triples;
};

template <class T>
double scaled_factor(const Gates<T>& g, const cplx<T>* mats, const GateRange* ranges, u64 count) {
    double factor = 1.0;
    for (u64 r = 0; r < count; ++r) {
        for (u64 i = ranges[r].first; i < ranges[r].last;) {
            const u64 group = group_at(g, mats, i, ranges[r].last, ranges[r].triples);
            if (group > 1 && i != 0)  // a group at gate 0 is applied as it is, times ``factor``
                for (u64 j = i; j < i + group; ++j) factor *= scaled_rx(mats + 4 * j).factor;
            i += group;
        }
    }
    return factor;
}

// An L2-sized block of the buffers a sweep touches: gates on a tile's bits above its L1 blocks but below this are
// swept one such block at a time (tiles of 2 MiB and more went past L2 once per gate or group of gates).
constexpr u64 MIDTILE_BYTES = u64(1) << 19;

// The end of the gates [inner, count) a tile of ``width`` sweeps one L2-sized block at a time: those below
// midtile bits, one fewer where both ranges would otherwise end in a gate alone (it pairs with the next).
template <class T>
u64 middle_of(const Gates<T>& g, u64 inner, u64 width, int buffers) {
    const int bits = block_bits<T>(buffers, MIDTILE_BYTES);
    if (width <= (u64(1) << bits)) return inner;
    u64 middle = inner;
    while (middle < g.count && g.tile_bits[middle] < bits) ++middle;
    return (middle - inner) % 2 && (g.count - middle) % 2 ? middle - 1 : middle;
}

// How a pass's gates (``mats``: g's or their inverses) sweep a tile of ``width``: the gates on its low bits one
// L1-sized block at a time (``block``, each of ``subtile`` amplitudes), the others (``outer``) one L2-sized block
// at a time (gates inner..middle-1, blocks of ``midtile``) and over the whole tile (the rest). The gates act on
// distinct wires: the parts go in any order, and beside other work on the same blocks.
template <class T>
struct GateSweeps {
    const Gates<T>& g;
    const cplx<T>* mats;
    u64 width, inner, subtile, middle, midtile;
    bool triples;
    double factor, inner_factor;

    // ``buffers``: the split buffers the blocks' work touches (2: these gates alone; 4: φ's and λ's beside them).
    GateSweeps(const Gates<T>& gates, const cplx<T>* m, u64 w, int buffers = 2)
        : g(gates), mats(m), width(w), inner(paired_inner_count(gates, w, buffers)),
          subtile(std::min(w, u64(1) << subtile_bits<T>(buffers))), middle(middle_of(gates, inner, w, buffers)),
          midtile(std::min(w, u64(1) << block_bits<T>(buffers, MIDTILE_BYTES))), triples(triples_for(w)), factor(1.0), inner_factor(1.0) {
        if (!gates.count || !m) return;
        const GateRange ranges[3] = {{0, inner, TRIPLE_REGISTERS}, {inner, middle, TRIPLE_REGISTERS}, {middle, g.count, triples}};
        factor = scaled_factor(gates, m, ranges, 3);
        inner_factor = scaled_factor(gates, m, ranges, 1);
    }

    void block(T* re, T* im) const {  // one block's inner gates; re and im point at the block
        if (inner) apply_range(re, im, subtile, g, mats, 0, inner, factor, TRIPLE_REGISTERS);
    }
    void block_alone(T* re, T* im) const {  // the inner gates on a block the outer ones never sweep
        if (inner) apply_range(re, im, subtile, g, mats, 0, inner, inner_factor, TRIPLE_REGISTERS);
    }
    void outer(T* re, T* im) const {
        if (inner < middle)
            for (u64 at = 0; at < width; at += midtile) apply_range(re + at, im + at, midtile, g, mats, inner, middle, factor, TRIPLE_REGISTERS);
        if (middle < g.count) apply_range(re, im, width, g, mats, middle, g.count, factor, triples);
    }
};

// All of a pass's gates on a tile.
template <class T>
void apply_gates(T* re, T* im, u64 width, const Gates<T>& g, const cplx<T>* mats) {
    if (!g.count) return;
    const GateSweeps<T> sweeps(g, mats, width);
    for (u64 block = 0; block < width; block += sweeps.subtile) sweeps.block(re + block, im + block);
    sweeps.outer(re, im);
}

// The X moments on the step1 pairs and on the step2 pairs over every quadruple, summed in vector registers.
template <u64 N, class T>
void x_moment_pair_of_lanes(const T* pre, const T* pim, const T* lre, const T* lim, u64 size, u64 step1, u64 step2, double& m1, double& m2) {
    using V = typename Vec<T, N>::v;
    V first = splat<V>(T(0)), second = splat<V>(T(0));
    for (u64 q0 = 0; q0 < (size >> 2); q0 += step1) {
        const u64 start = quad_start(q0, step1, step2);
        for (u64 a = start; a < start + step1; a += N) {
            const u64 q[4] = {a, a + step1, a + step2, a + step1 + step2};
            V pr[4], pi[4], lr[4], li[4];
            for (int i = 0; i < 4; ++i) pr[i] = load<V>(pre + q[i]), pi[i] = load<V>(pim + q[i]), lr[i] = load<V>(lre + q[i]), li[i] = load<V>(lim + q[i]);
            first += moment_terms<1>(pr[0], pi[0], pr[1], pi[1], lr[0], li[0], lr[1], li[1]) +
                     moment_terms<1>(pr[2], pi[2], pr[3], pi[3], lr[2], li[2], lr[3], li[3]);
            second += moment_terms<1>(pr[0], pi[0], pr[2], pi[2], lr[0], li[0], lr[2], li[2]) +
                      moment_terms<1>(pr[1], pi[1], pr[3], pi[3], lr[1], li[1], lr[3], li[3]);
        }
    }
    m1 = total(first), m2 = total(second);
}

template <class T>
void x_moment_pair_sweep(const T* pre, const T* pim, const T* lre, const T* lim, u64 size, u64 step1, u64 step2, double& m1, double& m2) {
    if (step1 >= WIDE<T>) return x_moment_pair_of_lanes<WIDE<T>>(pre, pim, lre, lim, size, step1, step2, m1, m2);
    x_moment_pair_of_lanes<LANES>(pre, pim, lre, lim, size, step1, step2, m1, m2);
}

// m[j] = the X moment on the steps[j] pairs, j < 3, over every octuple: φ's eight amplitudes held, λ's read one by one.
template <u64 N, class T>
void x_moment_triple_of_lanes(const T* pre, const T* pim, const T* lre, const T* lim, u64 size, const u64* steps, double* m) {
    using V = typename Vec<T, N>::v;
    V acc[3] = {splat<V>(T(0)), splat<V>(T(0)), splat<V>(T(0))};
    for (u64 o0 = 0; o0 < (size >> 3); o0 += steps[0]) {
        const u64 start = octuple_start(o0, steps[0], steps[1], steps[2]);
        for (u64 a = start; a < start + steps[0]; a += N) {
            u64 at[8];
            V pr[8], pi[8];
            for (u64 o = 0; o < 8; ++o) {
                at[o] = octuple_member(a, o, steps[0], steps[1], steps[2]);
                pr[o] = load<V>(pre + at[o]), pi[o] = load<V>(pim + at[o]);
            }
            for (u64 o = 0; o < 8; ++o) {  // Im(conj(λ_o) φ_k), k the partner of o: each pair's two halves
                const V lr = load<V>(lre + at[o]), li = load<V>(lim + at[o]);
                for (u64 j = 0; j < 3; ++j) acc[j] += lr * pi[o ^ (u64(1) << j)] - li * pr[o ^ (u64(1) << j)];
            }
        }
    }
    for (u64 j = 0; j < 3; ++j) m[j] = total(acc[j]);
}

template <class T>
void x_moment_triple_sweep(const T* pre, const T* pim, const T* lre, const T* lim, u64 size, const u64* steps, double* m) {
    if (steps[0] >= WIDE<T>) return x_moment_triple_of_lanes<WIDE<T>>(pre, pim, lre, lim, size, steps, m);
    x_moment_triple_of_lanes<LANES>(pre, pim, lre, lim, size, steps, m);
}

// How many X moments of [i, last) one sweep takes from gate i: three (with ``triples`` and ``three_of``), two or one.
template <class T>
inline u64 moment_group_at(const Gates<T>& g, u64 i, u64 last, bool triples) {
    if (i + 1 >= last || g.tile_bits[i] < PAIR_MIN_BIT || g.generators[i] != 1 || g.generators[i + 1] != 1) return 1;
    return triples && three_of(last - i) && g.generators[i + 2] == 1 ? 3 : 2;
}

// out[i] += the moment of gate i, for gates first..last-1, two or three X moments per sweep where they follow each other.
template <class T>
void moments_range(const T* pre, const T* pim, const T* lre, const T* lim, u64 size, const Gates<T>& g, double* out, u64 first, u64 last,
                   bool triples) {
    u64 i = first;
    while (i < last) {
        const u64 group = moment_group_at(g, i, last, triples);
        if (group == 3) {
            const u64 steps[3] = {u64(1) << g.tile_bits[i], u64(1) << g.tile_bits[i + 1], u64(1) << g.tile_bits[i + 2]};
            double m[3];
            x_moment_triple_sweep(pre, pim, lre, lim, size, steps, m);
            out[i] += m[0], out[i + 1] += m[1], out[i + 2] += m[2];
        } else if (group == 2) {
            double m1, m2;
            x_moment_pair_sweep(pre, pim, lre, lim, size, u64(1) << g.tile_bits[i], u64(1) << g.tile_bits[i + 1], m1, m2);
            out[i] += m1, out[i + 1] += m2;
        } else {
            out[i] += moment(pre, pim, lre, lim, size, int(g.tile_bits[i]), g.generators[i]);
        }
        i += group;
    }
}

// out[i] += the moment of gate i for gates inner..count-1 over a tile: those below middle_of's end one L2-sized
// block at a time, as GateSweeps::outer.
template <class T>
void outer_moments(const T* pre, const T* pim, const T* lre, const T* lim, u64 width, const Gates<T>& g, double* out, u64 inner) {
    const u64 midtile = std::min(width, u64(1) << block_bits<T>(4, MIDTILE_BYTES)), middle = middle_of(g, inner, width, 4);
    if (inner < middle)
        for (u64 at = 0; at < width; at += midtile) moments_range(pre + at, pim + at, lre + at, lim + at, midtile, g, out, inner, middle, false);
    if (middle < g.count) moments_range(pre, pim, lre, lim, width, g, out, middle, g.count, triples_for(width));
}

// outer_moments times ``scale``: where λ holds factors of gates undone early that φ does not (GateSweeps::block
// against block_alone), the ratio of the two scales them back.
template <class T>
void scaled_outer_moments(const T* pre, const T* pim, const T* lre, const T* lim, u64 width, const Gates<T>& g, double* out, u64 inner,
                          double scale) {
    if (scale == 1.0 || inner >= g.count) return outer_moments(pre, pim, lre, lim, width, g, out, inner);
    std::vector<double> high(g.count, 0.0);
    outer_moments(pre, pim, lre, lim, width, g, high.data(), inner);
    for (u64 i = inner; i < g.count; ++i) out[i] += high[i] * scale;
}

template <class T>
void tile_moments(const T* pre, const T* pim, const T* lre, const T* lim, u64 width, const Gates<T>& g, double* out) {
    if (!g.count) return;
    const u64 inner = paired_inner_count(g, width, 4);
    const u64 subtile = std::min(width, u64(1) << subtile_bits<T>(4));
    for (u64 block = 0; block < width; block += subtile)
        moments_range(pre + block, pim + block, lre + block, lim + block, subtile, g, out, 0, inner, false);
    outer_moments(pre, pim, lre, lim, width, g, out, inner);
}

// ---- a swept diagonal block on a tile -----------------------------------------------------------------

// exp(i·x) without a library call, so that the loop vectorises: x = n·π/2 + r, |r| ≤ π/4 (float64 states: π/2 in
// two parts, the first exact in n·PIO2_HI), then Taylor polynomials of r (the next terms are below 5e-17).
constexpr double TWO_OVER_PI = 0.6366197723675814;
constexpr double PIO2_HI = 1.57079632673412561417e00;
constexpr double PIO2_LO = 6.07710050650619224932e-11;
constexpr double PIO2 = 1.57079632679489661923;
constexpr double S1 = -1.0 / 6, S2 = 1.0 / 120, S3 = -1.0 / 5040, S4 = 1.0 / 362880, S5 = -1.0 / 39916800, S6 = 1.0 / 6227020800,
                 S7 = -1.0 / 1307674368000;
constexpr double C1 = -1.0 / 2, C2 = 1.0 / 24, C3 = -1.0 / 720, C4 = 1.0 / 40320, C5 = -1.0 / 3628800, C6 = 1.0 / 479001600,
                 C7 = -1.0 / 87178291200, C8 = 1.0 / 20922789888000;

// float32 states: the reduction in float64 by one π/2 (the angle may be large), the polynomials in float32 to its
// precision (next terms below 2e-9), twice the lanes and fewer terms.
constexpr float FS1 = -1.0f / 6, FS2 = 1.0f / 120, FS3 = -1.0f / 5040, FS4 = 1.0f / 362880;
constexpr float FC1 = -1.0f / 2, FC2 = 1.0f / 24, FC3 = -1.0f / 720, FC4 = 1.0f / 40320, FC5 = -1.0f / 3628800;

// exp(i·x) = i^q (c + i·s) for x = n·π/2 + r, q = n mod 4: whether q is odd, and the signs of cos x and sin x.
// q in float64 (exact for any integer n: a float64 to int64 conversion has no AVX2 form, and with one the loop ran
// one amplitude at a time there), the rest in T (0..3 are exact in either), float32 at twice the lanes.
template <class T>
struct Quadrant {
    T odd, cos_sign, sin_sign;
    QB_INLINE explicit Quadrant(double n) {
        const double q = n - 4.0 * std::floor(n * 0.25), whole = std::floor(q * 0.5);  // q in 0..3
        const T half = T(whole), o = T(q - 2.0 * whole);
        odd = o, cos_sign = T(1) - T(2) * (o + half - T(2) * o * half), sin_sign = T(1) - T(2) * half;  // cos < 0: q 1, 2
    }
};

// Buffers *= exp(i·(offset + slope·value)) per amplitude: the angle in float64, exp(i·r) in the buffers' precision.
// Every fast-math flag but reassociation, which would fold float64's two parts of π/2 into one.
template <class T, class V>
__attribute__((optimize("no-associative-math"))) void phase_tile_by_angle(T* __restrict re, T* __restrict im, u64 size, const V* values, double offset, double slope) {
    if constexpr (std::is_same_v<T, float>) {
#pragma omp simd
        for (u64 t = 0; t < size; ++t) {
            const double x = offset + slope * double(values[t]);
            const double n = std::floor(x * TWO_OVER_PI + 0.5);
            const float r = float(x - n * PIO2);  // off by |n|·2.3e-16 at most (6e-17 in one FMA): below float32's rounding
            const float r2 = r * r;
            const float s = r + r * r2 * (FS1 + r2 * (FS2 + r2 * (FS3 + r2 * FS4)));
            const float c = 1.0f + r2 * (FC1 + r2 * (FC2 + r2 * (FC3 + r2 * (FC4 + r2 * FC5))));
            const Quadrant<float> q(n);
            const float pr = q.cos_sign * (c + q.odd * (s - c)), pi = q.sin_sign * (s + q.odd * (c - s));
            const float xr = re[t], xi = im[t];
            re[t] = xr * pr - xi * pi;
            im[t] = xr * pi + xi * pr;
        }
        return;
    }
#pragma omp simd
    for (u64 t = 0; t < size; ++t) {
        const double x = offset + slope * double(values[t]);
        const double n = std::floor(x * TWO_OVER_PI + 0.5);
        const double r = (x - n * PIO2_HI) - n * PIO2_LO;
        const double r2 = r * r;
        const double s = r + r * r2 * (S1 + r2 * (S2 + r2 * (S3 + r2 * (S4 + r2 * (S5 + r2 * (S6 + r2 * S7))))));
        const double c = 1.0 + r2 * (C1 + r2 * (C2 + r2 * (C3 + r2 * (C4 + r2 * (C5 + r2 * (C6 + r2 * (C7 + r2 * C8)))))));
        const Quadrant<double> q(n);
        const double pr = q.cos_sign * (c + q.odd * (s - c)), pi = q.sin_sign * (s + q.odd * (c - s));
        const double xr = re[t], xi = im[t];
        re[t] = T(xr * pr - xi * pi);
        im[t] = T(xr * pi + xi * pr);
    }
}

// A level's phase picked in registers: one two-register permute (vpermt2pd/ps) takes PERMUTE_SPAN<T> table entries,
// a few of them the whole table of a cut's levels, where loading each lane's entry took two loads and inserts.
// GCC's __builtin_shuffle, on 64-byte registers (AVX-512); elsewhere entries are loaded lane by lane.
#if defined(__GNUC__) && !defined(__clang__)
constexpr bool PERMUTE_PHASES = VECTOR_BYTES == 64;
#else
constexpr bool PERMUTE_PHASES = false;
#endif
template <class T>
constexpr u64 PERMUTE_SPAN = 2 * WIDE<T>;  // 16 entries c128, 32 c64
// Spans a lookup takes at most (tables of up to 48 levels c128, 128 c64). ns an amplitude, one thread, uint8
// levels, against 0.38 (c128) and 0.44 (c64) loaded lane by lane: c128 0.26 for 1 or 2 spans, 0.34 for 3; c64 0.13
// (2 spans), 0.22 (4).
template <class T>
constexpr u64 PERMUTE_MAX_CHUNKS = sizeof(T) == 8 ? 3 : 4;

// The buffers' vectors at t *= (pr, pi).
template <class V, class T>
QB_INLINE void times_phases(T* re, T* im, u64 t, const V& pr, const V& pi) {
    const V xr = load<V>(re + t), xi = load<V>(im + t);
    store(re + t, xr * pr - xi * pi);
    store(im + t, xr * pi + xi * pr);
}

// Buffers [from, size) *= table[levels] one amplitude at a time (what is short of a vector).
template <class T, class L>
void phase_by_levels_from(T* re, T* im, u64 from, u64 size, const L* levels, const T* table) {
    for (u64 t = from; t < size; ++t) {
        const T pr = table[2 * u64(levels[t])], pi = table[2 * u64(levels[t]) + 1], xr = re[t], xi = im[t];
        re[t] = xr * pr - xi * pi;
        im[t] = xr * pi + xi * pr;
    }
}

// W levels (uint8 or uint16) as a register of W indices as wide as the state's numbers (GCC's own widening of a
// vector of levels went lane by lane, 3.6x the time of the whole lookup for uint8).
template <class I, class L, u64 W>
QB_INLINE I widen_levels(const L* p) {
#if defined(__AVX512F__)
    __m512i x;
    if constexpr (sizeof(L) == 1 && W == 16) x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    else if constexpr (sizeof(L) == 1) x = _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    else if constexpr (W == 16) x = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    else x = _mm512_cvtepu16_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return reinterpret_cast<I&>(x);
#else
    I out;
    for (u64 l = 0; l < W; ++l) out[l] = p[l];
    return out;
#endif
}

// Buffers *= table[levels] (table: (real, imaginary) pairs of ``count`` levels, at most CHUNKS permute spans).
template <u64 CHUNKS, class T, class L>
void phase_by_permutes(T* __restrict re, T* __restrict im, u64 size, const L* levels, const T* table, u64 count) {
    constexpr u64 W = WIDE<T>, SPAN = PERMUTE_SPAN<T>, SHIFT = __builtin_ctzll(SPAN);
    using V = typename Vec<T, W>::v;
    using S = std::conditional_t<sizeof(T) == 8, std::int64_t, std::int32_t>;  // an index lane as wide as T
    using I = typename Vec<S, W>::v;
    alignas(64) T split[2][CHUNKS * SPAN] = {};
    for (u64 e = 0; e < count; ++e) split[0][e] = table[2 * e], split[1][e] = table[2 * e + 1];
    V tr[2 * CHUNKS], ti[2 * CHUNKS];
    for (u64 j = 0; j < 2 * CHUNKS; ++j) tr[j] = load<V>(split[0] + j * W), ti[j] = load<V>(split[1] + j * W);
    const u64 whole = size - size % W;
    for (u64 t = 0; t < whole; t += W) {
        const I level = widen_levels<I, L, W>(levels + t), at = level & splat<I>(S(SPAN - 1)), chunk = level >> S(SHIFT);
        V pr = __builtin_shuffle(tr[0], tr[1], at), pi = __builtin_shuffle(ti[0], ti[1], at);
        for (u64 c = 1; c < CHUNKS; ++c) {
            const auto here = chunk == splat<I>(S(c));
            pr = here ? __builtin_shuffle(tr[2 * c], tr[2 * c + 1], at) : pr;
            pi = here ? __builtin_shuffle(ti[2 * c], ti[2 * c + 1], at) : pi;
        }
        times_phases(re, im, t, pr, pi);
    }
    phase_by_levels_from(re, im, whole, size, levels, table);
}

// float32 states on AVX2: a level's phase as a product of 8-entry tables, each one register, an entry picked per lane
// by one permute (vpermps; AVX2 has no permute of two registers, and a table of more levels, looked up lane by lane,
// costs two loads and inserts a lane): factor_phases. 22-wire c64 value + gradient: phase_tile 0.56-0.61x the samples.
// float64 tables hold 4 entries a register: three factors for 34 levels took 1.8x the lookups' samples.
#if defined(__AVX2__) && !defined(__AVX512F__)
constexpr bool FACTOR_PHASES = true;
#else
constexpr bool FACTOR_PHASES = false;
#endif
constexpr u64 FACTOR_RADIX = 8;
constexpr int MAX_FACTORS = 3;

#if defined(__AVX2__)
// Buffers *= phases[levels], phases as factor_phases factored them (FACTORS tables).
template <int FACTORS, class L>
void phase_by_factors(float* __restrict re, float* __restrict im, u64 size, const L* levels, const Phases& phases) {
    using V = Vec<float, FACTOR_RADIX>::v;
    const float* tables = reinterpret_cast<const float*>(phases.factor_tables);
    __m256 tr[FACTORS], ti[FACTORS];
    for (int f = 0; f < FACTORS; ++f) tr[f] = _mm256_loadu_ps(tables + 2 * f * FACTOR_RADIX), ti[f] = _mm256_loadu_ps(tables + (2 * f + 1) * FACTOR_RADIX);
    const u64 whole = size - size % FACTOR_RADIX;
    for (u64 t = 0; t < whole; t += FACTOR_RADIX) {
        const __m256i level = sizeof(L) == 1 ? _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(levels + t)))
                                             : _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels + t)));
        V pr, pi;
        for (int f = 0; f < FACTORS; ++f) {
            const __m256i digit = _mm256_and_si256(_mm256_srli_epi32(level, 3 * f), _mm256_set1_epi32(7));
            const V fr = V(_mm256_permutevar8x32_ps(tr[f], digit)), fi = V(_mm256_permutevar8x32_ps(ti[f], digit));
            if (f == 0) {
                pr = fr, pi = fi;
                continue;
            }
            const V r = pr * fr - pi * fi;
            pi = pr * fi + pi * fr, pr = r;
        }
        times_phases(re, im, t, pr, pi);
    }
    phase_by_levels_from(re, im, whole, size, levels, static_cast<const float*>(phases.data));
}
#endif

// Buffers *= phases[levels] (phases: complex by level, in the state's precision).
template <class T, class L>
void phase_by_levels(T* __restrict re, T* __restrict im, u64 size, const L* levels, const Phases& phases) {
    const T* table = static_cast<const T*>(phases.data);  // (real, imaginary) pairs
#if defined(__AVX2__)
    if constexpr (FACTOR_PHASES && std::is_same_v<T, float>) {
        if (phases.factors == 1) return phase_by_factors<1>(re, im, size, levels, phases);
        if (phases.factors == 2) return phase_by_factors<2>(re, im, size, levels, phases);
        if (phases.factors == 3) return phase_by_factors<3>(re, im, size, levels, phases);
    }
#endif
    if constexpr (PERMUTE_PHASES) {
        if (phases.size <= PERMUTE_MAX_CHUNKS<T> * PERMUTE_SPAN<T>) {
            switch ((phases.size + PERMUTE_SPAN<T> - 1) / PERMUTE_SPAN<T>) {
                case 0:
                case 1: return phase_by_permutes<1>(re, im, size, levels, table, phases.size);
                case 2: return phase_by_permutes<2>(re, im, size, levels, table, phases.size);
                case 3: return phase_by_permutes<std::min<u64>(3, PERMUTE_MAX_CHUNKS<T>)>(re, im, size, levels, table, phases.size);
                default: return phase_by_permutes<PERMUTE_MAX_CHUNKS<T>>(re, im, size, levels, table, phases.size);
            }
        }
    }
    using V = typename Vec<T>::v;  // phases[level], gathered LANES at a time
    const u64 whole = size - size % LANES;
    for (u64 t = 0; t < whole; t += LANES) {
        V pr, pi;
        for (u64 l = 0; l < LANES; ++l) pr[l] = table[2 * u64(levels[t + l])], pi[l] = table[2 * u64(levels[t + l]) + 1];
        times_phases(re, im, t, pr, pi);
    }
    phase_by_levels_from(re, im, whole, size, levels, table);
}

// Buffers *= a diagonal block's phases on a gathered tile: phases[level] by level, by angle exp(i·(offset + slope·value)).
template <class T>
void phase_tile(T* __restrict re, T* __restrict im, u64 size, const void* tile_values, int kind, const Phases& phases) {
    if (kind == U8) return phase_by_levels(re, im, size, static_cast<const std::uint8_t*>(tile_values), phases);
    if (kind == U16) return phase_by_levels(re, im, size, static_cast<const std::uint16_t*>(tile_values), phases);
    const auto* ph = static_cast<const double*>(phases.data);
    if (kind == F32) phase_tile_by_angle(re, im, size, static_cast<const float*>(tile_values), ph[0], ph[1]);
    else phase_tile_by_angle(re, im, size, static_cast<const double*>(tile_values), ph[0], ph[1]);
}

// sums += (Σ q, Σ q·value) over a tile, q = Im(conj(λ) φ): a swept block's moments.
template <class T, class V>
void level_sums_of(const T* pre, const T* pim, const T* lre, const T* lim, u64 size, const V* values, double* sums) {
    double s0 = 0.0, s1 = 0.0;
#pragma omp simd reduction(+ : s0, s1)
    for (u64 k = 0; k < size; ++k) {
        const double q = double(lre[k] * pim[k] - lim[k] * pre[k]);
        s0 += q;
        s1 += q * double(values[k]);
    }
    sums[0] += s0, sums[1] += s1;
}

template <class T>
void level_sums(const T* pre, const T* pim, const T* lre, const T* lim, u64 size, const void* values, int kind, double* sums) {
    switch (kind) {
        case U8: return level_sums_of(pre, pim, lre, lim, size, static_cast<const std::uint8_t*>(values), sums);
        case U16: return level_sums_of(pre, pim, lre, lim, size, static_cast<const std::uint16_t*>(values), sums);
        case F32: return level_sums_of(pre, pim, lre, lim, size, static_cast<const float*>(values), sums);
        default: return level_sums_of(pre, pim, lre, lim, size, static_cast<const double*>(values), sums);
    }
}

// A tile of a product state times its block's phases: amplitude (run, j) = Π rest factors · high_table[run] ·
// run_table[j] · phases[level], the tables as real and imaginary rows in the buffers' precision.
template <class T>
void product_tile(T* re, T* im, u64 tile, const Tiling& tiling, const Product<T>& src, const void* tile_levels) {
    cplx<double> factor(1.0, 0.0);
    for (u64 i = 0; i < tiling.nrest; ++i) factor *= cplx<double>(src.rest_vectors[2 * i + ((tile >> i) & 1)]);
    const T *outer = src.high_table, *inner = src.run_table;
    u64 nouter = src.high_size, width = src.run_size;
    if (tiling.transposed) std::swap(outer, inner), std::swap(nouter, width);  // tile index outer·width + inner
    for (u64 o = 0; o < nouter; ++o) {
        const T gr = T(factor.real() * outer[o] - factor.imag() * outer[nouter + o]);
        const T gi = T(factor.real() * outer[nouter + o] + factor.imag() * outer[o]);
        T *r = re + o * width, *i = im + o * width;
        for (u64 k = 0; k < width; ++k) {
            r[k] = gr * inner[k] - gi * inner[width + k];
            i[k] = gr * inner[width + k] + gi * inner[k];
        }
    }
    if (tile_levels) phase_tile(re, im, nouter * width, tile_levels, src.levels.kind, src.phases);
}

// A tile of ``state``, or, when ``src`` has tables, of the product state it describes (``scratch``: a tile of its levels).
template <class T>
void load_tile(T* re, T* im, const cplx<T>* state, u64 tile, const Tiling& tiling, u64 base, const std::vector<u64>& offsets,
               const Product<T>& src, void* scratch) {
    if (src.run_size) {
        if (src.levels.size) tile_values(src.levels, base, offsets, tiling.run_bits, tiling.transposed, scratch);
        product_tile(re, im, tile, tiling, src, src.levels.size ? scratch : nullptr);
    } else {
        gather(re, im, state, base, offsets, tiling.run_bits, tiling.transposed);
    }
}

inline u64 tile_width(const Tiling& t) { return u64(1) << (t.run_bits + t.nhigh); }
inline u64 tile_count(const Tiling& t) { return u64(1) << t.nrest; }

}  // namespace

// Not omp_get_max_threads(): that is the calling thread's setting, which torch.set_num_threads(1) (as a QNN's
// data-parallel workers call it) lowers to 1 for every OpenMP library in the process, kernels included.
// Unless told, a rank of a team whose ranks may each run on every core of the node (no launcher bound them to
// cores of their own) takes its share of the cores: all threads on every core would wait on each other.
int threads() {
    int n = thread_count.load();
    if (n > 0) return n;
    const char* given = std::getenv("OMP_NUM_THREADS");  // its first number, as OpenMP reads it
    n = given ? std::atoi(given) : 0;
    if (n > 0) return n;
    static const int online = int(sysconf(_SC_NPROCESSORS_ONLN));
    const int procs = omp_get_num_procs();  // this process's cores (its affinity)
    if (team.parts > 1 && procs * team.parts > online) return std::max(1, procs / team.parts);
    return procs;
}

void set_threads(int n) { thread_count.store(n); }

void set_team(int part, int parts, std::uint32_t* sync) {
    team = parts > 1 ? Team{part, parts, reinterpret_cast<std::atomic<std::uint32_t>*>(sync)} : Team{};
}

void team_barrier() {
    if (team.parts <= 1) return;
    store_fence();  // this rank's stores, streamed ones too, seen before it arrives
    std::atomic<std::uint32_t>&arrived = team.sync[0], &generation = team.sync[1];
    const std::uint32_t now = generation.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == std::uint32_t(team.parts)) {
        arrived.store(0, std::memory_order_relaxed);
        generation.fetch_add(1, std::memory_order_release);
        return;
    }
    for (unsigned spins = 0; generation.load(std::memory_order_acquire) == now; ++spins) {
        if (spins < 4096) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield();  // more ranks than cores: let the others run
        }
    }
}

// ---- kernels ------------------------------------------------------------------------------------------

template <class T>
void diag_phase_tables(cplx<T>* psi, u64 n, const Tables& t, double sign) {
    const u64 size = u64(1) << t.low_bits;
    u64 from, to;
    part_range(n >> t.low_bits, from, to);
#pragma omp parallel num_threads(threads()) if (parallel(n))
    {
        Buffer<double> re(size), im(size);
#pragma omp for schedule(static)
        for (u64 hi = from; hi < to; ++hi) {
            chunk_phases(hi, t, sign, re.get(), im.get());
            cplx<T>* p = psi + hi * size;
            for (u64 lo = 0; lo < size; ++lo) {
                const double xr = p[lo].real(), xi = p[lo].imag(), pr = re.get()[lo], pi = im.get()[lo];
                p[lo] = cplx<T>(T(xr * pr - xi * pi), T(xr * pi + xi * pr));
            }
        }
    }
    team_barrier();
}

// One adjoint pass over a diagonal block. With q(k) = Im(conj(λ_k) φ_k) after the block, accumulates
// rowsum[hi] = Σ_lo q, moments[t, 0, lo] = Σ_hi q, moments[t, 1+g, lo] = Σ_hi z(hi & gmask_g) q (a slice
// per thread t), then, if ``undo``, undoes the block on φ and λ (tables built for sign -1).
template <class T>
void diag_adjoint_tables(cplx<T>* phi, cplx<T>* lam, u64 n, const Tables& t, double* rowsum, double* moments, int nthreads, bool undo) {
    const u64 size = u64(1) << t.low_bits;
#pragma omp parallel for num_threads(nthreads) schedule(static, 1) if (parallel(n))
    for (int th = 0; th < nthreads; ++th) {
        Buffer<double> re(size), im(size), q(size);
        u64 first, last;
        tiles_of_thread(th, n >> t.low_bits, nthreads, first, last);
        for (u64 hi = first; hi < last; ++hi) {
            chunk_phases(hi, t, -1.0, re.get(), im.get());
            cplx<T>*p = phi + hi * size, *l = lam + hi * size;
            for (u64 lo = 0; lo < size; ++lo) {
                const cplx<T> a = p[lo], b = l[lo];
                q.get()[lo] = double(b.real() * a.imag() - b.imag() * a.real());
                if (undo) {
                    const double pr = re.get()[lo], pi = im.get()[lo];
                    p[lo] = cplx<T>(T(a.real() * pr - a.imag() * pi), T(a.real() * pi + a.imag() * pr));
                    l[lo] = cplx<T>(T(b.real() * pr - b.imag() * pi), T(b.real() * pi + b.imag() * pr));
                }
            }
            rowsum[hi] = accumulate_moments(q.get(), size, hi, t.gmask, t.ng, moments + u64(th) * (1 + t.ng) * size);
        }
    }
    team_barrier();
}

// out[k] = convert(angle(k)), chunk by chunk.
template <class O, class F>
void map_angles(O* out, u64 n, const Tables& t, F convert) {
    const u64 size = u64(1) << t.low_bits;
    u64 from, to;
    part_range(n >> t.low_bits, from, to);
#pragma omp parallel num_threads(threads()) if (parallel(n))
    {
        Buffer<double> angles(size);
#pragma omp for schedule(static)
        for (u64 hi = from; hi < to; ++hi) {
            chunk_angles(hi, t, angles.get());
            for (u64 lo = 0; lo < size; ++lo) out[hi * size + lo] = convert(angles.get()[lo]);
        }
    }
    team_barrier();
}

template <class O>
void diag_values(O* out, u64 n, const Tables& t) {
    map_angles(out, n, t, [](double angle) { return O(angle); });
}

// out[k] = angle(k) + offset as an integer: with coefficients -1/2 and offset T/2, how many of the T masks have odd parity at k.
template <class L>
void diag_levels(L* out, u64 n, const Tables& t, double offset) {
    map_angles(out, n, t, [offset](double angle) { return L(angle + offset + 0.5); });
}

template <class T, class L>
void phase_by_level(cplx<T>* psi, u64 n, const L* levels, const cplx<T>* table) {
    u64 from, to;
    part_range(n, from, to);
#pragma omp parallel for num_threads(threads()) schedule(static) if (parallel(n))
    for (u64 k = from; k < to; ++k) {
        const cplx<T> p = table[levels[k]], x = psi[k];
        psi[k] = cplx<T>(x.real() * p.real() - x.imag() * p.imag(), x.real() * p.imag() + x.imag() * p.real());
    }
    team_barrier();
}

template <class T, class L>
void diag_adjoint_levels(cplx<T>* phi, cplx<T>* lam, u64 n, const L* levels, const cplx<T>* table, int low_bits,
                         const i64* gmask, u64 ng, double* rowsum, double* moments, int nthreads, bool undo) {
    const u64 size = u64(1) << low_bits;
#pragma omp parallel for num_threads(nthreads) schedule(static, 1) if (parallel(n))
    for (int th = 0; th < nthreads; ++th) {
        Buffer<double> q(size);
        u64 first, last;
        tiles_of_thread(th, n >> low_bits, nthreads, first, last);
        for (u64 hi = first; hi < last; ++hi) {
            const u64 off = hi * size;
            for (u64 lo = 0; lo < size; ++lo) {
                const cplx<T> a = phi[off + lo], b = lam[off + lo];
                q.get()[lo] = double(b.real() * a.imag() - b.imag() * a.real());
                if (undo) {
                    const cplx<T> p = table[levels[off + lo]];
                    phi[off + lo] = cplx<T>(a.real() * p.real() - a.imag() * p.imag(), a.real() * p.imag() + a.imag() * p.real());
                    lam[off + lo] = cplx<T>(b.real() * p.real() - b.imag() * p.imag(), b.real() * p.imag() + b.imag() * p.real());
                }
            }
            rowsum[hi] = accumulate_moments(q.get(), size, hi, gmask, ng, moments + u64(th) * (1 + ng) * size);
        }
    }
    team_barrier();
}

// psi = ⊗ single-qubit states (low_vectors[b] / high_vectors[b]: the (2,) vector of bit b), then, unless
// ``levels`` is empty, a diagonal block's phases, in the same pass.
template <class T>
void product_state(cplx<T>* psi, u64 n, int low_bits, const cplx<double>* low_vectors, const cplx<double>* high_vectors, u64 nhigh,
                   Values levels, Phases phases) {
    const u64 size = u64(1) << low_bits;
    std::vector<cplx<double>> table(size, cplx<double>(1.0, 0.0));
    for (u64 lo = 0; lo < size; ++lo)
        for (int b = 0; b < low_bits; ++b) table[lo] *= low_vectors[2 * b + ((lo >> b) & 1)];
    u64 from, to;
    part_range(n >> low_bits, from, to);
#pragma omp parallel num_threads(threads()) if (parallel(n))
    {
        Buffer<T> re(levels.size ? size : 0), im(levels.size ? size : 0);
#pragma omp for schedule(static)
        for (u64 hi = from; hi < to; ++hi) {
            cplx<double> factor(1.0, 0.0);
            for (u64 b = 0; b < nhigh; ++b) factor *= high_vectors[2 * b + ((hi >> b) & 1)];
            const u64 off = hi * size;
            if (levels.size) {
                for (u64 lo = 0; lo < size; ++lo) {
                    const cplx<double> v = factor * table[lo];
                    re.get()[lo] = T(v.real()), im.get()[lo] = T(v.imag());
                }
                const char* values = static_cast<const char*>(levels.data) + off * value_bytes(levels.kind);
                phase_tile(re.get(), im.get(), size, values, levels.kind, phases);
                for (u64 lo = 0; lo < size; ++lo) psi[off + lo] = cplx<T>(re.get()[lo], im.get()[lo]);
            } else {
                for (u64 lo = 0; lo < size; ++lo) psi[off + lo] = cplx<T>(factor * table[lo]);
            }
        }
    }
    team_barrier();
}

// Gates' moments and undoing on φ and λ, over a tile: row[i] += Im<λ|P_i|φ> taken before U_i† (gates in turn).
template <class T>
void undo_gates_with_moments(T* pre, T* pim, T* lre, T* lim, u64 width, const Gates<T>& inverses, double* row) {
    const u64 inner = inner_count(inverses, width, 4);
    const u64 subtile = std::min(width, u64(1) << subtile_bits<T>(4));
    for (u64 block = 0; block < width; block += subtile)
        for (u64 i = 0; i < inner; ++i)
            row[i] += undo_with_moment(pre + block, pim + block, lre + block, lim + block, subtile, int(inverses.tile_bits[i]),
                                       inverses.mats + 4 * i, inverses.generators[i]);
    for (u64 i = inner; i < inverses.count; ++i)
        row[i] += undo_with_moment(pre, pim, lre, lim, width, int(inverses.tile_bits[i]), inverses.mats + 4 * i, inverses.generators[i]);
}

// One adjoint pass over a product layer: out[t, i] += Im<λ|P_i|φ> and φ, λ <- U_i† φ, U_i† λ (``inverses``)
// for every gate of the pass. The gates act on distinct wires and P_i commutes with U_i. With ``after`` (a
// diagonal block right after the layer and a pass of the next layer, of this tiling): that pass first (its
// moments into carried_out, undone on both), then the block's sums at its output and the block undone on both.
template <class T>
void layer_adjoint(cplx<T>* phi, cplx<T>* lam, const Tiling& tiling, const Gates<T>& inverses, double* out, int nthreads, bool undo,
                   const BlockAfter<T>& after) {
    const u64 width = tile_width(tiling), tiles = tile_count(tiling);
    const std::vector<u64> offsets = run_offsets(tiling);
    const u64 n = width * tiles;
    const bool block = after.levels.size != 0;
#pragma omp parallel for num_threads(nthreads) schedule(static, 1) if (parallel(n))
    for (int th = 0; th < nthreads; ++th) {
        Buffer<T> pre(width), pim(width), lre(width), lim(width);
        Buffer<char> tile_levels(block ? width * value_bytes(after.levels.kind) : 0);
        double* row = out + u64(th) * inverses.count;
        u64 first, last;
        tiles_of_thread(th, tiles, nthreads, first, last);
        for (u64 tile = first; tile < last; ++tile) {
            const u64 base = tile_base(tile, tiling);
            gather(pre.get(), pim.get(), phi, base, offsets, tiling.run_bits, tiling.transposed);
            gather(lre.get(), lim.get(), lam, base, offsets, tiling.run_bits, tiling.transposed);
            if (block) {
                undo_gates_with_moments(pre.get(), pim.get(), lre.get(), lim.get(), width, after.carried, after.carried_out + u64(th) * after.carried.count);
                tile_values(after.levels, base, offsets, tiling.run_bits, tiling.transposed, tile_levels.get());
                level_sums(pre.get(), pim.get(), lre.get(), lim.get(), width, tile_levels.get(), after.levels.kind, after.sums + 2 * u64(th));
                phase_tile(pre.get(), pim.get(), width, tile_levels.get(), after.levels.kind, after.phases);
                phase_tile(lre.get(), lim.get(), width, tile_levels.get(), after.levels.kind, after.phases);
            }
            undo_gates_with_moments(pre.get(), pim.get(), lre.get(), lim.get(), width, inverses, row);
            if (undo) {  // the last segment differentiated: moments only, φ and λ are not needed after it
                scatter(pre.get(), pim.get(), phi, n, base, offsets, tiling.run_bits, tiling.transposed);
                scatter(lre.get(), lim.get(), lam, n, base, offsets, tiling.run_bits, tiling.transposed);
            }
        }
    }
    team_barrier();
}

// d[k] = diagonal[level k] for a tile of levels (uint8 or uint16).
template <class T>
void diagonal_by_level(T* d, u64 size, const T* diagonal, const char* tile_levels, int kind) {
    if (kind == U8) {
        const auto* l = reinterpret_cast<const std::uint8_t*>(tile_levels);
        for (u64 k = 0; k < size; ++k) d[k] = diagonal[l[k]];
    } else {
        const auto* l = reinterpret_cast<const std::uint16_t*>(tile_levels);
        for (u64 k = 0; k < size; ++k) d[k] = diagonal[l[k]];
    }
}

// layer_apply's measured tile: ψ <- the gates' ψ, its value Σ D|ψ|² returned, λ = Dψ written to (lr, li), the
// moments Im<λ|P_i|ψ> (``take_moments``) and λ <- the undoing gates' λ (``nundo``), in one sweep of L1 blocks
// beside the gates on the tile's high bits: those on ψ before it, the moments and undoing after it. The high
// gates' moments are taken once the low gates are undone on ψ as on λ: P_i commutes with the other wires' gates.
// With ``take_moments`` false, λ is written over ψ (lr, li are re, im).
template <class T>
double measure_in_blocks(T* re, T* im, T* lr, T* li, u64 width, const Gates<T>& gates, const cplx<T>* lam_undo, u64 nundo,
                         bool take_moments, double* moments, const T* diagonal, const Values& levels, u64 base,
                         const std::vector<u64>& offsets, const Tiling& tiling, T* d, char* tile_levels) {
    const GateSweeps<T> apply(gates, gates.mats, width, 4), undo(gates, lam_undo, width, 4);
    apply.outer(re, im);
    if (levels.size) tile_values(levels, base, offsets, tiling.run_bits, tiling.transposed, tile_levels);
    else tile_values_of(diagonal, base, offsets, tiling.run_bits, tiling.transposed, d);
    double value = 0.0;
    for (u64 at = 0; at < width; at += apply.subtile) {
        T *r = re + at, *i = im + at, *a = lr + at, *b = li + at, *dd = d + at;
        apply.block(r, i);
        if (levels.size) diagonal_by_level(dd, apply.subtile, diagonal, tile_levels + at * value_bytes(levels.kind), levels.kind);
        double part = 0.0;
#pragma omp simd reduction(+ : part)
        for (u64 k = 0; k < apply.subtile; ++k) part += double(dd[k] * (r[k] * r[k] + i[k] * i[k]));
        value += part;
        for (u64 k = 0; k < apply.subtile; ++k) a[k] = dd[k] * r[k], b[k] = dd[k] * i[k];
        if (take_moments) moments_range(r, i, a, b, apply.subtile, gates, moments, 0, apply.inner, false);
        if (nundo) undo.block(a, b);
        if (take_moments && nundo) undo.block_alone(r, i);
    }
    if (take_moments)  // λ holds the high gates' factors already (undo.factor), ψ not
        scaled_outer_moments(re, im, lr, li, width, gates, moments, apply.inner, nundo && apply.inner ? undo.inner_factor / undo.factor : 1.0);
    if (nundo) undo.outer(lr, li);
    return value;
}

// psi <- the pass's gates applied to ``source`` (psi itself, another buffer, or the ``product`` state it
// describes), tile by tile. With a real ``diagonal`` D (D[k] = diagonal[levels[k]] when levels are given):
// returns <ψ|D|ψ> of the result and writes λ = Dψ into ``lam`` (``write_lam``), with the gates ``lam_undo``
// applied to it; ``take_moments``: moments[tile, i] += Im<λ|P_i|ψ> there, before the undoing.
template <class T>
double layer_apply(const cplx<T>* source, cplx<T>* psi, bool write_psi, const Tiling& tiling, const Gates<T>& gates,
                   const Product<T>& product, const T* diagonal, u64 ndiagonal, Values levels, cplx<T>* lam,
                   bool write_lam, const cplx<T>* lam_undo, u64 nundo, double* moments, bool take_moments, int nthreads) {
    const u64 width = tile_width(tiling), tiles = tile_count(tiling), n = width * tiles;
    const std::vector<u64> offsets = run_offsets(tiling);
    const bool measured = ndiagonal && write_lam && !write_psi;  // ψ read, its value and λ taken in the gates' sweeps
    double total_value = 0.0;
#pragma omp parallel for num_threads(nthreads) schedule(static, 1) reduction(+ : total_value) if (parallel(n))
    for (int th = 0; th < nthreads; ++th) {
        Buffer<T> re(width), im(width), lre(take_moments ? width : 0), lim(take_moments ? width : 0);
        T* lr = take_moments ? lre.get() : re.get();
        T* li = take_moments ? lim.get() : im.get();
        Buffer<T> d(ndiagonal ? width : 0);
        Buffer<char> tile_levels(levels.size ? width * value_bytes(levels.kind) : 0);
        Buffer<char> source_levels(product.levels.size ? width * value_bytes(product.levels.kind) : 0);
        u64 first, last;
        tiles_of_thread(th, tiles, nthreads, first, last);
        for (u64 tile = first; tile < last; ++tile) {
            const u64 base = tile_base(tile, tiling);
            load_tile(re.get(), im.get(), source, tile, tiling, base, offsets, product, source_levels.get());
            if (measured) {
                const double part = measure_in_blocks(re.get(), im.get(), lr, li, width, gates, lam_undo, nundo, take_moments,
                                                      moments + tile * gates.count, diagonal, levels, base, offsets, tiling,
                                                      d.get(), tile_levels.get());
                total_value += part;
                scatter(lr, li, lam, n, base, offsets, tiling.run_bits, tiling.transposed);
                continue;
            }
            apply_gates(re.get(), im.get(), width, gates, gates.mats);
            if (write_psi) scatter(re.get(), im.get(), psi, n, base, offsets, tiling.run_bits, tiling.transposed);
            if (!ndiagonal) continue;
            if (levels.size) {
                tile_values(levels, base, offsets, tiling.run_bits, tiling.transposed, tile_levels.get());
                diagonal_by_level(d.get(), width, diagonal, tile_levels.get(), levels.kind);
            } else {
                tile_values_of(diagonal, base, offsets, tiling.run_bits, tiling.transposed, d.get());
            }
            double part = 0.0;
            const T *dd = d.get(), *r = re.get(), *i = im.get();
#pragma omp simd reduction(+ : part)
            for (u64 k = 0; k < width; ++k) part += double(dd[k] * (r[k] * r[k] + i[k] * i[k]));
            total_value += part;
            if (write_lam) {  // λ = Dψ in place of ψ, unless ψ is still needed for the moments
                for (u64 k = 0; k < width; ++k) lr[k] = dd[k] * r[k], li[k] = dd[k] * i[k];
                if (take_moments) tile_moments(re.get(), im.get(), lr, li, width, gates, moments + tile * gates.count);
                if (nundo) apply_gates(lr, li, width, gates, lam_undo);
                scatter(lr, li, lam, n, base, offsets, tiling.run_bits, tiling.transposed);
            }
        }
    }
    team_barrier();
    return total_value;
}

// psi <- second · D · first psi in one pass: a pass of one layer, the diagonal block D after it and a pass of
// the next layer, all of one tiling. ``keep`` (unless null) is left holding the state after the block.
template <class T>
void layers_with_diagonal(cplx<T>* psi, cplx<T>* keep, const Tiling& tiling, const Gates<T>& first_gates, Values levels, Phases phases,
                          const Gates<T>& second, int nthreads) {
    const u64 width = tile_width(tiling), tiles = tile_count(tiling), n = width * tiles;
    const std::vector<u64> offsets = run_offsets(tiling);
#pragma omp parallel for num_threads(nthreads) schedule(static, 1) if (parallel(n))
    for (int th = 0; th < nthreads; ++th) {
        Buffer<T> re(width), im(width);
        Buffer<char> tile_levels(width * value_bytes(levels.kind));
        u64 first, last;
        tiles_of_thread(th, tiles, nthreads, first, last);
        const GateSweeps<T> a(first_gates, first_gates.mats, width), b(second, second.mats, width);
        const u64 step = a.subtile, value_size = value_bytes(levels.kind);
        for (u64 tile = first; tile < last; ++tile) {
            const u64 base = tile_base(tile, tiling);
            gather(re.get(), im.get(), psi, base, offsets, tiling.run_bits, tiling.transposed);
            tile_values(levels, base, offsets, tiling.run_bits, tiling.transposed, tile_levels.get());
            a.outer(re.get(), im.get());
            for (u64 at = 0; at < width; at += step) {  // one sweep of L1 blocks: first's low gates, D, second's
                a.block(re.get() + at, im.get() + at);
                phase_tile(re.get() + at, im.get() + at, step, tile_levels.get() + at * value_size, levels.kind, phases);
                if (!keep) b.block(re.get() + at, im.get() + at);
            }
            if (keep) {
                scatter(re.get(), im.get(), keep, n, base, offsets, tiling.run_bits, tiling.transposed);
                for (u64 at = 0; at < width; at += step) b.block(re.get() + at, im.get() + at);
            }
            b.outer(re.get(), im.get());
            scatter(re.get(), im.get(), psi, n, base, offsets, tiling.run_bits, tiling.transposed);
        }
    }
    team_barrier();
}

// The adjoint sweeps over a tile of φ and λ (four split buffers) below run in L1 blocks beside the gates on the
// tile's high bits. A moment Im<λ|P_i|φ> is the same wherever φ and λ have had the same of the layer's other
// gates undone (P_i commutes with them): the blocks undo the low gates, the high gates' moments follow.

// DIAGONAL_AT_OUTPUT's first part: λ <- the carried pass's inverses' λ (where given), then its moments and the
// block's sums, at the block's output.
template <class T>
void carried_moments_and_sums(const T* pre, const T* pim, T* lre, T* lim, u64 width, const Gates<T>& carried, double* out,
                              const char* levels, int kind, double* sums) {
    const GateSweeps<T> undo(carried, carried.mats, width, 4);
    const u64 value_size = value_bytes(kind);
    if (carried.mats) undo.outer(lre, lim);
    for (u64 at = 0; at < width; at += undo.subtile) {
        if (carried.mats) undo.block(lre + at, lim + at);
        moments_range(pre + at, pim + at, lre + at, lim + at, undo.subtile, carried, out, 0, undo.inner, false);
        level_sums(pre + at, pim + at, lre + at, lim + at, undo.subtile, levels + at * value_size, kind, sums);
    }
    outer_moments(pre, pim, lre, lim, width, carried, out, undo.inner);
}

// The moments at the layer's output (φ there), then (``undo``) λ <- the gates undone; ``phases``: the diagonal
// block's, applied to φ and λ first. ``spare_phi``: φ is not needed after, and the high gates' moments are
// taken with the low gates undone on both (λ then holds the high gates' factors already; the moments are scaled back).
template <class T>
void moments_then_undo(T* pre, T* pim, T* lre, T* lim, u64 width, const Gates<T>& g, double* out, bool undo, bool spare_phi,
                       const char* levels, int kind, const Phases* phases) {
    const GateSweeps<T> sweeps(g, g.mats, width, 4);
    const u64 value_size = value_bytes(kind);
    const bool early = undo && spare_phi && sweeps.inner;  // the low gates undone in the blocks
    for (u64 at = 0; at < width; at += sweeps.subtile) {
        T *pr = pre + at, *pi = pim + at, *lr = lre + at, *li = lim + at;
        if (phases) {
            phase_tile(pr, pi, sweeps.subtile, levels + at * value_size, kind, *phases);
            phase_tile(lr, li, sweeps.subtile, levels + at * value_size, kind, *phases);
        }
        moments_range(pr, pi, lr, li, sweeps.subtile, g, out, 0, sweeps.inner, false);
        if (early) sweeps.block(lr, li), sweeps.block_alone(pr, pi);
    }
    scaled_outer_moments(pre, pim, lre, lim, width, g, out, sweeps.inner, early ? sweeps.inner_factor / sweeps.factor : 1.0);
    if (early) sweeps.outer(lre, lim);
    else if (undo) apply_gates(lre, lim, width, g, g.mats);
}

// (``undo``) λ <- the gates undone, then (``moments``) the moments at the layer's input (φ there) and, where
// ``levels`` are given, the sums of the diagonal block before the layer.
template <class T>
void undo_then_moments(const T* pre, const T* pim, T* lre, T* lim, u64 width, const Gates<T>& g, double* out, bool undo, bool moments,
                       const char* levels, int kind, double* sums) {
    const GateSweeps<T> sweeps(g, undo ? g.mats : nullptr, width, 4);
    const u64 value_size = value_bytes(kind);
    if (undo) sweeps.outer(lre, lim);
    if (!undo && !moments && !levels) return;
    for (u64 at = 0; at < width; at += sweeps.subtile) {
        if (undo) sweeps.block(lre + at, lim + at);
        if (moments) moments_range(pre + at, pim + at, lre + at, lim + at, sweeps.subtile, g, out, 0, sweeps.inner, false);
        if (levels) level_sums(pre + at, pim + at, lre + at, lim + at, sweeps.subtile, levels + at * value_size, kind, sums);
    }
    if (moments) outer_moments(pre, pim, lre, lim, width, g, out, sweeps.inner);
}

// An adjoint pass over a product layer that leaves φ in memory alone: λ <- U_i† λ for every gate (``undo``;
// ``write``: λ stored back), with the moments out[t, i] += Im<λ|P_i|φ> taken ``before`` or ``after`` it.
// A diagonal block joins the pass: DIAGONAL_AT_OUTPUT, right after the layer: first the moments of a later
// pass of this tiling (``carried``, undone on λ first when it has inverses), then the block's sums, then it is
// undone on φ and λ in the tile before the gates' pass; DIAGONAL_AT_INPUT, right before the layer: its sums
// at the layer's input, once the gates are undone. ``source`` with tables: φ is that product state, computed.
template <class T>
void layer_adjoint_lambda(const cplx<T>* phi, cplx<T>* lam, const Tiling& tiling, const Gates<T>& inverses, const AdjointLambda<T>& a) {
    const u64 width = tile_width(tiling), tiles = tile_count(tiling), n = width * tiles;
    const std::vector<u64> offsets = run_offsets(tiling);
    const bool reads_phi = a.before || a.after || a.diagonal != NO_DIAGONAL;
#pragma omp parallel for num_threads(a.nthreads) schedule(static, 1) if (parallel(n))
    for (int th = 0; th < a.nthreads; ++th) {
        Buffer<T> pre(width), pim(width), lre(width), lim(width);
        Buffer<char> tile_levels(a.diagonal ? width * value_bytes(a.block_levels.kind) : 0);
        Buffer<char> source_levels(a.source.levels.size ? width * value_bytes(a.source.levels.kind) : 0);
        double* out = a.out + u64(th) * inverses.count;
        double* sums = a.sums + 2 * u64(th);
        u64 first, last;
        tiles_of_thread(th, tiles, a.nthreads, first, last);
        const Diagonal diagonal = Diagonal(a.diagonal);
        const int kind = a.block_levels.kind;
        for (u64 tile = first; tile < last; ++tile) {
            const u64 base = tile_base(tile, tiling);
            T *pr = pre.get(), *pi = pim.get(), *lr = lre.get(), *li = lim.get();
            const char* levels = tile_levels.get();
            gather(lr, li, lam, base, offsets, tiling.run_bits, tiling.transposed);
            if (reads_phi) load_tile(pr, pi, phi, tile, tiling, base, offsets, a.source, source_levels.get());
            if (diagonal) tile_values(a.block_levels, base, offsets, tiling.run_bits, tiling.transposed, tile_levels.get());
            if (diagonal == DIAGONAL_AT_OUTPUT)
                carried_moments_and_sums(pr, pi, lr, li, width, a.carried, a.carried_out + u64(th) * a.carried_out_cols, levels, kind, sums);
            const bool phi_needed_after = a.after || diagonal == DIAGONAL_AT_INPUT;
            if (a.before) {
                const Phases* phases = diagonal == DIAGONAL_AT_OUTPUT ? &a.block_phases : nullptr;
                moments_then_undo(pr, pi, lr, li, width, inverses, out, a.undo, !phi_needed_after, levels, kind, phases);
            } else if (diagonal == DIAGONAL_AT_OUTPUT) {
                phase_tile(pr, pi, width, levels, kind, a.block_phases);
                phase_tile(lr, li, width, levels, kind, a.block_phases);
            }
            if (!a.before || phi_needed_after)
                undo_then_moments(pr, pi, lr, li, width, inverses, out, a.undo && !a.before, a.after,
                                  diagonal == DIAGONAL_AT_INPUT ? levels : nullptr, kind, sums);
            if (a.undo && a.write) scatter(lr, li, lam, n, base, offsets, tiling.run_bits, tiling.transposed);
        }
    }
    team_barrier();
}

// psi = |0...0⟩.
template <class T>
void ground_state(cplx<T>* psi, u64 n) {
    u64 from, to;
    part_range(n, from, to);
#pragma omp parallel for num_threads(threads()) schedule(static) if (parallel(n))
    for (u64 k = from; k < to; ++k) psi[k] = cplx<T>(T(k == 0), T(0));
    team_barrier();
}

// Swap the target pair wherever the control bit is set.
template <class T>
void cnot(cplx<T>* psi, u64 n, int control, int target) {
    const int lo = std::min(control, target), hi = std::max(control, target);
    u64 from, to;
    part_range(n >> 2, from, to);
#pragma omp parallel for num_threads(threads()) schedule(static) if (parallel(n))
    for (u64 r = from; r < to; ++r) {
        const u64 low = r & ((u64(1) << lo) - 1), mid = (r >> lo) & ((u64(1) << (hi - lo - 1)) - 1), high = r >> (hi - 1);
        const u64 k = low | (mid << (lo + 1)) | (high << (hi + 1)) | (u64(1) << control), k1 = k | (u64(1) << target);
        std::swap(psi[k], psi[k1]);
    }
    team_barrier();
}

// <ψ|D|ψ> and λ = D ψ for a real diagonal D, in one pass.
template <class T, class D>
double expval_and_lambda(const cplx<T>* psi, u64 n, const D* diagonal, cplx<T>* lam) {
    double sum = 0.0;
    u64 from, to;
    part_range(n, from, to);
#pragma omp parallel for simd num_threads(threads()) schedule(static) reduction(+ : sum) if (parallel(n))
    for (u64 k = from; k < to; ++k) {
        const T pr = psi[k].real(), pi = psi[k].imag();
        sum += double(diagonal[k]) * double(pr * pr + pi * pi);
        lam[k] = cplx<T>(T(diagonal[k] * pr), T(diagonal[k] * pi));
    }
    team_barrier();
    return sum;
}

template <class T, class D>
double expval(const cplx<T>* psi, u64 n, const D* diagonal) {
    double sum = 0.0;
    u64 from, to;
    part_range(n, from, to);
#pragma omp parallel for simd num_threads(threads()) schedule(static) reduction(+ : sum) if (parallel(n))
    for (u64 k = from; k < to; ++k) {
        const T pr = psi[k].real(), pi = psi[k].imag();
        sum += double(diagonal[k]) * double(pr * pr + pi * pi);
    }
    team_barrier();
    return sum;
}

// <ψ|D|ψ>, and λ = D ψ unless lam is null, for D[k] = values[levels[k]]: two bytes an amplitude read, not a diagonal's.
template <class T, class L>
double expval_by_level(const cplx<T>* psi, u64 n, const L* levels, const double* values, cplx<T>* lam) {
    double sum = 0.0;
    u64 from, to;
    part_range(n, from, to);
    if (lam) {
#pragma omp parallel for num_threads(threads()) schedule(static) reduction(+ : sum) if (parallel(n))
        for (u64 k = from; k < to; ++k) {
            const T pr = psi[k].real(), pi = psi[k].imag();
            const double d = values[levels[k]];
            sum += d * double(pr * pr + pi * pi);
            lam[k] = cplx<T>(T(d * pr), T(d * pi));
        }
    } else {
#pragma omp parallel for num_threads(threads()) schedule(static) reduction(+ : sum) if (parallel(n))
        for (u64 k = from; k < to; ++k) {
            const T pr = psi[k].real(), pi = psi[k].imag();
            sum += values[levels[k]] * double(pr * pr + pi * pi);
        }
    }
    team_barrier();
    return sum;
}

template <class T>
bool streams_past_caches(const cplx<T>* psi, u64 n) {
    return streams(psi, n);
}

template <class T>
void scatter_tile(const T* re, const T* im, cplx<T>* psi, u64 n, u64 base, const std::vector<u64>& offsets, int run_bits, bool transposed) {
    scatter(re, im, psi, n, base, offsets, run_bits, transposed);
}

template <class T>
void factor_phases(Phases& phases) {
    phases.factors = 0;
    if (!FACTOR_PHASES || !std::is_same_v<T, float> || phases.size < 2) return;
    constexpr u64 R = FACTOR_RADIX;
    static_assert(2 * MAX_FACTORS * R * sizeof(float) <= sizeof(phases.factor_tables));
    int factors = 1;
    for (u64 span = R; span < phases.size; span *= R) ++factors;
    if (factors > MAX_FACTORS) return;
    const auto* table = static_cast<const cplx<T>*>(phases.data);
    T* out = reinterpret_cast<T*>(phases.factor_tables);
    const cplx<double> unturn = std::conj(cplx<double>(table[0]));  // factors past the first carry r^l alone
    for (u64 f = 0, scale = 1; f < u64(factors); ++f, scale *= R)
        for (u64 d = 0; d < R; ++d) {
            const cplx<double> v = scale * d < phases.size ? cplx<double>(table[scale * d]) * (f ? unturn : 1.0) : 0.0;
            out[2 * f * R + d] = T(v.real()), out[2 * f * R + R + d] = T(v.imag());
        }
    for (u64 level = 0; level < phases.size; ++level) {  // geometric to a few roundings, or looked up as given
        cplx<double> product = 1.0;
        for (u64 f = 0, rest = level; f < u64(factors); ++f, rest /= R) product *= cplx<double>(out[2 * f * R + rest % R], out[2 * f * R + R + rest % R]);
        if (!(std::abs(product - cplx<double>(table[level])) <= 8 * std::numeric_limits<T>::epsilon())) return;  // NaN too
    }
    phases.factors = factors;
}

#define QB_BY_LEVEL(T, L)                                                                                                          \
    template void phase_by_level<T, L>(cplx<T>*, u64, const L*, const cplx<T>*);                                                    \
    template void diag_adjoint_levels<T, L>(cplx<T>*, cplx<T>*, u64, const L*, const cplx<T>*, int, const i64*, u64, double*, double*, \
                                            int, bool);                                                                             \
    template double expval_by_level<T, L>(const cplx<T>*, u64, const L*, const double*, cplx<T>*);

template void diag_levels<std::uint8_t>(std::uint8_t*, u64, const Tables&, double);
template void diag_levels<std::uint16_t>(std::uint16_t*, u64, const Tables&, double);

#define QB_INSTANTIATE(T)                                                                                                          \
    template void diag_phase_tables<T>(cplx<T>*, u64, const Tables&, double);                                                     \
    template void diag_adjoint_tables<T>(cplx<T>*, cplx<T>*, u64, const Tables&, double*, double*, int, bool);                    \
    template void diag_values<T>(T*, u64, const Tables&);                                                                          \
    QB_BY_LEVEL(T, std::uint8_t)                                                                                                   \
    QB_BY_LEVEL(T, std::uint16_t)                                                                                                  \
    template void product_state<T>(cplx<T>*, u64, int, const cplx<double>*, const cplx<double>*, u64, Values, Phases);            \
    template void layer_adjoint<T>(cplx<T>*, cplx<T>*, const Tiling&, const Gates<T>&, double*, int, bool, const BlockAfter<T>&);  \
    template double layer_apply<T>(const cplx<T>*, cplx<T>*, bool, const Tiling&, const Gates<T>&, const Product<T>&, const T*,   \
                                   u64, Values, cplx<T>*, bool, const cplx<T>*, u64, double*, bool, int);                          \
    template void layers_with_diagonal<T>(cplx<T>*, cplx<T>*, const Tiling&, const Gates<T>&, Values, Phases, const Gates<T>&,    \
                                          int);                                                                                    \
    template void layer_adjoint_lambda<T>(const cplx<T>*, cplx<T>*, const Tiling&, const Gates<T>&, const AdjointLambda<T>&);     \
    template void factor_phases<T>(Phases&);                                                                                    \
    template void ground_state<T>(cplx<T>*, u64);                                                                                 \
    template void cnot<T>(cplx<T>*, u64, int, int);                                                                                \
    template bool streams_past_caches<T>(const cplx<T>*, u64);                                                                     \
    template void scatter_tile<T>(const T*, const T*, cplx<T>*, u64, u64, const std::vector<u64>&, int, bool);                                                                                \
    template double expval_and_lambda<T, float>(const cplx<T>*, u64, const float*, cplx<T>*);                                     \
    template double expval_and_lambda<T, double>(const cplx<T>*, u64, const double*, cplx<T>*);                                   \
    template double expval<T, float>(const cplx<T>*, u64, const float*);                                                          \
    template double expval<T, double>(const cplx<T>*, u64, const double*);

QB_INSTANTIATE(double)
QB_INSTANTIATE(float)

}  // namespace qb
