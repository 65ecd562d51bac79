#pragma once
// Which ops of a model the library cannot run, found before any import work so that a user sees
// every offender at once instead of one per attempt.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/onnx/sequences.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::onnx {

/// One node whose op the registry lacks.
struct unsupported_op {
  std::string domain;  // "" for ai.onnx
  std::string type;    // as written in the model
  std::string node;    // the node's name, or "#<index>" when it has none
  std::string graph;   // the (sub)graph holding it
  std::int64_t opset = 0;
  friend bool operator==(const unsupported_op&, const unsupported_op&) = default;
};

/// The op the importer turns a model op into (deprecated ops are renamed), or "" when the importer
/// consumes the op itself (Constant becomes a constant tensor, Gradient and PopART's
/// ai.graphcore losses the ops computing them).
inline std::string canonical_op_type(std::string_view domain, std::string_view type) {
  if (domain == "ai.onnx.preview.training" && type == "Gradient") return {};
  // PopART's loss ops, written out as standard ops (graphcore_losses.hpp).
  if (domain == "ai.graphcore" && (type == "Nll" || type == "L1" || type == "IdentityLoss")) return {};
  if (domain.empty() || domain == "ai.onnx") {
    if (type == "Constant") return {};
    if (is_lowered_sequence_op(type)) return {};  // written out as tensor ops (sequences.hpp)
    if (type == "Upsample") return "Resize";
    if (type == "Scatter") return "ScatterElements";
  }
  return std::string(type);
}

namespace detail {
inline std::int64_t opset_for(const std::map<std::string, std::int64_t>& opsets, std::string_view domain) {
  auto it = opsets.find(std::string(domain));
  if (it == opsets.end() && domain.empty()) it = opsets.find("ai.onnx");
  if (it == opsets.end() && domain == "ai.onnx") it = opsets.find("");
  return it == opsets.end() ? 0 : it->second;
}

inline void collect_unsupported(const ::onnx::GraphProto& g, const std::map<std::string, std::int64_t>& opsets,
                                const op_registry& registry, std::vector<unsupported_op>& out) {
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    const std::string domain = n.domain() == "ai.onnx" ? std::string() : n.domain();
    const auto type = canonical_op_type(domain, n.op_type());
    if (!type.empty() && !registry.find(domain, type))
      out.push_back({domain, n.op_type(), n.name().empty() ? "#" + std::to_string(i) : n.name(), g.name(),
                     opset_for(opsets, domain)});
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_unsupported(a.g(), opsets, registry, out);
      for (const auto& sub : a.graphs()) collect_unsupported(sub, opsets, registry, out);
    }
  }
}
}  // namespace detail

/// Every node (subgraphs included) whose op `registry` does not implement.
inline std::vector<unsupported_op> find_unsupported_ops(const ::onnx::ModelProto& model, const op_registry& registry) {
  std::map<std::string, std::int64_t> opsets;
  for (const auto& o : model.opset_import()) opsets[o.domain()] = o.version();
  std::vector<unsupported_op> out;
  detail::collect_unsupported(model.graph(), opsets, registry, out);
  return out;
}

/// One line naming every unsupported op type with its domain, opset and nodes; nodes outside
/// `main_graph` say which subgraph holds them.
inline std::string describe_unsupported(const std::vector<unsupported_op>& ops, std::string_view main_graph = {}) {
  // Group by (domain, type, opset), keeping first-seen order.
  std::vector<std::pair<const unsupported_op*, std::vector<std::string>>> groups;
  for (const auto& op : ops) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return g.first->domain == op.domain && g.first->type == op.type && g.first->opset == op.opset;
    });
    if (it == groups.end()) {
      groups.push_back({&op, {}});
      it = groups.end() - 1;
    }
    it->second.push_back("'" + op.node + "'" + (op.graph == main_graph ? std::string() : " in '" + op.graph + "'"));
  }
  std::string s = std::to_string(ops.size()) + (ops.size() == 1 ? " node uses" : " nodes use") + " " +
                  std::to_string(groups.size()) + (groups.size() == 1 ? " op" : " ops") +
                  " the library does not implement: ";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& [op, nodes] = groups[i];
    if (i) s += "; ";
    s += op->type + " (domain " + (op->domain.empty() ? std::string("ai.onnx") : op->domain) + ", opset " +
         std::to_string(op->opset) + ", " + (nodes.size() == 1 ? "node " : "nodes ");
    constexpr std::size_t shown = 5;
    for (std::size_t j = 0; j < nodes.size() && j < shown; ++j) s += (j ? ", " : "") + nodes[j];
    if (nodes.size() > shown) s += " and " + std::to_string(nodes.size() - shown) + " more";
    s += ')';
  }
  return s;
}

/// Throws one error listing every unsupported node, if there are any.
inline void check_supported_ops(const ::onnx::ModelProto& model, const op_registry& registry) {
  const auto ops = find_unsupported_ops(model, registry);
  if (!ops.empty())
    throw error(error_category::onnx, describe_unsupported(ops, model.graph().name()), "model graph '" + model.graph().name() + "'",
                "implement and register these ops (ops of a domain of your own are custom ops: "
                "ipu::ops::register_custom_op, or load their library with ipu::ops::load_custom_ops / ipu run --custom-op LIB.so), "
                "replace them in the model, or import with check_supported off to inspect the model");
}

}  // namespace ipu::onnx
