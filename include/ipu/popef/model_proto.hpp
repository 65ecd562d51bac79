#pragma once
// The graph inside an Executable blob: an ONNX ModelProto (opset 17, from onnx/export.hpp) whose
// weights are left out — each top-level initializer keeps its name, type and dims, with
// data_location EXTERNAL and external_data {location: "@popef", name: <TensorData name>} — and the
// way back: a graph whose weights are bound to bytes found elsewhere (TensorData views), with the
// same tensor and op numbering every time, since an executable's plan refers to them by number.
#include <onnx/onnx_pb.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/onnx/checker.hpp"
#include "ipu/onnx/export.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/types.hpp"
#include "ipu/popef/format.hpp"

namespace ipu::popef {

/// The external-data location that marks a weight stored in a TensorData blob.
inline constexpr std::string_view weight_location = "@popef";

/// Supplies the bytes of weight `name` (of type and shape `info`).
using weight_source = std::function<byte_buffer(const std::string& name, const tensor_info& info)>;

/// The graph as a ModelProto without weight data (see the file comment). Weights are not copied.
inline ::onnx::ModelProto weightless_model_proto(const graph& g, const onnx::export_options& options = {}) {
  // A copy of the graph in which each weight is an empty F32[0]-shaped stand-in, so the exporter
  // never touches the weight bytes; the real type and dims are written into the initializers after.
  graph light(g.name());
  light.set_opset_imports(g.opset_imports());
  for (const auto& t : g.tensors()) {
    if (t.kind == tensor_kind::variable) light.add_tensor(t.name, {t.info.type, shape{0}}, t.kind);
    else light.add_tensor(t.name, t.info, t.kind, t.data);
  }
  for (const auto& op : g.ops()) light.add_op(op);
  for (auto o : g.outputs()) light.mark_output(o);
  auto model = onnx::to_model_proto(light, options);
  std::unordered_map<std::string, const tensor_node*> weights;
  for (const auto& t : g.tensors())
    if (t.kind == tensor_kind::variable) weights.emplace(t.name, &t);
  for (auto& init : *model.mutable_graph()->mutable_initializer()) {
    const auto it = weights.find(init.name());
    if (it == weights.end())
      throw error(error_category::internal, "exported initializer '" + init.name() + "' is not a weight of the graph");
    const auto& info = it->second->info;
    init.clear_dims();
    for (auto d : info.shape) init.add_dims(d);
    init.set_data_type(onnx::to_onnx_type(info.type));
    init.clear_raw_data();
    init.set_data_location(::onnx::TensorProto_DataLocation_EXTERNAL);
    auto* loc = init.add_external_data();
    loc->set_key("location");
    loc->set_value(std::string(weight_location));
    auto* name = init.add_external_data();
    name->set_key("name");
    name->set_value(init.name());
  }
  return model;
}

/// The weights the model proto leaves out, in order: name and type.
struct weight_ref {
  std::string name;
  tensor_info info;
};

/// Rebuilds the graph of a weightless model proto (modified in place and kept alive by the graph's
/// constants), binding each weight to `weights(name, info)`. Tensor and op ids are the same for the
/// same proto. Throws ipu::error for a proto that is not ONNX or does not follow the convention.
inline graph graph_from_model_proto(std::shared_ptr<::onnx::ModelProto> model, const weight_source& weights,
                                    const std::string& where) {
  auto& gp = *model->mutable_graph();
  // Weights become graph inputs, appended after the real ones in initializer order: the importer
  // adds inputs then initializers, so the numbering is that of the graph that was exported.
  std::vector<weight_ref> refs;
  for (const auto& init : gp.initializer()) {
    bool marked = init.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL;
    for (const auto& kv : init.external_data())
      if (kv.key() == "location") marked = marked && kv.value() == weight_location;
    if (!marked)
      throw error(error_category::popef, "initializer '" + init.name() + "' holds data inside the executable's graph",
                  where, "the executable was not written by ipu; export it again");
    const std::string what = "weight '" + init.name() + "'";
    tensor_info info{onnx::data_type_from_onnx(init.data_type(), what), {}};
    std::vector<std::int64_t> dims;
    for (auto d : init.dims()) {
      if (d < 0) throw error(error_category::popef, what + " has negative dimension " + std::to_string(d), where);
      dims.push_back(d);
    }
    info.shape = shape(std::move(dims));
    refs.push_back({init.name(), std::move(info)});
  }
  for (const auto& init : gp.initializer()) {
    auto* in = gp.add_input();
    in->set_name(init.name());
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(init.data_type());
    auto* s = tt->mutable_shape();
    for (auto d : init.dims()) s->add_dim()->set_dim_value(d);
  }
  gp.clear_initializer();

  graph with_inputs;
  try {
    onnx::check_model(*model, {}, "executable graph");
    onnx::external_data_resolver resolver;
    with_inputs = onnx::detail::graph_builder(model, resolver).build();
  } catch (const error& e) {
    throw error(error_category::popef, "the executable's graph is not valid: " + e.message(), where,
                "the file is damaged or was not written by ipu; export it again");
  }

  std::unordered_set<std::string> weight_names;
  for (const auto& r : refs) weight_names.insert(r.name);
  graph out(with_inputs.name());
  out.set_opset_imports(with_inputs.opset_imports());
  for (const auto& t : with_inputs.tensors()) {
    if (t.kind == tensor_kind::input && weight_names.count(t.name)) {
      auto data = weights(t.name, t.info);
      if (data.size() != t.info.num_bytes())
        throw error(error_category::popef,
                    "weight '" + t.name + "' " + to_string(t.info) + " needs " + std::to_string(t.info.num_bytes()) +
                        " bytes but " + std::to_string(data.size()) + " were given",
                    where, "the tensor data belongs to another model");
      out.add_tensor(t.name, t.info, tensor_kind::variable, std::move(data));
    } else {
      out.add_tensor(t.name, t.info, t.kind, t.data);
    }
  }
  for (const auto& op : with_inputs.ops()) out.add_op(op);
  for (auto o : with_inputs.outputs()) out.mark_output(o);
  validate(out);
  return out;
}

/// Parses serialized proto bytes, then as above.
inline graph graph_from_model_bytes(std::string_view bytes, const weight_source& weights, const std::string& where) {
  auto model = std::make_shared<::onnx::ModelProto>();
  if (bytes.size() > max_message_size || !model->ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw error(error_category::popef, "the executable's graph does not parse as an ONNX model", where,
                "the file is damaged; export it again");
  return graph_from_model_proto(std::move(model), weights, where);
}

/// The weights of a weightless model proto, in order.
inline std::vector<weight_ref> model_proto_weights(const ::onnx::ModelProto& model) {
  std::vector<weight_ref> out;
  for (const auto& init : model.graph().initializer()) {
    std::vector<std::int64_t> dims(init.dims().begin(), init.dims().end());
    out.push_back({init.name(), {onnx::data_type_from_onnx(init.data_type(), "weight '" + init.name() + "'"), shape(std::move(dims))}});
  }
  return out;
}

}  // namespace ipu::popef
