#pragma once
// `ipu run MODEL [--input NAME=FILE]... [--data DIR] [--output-dir DIR] [--threads N]
//         [--iterations N | --duration S] [--warmup N] [--synthetic random|zeros] [--seed N]
//         [--json [FILE]] [--progress] [--check [--rtol R] [--atol A]] [--clients N] [--trace FILE]
//         [--profile FILE] [--custom-op LIB.so]... [--passes LIST | --no-optimize]`
//
// An ONNX model goes through the graph optimisation stage first (ipu/passes/optimize.hpp: every
// pass unless `--passes LIST` names some or `--no-optimize` none); the JSON report lists what each
// pass did. A PopEF file was optimised when it was compiled, so both flags are refused for one.
// `--custom-op LIB.so` (repeatable) first loads a custom-op library (ipu/ops/custom_ops.hpp), so a
// model using its ops imports and runs. Runs a model and writes every graph output to OUTPUT_DIR/<name>.npy, where each character of
// the name outside [A-Za-z0-9._-] becomes '_'. Inputs: FILE is a NumPy .npy or an ONNX TensorProto
// .pb; `--data DIR` binds DIR/input_<i>.pb to the i-th graph input (the layout of ONNX's test data
// sets). Without any input given, every input is invented (`--synthetic random`, the default,
// seeded by `--seed`; or `zeros`); an explicit `--synthetic` also fills the inputs not given. Any
// failure is an ipu::error, which main prints as one line (exit status 1; 2 for the parser's).
//
// Timing, as trtexec / onnxruntime_perf_test do it: `--warmup N` untimed runs (default 1), then
// `--iterations N` runs or as many as `--duration S` seconds allow; printed are a `latency_ms` line
// (mean, median, p90, p95, p99, min, max) and a `throughput` line (samples/s with the leading
// dimension of the first input as the batch). A progress line goes to stderr every second after
// the first two when stderr is a terminal or with --progress. `--json` prints what the text says
// (and every latency sample) as JSON instead of the text; `--json FILE` writes it to FILE as well. `--check` compares each output with DIR/output_<i>.pb
// (or .npy) beside the --data inputs, as numpy.isclose with --rtol / --atol; a mismatch is an
// error naming every output that differs, and nothing is written.
//
// An ONNX MODEL runs exactly on the host (the CPU device). `--profile FILE` writes what the host did
// on the measured runs (the timed ones, else the one run) as a Chrome trace: a span per run and,
// inside it, a span per op executed, timed with a steady clock around the op's kernel (the CPU
// device's op observer). A PopEF file has --trace instead: the runtime's schedule of its last step.
//
// A MODEL ending in .popef (from `ipu compile`) is served by the Model Runtime
// (runtime/model_runner.hpp) with the schedule the file holds — pipelined stages, phases, replicas
// — on IPUs reserved from the simulated system, weights used in place. `--clients N` threads
// submit requests (one micro-batch each, the inputs given): each its share of `--iterations` (or
// requests until `--duration` ends, in whole steps) after the warm-up, or one request without timing. Every response
// must equal the first bit for bit; it is the one written, and it equals what `ipu run` gives for
// the ONNX model. Latency is per request, submit to response. `--trace FILE` writes the runtime's
// last step as a Chrome trace (host lanes: one per pipeline stage, phased IPU or replica).
// `--threads` is each engine worker's kernel threads there (0: every hardware thread, as for the
// CPU device: results depend on the kernels' thread count, so equal counts give equal bits).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "input_files.hpp"
#include "input_shapes.hpp"
#include "outputs.hpp"
#include "common_options.hpp"
#include "run_perf.hpp"
#include "json_output.hpp"
#include "optimize_options.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/error.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/tensor.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/runtime/model_runner.hpp"
#include "ipu/exec/timeline.hpp"
#include "ipu/file.hpp"

