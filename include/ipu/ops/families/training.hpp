#pragma once
// The op table's training family: ONNX's optimizer ops of domain ai.onnx.preview.training (opset 1):
// Adagrad, Momentum (standard and Nesterov) and Adam, each updating any number of tensors at once.
// A row holds what the library knows about an op: shape rule (ops/shape_rules.hpp), cost rule
// (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its gradient rule; the host kernels
// sit beside it, in ipu/ops/kernels/training.hpp. (The domain's Gradient op is no row: the ONNX
// importer expands it into ordinary ops with ipu::train::add_gradients.)
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

/// The domain of ONNX's training ops.
inline constexpr std::string_view training_domain = "ai.onnx.preview.training";

inline constexpr op_def training[] = {
    // domain, type, shape rule, cost rule, flags
    {training_domain, "Adagrad", detail::infer::optimizer, detail::cost_rules::optimizer, {}},
    {training_domain, "Momentum", detail::infer::optimizer, detail::cost_rules::optimizer, {}},
    {training_domain, "Adam", detail::infer::optimizer, detail::cost_rules::optimizer, {}},
};

}  // namespace ipu::op_families
