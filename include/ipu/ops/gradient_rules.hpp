#pragma once
// The gradient rules of the op table: how the backward pass of an op is written as ordinary ops of
// the same graph, so that the planner costs, places and pipelines them like any other op.
//
// A rule reads the forward op (its inputs, outputs and attributes) and the gradients of its outputs,
// adds the ops that compute the gradients of the inputs that need one, and hands those over with
// set_input_grad. Which op uses which rule is said once, in the op families' rows (ops/families/);
// autodiff (ipu/train/autodiff.hpp) calls them in reverse topological order. Every backward op is
// shape-checked by the op table's shape rules as it is added.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/error.hpp"
#include "ipu/format.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/half.hpp"
#include "ipu/ops/shape_rules.hpp"
#include "ipu/tensor_info.hpp"

namespace ipu {

/// What a gradient rule sees and does.
class gradient_context {
 public:
  /// A function giving the infos of a new op's outputs (the op table's shape inference; passed in
  /// because the table itself holds the rules that use this context).
  using infer_outputs_fn = std::vector<tensor_info> (*)(const graph&, const op_node&);

  /// `prefix` starts the names of everything the rule adds; it must be unique to this op.
  constexpr gradient_context(graph& g, op_id forward, std::vector<tensor_id> output_grads, std::vector<bool> wanted,
                             infer_outputs_fn infer, std::string prefix)
      : g_(&g), op_(g.op(forward)), output_grads_(std::move(output_grads)), wanted_(std::move(wanted)),
        input_grads_(op_.inputs.size(), no_tensor), infer_(infer), prefix_(std::move(prefix)) {}

  // --- the forward op -----------------------------------------------------------------------
  [[nodiscard]] constexpr const op_node& op() const noexcept { return op_; }
  [[nodiscard]] constexpr std::size_t num_inputs() const noexcept { return op_.inputs.size(); }
  [[nodiscard]] constexpr bool has_input(std::size_t i) const noexcept {
    return i < op_.inputs.size() && op_.inputs[i] != no_tensor;
  }
  [[nodiscard]] constexpr tensor_id input(std::size_t i) const {
    if (!has_input(i)) throw fail("input #" + format_uint(i) + " is absent");
    return op_.inputs[i];
  }
  [[nodiscard]] constexpr tensor_id output(std::size_t i = 0) const {
    if (i >= op_.outputs.size() || op_.outputs[i] == no_tensor) throw fail("output #" + format_uint(i) + " is absent");
    return op_.outputs[i];
  }
  // Copies, not references: adding ops moves the graph's tensors.
  [[nodiscard]] constexpr tensor_info info(tensor_id t) const { return g_->tensor(t).info; }
  [[nodiscard]] constexpr shape shape_of(tensor_id t) const { return g_->tensor(t).info.shape; }
  /// Whether the gradient of input `i` is needed (it lies on a path from a trainable weight).
  [[nodiscard]] constexpr bool wants(std::size_t i) const noexcept { return i < wanted_.size() && wanted_[i]; }
  /// The gradient of output `i`, or no_tensor when nothing downstream depends on it.
  [[nodiscard]] constexpr tensor_id output_grad(std::size_t i = 0) const noexcept {
    return i < output_grads_.size() ? output_grads_[i] : no_tensor;
  }
  /// The gradient of output `i`, which the rule cannot do without.
  [[nodiscard]] constexpr tensor_id required_output_grad(std::size_t i = 0) const {
    const auto t = output_grad(i);
    if (t == no_tensor)
      throw fail("the gradient of output #" + format_uint(i) + " is needed but nothing flows into it");
    return t;
  }

  [[nodiscard]] constexpr std::int64_t attr_int(std::string_view n, std::int64_t dflt) const {
    if (const auto* a = op_.find_attribute(n))
      if (const auto* v = std::get_if<std::int64_t>(&a->value)) return *v;
    return dflt;
  }
  [[nodiscard]] constexpr float attr_float(std::string_view n, float dflt) const {
    if (const auto* a = op_.find_attribute(n))
      if (const auto* v = std::get_if<float>(&a->value)) return *v;
    return dflt;
  }
  [[nodiscard]] constexpr std::vector<std::int64_t> attr_ints(std::string_view n) const {
    if (const auto* a = op_.find_attribute(n))
      if (const auto* v = std::get_if<std::vector<std::int64_t>>(&a->value)) return *v;
    return {};
  }
  [[nodiscard]] constexpr bool has_attr(std::string_view n) const { return op_.find_attribute(n) != nullptr; }
  [[nodiscard]] constexpr std::string attr_string(std::string_view n, std::string_view dflt) const {
    if (const auto* a = op_.find_attribute(n))
      if (const auto* v = std::get_if<std::string>(&a->value)) return *v;
    return std::string(dflt);
  }
  /// The S64 contents of input `i` when it is a constant or weight (axes, shapes); nullopt otherwise.
  [[nodiscard]] constexpr std::optional<std::vector<std::int64_t>> constant_ints(std::size_t i) const {
    const auto* data = constant_data(i, data_type::S64);
    if (!data) return std::nullopt;
    std::vector<std::int64_t> v(data->size() / sizeof(std::int64_t));
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = data->load<std::int64_t>(k);
    return v;
  }
  /// The value of input `i` when it is a one-element BOOL constant (a flag); nullopt otherwise.
  [[nodiscard]] constexpr std::optional<bool> constant_bool(std::size_t i) const {
    const auto* data = constant_data(i, data_type::BOOL);
    if (!data || data->size() != 1) return std::nullopt;
    return data->load<std::uint8_t>(0) != 0;
  }

