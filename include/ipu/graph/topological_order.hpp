#pragma once
// Op order in which every op comes after the producers of its inputs.
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/concepts.hpp"
#include "ipu/graph/graph.hpp"

namespace ipu {

/// Kahn's algorithm; ties keep the order ops were added in, so the result is deterministic.
/// Throws an error naming an op on a cycle if there is one.
constexpr std::vector<op_id> topological_order(const graph& g) {
  const auto n = g.num_ops();
  std::vector<std::size_t> pending(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (auto t : g.op(static_cast<op_id>(i)).inputs)
      if (t != no_tensor && t < g.num_tensors() && g.tensor(t).producer != no_op) ++pending[i];

  std::vector<op_id> order;
  order.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (pending[i] == 0) order.push_back(static_cast<op_id>(i));
  for (std::size_t head = 0; head < order.size(); ++head) {
    const auto& op = g.op(order[head]);
    for (auto t : op.outputs)
      for (auto c : g.tensor(t).consumers)
        for (auto in : g.op(c).inputs)  // one decrement per input edge, matching the count above
          if (in == t && --pending[c] == 0) order.push_back(c);
  }
  if (order.size() != n) {
    for (std::size_t i = 0; i < n; ++i)
      if (pending[i] != 0)
        throw error(error_category::graph, "the graph has a cycle through op " + graph::describe(g.op(static_cast<op_id>(i))),
                    "graph '" + g.name() + "'", "an op may not depend on its own outputs; break the cycle");
  }
  return order;
}

/// The order of a user graph type, through its conversion to ipu::graph (see concepts.hpp).
template <dataflow_graph G>
  requires(!std::same_as<G, graph>)
constexpr std::vector<op_id> topological_order(const G& g) {
  return topological_order(as_graph(g));
}

}  // namespace ipu
