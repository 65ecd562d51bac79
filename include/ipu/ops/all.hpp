#pragma once
// Every kernel the library ships, in one registry.
#include "ipu/ops/kernels/math.hpp"
#include "ipu/ops/kernels/tensor.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu {

/// The registry holding every shipped kernel; built once, then read-only (safe to share).
inline const op_registry& default_op_registry() {
  static const op_registry registry = [] {
    op_registry r;
    register_math_kernels(r);
    register_tensor_kernels(r);
    return r;
  }();
  return registry;
}

}  // namespace ipu