namespace ipu_cli {

struct run_args {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE
  std::vector<std::string> input_shapes;  // NAME=D0,D1,... for models with dynamic dimensions
  std::string data_dir;
  std::string output_dir = ".";
  std::size_t threads = 0;
  std::size_t iterations = 0;  // 0: not given
  double duration = 0;         // seconds; 0: not given
  std::optional<std::size_t> warmup;  // unset: 1 when timing
  std::optional<std::string> synthetic;  // unset: "random" when no input is given
  std::optional<std::int64_t> seed;      // unset: 1
  json_option json;
  std::string profile;  // ONNX only: the measured host ops as a Chrome trace
  bool progress = false;
  bool check = false;
  double rtol = 1e-3, atol = 1e-5;
  std::string options_file;            // PopTorch options: randomSeed is --seed
  std::vector<std::string> custom_ops;  // --custom-op libraries, loaded before the model
  optimize_args optimize;
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

/// The most timed runs: every latency is kept for exact percentiles (80 MB of them at most).
inline constexpr std::size_t max_timed_runs = 10'000'000;

[[nodiscard]] inline bool timing(const run_args& a) { return a.iterations > 0 || a.duration > 0; }

inline bool show_progress(const run_args& a) { return a.progress || ::isatty(2) != 0; }

/// Adds the throughput line's common start to `text` and records it in `json`.
inline void report_throughput(std::size_t runs, double seconds, std::int64_t batch, nlohmann::json& json, std::string& text) {
  const double per_s = seconds > 0 ? static_cast<double>(runs) / seconds : 0.0;
  run_perf::appendf(text, "throughput samples_per_s=%.1f iterations_per_s=%.1f iterations=%zu batch=%lld seconds=%.3f", per_s * static_cast<double>(batch),
              per_s, runs, static_cast<long long>(batch), seconds);
  json["throughput"] = {{"samples_per_s", per_s * static_cast<double>(batch)}, {"iterations_per_s", per_s}};
  json["iterations"] = runs;
  json["batch"] = batch;
  json["seconds"] = seconds;
}

inline bool same_bits(const ipu::host_tensor& a, const ipu::host_tensor& b) {
  return a.info() == b.info() && std::memcmp(a.data(), b.data(), a.info().num_bytes()) == 0;
}

/// --profile: per measured run, the steady-clock span of the run and of each op the CPU device
/// executed in it, kept up to a cap on the spans (so a long timed run cannot exhaust memory).
class host_profile {
 public:
  static constexpr std::size_t max_spans = 200'000;  // a trace file of some 30 MB
  using time_point = std::chrono::steady_clock::time_point;

  [[nodiscard]] bool room_for(std::size_t ops) const { return spans_ + ops + 1 <= max_spans; }
  void begin_run() {
    runs_.push_back({std::chrono::steady_clock::now(), {}, {}});
    recording_ = true;
  }
  void end_run() {
    recording_ = false;
    runs_.back().end = std::chrono::steady_clock::now();
    spans_ += runs_.back().ops.size() + 1;
  }
  void op(ipu::op_id id, time_point b, time_point e) {
    if (recording_) runs_.back().ops.push_back({id, b, e});
  }
  [[nodiscard]] std::size_t runs() const { return runs_.size(); }

  /// Chrome trace: one host track; "run" spans with their "op" spans inside, named after the op
  /// (its type when it has no name), with the type and, when placed, the stage as arguments.
  void write(std::ostream& os, const ipu::graph& g) const {
    ipu::chrome_trace_writer w(os);
    w.process_name(0, "host (measured runs)");
    w.thread_name(0, 0, "ipu run");
    if (runs_.empty()) return;
    const auto t0 = runs_.front().begin;
    auto us = [&](time_point t) { return std::chrono::duration<double, std::micro>(t - t0).count(); };
    for (std::size_t r = 0; r < runs_.size(); ++r) {
      const auto& run = runs_[r];
      w.complete("run", "run " + std::to_string(r), 0, 0, us(run.begin), us(run.end) - us(run.begin),
                 "\"run\":" + std::to_string(r) + ",\"ops\":" + std::to_string(run.ops.size()));
      for (const auto& o : run.ops) {
        const auto& op = g.op(o.id);
        std::string args = "\"run\":" + std::to_string(r) + ",\"type\":" + nlohmann::json(op.type).dump();
        if (op.where.stage) args += ",\"stage\":" + std::to_string(*op.where.stage);
        w.complete("op", op.name.empty() ? op.type : op.name, 0, 0, us(o.begin), us(o.end) - us(o.begin), args);
      }
    }
  }

