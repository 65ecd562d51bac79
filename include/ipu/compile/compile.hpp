#pragma once
// Compiling a graph for a device without attaching to it, and exporting the result as PopEF
// (PopART's compileAndExport, PopTorch's compileAndExport / precompilation).
//
//   auto opts = ipu::options().device_iterations(16).execution_strategy(ipu::strategy_settings::pipelined());
//   auto m = ipu::popef::compile_and_export(graph, opts, ipu::device_from_name("mk2", 4), "model.popef");
//
// compile() goes through the executable cache when the options or the environment name one
// (cache.hpp): a compile done before with the same model and settings is loaded instead of redone,
// and gives the same executable. compile_uncached() never looks.
//
// Steps: validate the options; convert precision when the options ask, and to 8-bit floats when
// the compile options do (precision.hpp); place a
// model without annotations over the IPUs when the strategy needs more than one (the automatic
// planner, sched/auto_planner.hpp); plan it with the options' strategy; describe the anchors in
// metadata. The graph is planned as it is: the file stores its tensors and ops by the same ids
// (graph_codec.hpp), so a loaded plan and the compiled one agree without renumbering.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>

#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/log.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/compile/cache.hpp"
#include "ipu/compile/compile_options.hpp"
#include "ipu/compile/engine_options.hpp"
#include "ipu/compile/progress.hpp"
#include "ipu/exec/plan_report.hpp"
#include "ipu/file.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/compile/precision.hpp"
#include "ipu/popef/writer.hpp"
#include "ipu/sched/auto_planner.hpp"
#include "ipu/sched/execution_strategy.hpp"
#include "ipu/compile/strategies.hpp"

namespace ipu::popef {

namespace detail {

/// PopART's names of its program slots (the plan numbers programs as PopART does).
inline std::string program_name(std::size_t i, const std::string& own) {
  static constexpr const char* names[] = {"WeightsFromHost",  "OptimizerFromHost", "RandomSeedFromHost",
                                          "RandomSeedToHost", "RngStateFromHost",  "Program",
                                          "RngStateToHost",   "WeightsToHost",     "CycleCountTensorToHost"};
  if (i < std::size(names)) return names[i];
  return own.empty() ? "Program" + std::to_string(i) : own;
}

/// Plans with the options' strategy, or with the strategy the graph's annotations imply.
inline executable plan_with(const graph& g, const ipu::options& o, const device_description& d,
                            std::optional<execution_mode> from_annotations) {
  strategy_settings s = o.execution_strategy();
  if (from_annotations) {
    s = strategy_settings{};
    s.mode = *from_annotations;
  }
  return ipu::plan_with(s, g, d, ipu::plan_options_from(o, false));
}

/// The handle of the plan's host stream for `t` in `direction`, or the tensor's name.
inline std::string stream_handle(const executable& e, tensor_id t, stream_direction direction) {
  for (const auto& s : e.streams)
    if (s.tensor == t && s.direction == direction) return s.handle;
  return e.model.tensor(t).name;
}

inline metadata make_metadata(const std::string& name, const executable& e, const ipu::options& o) {
  metadata m;
  m.executable = name;
  const auto& g = e.model;
  const auto main = static_cast<std::uint32_t>(program_index::main);
  const auto load = static_cast<std::uint32_t>(program_index::weights_from_host);
  for (auto t : g.inputs())
    m.anchors.push_back({g.tensor(t).name, stream_handle(e, t, stream_direction::to_device), g.tensor(t).info, true,
                         anchor_type::input, {main}});
  for (auto t : g.outputs()) {
    if (m.find_anchor(g.tensor(t).name)) continue;  // an input returned as an output
    m.anchors.push_back({g.tensor(t).name, stream_handle(e, t, stream_direction::to_host), g.tensor(t).info, true,
                         anchor_type::output, {main}});
  }
  for (tensor_id t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).kind == tensor_kind::variable)
      m.anchors.push_back({g.tensor(t).name, stream_handle(e, t, stream_direction::to_device), g.tensor(t).info, false,
                           anchor_type::input, {load}});
  m.flow = e.flow;
  for (std::size_t i = 0; i < e.programs.size(); ++i)
    m.programs.emplace(static_cast<std::uint32_t>(i), program_name(i, e.programs[i].name));
  m.replication_factor = e.replication_factor;
  m.num_ipus = e.ipus_reserved;
  m.ipu_version = std::string(e.device.arch.ipu_version);
  m.is_pod = false;
  m.num_processes = static_cast<std::uint32_t>(o.num_processes());
  m.is_inference = e.is_inference;
  m.device_iterations = e.batches_per_step * e.gradient_accumulation;
  m.engine_options = {{"ipu.strategy", e.strategy},
                      {"ipu.version", std::string(library_version)},
                      {"ipu.options", executable_cache::without_cache(o).to_config()}};
  if (o.random_seed()) m.engine_options.emplace(std::string(popef::random_seed_option), std::to_string(*o.random_seed()));
  m.device_options = {{"device", std::string(e.device.arch.name)},
                      {"kind", std::string(to_string(e.device.kind))},
                      {"numIpus", std::to_string(e.device.num_ipus)}};
  return m;
}

/// The progress bar of one compilation: drawn only when the options ask for it.
class compile_progress_bar {
 public:
  compile_progress_bar(const ipu::options& o, const compile_options& co) {
    if (o.show_compilation_progress_bar()) sink_ = co.progress ? co.progress : terminal_progress_bar();
  }
  void operator()(std::string_view stage, unsigned percent) const {
    if (sink_) sink_(compile_progress{stage, percent});
  }

