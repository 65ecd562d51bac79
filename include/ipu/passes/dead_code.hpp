#pragma once
// Dead-code elimination: ops whose outputs no graph output depends on are dropped, with the
// tensors only they used. Exporters leave such ops behind (a Shape chain folded into a constant,
// an unused Dropout mask, a branch a rewrite bypassed); each still costs a kernel launch, memory in
// the plan and cycles in the cost model. Ops that act beyond their outputs stay: PrintTensor
// prints, and an op with no outputs at all is kept for what it does.
#include <string_view>
#include <vector>

#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/passes/rewrite.hpp"

namespace ipu::passes {

namespace detail {
/// Whether `op` does something besides writing its outputs, so it runs even when nothing reads them.
constexpr bool has_side_effect(const op_node& op) {
  return op.outputs.empty() || (op.domain == "ai.graphcore" && op.type == "PrintTensor");
}
}  // namespace detail

/// `g` without the ops no graph output depends on (and which have no side effect).
constexpr graph eliminate_dead_code(const graph& g) {
  std::vector<bool> live_tensor(g.num_tensors(), false), live_op(g.num_ops(), false);
  for (auto t : g.outputs()) live_tensor[t] = true;
  // Readers before producers: one sweep marks everything.
  const auto order = topological_order(g);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto id = *it;
    const auto& op = g.op(id);
    bool live = detail::has_side_effect(op);
    for (auto t : op.outputs) live = live || (t != no_tensor && live_tensor[t]);
    if (!live) continue;
    live_op[id] = true;
    for (auto t : op.inputs)
      if (t != no_tensor) live_tensor[t] = true;
  }
  graph_rewrite rw(g);
  rw.drop_unread_variables = true;
  bool any = false;
  for (op_id id = 0; id < g.num_ops(); ++id) {
    rw.removed[id] = !live_op[id];
    any = any || !live_op[id];
  }
  if (!any) return g;
  return apply(g, rw);
}

}  // namespace ipu::passes
