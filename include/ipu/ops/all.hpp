#pragma once
// Every kernel the library ships, in one registry.
//
// Separate compilation: the kernels are most of the library's code, and every translation unit
// that uses the registry compiles all of them. A program of many translation units can compile
// them once instead: define IPU_SEPARATE_KERNELS in every translation unit (it then sees only the
// declaration of default_op_registry()), and in exactly one of them also define
// IPU_KERNELS_IMPLEMENTATION before including this header (it gets the definition). The project's
// own tests, tools and examples are built this way (src/kernels.cpp).
#include "ipu/ops/registry.hpp"

#if !defined(IPU_SEPARATE_KERNELS) || defined(IPU_KERNELS_IMPLEMENTATION)
#include "ipu/ops/kernels/math.hpp"
#include "ipu/ops/kernels/tensor.hpp"
#endif

#if defined(IPU_SEPARATE_KERNELS)
#define IPU_DETAIL_KERNELS_INLINE
#else
#define IPU_DETAIL_KERNELS_INLINE inline
#endif

namespace ipu {

/// The registry holding every shipped kernel; built once, then read-only (safe to share).
IPU_DETAIL_KERNELS_INLINE const op_registry& default_op_registry();

#if !defined(IPU_SEPARATE_KERNELS) || defined(IPU_KERNELS_IMPLEMENTATION)
IPU_DETAIL_KERNELS_INLINE const op_registry& default_op_registry() {
  static const op_registry registry = [] {
    op_registry r;
    register_math_kernels(r);
    register_tensor_kernels(r);
    return r;
  }();
  return registry;
}
#endif

}  // namespace ipu

#undef IPU_DETAIL_KERNELS_INLINE
