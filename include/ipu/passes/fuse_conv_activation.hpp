#pragma once
// An activation after a convolution, as every CNN writes it, and a residual sum before it:
//
//   y = Conv(x, W, B)   [s = Add(y, r)]   z = Relu  |  Clip(min, max)  |  LeakyRelu  of y (or s)
//
// becomes one com.microsoft FusedConv(x, W, B[, r]) with the activation as its attribute, as ONNX
// Runtime's graph optimizer fuses them: the kernel adds r and applies the activation to each block
// of outputs while it is still in cache, instead of more ops reading the whole tensor back.
// FusedConv computes what the standalone ops' kernels compute, so the fused graph gives the same
// bits. A residual Add followed by no activation fuses as well (no activation attribute).
//
// A match needs an F32 Conv whose output only the next op reads (and no graph output), an Add
// whose other operand has the output's shape (no broadcasting), Clip's bounds known before
// running, one placement (IPU, stage, phase, recomputation) for all the ops, and no checkpoint but
// on the last. FusedConv goes where the last op was placed. Anything else is left as it is. The
// fused op has no gradient: training graphs are not optimised.
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ipu/graph/graph.hpp"
#include "ipu/passes/pattern.hpp"
#include "ipu/passes/rewrite.hpp"

namespace ipu::passes {

namespace detail {

/// The FusedConv activation attributes for activation op `act`, or nullopt when it cannot be fused.
inline std::optional<std::pair<std::string, std::vector<float>>> fusable_activation(const graph& g, const op_node& act) {
  if (act.outputs.size() != 1 || act.inputs.empty()) return std::nullopt;
  if (is_onnx_op(act, "Relu") && act.inputs.size() == 1) return std::pair{std::string("Relu"), std::vector<float>{}};
  if (is_onnx_op(act, "LeakyRelu") && act.inputs.size() == 1)
    return std::pair{std::string("LeakyRelu"), std::vector<float>{float_attribute(act, "alpha", 0.01f)}};
  // Clip before opset 11 held its bounds as attributes; the IR's Clip takes them as inputs.
  if (!is_onnx_op(act, "Clip") || act.find_attribute("min") || act.find_attribute("max")) return std::nullopt;
  // The Clip kernel's bounds when absent: the type's lowest and largest values.
  float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
  for (std::size_t i = 1; i < act.inputs.size(); ++i) {
    if (act.inputs[i] == no_tensor) continue;
    const auto v = known_doubles(g, act.inputs[i]);
    if (!v || v->size() != 1 || g.tensor(act.inputs[i]).info.type != data_type::F32) return std::nullopt;
    (i == 1 ? lo : hi) = static_cast<float>(v->front());  // F32 values: exact
  }
  return std::pair{std::string("Clip"), std::vector<float>{lo, hi}};
}

}  // namespace detail

/// `g` with each F32 Conv whose output only a Relu, Clip (of known bounds) or LeakyRelu reads, or a
/// residual Add (then optionally one of those), fused with them into com.microsoft FusedConv.
inline graph fuse_conv_activation(const graph& g) {
  using detail::is_onnx_op;
  const auto is_output = detail::output_mask(g);
  graph_rewrite rw(g);
  std::size_t fused = 0;
  for (op_id c = 0; c < g.num_ops(); ++c) {
    const auto& conv = g.op(c);
    if (!is_onnx_op(conv, "Conv") || conv.outputs.size() != 1 || conv.inputs.size() < 2 || conv.inputs.size() > 3)
      continue;
    const auto y = conv.outputs[0];
    const auto& info = g.tensor(y).info;
    if (info.type != data_type::F32 || g.tensor(conv.inputs[0]).info.type != data_type::F32) continue;
    if (rw.removed[c] || conv.where.checkpoint) continue;
    std::vector<op_id> pattern{c};
    tensor_id residual = no_tensor, last = y;
    // The residual Add: y + r or r + y, r of y's shape.
    if (const auto a = detail::sole_reader(g, y, is_output); a != no_op && is_onnx_op(g.op(a), "Add")) {
      const auto r = detail::other_operand(g.op(a), y);
      if (r == no_tensor || g.tensor(r).info != info || g.tensor(g.op(a).outputs[0]).info != info) continue;
      pattern.push_back(a);
      residual = r;
      last = g.op(a).outputs[0];
    }
    std::optional<std::pair<std::string, std::vector<float>>> activation;
    if (const auto a = detail::sole_reader(g, last, is_output); a != no_op && g.op(a).inputs[0] == last) {
      activation = detail::fusable_activation(g, g.op(a));
      if (activation && g.tensor(g.op(a).outputs[0]).info == info) pattern.push_back(a);  // shapes checked, not trusted
      else activation.reset();
    }
    if (pattern.size() == 1) continue;
    const auto& end = g.op(pattern.back());
    bool placed_alike = true;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      const auto& op = g.op(pattern[i]);
      placed_alike = placed_alike && !rw.removed[pattern[i]] && op.where.ipu == end.where.ipu &&
                     op.where.stage == end.where.stage && op.where.phase == end.where.phase &&
                     op.where.block == end.where.block && op.where.recompute == end.where.recompute &&
                     (i + 1 == pattern.size() || !op.where.checkpoint);
    }
    if (!placed_alike) continue;
    op_node f;
    f.domain = "com.microsoft";
    f.type = "FusedConv";
    f.opset = 1;
    detail::name_fused_op(f, end, "FusedConv", fused);
    f.inputs = conv.inputs;
    if (residual != no_tensor) {
      f.inputs.resize(3, no_tensor);  // no bias: an omitted input
      f.inputs.push_back(residual);
    }
    f.outputs = {end.outputs[0]};
    f.attributes = conv.attributes;
    if (activation) {
      f.attributes.push_back({"activation", activation->first});
      if (!activation->second.empty()) f.attributes.push_back({"activation_params", activation->second});
    }
    f.where = end.where;
    for (const auto p : pattern) rw.removed[p] = true;
    rw.inserted.emplace_back(pattern.back(), f);
    ++fused;
  }
  if (fused == 0) return g;
  return apply(g, rw);
}

}  // namespace ipu::passes