  // --- building the backward ops ------------------------------------------------------------
  /// Adds an op (of the default domain unless `domain` is given, at version 1 there) and returns
  /// its outputs (shapes from the op table).
  constexpr std::vector<tensor_id> add_n(std::string_view type, std::vector<tensor_id> inputs,
                                         std::vector<attribute> attrs, std::size_t num_outputs,
                                         std::string_view domain = {}) {
    op_node n;
    n.type = std::string(type);
    n.domain = std::string(domain);
    if (!domain.empty()) n.opset = 1;
    n.name = prefix_ + std::string(type) + format_uint(next_++);
    n.inputs = std::move(inputs);
    n.attributes = std::move(attrs);
    n.where = op_.where;  // the backward ops of an op start where the op is (the planner may move them)
    n.outputs.assign(num_outputs, no_tensor);
    // An op of another domain (the library's own "ipu" ops) needs that domain's opset in the graph.
    if (!domain.empty() && g_->opset_version(domain) == 0) {
      auto opsets = g_->opset_imports();
      opsets.push_back({std::string(domain), 1});
      g_->set_opset_imports(std::move(opsets));
    }
    // Infer with placeholder outputs: the rules read inputs and attributes only.
    const auto infos = infer_(*g_, n);
    if (infos.size() < num_outputs) throw fail("op " + std::string(type) + " gives fewer outputs than asked for");
    for (std::size_t k = 0; k < num_outputs; ++k) {
      std::string name = n.name;  // appended piece by piece: "x" + std::string trips GCC 12's -Wrestrict
      if (num_outputs != 1) name.append(1, ':').append(format_uint(k));
      n.outputs[k] = g_->add_tensor(name, infos[k]);
    }
    auto outs = n.outputs;
    g_->add_op(std::move(n));
    return outs;
  }
  constexpr tensor_id add(std::string_view type, std::vector<tensor_id> inputs, std::vector<attribute> attrs = {}) {
    return add_n(type, std::move(inputs), std::move(attrs), 1).front();
  }
  /// A constant of type `t` (a float or integer type) holding `values`, with shape `s`.
  constexpr tensor_id constant(data_type t, shape s, const std::vector<double>& values) {
    byte_buffer data;
    if (t == data_type::F32) {
      std::vector<float> v(values.begin(), values.end());
      data = byte_buffer::from_values(std::span<const float>(v));
    } else if (t == data_type::F64) {
      data = byte_buffer::from_values(std::span<const double>(values));
    } else if (t == data_type::F16) {  // float16 training (with loss scaling)
      std::vector<half> v;
      for (double x : values) v.emplace_back(static_cast<float>(x));
      data = byte_buffer::from_values(std::span<const half>(v));
    } else if (t == data_type::S64) {
      std::vector<std::int64_t> v;
      for (double x : values) v.push_back(static_cast<std::int64_t>(x));
      data = byte_buffer::from_values(std::span<const std::int64_t>(v));
    } else if (t == data_type::S32) {  // class indices given as S32
      std::vector<std::int32_t> v;
      for (double x : values) v.push_back(static_cast<std::int32_t>(x));
      data = byte_buffer::from_values(std::span<const std::int32_t>(v));
    } else {
      throw fail("a gradient constant of type " + std::string(to_string(t)) + " is not supported",
                 "train in F16, F32 or F64");
    }
    return g_->add_tensor(prefix_ + "const" + format_uint(next_++), tensor_info{t, std::move(s)},
                          tensor_kind::constant, std::move(data));
  }
  /// A scalar of `like`'s element type.
  constexpr tensor_id scalar(double v, tensor_id like) { return constant(info(like).type, shape{}, {v}); }
  constexpr tensor_id ints(const std::vector<std::int64_t>& v) {
    std::vector<double> d(v.begin(), v.end());
    return constant(data_type::S64, shape{static_cast<std::int64_t>(v.size())}, d);
  }
  /// `t` with its axes permuted by `perm`, without a copy where one is not needed:
  /// - nothing is added when `perm` is the identity;
  /// - when `t` is a Transpose's output that `perm` permutes back, that Transpose's input is the
  ///   answer (PyTorch exports a Linear layer as A @ W^T: its backward never copies W back);
  /// - when `t` is a 2-D Gemm's output without C that nothing reads yet (a gradient just made),
  ///   that Gemm is rewritten in place to make the transpose itself: (op(A) op(B))^T = op(B)^T op(A)^T.
  constexpr tensor_id transpose(tensor_id t, const std::vector<std::int64_t>& perm) {
    bool identity = true;
    for (std::size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<std::int64_t>(i);
    if (identity) return t;
    const auto producer = g_->tensor(t).producer;
    if (producer != no_op && g_->op(producer).domain.empty() && g_->op(producer).type == "Transpose") {
      const auto& made = g_->op(producer);
      const auto source = made.inputs.at(0);
      std::vector<std::int64_t> first;
      if (const auto* a = made.find_attribute("perm"))
        if (const auto* v = std::get_if<std::vector<std::int64_t>>(&a->value)) first = *v;
      if (first.empty())  // ONNX's default: the axes reversed
        for (std::size_t i = perm.size(); i-- > 0;) first.push_back(static_cast<std::int64_t>(i));
      // out[i] = t[perm[i]] = source[first[perm[i]]]: back to `source` when first[perm[i]] == i.
      bool undone = first.size() == perm.size();
      for (std::size_t i = 0; undone && i < perm.size(); ++i)
        undone = perm[i] >= 0 && static_cast<std::size_t>(perm[i]) < first.size() &&
                 first[static_cast<std::size_t>(perm[i])] == static_cast<std::int64_t>(i);
      if (undone) return source;
    }
    if (producer != no_op && perm.size() == 2 && unread_gemm_without_c(t)) {
      auto& gemm = g_->op(producer);
      std::swap(gemm.inputs[0], gemm.inputs[1]);
      std::int64_t trans_a = 0, trans_b = 0;
      std::vector<attribute> attrs;
      for (auto& a : gemm.attributes) {
        const auto* v = std::get_if<std::int64_t>(&a.value);
        if (a.name == "transA" && v) trans_a = *v;
        else if (a.name == "transB" && v) trans_b = *v;
        else attrs.push_back(std::move(a));
      }
      attrs.push_back({"transA", std::int64_t{trans_b == 0 ? 1 : 0}});
      attrs.push_back({"transB", std::int64_t{trans_a == 0 ? 1 : 0}});
      gemm.attributes = std::move(attrs);
      auto& out = g_->tensor(t).info.shape;
      out = shape{out[1], out[0]};
      return t;
    }
    return add("Transpose", {t}, {{"perm", perm}});
  }
  /// Whether `t` is made by a Gemm of the default domain without a C input, and is neither read by
  /// an op nor a graph output: rewriting that Gemm changes nothing anyone has seen.
  [[nodiscard]] constexpr bool unread_gemm_without_c(tensor_id t) const {
    const auto& node = g_->tensor(t);
    if (node.producer == no_op || !node.consumers.empty()) return false;
    const auto& gemm = g_->op(node.producer);
    if (!gemm.domain.empty() || gemm.type != "Gemm" || gemm.outputs.size() != 1) return false;
    if (gemm.inputs.size() < 2 || (gemm.inputs.size() > 2 && gemm.inputs[2] != no_tensor)) return false;
    for (auto o : g_->outputs())
      if (o == t) return false;
    return true;
  }
  /// `t` reshaped to `s`.
  constexpr tensor_id reshape(tensor_id t, const shape& s) {
    if (shape_of(t) == s) return t;
    return add("Reshape", {t, ints(s.dims())});
  }
  /// The sum of `t` over the axes along which a tensor of shape `target` was broadcast to t's shape
  /// (numpy rules), reshaped to `target`: the gradient of a broadcast operand.
  constexpr tensor_id sum_to(tensor_id t, const shape& target) {
    const auto s = shape_of(t);
    if (s == target) return t;
    const auto r = s.rank(), tr = target.rank();
    if (tr > r) throw fail("cannot sum a gradient of rank " + format_uint(r) + " down to rank " + format_uint(tr));
    std::vector<std::int64_t> axes;
    for (std::size_t i = 0; i < r; ++i) {
      const bool leading = i < r - tr;
      if (leading || (target[i - (r - tr)] == 1 && s[i] != 1)) axes.push_back(static_cast<std::int64_t>(i));
    }
    tensor_id summed = t;
    if (!axes.empty()) summed = add("ReduceSum", {t, ints(axes)}, {{"keepdims", std::int64_t{0}}});
    return reshape(summed, target);
  }

  /// Hands over the gradient of input `i` (ignored unless wanted).
  constexpr void set_input_grad(std::size_t i, tensor_id grad) {
    if (i >= input_grads_.size()) throw fail("no input #" + format_uint(i) + " to give a gradient to");
    if (wants(i)) input_grads_[i] = grad;
  }
  [[nodiscard]] constexpr const std::vector<tensor_id>& input_grads() const noexcept { return input_grads_; }

  [[nodiscard]] error fail(const std::string& what, const std::string& fix = {}) const {
    return error(error_category::graph, "gradient: " + what, "op " + graph::describe(op_), fix);
  }

 private:
  /// The bytes of input `i` when it is a constant (or a Constant op's output) of type `t`.
  [[nodiscard]] constexpr const byte_buffer* constant_data(std::size_t i, data_type t) const {
    if (!has_input(i)) return nullptr;
    const auto& n = g_->tensor(op_.inputs[i]);
    const byte_buffer* data = nullptr;
    if (n.kind == tensor_kind::constant) data = &n.data;
    else if (n.producer != no_op) {
      const auto& p = g_->op(n.producer);
      if (p.type == "Constant" && (p.domain.empty() || p.domain == "ai.onnx"))
        if (const auto* a = p.find_attribute("value"))
          if (const auto* v = std::get_if<constant_tensor>(&a->value)) data = &v->data;
    }
    return data && n.info.type == t ? data : nullptr;
  }
  graph* g_;
  op_node op_;  // a copy: adding ops may move the graph's op storage
  std::vector<tensor_id> output_grads_;
  std::vector<bool> wanted_;
  std::vector<tensor_id> input_grads_;
  infer_outputs_fn infer_;
  std::string prefix_;
  std::size_t next_ = 0;
};

/// A gradient rule of the op table.
using gradient_fn = void (*)(gradient_context&);

namespace detail::grad {

inline constexpr attribute keepdims(bool k) { return {"keepdims", std::int64_t{k ? 1 : 0}}; }

// --- element-wise ---------------------------------------------------------------------------------
constexpr void add(gradient_context& c) {
  const auto dy = c.required_output_grad();
  for (std::size_t i = 0; i < 2; ++i)
    if (c.wants(i)) c.set_input_grad(i, c.sum_to(dy, c.shape_of(c.input(i))));
}
constexpr void sub(gradient_context& c) {
  const auto dy = c.required_output_grad();
  if (c.wants(0)) c.set_input_grad(0, c.sum_to(dy, c.shape_of(c.input(0))));
  if (c.wants(1)) c.set_input_grad(1, c.sum_to(c.add("Neg", {dy}), c.shape_of(c.input(1))));
}
constexpr void mul(gradient_context& c) {
  const auto dy = c.required_output_grad();
  if (c.wants(0)) c.set_input_grad(0, c.sum_to(c.add("Mul", {dy, c.input(1)}), c.shape_of(c.input(0))));
  if (c.wants(1)) c.set_input_grad(1, c.sum_to(c.add("Mul", {dy, c.input(0)}), c.shape_of(c.input(1))));
}
/// y = a / b: da = dy / b, db = -dy * y / b.
constexpr void div(gradient_context& c) {
  const auto dy = c.required_output_grad();
  const auto b = c.input(1);
  if (c.wants(0)) c.set_input_grad(0, c.sum_to(c.add("Div", {dy, b}), c.shape_of(c.input(0))));
  if (c.wants(1)) {
    const auto t = c.add("Div", {c.add("Mul", {dy, c.output()}), b});
    c.set_input_grad(1, c.sum_to(c.add("Neg", {t}), c.shape_of(b)));
  }
}
constexpr void neg(gradient_context& c) { c.set_input_grad(0, c.add("Neg", {c.required_output_grad()})); }
constexpr void identity(gradient_context& c) { c.set_input_grad(0, c.required_output_grad()); }
constexpr void relu(gradient_context& c) {
  const auto x = c.input(0);
  const auto zero = c.scalar(0, x);
  c.set_input_grad(0, c.add("Where", {c.add("Greater", {x, zero}), c.required_output_grad(), zero}));
}
/// d|x| = sign(x) dy.
constexpr void abs(gradient_context& c) {
  c.set_input_grad(0, c.add("Mul", {c.required_output_grad(), c.add("Sign", {c.input(0)})}));
}
/// dy * y * (1 - y).
constexpr void sigmoid(gradient_context& c) {
  const auto y = c.output();
  const auto one_minus = c.add("Sub", {c.scalar(1, y), y});
  c.set_input_grad(0, c.add("Mul", {c.add("Mul", {c.required_output_grad(), y}), one_minus}));
}
/// dy * (1 - y^2).
constexpr void tanh(gradient_context& c) {
  const auto y = c.output();
  const auto one_minus = c.add("Sub", {c.scalar(1, y), c.add("Mul", {y, y})});
  c.set_input_grad(0, c.add("Mul", {c.required_output_grad(), one_minus}));
}
constexpr void exp(gradient_context& c) { c.set_input_grad(0, c.add("Mul", {c.required_output_grad(), c.output()})); }
constexpr void log(gradient_context& c) { c.set_input_grad(0, c.add("Div", {c.required_output_grad(), c.input(0)})); }
/// dy / (2 sqrt(x)).
constexpr void sqrt(gradient_context& c) {
  const auto y = c.output();
  c.set_input_grad(0, c.add("Div", {c.required_output_grad(), c.add("Mul", {y, c.scalar(2, y)})}));
}

/// dY * 2 / sqrt(pi) * exp(-x^2).
constexpr void erf(gradient_context& c) {
  const auto x = c.input(0);
  const auto e = c.add("Exp", {c.add("Neg", {c.add("Mul", {x, x})})});
  c.set_input_grad(0, c.add("Mul", {c.add("Mul", {c.required_output_grad(), e}), c.scalar(1.1283791670955126, x)}));
}
constexpr void leaky_relu(gradient_context& c) {
  const auto x = c.input(0), dy = c.required_output_grad();
  const auto alpha = c.scalar(c.attr_float("alpha", 0.01f), x);
  c.set_input_grad(0, c.add("Where", {c.add("Greater", {x, c.scalar(0, x)}), dy, c.add("Mul", {dy, alpha})}));
}
/// Clip: dY where min <= x <= max (PyTorch's clamp passes the bounds themselves).
constexpr void clip(gradient_context& c) {
  const auto x = c.input(0), dy = c.required_output_grad();
  tensor_id inside = no_tensor;
  auto both = [&](tensor_id t) { inside = inside == no_tensor ? t : c.add("And", {inside, t}); };
  if (c.op().opset != 0 && c.op().opset < 11) {
    if (c.has_attr("min")) both(c.add("GreaterOrEqual", {x, c.scalar(c.attr_float("min", 0), x)}));
    if (c.has_attr("max")) both(c.add("LessOrEqual", {x, c.scalar(c.attr_float("max", 0), x)}));
  } else {
    if (c.has_input(1)) both(c.add("GreaterOrEqual", {x, c.input(1)}));
    if (c.has_input(2)) both(c.add("LessOrEqual", {x, c.input(2)}));
  }
  c.set_input_grad(0, inside == no_tensor ? dy : c.add("Where", {inside, dy, c.scalar(0, dy)}));
}
/// dY * sigmoid(x).
constexpr void softplus(gradient_context& c) {
  c.set_input_grad(0, c.add("Mul", {c.required_output_grad(), c.add("Sigmoid", {c.input(0)})}));
}
/// y = a^b: da = dY * b * a^(b - 1), db = dY * y * ln(a).
constexpr void pow(gradient_context& c) {
  const auto a = c.input(0), b = c.input(1), dy = c.required_output_grad();
  if (c.info(a).type != c.info(b).type) throw c.fail("Pow with an exponent of another type has no gradient rule yet");
  if (c.wants(0)) {
    const auto p = c.add("Pow", {a, c.add("Sub", {b, c.scalar(1, b)})});
    c.set_input_grad(0, c.sum_to(c.add("Mul", {c.add("Mul", {dy, b}), p}), c.shape_of(a)));
  }
  if (c.wants(1))
    c.set_input_grad(1, c.sum_to(c.add("Mul", {c.add("Mul", {dy, c.output()}), c.add("Log", {a})}), c.shape_of(b)));
}

// --- shapes ---------------------------------------------------------------------------------------
/// Reshape, Flatten, Squeeze, Unsqueeze: the gradient takes the input's shape back.
constexpr void reshape(gradient_context& c) {
  c.set_input_grad(0, c.reshape(c.required_output_grad(), c.shape_of(c.input(0))));
}
constexpr void transpose(gradient_context& c) {
  const auto r = c.shape_of(c.input(0)).rank();
  auto perm = c.attr_ints("perm");
  if (perm.empty())
    for (std::size_t i = 0; i < r; ++i) perm.push_back(static_cast<std::int64_t>(r - 1 - i));
  std::vector<std::int64_t> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) inverse[static_cast<std::size_t>(perm[i])] = static_cast<std::int64_t>(i);
  c.set_input_grad(0, c.transpose(c.required_output_grad(), inverse));
}

/// Pad (constant mode, pads >= 0): the gradient is dY without the padding.
constexpr void pad(gradient_context& c) {
  std::string mode = "constant";
  if (const auto* a = c.op().find_attribute("mode"))
    if (const auto* v = std::get_if<std::string>(&a->value)) mode = *v;
  if (mode != "constant") throw c.fail("Pad in " + mode + " mode has no gradient rule yet", "pad with constants");
  std::vector<std::int64_t> pads = c.attr_ints("pads");
  if (!c.has_attr("pads")) {
    const auto v = c.constant_ints(1);
    if (!v) throw c.fail("the pads are computed at run time", "give the pads as a constant");
    pads = *v;
  }
  const auto sx = c.shape_of(c.input(0));
  const auto r = sx.rank();
  std::vector<std::int64_t> axes;
  if (c.has_input(3)) {
    const auto v = c.constant_ints(3);
    if (!v) throw c.fail("the axes are computed at run time", "give the axes as a constant");
    axes = *v;
  } else {
    for (std::size_t i = 0; i < r; ++i) axes.push_back(static_cast<std::int64_t>(i));
  }
  if (pads.size() != 2 * axes.size()) throw c.fail("pads has " + format_uint(pads.size()) + " values");
  std::vector<std::int64_t> starts, ends;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    auto a = axes[i] < 0 ? axes[i] + static_cast<std::int64_t>(r) : axes[i];
    if (pads[i] < 0 || pads[axes.size() + i] < 0) throw c.fail("negative pads (cropping) have no gradient rule yet");
    axes[i] = a;
    starts.push_back(pads[i]);
    ends.push_back(pads[i] + sx[static_cast<std::size_t>(a)]);
  }
  c.set_input_grad(0, c.add("Slice", {c.required_output_grad(), c.ints(starts), c.ints(ends), c.ints(axes)}));
}

/// A zero tensor shaped like `t` (for the gradient of an output nothing reads).
constexpr tensor_id zeros_like(gradient_context& c, tensor_id t) {
  return c.add("Expand", {c.scalar(0, t), c.ints(c.shape_of(t).dims())});
}
constexpr std::int64_t axis_attr(const gradient_context& c, std::int64_t dflt, std::size_t rank) {
  auto a = c.attr_int("axis", dflt);
  if (a < 0) a += static_cast<std::int64_t>(rank);
  if (a < 0 || a >= static_cast<std::int64_t>(rank)) throw c.fail("axis is out of range for rank " + format_uint(rank));
  return a;
}
/// Concat: each input's gradient is its stretch of dY along the axis.
constexpr void concat(gradient_context& c) {
  const auto dy = c.required_output_grad();
  const auto a = axis_attr(c, 0, c.shape_of(c.output()).rank());
  std::int64_t at = 0;
  for (std::size_t i = 0; i < c.num_inputs(); ++i) {
    const auto len = c.shape_of(c.input(i))[static_cast<std::size_t>(a)];
    if (c.wants(i)) c.set_input_grad(i, c.add("Slice", {dy, c.ints({at}), c.ints({at + len}), c.ints({a})}));
    at += len;
  }
}
/// Split: the outputs' gradients joined again (zeros for an output nothing reads).
constexpr void split(gradient_context& c) {
  const auto a = axis_attr(c, 0, c.shape_of(c.input(0)).rank());
  std::vector<tensor_id> parts;
  for (std::size_t i = 0; i < c.op().outputs.size(); ++i) {
    const auto g = c.output_grad(i);
    parts.push_back(g != no_tensor ? g : zeros_like(c, c.output(i)));
  }
  c.set_input_grad(0, c.add("Concat", parts, {{"axis", a}}));
}
/// A zero tensor of `like`'s element type and shape `s`.
constexpr tensor_id zeros(gradient_context& c, tensor_id like, const shape& s) {
  return c.add("Expand", {c.scalar(0, like), c.ints(s.dims())});
}
/// Slice: with unit steps, dY padded back to the input's extent; with other steps (negative ones
/// too), dY scattered axis by axis to the positions start + j * step it was read from.
constexpr void slice(gradient_context& c) {
  const auto sx = c.shape_of(c.input(0)), sy = c.shape_of(c.output());
  const auto r = sx.rank();
  auto read = [&](std::size_t input, std::string_view attr) -> std::vector<std::int64_t> {
    if (c.has_attr(attr)) return c.attr_ints(attr);
    if (!c.has_input(input)) return {};
    const auto v = c.constant_ints(input);
    if (!v) throw c.fail("the slice's bounds are computed at run time", "give them as constants");
    return *v;
  };
  const auto starts = read(1, "starts");
  auto axes = read(3, "axes");
  const auto steps = read(4, "steps");
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (std::any_of(steps.begin(), steps.end(), [](std::int64_t st) { return st != 1; })) {
    auto g = c.required_output_grad();
    for (std::size_t i = 0; i < axes.size() && i < starts.size(); ++i) {
      const auto a = static_cast<std::size_t>(axes[i] < 0 ? axes[i] + static_cast<std::int64_t>(r) : axes[i]);
      const auto step = i < steps.size() ? steps[i] : 1;
      if (step == 0) throw c.fail("a Slice step is 0");
      const auto d = sx[a], n = sy[a];
      auto st = starts[i] < 0 ? starts[i] + d : starts[i];
      st = step > 0 ? std::clamp<std::int64_t>(st, 0, d) : std::clamp<std::int64_t>(st, 0, d - 1);
      std::vector<double> at;
      for (std::int64_t j = 0; j < n; ++j) at.push_back(static_cast<double>(st + j * step));
      std::vector<std::int64_t> idims(r, 1);
      idims[a] = n;
      const auto gs = c.shape_of(g);
      auto full = gs.dims();
      full[a] = d;
      const auto idx = c.add("Expand", {c.constant(data_type::S64, shape(idims), at), c.ints(gs.dims())});
      g = c.add("ScatterElements", {zeros(c, g, shape(full)), idx, g}, {{"axis", static_cast<std::int64_t>(a)}});
    }
    c.set_input_grad(0, g);
    return;
  }
  std::vector<std::int64_t> pads(2 * r, 0);
  for (std::size_t i = 0; i < axes.size() && i < starts.size(); ++i) {
    auto a = axes[i] < 0 ? axes[i] + static_cast<std::int64_t>(r) : axes[i];
    const auto d = sx[static_cast<std::size_t>(a)];
    auto st = starts[i] < 0 ? starts[i] + d : starts[i];
    st = std::clamp<std::int64_t>(st, 0, d);
    pads[static_cast<std::size_t>(a)] = st;
    pads[r + static_cast<std::size_t>(a)] = d - st - sy[static_cast<std::size_t>(a)];
  }
  c.set_input_grad(0, c.add("Pad", {c.required_output_grad(), c.ints(pads)}));
}
/// Gather along an axis: dY's rows added back where they were taken from (repeated indices add up).
constexpr void gather(gradient_context& c) {
  const auto x = c.input(0), idx = c.input(1), dy = c.required_output_grad();
  const auto sx = c.shape_of(x);
  const auto a = static_cast<std::size_t>(axis_attr(c, 0, sx.rank()));
  const auto k = c.shape_of(idx).num_elements();
  auto dims = sx.dims();
  dims[a] = k;  // dY with the indices' axes flattened into one
  const auto flat_dy = c.reshape(dy, shape(dims));
  std::vector<std::int64_t> idx_dims(sx.rank(), 1);
  idx_dims[a] = k;
  const auto flat_idx = c.reshape(idx, shape(idx_dims));
  const auto wide = c.add("Expand", {flat_idx, c.ints(dims)});
  c.set_input_grad(0, c.add("ScatterElements", {zeros_like(c, x), wide, flat_dy},
                            {{"axis", static_cast<std::int64_t>(a)}, {"reduction", std::string("add")}}));
}
constexpr void expand(gradient_context& c) {
  c.set_input_grad(0, c.sum_to(c.required_output_grad(), c.shape_of(c.input(0))));
}
/// Where(cond, a, b): dY goes to a where cond holds and to b elsewhere.
constexpr void where(gradient_context& c) {
  const auto cond = c.input(0), dy = c.required_output_grad();
  const auto zero = c.scalar(0, dy);
  if (c.wants(1)) c.set_input_grad(1, c.sum_to(c.add("Where", {cond, dy, zero}), c.shape_of(c.input(1))));
  if (c.wants(2)) c.set_input_grad(2, c.sum_to(c.add("Where", {cond, zero, dy}), c.shape_of(c.input(2))));
}
/// Cast between floating-point types: the gradient cast back.
constexpr void cast(gradient_context& c) {
  c.set_input_grad(0, c.add("Cast", {c.required_output_grad()}, {{"to", onnx_code_of(c.info(c.input(0)).type)}}));
}

// --- matrix products ------------------------------------------------------------------------------
/// The last two axes of `t` swapped.
constexpr tensor_id swap_last_two(gradient_context& c, tensor_id t) {
  const auto r = c.shape_of(t).rank();
  std::vector<std::int64_t> perm;
  for (std::size_t i = 0; i < r; ++i) perm.push_back(static_cast<std::int64_t>(i));
  std::swap(perm[r - 2], perm[r - 1]);
  return c.transpose(t, perm);
}
/// Y = A @ B (numpy matmul: 1-D operands promoted, batch axes broadcast): dA = dY @ B^T and
/// dB = A^T @ dY, each summed over the batch axes its operand was broadcast along.
constexpr void matmul(gradient_context& c) {
  const auto a = c.input(0), b = c.input(1);
  const auto sa = c.shape_of(a), sb = c.shape_of(b);
  if (sa.rank() == 0 || sb.rank() == 0) throw c.fail("MatMul of a scalar has no gradient rule");
  // Promote 1-D operands as numpy does, and dY to the promoted product's shape.
  auto a2 = a, b2 = b, dy = c.required_output_grad();
  std::vector<std::int64_t> out = c.shape_of(dy).dims();
  if (sa.rank() == 1) {
    a2 = c.reshape(a, shape{1, sa[0]});
    out.insert(out.end() - (sb.rank() == 1 ? 0 : 1), 1);
  }
  if (sb.rank() == 1) {
    b2 = c.reshape(b, shape{sb[0], 1});
    out.push_back(1);
  }
  dy = c.reshape(dy, shape(out));
  if (c.wants(0)) {
    const auto g = c.add("MatMul", {dy, swap_last_two(c, b2)});
    c.set_input_grad(0, c.reshape(c.sum_to(g, sa.rank() == 1 ? shape{1, sa[0]} : sa), sa));
  }
  if (c.wants(1)) {
    const auto sa2 = c.shape_of(a2);
    if (sb.rank() == 2 && sa2.rank() > 2) {
      // A weight shared by every batch row (a Linear layer on [batch, seq, features]): its gradient is
      // one product over all rows, [K, rows] @ [rows, N], rather than a product per batch row summed
      // afterwards, which materialises every row's [K, N] and multiplies matrices of depth M.
      const auto k = sa2[sa2.rank() - 1], n = c.shape_of(dy).dims().back();
      const auto rows = sa2.num_elements() / k;
      c.set_input_grad(1, c.add("Gemm", {c.reshape(a2, shape{rows, k}), c.reshape(dy, shape{rows, n})},
                                {{"transA", std::int64_t{1}}}));
    } else {
      const auto g = c.add("MatMul", {swap_last_two(c, a2), dy});
      c.set_input_grad(1, c.reshape(c.sum_to(g, sb.rank() == 1 ? shape{sb[0], 1} : sb), sb));
    }
  }
}
/// Y = alpha op(A) op(B) + beta C, with op() an optional transpose (A' = op(A), B' = op(B)):
/// dA' = alpha dY B'^T, dB' = alpha A'^T dY, dC = beta dY summed to C's shape; each Gemm below
/// writes dA or dB directly in its stored orientation.
constexpr void gemm(gradient_context& c) {
  const auto dy = c.required_output_grad();
  const auto ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  const float alpha = c.attr_float("alpha", 1.0f), beta = c.attr_float("beta", 1.0f);
  auto gemm_of = [&](tensor_id x, bool tx, tensor_id y, bool ty) {
    return c.add("Gemm", {x, y},
                 {{"alpha", alpha}, {"transA", std::int64_t{tx ? 1 : 0}}, {"transB", std::int64_t{ty ? 1 : 0}}});
  };
  const auto a = c.input(0), b = c.input(1);
  if (c.wants(0)) c.set_input_grad(0, ta ? gemm_of(b, tb, dy, true) : gemm_of(dy, false, b, !tb));
  if (c.wants(1)) c.set_input_grad(1, tb ? gemm_of(dy, true, a, ta) : gemm_of(a, !ta, dy, false));
  if (c.has_input(2) && c.wants(2)) {
    auto g = c.sum_to(dy, c.shape_of(c.input(2)));
    if (beta != 1.0f) g = c.add("Mul", {g, c.scalar(beta, dy)});
    c.set_input_grad(2, g);
  }
}

// --- reductions and softmax -----------------------------------------------------------------------
/// The reduced axes of a Reduce* op (attribute before opset 13 / 18, input after), normalised;
/// every axis when none are given (and noop_with_empty_axes is not set).
constexpr std::vector<std::int64_t> reduced_axes(const gradient_context& c) {
  const auto r = static_cast<std::int64_t>(c.shape_of(c.input(0)).rank());
  std::vector<std::int64_t> axes = c.attr_ints("axes");
  if (!c.has_attr("axes") && c.has_input(1)) {
    const auto v = c.constant_ints(1);
    if (!v) throw c.fail("the axes are computed at run time", "give the axes as a constant");
    axes = *v;
  }
  if (axes.empty()) {
    if (c.attr_int("noop_with_empty_axes", 0) != 0) return {};
    for (std::int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  for (auto& a : axes) {
    if (a < -r || a >= r) throw c.fail("a reduced axis is out of range for rank " + format_uint(static_cast<std::uint64_t>(r)));
    if (a < 0) a += r;
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}
/// dY brought back to X's shape: reshaped to the kept-dims shape, then expanded.
constexpr tensor_id expand_reduced(gradient_context& c, tensor_id dy, const std::vector<std::int64_t>& axes) {
  const auto sx = c.shape_of(c.input(0));
  auto kept = sx.dims();
  for (auto a : axes) kept[static_cast<std::size_t>(a)] = 1;
  const auto r = c.reshape(dy, shape(kept));
  if (shape(kept) == sx) return r;
  return c.add("Expand", {r, c.ints(sx.dims())});
}
constexpr void reduce_sum(gradient_context& c) {
  c.set_input_grad(0, expand_reduced(c, c.required_output_grad(), reduced_axes(c)));
}
constexpr void reduce_mean(gradient_context& c) {
  const auto axes = reduced_axes(c);
  std::int64_t n = 1;
  for (auto a : axes) n *= c.shape_of(c.input(0))[static_cast<std::size_t>(a)];
  const auto dy = c.required_output_grad();
  const auto scaled = c.add("Div", {dy, c.scalar(static_cast<double>(n), dy)});
  c.set_input_grad(0, expand_reduced(c, scaled, axes));
}
/// The one axis Softmax / LogSoftmax normalise over (opset 13 and later, or the last axis before).
constexpr std::int64_t softmax_axis(const gradient_context& c) {
  const auto r = static_cast<std::int64_t>(c.shape_of(c.input(0)).rank());
  const bool new_form = c.op().opset == 0 || c.op().opset >= 13;
  auto axis = c.attr_int("axis", new_form ? -1 : 1);
  if (axis < 0) axis += r;
  if (!new_form && axis != r - 1)
    throw c.fail("before opset 13 the op normalises a flattened 2-D view; only its last-axis form has a gradient",
                 "export with opset 13 or later");
  return axis;
}
/// dX = Y * (dY - sum(dY * Y, axis)).
constexpr void softmax(gradient_context& c) {
  const auto axis = softmax_axis(c);
  const auto y = c.output(), dy = c.required_output_grad();
  const auto s = c.add("ReduceSum", {c.add("Mul", {dy, y}), c.ints({axis})}, {keepdims(true)});
  c.set_input_grad(0, c.add("Mul", {y, c.add("Sub", {dy, s})}));
}
/// dX = dY - exp(Y) * sum(dY, axis).
constexpr void log_softmax(gradient_context& c) {
  const auto axis = softmax_axis(c);
  const auto y = c.output(), dy = c.required_output_grad();
  const auto s = c.add("ReduceSum", {dy, c.ints({axis})}, {keepdims(true)});
  c.set_input_grad(0, c.add("Sub", {dy, c.add("Mul", {c.add("Exp", {y}), s})}));
}

// --- convolution and pooling ---------------------------------------------------------------------
/// The explicit pads (begins, then ends) of a Conv or pooling op over input `x` with output `y`,
/// auto_pad resolved as the op did.
constexpr std::vector<std::int64_t> window_pads(const gradient_context& c, const op_node& op, const shape& x,
                                                const shape& y, const std::vector<std::int64_t>& kernel,
                                                const std::vector<std::int64_t>& strides,
                                                const std::vector<std::int64_t>& dilations) {
  const auto r = kernel.size();
  std::string auto_pad = "NOTSET";
  if (const auto* a = op.find_attribute("auto_pad"))
    if (const auto* v = std::get_if<std::string>(&a->value)) auto_pad = *v;
  std::vector<std::int64_t> pads;
  if (const auto* a = op.find_attribute("pads"))
    if (const auto* v = std::get_if<std::vector<std::int64_t>>(&a->value)) pads = *v;
  if (auto_pad == "NOTSET" && !pads.empty()) {
    if (pads.size() != 2 * r) throw c.fail("pads has " + format_uint(pads.size()) + " values");
    return pads;
  }
  pads.assign(2 * r, 0);
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (std::size_t i = 0; i < r; ++i) {
      const auto total = std::max<std::int64_t>(
          0, (y[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - x[2 + i]);
      const auto small = total / 2, big = total - small;
      pads[i] = auto_pad == "SAME_UPPER" ? small : big;
      pads[r + i] = auto_pad == "SAME_UPPER" ? big : small;
    }
  }
  return pads;
}
constexpr std::vector<std::int64_t> window_pads(const gradient_context& c, const shape& x, const shape& y,
                                                const std::vector<std::int64_t>& kernel,
                                                const std::vector<std::int64_t>& strides,
                                                const std::vector<std::int64_t>& dilations) {
  return window_pads(c, c.op(), x, y, kernel, strides, dilations);
}
constexpr std::vector<std::int64_t> ints_or(const gradient_context& c, const op_node& op, std::string_view name,
                                            std::size_t n, std::int64_t fallback) {
  std::vector<std::int64_t> v;
  if (const auto* a = op.find_attribute(name))
    if (const auto* got = std::get_if<std::vector<std::int64_t>>(&a->value)) v = *got;
  if (v.empty()) v.assign(n, fallback);
  if (v.size() != n) throw c.fail("attribute " + std::string(name) + " has " + format_uint(v.size()) + " values");
  return v;
}
constexpr std::vector<std::int64_t> ints_or(const gradient_context& c, std::string_view name, std::size_t n,
                                            std::int64_t fallback) {
  return ints_or(c, c.op(), name, n, fallback);
}
/// The output_padding a ConvTranspose with these windows needs to give back `x`'s spatial sizes.
constexpr std::vector<std::int64_t> output_padding(const shape& x, const shape& y, const std::vector<std::int64_t>& k,
                                                   const std::vector<std::int64_t>& s,
                                                   const std::vector<std::int64_t>& d,
                                                   const std::vector<std::int64_t>& pads) {
  const auto r = k.size();
  std::vector<std::int64_t> op(r);
  for (std::size_t i = 0; i < r; ++i)
    op[i] = x[2 + i] - ((y[2 + i] - 1) * s[i] - pads[i] - pads[r + i] + (k[i] - 1) * d[i] + 1);
  return op;
}
/// The axes [2, rank) of a tensor of rank `r`, and the permutation swapping axes 0 and 1.
constexpr std::vector<std::int64_t> spatial_axes(std::size_t r, std::int64_t first = 2) {
  std::vector<std::int64_t> a;
  for (auto i = static_cast<std::size_t>(first); i < r; ++i) a.push_back(static_cast<std::int64_t>(i));
  return a;
}
/// Axis 0, then `axes`: what a bias's or a per-channel gradient sums over. (Built by push_back:
/// GCC 12 warns of a null dereference in vector::insert at the front.)
constexpr std::vector<std::int64_t> with_batch_axis(const std::vector<std::int64_t>& axes) {
  std::vector<std::int64_t> r{0};
  for (const auto a : axes) r.push_back(a);
  return r;
}
constexpr std::vector<std::int64_t> swap01(std::size_t r) {
  std::vector<std::int64_t> p{1, 0};
  for (std::size_t i = 2; i < r; ++i) p.push_back(static_cast<std::int64_t>(i));
  return p;
}
/// The input gradients of one convolution `conv` (a Conv op whose inputs are the forward op's
/// inputs `slots` {X, W, B}), from dY: dX is the ConvTranspose of dY by the same weights; dW is
/// ipu::ConvWeightsGrad of dY and X (one op: as a Conv of X^T by dY^T it took two transposes in, a
/// slice and a transpose out); dB sums dY. Conv's rule, and MultiConv's for each of its convs.
struct conv_slots {
  std::size_t x, w, b;
};
constexpr void conv_input_grads(gradient_context& c, const op_node& conv, conv_slots slots, tensor_id dy) {
  const auto x = c.input(slots.x), w = c.input(slots.w);
  const auto sx = c.shape_of(x), sw = c.shape_of(w), sy = c.shape_of(dy);
  const auto r = sx.rank() - 2;
  std::int64_t group = 1;
  if (const auto* a = conv.find_attribute("group"))
    if (const auto* v = std::get_if<std::int64_t>(&a->value)) group = *v;
  std::vector<std::int64_t> kernel(sw.dims().begin() + 2, sw.dims().end());
  const auto strides = ints_or(c, conv, "strides", r, 1), dilations = ints_or(c, conv, "dilations", r, 1);
  const auto pads = window_pads(c, conv, sx, sy, kernel, strides, dilations);
  if (c.wants(slots.x)) {
    c.set_input_grad(slots.x, c.add("ConvTranspose", {dy, w},
                                    {{"strides", strides}, {"dilations", dilations}, {"pads", pads},
                                     {"group", group}, {"kernel_shape", kernel},
                                     {"output_padding", output_padding(sx, sy, kernel, strides, dilations, pads)}}));
  }
  if (c.wants(slots.w)) {
    c.set_input_grad(slots.w, c.add_n("ConvWeightsGrad", {dy, x},
                                      {{"kernel_shape", kernel}, {"strides", strides}, {"dilations", dilations},
                                       {"pads", pads}, {"group", group}},
                                      1, "ipu")[0]);
  }
  if (c.has_input(slots.b) && c.wants(slots.b)) {
    const auto axes = with_batch_axis(spatial_axes(sy.rank()));
    c.set_input_grad(slots.b, c.add("ReduceSum", {dy, c.ints(axes)}, {keepdims(false)}));
  }
}
/// Conv (groups, strides, dilations, pads, auto_pad).
constexpr void conv(gradient_context& c) { conv_input_grads(c, c.op(), {0, 1, 2}, c.required_output_grad()); }
/// MaxPool: dY goes to where each window's maximum was (the indices of a MaxPool recomputed with
/// its Indices output), added up where windows overlap.
constexpr void max_pool(gradient_context& c) {
  if (c.attr_int("storage_order", 0) != 0) throw c.fail("column-major Indices have no gradient rule");
  const auto x = c.input(0), dy = c.required_output_grad();
  const auto sx = c.shape_of(x);
  const auto pooled = c.add_n("MaxPool", {x}, c.op().attributes, 2);
  const auto total = sx.num_elements();
  const auto zeros = c.add("Expand", {c.scalar(0, x), c.ints({total})});
  const auto flat = c.add("ScatterElements", {zeros, c.reshape(pooled[1], shape{c.shape_of(pooled[1]).num_elements()}),
                                              c.reshape(dy, shape{c.shape_of(dy).num_elements()})},
                          {{"axis", std::int64_t{0}}, {"reduction", std::string("add")}});
  c.set_input_grad(0, c.reshape(flat, sx));
}
/// AveragePool: each window's dY / window size spread back over the window (a ConvTranspose by a
/// per-channel kernel of ones). Windows cut by padding without count_include_pad, or by ceil_mode,
/// divide by fewer elements and have no rule yet.
constexpr void average_pool(gradient_context& c) {
  const auto x = c.input(0), dy = c.required_output_grad();
  const auto sx = c.shape_of(x), sy = c.shape_of(c.output());
  const auto r = sx.rank() - 2;
  const auto kernel = c.attr_ints("kernel_shape");
  if (kernel.size() != r) throw c.fail("kernel_shape has " + format_uint(kernel.size()) + " values");
  const auto strides = ints_or(c, "strides", r, 1), dilations = ints_or(c, "dilations", r, 1);
  const auto pads = window_pads(c, sx, sy, kernel, strides, dilations);
  const bool padded = std::any_of(pads.begin(), pads.end(), [](std::int64_t p) { return p != 0; });
  if (c.attr_int("ceil_mode", 0) != 0 || (padded && c.attr_int("count_include_pad", 0) == 0))
    throw c.fail("windows cut short (ceil_mode, or pads without count_include_pad) have no gradient rule yet",
                 "pool without padding, or with count_include_pad = 1");
  std::int64_t size = 1;
  for (auto k : kernel) size *= k;
  std::vector<std::int64_t> wdims{sx[1], 1};
  wdims.insert(wdims.end(), kernel.begin(), kernel.end());
  const shape ws(wdims);
  const auto ones = c.constant(c.info(x).type, ws, std::vector<double>(static_cast<std::size_t>(ws.num_elements()),
                                                                        1.0 / static_cast<double>(size)));
  c.set_input_grad(0, c.add("ConvTranspose", {dy, ones},
                            {{"strides", strides}, {"dilations", dilations}, {"pads", pads}, {"group", sx[1]},
                             {"kernel_shape", kernel},
                             {"output_padding", output_padding(sx, sy, kernel, strides, dilations, pads)}}));
}
/// GlobalAveragePool: dY / (spatial size), expanded over the input.
constexpr void global_average_pool(gradient_context& c) {
  const auto x = c.input(0), dy = c.required_output_grad();
  const auto sx = c.shape_of(x);
  std::int64_t n = 1;
  for (std::size_t i = 2; i < sx.rank(); ++i) n *= sx[i];
  const auto scaled = c.add("Div", {dy, c.scalar(static_cast<double>(n), dy)});
  c.set_input_grad(0, c.add("Expand", {scaled, c.ints(sx.dims())}));
}

// --- losses ---------------------------------------------------------------------------------------
/// The gradient of NegativeLogLikelihoodLoss(logp [N, C, ...], target [N, ...], weight [C]?) with
/// respect to logp, for the loss's gradient `dy`: -dL * weight[t] at each target's class (0 for
/// ignored targets), divided by the counted targets' total weight for the mean. Shared with
/// SoftmaxCrossEntropyLoss. Targets and weights get no gradient.
constexpr tensor_id nll_grad(gradient_context& c, tensor_id dy) {
  const auto x = c.input(0), t = c.input(1);
  const auto sx = c.shape_of(x);
  if (sx.rank() < 2)  // inference refuses it first; said here too, as classes and wdims below need [1]
    throw c.fail("the log-probabilities have fewer than two dimensions, not [N, C, ...]",
                 "give them the batch and the classes as their first two dimensions");
  const auto classes = sx[1];
  const auto reduction = c.attr_string("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    throw c.fail("unknown reduction '" + reduction + "'", "use none, sum or mean");
  tensor_id target = t;
  if (c.has_attr("ignore_index")) {
    // In the targets' own type (S32 or S64).
    const auto index_type = c.info(t).type;
    const auto ignore = c.constant(index_type, shape{}, {static_cast<double>(c.attr_int("ignore_index", 0))});
    // An index outside [-C, C) one-hot encodes as all zeros.
    const auto no_class = c.constant(index_type, shape{}, {static_cast<double>(classes)});
    target = c.add("Where", {c.add("Equal", {t, ignore}), no_class, t});
  }
  const auto values = c.constant(c.info(x).type, shape{2}, {0.0, -1.0});
  auto g = c.add("OneHot", {target, c.constant(data_type::S64, shape{}, {static_cast<double>(classes)}), values},
                 {{"axis", std::int64_t{1}}});
  if (c.has_input(2)) {
    std::vector<std::int64_t> wdims{1, classes};  // [1, C, 1, ...]
    wdims.resize(sx.rank(), 1);
    g = c.add("Mul", {g, c.reshape(c.input(2), shape(wdims))});  // -weight[t] at the target's class
  }
  if (reduction == "mean") {
    tensor_id total;
    if (c.has_input(2) || c.has_attr("ignore_index")) {
      total = c.add("Neg", {c.add("ReduceSum", {g}, {keepdims(false)})});  // the counted targets' weights
    } else {
      const auto targets = c.shape_of(t);  // named: a range-for over a temporary's dims() dangles
      total = c.scalar(static_cast<double>(targets.num_elements()), x);
    }
    dy = c.add("Div", {dy, total});
  }
  // With no reduction dY has the target's shape [N, d1...]: the class axis broadcasts over it.
  if (reduction == "none") dy = c.add("Unsqueeze", {dy, c.ints({1})});
  return c.add("Mul", {g, dy});
}
constexpr void nll_loss(gradient_context& c) { c.set_input_grad(0, nll_grad(c, c.required_output_grad())); }
/// SoftmaxCrossEntropyLoss: the gradient reaching log_softmax(X) over the class axis (from the
/// loss, as for NegativeLogLikelihoodLoss, and from the optional log_prob output) taken through it.
constexpr void softmax_cross_entropy(gradient_context& c) {
  const auto x = c.input(0);
  tensor_id g = no_tensor;
  if (c.output_grad(0) != no_tensor) g = nll_grad(c, c.output_grad(0));
  if (c.output_grad(1) != no_tensor) g = g == no_tensor ? c.output_grad(1) : c.add("Add", {g, c.output_grad(1)});
  if (g == no_tensor) throw c.fail("no gradient flows into either output");
  const auto logp = c.op().outputs.size() > 1 && c.op().outputs[1] != no_tensor
                        ? c.output(1)
                        : c.add("LogSoftmax", {x}, {{"axis", std::int64_t{1}}});
  const auto s = c.add("ReduceSum", {g, c.ints({1})}, {keepdims(true)});
  c.set_input_grad(0, c.add("Sub", {g, c.add("Mul", {c.add("Exp", {logp}), s})}));
}

// --- more activations and element-wise functions --------------------------------------------------
/// dY * f'(x), f' written as ops.
constexpr void times(gradient_context& c, tensor_id derivative) {
  c.set_input_grad(0, c.add("Mul", {c.required_output_grad(), derivative}));
}
/// Where(x > 0, dY * above, dY * below), a missing factor meaning 1.
constexpr void by_sign(gradient_context& c, tensor_id above, tensor_id below) {
  const auto x = c.input(0), dy = c.required_output_grad();
  auto times_dy = [&](tensor_id f) { return f == no_tensor ? dy : c.add("Mul", {dy, f}); };
  c.set_input_grad(0, c.add("Where", {c.add("Greater", {x, c.scalar(0, x)}), times_dy(above), times_dy(below)}));
}
/// Elu: alpha * exp(x) = y + alpha below 0.
constexpr void elu(gradient_context& c) {
  by_sign(c, no_tensor, c.add("Add", {c.output(), c.scalar(c.attr_float("alpha", 1.0f), c.output())}));
}
/// Selu: gamma above 0, gamma * alpha * exp(x) = y + gamma * alpha below.
constexpr void selu(gradient_context& c) {
  const double alpha = c.attr_float("alpha", 1.67326319217681884765625f);
  const double scale = c.attr_float("gamma", 1.05070102214813232421875f);
  const auto y = c.output();
  by_sign(c, c.scalar(scale, y), c.add("Add", {y, c.scalar(scale * alpha, y)}));
}
/// Celu: exp(x / alpha) below 0.
constexpr void celu(gradient_context& c) {
  const auto x = c.input(0);
  by_sign(c, no_tensor, c.add("Exp", {c.add("Div", {x, c.scalar(c.attr_float("alpha", 1.0f), x)})}));
}
/// The gradient `g` where `keep` holds, 0 elsewhere.
constexpr tensor_id masked(gradient_context& c, tensor_id keep, tensor_id g) {
  return c.add("Where", {keep, g, c.scalar(0, g)});
}
/// HardSigmoid: alpha where 0 < alpha x + beta < 1.
constexpr void hard_sigmoid(gradient_context& c) {
  const auto x = c.input(0);
  const double alpha = c.attr_float("alpha", 0.2f), beta = c.attr_float("beta", 0.5f);
  const auto t = c.add("Add", {c.add("Mul", {x, c.scalar(alpha, x)}), c.scalar(beta, x)});
  const auto inside = c.add("And", {c.add("Greater", {t, c.scalar(0, x)}), c.add("Less", {t, c.scalar(1, x)})});
  c.set_input_grad(0, masked(c, inside, c.add("Mul", {c.required_output_grad(), c.scalar(alpha, x)})));
}
/// HardSwish, x * clamp(x / 6 + 1/2, 0, 1): 0 below -3, 1 above 3, x / 3 + 1/2 between.
constexpr void hard_swish(gradient_context& c) {
  const auto x = c.input(0), dy = c.required_output_grad();
  const auto mid = c.add("Mul", {dy, c.add("Add", {c.add("Div", {x, c.scalar(3, x)}), c.scalar(0.5, x)})});
  const auto upper = c.add("Where", {c.add("Greater", {x, c.scalar(3, x)}), dy, mid});
  c.set_input_grad(0, masked(c, c.add("GreaterOrEqual", {x, c.scalar(-3, x)}), upper));
}
/// Softsign: 1 / (1 + |x|)^2.
constexpr void softsign(gradient_context& c) {
  const auto x = c.input(0);
  const auto d = c.add("Add", {c.add("Abs", {x}), c.scalar(1, x)});
  c.set_input_grad(0, c.add("Div", {c.required_output_grad(), c.add("Mul", {d, d})}));
}
/// Mish, x * tanh(softplus(x)): t + x * (1 - t^2) * sigmoid(x) with t = tanh(softplus(x)).
constexpr void mish(gradient_context& c) {
  const auto x = c.input(0);
  const auto t = c.add("Tanh", {c.add("Softplus", {x})});
  const auto one_minus = c.add("Sub", {c.scalar(1, x), c.add("Mul", {t, t})});
  times(c, c.add("Add", {t, c.add("Mul", {c.add("Mul", {x, one_minus}), c.add("Sigmoid", {x})})}));
}
/// Swish, x * sigmoid(x): s + x * s * (1 - s) with s = sigmoid(x).
constexpr void swish(gradient_context& c) {
  const auto x = c.input(0);
  const auto s = c.add("Sigmoid", {x});
  const auto one_minus = c.add("Sub", {c.scalar(1, x), s});
  times(c, c.add("Add", {s, c.add("Mul", {c.add("Mul", {x, s}), one_minus})}));
}
/// Gelu, x * Phi(x): Phi(x) + x * phi(x) exactly; with the tanh approximation
/// 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2), t = tanh(k (x + a x^3)).
constexpr void gelu_with(gradient_context& c, bool tanh_approximation) {
  const auto x = c.input(0);
  auto s = [&](double v) { return c.scalar(v, x); };
  auto mul = [&](tensor_id a, tensor_id b) { return c.add("Mul", {a, b}); };
  const auto xx = mul(x, x);
  if (!tanh_approximation) {
    const auto cdf = mul(s(0.5), c.add("Add", {s(1), c.add("Erf", {mul(x, s(0.7071067811865476))})}));
    const auto pdf = mul(c.add("Exp", {mul(xx, s(-0.5))}), s(0.3989422804014327));
    return times(c, c.add("Add", {cdf, mul(x, pdf)}));
  }
  const double k = 0.7978845608028654, a = 0.044715;
  const auto t = c.add("Tanh", {mul(s(k), c.add("Add", {x, mul(s(a), mul(xx, x))}))});
  const auto left = mul(s(0.5), c.add("Add", {s(1), t}));
  const auto inner = mul(c.add("Sub", {s(1), mul(t, t)}), c.add("Add", {s(k), mul(s(3 * a * k), xx)}));
  times(c, c.add("Add", {left, mul(mul(s(0.5), x), inner)}));
}
/// ONNX Gelu: the approximate attribute ("none" or "tanh"); com.microsoft's is exact; PopART's
/// ai.graphcore Gelu is the tanh approximation.
constexpr void gelu(gradient_context& c) {
  const auto approximate = c.attr_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") throw c.fail("approximate is '" + approximate + "'");
  gelu_with(c, approximate == "tanh");
}
constexpr void gelu_exact(gradient_context& c) { gelu_with(c, false); }
constexpr void gelu_tanh(gradient_context& c) { gelu_with(c, true); }
/// PRelu: dY * slope where x < 0; the slope (broadcast to x) gets dY * x there, summed back.
constexpr void prelu(gradient_context& c) {
  const auto x = c.input(0), slope = c.input(1), dy = c.required_output_grad();
  const auto negative = c.add("Less", {x, c.scalar(0, x)});
  if (c.wants(0)) c.set_input_grad(0, c.add("Where", {negative, c.add("Mul", {dy, slope}), dy}));
  if (c.wants(1)) c.set_input_grad(1, c.sum_to(masked(c, negative, c.add("Mul", {dy, x})), c.shape_of(slope)));
}
constexpr void thresholded_relu(gradient_context& c) {
  const auto x = c.input(0);
  const auto above = c.add("Greater", {x, c.scalar(c.attr_float("alpha", 1.0f), x)});
  c.set_input_grad(0, masked(c, above, c.required_output_grad()));
}
/// Shrink: dY outside [-lambd, lambd].
constexpr void shrink(gradient_context& c) {
  const auto x = c.input(0);
  const double lambd = c.attr_float("lambd", 0.5f);
  const auto outside =
      c.add("Or", {c.add("Less", {x, c.scalar(-lambd, x)}), c.add("Greater", {x, c.scalar(lambd, x)})});
  c.set_input_grad(0, masked(c, outside, c.required_output_grad()));
}
/// Reciprocal: -dY * y^2.
constexpr void reciprocal(gradient_context& c) {
  const auto y = c.output();
  c.set_input_grad(0, c.add("Neg", {c.add("Mul", {c.required_output_grad(), c.add("Mul", {y, y})})}));
}
constexpr void sin(gradient_context& c) { times(c, c.add("Cos", {c.input(0)})); }
constexpr void cos(gradient_context& c) { times(c, c.add("Neg", {c.add("Sin", {c.input(0)})})); }
/// Sum and Mean of any number of broadcast inputs: dY (divided by the count for Mean), summed
/// back to each input's shape.
constexpr void variadic_sum(gradient_context& c) {
  auto dy = c.required_output_grad();
  if (c.op().type == "Mean") dy = c.add("Div", {dy, c.scalar(static_cast<double>(c.num_inputs()), dy)});
  for (std::size_t i = 0; i < c.num_inputs(); ++i)
    if (c.wants(i)) c.set_input_grad(i, c.sum_to(dy, c.shape_of(c.input(i))));
}
/// Max and Min: dY goes to the input the result was taken from (the first one on a tie).
constexpr void variadic_pick(gradient_context& c) {
  const auto y = c.output(), dy = c.required_output_grad();
  tensor_id taken = no_tensor;  // bool: positions an earlier input already took
  for (std::size_t i = 0; i < c.num_inputs(); ++i) {
    const auto same = c.add("Equal", {c.input(i), y});
    const auto mine = taken == no_tensor ? same : c.add("And", {same, c.add("Not", {taken})});
    if (c.wants(i)) c.set_input_grad(i, c.sum_to(masked(c, mine, dy), c.shape_of(c.input(i))));
    if (i + 1 < c.num_inputs()) taken = taken == no_tensor ? same : c.add("Or", {taken, same});
  }
}

// --- more reductions ------------------------------------------------------------------------------
/// The gradient spread back to the maxima (or minima) of X over `axes`, Y holding them with the
/// reduced axes kept: shared evenly among tied positions (as PyTorch's amax / amin).
constexpr tensor_id to_extremes(gradient_context& c, tensor_id yk, tensor_id dyk,
                                const std::vector<std::int64_t>& axes) {
  const auto x = c.input(0);
  const auto hit = c.add("Cast", {c.add("Equal", {x, yk})}, {{"to", onnx_code_of(c.info(x).type)}});
  const auto count = c.add("ReduceSum", {hit, c.ints(axes)}, {keepdims(true)});
  return c.add("Mul", {hit, c.add("Div", {dyk, count})});
}
/// ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and
/// ReduceSumSquare: with Y and dY reshaped to keep the reduced axes, dX is dY times the reduction's
/// derivative (ReduceProd's y / x assumes no zero in X).
constexpr void reduce_other(gradient_context& c) {
  const auto axes = reduced_axes(c);
  const auto x = c.input(0), dy = c.required_output_grad();
  if (axes.empty()) return c.set_input_grad(0, dy);  // noop_with_empty_axes: the input itself
  const auto sx = c.shape_of(x);
  auto kept = sx.dims();
  for (auto a : axes) kept[static_cast<std::size_t>(a)] = 1;
  const auto yk = c.reshape(c.output(), shape(kept)), dyk = c.reshape(dy, shape(kept));
  const auto& t = c.op().type;
  tensor_id g;
  if (t == "ReduceMax" || t == "ReduceMin") g = to_extremes(c, yk, dyk, axes);
  else if (t == "ReduceProd") g = c.add("Mul", {dyk, c.add("Div", {yk, x})});
  else if (t == "ReduceL1") g = c.add("Mul", {dyk, c.add("Sign", {x})});
  else if (t == "ReduceL2") g = c.add("Mul", {dyk, c.add("Div", {x, yk})});
  else if (t == "ReduceLogSum") g = c.add("Div", {dyk, c.add("Exp", {yk})});
  else if (t == "ReduceLogSumExp") g = c.add("Mul", {dyk, c.add("Exp", {c.add("Sub", {x, yk})})});
  else if (t == "ReduceSumSquare") g = c.add("Mul", {dyk, c.add("Mul", {x, c.scalar(2, x)})});
  else throw c.fail("no gradient rule for " + t);
  if (c.shape_of(g) != sx) g = c.add("Expand", {g, c.ints(sx.dims())});
  c.set_input_grad(0, g);
}
/// GlobalMaxPool: dY to each channel's maxima.
constexpr void global_max_pool(gradient_context& c) {
  const auto rank = c.shape_of(c.input(0)).rank();
  c.set_input_grad(0, to_extremes(c, c.output(), c.required_output_grad(), spatial_axes(rank)));
}
/// CumSum: the cumulative sum of dY in the other direction (exclusive stays exclusive).
constexpr void cumsum(gradient_context& c) {
  c.set_input_grad(0, c.add("CumSum", {c.required_output_grad(), c.input(1)},
                            {{"exclusive", c.attr_int("exclusive", 0)},
                             {"reverse", std::int64_t{c.attr_int("reverse", 0) != 0 ? 0 : 1}}}));
}

// --- more data movement ---------------------------------------------------------------------------
/// Tile: dY viewed as [r0, d0, r1, d1, ...] and summed over the repeats.
constexpr void tile(gradient_context& c) {
  const auto sx = c.shape_of(c.input(0));
  const auto repeats = c.constant_ints(1);
  if (!repeats) throw c.fail("the repeats are computed at run time", "give them as a constant");
  if (repeats->size() != sx.rank()) throw c.fail("repeats has " + format_uint(repeats->size()) + " values");
  std::vector<std::int64_t> split, axes;
  for (std::size_t i = 0; i < sx.rank(); ++i) {
    axes.push_back(static_cast<std::int64_t>(split.size()));
    split.push_back((*repeats)[i]);
    split.push_back(sx[i]);
  }
  const auto dy = c.reshape(c.required_output_grad(), shape(split));
  if (axes.empty()) return c.set_input_grad(0, dy);
  c.set_input_grad(0, c.reshape(c.add("ReduceSum", {dy, c.ints(axes)}, {keepdims(false)}), sx));
}
/// GatherElements: dY added back where each element was taken from.
constexpr void gather_elements(gradient_context& c) {
  const auto x = c.input(0);
  const auto a = axis_attr(c, 0, c.shape_of(x).rank());
  c.set_input_grad(0, c.add("ScatterElements", {zeros_like(c, x), c.input(1), c.required_output_grad()},
                            {{"axis", a}, {"reduction", std::string("add")}}));
}
/// Dropout in inference passes dY through. In training mode its gradient needs the mask its
/// forward run drew: a training step writes such a Dropout out as a seeded mask and a Mul
/// (ipu/train/training_graph.hpp), so only a Dropout met by autodiff alone gets here, and is refused.
constexpr void dropout(gradient_context& c) {
  if (c.has_input(2)) {
    const auto training = c.constant_bool(2);
    if (!training) throw c.fail("training_mode is computed at run time", "give training_mode as a constant false");
    if (*training)
      throw c.fail("Dropout in training mode draws a fresh mask each run, which its gradient cannot see",
                   "train through ipu::train::make_training_graph or a training session (they draw the mask "
                   "from a seed), or export the model in eval mode");
  }
  identity(c);
}

// --- normalisation --------------------------------------------------------------------------------
/// X normalised over `axes` (mean 0, variance 1, eps added to the variance), and 1 / sigma, both
/// with the axes kept.
struct normalized {
  tensor_id xhat, inv;
};
constexpr normalized normalize(gradient_context& c, tensor_id x, const std::vector<std::int64_t>& axes, double eps) {
  const auto xc = c.add("Sub", {x, c.add("ReduceMean", {x, c.ints(axes)}, {keepdims(true)})});
  const auto var = c.add("ReduceMean", {c.add("Mul", {xc, xc}), c.ints(axes)}, {keepdims(true)});
  const auto inv = c.add("Reciprocal", {c.add("Sqrt", {c.add("Add", {var, c.scalar(eps, x)})})});
  return {c.add("Mul", {xc, inv}), inv};
}
/// The gradient of X from that of its normalised form:
/// dX = (dXhat - mean(dXhat) - Xhat * mean(dXhat * Xhat)) / sigma, means over `axes`.
constexpr tensor_id normalize_backward(gradient_context& c, const normalized& n, tensor_id dxhat,
                                       const std::vector<std::int64_t>& axes) {
  const auto m1 = c.add("ReduceMean", {dxhat, c.ints(axes)}, {keepdims(true)});
  const auto m2 = c.add("ReduceMean", {c.add("Mul", {dxhat, n.xhat}), c.ints(axes)}, {keepdims(true)});
  return c.add("Mul", {n.inv, c.add("Sub", {c.add("Sub", {dxhat, m1}), c.add("Mul", {n.xhat, m2})})});
}
constexpr void refuse_statistics_gradients(gradient_context& c) {
  for (std::size_t i = 1; i < c.op().outputs.size(); ++i)
    if (c.output_grad(i) != no_tensor)
      throw c.fail("a gradient through output #" + format_uint(i) + " (a saved statistic) has no rule",
                   "compute the loss from output #0 only");
}
/// LayerNormalization over the axes from `axis` on; Scale and B broadcast over them: dX from
/// dY * Scale, dScale = sum(dY * Xhat), dB = sum(dY), each summed to its own shape. With Scale (and
/// B) spanning the normalised axes exactly, as PyTorch's LayerNorm has them, the whole backward is
/// one op, ipu::LayerNormalizationGrad, reading the forward's Mean and InvStdDev when it wrote them;
/// other shapes take the op-by-op form.
constexpr void layer_norm(gradient_context& c) {
  refuse_statistics_gradients(c);
  const auto x = c.input(0), dy = c.required_output_grad();
  const auto r = c.shape_of(x).rank();
  const auto from = axis_attr(c, -1, r);
  const auto axes = spatial_axes(r, from);
  const auto sx = c.shape_of(x);
  const shape normalised(std::vector<std::int64_t>(sx.dims().begin() + static_cast<std::ptrdiff_t>(from), sx.dims().end()));
  const auto type = c.info(x).type;
  const bool whole = c.has_input(1) && c.shape_of(c.input(1)) == normalised &&
                     (!c.has_input(2) || c.shape_of(c.input(2)) == normalised) &&
                     (type == data_type::F16 || type == data_type::F32 || type == data_type::F64);
  if (whole) {
    std::vector<tensor_id> in{dy, x, c.input(1)};
    const auto& outs = c.op().outputs;
    if (outs.size() > 2 && outs[1] != no_tensor && outs[2] != no_tensor) in.insert(in.end(), {outs[1], outs[2]});
    const auto grads = c.add_n("LayerNormalizationGrad", std::move(in),
                               {{"axis", static_cast<std::int64_t>(from)}, {"epsilon", c.attr_float("epsilon", 1e-5f)}}, 3,
                               "ipu");
    for (std::size_t i = 0; i < 3; ++i)
      if (c.has_input(i) && c.wants(i)) c.set_input_grad(i, grads[i]);
    return;
  }
  const auto n = normalize(c, x, axes, c.attr_float("epsilon", 1e-5f));
  const bool scaled = c.has_input(1);
  if (c.wants(0)) c.set_input_grad(0, normalize_backward(c, n, scaled ? c.add("Mul", {dy, c.input(1)}) : dy, axes));
  if (scaled && c.wants(1)) c.set_input_grad(1, c.sum_to(c.add("Mul", {dy, n.xhat}), c.shape_of(c.input(1))));
  if (c.has_input(2) && c.wants(2)) c.set_input_grad(2, c.sum_to(dy, c.shape_of(c.input(2))));
}
/// ipu::BatchNormalizationTraining: the whole backward as one op, ipu::BatchNormalizationTrainingGrad,
/// from dY, X, scale and the batch statistics the forward op made.
constexpr void batch_norm_training(gradient_context& c) {
  refuse_statistics_gradients(c);
  const auto grads = c.add_n("BatchNormalizationTrainingGrad",
                             {c.required_output_grad(), c.input(0), c.input(1), c.output(1), c.output(2)},
                             {{"epsilon", c.attr_float("epsilon", 1e-5f)}}, 3, "ipu");
  for (std::size_t i = 0; i < 3; ++i) c.set_input_grad(i, grads[i]);
}
/// InstanceNormalization over the spatial axes of [N, C, ...], scale and B per channel.
constexpr void instance_norm(gradient_context& c) {
  const auto x = c.input(0), scale = c.input(1), dy = c.required_output_grad();
  const auto sx = c.shape_of(x);
  const auto axes = spatial_axes(sx.rank());
  const auto n = normalize(c, x, axes, c.attr_float("epsilon", 1e-5f));
  std::vector<std::int64_t> per_channel{sx[1]};  // [C, 1, ...]: built up, never indexed, so GCC 12 sees no empty vector
  while (per_channel.size() + 1 < sx.rank()) per_channel.push_back(1);
  const auto batch_and_spatial = with_batch_axis(axes);
  if (c.wants(0))
    c.set_input_grad(0, normalize_backward(c, n, c.add("Mul", {dy, c.reshape(scale, shape(per_channel))}), axes));
  auto per_channel_sum = [&](tensor_id t, tensor_id like) {
    return c.reshape(c.add("ReduceSum", {t, c.ints(batch_and_spatial)}, {keepdims(false)}), c.shape_of(like));
  };
  if (c.wants(1)) c.set_input_grad(1, per_channel_sum(c.add("Mul", {dy, n.xhat}), scale));
  if (c.has_input(2) && c.wants(2)) c.set_input_grad(2, per_channel_sum(dy, c.input(2)));
}

// --- ConvTranspose and Einsum ---------------------------------------------------------------------
/// ConvTranspose (groups, strides, dilations, pads, auto_pad, output_padding, output_shape), the
/// mirror of Conv's rule: dX is the Conv of dY by the same weights (output_padding only adds rows
/// the Conv's floor drops again); dW is the convolution of dY by X with batch and channels swapped
/// (stride and dilation exchange roles), cut to the kernel and, for groups, to each group's block.
constexpr void conv_transpose(gradient_context& c) {
  const auto x = c.input(0), w = c.input(1), dy = c.required_output_grad();
  const auto sx = c.shape_of(x), sw = c.shape_of(w), sy = c.shape_of(c.output());
  const auto r = sx.rank() - 2;
  const auto group = c.attr_int("group", 1);
  std::vector<std::int64_t> kernel(sw.dims().begin() + 2, sw.dims().end());
  const auto strides = ints_or(c, "strides", r, 1), dilations = ints_or(c, "dilations", r, 1);
  const auto out_pad = ints_or(c, "output_padding", r, 0);
  const auto auto_pad = c.attr_string("auto_pad", "NOTSET");
  const bool derived = c.has_attr("output_shape") || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  auto pads = auto_pad == "VALID" || derived ? std::vector<std::int64_t>(2 * r, 0) : ints_or(c, "pads", 2 * r, 0);
  for (std::size_t i = 0; i < r; ++i) {
    const auto extent = (kernel[i] - 1) * dilations[i] + 1;
    if (derived) {  // the padding that gives the output its shape, split as the kernel splits it
      const auto total = strides[i] * (sx[2 + i] - 1) + out_pad[i] + extent - sy[2 + i];
      const auto half = total >= 0 ? total / 2 : -((1 - total) / 2);
      pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      pads[r + i] = total - pads[i];
    }
    if (pads[i] < 0 || pads[r + i] < 0)
      throw c.fail("an output larger than the full transposed convolution has no gradient rule");
    if ((sy[2 + i] + pads[i] + pads[r + i] - extent) / strides[i] + 1 != sx[2 + i])
      throw c.fail("output_padding is not smaller than the stride", "use output_padding < strides");
  }
  if (c.wants(0))
    c.set_input_grad(0, c.add("Conv", {dy, w},
                              {{"strides", strides}, {"dilations", dilations}, {"pads", pads}, {"group", group},
                               {"kernel_shape", kernel}}));
  if (c.wants(1)) {
    const auto xt = c.add("Transpose", {x}, {{"perm", swap01(sx.rank())}});   // [C, N, in spatial]
    const auto dyt = c.add("Transpose", {dy}, {{"perm", swap01(sy.rank())}});  // [M, N, out spatial]
    auto full = c.add("Conv", {dyt, xt}, {{"strides", dilations}, {"dilations", strides}, {"pads", pads}});
    std::vector<std::int64_t> zeros_at(r, 0);
    full = c.add("Slice", {full, c.ints(zeros_at), c.ints(kernel), c.ints(spatial_axes(r + 2))});  // [M, C, k]
    const auto cg = sx[1] / group, mg = sw[1];
    std::vector<tensor_id> blocks;
    for (std::int64_t gi = 0; gi < group; ++gi) {
      const auto block =
          group == 1 ? full
                     : c.add("Slice", {full, c.ints({gi * mg, gi * cg}), c.ints({(gi + 1) * mg, (gi + 1) * cg}),
                                       c.ints({0, 1})});
      blocks.push_back(c.add("Transpose", {block}, {{"perm", swap01(r + 2)}}));
    }
    c.set_input_grad(1, group == 1 ? blocks.front() : c.add("Concat", blocks, {{"axis", std::int64_t{0}}}));
  }
  if (c.has_input(2) && c.wants(2)) {
    const auto axes = with_batch_axis(spatial_axes(sy.rank()));
    c.set_input_grad(2, c.add("ReduceSum", {dy, c.ints(axes)}, {keepdims(false)}));
  }
}
/// Einsum without diagonals: the gradient of an operand is the Einsum of dY with the other operands
/// onto that operand's labels. Labels only that operand has (summed away) are expanded back, and
/// labels it broadcast (size 1 against a larger size) summed. "..." is first spelt out as letters
/// the equation does not use.
constexpr void einsum(gradient_context& c) {
  std::string eq;
  for (char ch : c.attr_string("equation", ""))
    if (ch != ' ') eq += ch;
  const auto arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (std::size_t start = 0;;) {
    const auto comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != c.num_inputs()) throw c.fail("the equation has " + format_uint(terms.size()) + " terms");
  auto letter = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); };
  bool used[128]{};
  int count[128]{};
  for (char ch : eq)
    if (letter(ch)) used[static_cast<unsigned char>(ch)] = true;
  for (char ch : lhs)
    if (letter(ch)) ++count[static_cast<unsigned char>(ch)];
  std::string fresh;  // letters free for the broadcast dimensions
  for (char ch = 'A'; ch <= 'z'; ++ch)
    if (letter(ch) && !used[static_cast<unsigned char>(ch)]) fresh += ch;
  std::size_t broadcast = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const auto& t = terms[i];
    const auto dots = t.find("...");
    const auto labels = t.size() - (dots == std::string::npos ? 0 : 3);
    const auto rank = c.shape_of(c.input(i)).rank();
    if (rank < labels) throw c.fail("term '" + t + "' has more labels than its input has axes");
    if (dots != std::string::npos) broadcast = std::max(broadcast, rank - labels);
  }
  if (broadcast > fresh.size()) throw c.fail("too many broadcast dimensions for the letters left");
  const std::string bl = fresh.substr(0, broadcast);
  auto spell = [&](const std::string& t, std::size_t n) {  // "..." standing for n dimensions, as letters
    const auto dots = t.find("...");
    return dots == std::string::npos ? t : t.substr(0, dots) + bl.substr(bl.size() - n) + t.substr(dots + 3);
  };
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const auto rank = c.shape_of(c.input(i)).rank();
    const auto labels = terms[i].size() - (terms[i].find("...") == std::string::npos ? 0 : 3);
    terms[i] = spell(terms[i], rank - labels);
    for (std::size_t a = 0; a < terms[i].size(); ++a)
      if (terms[i].find(terms[i][a], a + 1) != std::string::npos)
        throw c.fail("label '" + std::string(1, terms[i][a]) +
                         "' repeats within one operand (a diagonal); it has no gradient rule",
                     "take the diagonal with another op, or give each axis its own label");
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = spell(eq.substr(arrow + 2), broadcast);
  } else {  // implicit: the broadcast dimensions, then the labels used once, in character order
    out = bl;
    for (int ch = 0; ch < 128; ++ch)
      if (count[ch] == 1) out += static_cast<char>(ch);
  }
  const auto dy = c.required_output_grad();
  for (std::size_t i = 0; i < terms.size(); ++i) {
    if (!c.wants(i)) continue;
    std::string others, keep;
    std::vector<tensor_id> operands{dy};
    for (std::size_t j = 0; j < terms.size(); ++j)
      if (j != i) {
        others += "," + terms[j];
        operands.push_back(c.input(j));
      }
    const auto sx = c.shape_of(c.input(i));
    std::vector<std::int64_t> dims;
    for (char ch : terms[i]) {
      const bool elsewhere = (out + others).find(ch) != std::string::npos;
      if (elsewhere) keep += ch;
      dims.push_back(elsewhere ? -1 : 1);
    }
    auto g = operands.size() == 1 && keep == out
                 ? dy
                 : c.add("Einsum", operands, {{"equation", out + others + "->" + keep}});
    const auto sg = c.shape_of(g);
    for (std::size_t a = 0, k = 0; a < dims.size(); ++a)
      if (dims[a] == -1) dims[a] = sg[k++];
    g = c.reshape(g, shape(dims));
    std::vector<std::int64_t> broadcast_axes;  // size 1 in the operand, larger in the gradient
    for (std::size_t a = 0; a < dims.size(); ++a)
      if (sx[a] == 1 && dims[a] != 1) broadcast_axes.push_back(static_cast<std::int64_t>(a));
    if (!broadcast_axes.empty()) g = c.add("ReduceSum", {g, c.ints(broadcast_axes)}, {keepdims(true)});
    if (c.shape_of(g) != sx) g = c.add("Expand", {g, c.ints(sx.dims())});
    c.set_input_grad(i, g);
  }
}

}  // namespace detail::grad

}  // namespace ipu
