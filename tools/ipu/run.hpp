#pragma once
// `ipu run MODEL [--input NAME=FILE]... [--data DIR] [--output-dir DIR] [--threads N] [--iterations N]
//         [--clients N] [--trace FILE]`
//
// Runs a model and writes every graph output to OUTPUT_DIR/<name>.npy, where each character of
// the name outside [A-Za-z0-9._-] becomes '_'. Inputs: FILE is a NumPy .npy or an ONNX TensorProto
// .pb; `--data DIR` binds DIR/input_<i>.pb to the i-th graph input (the layout of ONNX's test data
// sets). Any failure is an ipu::error, which main prints as one line (exit status 1).
//
// An ONNX MODEL runs exactly on the host (the CPU device). With `--iterations N` it runs once to
// warm up, then N timed times, and one line `latency_ms median=<x> min=<y> max=<z>` is printed.
//
// A MODEL ending in .popef (from `ipu compile`) is served by the Model Runtime
// (runtime/model_runner.hpp) with the schedule the file holds — pipelined stages, phases, replicas
// — on IPUs reserved from the simulated system, weights used in place. `--clients N` threads
// submit requests (one micro-batch each, the inputs given): each its share of `--iterations` after
// one warm-up request, or one request without `--iterations`. Every response must equal the
// first bit for bit; it is the one written, and it equals what `ipu run` gives for the ONNX model.
// With `--iterations`, latency_ms (per request, submit to response) and a `throughput` line are
// printed. `--trace FILE` writes the runtime's last step as a Chrome trace (host lanes: one per
// pipeline stage, phased IPU or replica). `--threads` is each engine worker's kernel threads there
// (0: every hardware thread, as for the CPU device: results depend on the kernels' thread count, so
// equal counts give equal bits).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "input_shapes.hpp"
#include "outputs.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/error.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/tensor.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/runtime/model_runner.hpp"
#include "ipu/exec/timeline.hpp"

