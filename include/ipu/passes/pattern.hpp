#pragma once
// What the fusion passes ask of a graph while they match a pattern of ops.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ipu/format.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/known_values.hpp"
#include "ipu/half.hpp"

namespace ipu::passes::detail {

constexpr bool is_onnx_op(const op_node& op, std::string_view type) {
  return op.type == type && (op.domain.empty() || op.domain == "ai.onnx");
}

/// Per tensor of `g`: whether it is a graph output (a value a fusion must keep).
constexpr std::vector<bool> output_mask(const graph& g) {
  std::vector<bool> is_output(g.num_tensors(), false);
  for (auto t : g.outputs()) is_output[t] = true;
  return is_output;
}

/// Names `fused`, which replaces a pattern ending in `last`, after `last`'s scope: "scope/" + type,
/// or type + "/" + n when `last` has no scope. Appended in place: GCC 12 loses a moved std::string
/// in a constant expression.
constexpr void name_fused_op(op_node& fused, const op_node& last, std::string_view type, std::size_t n) {
  const auto slash = last.name.rfind('/');
  if (slash == std::string::npos) fused.name.append(type).append("/").append(format_uint(n));
  else fused.name.append(last.name, 0, slash + 1).append(type);
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

/// Integer attribute `name` of `op`, or `fallback` when absent or of another kind.
constexpr std::int64_t int_attribute(const op_node& op, std::string_view name, std::int64_t fallback) {
  if (const auto* a = op.find_attribute(name))
    if (const auto* v = std::get_if<std::int64_t>(&a->value)) return *v;
  return fallback;
}

/// Float attribute `name` of `op`, or `fallback` when absent or of another kind.
constexpr float float_attribute(const op_node& op, std::string_view name, float fallback) {
  if (const auto* a = op.find_attribute(name))
    if (const auto* v = std::get_if<float>(&a->value)) return *v;
  return fallback;
}

/// The known values of float tensor `t` as doubles; nullopt when unknown or not a float type.
inline std::optional<std::vector<double>> known_doubles(const graph& g, tensor_id t) {
  if (t == no_tensor) return std::nullopt;
  const auto& info = g.tensor(t).info;
  const auto* d = known_data(g, t);
  const auto n = static_cast<std::size_t>(info.shape.num_elements());
  if (!d || d->size() != info.num_bytes()) return std::nullopt;
  std::vector<double> v(n);
  const auto* p = d->data();
  switch (info.type) {
    case data_type::F64: std::memcpy(v.data(), p, n * 8); break;
    case data_type::F32:
      for (std::size_t i = 0; i < n; ++i) {
        float x;
        std::memcpy(&x, p + 4 * i, 4);
        v[i] = x;
      }
      break;
    case data_type::F16:
      for (std::size_t i = 0; i < n; ++i) {
        half x;
        std::memcpy(&x, p + 2 * i, 2);
        v[i] = static_cast<float>(x);
      }
      break;
    default: return std::nullopt;
  }
  return v;
}

}  // namespace ipu::passes::detail
