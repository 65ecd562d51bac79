#pragma once
// The op table's softmax family: Softmax, LogSoftmax and Hardmax. A row holds what the library
// knows about an op: shape rule (ops/shape_rules.hpp), cost rule (ops/cost_rules.hpp), flags
// (ops/flags.hpp) and the slot for its gradient rule; the host kernels sit beside it, in
// ipu/ops/kernels/softmax.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def softmax[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "Softmax", detail::infer::softmax, detail::cost_rules::softmax, {}, detail::grad::softmax},
    {"", "LogSoftmax", detail::infer::softmax, detail::cost_rules::softmax, {}, detail::grad::log_softmax},
    {"", "Hardmax", detail::infer::softmax, detail::cost_rules::softmax, {}},
};

}  // namespace ipu::op_families
