#pragma once
// Numeric kernels: element-wise maths, activations, linear algebra, convolution, pooling, norms.
#include "ipu/ops/registry.hpp"

namespace ipu {

inline void register_math_kernels(op_registry& /*registry*/) {}

}  // namespace ipu