 private:
  struct op_span {
    ipu::op_id id;
    time_point begin, end;
  };
  struct run_span {
    time_point begin, end;
    std::vector<op_span> ops;
  };
  std::vector<run_span> runs_;
  std::size_t spans_ = 0;
  bool recording_ = false;
};

/// Serves the requests through the Model Runtime (see the file comment); the graph outputs of
/// the first response, in graph order.
inline std::vector<ipu::host_tensor> run_popef(const ipu::popef::compiled_model& m,
                                               const std::map<std::string, ipu::host_tensor>& bound,
                                               const run_args& a, nlohmann::json& json,
                                               std::string& text) {
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
  const bool timed = timing(a);
  std::optional<ipu::runtime::output_map> first;
  if (timed)
    for (std::size_t i = 0; i < a.warmup.value_or(1); ++i) {
      auto out = runner.execute(inputs);
      if (!first) first = std::move(out);
    }
  std::mutex lock;  // guards first, latencies and failure
  std::vector<double> latencies;
  std::exception_ptr failure;
  std::atomic<std::size_t> done{0}, finished{0};
  std::atomic<bool> stop{false};  // set on a failure, so the other clients end too
  clock::time_point t0;
  // Each client keeps up to a step's worth of requests in flight, so one client can fill a step.
  const std::size_t window = std::max<std::size_t>(1, static_cast<std::size_t>(runner.requests_per_step()));
  auto client = [&](std::size_t share) {
    try {
      std::vector<std::pair<clock::time_point, ipu::runtime::future_map>> in_flight;
      std::vector<double> mine;
      auto finish_one = [&] {
        auto& [start, futures] = in_flight.front();
        ipu::runtime::output_map out;
        for (auto& [name, f] : futures) out.emplace(name, f.get());
        mine.push_back(std::chrono::duration<double, std::milli>(clock::now() - start).count());
        in_flight.erase(in_flight.begin());
        ++done;
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
      for (std::size_t i = 0; !stop; ++i) {
        if (a.duration > 0) {
          // Whole steps of requests each (at least one step), until the time is up: a client
          // stopping part-way through a step would leave it to run padded after the input timeout,
          // a whole step's work charged to a few requests.
          if (i > 0 && ((i % window == 0 && std::chrono::duration<double>(clock::now() - t0).count() >= a.duration) ||
                        done.load() >= max_timed_runs))
            break;
        } else if (i >= share) {
          break;
        }
        if (in_flight.size() >= window) finish_one();
        in_flight.emplace_back(clock::now(), runner.execute_async(inputs));
      }
      while (!in_flight.empty()) finish_one();
      std::lock_guard l(lock);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    } catch (...) {
      stop = true;
      std::lock_guard l(lock);
      if (!failure) failure = std::current_exception();
    }
    ++finished;
  };
  t0 = clock::now();
  std::vector<std::thread> threads;
  for (std::size_t c = 0; c < clients; ++c) {
    const std::size_t share = a.iterations ? a.iterations / clients + (c < a.iterations % clients ? 1 : 0) : 1;
    threads.emplace_back(client, share);
  }
  if (timed) {
    run_perf::progress_line progress(show_progress(a), a.iterations, a.duration);
    while (finished < clients) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      progress.tick(done, std::chrono::duration<double>(clock::now() - t0).count());
    }
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
  if (failure) std::rethrow_exception(failure);
  if (timed) {
    run_perf::report_latency(latencies, json, text);
    report_throughput(latencies.size(), seconds, run_perf::batch_size(g), json, text);
    run_perf::appendf(text, " clients=%zu steps=%llu requests_per_step=%llu\n", clients,
                static_cast<unsigned long long>(runner.steps_run()),
                static_cast<unsigned long long>(runner.requests_per_step()));
    json["clients"] = clients;
    json["steps"] = runner.steps_run();
    json["requests_per_step"] = runner.requests_per_step();
  }
  if (!a.trace.empty()) {
    std::ofstream out(a.trace, std::ios::trunc);
    if (out) ipu::write_chrome_trace(out, runner.last_timeline(), g);
    if (!out)
      throw ipu::error(ipu::error_category::io, "cannot write the trace", "--trace '" + a.trace + "'",
                       "give a writable file path");
    run_perf::appendf(text, "wrote trace %s\n", a.trace.c_str());
    json["trace"] = a.trace;
  }
  std::vector<ipu::host_tensor> outputs;
  for (auto t : g.outputs()) outputs.push_back(first->at(g.tensor(t).name));
  return outputs;
}

/// The values of the tensor inputs given by --input and --data, by name, for a model whose
/// structure depends on some of them; `declared` receives the model's declared inputs, in order
/// (those without an initializer), which --data's input_<i>.pb files then follow.
inline std::map<std::string, ipu::host_tensor, std::less<>> given_input_values(const run_args& a,
                                                                              std::vector<std::string>& declared) {
  namespace fs = std::filesystem;
  ::onnx::ModelProto model;
  ipu::onnx::read_proto_file(model, a.model, "ONNX model");
  std::set<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  std::set<std::string> tensors;
  for (const auto& in : model.graph().input())
    if (!initializers.count(in.name())) {
      declared.push_back(in.name());
      if (in.type().has_tensor_type()) tensors.insert(in.name());
    }
  std::map<std::string, ipu::host_tensor, std::less<>> values;
  if (!a.data_dir.empty())
    for (std::size_t i = 0; i < declared.size(); ++i) {
      const auto p = fs::path(a.data_dir) / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) break;
      if (tensors.count(declared[i])) values.emplace(declared[i], read_input_file(p));
    }
  for (const auto& spec : a.inputs)
    if (const auto eq = spec.find('='); eq != std::string::npos && tensors.count(spec.substr(0, eq)))
      values.emplace(spec.substr(0, eq), read_input_file(spec.substr(eq + 1)));
  return values;
}

inline void run_command(const run_args& args) {
  namespace fs = std::filesystem;
  run_args a = args;  // with the options file's seed
  if (!a.options_file.empty()) {
    // A PopEF file holds its schedule and an ONNX model runs on the host: only the seed applies.
    static constexpr std::string_view applied[] = {"randomSeed("};
    ipu::options base;
    if (a.seed) base.random_seed(static_cast<std::uint64_t>(*a.seed));
    const auto f = read_options_file(a.options_file, base, applied, "ipu run");
    if (f.random_seed() && (!a.seed || static_cast<std::uint64_t>(*a.seed) != *f.random_seed())) {
      if (a.seed)
        throw ipu::error(ipu::error_category::usage, "--seed and the options file's randomSeed disagree",
                         "--options '" + a.options_file + "'", "set it in one place");
      if (*f.random_seed() > static_cast<std::uint64_t>(INT64_MAX))
        throw ipu::error(ipu::error_category::usage, "randomSeed is above 2^63 - 1", "--options '" + a.options_file + "'",
                         "use a smaller seed");
      a.seed = static_cast<std::int64_t>(*f.random_seed());
    }
  }
  auto options = limited_import_options();
  options.input_shapes = parse_input_shapes(a.input_shapes);
  load_custom_op_libraries(a.custom_ops);
  const bool is_popef = fs::path(a.model).extension() == ".popef";
  if (a.clients && *a.clients == 0)
    throw ipu::error(ipu::error_category::usage, "--clients is 0", "--clients", "use at least 1 client");
  if (!is_popef && a.clients)
    throw ipu::error(ipu::error_category::usage, "--clients applies to a PopEF file, not an ONNX model",
                     "--clients", "compile the model with ipu compile and run the .popef file");
  if (!is_popef && !a.trace.empty())
    throw ipu::error(ipu::error_category::usage, "--trace applies to a PopEF file, not an ONNX model", "--trace",
                     "use --profile FILE for the host's ops of an ONNX model, or compile it and run the .popef file");
  if (is_popef && !a.profile.empty())
    throw ipu::error(ipu::error_category::usage, "--profile applies to an ONNX model run on the host, not a PopEF file",
                     "--profile", "use --trace FILE: the Model Runtime's last step, per pipeline stage");
  report rep(a.json, {fs::path(a.model)});
  if (!a.trace.empty()) refuse_overwriting_inputs(a.trace, {fs::path(a.model)}, "--trace");
  if (!a.profile.empty()) {
    refuse_overwriting_inputs(a.profile, {fs::path(a.model)}, "--profile");
    auto dir = fs::path(a.profile).parent_path();
    std::error_code ec;
    if (!fs::is_directory(dir.empty() ? fs::path(".") : dir, ec))
      throw ipu::error(ipu::error_category::io, "the directory '" + dir.string() + "' does not exist",
                       "--profile '" + a.profile + "'", "create it, or give a path in an existing directory");
  }
  if (a.warmup && !timing(a))
    throw ipu::error(ipu::error_category::usage, "--warmup applies to a timed run", "--warmup",
                     "add --iterations N or --duration S, or leave --warmup out");
  if (a.progress && !timing(a))
    throw ipu::error(ipu::error_category::usage, "--progress applies to a timed run", "--progress",
                     "add --iterations N or --duration S, or leave --progress out");
  if (a.check && a.data_dir.empty())
    throw ipu::error(ipu::error_category::usage, "--check compares with the output_<i>.pb files beside the --data inputs",
                     "--check", "add --data DIR (an ONNX test data set directory)");
  if (a.seed && a.synthetic == "zeros")
    throw ipu::error(ipu::error_category::usage, "--seed applies to random inputs, not zeros", "--seed",
                     "use --synthetic random, or leave --seed out");
  if (a.synthetic && *a.synthetic != "random" && *a.synthetic != "zeros")
    throw ipu::error(ipu::error_category::usage, "unknown --synthetic '" + *a.synthetic + "'", "--synthetic",
                     "use random or zeros");
  std::optional<ipu::popef::compiled_model> compiled;
  ipu::graph onnx_graph;
  // Inputs fixed at import because the model's structure depends on their values: their names,
  // the values given, and the model's declared inputs (which --data's files then follow).
  std::vector<std::string> fixed;
  std::map<std::string, ipu::host_tensor, std::less<>> given;
  std::vector<std::string> declared_inputs;
  nlohmann::json pass_report;
  if (is_popef) {
    // A PopEF file (ipu compile) holds the graph with its shapes fixed; weights are used in place.
    if (!a.input_shapes.empty())
      throw ipu::error(ipu::error_category::usage, "--input-shape does not apply to a PopEF file", "--input-shape",
                       "shapes are fixed when the file is compiled: pass --input-shape to ipu compile");
    if (binds_structured_inputs())
      throw ipu::error(ipu::error_category::usage, "a PopEF file's inputs were bound when it was compiled", binding_flag(),
                       "pass the flag to ipu compile");
    if (a.optimize.passes || a.optimize.no_optimize)
      throw ipu::error(ipu::error_category::usage, "a PopEF file's graph was optimised when it was compiled",
                       a.optimize.passes ? "--passes" : "--no-optimize", "give these flags to ipu compile instead");
    compiled = ipu::popef::load(a.model);
  } else {
    (void)chosen_passes(a.optimize);  // a bad list fails before the import
    ipu::graph imported;
    try {
      imported = ipu::onnx::load_model(a.model, options);
    } catch (const ipu::onnx::value_dependent_error& e) {
      // A shape or a sequence's structure depends on input values: import for the given ones.
      if (e.inputs().empty() || (a.inputs.empty() && a.data_dir.empty())) throw;
      given = given_input_values(a, declared_inputs);
      imported = ipu::onnx::load_model_given_inputs(a.model, options, given, &fixed);
    }
    onnx_graph = optimized(std::move(imported), a.optimize, &pass_report);
  }
  const ipu::graph& g = compiled ? compiled->model() : onnx_graph;
  auto is_fixed = [&](const std::string& name) { return std::find(fixed.begin(), fixed.end(), name) != fixed.end(); };

  // Bind files to input names; every graph input exactly once.
  std::map<std::string, ipu::host_tensor> bound;
  std::map<std::string, std::string> source;  // name -> where it came from, for "given twice"
  std::vector<fs::path> read_files{a.model};  // what the outputs must not replace
  auto bind = [&](const std::string& name, const std::string& file) {
    if (options.input_values.count(name))
      throw ipu::error(ipu::error_category::usage, "input '" + name + "' is fixed at import by --input-value",
                       "--input " + name + "=" + file, "give it once");
    bool known = is_fixed(name);
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
    source.emplace(name, file);
    read_files.emplace_back(file);
    if (is_fixed(name)) return;
    auto it = given.find(name);  // read already for the import
    bound.emplace(name, it != given.end() ? std::move(it->second) : read_input_file(file));
  };
  if (!a.data_dir.empty()) {
    if (!fs::is_directory(a.data_dir))
      throw ipu::error(ipu::error_category::io, "not a directory", "--data '" + a.data_dir + "'", "give a test data set directory");
    for (std::size_t i = 0;; ++i) {
      const auto p = fs::path(a.data_dir) / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) break;
      // With inputs fixed at import, the files follow the model's declared inputs.
      const std::size_t count = fixed.empty() ? g.inputs().size() : declared_inputs.size();
      if (i >= count)
        throw ipu::error(ipu::error_category::usage,
                    "'" + p.string() + "' has no graph input to bind to: the model has " + std::to_string(count) + " inputs",
                    "--data '" + a.data_dir + "'", "use the data set that belongs to this model");
      bind(fixed.empty() ? g.tensor(g.inputs()[i]).name : declared_inputs[i], p.string());
    }
  }
  for (const auto& spec : a.inputs) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      throw ipu::error(ipu::error_category::usage, "'" + spec + "' is not NAME=FILE", "--input", "write --input x=x.npy");
    bind(spec.substr(0, eq), spec.substr(eq + 1));
  }

