#pragma once
// What the fusion passes ask of a graph while they match a pattern of ops.
#include <string_view>
#include <vector>

#include "ipu/graph/graph.hpp"

namespace ipu::passes::detail {

constexpr bool is_onnx_op(const op_node& op, std::string_view type) {
  return op.type == type && (op.domain.empty() || op.domain == "ai.onnx");
}

/// The op that alone reads `t` (which is no graph output), or no_op.
constexpr op_id sole_reader(const graph& g, tensor_id t, const std::vector<bool>& is_output) {
  const auto& c = g.tensor(t).consumers;
  return c.size() == 1 && !is_output[t] ? c.front() : no_op;
}

/// The operand of binary op `op` other than `t`, when `t` is one of its two inputs.
constexpr tensor_id other_operand(const op_node& op, tensor_id t) {
  if (op.inputs.size() != 2 || op.outputs.size() != 1) return no_tensor;
  if (op.inputs[0] == t && op.inputs[1] != t) return op.inputs[1];
  if (op.inputs[1] == t && op.inputs[0] != t) return op.inputs[0];
  return no_tensor;
}

}  // namespace ipu::passes::detail
