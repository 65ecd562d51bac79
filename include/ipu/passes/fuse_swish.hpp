#pragma once
// SiLU written out as two ONNX ops, as PyTorch exports nn.SiLU (EfficientNet's activation):
//
//   s = Sigmoid(x)     y = Mul(x, s)   (or Mul(s, x))
//
// becomes one ai.graphcore Swish(x): one pass over the activations instead of two, and no
// temporary. Swish's kernel rounds the sigmoid to the element type as the Sigmoid op does, so the
// fused graph computes the same bits.
//
// A match needs s read only by the Mul and not a graph output, one recomputation mark for both ops
// and s not a checkpoint. Swish goes where the Mul was placed. Anything else is left as it is.
#include <cstddef>
#include <string>
#include <vector>

#include "ipu/graph/graph.hpp"
#include "ipu/passes/pattern.hpp"
#include "ipu/passes/rewrite.hpp"

namespace ipu::passes {

/// `g` with each Sigmoid whose output only a Mul by the Sigmoid's own input reads fused with that
/// Mul into ai.graphcore Swish.
constexpr graph fuse_swish(const graph& g) {
  using detail::is_onnx_op;
  const auto is_output = detail::output_mask(g);
  graph_rewrite rw(g);
  std::size_t fused = 0;
  for (op_id a = 0; a < g.num_ops(); ++a) {
    const auto& sigmoid = g.op(a);
    if (!is_onnx_op(sigmoid, "Sigmoid") || sigmoid.inputs.size() != 1 || sigmoid.outputs.size() != 1) continue;
    const auto x = sigmoid.inputs[0], s = sigmoid.outputs[0];
    const auto type = g.tensor(x).info.type;
    if (type != data_type::F16 && type != data_type::F32 && type != data_type::F64) continue;
    const auto m = detail::sole_reader(g, s, is_output);
    if (m == no_op || !is_onnx_op(g.op(m), "Mul") || detail::other_operand(g.op(m), s) != x) continue;
    const auto& mul = g.op(m);
    // Same shape: a Mul that broadcasts x against s cannot, as both are x's shape, but an imported
    // model's declared shapes are checked, not trusted.
    if (g.tensor(mul.outputs[0]).info != g.tensor(x).info) continue;
    if (sigmoid.where.recompute != mul.where.recompute || sigmoid.where.checkpoint || rw.removed[a] || rw.removed[m])
      continue;
    op_node swish;
    swish.domain = "ai.graphcore";
    swish.type = "Swish";
    swish.opset = 1;
    detail::name_fused_op(swish, mul, "Swish", fused);
    swish.inputs = {x};
    swish.outputs = {mul.outputs[0]};
    swish.where = mul.where;
    rw.removed[a] = rw.removed[m] = true;
    rw.inserted.emplace_back(m, swish);  // a copy: GCC 12 cannot move a std::string in a constant expression
    ++fused;
  }
  if (fused == 0) return g;
  return apply(g, rw);
}

}  // namespace ipu::passes