 private:
  progress_sink sink_;
};

/// Milliseconds since `t0`, for the INFO log of compile stages.
inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// What a user needs to know of a plan at INFO, and per stage at DEBUG.
inline void log_plan(const executable& e, const std::string& name, double ms) {
  log::info([&] {
    std::ostringstream os;
    const auto& p = e.predicted;
    std::uint64_t worst = 0;
    for (const auto& m : e.memory) worst = std::max(worst, m.worst_tile_bytes);
    os << "compile: planned '" << name << "' in " << ms << " ms: " << e.strategy << " over " << e.ipus_reserved << " "
       << e.device.arch.name << " IPU(s), " << e.stages.size() << " stage(s), " << e.replication_factor
       << " replica(s), " << p.micro_batches_per_step << " micro-batch(es) per step; predicted " << p.cycles_per_step
       << " cycles per step, " << p.samples_per_second << " samples/s; worst tile " << worst << " bytes";
    return os.str();
  });
  log::debug([&] {
    std::ostringstream os;
    os << "compile: stages of '" << name << "':";
    for (const auto& st : e.stages)
      os << "\n  stage " << st.id << ": IPU " << st.ipu << (st.phase >= 0 ? ", phase " + std::to_string(st.phase) : "")
         << ", " << st.ops.size() << " op(s), " << st.cycles << " cycles per micro-batch, " << st.inputs.size()
         << " input(s) in, " << st.outputs.size() << " output(s) out";
    for (const auto& m : e.memory)
      os << "\n  IPU " << m.ipu << ": " << m.total_bytes << " bytes, worst tile " << m.worst_tile << " with "
         << m.worst_tile_bytes << " bytes";
    return os.str();
  });
}

/// Writes the reports POPLAR_ENGINE_OPTIONS asks for into DIR/<executable name>/.
inline void write_engine_reports(const engine_report_options& r, const compiled_model& m) {
  if (!r.any()) return;
  const auto dir = r.directory / report_folder_name(m.name);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw error(error_category::io, "cannot create the report directory: " + ec.message(), dir.string(),
                "set POPLAR_ENGINE_OPTIONS' autoReport.directory to a writable directory");
  auto write = [&](const char* file, const std::string& text) {
    write_file_atomically(dir / file, std::as_bytes(std::span(text.data(), text.size())), "report");
    log::info("compile: wrote ", (dir / file).string());
  };
  if (r.graph_profile) write("plan.html", plan_report_html(m.plan));
  if (r.execution_profile) {
    std::ostringstream os;
    write_predicted_chrome_trace(os, m.plan);
    write("predicted_trace.json", os.str());
  }
}

}  // namespace detail

