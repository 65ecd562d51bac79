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
// Steps: validate the options; convert precision when the options ask (precision.hpp); place a
// model without annotations over the IPUs when the strategy needs more than one (the automatic
// planner, sched/auto_planner.hpp); plan it with the options' strategy; describe the anchors in
// metadata. The graph is planned as it is: the file stores its tensors and ops by the same ids
// (graph_codec.hpp), so a loaded plan and the compiled one agree without renumbering.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/log.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/compile/cache.hpp"
#include "ipu/compile/compile_options.hpp"
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
  if (o.random_seed()) m.engine_options.emplace("ipu.random_seed", std::to_string(*o.random_seed()));
  m.device_options = {{"device", std::string(e.device.arch.name)},
                      {"kind", std::string(to_string(e.device.kind))},
                      {"numIpus", std::to_string(e.device.num_ipus)}};
  return m;
}

}  // namespace detail

/// Plans `g` for `device` as the options say, without attaching to a device and without looking
/// in the executable cache. Throws what validation and planning throw (options, schedule, memory
/// errors).
inline compiled_model compile_uncached(const graph& g, const ipu::options& options, const device_description& device,
                                       const compile_options& co = {}) {
  options.validate(false);
  const graph* source = &g;
  graph converted;
  if (options.precision()) {
    converted = convert_precision(g, *options.precision());
    source = &converted;
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
      converted = propose_stages(*source, make_device_description(device.arch, parts), parts,
                                 plan_options_from(options, false))
                      .annotated;
      source = &converted;
    }
  }
  compiled_model out;
  out.name = !co.name.empty() ? co.name : !g.name().empty() ? g.name() : "model";
  out.plan = detail::plan_with(*source, options, device, co.from_annotations);
  out.metadata = detail::make_metadata(out.name, out.plan, options);
  return out;
}

/// compile_uncached() served from the executable cache when the options, else IPU_CACHE_DIR or
/// POPTORCH_CACHE_DIR, name one; r.hit says it was. The model returned is the same either way (the
/// entry's own `ipu.cache_key` is not part of it), so exporting it gives the same file. Throws
/// what compiling throws, and ipu::error (usage) for a cache path that is empty or not a directory;
/// a damaged entry or a cache that cannot be written is only logged.
inline cache_result compile_cached(const graph& g, const ipu::options& options, const device_description& device,
                                   const compile_options& co = {}) {
  const auto dir = executable_cache::directory_for(options);
  if (!dir) return {compile_uncached(g, options, device, co), false, false, {}};
  const executable_cache cache(*dir, executable_cache::source_of(options));
  const auto key = executable_cache::key(g, options, device, co);
  cache_result r;
  r.file = cache.entry(key);
  if (auto m = cache.find(key)) {
    r.model = std::move(*m);
    r.hit = true;
    log::info("popef: executable cache hit: ", r.file.string());
  } else {
    r.model = compile_uncached(g, options, device, co);
    r.model.metadata.engine_options["ipu.cache_key"] = key;
    r.stored = cache.store(key, r.model, co.compress);
    if (r.stored) log::info("popef: executable cache miss: stored ", r.file.string());
  }
  r.model.metadata.engine_options.erase("ipu.cache_key");
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
