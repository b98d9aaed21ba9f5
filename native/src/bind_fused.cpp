// Python bindings of the fused simulator's kernels: the arguments qbackends.fused.engine passes.
#include "arrays.hpp"
#include "fused.hpp"
#include "lanes.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include <dlfcn.h>
#include <sys/mman.h>

#include <nanobind/stl/complex.h>

namespace qb {

namespace {

template <class T>
using cplx = std::complex<T>;

constexpr unsigned int NUMPY_TRACE_DOMAIN = 389047;  // numpy's tracemalloc domain (numpy/core/include/numpy/ndarraytypes.h)

// tracemalloc's C API, looked up in the running interpreter (its header declares it without C linkage for C++).
void traced(void* p, size_t bytes) {
    static auto track = reinterpret_cast<int (*)(unsigned int, std::uintptr_t, size_t)>(dlsym(RTLD_DEFAULT, "PyTraceMalloc_Track"));
    if (track) track(NUMPY_TRACE_DOMAIN, reinterpret_cast<std::uintptr_t>(p), bytes);
}

void untraced(void* p) {
    static auto untrack = reinterpret_cast<int (*)(unsigned int, std::uintptr_t)>(dlsym(RTLD_DEFAULT, "PyTraceMalloc_Untrack"));
    if (untrack) untrack(NUMPY_TRACE_DOMAIN, reinterpret_cast<std::uintptr_t>(p));
}

Tables tables(int low_bits, const In& a, const In& bmask, const In& bcoef, const In& gmask, const In& c) {
    return {low_bits, data<double>(a, "table_a"), data<std::int64_t>(bmask, "bmask"), data<double>(bcoef, "bcoef"), bmask.size(),
            data<std::int64_t>(gmask, "gmask"), gmask.size(), data<double>(c, "table_c")};
}

struct TilingArgs {
    Tiling t;
    TilingArgs(int run_bits, const In& high, const In& rest, bool transposed) {
        t = {run_bits, data<std::int64_t>(high, "high_bits"), high.size(), data<std::int64_t>(rest, "rest_bits"), rest.size(), transposed};
    }
};

template <class T>
Gates<T> gates(const In& mats, const In& bits, const In* generators) {
    Gates<T> g;
    g.count = bits.size();
    g.tile_bits = data<std::int64_t>(bits, "tile_bits");
    g.mats = data<cplx<T>>(mats, "mats");
    if (mats.size() && mats.size() != 4 * g.count) throw nb::value_error("mats: one 2x2 matrix per tile bit");
    if (generators) g.generators = data<std::int8_t>(*generators, "generators");
    return g;
}

template <class T>
Product<T> product(const nb::tuple& source) {
    if (source.size() != 5) throw nb::value_error("source: (rest vectors, high table, run table, levels, phases)");
    In rest = nb::cast<In>(source[0]), high = nb::cast<In>(source[1]), run = nb::cast<In>(source[2]);
    In levels = nb::cast<In>(source[3]), phases_ = nb::cast<In>(source[4]);
    Product<T> p;
    p.rest_vectors = data<cplx<T>>(rest, "source rest vectors");
    p.high_table = data<T>(high, "source high table");
    p.high_size = high.ndim() == 2 ? high.shape(1) : 0;
    p.run_table = data<T>(run, "source run table");
    p.run_size = run.ndim() == 2 ? run.shape(1) : 0;
    p.levels = values(levels, "source levels");
    p.phases = phases<T>(phases_, p.levels, "source phases");
    return p;
}

#define QB_STATE(state, ...)  /* the body once per precision of the state, as T */ \
    if (is_single(state)) {                          \
        using T = float;                             \
        __VA_ARGS__;                                 \
    } else {                                         \
        using T = double;                            \
        __VA_ARGS__;                                 \
    }

}  // namespace

void bind_fused(nb::module_& m) {
    m.def("threads", &threads, "Threads the kernels use (set_num_threads; else OpenMP's default: OMP_NUM_THREADS or the cores).");
    m.def("set_num_threads", [](int n) {
        if (n < 1) throw nb::value_error("set_num_threads: a count of 1 or more");
        set_threads(n);
    });

    m.def("set_team", [](int part, int parts, Out sync) {
        if (parts < 1 || part < 0 || part >= parts) throw nb::value_error("set_team: part in [0, parts)");
        if (parts > 1 && (sync.size() < 2 || sync.dtype() != nb::dtype<std::uint32_t>()))
            throw nb::value_error("set_team: sync is two uint32 words the team shares");
        set_team(part, parts, parts > 1 ? static_cast<std::uint32_t*>(sync.data()) : nullptr);
    }, "Run the state kernels as ``part`` of ``parts`` ranks sharing the state (``parts`` 1: alone), a barrier on ``sync`` after each.");
    m.def("ground_state", [](Out psi) {
        QB_STATE(psi, { auto* s = data<cplx<T>>(psi, "psi"); nb::gil_scoped_release g; ground_state<T>(s, psi.size()); })
    });
    m.def("diag_phase_tables", [](Out psi, int low_bits, In pa, In bmask, In bcoef, In gmask, In pc, double sign) {
        Tables t = tables(low_bits, pa, bmask, bcoef, gmask, pc);
        QB_STATE(psi, { auto* s = data<cplx<T>>(psi, "psi"); nb::gil_scoped_release g; diag_phase_tables<T>(s, psi.size(), t, sign); })
    });
    m.def("diag_adjoint_tables", [](Out phi, Out lam, int low_bits, In pa, In bmask, In bcoef, In gmask, In pc, Out rowsum, Out moments,
                                    int nthreads, bool undo) {
        Tables t = tables(low_bits, pa, bmask, bcoef, gmask, pc);
        double *r = data<double>(rowsum, "rowsum"), *mo = data<double>(moments, "moments");
        QB_STATE(phi, {
            auto *p = data<cplx<T>>(phi, "phi"), *l = data<cplx<T>>(lam, "lam");
            nb::gil_scoped_release g;
            diag_adjoint_tables<T>(p, l, phi.size(), t, r, mo, nthreads, undo);
        })
    });
    m.def("diag_values", [](Out out, int low_bits, In a, In bmask, In bcoef, In gmask, In c) {
        Tables t = tables(low_bits, a, bmask, bcoef, gmask, c);
        if (out.dtype() == nb::dtype<float>()) {
            float* o = data<float>(out, "out");
            nb::gil_scoped_release g;
            diag_values<float>(o, out.size(), t);
        } else {
            double* o = data<double>(out, "out");
            nb::gil_scoped_release g;
            diag_values<double>(o, out.size(), t);
        }
    });
    m.def("diag_levels", [](Out out, int low_bits, In a, In bmask, In bcoef, In gmask, In c, double offset) {
        Tables t = tables(low_bits, a, bmask, bcoef, gmask, c);
        QB_LEVELS(out, {
            auto* o = data<L>(out, "out");
            nb::gil_scoped_release g;
            diag_levels<L>(o, out.size(), t, offset);
        })
    });
    m.def("phase_by_level", [](Out psi, In levels, In table) {
        QB_LEVELS(levels, QB_STATE(psi, {
            const auto* lv = data<L>(levels, "levels");
            auto* s = data<cplx<T>>(psi, "psi");
            const auto* tb = data<cplx<T>>(table, "table");
            nb::gil_scoped_release g;
            phase_by_level<T, L>(s, psi.size(), lv, tb);
        }))
    });
    m.def("diag_adjoint_levels", [](Out phi, Out lam, In levels, In table, int low_bits, In gmask, Out rowsum, Out moments, int nthreads,
                                    bool undo) {
        const auto* gm = data<std::int64_t>(gmask, "gmask");
        double *r = data<double>(rowsum, "rowsum"), *mo = data<double>(moments, "moments");
        QB_LEVELS(levels, QB_STATE(phi, {
            const auto* lv = data<L>(levels, "levels");
            auto *p = data<cplx<T>>(phi, "phi"), *l = data<cplx<T>>(lam, "lam");
            const auto* tb = data<cplx<T>>(table, "table");
            nb::gil_scoped_release g;
            diag_adjoint_levels<T, L>(p, l, phi.size(), lv, tb, low_bits, gm, gmask.size(), r, mo, nthreads, undo);
        }))
    });
    m.def("product_state", [](Out psi, int low_bits, In low_vectors, In high_vectors, In levels, In phases_) {
        const auto* lo = data<cplx<double>>(low_vectors, "low_vectors");
        const auto* hi = data<cplx<double>>(high_vectors, "high_vectors");
        Values v = values(levels, "levels");
        QB_STATE(psi, {
            auto* s = data<cplx<T>>(psi, "psi");
            Phases ph = phases<T>(phases_, v, "phases");
            nb::gil_scoped_release g;
            product_state<T>(s, psi.size(), low_bits, lo, hi, high_vectors.size() / 2, v, ph);
        })
    });
    m.def("layer_adjoint", [](Out phi, Out lam, int run_bits, In high, In rest, bool transposed, In inverses, In tile_bits, In generators,
                              Out out, int nthreads, bool undo, nb::tuple block, nb::tuple carried) {
        TilingArgs t(run_bits, high, rest, transposed);
        double* o = data<double>(out, "out");
        if (block.size() != 3 || carried.size() != 4) throw nb::value_error("block: (levels, phases, sums); carried: (bits, generators, out, inverses)");
        In block_levels = nb::cast<In>(block[0]), block_phases = nb::cast<In>(block[1]);
        Out sums = nb::cast<Out>(block[2]);
        In carried_bits = nb::cast<In>(carried[0]), carried_generators = nb::cast<In>(carried[1]), carried_inverses = nb::cast<In>(carried[3]);
        Out carried_out = nb::cast<Out>(carried[2]);
        QB_STATE(phi, {
            Gates<T> gs = gates<T>(inverses, tile_bits, &generators);
            BlockAfter<T> after;
            after.levels = values(block_levels, "block levels");
            after.phases = phases<T>(block_phases, after.levels, "block phases");
            after.sums = data<double>(sums, "sums");
            after.carried = gates<T>(carried_inverses, carried_bits, &carried_generators);
            after.carried_out = data<double>(carried_out, "carried out");
            if (after.levels.size && (!after.sums || (after.carried.count && !after.carried_out)))
                throw nb::value_error("a block after the layer needs its sums, and a carried pass its out");
            if (after.levels.size && size_t(after.levels.size) != phi.size()) throw nb::value_error("block levels: one per amplitude");
            auto *p = data<cplx<T>>(phi, "phi"), *l = data<cplx<T>>(lam, "lam");
            nb::gil_scoped_release g;
            layer_adjoint<T>(p, l, t.t, gs, o, nthreads, undo, after);
        })
    });
    m.def("layer_apply", [](In source, Out psi, int run_bits, In high, In rest, bool transposed, In mats, In tile_bits, nb::tuple product_,
                            In diagonal, In levels, Out lam, In lam_undo, In generators, Out moments, int nthreads) -> double {
        TilingArgs t(run_bits, high, rest, transposed);
        const Values lv = values(levels, "levels");
        double* mo = data<double>(moments, "moments");
        double value = 0.0;
        QB_STATE(source, {
            Gates<T> gs = gates<T>(mats, tile_bits, &generators);
            Product<T> pr = product<T>(product_);
            const auto* src = data<cplx<T>>(source, "source");
            auto* out = psi.size() ? data<cplx<T>>(psi, "psi") : nullptr;
            auto* l = lam.size() ? data<cplx<T>>(lam, "lam") : nullptr;
            const T* d = diagonal.size() ? data<T>(diagonal, "diagonal") : nullptr;
            const auto* undo = lam_undo.size() ? data<cplx<T>>(lam_undo, "lam_undo") : nullptr;
            nb::gil_scoped_release g;
            value = layer_apply<T>(src, out, out != nullptr, t.t, gs, pr, d, diagonal.size(), lv, l, l != nullptr, undo,
                                   lam_undo.size() / 4, mo, mo != nullptr, nthreads);
        })
        return value;
    });
    m.def("layers_with_diagonal", [](Out psi, Out keep, int run_bits, In high, In rest, bool transposed, In mats1, In bits1, In levels,
                                     In phases_, In mats2, In bits2, int nthreads) {
        TilingArgs t(run_bits, high, rest, transposed);
        Values v = values(levels, "levels");
        QB_STATE(psi, {
            Gates<T> first = gates<T>(mats1, bits1, nullptr), second = gates<T>(mats2, bits2, nullptr);
            Phases ph = phases<T>(phases_, v, "phases");
            auto* s = data<cplx<T>>(psi, "psi");
            auto* k = keep.size() ? data<cplx<T>>(keep, "keep") : nullptr;
            nb::gil_scoped_release g;
            layers_with_diagonal<T>(s, k, t.t, first, v, ph, second, nthreads);
        })
    });
    m.def("layer_adjoint_lambda", [](In phi, Out lam, int run_bits, In high, In rest, bool transposed, In inverses, In tile_bits,
                                     In generators, Out out, int nthreads, bool before, bool undo, bool after, bool write, int diagonal,
                                     nb::tuple block, nb::tuple carried, nb::tuple source) {
        TilingArgs t(run_bits, high, rest, transposed);
        if (block.size() != 3 || carried.size() != 4) throw nb::value_error("block: (levels, phases, sums); carried: (bits, generators, out, inverses)");
        In block_levels = nb::cast<In>(block[0]), block_phases = nb::cast<In>(block[1]);
        Out sums = nb::cast<Out>(block[2]);
        In carried_bits = nb::cast<In>(carried[0]), carried_generators = nb::cast<In>(carried[1]), carried_inverses = nb::cast<In>(carried[3]);
        Out carried_out = nb::cast<Out>(carried[2]);
        QB_STATE(lam, {
            AdjointLambda<T> a;
            a.out = data<double>(out, "out");
            a.nthreads = nthreads;
            a.before = before, a.undo = undo, a.after = after, a.write = write, a.diagonal = diagonal;
            a.block_levels = values(block_levels, "block levels");
            a.block_phases = phases<T>(block_phases, a.block_levels, "block phases");
            a.sums = data<double>(sums, "sums");
            a.carried = gates<T>(carried_inverses, carried_bits, &carried_generators);
            a.carried_out = data<double>(carried_out, "carried out");
            a.carried_out_cols = carried_out.ndim() == 2 ? carried_out.shape(1) : 0;
            a.source = product<T>(source);
            Gates<T> gs = gates<T>(inverses, tile_bits, &generators);
            const auto* p = data<cplx<T>>(phi, "phi");
            auto* l = data<cplx<T>>(lam, "lam");
            if (diagonal != NO_DIAGONAL && (!a.sums || a.block_levels.size == 0)) throw nb::value_error("a diagonal block needs its values and sums");
            nb::gil_scoped_release g;
            layer_adjoint_lambda<T>(p, l, t.t, gs, a);
        })
    });
    m.def("streams", [](In psi) {
        QB_STATE(psi, return streams_past_caches(data<cplx<T>>(psi, "psi"), psi.size()))
    }, "Whether the kernels' stores into ``psi`` go past the caches (STREAM_BYTES or more, STREAM_ALIGN-aligned).");
    m.def("scatter", [](In re, In im, Out psi, std::uint64_t base, In offsets, int run_bits, bool transposed) {
        std::vector<u64> runs(data<std::uint64_t>(offsets, "offsets"), data<std::uint64_t>(offsets, "offsets") + offsets.size());
        QB_STATE(psi, {
            const T *r = data<T>(re, "re"), *i = data<T>(im, "im");
            auto* s = data<cplx<T>>(psi, "psi");
            scatter_tile<T>(r, i, s, psi.size(), base, runs, run_bits, transposed);
        })
    }, "A tile's split buffers into the state, as every pass stores them (its runs' offsets from the tile's first amplitude).");
    m.def("copy", [](In src, Out dst) {
        if (src.size() != dst.size() || src.dtype() != dst.dtype()) throw nb::value_error("copy: two arrays of one size and dtype");
        check_c_order(src, "src"), check_c_order(dst, "dst");
        const char* from = static_cast<const char*>(src.data());
        char* to = static_cast<char*>(dst.data());
        const std::int64_t bytes = std::int64_t(src.nbytes()), chunk = 1 << 20;
        nb::gil_scoped_release g;
#pragma omp parallel for num_threads(threads()) schedule(static)
        for (std::int64_t at = 0; at < bytes; at += chunk) std::memcpy(to + at, from + at, size_t(std::min(chunk, bytes - at)));
    }, "dst[:] = src with the kernels' threads: what a pass's bandwidth is measured against.");
    m.def("huge_buffer", [](std::uint64_t nbytes) {
        // Uninitialised (zero) bytes in pages of their own, asked for as huge pages: a first touch of 64 MiB in
        // 4 KiB pages faults 16,384 times (about 0.3 s on a virtual machine), in 2 MiB pages 32 times.
        const size_t bytes = std::max<size_t>(nbytes, 1);
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
        madvise(p, bytes, MADV_HUGEPAGE);
#endif
        traced(p, bytes);  // tracemalloc counts it as numpy's
        struct Mapping {
            void* p;
            size_t bytes;
        };
        nb::capsule owner(new Mapping{p, bytes}, [](void* q) noexcept {
            auto* mp = static_cast<Mapping*>(q);
            untraced(mp->p);
            munmap(mp->p, mp->bytes);
            delete mp;
        });
        size_t shape[1] = {size_t(nbytes)};
        return nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>(p, 1, shape, owner);
    }, "``nbytes`` zero bytes in memory of their own, page-aligned, huge pages asked for (view them as the dtype wanted).");
    m.attr("STREAM_BYTES") = STREAM_BYTES;
    m.attr("STREAM_ALIGN") = STREAM_ALIGN;
    m.def("cnot", [](Out psi, int control, int target) {
        QB_STATE(psi, { auto* s = data<cplx<T>>(psi, "psi"); nb::gil_scoped_release g; cnot<T>(s, psi.size(), control, target); })
    });
    m.def("expval_and_lambda", [](In psi, In diagonal, Out lam) -> double {
        double value = 0.0;
        QB_STATE(psi, {
            const auto* s = data<cplx<T>>(psi, "psi");
            auto* l = data<cplx<T>>(lam, "lam");
            if (diagonal.dtype() == nb::dtype<float>()) {
                const float* d = data<float>(diagonal, "diagonal");
                nb::gil_scoped_release g;
                value = expval_and_lambda<T, float>(s, psi.size(), d, l);
            } else {
                const double* d = data<double>(diagonal, "diagonal");
                nb::gil_scoped_release g;
                value = expval_and_lambda<T, double>(s, psi.size(), d, l);
            }
        })
        return value;
    });
    m.def("expval_by_level", [](In psi, In levels, In values, Out lam) -> double {
        double value = 0.0;
        QB_STATE(psi, {
            const auto* s = data<cplx<T>>(psi, "psi");
            auto* l = lam.size() ? data<cplx<T>>(lam, "lam") : nullptr;
            const double* v = data<double>(values, "values");
            QB_LEVELS(levels, {
                const auto* lv = data<L>(levels, "levels");
                nb::gil_scoped_release g;
                value = expval_by_level<T, L>(s, psi.size(), lv, v, l);
            })
        })
        return value;
    }, "<ψ|D|ψ> for D[k] = values[levels[k]], and λ = Dψ into lam unless it is empty.");
    m.def("expval", [](In psi, In diagonal) -> double {
        double value = 0.0;
        QB_STATE(psi, {
            const auto* s = data<cplx<T>>(psi, "psi");
            if (diagonal.dtype() == nb::dtype<float>()) {
                const float* d = data<float>(diagonal, "diagonal");
                nb::gil_scoped_release g;
                value = expval<T, float>(s, psi.size(), d);
            } else {
                const double* d = data<double>(diagonal, "diagonal");
                nb::gil_scoped_release g;
                value = expval<T, double>(s, psi.size(), d);
            }
        })
        return value;
    });
}

}  // namespace qb
