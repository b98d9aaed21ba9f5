// Kernels of the fused simulator (qbackends.fused). The state is split as k = (hi, lo), ``lo`` its L low bits.
//
// Diagonal blocks: angle(k) = A[lo] + Σ_j bcoef_j z(hi & bmask_j) + Σ_g z(hi & gmask_g) C[g, lo], where
// z(x) = (-1)^popcount(x). One pass applies exp(i·sign·angle) to the state (and to λ in the adjoint pass),
// as a product of precomputed phase tables, without trigonometry per amplitude. Inside the sweeps of the
// product layers around it a block is applied by level (its angle takes few values, an unweighted cut: a
// table indexed by each amplitude's level) or by angle (a weighted cut: from a kept diagonal, with a
// polynomial exp(i·x) that vectorises).
// Product layers: single-qubit gates on distinct wires, tile by tile in split real/imaginary buffers.
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

namespace qb {

using u64 = std::uint64_t;
using i64 = std::int64_t;

// What a tile's per-amplitude values are: a level (uint8 or uint16, an unweighted cut) or a diagonal's value.
enum ValueKind : int { U16 = 0, F32 = 1, F64 = 2, U8 = 3 };
inline bool by_level(int kind) { return kind == U16 || kind == U8; }

struct Values {  // a per-amplitude array (levels or a diagonal): data, count, kind
    const void* data = nullptr;
    u64 size = 0;
    int kind = U16;
};

struct Phases {  // how a swept block's phases are given: by level (complex, in the state's precision) or by angle
    const void* data = nullptr;  // complex<T>[levels] by level; double[2] (offset, slope) by angle
    u64 size = 0;
    // By level, as factor_phases found it: phases[Σ_f 8^f·d_f] = Π_f factor_f[d_f] for d_f < 8 (``factors`` tables
    // of float32, each 8 real parts then 8 imaginary ones; 0: looked up as given).
    int factors = 0;
    alignas(32) unsigned char factor_tables[192];
};

// Fills phases' factors where the kernels take a level's phase as a product of permuted registers (float32 on AVX2)
// and the table is geometric, phases[l] = phases[0]·r^l (an unweighted cut's: its values are linear in the level).
template <class T>
void factor_phases(Phases& phases);

template <class T>
struct Product {  // a product state the kernels compute where they need it (empty: none)
    const std::complex<T>* rest_vectors = nullptr;  // (rest bits, 2)
    const T* high_table = nullptr;                  // (2, H): real and imaginary rows
    u64 high_size = 0;
    const T* run_table = nullptr;                   // (2, R)
    u64 run_size = 0;
    Values levels;                                  // its diagonal block's values, or none
    Phases phases;
};

struct Tiling {
    int run_bits;
    const i64* high_bits;
    u64 nhigh;
    const i64* rest_bits;
    u64 nrest;
    bool transposed;
};

template <class T>
struct Gates {  // a pass's gates: matrices (complex<T>, n x 2 x 2), tile bits, generators (0 fixed, 1 X, 2 Y)
    const std::complex<T>* mats = nullptr;
    const i64* tile_bits = nullptr;
    const std::int8_t* generators = nullptr;
    u64 count = 0;
};

struct Tables {  // a sum of Z products split for the table kernels
    int low_bits;
    const double* a;        // (2^L,)  or phase_a (2, 2^L)
    const i64* bmask;
    const double* bcoef;
    u64 nb;
    const i64* gmask;
    u64 ng;
    const double* c;        // (G, 2^L) or phase_c (G, 2, 2, 2^L)
};

constexpr u64 STREAM_BYTES = u64(1) << 26;  // states of 64 MiB and more are stored past the caches (16 MiB ones ran slower so)

int threads();
void set_threads(int n);
// Ranks sharing one state: ``part`` of ``parts`` (1: none), ``sync`` two words in memory they all map.
void set_team(int part, int parts, std::uint32_t* sync);
void team_barrier();
template <class T> void ground_state(std::complex<T>* psi, u64 n);
template <class T> bool streams_past_caches(const std::complex<T>* psi, u64 n);
template <class T>
void scatter_tile(const T* re, const T* im, std::complex<T>* psi, u64 n, u64 base, const std::vector<u64>& offsets, int run_bits,
                  bool transposed);

template <class T> void diag_phase_tables(std::complex<T>* psi, u64 n, const Tables& t, double sign);
template <class T>
void diag_adjoint_tables(std::complex<T>* phi, std::complex<T>* lam, u64 n, const Tables& t, double* rowsum, double* moments,
                         int nthreads, bool undo);
template <class O> void diag_values(O* out, u64 n, const Tables& t);
template <class L> void diag_levels(L* out, u64 n, const Tables& t, double offset);
template <class T, class L> void phase_by_level(std::complex<T>* psi, u64 n, const L* levels, const std::complex<T>* table);
template <class T, class L>
void diag_adjoint_levels(std::complex<T>* phi, std::complex<T>* lam, u64 n, const L* levels,
                         const std::complex<T>* table, int low_bits, const i64* gmask, u64 ng, double* rowsum, double* moments,
                         int nthreads, bool undo);
template <class T>
void product_state(std::complex<T>* psi, u64 n, int low_bits, const std::complex<double>* low_vectors,
                   const std::complex<double>* high_vectors, u64 nhigh, Values levels, Phases phases);
template <class T>
struct BlockAfter {  // layer_adjoint's diagonal block after the layer (no levels: none) and the next layer's pass after it
    Values levels;
    Phases phases;          // undoing it
    double* sums = nullptr;  // (nthreads, 2)
    Gates<T> carried;       // inverses, tile bits, generators
    double* carried_out = nullptr;  // (nthreads, carried.count)
};

template <class T>
void layer_adjoint(std::complex<T>* phi, std::complex<T>* lam, const Tiling& tiling, const Gates<T>& inverses, double* out,
                   int nthreads, bool undo, const BlockAfter<T>& after);
template <class T>
double layer_apply(const std::complex<T>* source, std::complex<T>* psi, bool write_psi, const Tiling& tiling, const Gates<T>& gates,
                   const Product<T>& product, const T* diagonal, u64 ndiagonal, Values levels,
                   std::complex<T>* lam, bool write_lam, const std::complex<T>* lam_undo, u64 nundo, double* moments,
                   bool take_moments, int nthreads);
template <class T>
void layers_with_diagonal(std::complex<T>* psi, std::complex<T>* keep, const Tiling& tiling, const Gates<T>& first,
                          Values levels, Phases phases, const Gates<T>& second, int nthreads);

enum Diagonal : int { NO_DIAGONAL = 0, DIAGONAL_AT_OUTPUT = 1, DIAGONAL_AT_INPUT = 2 };

template <class T>
struct AdjointLambda {  // layer_adjoint_lambda's arguments beyond the tiling and the pass's gates
    double* out;
    int nthreads;
    bool before, undo, after, write;
    int diagonal;
    Values block_levels;
    Phases block_phases;
    double* sums;               // (nthreads, 2)
    Gates<T> carried;           // a later pass: tile bits, generators, and (undone first) its inverses
    double* carried_out;
    u64 carried_out_cols;
    Product<T> source;
};

template <class T>
void layer_adjoint_lambda(const std::complex<T>* phi, std::complex<T>* lam, const Tiling& tiling, const Gates<T>& inverses,
                          const AdjointLambda<T>& a);
template <class T> void cnot(std::complex<T>* psi, u64 n, int control, int target);
template <class T, class D> double expval_and_lambda(const std::complex<T>* psi, u64 n, const D* diagonal, std::complex<T>* lam);
template <class T, class D> double expval(const std::complex<T>* psi, u64 n, const D* diagonal);
template <class T, class L> double expval_by_level(const std::complex<T>* psi, u64 n, const L* levels, const double* values, std::complex<T>* lam);

}  // namespace qb
