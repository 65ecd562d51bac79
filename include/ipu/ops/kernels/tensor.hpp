#pragma once
// Data-movement, indexing, reduction, recurrent, loss and control-flow kernels.
#include "ipu/ops/registry.hpp"

namespace ipu {

inline void register_tensor_kernels(op_registry& /*registry*/) {}

}  // namespace ipu
