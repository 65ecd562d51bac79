#pragma once
// The op table's loss family: losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. A row
// holds what the library knows about an op: shape rule (ops/shape_rules.hpp), cost rule
// (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its gradient rule; the host kernels
// sit beside it, in ipu/ops/kernels/loss.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def loss[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "NegativeLogLikelihoodLoss", detail::infer::nll_loss, detail::cost_rules::nll_loss, {},
     detail::grad::nll_loss},
    {"", "SoftmaxCrossEntropyLoss", detail::infer::softmax_cross_entropy,
     detail::cost_rules::softmax_cross_entropy,
     {},
     detail::grad::softmax_cross_entropy},
};

}  // namespace ipu::op_families
