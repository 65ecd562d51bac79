#pragma once
// Layer normalisation written out as ONNX ops, as PyTorch exports nn.LayerNorm below opset 17:
//
//   mean = ReduceMean(X, trailing axes)     d = Sub(X, mean)
//   var  = ReduceMean(Pow(d, 2), same axes) Y = Add(Mul(Div(d, Sqrt(Add(var, epsilon))), Scale), B)
//
// becomes one LayerNormalization(X, Scale, B, axis, epsilon): one pass for the statistics and one
// to normalise, where the ops above make nine passes and keep four temporaries; and autodiff then
// takes LayerNormalization's gradient rule (one op) instead of the nine ops' (two dozen).
//
// A match needs every value inside it read only by the next op of the pattern (none is a graph
// output), epsilon and the 2 known constants, the axes a trailing run, Scale (and B) spanning only
// the normalised axes, one recomputation mark for all its ops and no checkpoint inside. The fused
// op goes where the last op was placed (IPU, stage, phase, block), so a stage boundary inside the
// norm does not change what is computed. Anything else is left as it is: the pass never changes
// what a graph computes beyond rounding (the fused op accumulates in double).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ipu/graph/graph.hpp"
#include "ipu/graph/known_values.hpp"
#include "ipu/passes/pattern.hpp"
#include "ipu/passes/rewrite.hpp"

