#pragma once
// Structural checks on a graph, with errors that name the op and tensor at fault.
#include <algorithm>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/captures.hpp"
#include "ipu/graph/concepts.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"

namespace ipu {

namespace detail {
constexpr std::string where(const graph& g) { return "graph '" + g.name() + "'"; }

/// All ops carry a given annotation field, or none does (PopART's rule for virtual graphs,
/// pipeline stages and execution phases).
template <class Field>
constexpr void check_all_or_none(const graph& g, Field field, const char* what, const char* fix) {
  const op_node* with = nullptr;
  const op_node* without = nullptr;
  for (const auto& op : g.ops()) {
    const auto& v = field(op.where);
    (v ? with : without) = &op;
    if (v && *v < 0)
      throw error(error_category::graph, std::string(what) + " " + std::to_string(*v) + " is negative",
                  "op " + graph::describe(op), "number IPUs, stages and phases from 0");
  }
  if (with && without)
    throw error(error_category::graph,
                std::string("op ") + graph::describe(*with) + " has " + what + " set but op " +
                    graph::describe(*without) + " has none",
                where(g), fix);
}

}  // namespace detail

/// Checks that the graph is well formed:
/// - tensor names are unique and non-empty; tensor ids in ops and outputs exist;
/// - every op input is a graph input, a weight/constant, or produced by an op; data-carrying
///   tensors hold exactly their byte size;
/// - producer / consumer links agree with op inputs and outputs;
/// - the graph has no cycle; every graph output exists and is produced (or is an input, weight
///   or constant);
/// - annotations (IPU, stage, phase) are non-negative and set on all ops or none. Rules that
///   depend on the execution strategy (one IPU per pipeline stage...) are the scheduler's
///   (sched/annotation_rules.hpp).
constexpr void validate(const graph& g) {
  const auto nt = g.num_tensors();
  {
    std::vector<std::string_view> names;
    names.reserve(nt);
    for (const auto& t : g.tensors()) {
      if (t.name.empty())
        throw error(error_category::graph, "a tensor has an empty name", detail::where(g),
                    "give every tensor a unique name");
      names.push_back(t.name);
    }
    std::sort(names.begin(), names.end());
    for (std::size_t i = 1; i < names.size(); ++i)
      if (names[i] == names[i - 1])
        throw error(error_category::graph, "tensor name '" + std::string(names[i]) + "' is used twice",
                    detail::where(g), "tensor names must be unique");
  }
  for (const auto& t : g.tensors()) {
    if (t.has_data() && t.data.size() != t.info.num_bytes())
      throw error(error_category::graph,
                  "tensor '" + t.name + "' holds " + std::to_string(t.data.size()) + " bytes but " +
                      to_string(t.info) + " needs " + std::to_string(t.info.num_bytes()),
                  detail::where(g), "supply data matching the tensor's type and shape");
    if (t.kind == tensor_kind::intermediate && t.producer == no_op && !t.consumers.empty())
      throw error(error_category::graph,
                  "tensor '" + t.name + "' is used by op " + graph::describe(g.op(t.consumers.front())) +
                      " but nothing produces it",
                  detail::where(g), "add the op that produces it, or declare it a graph input or weight");
  }
  for (std::size_t i = 0; i < g.num_ops(); ++i) {
    const auto& op = g.op(static_cast<op_id>(i));
    if (op.type.empty())
      throw error(error_category::graph, "op #" + std::to_string(i) + " has no type", detail::where(g));
    for (auto t : op.inputs) {
      if (t == no_tensor) continue;
      if (t >= nt)
        throw error(error_category::graph, "input tensor id " + std::to_string(t) + " does not exist",
                    "op " + graph::describe(op));
      const auto& c = g.tensor(t).consumers;
      if (std::find(c.begin(), c.end(), static_cast<op_id>(i)) == c.end())
        throw error(error_category::graph, "tensor '" + g.tensor(t).name + "' does not list op " +
                                               graph::describe(op) + " among its consumers",
                    detail::where(g), "add ops through graph::add_op, which keeps links in step");
    }
    for (auto t : op.outputs) {
      if (t == no_tensor || t >= nt)
        throw error(error_category::graph, "an output tensor does not exist", "op " + graph::describe(op));
      if (g.tensor(t).producer != i)
        throw error(error_category::graph, "tensor '" + g.tensor(t).name + "' does not name op " +
                                               graph::describe(op) + " as its producer",
                    detail::where(g), "add ops through graph::add_op, which keeps links in step");
    }
  }
  for (auto t : g.outputs()) {
    if (t >= nt)
      throw error(error_category::graph, "graph output id " + std::to_string(t) + " does not exist",
                  detail::where(g));
    const auto& out = g.tensor(t);
    if (out.kind == tensor_kind::intermediate && out.producer == no_op)
      throw error(error_category::graph, "graph output '" + out.name + "' is never produced", detail::where(g),
                  "add the op that produces it, or mark another tensor as output");
  }
  (void)topological_order(g);  // throws on a cycle
  for (const auto& op : g.ops())
    if (op.where.checkpoint && op.where.recompute)
      throw error(error_category::graph, "op " + graph::describe(op) + " is both a recomputation checkpoint and recomputed",
                  detail::where(g), "mark it one or the other (PopART's RecomputeType holds one value)");
  detail::check_all_or_none(
      g, [](const annotation& a) -> const auto& { return a.ipu; }, "IPU (virtual graph)",
      "annotate every op with an IPU, or none and let the strategy place them");
  detail::check_all_or_none(
      g, [](const annotation& a) -> const auto& { return a.stage; }, "pipeline stage",
      "annotate every op with a pipeline stage, or none");
  detail::check_all_or_none(
      g, [](const annotation& a) -> const auto& { return a.phase; }, "execution phase",
      "annotate every op with an execution phase, or none");
}

/// Refuses a graph holding a STRING tensor, in it or in an If / Loop / Scan body, for the IPU's
/// executables: the IPU has no string type, and a STRING element is a host address, which no
/// executable or PopEF file may carry. The CPU device runs such graphs.
inline void check_no_strings(const graph& g, const std::string& doing) {
  for (std::size_t t = 0; t < g.num_tensors(); ++t) {
    const auto& node = g.tensor(static_cast<tensor_id>(t));
    if (node.info.type == data_type::STRING)
      throw error(error_category::usage,
                  "tensor '" + node.name + "' is STRING: the IPU has no string type, so " + doing + " cannot carry it",
                  detail::where(g),
                  "run the ONNX model on the CPU device (ipu::cpu::device, `ipu run MODEL.onnx`), or do the "
                  "string work on the host before the IPU part of the model");
  }
  for (const auto& op : g.ops()) for_each_subgraph(op, [&](const graph& body) { check_no_strings(body, doing); });
}

/// Validates a user graph type through its conversion to ipu::graph (see concepts.hpp).
template <dataflow_graph G>
  requires(!std::same_as<G, graph>)
constexpr void validate(const G& g) {
  validate(as_graph(g));
}

}  // namespace ipu
