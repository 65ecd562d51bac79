#pragma once
// LSTM, GRU and RNN written out as ordinary ops, unrolled over their sequence (static in the
// graph), so that autodiff differentiates them with the rules of MatMul, Add, Sub, Mul, Sigmoid,
// Tanh, Relu, Split, Concat, Squeeze, Unsqueeze, Transpose and Identity. The training graph
// (ipu/train/training_graph.hpp) writes every recurrent op out this way. The op's outputs keep
// their tensor ids, so the ops reading them are unchanged.
//
// Covered: what PyTorch's export of torch.nn.LSTM / GRU / RNN uses: directions forward, reverse and
// bidirectional; layout 0; Sigmoid, Tanh and Relu activations; GRU's linear_before_reset (0 or 1);
// the optional B, initial_h and initial_c, and a constant sequence_lens equal to the sequence
// length. Refused, naming the op: peepholes (P), clip, input_forget, layout 1, other activations,
// and shorter or run-time sequence lengths.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
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
#include "ipu/ops/infer.hpp"

namespace ipu::train {

/// Whether `op` is an ONNX LSTM, GRU or RNN.
constexpr bool is_recurrent(const op_node& op) noexcept {
  return (op.type == "LSTM" || op.type == "GRU" || op.type == "RNN") && (op.domain.empty() || op.domain == "ai.onnx");
}

namespace detail {

/// Adds ops and constants to a graph, every name under one prefix, each op shape-checked by the
/// op table as it is added.
class op_writer {
 public:
  constexpr op_writer(graph& g, std::string prefix, annotation where) : g_(&g), prefix_(std::move(prefix)), where_(where) {}

  constexpr tensor_id ints(const std::vector<std::int64_t>& v) {
    return g_->add_tensor(next("c"), tensor_info{data_type::S64, shape{static_cast<std::int64_t>(v.size())}},
                          tensor_kind::constant, byte_buffer::from_values(std::span<const std::int64_t>(v)));
  }
  /// Zeros of any floating-point type (all bits zero).
  constexpr tensor_id zeros(const tensor_info& info) {
    return g_->add_tensor(next("c"), info, tensor_kind::constant, byte_buffer(std::vector<std::byte>(info.num_bytes())));
  }
  /// An op with `n` outputs.
  constexpr std::vector<tensor_id> add_n(std::string_view type, std::vector<tensor_id> in, std::vector<attribute> at,
                                         std::size_t n) {
    op_node o;
    o.type = std::string(type);
    o.name = next(type);
    o.inputs = std::move(in);
    o.attributes = std::move(at);
    o.where = where_;
    o.outputs.assign(n, no_tensor);
    const auto infos = infer_outputs(*g_, o);
    for (std::size_t i = 0; i < n; ++i) o.outputs[i] = g_->add_tensor(o.name + "/" + format_uint(i), infos.at(i));
    auto r = o.outputs;
    g_->add_op(std::move(o));
    return r;
  }
  /// A one-output op; `out` (an existing tensor of the same info) receives its result if given.
  constexpr tensor_id add(std::string_view type, std::vector<tensor_id> in, std::vector<attribute> at = {},
                          tensor_id out = no_tensor) {
    if (out == no_tensor) return add_n(type, std::move(in), std::move(at), 1)[0];
    op_node o;
    o.type = std::string(type);
    o.name = next(type);
    o.inputs = std::move(in);
    o.attributes = std::move(at);
    o.where = where_;
    o.outputs = {no_tensor};
    const auto info = infer_outputs(*g_, o).at(0);
    if (info != g_->tensor(out).info)
      throw error(error_category::internal,
                  "written-out op " + o.name + " gives " + to_string(info) + " for '" + g_->tensor(out).name +
                      "', which is " + to_string(g_->tensor(out).info),
                  "recurrent op written out");
    o.outputs[0] = out;
    g_->add_op(std::move(o));
    return out;
  }
  /// `x` split along `axis` into parts of `sizes`.
  constexpr std::vector<tensor_id> split(tensor_id x, std::int64_t axis, const std::vector<std::int64_t>& sizes) {
    if (sizes.size() == 1) return {x};
    return add_n("Split", {x, ints(sizes)}, {{"axis", axis}}, sizes.size());
  }
  constexpr tensor_id concat(const std::vector<tensor_id>& parts, std::int64_t axis, tensor_id out = no_tensor) {
    if (parts.size() == 1 && out == no_tensor) return parts[0];
    return add(parts.size() == 1 ? "Identity" : "Concat", parts,
               parts.size() == 1 ? std::vector<attribute>{} : std::vector<attribute>{{"axis", axis}}, out);
  }

