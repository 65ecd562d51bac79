#pragma once
// What the planners ask about an op's outputs: is it a view of its input (nothing runs, the output
// shares the input's bytes), is it element-wise (out[i] depends on the inputs' [i] alone, after
// broadcasting), and may its output overwrite a dying input (in place). Each op's flags are in its
// row of the op table (ops/families/); flags_of and is_view (ops/op_table.hpp) read them for the
// IPU memory plan, the CPU device's plan, the cost model and the ONNX constant folder.
//
// A random op (RandomNormal, Bernoulli...) draws afresh each time it runs (ops/kernels/random.hpp):
// the constant folder must not run it once and keep the result, however constant its inputs.
//
// A STRING element is a pointer and a length into a heap its runner keeps (tensor.hpp). Only ops
// whose kernels move whole elements or convert them (Cast, StringNormalizer) may take one; the
// others are refused at import and by the CPU device's plan, rather than reading addresses as
// numbers.
//
// Dropout is a view only in inference: with training_mode absent or a constant false it is the
// identity (ONNX), and without its mask output nothing needs computing. In training, or when the
// mask is wanted, its kernel runs.
#include <cstddef>
#include <variant>

#include "ipu/graph/graph.hpp"

namespace ipu {

struct op_flags {
  bool view = false;         // output 0 is input 0's bytes (reshaped): nothing runs
  bool elementwise = false;  // out[i] from the inputs' [i] alone, after broadcasting
  bool in_place = false;     // output 0 may take the bytes of input 0 or 1 when that input dies at the op
  bool random = false;       // outputs are random draws, not functions of the inputs: never folded or shared
  bool strings = false;      // takes STRING tensors: its kernel moves or converts whole elements (views all do)
  friend constexpr bool operator==(const op_flags&, const op_flags&) = default;
};

/// The flags of a view, and of an element-wise op: both may write in place.
inline constexpr op_flags view_op{true, false, true};
inline constexpr op_flags elementwise_op{false, true, true};
/// The flags of an op that is not a view but takes STRING tensors (Cast, Gather, Concat...).
inline constexpr op_flags string_op{.strings = true};

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

/// Whether the Dropout `op` of `g` is the identity: inference (training_mode absent or a constant
/// false) and no mask output wanted.
constexpr bool dropout_is_identity(const graph& g, const op_node& op) {
  if (op.outputs.empty() || op.inputs.empty() || op.inputs[0] == no_tensor) return false;
  if (op.outputs.size() > 1 && op.outputs[1] != no_tensor) return false;
  if (op.inputs.size() > 2 && op.inputs[2] != no_tensor && !detail::known_all_zero(g, op.inputs[2])) return false;
  return true;
}

}  // namespace ipu
