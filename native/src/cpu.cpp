// qbackends_native._cpu: which x86-64 levels this CPU (and its operating system) runs. Built for the compiler's
// default instruction set, so that it loads on any x86-64: qbackends_native asks it which of the kernels' builds
// (one per level QBACKENDS_ARCH named) to load.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

namespace nb = nanobind;

namespace {

bool runs(const std::string& level) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (level == "x86-64") return true;
#if !defined(__clang__)  // GCC 12+ knows the levels (their every feature, and the OS's support for the registers)
    if (level == "x86-64-v2") return __builtin_cpu_supports("x86-64-v2");
    if (level == "x86-64-v3") return __builtin_cpu_supports("x86-64-v3");
    if (level == "x86-64-v4") return __builtin_cpu_supports("x86-64-v4");
#else  // Clang 14-15 does not: the features that set each level apart
    const bool v2 = __builtin_cpu_supports("sse3") && __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1") &&
                    __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt");
    const bool v3 = v2 && __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
    const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (level == "x86-64-v2") return v2;
    if (level == "x86-64-v3") return v3;
    if (level == "x86-64-v4") return v4;
#endif
#endif
    return false;
}

}  // namespace

NB_MODULE(_cpu, m) {
    m.doc() = "Which x86-64 levels this CPU runs, and the builds of the kernels this package holds.";
    m.def("runs", &runs, nb::arg("level"), "Whether this CPU runs code built for the x86-64 level (x86-64, x86-64-v2 ... v4).");
    m.attr("BUILDS") = QBACKENDS_BUILDS;
}
