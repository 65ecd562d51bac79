#pragma once
// `ipu compile MODEL.onnx -o OUT.popef [--device mk2] [--ipus N] [--strategy S] [--batch N]
//  [--batches-per-step N] [--precision fp16|fp32|fp8_weight|fp8] [--input-shape NAME=D0,D1,...]... [--phases N]
//  [--replicas N] [--name NAME] [--no-compress] [--cache-dir DIR] [--custom-op LIB.so]...
//  [--passes LIST | --no-optimize]`
//
// The model goes through the graph optimisation stage before it is planned (ipu/passes/optimize.hpp:
// every pass unless `--passes LIST` names some or `--no-optimize` none); the PopEF file holds the
// optimised graph, and the report lists what each pass did.
// Compiles an ONNX model for a device without attaching to it and writes a PopEF file (PopRT's
// `--export_popef`). Like PopRT it fixes dynamic dimensions (--input-shape; --batch sets the leading
// dimension of every other input, as for ipu plan: common_options.hpp) and converts precision
// (--precision fp16 stores F16 weights; fp8_weight also stores the Conv / MatMul / Gemm weights as
// F8143 with a power-of-two scale each, fp8 also rounds those ops' activations through F8143:
// ipu/compile/precision.hpp; the model's inputs and outputs keep their types). The
// automatic planner places a model without annotations over the IPUs: pipelined (the default, as
// for ipu plan) / sharded over every IPU of a replica, phased strategies into at least --phases
// phases (more when a phase would not fit an IPU). Prints what was written and the cost model's
// prediction.
//
// --cache-dir DIR (else IPU_CACHE_DIR / POPTORCH_CACHE_DIR) compiles through the executable cache
// (compile/cache.hpp): a model compiled before with the same options is loaded from DIR instead, and
// one stderr line says whether the compile was a hit or stored a new entry. OUT is the same file
// either way, and the same as without a cache.
#include <CLI/CLI.hpp>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common_options.hpp"
#include "input_shapes.hpp"
#include "outputs.hpp"
#include "json_output.hpp"
#include "optimize_options.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/proto.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/sched/auto_planner.hpp"
#include "ipu/compile/cache.hpp"
#include "ipu/compile/compile.hpp"

