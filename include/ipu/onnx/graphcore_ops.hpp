#pragma once
// PopART's ai.graphcore helper ops in ONNX files (Nop, PrintTensor, DynamicSlice, DynamicUpdate,
// DynamicAdd, GroupNormalization, Gelu: the op table's rows of that domain). ONNX's shape inference
// has no schema for them and leaves their outputs, and everything computed from them, untyped; so
// the importer types them with the op table's shape rules (which also refuse bad attributes) and
// declares the result in value_info, then lets ONNX infer on from there, until nothing changes.
// Subgraph bodies (If branches, Loop / Scan bodies, at any depth) are typed the same way, their
// ops seeing the enclosing graphs' values; the graph builder then imports them like any op.
// The losses (Nll, L1, IdentityLoss) are written out as standard ops instead (graphcore_losses.hpp).
// Registered custom ops (ops/custom_ops.hpp) are typed the same way, by their own shape rules.
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/onnx/checker.hpp"
#include "ipu/onnx/graphcore_losses.hpp"
#include "ipu/onnx/proto_edit.hpp"
#include "ipu/onnx/types.hpp"
#include "ipu/ops/custom_ops.hpp"
#include "ipu/ops/infer.hpp"
#include "ipu/ops/op_table.hpp"

namespace ipu::onnx {

namespace detail {

/// A registered custom op (ops/custom_ops.hpp): typed by its shape rule like the ai.graphcore ops.
inline bool is_custom_op(const ::onnx::NodeProto& n) {
  return n.domain() != graphcore_domain && ops::custom_op_version(n.domain(), n.op_type()) > 0;
}

/// A node ONNX cannot type and the op table's (or a custom op's) shape rule does.
inline bool is_graphcore_op(const ::onnx::NodeProto& n) {
  return (n.domain() == graphcore_domain && !is_graphcore_loss(n.domain(), n.op_type())) || is_custom_op(n);
}

/// Whether `g` or any subgraph of its nodes (If branches, Loop / Scan bodies) has an ai.graphcore op.
inline bool has_graphcore_ops(const ::onnx::GraphProto& g) {
  for (const auto& n : g.node()) {
    if (is_graphcore_op(n)) return true;
    for (const auto& a : n.attribute()) {
      if (a.has_g() && has_graphcore_ops(a.g())) return true;
      for (const auto& sub : a.graphs())
        if (has_graphcore_ops(sub)) return true;
    }
  }
  return false;
}

/// The attributes an ai.graphcore op can take (numbers and strings), converted.
inline std::vector<attribute> graphcore_attributes(const ::onnx::NodeProto& n, const std::string& where) {
  std::vector<attribute> out;
  for (const auto& a : n.attribute()) {
    if (a.name().starts_with("__")) continue;  // annotations
    switch (a.type()) {
      case ::onnx::AttributeProto_AttributeType_INT: out.push_back({a.name(), static_cast<std::int64_t>(a.i())}); break;
      case ::onnx::AttributeProto_AttributeType_FLOAT: out.push_back({a.name(), a.f()}); break;
      case ::onnx::AttributeProto_AttributeType_STRING: out.push_back({a.name(), a.s()}); break;
      case ::onnx::AttributeProto_AttributeType_INTS:
        out.push_back({a.name(), std::vector<std::int64_t>(a.ints().begin(), a.ints().end())});
        break;
      case ::onnx::AttributeProto_AttributeType_FLOATS:
        out.push_back({a.name(), std::vector<float>(a.floats().begin(), a.floats().end())});
        break;
      case ::onnx::AttributeProto_AttributeType_STRINGS:
        out.push_back({a.name(), std::vector<std::string>(a.strings().begin(), a.strings().end())});
        break;
      default:
        throw error(error_category::onnx, "attribute '" + a.name() + "' is neither a number, a string nor a list of either",
                    where, "write it as PopART's Builder does");
    }
  }
  return out;
}

/// The static info of `name`, if shape inference (or the model) gave one.
inline std::optional<tensor_info> known_info(const type_scope& types, const std::string& name) {
  const auto* t = types.find(name);
  if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape()) return std::nullopt;
  const auto type = to_data_type(t->tensor_type().elem_type());
  if (!type) return std::nullopt;
  std::vector<std::int64_t> dims;
  for (const auto& d : t->tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return tensor_info{*type, shape(std::move(dims))};
}

/// Types the outputs of the ai.graphcore ops whose inputs are all typed (refusing declarations that
/// disagree with the op's shape rule), in `g` and in its nodes' subgraphs, whose values see the
/// enclosing graphs' (`parent`); how many outputs it newly declared. `inside` names `g` in errors
/// (empty for the main graph).
inline std::size_t type_graphcore_outputs(::onnx::GraphProto& g, const type_scope* parent = nullptr,
                                          const std::string& inside = {}) {
  const type_scope types(g, parent);
  std::vector<::onnx::ValueInfoProto> declared;
  std::size_t nested = 0;
  for (int i = 0; i < g.node_size(); ++i) {
    // A body's value_info is its own: declaring in it leaves `types` (g's) valid.
    for (auto& a : *g.mutable_node(i)->mutable_attribute()) {
      const std::string body_of = " of node " + node_label(g.node(i), i) + inside;
      if (a.has_g())
        nested += type_graphcore_outputs(*a.mutable_g(), &types, ", in subgraph '" + a.g().name() + "' (attribute " + a.name() + ")" + body_of);
      for (auto& sub : *a.mutable_graphs())
        nested += type_graphcore_outputs(sub, &types, ", in subgraph '" + sub.name() + "' (attribute " + a.name() + ")" + body_of);
    }
    const auto& n = g.node(i);
    if (!is_graphcore_op(n)) continue;
    const bool custom = is_custom_op(n);
    const std::string where = "node " + node_label(n, i) + " (" + (custom ? n.domain() : std::string(graphcore_domain)) + ")" + inside;
    if (!custom && !find_op_def(graphcore_domain, n.op_type()))
      throw error(error_category::onnx, "ai.graphcore op " + n.op_type() + " is not implemented", where,
                  "use Nop, PrintTensor, DynamicSlice, DynamicUpdate, DynamicAdd, GroupNormalization, Gelu or a loss");
    std::vector<tensor_info> infos;
    std::vector<infer_input> inputs;
    bool ready = true;
    infos.reserve(static_cast<std::size_t>(n.input_size()));
    for (const auto& in : n.input()) {
      if (in.empty()) {
        infos.emplace_back();
        continue;
      }
      auto info = known_info(types, in);
      if (!info) {
        ready = false;
        break;
      }
      infos.push_back(std::move(*info));
    }
    if (!ready) continue;
    for (std::size_t k = 0; k < infos.size(); ++k)
      inputs.push_back(n.input(static_cast<int>(k)).empty() ? infer_input{} : infer_input{&infos[k], nullptr});
    op_node op;
    op.type = n.op_type();
    op.domain = n.domain();
    op.opset = custom ? ops::custom_op_version(n.domain(), n.op_type()) : 1;
    op.name = n.name();
    op.attributes = graphcore_attributes(n, where);
    std::vector<tensor_info> outs;
    try {
      outs = infer_outputs(op, inputs, static_cast<std::size_t>(n.output_size()));
    } catch (const error& e) {
      throw error(e.category(), e.message(), where, e.hint());
    }
    for (int k = 0; k < n.output_size() && static_cast<std::size_t>(k) < outs.size(); ++k) {
      if (n.output(k).empty()) continue;
      const auto& want = outs[static_cast<std::size_t>(k)];
      if (const auto given = known_info(types, n.output(k))) {
        if (*given != want)
          throw error(error_category::shape,
                      "output '" + n.output(k) + "' is declared " + to_string(*given) + " but the op computes " +
                          to_string(want),
                      where, "correct or delete the declaration");
        continue;
      }
      ::onnx::ValueInfoProto v;
      v.set_name(n.output(k));
      auto* tt = v.mutable_type()->mutable_tensor_type();
      tt->set_elem_type(to_onnx_type(want.type));
      auto* s = tt->mutable_shape();
      for (auto d : want.shape.dims()) s->add_dim()->set_dim_value(d);
      declared.push_back(std::move(v));
    }
  }
  for (auto& v : declared) {
    bool replaced = false;  // an output declared without a shape gets one
    for (auto& old : *g.mutable_value_info())
      if (old.name() == v.name()) {
        old = v;
        replaced = true;
      }
    for (auto& old : *g.mutable_output())
      if (old.name() == v.name()) {
        old.mutable_type()->CopyFrom(v.type());
        replaced = true;
      }
    if (!replaced) *g.add_value_info() = std::move(v);
  }
  return declared.size() + nested;
}

}  // namespace detail

namespace detail {
/// Refuses a custom-op node whose domain the model imports at another version than the op's.
inline void check_custom_op_versions(const ::onnx::GraphProto& g, const ::onnx::ModelProto& m) {
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (is_custom_op(n)) {
      const auto want = ops::custom_op_version(n.domain(), n.op_type());
      std::int64_t have = 0;
      for (const auto& o : m.opset_import())
        if (o.domain() == n.domain()) have = o.version();
      if (have != want)
        throw error(error_category::onnx,
                    "custom op " + n.domain() + "::" + n.op_type() + " is registered at version " +
                        std::to_string(want) + " but the model imports domain " + n.domain() +
                        (have ? " at version " + std::to_string(have) : std::string(" at no version")),
                    "node " + node_label(n, i) + " of graph '" + g.name() + "'",
                    "register the op at the version the model imports, or re-export the model");
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) check_custom_op_versions(a.g(), m);
      for (const auto& sub : a.graphs()) check_custom_op_versions(sub, m);
    }
  }
}
}  // namespace detail

/// ONNX shape inference (`stage` names it in errors), with the ai.graphcore ops' and the custom
/// ops' outputs typed by the op table in between rounds (see the file comment).
inline void infer_shapes_with_graphcore_ops(::onnx::ModelProto& m, const std::string& stage) {
  infer_shapes(m, stage);
  if (!detail::has_graphcore_ops(m.graph())) return;
  for (const auto& o : m.opset_import())
    if (o.domain() == graphcore_domain && o.version() != 1)
      throw error(error_category::onnx, "the model imports ai.graphcore opset " + std::to_string(o.version()), "model",
                  "PopART writes its ops at ai.graphcore opset 1");
  detail::check_custom_op_versions(m.graph(), m);
  // Each round types at least one more op's outputs or stops; a graph has finitely many.
  while (detail::type_graphcore_outputs(*m.mutable_graph()) > 0) infer_shapes(m, stage + ", after typing ai.graphcore ops");
}

}  // namespace ipu::onnx