namespace ipu::passes {

struct layer_norm_fusion_options {
  /// Also write LayerNormalization's Mean and InvStdDev outputs, which its gradient reads instead of
  /// computing them again (training graphs want them; inference has no use for them).
  bool statistics = false;
};

namespace detail {
/// The first normalised axis when ReduceMean `op` keeps its dimensions and averages a trailing run
/// of axes of its input; nullopt otherwise.
constexpr std::optional<std::size_t> trailing_reduce_mean(const graph& g, const op_node& op) {
  if (!is_onnx_op(op, "ReduceMean") || op.inputs.empty() || op.inputs[0] == no_tensor || op.outputs.size() != 1)
    return std::nullopt;
  if (const auto* k = op.find_attribute("keepdims"))
    if (const auto* v = std::get_if<std::int64_t>(&k->value); !v || *v != 1) return std::nullopt;
  const auto rank = static_cast<std::int64_t>(g.tensor(op.inputs[0]).info.shape.rank());
  std::vector<std::int64_t> axes;
  if (const auto* a = op.find_attribute("axes")) {
    const auto* v = std::get_if<std::vector<std::int64_t>>(&a->value);
    if (!v) return std::nullopt;
    axes = *v;
  } else if (op.inputs.size() > 1 && op.inputs[1] != no_tensor) {  // opset 18: axes as an input
    const auto* d = known_data(g, op.inputs[1]);
    if (!d || g.tensor(op.inputs[1]).info.type != data_type::S64) return std::nullopt;
    for (std::size_t i = 0; i < d->size() / 8; ++i) axes.push_back(d->load<std::int64_t>(i));
  }
  if (axes.empty() || rank == 0) return std::nullopt;  // no axes: all of them, or none; not a layer norm as exported
  for (auto& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  for (std::size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<std::int64_t>(axes.size() - i)) return std::nullopt;
  return static_cast<std::size_t>(axes.front());
}

/// Whether `p` (Scale or B) spans only the normalised axes `from`.. of `x`, with X's type.
constexpr bool normalised_parameter(const graph& g, tensor_id p, tensor_id x, std::size_t from) {
  if (p == no_tensor) return false;
  const auto& pi = g.tensor(p).info;
  const auto& xi = g.tensor(x).info;
  const auto k = xi.shape.rank() - from;
  if (pi.type != xi.type || pi.shape.rank() > k) return false;
  for (std::size_t i = 0; i < pi.shape.rank(); ++i) {
    const auto d = pi.shape[pi.shape.rank() - 1 - i];
    if (d != 1 && d != xi.shape[xi.shape.rank() - 1 - i]) return false;
  }
  return true;
}
}  // namespace detail

/// `g` with each layer normalisation written out as ONNX ops fused into one LayerNormalization.
constexpr graph fuse_layer_normalization(const graph& g, layer_norm_fusion_options o = {}) {
  using detail::is_onnx_op;
  const auto is_output = detail::output_mask(g);
  graph_rewrite rw(g);
  std::size_t fused = 0;
  for (op_id a = 0; a < g.num_ops(); ++a) {
    const auto& mean_op = g.op(a);
    const auto from = detail::trailing_reduce_mean(g, mean_op);
    if (!from || rw.removed[a]) continue;
    const auto x = mean_op.inputs[0], mean = mean_op.outputs[0];
    const auto x_type = g.tensor(x).info.type;
    if (x_type != data_type::F16 && x_type != data_type::F32 && x_type != data_type::F64) continue;
    std::vector<op_id> ops{a};
    // Each step: the sole reader of `t`, of type `type`, reading `t` beside one other operand.
    auto next = [&](tensor_id t, std::string_view type) -> op_id {
      const auto r = detail::sole_reader(g, t, is_output);
      if (r == no_op || !is_onnx_op(g.op(r), type)) return no_op;
      ops.push_back(r);
      return r;
    };
    const auto sub = next(mean, "Sub");
    if (sub == no_op || g.op(sub).inputs != std::vector<tensor_id>{x, mean}) continue;
    const auto d = g.op(sub).outputs[0];
    const auto& readers = g.tensor(d).consumers;
    if (is_output[d] || readers.size() != 2) continue;
    const auto pow = is_onnx_op(g.op(readers[0]), "Pow") ? readers[0] : readers[1];
    const auto div = pow == readers[0] ? readers[1] : readers[0];
    if (!is_onnx_op(g.op(pow), "Pow") || !is_onnx_op(g.op(div), "Div") || g.op(pow).inputs.size() != 2 ||
        g.op(pow).inputs[0] != d || known_float_scalar(g, g.op(pow).inputs[1]) != 2.0)
      continue;
    ops.push_back(pow);
    const auto var_op = detail::sole_reader(g, g.op(pow).outputs[0], is_output);
    if (var_op == no_op || detail::trailing_reduce_mean(g, g.op(var_op)) != from ||
        g.op(var_op).inputs[0] != g.op(pow).outputs[0])
      continue;
    ops.push_back(var_op);
    const auto add_eps = next(g.op(var_op).outputs[0], "Add");
    if (add_eps == no_op) continue;
    const auto eps_t = detail::other_operand(g.op(add_eps), g.op(var_op).outputs[0]);
    const auto eps = eps_t == no_tensor ? std::nullopt : known_float_scalar(g, eps_t);
    if (!eps || !(*eps >= 0)) continue;
    const auto sqrt = next(g.op(add_eps).outputs[0], "Sqrt");
    if (sqrt == no_op || detail::sole_reader(g, g.op(sqrt).outputs[0], is_output) != div ||
        g.op(div).inputs != std::vector<tensor_id>{d, g.op(sqrt).outputs[0]})
      continue;
    ops.push_back(div);
    const auto mul = next(g.op(div).outputs[0], "Mul");
    if (mul == no_op) continue;
    const auto scale = detail::other_operand(g.op(mul), g.op(div).outputs[0]);
    if (!detail::normalised_parameter(g, scale, x, *from)) continue;
    tensor_id y = g.op(mul).outputs[0], bias = no_tensor;
    if (const auto add = detail::sole_reader(g, y, is_output); add != no_op && is_onnx_op(g.op(add), "Add")) {
      const auto b = detail::other_operand(g.op(add), y);
      if (detail::normalised_parameter(g, b, x, *from)) {
        ops.push_back(add);
        bias = b;
        y = g.op(add).outputs[0];
      }
    }
    // Recomputation marks must agree, and only the last op's output may be a checkpoint (the others
    // vanish). Placements may differ: a pipeline or phase split inside the norm moves it whole to
    // its last op's place, so a placed training step computes what an unplaced one does.
    const auto& last_where = g.op(ops.back()).where;
    bool fusable = true;
    for (auto id : ops) {
      const auto& w = g.op(id).where;
      fusable = fusable && !rw.removed[id] && w.recompute == last_where.recompute && (id == ops.back() || !w.checkpoint);
    }
    if (!fusable) continue;

    op_node ln;
    ln.type = "LayerNormalization";
    ln.opset = 17;  // the op's first version, whatever the model imports
    const auto& last = g.op(ops.back());
    detail::name_fused_op(ln, last, "LayerNormalization", fused);
    ln.inputs = {x, scale};
    if (bias != no_tensor) ln.inputs.push_back(bias);
    ln.outputs = {y};
    ln.attributes = {{"axis", static_cast<std::int64_t>(*from)}, {"epsilon", static_cast<float>(*eps)}};
    ln.where = last_where;
    if (o.statistics) {
      const auto stats = g.tensor(mean).info.shape;  // X's shape, the normalised axes 1
      for (const char* what : {":mean", ":inv_std_dev"}) {
        std::string name = g.tensor(y).name;
        name.append(what);
        ln.outputs.push_back(rw.add_tensor(g, name, tensor_info{data_type::F32, stats}));
      }
    }
    for (auto id : ops) rw.removed[id] = true;
    rw.inserted.emplace_back(ops.back(), ln);  // a copy: GCC 12 cannot move a std::string in a constant expression
    ++fused;
  }
  if (fused == 0) return g;
  return apply(g, rw);
}

}  // namespace ipu::passes