namespace ipu_cli {

struct run_args {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE
  std::vector<std::string> input_shapes;  // NAME=D0,D1,... for models with dynamic dimensions
  std::string data_dir;
  std::string output_dir = ".";
  std::size_t threads = 0;
  std::size_t iterations = 0;
  std::optional<std::size_t> clients;  // PopEF only; unset: 1
  std::string trace;                   // PopEF only
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

/// Prints `latency_ms median=<x> min=<y> max=<z>` for the given times.
inline void print_latency(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const auto n = ms.size();
  const double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  std::printf("latency_ms median=%.3f min=%.3f max=%.3f\n", median, ms.front(), ms.back());
}

inline bool same_bits(const ipu::host_tensor& a, const ipu::host_tensor& b) {
  return a.info() == b.info() && std::memcmp(a.data(), b.data(), a.info().num_bytes()) == 0;
}

/// Serves the requests through the Model Runtime (see the file comment); the graph outputs of
/// the first response, in graph order.
inline std::vector<ipu::host_tensor> run_popef(const ipu::popef::compiled_model& m,
                                               const std::map<std::string, ipu::host_tensor>& bound,
                                               const run_args& a) {
  const auto& g = m.model();
  // The CPU device's messages for a missing or mismatched input, so both paths read alike.
  for (auto t : g.inputs()) {
    const auto& node = g.tensor(t);
    const auto it = bound.find(node.name);
    if (it == bound.end())
      throw ipu::error(ipu::error_category::usage, "input '" + node.name + "' is not given", "ipu run",
                       "bind it with --input " + node.name + "=FILE");
    if (it->second.info() != node.info)
      throw ipu::error(ipu::error_category::shape,
                       "input '" + node.name + "' expects " + ipu::to_string(node.info) + " but received " +
                           ipu::to_string(it->second.info()),
                       "ipu run", "give one micro-batch of the input's type and shape");
  }
  const std::size_t clients = a.clients.value_or(1);
  ipu::runtime::model_runner_config config;
  config.device_wait = ipu::device_wait_config::with_timeout(std::chrono::seconds(120));
  config.threads_per_worker = a.threads ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  config.keep_timeline = !a.trace.empty();
  ipu::runtime::model_runner runner(m, config);
  ipu::runtime::input_map inputs;
  for (const auto& [name, t] : bound) inputs.emplace(name, t.view());

  using clock = std::chrono::steady_clock;
  std::optional<ipu::runtime::output_map> first;
  if (a.iterations) first = runner.execute(inputs);  // the warm-up
  std::mutex lock;  // guards first, latencies and failure
  std::vector<double> latencies;
  std::exception_ptr failure;
  // Each client keeps up to a step's worth of requests in flight, so one client can fill a step.
  const std::size_t window = std::max<std::size_t>(1, static_cast<std::size_t>(runner.requests_per_step()));
  auto client = [&](std::size_t share) {
    try {
      std::vector<std::pair<clock::time_point, ipu::runtime::future_map>> in_flight;
      std::vector<double> mine;
      auto finish_one = [&] {
        auto& [t0, futures] = in_flight.front();
        ipu::runtime::output_map out;
        for (auto& [name, f] : futures) out.emplace(name, f.get());
        mine.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
        in_flight.erase(in_flight.begin());
        std::lock_guard l(lock);
        if (!first) {
          first = std::move(out);
          return;
        }
        for (const auto& [name, t] : out)
          if (!same_bits(t, first->at(name)))
            throw ipu::error(ipu::error_category::runtime, "two responses to the same request differ in '" + name + "'",
                             "ipu run", "this is a bug in the runtime; please report it");
      };
      for (std::size_t i = 0; i < share; ++i) {
        if (in_flight.size() >= window) finish_one();
        in_flight.emplace_back(clock::now(), runner.execute_async(inputs));
      }
      while (!in_flight.empty()) finish_one();
      std::lock_guard l(lock);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    } catch (...) {
      std::lock_guard l(lock);
      if (!failure) failure = std::current_exception();
    }
  };
  const auto t0 = clock::now();
  std::vector<std::thread> threads;
  for (std::size_t c = 0; c < clients; ++c) {
    const std::size_t share = a.iterations ? a.iterations / clients + (c < a.iterations % clients ? 1 : 0) : 1;
    threads.emplace_back(client, share);
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
  if (failure) std::rethrow_exception(failure);
  if (a.iterations) {
    print_latency(latencies);
    std::printf("throughput requests_per_s=%.1f requests=%zu clients=%zu steps=%llu requests_per_step=%llu\n",
                static_cast<double>(latencies.size()) / seconds, latencies.size(), clients,
                static_cast<unsigned long long>(runner.steps_run()),
                static_cast<unsigned long long>(runner.requests_per_step()));
  }
  if (!a.trace.empty()) {
    std::ofstream out(a.trace, std::ios::trunc);
    if (out) ipu::write_chrome_trace(out, runner.last_timeline(), g);
    if (!out)
      throw ipu::error(ipu::error_category::io, "cannot write the trace", "--trace '" + a.trace + "'",
                       "give a writable file path");
    std::printf("wrote trace %s\n", a.trace.c_str());
  }
  std::vector<ipu::host_tensor> outputs;
  for (auto t : g.outputs()) outputs.push_back(first->at(g.tensor(t).name));
  return outputs;
}

inline void run_command(const run_args& a) {
  namespace fs = std::filesystem;
  ipu::onnx::import_options options;
  options.input_shapes = parse_input_shapes(a.input_shapes);
  const bool is_popef = fs::path(a.model).extension() == ".popef";
  if (a.clients && *a.clients == 0)
    throw ipu::error(ipu::error_category::usage, "--clients is 0", "--clients", "use at least 1 client");
  if (!is_popef && a.clients)
    throw ipu::error(ipu::error_category::usage, "--clients applies to a PopEF file, not an ONNX model",
                     "--clients", "compile the model with ipu compile and run the .popef file");
  if (!is_popef && !a.trace.empty())
    throw ipu::error(ipu::error_category::usage, "--trace applies to a PopEF file, not an ONNX model", "--trace",
                     "compile the model with ipu compile and run the .popef file");
  std::optional<ipu::popef::compiled_model> compiled;
  ipu::graph onnx_graph;
  if (is_popef) {
    // A PopEF file (ipu compile) holds the graph with its shapes fixed; weights are used in place.
    if (!a.input_shapes.empty())
      throw ipu::error(ipu::error_category::usage, "--input-shape does not apply to a PopEF file", "--input-shape",
                       "shapes are fixed when the file is compiled: pass --input-shape to ipu compile");
    compiled = ipu::popef::load(a.model);
  } else {
    onnx_graph = ipu::onnx::load_model(a.model, options);
  }
  const ipu::graph& g = compiled ? compiled->model() : onnx_graph;

  // Bind files to input names; every graph input exactly once.
  std::map<std::string, ipu::host_tensor> bound;
  std::map<std::string, std::string> source;  // name -> where it came from, for "given twice"
  std::vector<fs::path> read_files{a.model};  // what the outputs must not replace
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
    read_files.emplace_back(file);
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
    refuse_overwriting_inputs(out_paths.back(), read_files, "--output-dir");
  }

  std::vector<ipu::host_tensor> outputs;
  if (compiled) {
    outputs = run_popef(*compiled, bound, a);
  } else {
    ipu::cpu::device dev(std::move(onnx_graph), {.threads = a.threads});
    ipu::cpu::named_tensors inputs;
    for (const auto& [name, t] : bound) inputs.emplace_back(name, t.view());
    outputs = dev.run(inputs);  // also the warm-up when timing
    if (a.iterations) {
      std::vector<double> ms;
      ms.reserve(a.iterations);
      for (std::size_t i = 0; i < a.iterations; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        outputs = dev.run(inputs);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      print_latency(std::move(ms));
    }
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
  auto* cmd = app.add_subcommand(
      "run", "run an ONNX model exactly on the host, or a PopEF file on the Model Runtime, and write its outputs as .npy");
  cmd->add_option("model", args->model, "the ONNX model, or a PopEF file from ipu compile")->required();
  cmd->add_option("--input", args->inputs, "NAME=FILE: bind a graph input to a .npy or TensorProto .pb file");
  cmd->add_option("--data", args->data_dir, "bind DIR/input_<i>.pb to the graph inputs in order");
  cmd->add_option("--output-dir", args->output_dir, "where <output name>.npy files are written")->capture_default_str();
  cmd->add_option("--threads", args->threads, "kernel threads (0: all hardware threads; PopEF: per engine worker)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1024}))
      ->capture_default_str();
  cmd->add_option("--iterations", args->iterations, "time N runs after a warm-up and print latency_ms")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 31));
  cmd->add_option("--clients", args->clients,
                  "PopEF: N client threads stream the requests (each its share of --iterations; default 1)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1024}));  // 0 gets its own message below
  cmd->add_option("--trace", args->trace, "PopEF: write the runtime's last step as a Chrome trace to FILE");
  cmd->add_option("--input-shape", args->input_shapes, "fix an input's dynamic dimensions: NAME=D0,D1,... (repeatable)");
  cmd->callback([args] { run_command(*args); });  // errors reach main, which prints one line
}

}  // namespace ipu_cli
