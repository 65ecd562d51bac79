#pragma once
// `ipu info MODEL.onnx`: what a model is and whether the library can run it - opsets, inputs and
// outputs, an op histogram, parameter count and bytes, and unsupported ops.
#include <CLI/CLI.hpp>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "input_shapes.hpp"
#include "ipu/error.hpp"
#include "ipu/format.hpp"
#include "ipu/graph/graph.hpp"
#include "import_limits.hpp"
#include "json_output.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/proto.hpp"
#include "ipu/onnx/unsupported.hpp"
#include "ipu/ops/all.hpp"

namespace ipu_cli {

struct info_args {
  std::string model;
  std::vector<std::string> input_shapes;
  bool allow_unsupported = false;
  json_option json;
};

struct graph_totals {
  std::map<std::string, std::uint64_t> ops;  // "Conv" or "com.example.Frobnicate"
  std::uint64_t num_ops = 0, params = 0, param_bytes = 0, variables = 0, constants = 0, constant_bytes = 0;
};

/// Counts a graph and its subgraphs.
inline void tally(const ipu::graph& g, graph_totals& t) {
  for (const auto& n : g.tensors()) {
    if (n.kind == ipu::tensor_kind::variable) {
      ++t.variables;
      t.params += static_cast<std::uint64_t>(n.info.num_elements());
      t.param_bytes += n.data.size();
    } else if (n.kind == ipu::tensor_kind::constant) {
      ++t.constants;
      t.constant_bytes += n.data.size();
    }
  }
  for (const auto& op : g.ops()) {
    ++t.num_ops;
    ++t.ops[op.domain.empty() ? op.type : op.domain + "." + op.type];
    for (const auto& a : op.attributes) {
      if (const auto* s = std::get_if<ipu::subgraph>(&a.value)) tally(*s->body, t);
      if (const auto* gs = std::get_if<std::vector<ipu::graph>>(&a.value))
        for (const auto& sub : *gs) tally(sub, t);
    }
  }
}

inline nlohmann::json tensor_json(const ipu::graph& g, ipu::tensor_id id) {
  const auto& n = g.tensor(id);
  return {{"name", n.name}, {"type", ipu::to_string(n.info)}, {"dtype", std::string(ipu::to_string(n.info.type))},
          {"shape", std::vector<std::int64_t>(n.info.shape.begin(), n.info.shape.end())}};
}

inline void run_info(const info_args& args) {
  const std::filesystem::path path = args.model;
  report rep(args.json, {path});
  std::ostringstream out;
  auto& j = rep.json;
  auto model = std::make_shared<::onnx::ModelProto>();
  ipu::onnx::read_proto_file(*model, path, "ONNX model");

  // What the file says, before the importer normalises it.
  std::string opsets;
  j["opsets"] = nlohmann::json::array();
  for (const auto& o : model->opset_import()) {
    if (!opsets.empty()) opsets += ", ";
    const bool onnx_domain = o.domain().empty() || o.domain() == "ai.onnx";
    opsets += (onnx_domain ? std::string("ai.onnx") : o.domain()) + " " + std::to_string(o.version());
    nlohmann::json oj = {{"domain", onnx_domain ? std::string("ai.onnx") : o.domain()}, {"version", o.version()}};
    if (onnx_domain && o.version() != ipu::onnx::canonical_opset) {
      opsets += " (imported as " + std::to_string(ipu::onnx::canonical_opset) + ")";
      oj["imported_as"] = ipu::onnx::canonical_opset;
    }
    j["opsets"].push_back(oj);
  }
  const auto ir_version = model->ir_version();
  const auto producer = model->producer_name() + (model->producer_version().empty() ? "" : " " + model->producer_version());
  const auto unsupported = ipu::onnx::find_unsupported_ops(*model, ipu::default_op_registry());
  if (!unsupported.empty() && !args.allow_unsupported)
    throw ipu::error(ipu::error_category::onnx, ipu::onnx::describe_unsupported(unsupported, model->graph().name()),
                     path.string(), "pass --allow-unsupported to describe the model anyway");

  auto options = limited_import_options();
  options.input_shapes = parse_input_shapes(args.input_shapes);
  options.base_dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  options.check_supported = false;  // reported below instead
  ipu::graph g;
  try {
    g = ipu::onnx::import_model(std::move(model), options);
  } catch (const ipu::error& e) {
    throw ipu::error(e.category(), e.message(), path.string() + (e.location().empty() ? "" : ": " + e.location()),
                     e.hint());
  }

  graph_totals t;
  tally(g, t);
  auto row = [&](const std::string& key, const std::string& value) {
    out << key << std::string(key.size() < 13 ? 13 - key.size() : 1, ' ') << value << '\n';
  };
  std::size_t width = 0;
  for (auto id : g.inputs()) width = std::max(width, g.tensor(id).name.size());
  for (auto id : g.outputs()) width = std::max(width, g.tensor(id).name.size());
  auto tensor_row = [&](ipu::tensor_id id) {
    const auto& n = g.tensor(id);
    out << "  " << n.name << std::string(width - n.name.size() + 2, ' ') << ipu::to_string(n.info) << '\n';
  };

  row("model", path.string());
  row("format", "ONNX IR " + std::to_string(ir_version) + (producer.empty() ? "" : ", producer " + producer));
  row("opsets", opsets);
  row("graph", g.name());
  row("inputs", std::to_string(g.inputs().size()));
  for (auto id : g.inputs()) tensor_row(id);
  row("outputs", std::to_string(g.outputs().size()));
  for (auto id : g.outputs()) tensor_row(id);
  row("ops", ipu::format_grouped(t.num_ops) + " (" + std::to_string(t.ops.size()) + " types)");
  std::vector<std::pair<std::string, std::uint64_t>> hist(t.ops.begin(), t.ops.end());
  std::stable_sort(hist.begin(), hist.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::size_t op_width = 0;
  for (const auto& [name, n] : hist) op_width = std::max(op_width, name.size());
  for (const auto& [name, n] : hist) out << "  " << name << std::string(op_width - name.size() + 2, ' ') << n << '\n';
  row("parameters", ipu::format_grouped(t.params) + " in " + ipu::format_grouped(t.variables) + " weights (" +
                        ipu::format_grouped(t.param_bytes) + " bytes)");
  row("constants", ipu::format_grouped(t.constants) + " (" + ipu::format_grouped(t.constant_bytes) + " bytes)");
  row("unsupported", unsupported.empty() ? std::string("none")
                                         : ipu::onnx::describe_unsupported(unsupported, g.name()));

  j["model"] = path.string();
  j["ir_version"] = ir_version;
  j["producer"] = producer;
  j["graph"] = g.name();
  j["inputs"] = nlohmann::json::array();
  for (auto id : g.inputs()) j["inputs"].push_back(tensor_json(g, id));
  j["outputs"] = nlohmann::json::array();
  for (auto id : g.outputs()) j["outputs"].push_back(tensor_json(g, id));
  j["ops"] = t.num_ops;
  j["op_types"] = nlohmann::json::array();  // most used first, as the text lists them
  for (const auto& [name, n] : hist) j["op_types"].push_back({{"type", name}, {"count", n}});
  j["parameters"] = t.params;
  j["weights"] = t.variables;
  j["parameter_bytes"] = t.param_bytes;
  j["constants"] = t.constants;
  j["constant_bytes"] = t.constant_bytes;
  j["unsupported"] = nlohmann::json::array();
  for (const auto& u : unsupported)
    j["unsupported"].push_back({{"domain", u.domain.empty() ? std::string("ai.onnx") : u.domain}, {"type", u.type},
                                {"node", u.node}, {"graph", u.graph}, {"opset", u.opset}});
  rep.text(out.str());
  rep.finish();
}

inline void add_info_command(CLI::App& app) {
  auto args = std::make_shared<info_args>();
  auto* cmd = app.add_subcommand("info", "describe an ONNX model: opsets, inputs, outputs, ops, parameters");
  cmd->add_option("model", args->model, "the .onnx file")->required();
  cmd->add_option("--input-shape", args->input_shapes, "fix an input's dynamic dimensions: NAME=D0,D1,... (repeatable)");
  cmd->add_flag("--allow-unsupported", args->allow_unsupported,
                "describe the model even if it uses ops the library does not implement");
  add_json_option(*cmd, args->json);
  cmd->callback([args] { run_info(*args); });
}

}  // namespace ipu_cli
