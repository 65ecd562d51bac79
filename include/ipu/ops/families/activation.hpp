#pragma once
// The op table's activation family: activations: rectifiers, sigmoids, GELU and friends, clipping.
// A row holds what the library knows about an op: shape rule (ops/shape_rules.hpp), cost rule
// (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its gradient rule; the host kernels
// sit beside it, in ipu/ops/kernels/activation.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def activation[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "Relu", detail::infer::unary, detail::cost_rules::simple_elementwise, elementwise_op,
     detail::grad::relu},
    {"", "LeakyRelu", detail::infer::unary_float, detail::cost_rules::two_op_elementwise, elementwise_op,
     detail::grad::leaky_relu},
    {"", "ThresholdedRelu", detail::infer::unary_float, detail::cost_rules::two_op_elementwise, elementwise_op,
     detail::grad::thresholded_relu},
    {"", "PRelu", detail::infer::prelu, detail::cost_rules::two_op_elementwise, elementwise_op,
     detail::grad::prelu},
    {"", "Clip", detail::infer::clip, detail::cost_rules::two_op_elementwise, elementwise_op,
     detail::grad::clip},
    {"", "Elu", detail::infer::unary_float, detail::cost_rules::transcendental_plus, elementwise_op,
     detail::grad::elu},
    {"", "Selu", detail::infer::unary_float, detail::cost_rules::transcendental_plus, elementwise_op,
     detail::grad::selu},
    {"", "Celu", detail::infer::unary_float, detail::cost_rules::transcendental_plus, elementwise_op,
     detail::grad::celu},
    {"", "Sigmoid", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op,
     detail::grad::sigmoid},
    {"", "HardSigmoid", detail::infer::unary_float, detail::cost_rules::two_op_elementwise, elementwise_op,
     detail::grad::hard_sigmoid},
    {"", "HardSwish", detail::infer::unary_float, detail::cost_rules::three_op_elementwise, elementwise_op,
     detail::grad::hard_swish},
    {"", "Tanh", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op,
     detail::grad::tanh},
    {"", "Erf", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op,
     detail::grad::erf},
    {"", "Softplus", detail::infer::unary_float, detail::cost_rules::transcendental_plus, elementwise_op,
     detail::grad::softplus},
    {"", "Softsign", detail::infer::unary_float, detail::cost_rules::two_op_elementwise, elementwise_op,
     detail::grad::softsign},
    {"", "Mish", detail::infer::unary_float, detail::cost_rules::transcendental_plus, elementwise_op,
     detail::grad::mish},
    {"", "Gelu", detail::infer::unary_float, detail::cost_rules::transcendental_plus, {},
     detail::grad::gelu},
    {"com.microsoft", "Gelu", detail::infer::unary_float, detail::cost_rules::transcendental_plus, {},
     detail::grad::gelu_exact},
    {"ai.graphcore", "Gelu", detail::infer::unary_float, detail::cost_rules::transcendental_plus, {},
     detail::grad::gelu_tanh},
    // x * sigmoid(x) (SiLU), as PopART's ai.graphcore Swish; the fuse-swish pass makes it from
    // Sigmoid and Mul.
    {"ai.graphcore", "Swish", detail::infer::unary_float, detail::cost_rules::transcendental_plus, elementwise_op,
     detail::grad::swish},
    {"", "Shrink", detail::infer::unary, detail::cost_rules::two_op_elementwise, {},
     detail::grad::shrink},
};

}  // namespace ipu::op_families
