#pragma once
// `ipu run MODEL [--input NAME=FILE]... [--data DIR] [--output-dir DIR] [--threads N] [--iterations N]`
//
// Runs an ONNX model exactly on the host (the CPU device) and writes every graph output to
// OUTPUT_DIR/<name>.npy, where each character of the name outside [A-Za-z0-9._-] becomes '_'.
// Inputs: FILE is a NumPy .npy or an ONNX TensorProto .pb; `--data DIR` binds DIR/input_<i>.pb to
// the i-th graph input (the layout of ONNX's test data sets). With `--iterations N` the model runs
// once to warm up, then N timed times, and one line `latency_ms median=<x> min=<y> max=<z>` is
// printed. Any failure is an ipu::error, which main prints as one line (exit status 1).
// A MODEL ending in .popef (from `ipu compile`) runs the graph that file holds, weights in place.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "input_shapes.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/error.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/tensor.hpp"
#include "ipu/popef/compiled_model.hpp"

namespace ipu_cli {

struct run_args {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE
  std::vector<std::string> input_shapes;  // NAME=D0,D1,... for models with dynamic dimensions
  std::string data_dir;
  std::string output_dir = ".";
  std::size_t threads = 0;
  std::size_t iterations = 0;
};

/// The file name an output is written to: `name` with every char outside [A-Za-z0-9._-] as '_'.
inline std::string output_file_name(std::string_view name) {
  std::string s(name);
  for (auto& c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return s + ".npy";
}

/// Reads a .npy or TensorProto .pb file, chosen by extension.
inline ipu::host_tensor read_input_file(const std::filesystem::path& p) {
  const auto ext = p.extension().string();
  if (ext == ".npy") return ipu::io::read_npy(p);
  if (ext == ".pb") {
    if (!std::filesystem::is_regular_file(p))
      throw ipu::error(ipu::error_category::io, "the file does not exist or is not a regular file", "file '" + p.string() + "'",
                  "check the path");
    return ipu::onnx::load_tensor(p);
  }
  throw ipu::error(ipu::error_category::usage, "unknown input file type '" + ext + "'", "file '" + p.string() + "'",
              "give a NumPy .npy file or an ONNX TensorProto .pb file");
}

inline void run_command(const run_args& a) {
  namespace fs = std::filesystem;
  ipu::onnx::import_options options;
  options.input_shapes = parse_input_shapes(a.input_shapes);
  ipu::graph g;
  if (fs::path(a.model).extension() == ".popef") {
    // A PopEF file (ipu compile) holds the graph with its shapes fixed; weights are used in place.
    if (!a.input_shapes.empty())
      throw ipu::error(ipu::error_category::usage, "--input-shape does not apply to a PopEF file", "--input-shape",
                       "shapes are fixed when the file is compiled: pass --input-shape to ipu compile");
    g = std::move(ipu::popef::load(a.model).plan.model);
  } else {
    g = ipu::onnx::load_model(a.model, options);
  }

  // Bind files to input names; every graph input exactly once.
  std::map<std::string, ipu::host_tensor> bound;
  std::map<std::string, std::string> source;  // name -> where it came from, for "given twice"
  auto bind = [&](const std::string& name, const std::string& file) {
    bool known = false;
    for (auto t : g.inputs()) known = known || g.tensor(t).name == name;
    if (!known) {
      std::string list;
      for (auto t : g.inputs()) list += (list.empty() ? "" : ", ") + g.tensor(t).name + " " + ipu::to_string(g.tensor(t).info);
      throw ipu::error(ipu::error_category::usage, "the model has no input named '" + name + "'", "--input " + name + "=" + file,
                  "the model's inputs are: " + (list.empty() ? std::string("none") : list));
    }
    if (auto it = source.find(name); it != source.end())
      throw ipu::error(ipu::error_category::usage, "input '" + name + "' is given twice (" + it->second + " and " + file + ")",
                  "ipu run", "give each input once");
    bound.emplace(name, read_input_file(file));
    source.emplace(name, file);
  };
  if (!a.data_dir.empty()) {
    if (!fs::is_directory(a.data_dir))
      throw ipu::error(ipu::error_category::io, "not a directory", "--data '" + a.data_dir + "'", "give a test data set directory");
    for (std::size_t i = 0;; ++i) {
      const auto p = fs::path(a.data_dir) / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) break;
      if (i >= g.inputs().size())
        throw ipu::error(ipu::error_category::usage,
                    "'" + p.string() + "' has no graph input to bind to: the model has " +
                        std::to_string(g.inputs().size()) + " inputs",
                    "--data '" + a.data_dir + "'", "use the data set that belongs to this model");
      bind(g.tensor(g.inputs()[i]).name, p.string());
    }
  }
  for (const auto& spec : a.inputs) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      throw ipu::error(ipu::error_category::usage, "'" + spec + "' is not NAME=FILE", "--input", "write --input x=x.npy");
    bind(spec.substr(0, eq), spec.substr(eq + 1));
  }

