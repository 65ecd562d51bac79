#pragma once
// What an op's subgraphs (If/Loop/Scan bodies) read from enclosing scopes. Bodies find enclosing
// tensors by name, so an op owning subgraphs implicitly reads those tensors: schedules must order
// it after their producers and keep them alive until it has run.
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "ipu/graph/graph.hpp"

namespace ipu {

/// Calls `fn(body)` for every subgraph attribute of `op` (GRAPH and GRAPHS).
inline void for_each_subgraph(const op_node& op, const auto& fn) {
  for (const auto& a : op.attributes) {
    if (const auto* s = std::get_if<subgraph>(&a.value)) fn(*s->body);
    if (const auto* v = std::get_if<std::vector<graph>>(&a.value))
      for (const auto& g : *v) fn(g);
  }
}

/// Names a graph may read from enclosing scopes: its producer-less intermediates that something
/// reads, its graph inputs (a caller binds only the leading ones; the rest come from outside),
/// and what its own subgraphs read that it does not define. Over-approximates, which only keeps
/// an enclosing tensor alive a little longer.
inline void collect_outer_names(const graph& g, std::set<std::string>& out) {
  std::set<std::string> nested;
  for (const auto& op : g.ops()) for_each_subgraph(op, [&](const graph& body) { collect_outer_names(body, nested); });
  for (const auto& name : nested) {
    const auto t = g.find_tensor(name);
    if (!t || g.tensor(*t).kind == tensor_kind::input ||
        (g.tensor(*t).kind == tensor_kind::intermediate && g.tensor(*t).producer == no_op))
      out.insert(name);
  }
  for (const auto& t : g.tensors())
    if (t.kind == tensor_kind::input || (t.kind == tensor_kind::intermediate && t.producer == no_op && !t.consumers.empty()))
      out.insert(t.name);
}

/// Every tensor of `g` that `op`'s subgraphs read from enclosing scopes (by name).
inline std::vector<tensor_id> implicit_inputs(const graph& g, const op_node& op) {
  std::set<std::string> names;
  for_each_subgraph(op, [&](const graph& body) { collect_outer_names(body, names); });
  std::vector<tensor_id> out;
  for (const auto& n : names)
    if (auto t = g.find_tensor(n)) out.push_back(*t);  // else defined further out, if anywhere
  return out;
}

}  // namespace ipu
