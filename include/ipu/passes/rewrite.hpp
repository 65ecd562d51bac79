#pragma once
// A rewrite of a graph: some ops removed, new ops inserted in their place, new tensors added, some
// intermediates turned into constants (an op folded away), and the graph rebuilt in one pass
// without what no longer has a use. Passes find what to change; this is the one place that
// changes it, so every pass leaves a graph that validates: tensor ids renumbered densely, an
// intermediate tensor kept only while an op still produces it, constant tensors that only removed
// ops read dropped with them, and Constant ops that nothing reads any more.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"

namespace ipu::passes {

struct graph_rewrite {
  /// Per op of the source graph: true to drop it.
  std::vector<bool> removed;
  /// Ops to add, each placed right after the source op `first` (in source order; tensor ids are
  /// the source graph's). An inserted op may write a removed op's outputs.
  std::vector<std::pair<op_id, op_node>> inserted;
  /// Tensors to add; the i-th has id `source_tensors + i`, so inserted ops can name it.
  struct new_tensor {
    std::string name;
    tensor_info info;
    tensor_kind kind = tensor_kind::intermediate;
    byte_buffer data;
  };
  std::vector<new_tensor> added;
  /// Intermediates of the source that become constants holding these bytes (their producer must
  /// be removed): what constant folding leaves.
  std::vector<std::pair<tensor_id, byte_buffer>> frozen;
  std::size_t source_tensors = 0;
  /// Drop variables (weights) nothing reads any more. Inference passes do: a weight folded into a
  /// constant, or read only by dead code, has no use there. Training keeps every weight.
  bool drop_unread_variables = false;

  explicit constexpr graph_rewrite(const graph& g) : removed(g.num_ops(), false), source_tensors(g.num_tensors()) {}

  /// Adds a tensor named `name`, or `name` with underscores appended when the graph or an earlier
  /// addition has that name; returns its id.
  constexpr tensor_id add_tensor(const graph& g, std::string_view name, const tensor_info& info,
                                 tensor_kind kind = tensor_kind::intermediate, const byte_buffer& data = {}) {
    std::string unique(name);
    auto taken = [&] {
      if (g.find_tensor(unique)) return true;
      for (const auto& a : added)
        if (a.name == unique) return true;
      return false;
    };
    while (taken()) unique += "_";
    added.push_back(new_tensor{unique, info, kind, data});
    return static_cast<tensor_id>(source_tensors + added.size() - 1);
  }
};

/// `g` with `rw` applied. Throws when the rewrite would leave a tensor read but never written, or
/// lose a graph output: a pass's defect, never the user's.
constexpr graph apply(const graph& g, const graph_rewrite& rw) {
  const std::string where = "rewrite of graph '" + g.name() + "'";
  if (rw.source_tensors != g.num_tensors() || rw.removed.size() != g.num_ops())
    throw error(error_category::internal, "the rewrite was made for another graph", where);
  const std::size_t tensors = g.num_tensors() + rw.added.size();
  auto name_of = [&](tensor_id t) -> const std::string& {
    return t < g.num_tensors() ? g.tensor(t).name : rw.added[t - g.num_tensors()].name;
  };
  std::vector<bool> removed = rw.removed;
  std::vector<bool> frozen(tensors, false);
  for (const auto& [t, data] : rw.frozen) {
    if (t >= g.num_tensors() || g.tensor(t).kind != tensor_kind::intermediate ||
        (g.tensor(t).producer != no_op && !removed[g.tensor(t).producer]))
      throw error(error_category::internal, "tensor '" + name_of(t) + "' cannot become a constant while its op stays",
                  where);
    frozen[t] = true;
  }
  // Constant ops that no kept or inserted op reads go too, dead ones of the source included (they
  // have no effect of their own).
  std::vector<bool> read(tensors, false);
  for (auto t : g.outputs()) read[t] = true;
  for (op_id id = 0; id < g.num_ops(); ++id)
    if (!removed[id])
      for (auto t : g.op(id).inputs)
        if (t != no_tensor) read[t] = true;
  for (const auto& [at, op] : rw.inserted)
    for (auto t : op.inputs) {
      if (t != no_tensor && t >= tensors)
        throw error(error_category::internal, "an inserted op reads a tensor id the rewrite does not have", where);
      if (t != no_tensor) read[t] = true;
    }
  for (op_id id = 0; id < g.num_ops(); ++id) {
    const auto& op = g.op(id);
    if (removed[id] || op.type != "Constant" || !(op.domain.empty() || op.domain == "ai.onnx")) continue;
    bool used = false;
    for (auto t : op.outputs) used = used || read[t];
    removed[id] = !used;
  }
  // Which tensors survive: graph inputs and weights, constants still read (or never read before
  // either), and each intermediate a kept or inserted op writes.
  std::vector<bool> was_read(tensors, false);
  for (const auto& op : g.ops())
    for (auto t : op.inputs)
      if (t != no_tensor) was_read[t] = true;
  std::vector<bool> written(tensors, false);
  for (op_id id = 0; id < g.num_ops(); ++id)
    if (!removed[id])
      for (auto t : g.op(id).outputs) written[t] = true;
  for (const auto& [at, op] : rw.inserted)
    for (auto t : op.outputs) {
      if (t >= tensors || written[t] || frozen[t])
        throw error(error_category::internal,
                    t >= tensors ? "an inserted op writes a tensor id the rewrite does not have"
                                 : "tensor '" + name_of(t) + "' would be written twice",
                    where);
      written[t] = true;
    }
  graph r(g.name());
  std::vector<tensor_id> to(tensors, no_tensor);
  for (tensor_id t = 0; t < g.num_tensors(); ++t) {
    const auto& n = g.tensor(t);
    if (frozen[t]) {
      // Kept while anything reads it; found by id (the list is short and in no order).
      if (!read[t]) continue;
      std::size_t i = 0;
      while (rw.frozen[i].first != t) ++i;
      to[t] = r.add_tensor(n.name, n.info, tensor_kind::constant, rw.frozen[i].second);
      continue;
    }
    const bool kept = n.kind == tensor_kind::intermediate ? written[t]
                      : n.kind == tensor_kind::constant   ? read[t] || !was_read[t]
                      : n.kind == tensor_kind::variable   ? read[t] || !rw.drop_unread_variables
                                                          : true;
    if (kept) to[t] = r.add_tensor(n.name, n.info, n.kind, n.data);
  }
  for (std::size_t i = 0; i < rw.added.size(); ++i) {
    const auto& n = rw.added[i];
    const auto t = g.num_tensors() + i;
    const bool kept = n.kind == tensor_kind::intermediate ? written[t] : n.kind != tensor_kind::constant || read[t];
    if (kept) to[t] = r.add_tensor(n.name, n.info, n.kind, n.data);
  }
  auto renumbered = [&](const op_node& from) {
    op_node op = from;  // copied, not taken by value: GCC 12 cannot move a by-value parameter's strings in a constant expression
    for (auto* list : {&op.inputs, &op.outputs})
      for (auto& t : *list) {
        if (t == no_tensor) continue;
        if (to[t] == no_tensor)
          throw error(error_category::internal, "op " + graph::describe(op) + " reads '" + name_of(t) +
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
