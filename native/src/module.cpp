// qbackends_native: the compiled kernels of qbackends' own simulators, built when the package is installed.
#include "arrays.hpp"

namespace qb {
void bind_fused(nb::module_& m);
void bind_batched(nb::module_& m);
}  // namespace qb

// QBACKENDS_MODULE: _kernels, or _kernels_<level> where the package holds a build per x86-64 level.
NB_MODULE(QBACKENDS_MODULE, m) {
    m.doc() = "State-vector kernels of fused.qubit (qbackends_native.fused) and batched.qubit (qbackends_native.batched).";
    auto fused = m.def_submodule("fused", "Kernels of the fused simulator.");
    auto batched = m.def_submodule("batched", "Kernels of the batched simulator.");
    qb::bind_fused(fused);
    qb::bind_batched(batched);
#if defined(__AVX512F__)
    m.attr("VECTOR_ISA") = "avx512f";
#elif defined(__AVX2__)
    m.attr("VECTOR_ISA") = "avx2";
#elif defined(__AVX__)
    m.attr("VECTOR_ISA") = "avx";
#elif defined(__SSE2__)
    m.attr("VECTOR_ISA") = "sse2";
#else
    m.attr("VECTOR_ISA") = "generic";
#endif
    m.attr("ARCH") = QBACKENDS_ARCH;
    m.attr("BUILD_CPU") = QBACKENDS_BUILD_CPU;
}
