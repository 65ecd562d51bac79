#pragma once
// What the planners ask about an op's outputs, answered once: is it a view of its input (nothing
// runs, the output shares the input's bytes), is it element-wise (out[i] depends on the inputs' [i]
// alone, after broadcasting), and may its output overwrite a dying input (in place). The memory
// plan of the IPU (sched/memory_plan.hpp), the CPU device's plan (cpu/plan.hpp), the cost model
// (ops/op_cost.hpp) and the ONNX constant folder (onnx/fold.hpp) all read this table.
//
// Dropout is a view only in inference: with training_mode absent or a constant false it is the
// identity (ONNX), and without its mask output nothing needs computing. In training, or when the
// mask is wanted, its kernel runs.
#include <algorithm>
#include <cstddef>
#include <string_view>

#include "ipu/graph/graph.hpp"

namespace ipu {

struct op_flags {
  bool view = false;         // output 0 is input 0's bytes (reshaped): nothing runs
  bool elementwise = false;  // out[i] from the inputs' [i] alone, after broadcasting
  bool in_place = false;     // output 0 may take the bytes of input 0 or 1 when that input dies at the op
  friend constexpr bool operator==(const op_flags&, const op_flags&) = default;
};

struct op_flags_entry {
  std::string_view domain;  // "" for ai.onnx
  std::string_view type;
  op_flags flags;
};

namespace detail::op_flag_table {
inline constexpr op_flags view{true, false, true};
inline constexpr op_flags elementwise{false, true, true};
}  // namespace detail::op_flag_table

/// Every op with a flag set; an op not listed has none.
inline constexpr op_flags_entry builtin_op_flags[] = {
    // views
    {"", "Reshape", detail::op_flag_table::view},
    {"", "Flatten", detail::op_flag_table::view},
    {"", "Squeeze", detail::op_flag_table::view},
    {"", "Unsqueeze", detail::op_flag_table::view},
    {"", "Identity", detail::op_flag_table::view},
    {"", "Dropout", detail::op_flag_table::view},  // in inference only: see is_view
    // element-wise, one input
    {"", "Abs", detail::op_flag_table::elementwise},
    {"", "Neg", detail::op_flag_table::elementwise},
    {"", "Exp", detail::op_flag_table::elementwise},
    {"", "Log", detail::op_flag_table::elementwise},
    {"", "Sqrt", detail::op_flag_table::elementwise},
    {"", "Reciprocal", detail::op_flag_table::elementwise},
    {"", "Relu", detail::op_flag_table::elementwise},
    {"", "Sigmoid", detail::op_flag_table::elementwise},
    {"", "Tanh", detail::op_flag_table::elementwise},
    {"", "Erf", detail::op_flag_table::elementwise},
    {"", "Floor", detail::op_flag_table::elementwise},
    {"", "Ceil", detail::op_flag_table::elementwise},
    {"", "Round", detail::op_flag_table::elementwise},
    {"", "Sign", detail::op_flag_table::elementwise},
    {"", "Sin", detail::op_flag_table::elementwise},
    {"", "Cos", detail::op_flag_table::elementwise},
    {"", "Tan", detail::op_flag_table::elementwise},
    {"", "Asin", detail::op_flag_table::elementwise},
    {"", "Acos", detail::op_flag_table::elementwise},
    {"", "Atan", detail::op_flag_table::elementwise},
    {"", "Sinh", detail::op_flag_table::elementwise},
    {"", "Cosh", detail::op_flag_table::elementwise},
    {"", "Asinh", detail::op_flag_table::elementwise},
    {"", "Acosh", detail::op_flag_table::elementwise},
    {"", "Atanh", detail::op_flag_table::elementwise},
    {"", "Softplus", detail::op_flag_table::elementwise},
    {"", "Softsign", detail::op_flag_table::elementwise},
    {"", "Elu", detail::op_flag_table::elementwise},
    {"", "Selu", detail::op_flag_table::elementwise},
    {"", "LeakyRelu", detail::op_flag_table::elementwise},
    {"", "HardSigmoid", detail::op_flag_table::elementwise},
    {"", "HardSwish", detail::op_flag_table::elementwise},
    {"", "ThresholdedRelu", detail::op_flag_table::elementwise},
    {"", "Celu", detail::op_flag_table::elementwise},
    {"", "Mish", detail::op_flag_table::elementwise},
    {"", "Not", detail::op_flag_table::elementwise},
    {"", "Clip", detail::op_flag_table::elementwise},
    {"", "BitwiseNot", detail::op_flag_table::elementwise},
    // element-wise, broadcasting
    {"", "Add", detail::op_flag_table::elementwise},
    {"", "Sub", detail::op_flag_table::elementwise},
    {"", "Mul", detail::op_flag_table::elementwise},
    {"", "Div", detail::op_flag_table::elementwise},
    {"", "Pow", detail::op_flag_table::elementwise},
    {"", "Max", detail::op_flag_table::elementwise},
    {"", "Min", detail::op_flag_table::elementwise},
    {"", "Sum", detail::op_flag_table::elementwise},
    {"", "Mean", detail::op_flag_table::elementwise},
    {"", "And", detail::op_flag_table::elementwise},
    {"", "Or", detail::op_flag_table::elementwise},
    {"", "Xor", detail::op_flag_table::elementwise},
    {"", "Mod", detail::op_flag_table::elementwise},
    {"", "PRelu", detail::op_flag_table::elementwise},
    {"", "BitShift", detail::op_flag_table::elementwise},
    {"", "Where", detail::op_flag_table::elementwise},
    {"", "IsNaN", detail::op_flag_table::elementwise},
    {"", "IsInf", detail::op_flag_table::elementwise},
    {"", "BitwiseAnd", detail::op_flag_table::elementwise},
    {"", "BitwiseOr", detail::op_flag_table::elementwise},
    {"", "BitwiseXor", detail::op_flag_table::elementwise},
};

/// The flags of (domain, type); none for an op the table does not list.
constexpr op_flags flags_of(std::string_view domain, std::string_view type) noexcept {
  if (domain == "ai.onnx") domain = "";
  for (const auto& e : builtin_op_flags)
    if (e.domain == domain && e.type == type) return e.flags;
  return {};
}

namespace detail {
/// Whether tensor `t` of `g` is known to hold only zero bytes (a constant false / 0).
constexpr bool known_all_zero(const graph& g, tensor_id t) {
  const auto& n = g.tensor(t);
  const byte_buffer* data = nullptr;
  if (n.has_data()) {
    data = &n.data;
  } else if (n.producer != no_op) {
    const auto& p = g.op(n.producer);
    if (p.type == "Constant" && (p.domain.empty() || p.domain == "ai.onnx"))
      if (const auto* a = p.find_attribute("value"))
        if (const auto* v = std::get_if<constant_tensor>(&a->value)) data = &v->data;
  }
  if (!data || data->empty()) return false;
  for (std::size_t i = 0; i < data->size(); ++i)
    if (data->load<unsigned char>(i) != 0) return false;
  return true;
}
}  // namespace detail

/// Whether `op` of `g` is a view: output 0 shares input 0's bytes and nothing runs. Dropout is one
/// in inference only (training_mode absent or a constant false) and without its mask output.
constexpr bool is_view(const graph& g, const op_node& op) {
  if (!flags_of(op.domain, op.type).view) return false;
  if (op.outputs.empty() || op.inputs.empty() || op.inputs[0] == no_tensor) return false;
  if (op.type == "Dropout") {
    if (op.outputs.size() > 1 && op.outputs[1] != no_tensor) return false;
    if (op.inputs.size() > 2 && op.inputs[2] != no_tensor && !detail::known_all_zero(g, op.inputs[2])) return false;
  }
  return true;
}

}  // namespace ipu
