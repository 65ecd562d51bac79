#pragma once
// The op table's indexing family: gathers, scatters and Compress. A row holds what the library
// knows about an op: shape rule (ops/shape_rules.hpp), cost rule (ops/cost_rules.hpp), flags
// (ops/flags.hpp) and the slot for its gradient rule; the host kernels sit beside it, in
// ipu/ops/kernels/indexing.hpp. No shape rule for Compress: its output shapes depend on input
// values or subgraphs, so importers and builders give them explicitly.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def indexing[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "Gather", detail::infer::gather, detail::cost_rules::data_movement, {}, detail::grad::gather},
    {"", "GatherElements", detail::infer::gather_elements, detail::cost_rules::data_movement, {},
     detail::grad::gather_elements},
    {"", "GatherND", detail::infer::gather_nd, detail::cost_rules::data_movement, {}},
    {"", "ScatterElements", detail::infer::unary, detail::cost_rules::data_movement, {}},
    {"", "ScatterND", detail::infer::unary, detail::cost_rules::data_movement, {}},
    {"", "Compress", {}, detail::cost_rules::data_movement, {}},
};

}  // namespace ipu::op_families
