#pragma once
// Graph IR -> ONNX model (opset 17, IR version 8), the inverse of import.hpp: importing what this
// writes gives back an equal graph.
//
// Inputs become graph inputs, variables initializers, constants Constant nodes, annotations and
// captures the attributes import.hpp reads. Nodes keep the IR's order where it is topological (it
// is for imported graphs), otherwise they follow ipu::topological_order.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/onnx/attributes.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/normalize.hpp"
#include "ipu/onnx/proto.hpp"
#include "ipu/onnx/proto_edit.hpp"
#include "ipu/onnx/tensor.hpp"
#include "ipu/onnx/types.hpp"

namespace ipu::onnx {

struct export_options {
  std::string producer_name = "ipu";
  std::string producer_version = "0.1.0";
};

struct save_options : export_options {
  /// When set, variables of at least `external_threshold` bytes are written to this file (a name
  /// relative to the model's directory) as ONNX external data, 64-byte aligned so that importing
  /// can map them without copying. Needed for models over protobuf's 2 GB limit.
  std::filesystem::path external_data;
  std::size_t external_threshold = 1024;
};

namespace detail {

/// Where large weights go when saving with external data.
struct weight_sink {
  std::ofstream* out = nullptr;
  std::string location;
  std::size_t threshold = 0;
  std::uint64_t offset = 0;
};

inline ::onnx::ValueInfoProto value_info(const tensor_node& t) {
  ::onnx::ValueInfoProto v;
  v.set_name(t.name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(to_onnx_type(t.info.type));
  auto* s = tt->mutable_shape();
  for (auto d : t.info.shape) s->add_dim()->set_dim_value(d);
  return v;
}

class exporter {
 public:
  explicit exporter(weight_sink* sink) : sink_(sink) {}

  ::onnx::GraphProto graph_proto(const graph& g, std::size_t captures) {
    ::onnx::GraphProto gp;
    gp.set_name(g.name().empty() ? std::string("graph") : g.name());
    const auto& inputs = g.inputs();
    if (captures > inputs.size())
      throw error(error_category::graph, "a subgraph declares more captures than inputs", "graph '" + g.name() + "'");
    for (std::size_t i = 0; i + captures < inputs.size(); ++i) *gp.add_input() = value_info(g.tensor(inputs[i]));
    for (const auto& t : g.tensors())
      if (t.kind == tensor_kind::variable) *gp.add_initializer() = initializer(t);
    for (const auto& entry : node_order(g)) {
      if (entry.constant) {
        const auto& t = g.tensor(entry.id);
        *gp.add_node() = constant_node(t.name, t.name, to_tensor_proto(t.info, t.data.bytes()));
      } else {
        *gp.add_node() = node(g, g.op(entry.id));
      }
    }
    for (const auto& t : g.tensors())
      if (t.kind == tensor_kind::intermediate && t.producer != no_op) *gp.add_value_info() = value_info(t);
    for (auto o : g.outputs()) *gp.add_output() = value_info(g.tensor(o));
    return gp;
  }

 private:
  struct item {
    bool constant;
    std::uint32_t id;  // tensor id for a constant, op id otherwise
  };

  /// Constants and ops in the IR's own order when that order is topological, else constants
  /// first and ops in topological order.
  static std::vector<item> node_order(const graph& g) {
    std::vector<std::pair<std::uint64_t, item>> keyed;
    for (std::size_t t = 0; t < g.num_tensors(); ++t)
      if (g.tensor(static_cast<tensor_id>(t)).kind == tensor_kind::constant)
        keyed.push_back({t, {true, static_cast<std::uint32_t>(t)}});
    for (std::size_t i = 0; i < g.num_ops(); ++i) {
      const auto& op = g.op(static_cast<op_id>(i));
      std::uint64_t key = std::uint64_t{1} << 40 | i;  // ops without outputs go last
      if (!op.outputs.empty()) key = *std::min_element(op.outputs.begin(), op.outputs.end());
      keyed.push_back({key, {false, static_cast<std::uint32_t>(i)}});
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

    std::vector<bool> ready(g.num_tensors(), false);
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
      const auto k = g.tensor(static_cast<tensor_id>(t)).kind;
      ready[t] = k == tensor_kind::input || k == tensor_kind::variable;
    }
    std::vector<item> order;
    bool topological = true;
    for (const auto& [key, it] : keyed) {
      if (it.constant) {
        ready[it.id] = true;
      } else {
        const auto& op = g.op(it.id);
        for (auto t : op.inputs)
          if (t != no_tensor && !ready[t]) topological = false;
        for (auto t : op.outputs) ready[t] = true;
      }
      order.push_back(it);
    }
    if (topological) return order;
    order.clear();
    for (const auto& [key, it] : keyed)
      if (it.constant) order.push_back(it);
    for (auto i : topological_order(g)) order.push_back({false, i});
    return order;
  }

  ::onnx::TensorProto initializer(const tensor_node& t) {
    // Strings stay inline: ONNX's external data holds raw bytes, and a STRING tensor's are addresses.
    if (!sink_ || !sink_->out || t.data.size() < sink_->threshold || t.info.type == data_type::STRING)
      return to_tensor_proto(t.info, t.data.bytes(), t.name);
    ::onnx::TensorProto p;
    p.set_name(t.name);
    p.set_data_type(to_onnx_type(t.info.type));
    for (auto d : t.info.shape) p.add_dims(d);
    p.set_data_location(::onnx::TensorProto_DataLocation_EXTERNAL);
    auto pad = (64 - sink_->offset % 64) % 64;
    static constexpr char zeros[64] = {};
    sink_->out->write(zeros, static_cast<std::streamsize>(pad));
    sink_->offset += pad;
    auto add = [&](const char* k, const std::string& v) {
      auto* e = p.add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", sink_->location);
    add("offset", std::to_string(sink_->offset));
    add("length", std::to_string(t.data.size()));
    sink_->out->write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
    sink_->offset += t.data.size();
    return p;
  }

  ::onnx::NodeProto node(const graph& g, const op_node& op) {
    ::onnx::NodeProto n;
    n.set_op_type(op.type);
    if (!op.domain.empty()) n.set_domain(op.domain);
    if (!op.name.empty()) n.set_name(op.name);
    std::size_t captures = 0;
    if (const auto* a = op.find_attribute(attr_captures))
      if (const auto* v = std::get_if<std::int64_t>(&a->value)) captures = static_cast<std::size_t>(*v);
    if (captures > op.inputs.size())
      throw error(error_category::graph, "attribute __captures exceeds the op's inputs", "op " + graph::describe(op));
    for (std::size_t i = 0; i + captures < op.inputs.size(); ++i)
      n.add_input(op.inputs[i] == no_tensor ? std::string() : g.tensor(op.inputs[i]).name);
    for (auto t : op.outputs) n.add_output(g.tensor(t).name);
    auto export_graph = [&](const graph& body) { return graph_proto(body, captures); };
    for (const auto& a : op.attributes)
      if (a.name != attr_captures) *n.add_attribute() = to_attribute_proto(a, export_graph);
    if (op.where.ipu) set_attr(n, attr_ipu, *op.where.ipu);
    if (op.where.stage) set_attr(n, attr_stage, *op.where.stage);
    if (op.where.phase) set_attr(n, attr_phase, *op.where.phase);
    if (!op.where.block.empty()) set_attr(n, attr_block, std::string_view(op.where.block));
    if (op.where.checkpoint) set_attr(n, attr_recompute, std::int64_t{1});  // RecomputeType::Checkpoint
    if (op.where.recompute) set_attr(n, attr_recompute, std::int64_t{2});   // RecomputeType::Recompute
    return n;
  }

  weight_sink* sink_;
};

inline ::onnx::ModelProto model_proto(const graph& g, const export_options& options, weight_sink* sink) {
  ::onnx::ModelProto m;
  m.set_ir_version(::onnx::IR_VERSION);
  m.set_producer_name(options.producer_name);
  m.set_producer_version(options.producer_version);
  // The IR holds ai.onnx ops in their opset-17 form whatever the graph records.
  auto* onnx_opset = m.add_opset_import();
  onnx_opset->set_domain("");
  onnx_opset->set_version(canonical_opset);
  std::unordered_set<std::string> domains{""};
  for (const auto& o : g.opset_imports()) {
    const auto d = o.domain == "ai.onnx" ? std::string() : o.domain;
    if (!domains.insert(d).second) continue;
    auto* p = m.add_opset_import();
    p->set_domain(d);
    p->set_version(o.version);
  }
  for (const auto& op : g.ops())  // domains the graph uses but does not declare
    if (domains.insert(op.domain).second) {
      auto* p = m.add_opset_import();
      p->set_domain(op.domain);
      p->set_version(std::max<std::int64_t>(op.opset, 1));
    }
  *m.mutable_graph() = exporter(sink).graph_proto(g, 0);
  return m;
}

}  // namespace detail

/// The model for a graph, weights inline.
inline ::onnx::ModelProto to_model_proto(const graph& g, const export_options& options = {}) {
  return detail::model_proto(g, options, nullptr);
}

/// The serialized model for a graph (weights inline; refused over 2 GB).
inline std::string save_model_to_bytes(const graph& g, const export_options& options = {}) {
  return serialize_proto(to_model_proto(g, options), "graph '" + g.name() + "'");
}

/// Writes a graph as an ONNX file, optionally with weights in an external data file.
inline void save_model(const graph& g, const std::filesystem::path& path, const save_options& options = {}) {
  if (options.external_data.empty()) return write_proto_file(to_model_proto(g, options), path);
  if (options.external_data.is_absolute())
    throw error(error_category::usage, "external_data must be a file name relative to the model",
                options.external_data.string(), "pass e.g. \"model.onnx.data\"");
  const auto data_path = path.parent_path() / options.external_data;
  std::ofstream out(data_path, std::ios::binary | std::ios::trunc);
  if (!out) throw error(error_category::io, "cannot open the external data file for writing", data_path.string());
  detail::weight_sink sink{&out, options.external_data.generic_string(), options.external_threshold, 0};
  auto model = detail::model_proto(g, options, &sink);
  out.close();
  if (!out) throw error(error_category::io, "writing the external data file failed", data_path.string(), "check free disk space");
  write_proto_file(model, path);
}

}  // namespace ipu::onnx
