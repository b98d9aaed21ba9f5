// Kernels of the batched simulator (qbackends.batched): B states of n qubits, one per row of a (B, 2^n) array.
//
// A program is a table of operations, one row each: (kind, target bit, control mask, parameter slot, matrix
// index, wire mask). Bits count from the least significant (PennyLane's wire 0 is the most significant).
// Parameters are a (B, slots) table, so every row of the batch has its own angles. Consecutive single-qubit
// operations on one target with the same controls form a group (``groups``: each group's rows [start, end)):
// the forward pass applies a group's product in one sweep. The adjoint pass runs the groups backwards on ψ
// and λ = Oψ together in one sweep per group, undoing its operations and adding each dU/dθ's contribution,
// 2c·Im<λ|Gψ> for U = exp(-icθG), to the (row, slot) of the gradient table. States are complex128 or complex64
// (S); matrices, angles and sums stay in float64.
#include <omp.h>

#include <array>
#include <cmath>
#include <complex>
#include <cstdint>

#include "arrays.hpp"

namespace qb {

namespace {

using c128 = std::complex<double>;
using M2 = std::array<c128, 4>;  // (m00, m01, m10, m11)

enum Kind : std::int64_t { ROT_X, ROT_Y, ROT_Z, PHASE, MULTI_RZ, MATRIX, SWAP };
enum Column { KIND, TARGET, CONTROLS, SLOT, MATRIX_INDEX, MASK, COLUMNS };

constexpr u64 PARALLEL_AMPLITUDES = u64(1) << 14;  // below, in the whole batch, one thread

struct Program {
    const i64* ops;
    const i64* groups;
    u64 ngroups;
    const c128* matrices;
    u64 slots;
};

inline double zsign(u64 x) { return 1.0 - 2.0 * double(__builtin_parityll(x)); }

inline M2 matrix(i64 kind, double theta, const c128* m) {
    const c128 i(0.0, 1.0);
    if (kind == MATRIX) return {m[0], m[1], m[2], m[3]};
    if (kind == PHASE) return {1.0, 0.0, 0.0, c128(std::cos(theta), std::sin(theta))};
    const double c = std::cos(theta / 2), s = std::sin(theta / 2);
    if (kind == ROT_X) return {c, -i * s, -i * s, c};
    if (kind == ROT_Y) return {c, -s, s, c};
    return {c128(c, -s), 0.0, 0.0, c128(c, s)};
}

inline M2 mm(const M2& a, const M2& b) {
    return {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
}

inline M2 dagger(const M2& a) { return {std::conj(a[0]), std::conj(a[2]), std::conj(a[1]), std::conj(a[3])}; }

// 2c·Im Tr(G R) with R = Σ_pairs ψ_pair λ_pair^† (U = exp(-icθG); PHASE: c = 1, G = -|1><1|).
inline double overlap(i64 kind, const M2& r) {
    const c128 i(0.0, 1.0);
    if (kind == ROT_X) return (r[2] + r[1]).imag();
    if (kind == ROT_Y) return (-i * r[2] + i * r[1]).imag();
    if (kind == ROT_Z) return (r[0] - r[3]).imag();
    return -2.0 * r[3].imag();
}

inline M2 op_matrix(const Program& p, i64 k, const double* params) {
    const i64* op = p.ops + COLUMNS * k;
    return matrix(op[KIND], op[SLOT] >= 0 ? params[op[SLOT]] : 0.0, p.matrices + 4 * std::max<i64>(op[MATRIX_INDEX], 0));
}

inline M2 group_matrix(const Program& p, i64 start, i64 end, const double* params) {  // the product of the group's operations
    M2 m = op_matrix(p, start, params);
    for (i64 k = start + 1; k < end; ++k) m = mm(op_matrix(p, k, params), m);
    return m;
}

template <class S>
std::array<S, 4> cast(const M2& m) { return {S(m[0]), S(m[1]), S(m[2]), S(m[3])}; }

template <class S>
void forward_group(S* psi, u64 n, const Program& p, i64 start, i64 end, const double* params) {
    const i64* op = p.ops + COLUMNS * start;
    const u64 controls = u64(op[CONTROLS]);
    if (op[KIND] == MULTI_RZ) {
        const double theta = params[op[SLOT]];
        const S plus(std::cos(theta / 2), -std::sin(theta / 2)), minus = std::conj(plus);  // exp(-iθ/2) where Z..Z = +1
        const u64 mask = u64(op[MASK]);
        for (u64 i = 0; i < n; ++i)
            if ((i & controls) == controls) psi[i] *= zsign(i & mask) > 0 ? plus : minus;
        return;
    }
    if (op[KIND] == SWAP) {
        const u64 a = u64(op[TARGET]), b = u64(op[MASK]);
        for (u64 i = 0; i < n; ++i)
            if (((i >> a) & 1) == 1 && ((i >> b) & 1) == 0 && (i & controls) == controls) std::swap(psi[i], psi[i ^ ((u64(1) << a) | (u64(1) << b))]);
        return;
    }
    const auto m = cast<S>(group_matrix(p, start, end, params));
    const u64 step = u64(1) << op[TARGET];
    for (u64 base = 0; base < n; base += 2 * step)  // pairs (i, i + step), i running over a contiguous run
        for (u64 i = base; i < base + step; ++i)
            if ((i & controls) == controls) {
                const S a = psi[i], c = psi[i + step];
                psi[i] = m[0] * a + m[1] * c;
                psi[i + step] = m[2] * a + m[3] * c;
            }
}

// Undo the group on ψ and λ in one pass, adding each parameter's derivative on the way.
template <class S>
void adjoint_group(S* psi, S* lam, u64 n, const Program& p, i64 start, i64 end, const double* params, double* grads) {
    const i64* op = p.ops + COLUMNS * start;
    const u64 controls = u64(op[CONTROLS]);
    if (op[KIND] == MULTI_RZ) {
        const double theta = params[op[SLOT]];
        const S plus(std::cos(theta / 2), std::sin(theta / 2)), minus = std::conj(plus);  // the inverse
        const u64 mask = u64(op[MASK]);
        double sum = 0.0;
        for (u64 i = 0; i < n; ++i)
            if ((i & controls) == controls) {
                const double z = zsign(i & mask);
                sum += z * (std::conj(c128(lam[i])) * c128(psi[i])).imag();
                const S f = z > 0 ? plus : minus;
                psi[i] *= f;
                lam[i] *= f;
            }
        grads[op[SLOT]] += sum;
        return;
    }
    if (op[KIND] == SWAP) {
        forward_group(psi, n, p, start, end, params);
        forward_group(lam, n, p, start, end, params);
        return;
    }
    // One sweep: R = Σ_pairs ψλ^† at the group's end, and both vectors undone by the group's product. Each
    // operation's derivative then follows from R carried back through the later ones (2x2 work).
    const auto h = cast<S>(dagger(group_matrix(p, start, end, params)));
    c128 r00 = 0.0, r01 = 0.0, r10 = 0.0, r11 = 0.0;
    const u64 step = u64(1) << op[TARGET];
    for (u64 base = 0; base < n; base += 2 * step)
        for (u64 i = base; i < base + step; ++i)
            if ((i & controls) == controls) {
                const S p0 = psi[i], p1 = psi[i + step], l0 = lam[i], l1 = lam[i + step];
                const c128 c0 = std::conj(c128(l0)), c1 = std::conj(c128(l1)), q0 = p0, q1 = p1;
                r00 += q0 * c0, r01 += q0 * c1, r10 += q1 * c0, r11 += q1 * c1;
                psi[i] = h[0] * p0 + h[1] * p1, psi[i + step] = h[2] * p0 + h[3] * p1;
                lam[i] = h[0] * l0 + h[1] * l1, lam[i + step] = h[2] * l0 + h[3] * l1;
            }
    M2 r = {r00, r01, r10, r11};
    for (i64 k = end - 1; k >= start; --k) {
        const i64 slot = p.ops[COLUMNS * k + SLOT];
        if (slot >= 0) grads[slot] += overlap(p.ops[COLUMNS * k + KIND], r);
        const M2 u = op_matrix(p, k, params);
        r = mm(mm(dagger(u), r), u);
    }
}

Program program(const In& ops, const In& groups, const In& matrices, u64 slots) {
    if (ops.ndim() != 2 || ops.shape(1) != COLUMNS) throw nb::value_error("ops: a (rows, 6) table");
    return {data<i64>(ops, "ops"), data<i64>(groups, "groups"), groups.size() / 2, data<c128>(matrices, "matrices"), slots};
}

template <class S>
void forward_rows(Out& states, const In& ops, const In& groups, const In& params, const In& matrices) {
    const u64 rows = states.shape(0), n = states.size() / std::max<u64>(rows, 1), slots = params.ndim() == 2 ? params.shape(1) : 0;
    Program p = program(ops, groups, matrices, slots);
    S* s = data<S>(states, "states");
    const double* th = data<double>(params, "params");
    nb::gil_scoped_release g;
#pragma omp parallel for num_threads(threads()) schedule(static) if (states.size() >= PARALLEL_AMPLITUDES)
    for (u64 b = 0; b < rows; ++b)
        for (u64 gi = 0; gi < p.ngroups; ++gi) forward_group(s + b * n, n, p, p.groups[2 * gi], p.groups[2 * gi + 1], th + b * slots);
}

template <class S>
void adjoint_rows(Out& states, Out& lams, const In& ops, const In& groups, const In& params, const In& matrices, Out& grads) {
    const u64 rows = states.shape(0), n = states.size() / std::max<u64>(rows, 1), slots = params.ndim() == 2 ? params.shape(1) : 0;
    Program p = program(ops, groups, matrices, slots);
    S *s = data<S>(states, "states"), *l = data<S>(lams, "lams");
    const double* th = data<double>(params, "params");
    double* gr = data<double>(grads, "grads");
    const u64 gslots = grads.ndim() == 2 ? grads.shape(1) : 0;
    nb::gil_scoped_release g;
#pragma omp parallel for num_threads(threads()) schedule(static) if (states.size() >= PARALLEL_AMPLITUDES)
    for (u64 b = 0; b < rows; ++b)
        for (u64 gi = p.ngroups; gi-- > 0;)
            adjoint_group(s + b * n, l + b * n, n, p, p.groups[2 * gi], p.groups[2 * gi + 1], th + b * slots, gr + b * gslots);
}


template <class S>
void apply_paulis(const In& states, const In& xmasks, const In& zmasks, const In& phases, const In& coefs, Out& out) {
    const u64 rows = states.shape(0), n = states.size() / std::max<u64>(rows, 1), terms = xmasks.size();
    const S* s = data<S>(states, "states");
    const i64 *xm = data<i64>(xmasks, "xmasks"), *zm = data<i64>(zmasks, "zmasks");
    const c128* ph = data<c128>(phases, "phases");
    const double* co = data<double>(coefs, "coefs");
    S* o = data<S>(out, "out");
    nb::gil_scoped_release g;
    for (u64 b = 0; b < rows; ++b) {
        const S* psi = s + b * n;
        S* res = o + b * n;
        for (u64 i = 0; i < n; ++i) res[i] = 0.0;
        for (u64 t = 0; t < terms; ++t) {
            const c128 w = co[b * terms + t] * ph[t];
            if (w == 0.0) continue;
            for (u64 i = 0; i < n; ++i) res[i ^ u64(xm[t])] += S(w * zsign(i & u64(zm[t])) * c128(psi[i]));
        }
    }
}

template <class S>
void pauli_expvals(const In& states, const In& xmasks, const In& zmasks, const In& phases, Out& out) {
    const u64 rows = states.shape(0), n = states.size() / std::max<u64>(rows, 1), terms = xmasks.size();
    const S* s = data<S>(states, "states");
    const i64 *xm = data<i64>(xmasks, "xmasks"), *zm = data<i64>(zmasks, "zmasks");
    const c128* ph = data<c128>(phases, "phases");
    double* o = data<double>(out, "out");
    nb::gil_scoped_release g;
    for (u64 b = 0; b < rows; ++b) {
        const S* psi = s + b * n;
        for (u64 t = 0; t < terms; ++t) {
            c128 acc = 0.0;
            for (u64 i = 0; i < n; ++i) acc += std::conj(c128(psi[i ^ u64(xm[t])])) * zsign(i & u64(zm[t])) * c128(psi[i]);
            o[b * terms + t] = (acc * ph[t]).real();
        }
    }
}
}  // namespace

void bind_batched(nb::module_& m) {
    m.def("forward", [](Out states, In ops, In groups, In params, In matrices) {
        if (is_single(states)) return forward_rows<std::complex<float>>(states, ops, groups, params, matrices);
        forward_rows<c128>(states, ops, groups, params, matrices);
    }, "Run the program on every row of ``states`` (complex128 or complex64) in place.");
    m.def("adjoint", [](Out states, Out lams, In ops, In groups, In params, In matrices, Out grads) {
        if (is_single(states)) return adjoint_rows<std::complex<float>>(states, lams, ops, groups, params, matrices, grads);
        adjoint_rows<c128>(states, lams, ops, groups, params, matrices, grads);
    }, "Walk the program back from the final ψ (``states``) and λ (``lams``), both consumed, adding each derivative to grads[row, slot].");
    m.def("apply_paulis", [](In states, In xmasks, In zmasks, In phases, In coefs, Out out) {
        if (is_single(states)) return apply_paulis<std::complex<float>>(states, xmasks, zmasks, phases, coefs, out);
        apply_paulis<c128>(states, xmasks, zmasks, phases, coefs, out);
    }, "out[b] = Σ_t coefs[b, t]·P_t states[b], with P_t|i> = phases[t]·(-1)^|i & z_t|·|i ^ x_t>; out as states' dtype.");
    m.def("pauli_expvals", [](In states, In xmasks, In zmasks, In phases, Out out) {
        if (is_single(states)) return pauli_expvals<std::complex<float>>(states, xmasks, zmasks, phases, out);
        pauli_expvals<c128>(states, xmasks, zmasks, phases, out);
    }, "out[b, t] = <ψ_b|P_t|ψ_b>, summed in float64.");
    m.attr("PARALLEL_AMPLITUDES") = PARALLEL_AMPLITUDES;
}

}  // namespace qb