 private:
  constexpr std::string next(std::string_view what) { return prefix_ + std::string(what) + format_uint(k_++); }
  graph* g_;
  std::string prefix_;
  annotation where_;
  std::size_t k_ = 0;
};

}  // namespace detail

/// Writes recurrent op `op` (LSTM, GRU or RNN) into `g` as ordinary ops, unrolled over the
/// sequence. `g` already holds the op's input and output tensors (same ids); the written-out ops
/// produce its outputs. `prefix` starts every added name and must be unique in `g`.
constexpr void write_out_recurrent(graph& g, const op_node& recurrent_op, std::string_view prefix) {
  const op_node op = recurrent_op;  // a copy: it may live in `g`, whose ops move as ops are added
  const std::string where = "op " + graph::describe(op);
  auto refuse = [&](const std::string& what, const std::string& fix) {
    return error(error_category::usage, op.type + " " + what + ": no training graph can be written for it yet", where, fix);
  };
  if (!is_recurrent(op)) throw error(error_category::internal, "not an LSTM, GRU or RNN", where);
  const bool lstm = op.type == "LSTM", gru = op.type == "GRU";
  const std::int64_t gates = lstm ? 4 : gru ? 3 : 1;
  auto input = [&](std::size_t i) { return i < op.inputs.size() ? op.inputs[i] : no_tensor; };
  auto output = [&](std::size_t i) { return i < op.outputs.size() ? op.outputs[i] : no_tensor; };
  auto int_attr = [&](std::string_view n, std::int64_t dflt) {
    if (const auto* a = op.find_attribute(n))
      if (const auto* v = std::get_if<std::int64_t>(&a->value)) return *v;
    return dflt;
  };

  // What is not built.
  if (int_attr("layout", 0) != 0) throw refuse("with layout 1 (batch first)", "export with layout 0 (PyTorch's export does)");
  if (op.find_attribute("clip")) throw refuse("with cell clipping (clip)", "remove the clip attribute");
  if (int_attr("input_forget", 0) != 0) throw refuse("with input_forget", "remove the input_forget attribute");
  if (lstm && input(7) != no_tensor) throw refuse("with peepholes (input P)", "train an LSTM without peepholes");
  std::string direction = "forward";
  if (const auto* a = op.find_attribute("direction"))
    if (const auto* v = std::get_if<std::string>(&a->value)) direction = *v;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    throw refuse("with direction '" + direction + "'", "use forward, reverse or bidirectional");
  const std::int64_t dirs = direction == "bidirectional" ? 2 : 1;

  const auto x = input(0), w = input(1), r = input(2);
  if (x == no_tensor || w == no_tensor || r == no_tensor)
    throw error(error_category::shape, "X, W and R are required", where, "fix the model");
  const auto xi = g.tensor(x).info, wi = g.tensor(w).info, ri = g.tensor(r).info;
  if (xi.shape.rank() != 3 || wi.shape.rank() != 3 || ri.shape.rank() != 3)
    throw error(error_category::shape,
                "X, W and R must be 3-D: " + to_string(xi) + ", " + to_string(wi) + ", " + to_string(ri), where,
                "fix the model");
  const std::int64_t seq = xi.shape[0], batch = xi.shape[1], in_size = xi.shape[2], hidden = ri.shape[2];
  const std::int64_t gh = gates * hidden;
  auto count = [](std::int64_t v) { return format_uint(static_cast<std::uint64_t>(v)); };
  if (wi.shape != shape{dirs, gh, in_size} || ri.shape != shape{dirs, gh, hidden} ||
      int_attr("hidden_size", hidden) != hidden)
    throw error(error_category::shape,
                "W " + to_string(wi.shape) + " and R " + to_string(ri.shape) + " do not fit " + count(dirs) +
                    " direction(s), " + count(gates) + " gate(s) and input " + to_string(xi.shape),
                where, "fix the weight shapes or hidden_size");
  if (seq < 1) throw refuse("over an empty sequence", "give at least one step");
  if (const auto sl = input(4); sl != no_tensor) {
    // Only a sequence_lens that changes nothing: every batch entry runs the whole sequence.
    const auto& t = g.tensor(sl);
    bool whole = (t.kind == tensor_kind::constant || t.kind == tensor_kind::variable) &&
                 (t.info.type == data_type::S32 || t.info.type == data_type::S64) && t.data.size() == t.info.num_bytes();
    for (std::int64_t b = 0; whole && b < t.info.num_elements(); ++b) {
      const auto i = static_cast<std::size_t>(b);
      whole = (t.info.type == data_type::S32 ? t.data.load<std::int32_t>(i) : t.data.load<std::int64_t>(i)) == seq;
    }
    if (!whole)
      throw refuse("with per-batch sequence lengths (sequence_lens '" + t.name + "') other than the constant " + count(seq),
                   "pad every sequence to the full length and drop sequence_lens (as PyTorch's export of an unpacked "
                   "sequence does)");
  }

  // Activations: per direction, f for the gates, g for the candidate, h for LSTM's output.
  std::vector<std::string> acts;
  if (const auto* a = op.find_attribute("activations"))
    if (const auto* v = std::get_if<std::vector<std::string>>(&a->value)) acts = *v;
  const std::vector<std::string> defaults = lstm ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                            : gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                  : std::vector<std::string>{"Tanh"};
  const auto per_dir = defaults.size();
  if (acts.empty()) acts = defaults;
  if (acts.size() == per_dir && dirs == 2) acts = [](std::vector<std::string> a) {  // one list for both directions
    auto twice = a;
    twice.insert(twice.end(), a.begin(), a.end());
    return twice;
  }(acts);
  if (acts.size() != per_dir * static_cast<std::size_t>(dirs))
    throw error(error_category::usage,
                "expected " + format_uint(per_dir * static_cast<std::size_t>(dirs)) + " activations, got " +
                    format_uint(acts.size()),
                where, "give " + format_uint(per_dir) + " per direction");
  for (auto& name : acts) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "sigmoid") name = "Sigmoid";
    else if (lower == "tanh") name = "Tanh";
    else if (lower == "relu") name = "Relu";
    else throw refuse("with activation '" + name + "'", "use Sigmoid, Tanh or Relu");
  }
  const bool linear_before_reset = int_attr("linear_before_reset", 0) != 0;

  detail::op_writer o(g, std::string(prefix), op.where);
  // Direction d of a [dirs, ...] tensor, keeping its leading 1.
  auto by_direction = [&](tensor_id t) {
    if (t == no_tensor) return std::vector<tensor_id>(static_cast<std::size_t>(dirs), no_tensor);
    return o.split(t, 0, std::vector<std::int64_t>(static_cast<std::size_t>(dirs), 1));
  };
  const auto ws = by_direction(w), rs = by_direction(r), bs = by_direction(input(3)), h0s = by_direction(input(5)),
             c0s = by_direction(lstm ? input(6) : no_tensor);
  const tensor_info state{xi.type, shape{1, batch, hidden}};
  std::vector<tensor_id> ys, hs, cs;  // per direction: Y [seq, 1, batch, hidden], the last h and c [1, batch, hidden]
  for (std::int64_t d = 0; d < dirs; ++d) {
    const auto k = static_cast<std::size_t>(d);
    const bool reverse = direction == "reverse" || d == 1;
    auto act = [&](std::size_t which, tensor_id v) { return o.add(acts[k * per_dir + which], {v}); };
    // Transposed weights: x [.., in] @ wt [in, gh]; h [.., hidden] @ rt [hidden, gh].
    const auto wt = o.add("Transpose", {o.add("Squeeze", {ws[k], o.ints({0})})}, {{"perm", std::vector<std::int64_t>{1, 0}}});
    const auto rt = o.add("Transpose", {o.add("Squeeze", {rs[k], o.ints({0})})}, {{"perm", std::vector<std::int64_t>{1, 0}}});
    tensor_id wb = no_tensor, rb = no_tensor;  // [1, gh]
    if (bs[k] != no_tensor) {
      const auto b = o.add_n("Split", {bs[k], o.ints({gh, gh})}, {{"axis", std::int64_t{1}}}, 2);
      wb = b[0], rb = b[1];
    }
    // The input's part of every step at once: [seq, batch, gh]. LSTM and RNN add both biases here;
    // GRU keeps R's bias apart, as its candidate needs R h + Rb alone.
    auto xw = o.add("MatMul", {x, wt});
    if (wb != no_tensor) xw = o.add("Add", {xw, gru ? wb : o.add("Add", {wb, rb})});
    const auto steps = o.split(xw, 0, std::vector<std::int64_t>(static_cast<std::size_t>(seq), 1));  // [1, batch, gh] each
    // GRU: R and its bias cut into the z and r gates' part and the candidate's.
    tensor_id r_zr = no_tensor, r_h = no_tensor, rb_zr = no_tensor, rb_h = no_tensor;
    if (gru) {
      const auto p = o.add_n("Split", {rt, o.ints({2 * hidden, hidden})}, {{"axis", std::int64_t{1}}}, 2);
      r_zr = p[0], r_h = p[1];
      if (rb != no_tensor) {
        const auto q = o.add_n("Split", {rb, o.ints({2 * hidden, hidden})}, {{"axis", std::int64_t{1}}}, 2);
        rb_zr = q[0], rb_h = q[1];
      }
    }
    auto plus_bias = [&](tensor_id v, tensor_id b) { return b == no_tensor ? v : o.add("Add", {v, b}); };
    auto h = h0s[k] != no_tensor ? h0s[k] : o.zeros(state);
    auto c = c0s[k] != no_tensor ? c0s[k] : (lstm ? o.zeros(state) : no_tensor);
    std::vector<tensor_id> y(static_cast<std::size_t>(seq));
    for (std::int64_t s = 0; s < seq; ++s) {
      const auto t = static_cast<std::size_t>(reverse ? seq - 1 - s : s);
      if (lstm) {
        // Gate order i, o, f, c (ONNX's; PyTorch's export reorders its i, f, g, o).
        const auto g4 = o.split(o.add("Add", {steps[t], o.add("MatMul", {h, rt})}), 2, {hidden, hidden, hidden, hidden});
        const auto i = act(0, g4[0]), ot = act(0, g4[1]), f = act(0, g4[2]), cand = act(1, g4[3]);
        c = o.add("Add", {o.add("Mul", {f, c}), o.add("Mul", {i, cand})});
        h = o.add("Mul", {ot, act(2, c)});
      } else if (gru) {
        // Gate order z, r, h. h' = n + z (h - n), i.e. (1 - z) n + z h.
        const auto xp = o.split(steps[t], 2, {2 * hidden, hidden});
        const auto zr_in = plus_bias(o.add("Add", {xp[0], o.add("MatMul", {h, r_zr})}), rb_zr);
        const auto zr = o.split(act(0, zr_in), 2, {hidden, hidden});
        const auto rh = linear_before_reset ? o.add("Mul", {zr[1], plus_bias(o.add("MatMul", {h, r_h}), rb_h)})
                                            : plus_bias(o.add("MatMul", {o.add("Mul", {zr[1], h}), r_h}), rb_h);
        const auto n = act(1, o.add("Add", {xp[1], rh}));
        h = o.add("Add", {n, o.add("Mul", {zr[0], o.add("Sub", {h, n})})});
      } else {
        h = act(0, o.add("Add", {steps[t], o.add("MatMul", {h, rt})}));
      }
      y[t] = h;
    }
    if (output(0) != no_tensor) ys.push_back(o.add("Unsqueeze", {o.concat(y, 0), o.ints({1})}));
    hs.push_back(h);
    cs.push_back(c);
  }
  // The op's own outputs: Y [seq, dirs, batch, hidden], Y_h and Y_c [dirs, batch, hidden].
  if (output(0) != no_tensor) o.concat(ys, 1, output(0));
  if (output(1) != no_tensor) o.concat(hs, 0, output(1));
  if (lstm && output(2) != no_tensor) o.concat(cs, 0, output(2));
}

}  // namespace ipu::train
