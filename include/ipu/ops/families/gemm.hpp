#pragma once
// The op table's gemm family: matrix products: MatMul (batched, broadcast) and Gemm. A row holds
// what the library knows about an op: shape rule (ops/shape_rules.hpp), cost rule
// (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its gradient rule; the host kernels
// sit beside it, in ipu/ops/kernels/gemm.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def gemm[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "Gemm", detail::infer::gemm, detail::cost_rules::gemm, {}, detail::grad::gemm},
    {"", "MatMul", detail::infer::matmul, detail::cost_rules::matmul, {}, detail::grad::matmul},
};

}  // namespace ipu::op_families
