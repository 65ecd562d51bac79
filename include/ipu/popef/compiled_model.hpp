#pragma once
// A compiled model as it goes into and comes out of a PopEF file: the executable (plan + graph,
// weights bound), its metadata and its name — and how it is laid out as blobs: one Executable
// (the graph without its weights, graph_codec.hpp, and the plan), one Metadata, one TensorData per
// weight. The metadata names the custom ops (ops/custom_ops.hpp) the graph runs, and loading
// refuses the model, naming them, until they are registered.
#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/captures.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/ops/custom_ops.hpp"
#include "ipu/popef/format.hpp"
#include "ipu/popef/metadata.hpp"
#include "ipu/popef/model.hpp"
#include "ipu/popef/graph_codec.hpp"
#include "ipu/popef/plan_codec.hpp"
#include "ipu/popef/popef.pb.h"
#include "ipu/popef/writer.hpp"
#include "ipu/sched/executable.hpp"

namespace ipu::popef {

struct compiled_model {
  std::string name;           // the Executable blob's name
  executable plan;            // plan.model is the graph; its weights share the file's pages when loaded
  popef::metadata metadata;   // anchors, program flow, device figures

  [[nodiscard]] const graph& model() const noexcept { return plan.model; }
};

namespace detail {
/// The ops of `g` (subgraphs included) the op table has no row for (custom ops), each once, in
/// graph order, at the version the graph records (else the registered one).
inline void collect_custom_ops(const graph& g, std::vector<custom_op_use>& out) {
  for (const auto& op : g.ops()) {
    const bool builtin = op.domain.empty() || op.domain == "ai.onnx" || op_def_index(op.domain, op.type) < op_table().size();
    if (!builtin) {
      const auto registered = ops::custom_op_version(op.domain, op.type);
      custom_op_use use{op.domain, op.type, op.opset > 0 ? op.opset : std::max<std::int64_t>(registered, 1)};
      if (std::find(out.begin(), out.end(), use) == out.end()) out.push_back(std::move(use));
    }
    for_each_subgraph(op, [&](const graph& body) { collect_custom_ops(body, out); });
  }
}

/// Refuses a model whose metadata lists a custom op not registered (at its version).
inline void require_custom_ops(const metadata& md, const std::string& where) {
  for (const auto& c : md.custom_ops) {
    const auto have = ops::custom_op_version(c.domain, c.type);
    if (have == c.version) continue;
    throw error(error_category::popef,
                "the model uses custom op " + ops::custom_op_label(c.domain, c.type, c.version) +
                    (have ? ", but version " + std::to_string(have) + " is registered" : ", which is not registered"),
                where,
                "load the library defining it first: ipu run --custom-op LIB.so (ipu::ops::load_custom_ops), or register "
                "it with ipu::ops::register_custom_op");
  }
}
}  // namespace detail

/// Writes `m` as blobs: Executable (zlib-compressed when `compress`), Metadata (listing the custom
/// ops the graph runs), then one page-aligned TensorData per weight, in the graph's order.
inline void write_model(writer& w, const compiled_model& m, bool compress = true) {
  pb::Executable e;
  *e.mutable_graph() = graph_to_proto(m.model());
  *e.mutable_plan() = plan_to_proto(m.plan);
  e.set_producer("ipu " + std::string(library_version));
  const auto bytes = detail::serialize_message(e, "the executable '" + m.name + "'");
  w.write_executable(m.name, std::as_bytes(std::span(bytes.data(), bytes.size())), compress);
  auto md = m.metadata;
  md.custom_ops.clear();
  detail::collect_custom_ops(m.model(), md.custom_ops);
  w.write_metadata(md);
  for (const auto& t : m.model().tensors())
    if (t.kind == tensor_kind::variable) w.write_tensor_data(t.name, t.info, t.data.bytes());
}

/// The Executable message of a PopEF model, decompressed and parsed (its graph and plan still to
/// be decoded). Throws ipu::error (popef) for bytes that are not one.
inline pb::Executable decode_executable(const model& m) {
  pb::Executable e;
  const auto bytes = m.executable.decompressed();
  detail::parse_message(e, std::as_bytes(std::span(bytes.data(), bytes.size())), "the executable",
                        m.executable.blob.location);
  return e;
}

/// The compiled model of a PopEF model: decodes the executable, rebuilds its graph with each weight
/// bound to its TensorData blob (shared, not copied) and checks the plan against the graph.
inline compiled_model load(const model& m) {
  const auto& where = m.executable.blob.location;
  detail::require_custom_ops(m.metadata.value, m.metadata.blob.location);
  const pb::Executable e = decode_executable(m);
  auto weights = [&](const std::string& name, const tensor_info& info) -> byte_buffer {
    const auto* t = m.find_tensor(name);
    if (!t)
      throw error(error_category::popef, "weight '" + name + "' " + to_string(info) + " has no TensorData blob", where,
                  "add the file holding the model's weights to the reader");
    if (t->info != info)
      throw error(error_category::popef,
                  "TensorData '" + name + "' is " + to_string(t->info) + " but the graph's weight is " + to_string(info),
                  t->blob.location, "the tensor data belongs to another model");
    return t->data;
  };
  compiled_model out;
  out.name = m.executable.name;
  plan_from_proto(e.plan(), out.plan, where);
  out.plan.model = graph_from_executable(e, weights, where);
  check_plan(out.plan, where);
  out.metadata = m.metadata.value;
  return out;
}

/// Loads the model of `executable` (empty: the only one) from one or several PopEF files.
inline compiled_model load(std::span<const std::filesystem::path> files, std::string_view executable = {},
                           reader_options options = {}) {
  reader r(files, options);
  return load(model_builder(r).create_model(executable));
}

inline compiled_model load(const std::filesystem::path& file, std::string_view executable = {},
                           reader_options options = {}) {
  return load(std::span<const std::filesystem::path>(&file, 1), executable, options);
}

}  // namespace ipu::popef