  // Invented inputs: all of them when none is given, else with --synthetic the ones not given.
  nlohmann::json json = {{"model", a.model}};
  if (!compiled) json["passes"] = pass_report;
  json["inputs"] = nlohmann::json::array();
  std::string text;  // stdout, printed once everything has succeeded
  for (const auto& name : fixed) {
    json["inputs"].push_back({{"name", name}, {"type", ipu::to_string(given.at(name).info())}, {"file", source.at(name)},
                              {"fixed_at_import", true}});
    run_perf::appendf(text, "input %s fixed at import to the value in %s (it decides a shape or a sequence's structure)\n",
                      name.c_str(), source.at(name).c_str());
  }
  const bool invent = bound.empty() || a.synthetic;
  const std::string mode = a.synthetic.value_or("random");
  std::mt19937_64 rng(static_cast<std::uint64_t>(a.seed.value_or(1)));
  std::size_t invented = 0;
  for (auto t : g.inputs()) {
    const auto& node = g.tensor(t);
    nlohmann::json in = {{"name", node.name}, {"type", ipu::to_string(node.info)}};
    if (auto it = source.find(node.name); it != source.end()) {
      in["file"] = it->second;
    } else if (invent) {
      bound.emplace(node.name, run_perf::synthetic_tensor(node.info, mode, rng));
      in["synthetic"] = mode;
      if (mode == "random") in["seed"] = a.seed.value_or(1);
      run_perf::appendf(text, "synthetic input %s %s %s", node.name.c_str(), ipu::to_string(node.info).c_str(), mode.c_str());
      if (mode == "random") run_perf::appendf(text, " seed=%llu", static_cast<unsigned long long>(a.seed.value_or(1)));
      text += '\n';
      ++invented;
    }
    json["inputs"].push_back(std::move(in));
  }
  if ((a.synthetic || a.seed) && invented == 0)
    throw ipu::error(ipu::error_category::usage, "every input is given, so there is nothing to invent",
                     a.synthetic ? "--synthetic" : "--seed (or randomSeed)", "leave it out, or give fewer inputs");
  if (a.check && invented > 0)
    throw ipu::error(ipu::error_category::usage, "--check needs the data set's inputs, but " + std::to_string(invented) +
                                                     " input(s) are invented",
                     "--check", "give every input in --data DIR, or leave --check out");

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

