#pragma once
// A Conv followed by a residual Add and / or an activation, as ResNet, MobileNetV2 and MNASNet
// export them:
//
//   y = Conv(x, w[, b])    [s = Add(y, z) or Add(z, y)]    [a = Relu / LeakyRelu / Clip / Sigmoid / Swish(.)]
//
// becomes one ai.graphcore FusedConv(x, w, b, z) (ONNX Runtime's com.microsoft FusedConv has the
// same inputs and attributes): Conv's attributes, plus `activation` ("" for none, Relu, LeakyRelu,
// Clip, Sigmoid, Swish) and `activation_params` (LeakyRelu's alpha; Clip's min and max). The
// kernel adds z and applies the activation while the convolution's output is still in cache (on
// oneDNN as post-ops), instead of one more pass over memory per op.
//
// A match needs each intermediate read only by the next op of the pattern and not a graph output,
// z of the Conv output's type and shape (an Add that broadcasts is left alone), Clip's bounds known
// constants, F16 or F32 data, and one recomputation mark for every op. FusedConv goes where the
// last op of the pattern was placed, so z is computed before it.
#include <cstddef>
#include <limits>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "ipu/graph/graph.hpp"
#include "ipu/passes/fold_batch_normalization.hpp"
#include "ipu/passes/pattern.hpp"
#include "ipu/passes/rewrite.hpp"

namespace ipu::passes {

namespace detail {

/// The activation `op` applies, as FusedConv's attributes; nullopt when it is none FusedConv takes
/// (Clip with bounds that are not known constants included).
inline std::optional<std::pair<std::string, std::vector<float>>> fusable_activation(const graph& g, const op_node& op) {
  if (op.inputs.empty() || op.outputs.size() != 1) return std::nullopt;
  if (is_onnx_op(op, "Relu") && op.inputs.size() == 1) return std::pair{std::string("Relu"), std::vector<float>{}};
  if (is_onnx_op(op, "Sigmoid") && op.inputs.size() == 1) return std::pair{std::string("Sigmoid"), std::vector<float>{}};
  if (op.domain == "ai.graphcore" && op.type == "Swish" && op.inputs.size() == 1)
    return std::pair{std::string("Swish"), std::vector<float>{}};
  if (is_onnx_op(op, "LeakyRelu") && op.inputs.size() == 1)
    return std::pair{std::string("LeakyRelu"), std::vector<float>{float_attribute(op, "alpha", 0.01f)}};
  if (is_onnx_op(op, "Clip") && op.inputs.size() <= 3) {
    // Opset 6 gives the bounds as attributes, opset 11 as optional scalar inputs.
    float lo = float_attribute(op, "min", std::numeric_limits<float>::lowest());
    float hi = float_attribute(op, "max", std::numeric_limits<float>::max());
    for (std::size_t i = 1; i < op.inputs.size(); ++i) {
      if (op.inputs[i] == no_tensor) continue;
      const auto v = known_doubles(g, op.inputs[i]);
      if (!v || v->size() != 1) return std::nullopt;
      (i == 1 ? lo : hi) = static_cast<float>(v->front());
    }
    return std::pair{std::string("Clip"), std::vector<float>{lo, hi}};
  }
  return std::nullopt;
}

}  // namespace detail

/// `g` with each Conv whose output only a same-shape residual Add and / or an activation read
/// fused with them into ai.graphcore FusedConv.
inline graph fuse_conv_activation(const graph& g) {
  using detail::is_onnx_op;
  const auto is_output = detail::output_mask(g);
  graph_rewrite rw(g);
  std::size_t fused = 0;
  for (op_id c = 0; c < g.num_ops(); ++c) {
    const auto& conv = g.op(c);
    if (!is_onnx_op(conv, "Conv") || conv.inputs.size() < 2 || conv.inputs.size() > 3 || conv.outputs.size() != 1 ||
        rw.removed[c])
      continue;
    const auto y = conv.outputs[0];
    const auto& info = g.tensor(y).info;
    if (info.type != data_type::F32 && info.type != data_type::F16) continue;
    std::vector<op_id> chain{c};
    tensor_id out = y, z = no_tensor;
    auto next = detail::sole_reader(g, out, is_output);
    if (next != no_op && is_onnx_op(g.op(next), "Add")) {
      const auto other = detail::other_operand(g.op(next), out);
      if (other != no_tensor && g.tensor(other).info == info && g.tensor(g.op(next).outputs[0]).info == info) {
        z = other;
        chain.push_back(next);
        out = g.op(next).outputs[0];
        next = detail::sole_reader(g, out, is_output);
      }
    }
    std::optional<std::pair<std::string, std::vector<float>>> act;
    if (next != no_op && g.op(next).inputs[0] == out && g.tensor(g.op(next).outputs[0]).info == info) {
      act = detail::fusable_activation(g, g.op(next));
      if (act) {
        chain.push_back(next);
        out = g.op(next).outputs[0];
      }
    }
    if (chain.size() == 1) continue;
    bool ok = true;
    for (std::size_t i = 0; i < chain.size(); ++i) {
      const auto& op = g.op(chain[i]);
      ok = ok && !rw.removed[chain[i]] && op.where.recompute == conv.where.recompute &&
           (i + 1 == chain.size() || !op.where.checkpoint);
    }
    if (!ok) continue;
    const auto& last = g.op(chain.back());
    op_node f;
    f.domain = "ai.graphcore";
    f.type = "FusedConv";
    f.opset = 1;
    detail::name_fused_op(f, last, "FusedConv", fused);
    f.inputs = {conv.inputs[0], conv.inputs[1], conv.inputs.size() > 2 ? conv.inputs[2] : no_tensor};
    if (z != no_tensor) f.inputs.push_back(z);
    while (f.inputs.back() == no_tensor) f.inputs.pop_back();
    f.outputs = {out};
    f.attributes = conv.attributes;
    f.attributes.push_back({"activation", act ? act->first : std::string()});
    if (act && !act->second.empty()) f.attributes.push_back({"activation_params", act->second});
    f.where = last.where;
    for (auto id : chain) rw.removed[id] = true;
    rw.inserted.emplace_back(chain.back(), f);
    ++fused;
  }
  if (fused == 0) return g;
  return apply(g, rw);
}

}  // namespace ipu::passes