/// Plans `g` for `device` as the options say, without attaching to a device and without looking
/// in the executable cache. Throws what validation and planning throw (options, schedule, memory
/// errors).
inline compiled_model compile_uncached(const graph& g, const ipu::options& options, const device_description& device,
                                       const compile_options& co = {}) {
  const detail::compile_progress_bar bar(options, co);
  const auto t0 = std::chrono::steady_clock::now();
  bar("validating the options", 0);
  options.validate(false);
  check_no_strings(g, "an executable");
  // The compiled executable streams every output of every batch to the host; other return types
  // are a DataFlow's business (PopART's sessions), so an outputMode asking for them is refused.
  if (const auto mode = options.resolved_output_mode(false); mode != output_mode::all)
    throw error(error_category::usage,
                "outputMode(" + std::string(mode == output_mode::final ? "Final" : mode == output_mode::sum ? "Sum" : "EveryN") +
                    ") is not supported when compiling: the executable returns every output of every batch (All)",
                "compiling graph '" + g.name() + "'",
                "drop it, or run with PopART's inference session and a DataFlow with that anchor return type");
  const graph* source = &g;
  graph converted;
  if (options.precision()) {
    bar("converting the precision", 5);
    const auto t = std::chrono::steady_clock::now();
    converted = convert_precision(g, *options.precision());
    source = &converted;
    log::info("compile: converted '", g.name(), "' to ", to_string(*options.precision()), " in ", detail::ms_since(t), " ms");
  }
  if (co.float8 != float8_mode::none) {
    if (options.precision() != data_type::F16)
      throw error(error_category::usage,
                  "compiling to " + std::string(to_string(co.float8)) + " needs the options' precision F16, not " +
                      (options.precision() ? std::string(to_string(*options.precision())) : std::string("unset")),
                  "compiling graph '" + g.name() + "'",
                  "set options().precision(data_type::F16): the ops that are not matrix products run in F16");
    const auto t = std::chrono::steady_clock::now();
    converted = convert_float8(*source, co.float8);
    source = &converted;
    log::info("compile: stored the product weights of '", g.name(), "' in F8143 (", to_string(co.float8), ") in ",
              detail::ms_since(t), " ms");
  }
  const auto& strategy = options.execution_strategy();
  const bool explicit_placement = !strategy.stages.empty() || !strategy.phases.empty();
  if (co.auto_plan && !co.from_annotations && !strategy.is_phased() && !explicit_placement &&
      !has_placement_annotations(*source)) {
    const auto parts =
        std::max<std::uint32_t>(1, device.num_ipus / static_cast<std::uint32_t>(options.replication_factor()));
    if (parts > 1) {
      if (device.kind != device_kind::ipu)
        throw error(error_category::usage,
                    "cannot place a model without annotations over " + std::to_string(parts) + " host devices",
                    "compiling graph '" + g.name() + "'",
                    "the automatic planner needs an IPU's figures: compile for mk1, mk2 or bow, or annotate the model");
      // The planner sees one replica's IPUs, with the plan options the strategy will use.
      bar("placing the model over the IPUs", 10);
      const auto t = std::chrono::steady_clock::now();
      converted = propose_stages(*source, make_device_description(device.arch, parts), parts,
                                 plan_options_from(options, false))
                      .annotated;
      source = &converted;
      log::info("compile: the automatic planner placed '", g.name(), "' over ", parts, " IPUs in ", detail::ms_since(t),
                " ms (the model has no placement annotations)");
    }
  }
  compiled_model out;
  out.name = !co.name.empty() ? co.name : !g.name().empty() ? g.name() : "model";
  bar("planning", 30);
  const auto t_plan = std::chrono::steady_clock::now();
  out.plan = detail::plan_with(*source, options, device, co.from_annotations);
  detail::log_plan(out.plan, out.name, detail::ms_since(t_plan));
  bar("describing the anchors", 95);
  out.metadata = detail::make_metadata(out.name, out.plan, options);
  log::info("compile: '", out.name, "' compiled in ", detail::ms_since(t0), " ms");
  bar("done", 100);
  return out;
}

/// compile_uncached() served from the executable cache when the options, else IPU_CACHE_DIR or
/// POPTORCH_CACHE_DIR, name one; r.hit says it was. The model returned is the same either way (the
/// entry's own `ipu.cache_key` is not part of it), so exporting it gives the same file. Throws
/// what compiling throws, and ipu::error (usage) for a cache path that is empty or not a directory;
/// a damaged entry or a cache that cannot be written is only logged.
inline cache_result compile_cached(const graph& g, const ipu::options& options, const device_description& device,
                                   const compile_options& co = {}) {
  const auto reports = engine_options_from_environment();  // a bad value is refused before any work
  const auto dir = executable_cache::directory_for(options);
  if (!dir) {
    cache_result r{compile_uncached(g, options, device, co), false, false, {}};
    if (reports) detail::write_engine_reports(*reports, r.model);
    return r;
  }
  const executable_cache cache(*dir, executable_cache::source_of(options));
  const auto key = executable_cache::key(g, options, device, co);
  cache_result r;
  r.file = cache.entry(key);
  if (auto m = cache.find(key)) {
    r.model = std::move(*m);
    r.hit = true;
    log::info("popef: executable cache hit: ", r.file.string());
    detail::compile_progress_bar(options, co)("loaded from the executable cache", 100);
  } else {
    r.model = compile_uncached(g, options, device, co);
    r.model.metadata.engine_options["ipu.cache_key"] = key;
    r.stored = cache.store(key, r.model, co.compress);
    if (r.stored) log::info("popef: executable cache miss: stored ", r.file.string());
  }
  r.model.metadata.engine_options.erase("ipu.cache_key");
  if (reports) detail::write_engine_reports(*reports, r.model);
  return r;
}

/// Plans `g` for `device` as the options say, without attaching to a device: compile_cached()'s
/// model. Throws what validation and planning throw (options, schedule, memory errors).
inline compiled_model compile(const graph& g, const ipu::options& options, const device_description& device,
                              const compile_options& co = {}) {
  return compile_cached(g, options, device, co).model;
}

/// Writes a compiled model to a new PopEF file.
inline void export_model(const compiled_model& m, const std::filesystem::path& file, bool compress = true) {
  writer w(file);
  write_model(w, m, compress);
  w.close();
}

/// compile(), then export_model() to `file`.
inline compiled_model compile_and_export(const graph& g, const ipu::options& options, const device_description& device,
                                         const std::filesystem::path& file, const compile_options& co = {}) {
  auto m = compile(g, options, device, co);
  export_model(m, file, co.compress);
  return m;
}

}  // namespace ipu::popef
