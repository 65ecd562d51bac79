#pragma once
// A rewrite of a graph: some ops removed, new ops inserted in their place, and the graph rebuilt
// without what no longer has a use. Passes find what to change; this is the one place that
// changes it, so every pass leaves a graph that validates: tensor ids renumbered densely, an
// intermediate tensor kept only while an op still produces it, constant tensors that only removed
// ops read dropped with them, and Constant ops that nothing reads any more.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"

namespace ipu::passes {

struct graph_rewrite {
  /// Per op of the source graph: true to drop it.
  std::vector<bool> removed;
  /// Ops to add, each placed right after the source op `first` (in source order; tensor ids are
  /// the source graph's). An inserted op may write a removed op's outputs.
  std::vector<std::pair<op_id, op_node>> inserted;

  explicit constexpr graph_rewrite(const graph& g) : removed(g.num_ops(), false) {}
};

/// `g` with `rw` applied. Throws when the rewrite would leave a tensor read but never written, or
/// lose a graph output: a pass's defect, never the user's.
constexpr graph apply(const graph& g, const graph_rewrite& rw) {
  const std::string where = "rewrite of graph '" + g.name() + "'";
  std::vector<bool> removed = rw.removed;
  // Constant ops that no kept or inserted op reads go too, dead ones of the source included (they
  // have no effect of their own).
  std::vector<bool> read(g.num_tensors(), false);
  for (auto t : g.outputs()) read[t] = true;
  for (op_id id = 0; id < g.num_ops(); ++id)
    if (!removed[id])
      for (auto t : g.op(id).inputs)
        if (t != no_tensor) read[t] = true;
  for (const auto& [at, op] : rw.inserted)
    for (auto t : op.inputs)
      if (t != no_tensor) read[t] = true;
  for (op_id id = 0; id < g.num_ops(); ++id) {
    const auto& op = g.op(id);
    if (removed[id] || op.type != "Constant" || !(op.domain.empty() || op.domain == "ai.onnx")) continue;
    bool used = false;
    for (auto t : op.outputs) used = used || read[t];
    removed[id] = !used;
  }
  // Which tensors survive: graph inputs and weights, constants still read (or never read before
  // either), and each intermediate a kept or inserted op writes.
  std::vector<bool> was_read(g.num_tensors(), false);
  for (const auto& op : g.ops())
    for (auto t : op.inputs)
      if (t != no_tensor) was_read[t] = true;
  std::vector<bool> written(g.num_tensors(), false);
  for (op_id id = 0; id < g.num_ops(); ++id)
    if (!removed[id])
      for (auto t : g.op(id).outputs) written[t] = true;
  for (const auto& [at, op] : rw.inserted)
    for (auto t : op.outputs) {
      if (written[t])
        throw error(error_category::internal, "tensor '" + g.tensor(t).name + "' would be written twice", where);
      written[t] = true;
    }
  graph r(g.name());
  std::vector<tensor_id> to(g.num_tensors(), no_tensor);
  for (tensor_id t = 0; t < g.num_tensors(); ++t) {
    const auto& n = g.tensor(t);
    const bool kept = n.kind == tensor_kind::intermediate ? written[t]
                      : n.kind == tensor_kind::constant   ? read[t] || !was_read[t]
                                                          : true;
    if (kept) to[t] = r.add_tensor(n.name, n.info, n.kind, n.data);
  }
  auto renumbered = [&](const op_node& from) {
    op_node op = from;  // copied, not taken by value: GCC 12 cannot move a by-value parameter's strings in a constant expression
    for (auto* list : {&op.inputs, &op.outputs})
      for (auto& t : *list) {
        if (t == no_tensor) continue;
        if (to[t] == no_tensor)
          throw error(error_category::internal, "op " + graph::describe(op) + " reads '" + g.tensor(t).name +
                                                    "', which no op writes after the rewrite",
                      where);
        t = to[t];
      }
    return op;
  };
  for (op_id id = 0; id < g.num_ops(); ++id) {
    if (!removed[id]) r.add_op(renumbered(g.op(id)));
    for (const auto& [at, op] : rw.inserted)
      if (at == id) r.add_op(renumbered(op));
  }
  for (auto t : g.outputs()) {
    if (to[t] == no_tensor)
      throw error(error_category::internal, "graph output '" + g.tensor(t).name + "' would be lost", where);
    r.mark_output(to[t]);
  }
  r.set_opset_imports(g.opset_imports());
  return r;
}

}  // namespace ipu::passes