  // Output files, checked before running so a clash does not cost a run.
  std::vector<fs::path> out_paths;
  std::map<std::string, std::string> taken;
  for (auto t : g.outputs()) {
    const auto& name = g.tensor(t).name;
    const auto file = output_file_name(name);
    if (auto it = taken.find(file); it != taken.end())
      throw ipu::error(ipu::error_category::usage, "outputs '" + it->second + "' and '" + name + "' would both be written to " + file,
                  "ipu run", "rename one of the outputs in the model");
    taken.emplace(file, name);
    out_paths.push_back(fs::path(a.output_dir) / file);
  }

  ipu::cpu::device dev(std::move(g), {.threads = a.threads});
  ipu::cpu::named_tensors inputs;
  for (const auto& [name, t] : bound) inputs.emplace_back(name, t.view());
  auto outputs = dev.run(inputs);  // also the warm-up when timing
  if (a.iterations) {
    std::vector<double> ms;
    ms.reserve(a.iterations);
    for (std::size_t i = 0; i < a.iterations; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      outputs = dev.run(inputs);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const auto n = ms.size();
    const double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
    std::printf("latency_ms median=%.3f min=%.3f max=%.3f\n", median, ms.front(), ms.back());
  }
  std::error_code ec;
  fs::create_directories(a.output_dir, ec);
  if (!fs::is_directory(a.output_dir))
    throw ipu::error(ipu::error_category::io, "cannot create the output directory", "--output-dir '" + a.output_dir + "'",
                "give a writable directory");
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    ipu::io::write_npy(out_paths[i], outputs[i]);
    std::printf("wrote %s %s\n", out_paths[i].string().c_str(), ipu::to_string(outputs[i].info()).c_str());
  }
}

/// Adds the `run` subcommand to the tool.
inline void add_run_command(CLI::App& app) {
  auto args = std::make_shared<run_args>();
  auto* cmd = app.add_subcommand("run", "run an ONNX model exactly on the host and write its outputs as .npy");
  cmd->add_option("model", args->model, "the ONNX model, or a PopEF file from ipu compile")->required();
  cmd->add_option("--input", args->inputs, "NAME=FILE: bind a graph input to a .npy or TensorProto .pb file");
  cmd->add_option("--data", args->data_dir, "bind DIR/input_<i>.pb to the graph inputs in order");
  cmd->add_option("--output-dir", args->output_dir, "where <output name>.npy files are written")->capture_default_str();
  cmd->add_option("--threads", args->threads, "kernel threads (0: all hardware threads)")->capture_default_str();
  cmd->add_option("--iterations", args->iterations, "time N runs after a warm-up and print latency_ms");
  cmd->add_option("--input-shape", args->input_shapes, "fix an input's dynamic dimensions: NAME=D0,D1,... (repeatable)");
  cmd->callback([args] { run_command(*args); });  // errors reach main, which prints one line
}

}  // namespace ipu_cli
