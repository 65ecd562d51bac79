#pragma once
// The op table's topk family: TopK. A row holds what the library knows about an op: shape rule
// (ops/shape_rules.hpp), cost rule (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its
// gradient rule; the host kernels sit beside it, in ipu/ops/kernels/topk.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def topk[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "TopK", detail::infer::top_k, detail::cost_rules::select_reduction, {}},
};

}  // namespace ipu::op_families
