#pragma once
// The op table's slice ops family: slicing and joining: Slice, Split, Concat, Pad, Expand, Tile,
// ReverseSequence. A row holds what the library knows about an op: shape rule
// (ops/shape_rules.hpp), cost rule (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its
// gradient rule; the host kernels sit beside it, in ipu/ops/kernels/slice_ops.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def slice_ops[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "ReverseSequence", detail::infer::unary, detail::cost_rules::data_movement, {}},
    {"", "Concat", detail::infer::concat, detail::cost_rules::data_movement, string_op, detail::grad::concat},
    {"", "Split", detail::infer::split, detail::cost_rules::data_movement, string_op, detail::grad::split},
    {"", "Slice", detail::infer::slice, detail::cost_rules::data_movement, string_op, detail::grad::slice},
    {"", "Pad", detail::infer::pad, detail::cost_rules::data_movement, {}, detail::grad::pad},
    {"", "Expand", detail::infer::expand, detail::cost_rules::data_movement, {}, detail::grad::expand},
    {"", "Tile", detail::infer::tile, detail::cost_rules::data_movement, {},
     detail::grad::tile},
};

}  // namespace ipu::op_families
