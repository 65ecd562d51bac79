#pragma once
// The op table's generators family: tensors made from attributes, shapes and values: Constant,
// ConstantOfShape, Range, EyeLike, OneHot, Trilu, Cast. A row holds what the library knows about an
// op: shape rule (ops/shape_rules.hpp), cost rule (ops/cost_rules.hpp), flags (ops/flags.hpp) and
// the slot for its gradient rule; the host kernels sit beside it, in
// ipu/ops/kernels/generators.hpp. No shape rule for Range: its output shapes depend on input values
// or subgraphs, so importers and builders give them explicitly.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def generators[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "Constant", detail::infer::constant, detail::cost_rules::free_op, string_op},
    {"", "ConstantOfShape", detail::infer::constant_of_shape, detail::cost_rules::data_movement, {}},
    {"", "Range", {}, detail::cost_rules::data_movement, {}},
    {"", "EyeLike", detail::infer::eye_like, detail::cost_rules::data_movement, {}},
    {"", "OneHot", detail::infer::one_hot, detail::cost_rules::data_movement, {}},
    {"", "Trilu", detail::infer::unary, detail::cost_rules::data_movement, {}},
    {"", "Cast", detail::infer::cast, detail::cost_rules::cast, string_op, detail::grad::cast},
    {"", "CastLike", detail::infer::cast_like, detail::cost_rules::cast, string_op},
};

}  // namespace ipu::op_families
