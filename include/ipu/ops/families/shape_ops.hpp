#pragma once
// The op table's shape ops family: views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, and
// Dropout in inference; the seeded mask of Dropout in training), Transpose, DepthToSpace / SpaceToDepth and the shape queries. A row holds
// what the library knows about an op: shape rule (ops/shape_rules.hpp), cost rule
// (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its gradient rule; the host kernels
// sit beside it, in ipu/ops/kernels/shape_ops.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def shape_ops[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "Dropout", detail::infer::dropout, detail::cost_rules::dropout, view_op,
     detail::grad::dropout},
    // The seeded mask of a training-mode Dropout in a training step (ipu/train/training_graph.hpp):
    // the library's own op, in domain "ipu". BOOL out: no gradient flows through it.
    {"ipu", "DropoutMask", detail::infer::dropout_mask, detail::cost_rules::dropout_mask, {}},
    {"", "Transpose", detail::infer::transpose, detail::cost_rules::data_movement, string_op, detail::grad::transpose},
    {"", "DepthToSpace", detail::infer::depth_to_space, detail::cost_rules::data_movement, {}},
    {"", "SpaceToDepth", detail::infer::space_to_depth, detail::cost_rules::data_movement, {}},
    {"", "Shape", detail::infer::shape_of, detail::cost_rules::free_op, {}},
    {"", "Size", detail::infer::size_of_op, detail::cost_rules::free_op, {}},
    {"", "Reshape", detail::infer::reshape, detail::cost_rules::free_op, view_op, detail::grad::reshape},
    {"", "Flatten", detail::infer::flatten, detail::cost_rules::free_op, view_op, detail::grad::reshape},
    {"", "Squeeze", detail::infer::squeeze, detail::cost_rules::free_op, view_op, detail::grad::reshape},
    {"", "Unsqueeze", detail::infer::unsqueeze, detail::cost_rules::free_op, view_op, detail::grad::reshape},
    {"", "Identity", detail::infer::unary, detail::cost_rules::free_op, view_op, detail::grad::identity},
};

}  // namespace ipu::op_families
