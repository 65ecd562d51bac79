#pragma once
// Every kernel the library ships, in one registry.
//
// Separate compilation: the kernels are most of the library's code, and every translation unit
// that uses the registry compiles all of them. A program of many translation units can compile
// them once instead: define IPU_SEPARATE_KERNELS in every translation unit (it then sees only the
// declaration of default_op_registry()), and in exactly one of them also define
// IPU_KERNELS_IMPLEMENTATION before including this header (it gets the definition). The project's
// own tests, tools and examples are built this way (src/kernels.cpp).
#include <string>

#include "ipu/error.hpp"
#include "ipu/ops/op_table.hpp"
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

#if defined(IPU_KERNELS_IMPLEMENTATION)
std::span<const op_def> detail::op_table::runtime_rows() noexcept { return rows; }
#endif

#if !defined(IPU_SEPARATE_KERNELS) || defined(IPU_KERNELS_IMPLEMENTATION)
IPU_DETAIL_KERNELS_INLINE const op_registry& default_op_registry() {
  static const op_registry registry = [] {
    op_registry kernels;
    register_math_kernels(kernels);
    register_tensor_kernels(kernels);
    // Built from the op table: its rows in order, each with its family's kernel (views have none).
    op_registry r;
    for (const op_def& def : op_table())
      if (const op_entry* e = kernels.find(def.domain, def.type)) r.add(*e);
    for (const op_entry& e : kernels.entries())
      if (!find_op_def(e.domain, e.type))
        throw error(error_category::internal, "the kernel of op " + std::string(e.type) + " has no row in the op table",
                    "default op registry", "add the op's row to its family in ipu/ops/families/");
    return r;
  }();
  return registry;
}
#endif

}  // namespace ipu

#undef IPU_DETAIL_KERNELS_INLINE