namespace ipu_cli {

struct compile_args {
  std::string model;
  std::string output;  // empty: <model stem>.popef in the current directory
  std::string device = "mk2";
  std::uint32_t ipus = 1;
  std::string strategy = default_strategy;
  std::int64_t batch = 0;  // 0: as the model or --input-shape says
  std::int64_t batches_per_step = default_batches_per_step;
  std::string precision;  // "", "fp16", "fp32", "fp8_weight", "fp8"
  std::vector<std::string> input_shapes;
  std::uint32_t phases = 4;
  std::int64_t replicas = 1;
  std::string name;
  bool no_compress = false;
  std::optional<std::string> cache_dir;  // set, even empty, when --cache-dir is given
  std::string options_file;
  std::vector<std::string> custom_ops;  // --custom-op libraries, loaded before the model
  optimize_args optimize;
  bool batches_per_step_given = false, replicas_given = false;
  json_option json;
};


inline void run_compile(const compile_args& a) {
  namespace fs = std::filesystem;
  const fs::path path = a.model;
  refuse_overwriting_inputs(a.output.empty() ? fs::path(path.stem().string() + ".popef") : fs::path(a.output), {path}, "-o");
  report rep(a.json, {path});
  const auto mode = parse_strategy(a.strategy);
  if (a.cache_dir) {  // checked before the slow part; the cache checks it again when compiling
    if (a.cache_dir->empty())
      throw ipu::error(ipu::error_category::usage, "--cache-dir is empty", "--cache-dir",
                       "give the executable cache directory, or leave the option out");
    (void)ipu::popef::executable_cache(*a.cache_dir, "--cache-dir");
  }
  std::int64_t batches_per_step = a.batches_per_step, replicas = a.replicas;
  bool progress_bar = true;  // PopTorch's default: drawn when stderr is a terminal
  if (!a.options_file.empty()) {
    static constexpr std::string_view applied[] = {"deviceIterations(", "replicationFactor(", "showCompilationProgressBar("};
    ipu::options base;
    base.device_iterations(batches_per_step).replication_factor(replicas);
    const auto f = read_options_file(a.options_file, base, applied, "ipu compile");
    take_from_file(batches_per_step, f.device_iterations(), a.batches_per_step_given, "--batches-per-step",
                   "deviceIterations", a.options_file);
    take_from_file(replicas, f.replication_factor(), a.replicas_given, "--replicas", "replicationFactor", a.options_file);
    progress_bar = f.show_compilation_progress_bar();
  }
  if (batches_per_step < 1)
    throw ipu::error(ipu::error_category::usage, "--batches-per-step must be at least 1", "--batches-per-step",
                     "give the device iterations per step, e.g. 8");
  (void)chosen_passes(a.optimize);  // a bad list fails before the import
  load_custom_op_libraries(a.custom_ops);
  nlohmann::json pass_report;
  ipu::graph g = optimized(load_model_with_batch(path, a.batch, parse_input_shapes(a.input_shapes)), a.optimize, &pass_report);

  ipu::options opts;
  opts.device_iterations(batches_per_step).replication_factor(replicas).show_compilation_progress_bar(progress_bar);
  if (a.cache_dir) opts.enable_executable_caching(*a.cache_dir);
  auto float8 = ipu::popef::float8_mode::none;
  if (a.precision == "fp16") opts.precision(ipu::data_type::F16);
  else if (a.precision == "fp32") opts.precision(ipu::data_type::F32);
  else if (a.precision == "fp8_weight" || a.precision == "fp8") {
    opts.precision(ipu::data_type::F16);  // what is not a matrix product runs in F16
    float8 = a.precision == "fp8" ? ipu::popef::float8_mode::weights_and_activations : ipu::popef::float8_mode::weights;
  } else if (!a.precision.empty())
    throw ipu::error(ipu::error_category::usage, "unknown precision '" + a.precision + "'", "--precision",
                     "use fp32, fp16, fp8_weight (F8143 weights, F16 compute) or fp8 (F8143 weights and activations)");
  const auto device = ipu::device_from_name(a.device, a.ipus);

  ipu::popef::compile_options co;
  co.name = a.name;
  co.compress = !a.no_compress;
  co.float8 = float8;
  if (mode == ipu::execution_mode::serial_phased || mode == ipu::execution_mode::parallel_phased) {
    // Phased strategies name their phases: the automatic planner annotates an unannotated model
    // with phases (at least --phases, more when one would not fit) and the plan follows them.
    if (!ipu::has_placement_annotations(g)) {
      if (a.phases < 2)
        throw ipu::error(ipu::error_category::usage, "--phases must be at least 2", "--phases", "e.g. --phases 4");
      if (device.kind != ipu::device_kind::ipu)
        throw ipu::error(ipu::error_category::usage, "cannot split a model into phases for the host device",
                         "--device " + a.device, "the automatic planner needs an IPU's figures: use mk1, mk2 or bow");
      const auto per_replica = static_cast<std::uint32_t>(std::max<std::int64_t>(1, a.ipus / std::max<std::int64_t>(1, replicas)));
      ipu::auto_plan_options ao;
      ao.min_phases = a.phases;
      g = ipu::propose_phases(g, ipu::make_device_description(device.arch, per_replica), per_replica,
                              mode == ipu::execution_mode::parallel_phased, ipu::plan_options_from(opts, false), ao)
              .annotated;
    }
    co.from_annotations = mode;  // the ops' execution-phase annotations say the rest (PopART style)
  } else {
    opts.execution_strategy(mode == ipu::execution_mode::pipelined ? ipu::strategy_settings::pipelined()
                                                                   : ipu::strategy_settings::sharded());
  }

  const fs::path out = a.output.empty() ? fs::path(path.stem().string() + ".popef") : fs::path(a.output);
  const auto r = ipu::popef::compile_cached(g, opts, device, co);
  if (r.hit) std::fprintf(stderr, "ipu: executable cache hit: %s\n", r.file.string().c_str());
  else if (r.stored) std::fprintf(stderr, "ipu: executable cache miss: stored %s\n", r.file.string().c_str());
  const auto& m = r.model;
  ipu::popef::export_model(m, out, co.compress);
  const auto& p = m.plan;
  rep.printf("wrote %s (%ju bytes): executable '%s'\n", out.string().c_str(),
              static_cast<std::uintmax_t>(fs::file_size(out)), m.name.c_str());
  rep.printf("plan: %s on %s, %zu stages on %u IPUs x %u replicas, %ju batches per step of %ju samples\n",
              p.strategy.c_str(), ipu::to_string(p.device).c_str(), p.stages.size(), p.ipus_per_replica,
              p.replication_factor, static_cast<std::uintmax_t>(p.batches_per_step),
              static_cast<std::uintmax_t>(p.micro_batch_size));
  if (p.device.kind == ipu::device_kind::ipu)
    rep.printf("predicted: %.1f samples/s, %.3f ms per step, latency %.3f ms\n", p.predicted.samples_per_second,
               p.predicted.seconds_per_step * 1e3, p.predicted.latency_seconds * 1e3);
  auto& j = rep.json;
  j["passes"] = pass_report;
  j["output"] = out.string();
  j["bytes"] = static_cast<std::uintmax_t>(fs::file_size(out));
  j["executable"] = m.name;
  j["plan"] = {{"strategy", p.strategy},
               {"device", ipu::to_string(p.device)},
               {"stages", p.stages.size()},
               {"ipus_per_replica", p.ipus_per_replica},
               {"replicas", p.replication_factor},
               {"batches_per_step", p.batches_per_step},
               {"micro_batch", p.micro_batch_size}};
  if (p.device.kind == ipu::device_kind::ipu)
    j["predicted"] = {{"samples_per_second", p.predicted.samples_per_second},
                      {"seconds_per_step", p.predicted.seconds_per_step},
                      {"latency_seconds", p.predicted.latency_seconds}};
  if (a.cache_dir || r.hit || r.stored) j["cache"] = {{"hit", r.hit}, {"stored", r.stored}, {"file", r.file.string()}};
  rep.finish();
}

/// Adds the `compile` subcommand to the tool.
inline void add_compile_command(CLI::App& app) {
  auto a = std::make_shared<compile_args>();
  auto* cmd = app.add_subcommand("compile", "compile an ONNX model for a device (no device needed) into a PopEF file");
  cmd->add_option("model", a->model, "the ONNX model")->required();
  cmd->add_option("-o,--output", a->output, "the PopEF file to write (default: <model name>.popef)");
  cmd->add_option("--device", a->device, "mk1, mk2, bow or cpu")->capture_default_str();
  cmd->add_option("--ipus", a->ipus, "IPUs of the device (a power of two)")->check(CLI::Range(1u, 1024u))->capture_default_str();
  cmd->add_option("--strategy", a->strategy, "sharded, pipelined, serial-phased or parallel-phased")->capture_default_str();
  cmd->add_option("--batch", a->batch, "samples per micro-batch: the leading dimension of every graph input --input-shape does not name")->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 31));
  auto* bps = cmd->add_option("--batches-per-step,--device-iterations", a->batches_per_step, "micro-batches per step (device iterations)")->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 31))->capture_default_str();
  cmd->add_option("--precision", a->precision, "fp32, fp16, fp8_weight or fp8: convert the model's float tensors (fp8: Conv / MatMul / Gemm in 8-bit floats)");
  cmd->add_option("--input-shape", a->input_shapes, "fix an input's dynamic dimensions: NAME=D0,D1,... (repeatable)");
  add_custom_op_option(*cmd, a->custom_ops);
  cmd->add_option("--phases", a->phases, "phased strategies: the fewest phases to split an unannotated model into (more when one would not fit)")->check(CLI::Range(2u, 1u << 16))->capture_default_str();
  auto* replicas = cmd->add_option("--replicas", a->replicas, "replication factor")->check(CLI::Range(std::int64_t{1}, std::int64_t{1024}))->capture_default_str();
  cmd->add_option("--name", a->name, "the executable's name (default: the graph's)");
  cmd->add_flag("--no-compress", a->no_compress, "store the executable uncompressed");
  cmd->add_option("--cache-dir", a->cache_dir,
                  "executable cache directory: a compile done before is loaded from it (default: IPU_CACHE_DIR, "
                  "else POPTORCH_CACHE_DIR)");
  cmd->add_option("--options", a->options_file,
                  "a PopTorch options file: deviceIterations and replicationFactor (other settings are refused)");
  add_optimize_options(*cmd, a->optimize);
  add_json_option(*cmd, a->json);
  cmd->callback([a, bps, replicas] {
    a->batches_per_step_given = bps->count() > 0;
    a->replicas_given = replicas->count() > 0;
    run_compile(*a);
  });  // errors reach main, which prints one line
}

}  // namespace ipu_cli
