#pragma once
// `ipu convert MODEL.onnx -o OUT.onnx [--passes LIST | --no-optimize] [--batch N]
//  [--input-shape NAME=D0,D1,...]... [--custom-op LIB.so]... [--json [FILE]]`
//
// The graph optimisation stage on its own, as PopRT's model conversion: imports the model (fixing
// dynamic dimensions as `ipu compile` does), runs the passes (ipu/passes/optimize.hpp; by default
// all of them, in order) and writes the optimised graph as ONNX, to inspect or to run elsewhere.
// Fused ops of Graphcore's domain (fuse-swish's ai.graphcore Swish) run here and on PopART, and
// fuse-conv-activation's com.microsoft FusedConv here and on ONNX Runtime; for a runtime without
// them, leave those passes out of --passes.
// Prints each pass with the ops before and after it. Weights over 1 GiB in all go to an external
// data file OUT.data beside OUT (protobuf cannot hold a file over 2 GB).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common_options.hpp"
#include "input_shapes.hpp"
#include "ipu/error.hpp"
#include "ipu/onnx/export.hpp"
#include "json_output.hpp"
#include "optimize_options.hpp"
#include "outputs.hpp"

namespace ipu_cli {

struct convert_args {
  std::string model;
  std::string output;
  std::int64_t batch = 0;
  std::vector<std::string> input_shapes;
  std::vector<std::string> custom_ops;
  optimize_args optimize;
  json_option json;
};

inline void run_convert(const convert_args& a) {
  namespace fs = std::filesystem;
  const fs::path path = a.model, out = a.output;
  if (out.extension() != ".onnx")
    throw ipu::error(ipu::error_category::usage, "-o '" + a.output + "' is not an .onnx file", "-o",
                     "name the optimised model's file, e.g. -o model.opt.onnx");
  refuse_overwriting_inputs(out, {path}, "-o");
  report rep(a.json, {path});
  const auto passes = chosen_passes(a.optimize);  // a bad list fails before the import
  load_custom_op_libraries(a.custom_ops);
  const ipu::graph g = load_model_with_batch(path, a.batch, parse_input_shapes(a.input_shapes));
  nlohmann::json done;
  const auto opt = optimized(g, a.optimize, &done);
  std::uint64_t weight_bytes = 0;
  for (const auto& t : opt.tensors()) weight_bytes += t.data.size();
  ipu::onnx::save_options so;
  if (weight_bytes > (std::uint64_t{1} << 30)) so.external_data = out.filename().string() + ".data";
  ipu::onnx::save_model(opt, out, so);
  for (const auto& r : done)
    rep.printf("%-26s %zu -> %zu ops\n", r["pass"].get<std::string>().c_str(), r["ops_before"].get<std::size_t>(),
               r["ops_after"].get<std::size_t>());
  rep.printf("wrote %s: %zu ops (%zu before the passes)%s\n", out.string().c_str(), opt.num_ops(), g.num_ops(),
             so.external_data.empty() ? "" : (", weights in " + so.external_data.string()).c_str());
  rep.json["output"] = out.string();
  rep.json["passes"] = done;
  rep.json["ops_before"] = g.num_ops();
  rep.json["ops_after"] = opt.num_ops();
  if (!so.external_data.empty()) rep.json["external_data"] = so.external_data.string();
  rep.finish();
}

inline void add_convert_command(CLI::App& app) {
  auto a = std::make_shared<convert_args>();
  auto* cmd = app.add_subcommand("convert", "optimise an ONNX model with the graph passes and write it as ONNX");
  cmd->add_option("model", a->model, "the ONNX model")->required();
  cmd->add_option("-o,--output", a->output, "the optimised ONNX file to write")->required();
  cmd->add_option("--batch", a->batch, "samples per micro-batch: the leading dimension of every graph input --input-shape does not name")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 31));
  cmd->add_option("--input-shape", a->input_shapes, "fix an input's dynamic dimensions: NAME=D0,D1,... (repeatable)");
  add_custom_op_option(*cmd, a->custom_ops);
  add_optimize_options(*cmd, a->optimize);
  add_json_option(*cmd, a->json);
  cmd->callback([a] { run_convert(*a); });  // errors reach main, which prints one line
}

}  // namespace ipu_cli
