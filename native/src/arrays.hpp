// NumPy arrays as the kernels take them: checked once here (dtype, C order), then raw pointers.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <complex>
#include <cstdint>
#include <string>

#include "fused.hpp"

namespace qb {

namespace nb = nanobind;
using In = nb::ndarray<nb::ro, nb::device::cpu>;   // read by a kernel
using Out = nb::ndarray<nb::device::cpu>;          // written by a kernel

template <class A>
inline void check_c_order(const A& a, const char* name) {
    if (a.size() <= 1) return;
    std::int64_t expected = 1;
    for (size_t i = a.ndim(); i-- > 0;) {
        if (a.shape(i) != 1 && a.stride(i) != expected)
            throw nb::type_error((std::string(name) + ": the kernels take C-contiguous arrays").c_str());
        expected *= std::int64_t(a.shape(i));
    }
}

template <class T, class A>
inline auto data(A& a, const char* name) {
    using P = std::conditional_t<std::is_const_v<typename A::Scalar>, const T*, T*>;
    if (a.dtype() != nb::dtype<T>())
        throw nb::type_error((std::string(name) + ": wrong dtype for this kernel (a state's tables are cast to its precision)").c_str());
    check_c_order(a, name);
    return a.size() ? reinterpret_cast<P>(a.data()) : nullptr;
}

template <class A>
inline bool is_single(const A& state) {  // complex64 (float32 parts) rather than complex128
    if (state.dtype() == nb::dtype<std::complex<float>>()) return true;
    if (state.dtype() == nb::dtype<std::complex<double>>()) return false;
    throw nb::type_error("the kernels take complex64 or complex128 states");
}

inline Values values(const In& a, const char* name) {
    Values v;
    v.size = a.size();
    if (!v.size) return v;
    if (a.dtype() == nb::dtype<std::uint16_t>()) v.kind = U16;
    else if (a.dtype() == nb::dtype<std::uint8_t>()) v.kind = U8;
    else if (a.dtype() == nb::dtype<float>()) v.kind = F32;
    else if (a.dtype() == nb::dtype<double>()) v.kind = F64;
    else throw nb::type_error((std::string(name) + ": levels are uint8 or uint16, a diagonal's values float32 or float64").c_str());
    check_c_order(a, name);
    v.data = a.data();
    return v;
}

// A swept block's phases: complex<T> by level (uint8 or uint16 values), two float64 numbers by angle.
template <class T>
inline Phases phases(const In& a, const Values& of, const char* name) {
    Phases p;
    p.size = a.size();
    if (!p.size) return p;
    if (by_level(of.kind) || !of.size) {
        p.data = data<std::complex<T>>(a, name);
        factor_phases<T>(p);
    } else {
        p.data = data<double>(a, name);
    }
    return p;
}

// The body once per type of a levels array (uint8 or uint16), as L.
#define QB_LEVELS(levels, ...)                                                                      \
    if (levels.dtype() == nb::dtype<std::uint8_t>()) {                                              \
        using L = std::uint8_t;                                                                     \
        __VA_ARGS__;                                                                                \
    } else if (levels.dtype() == nb::dtype<std::uint16_t>() || !levels.size()) {                    \
        using L = std::uint16_t;                                                                    \
        __VA_ARGS__;                                                                                \
    } else {                                                                                        \
        throw nb::type_error("levels: uint8 or uint16");                                            \
    }

}  // namespace qb