  // The ONNX graph moves into the device below: what is needed of it afterwards, kept here.
  std::vector<std::string> output_names;
  for (auto t : g.outputs()) output_names.push_back(g.tensor(t).name);
  const std::int64_t batch = run_perf::batch_size(g);

  std::vector<ipu::host_tensor> outputs;
  if (compiled) {
    outputs = run_popef(*compiled, bound, a, json, text);
  } else {
    // --profile: the observer records while `recording` is set (the measured runs), nothing else.
    host_profile profile;
    ipu::cpu::device_options dopts{.threads = a.threads};
    if (!a.profile.empty())
      dopts.on_op = [&profile](ipu::op_id op, std::chrono::steady_clock::time_point b, std::chrono::steady_clock::time_point e) {
        profile.op(op, b, e);
      };
    ipu::cpu::device dev(std::move(onnx_graph), dopts);
    const std::size_t ops_per_run = dev.plan().steps.size();
    ipu::cpu::named_tensors inputs;
    for (const auto& [name, t] : bound) inputs.emplace_back(name, t.view());
    auto measured_run = [&] {  // one run, profiled while --profile has room
      const bool rec = !a.profile.empty() && profile.room_for(ops_per_run);
      if (rec) profile.begin_run();
      auto out = dev.run(inputs);
      if (rec) profile.end_run();
      return out;
    };
    if (!timing(a)) {
      outputs = measured_run();
    } else {
      for (std::size_t i = 0; i < a.warmup.value_or(1); ++i) outputs = dev.run(inputs);
      using clock = std::chrono::steady_clock;
      std::vector<double> ms;
      ms.reserve(a.duration > 0 ? 1024 : std::min<std::size_t>(a.iterations, 1 << 16));
      run_perf::progress_line progress(show_progress(a), a.iterations, a.duration);
      const auto t0 = clock::now();
      for (;;) {
        const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
        progress.tick(ms.size(), elapsed);
        if (a.duration > 0 ? !ms.empty() && (elapsed >= a.duration || ms.size() >= max_timed_runs) : ms.size() >= a.iterations)
          break;
        const auto start = clock::now();
        outputs = measured_run();
        ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - start).count());
      }
      const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
      run_perf::report_latency(ms, json, text);
      report_throughput(ms.size(), seconds, batch, json, text);
      text += '\n';
    }
    if (!a.profile.empty()) {
      std::ostringstream out;
      profile.write(out, dev.model());
      const auto trace = out.str();
      ipu::write_file_atomically(a.profile, std::as_bytes(std::span(trace.data(), trace.size())), "profile");
      const std::size_t runs = timing(a) ? json["iterations"].get<std::size_t>() : 1;
      run_perf::appendf(text, "wrote profile %s: %zu of %zu measured runs, %zu ops each\n", a.profile.c_str(),
                        profile.runs(), runs, ops_per_run);
      json["profile"] = {{"file", a.profile}, {"runs", profile.runs()}, {"measured_runs", runs}, {"ops_per_run", ops_per_run}};
    }
  }
  json["warmup"] = timing(a) ? a.warmup.value_or(1) : 0;

  // --check: every output against its reference, all differences in one error, before writing.
  if (a.check) {
    std::string mismatches;
    json["check"] = {{"rtol", a.rtol}, {"atol", a.atol}, {"outputs", nlohmann::json::array()}};
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const auto& name = output_names[i];
      const auto ref = run_perf::reference_file(a.data_dir, i);
      if (!ref)
        throw ipu::error(ipu::error_category::usage,
                         "no reference for output " + std::to_string(i) + " '" + name + "' (output_" + std::to_string(i) +
                             ".pb or .npy)",
                         "--data '" + a.data_dir + "'", "add the reference file, or leave --check out");
      const auto why = run_perf::compare(outputs[i], read_input_file(*ref), a.rtol, a.atol);
      if (!why.empty()) mismatches += (mismatches.empty() ? "" : "; ") + ("'" + name + "' vs " + ref->filename().string() + ": " + why);
      run_perf::appendf(text, "check %s %s against %s\n", name.c_str(), why.empty() ? "ok" : "MISMATCH",
                        ref->string().c_str());
      json["check"]["outputs"].push_back({{"name", name}, {"reference", ref->string()}, {"ok", why.empty()}});
    }
    if (!mismatches.empty())
      throw ipu::error(ipu::error_category::runtime, "outputs differ from the references: " + mismatches,
                       "--check (rtol " + std::to_string(a.rtol) + ", atol " + std::to_string(a.atol) + ")",
                       "a real difference, or loosen --rtol / --atol");
  }

  std::error_code ec;
  fs::create_directories(a.output_dir, ec);
  if (!fs::is_directory(a.output_dir))
    throw ipu::error(ipu::error_category::io, "cannot create the output directory", "--output-dir '" + a.output_dir + "'",
                "give a writable directory");
  json["outputs"] = nlohmann::json::array();
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    ipu::io::write_npy(out_paths[i], outputs[i]);
    run_perf::appendf(text, "wrote %s %s\n", out_paths[i].string().c_str(), ipu::to_string(outputs[i].info()).c_str());
    json["outputs"].push_back({{"name", output_names[i]},
                               {"file", out_paths[i].string()},
                               {"type", ipu::to_string(outputs[i].info())}});
  }
  rep.json = std::move(json);
  rep.text(text);
  rep.finish();
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
  auto* iterations = cmd->add_option("--iterations", args->iterations, "time N runs after the warm-up")
                         ->check(CLI::Range(std::size_t{1}, max_timed_runs));
  cmd->add_option("--duration", args->duration, "time runs for S seconds after the warm-up (at least one run, at most 10^7)")
      ->check(CLI::Validator(
          [](std::string& v) {
            double d = 0;
            return CLI::detail::lexical_cast(v, d) && d > 0 && d < 1e9 ? std::string() : "--duration " + v + " is not a positive number of seconds";
          },
          "SECONDS > 0"))
      ->excludes(iterations);
  cmd->add_option("--warmup", args->warmup, "untimed runs before timing (default 1)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 31));
  cmd->add_option("--synthetic", args->synthetic,
                  "random or zeros: invent the inputs not given (default: random, when no input is given)")
      ->check(CLI::IsMember({"random", "zeros"}));
  cmd->add_option("--seed", args->seed, "seed of the random inputs (default 1)")->check(CLI::NonNegativeNumber);
  add_json_option(*cmd, args->json);
  cmd->add_option("--profile", args->profile,
                  "ONNX: write the measured runs' host ops (a span per op, per run) as a Chrome trace to FILE; a PopEF "
                  "file has --trace");
  cmd->add_flag("--progress", args->progress, "a progress line on stderr every second of a long timed run (default: when stderr is a terminal)");
  cmd->add_flag("--check", args->check, "compare the outputs with DIR/output_<i>.pb or .npy beside the --data inputs");
  auto* rtol = cmd->add_option("--rtol", args->rtol, "--check: relative tolerance")->check(CLI::Range(0.0, 1e6))->capture_default_str();
  auto* atol = cmd->add_option("--atol", args->atol, "--check: absolute tolerance")->check(CLI::Range(0.0, 1e30))->capture_default_str();
  cmd->add_option("--clients", args->clients,
                  "PopEF: N client threads stream the requests (each its share of --iterations; default 1)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1024}));  // 0 gets its own message below
  cmd->add_option("--trace", args->trace,
                  "PopEF: write the runtime's last step as a Chrome trace to FILE (its schedule per pipeline stage; an "
                  "ONNX model has --profile)");
  cmd->add_option("--input-shape", args->input_shapes, "fix an input's dynamic dimensions: NAME=D0,D1,... (repeatable)");
  cmd->add_option("--options", args->options_file,
                  "a PopTorch options file: randomSeed seeds the invented inputs (other settings are refused)");
  add_custom_op_option(*cmd, args->custom_ops);
  add_optimize_options(*cmd, args->optimize);
  cmd->callback([args, rtol, atol] {
    if ((rtol->count() > 0 || atol->count() > 0) && !args->check)
      throw ipu::error(ipu::error_category::usage, "--rtol and --atol apply to --check", rtol->count() ? "--rtol" : "--atol",
                       "add --check, or leave them out");
    run_command(*args);
  });  // errors reach main, which prints one line
}

}  // namespace ipu_cli
