#pragma once
// Every built-in execution strategy, and planning with one chosen at run time: PopTorch's
// setExecutionStrategy and Options as data (ipu::strategy_settings, ipu::options) turned into a
// plan by the strategy type they name.
//
//   ipu::options opts;
//   opts.replication_factor(2).execution_strategy(ipu::strategy_settings::sharded());
//   auto e = ipu::plan_with(opts, model, ipu::device_from_name("mk2", 4));
#include <algorithm>
#include <cstdint>

#include "ipu/device/device_model.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/sched/auto_planner.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/sched/execution_strategy.hpp"
#include "ipu/sched/phased_execution.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/replicated_execution.hpp"
#include "ipu/sched/sharded_execution.hpp"
#include "ipu/sched/training_plan.hpp"

namespace ipu {

/// Plans `g` on `d` with the strategy `s` describes.
constexpr executable plan_with(const strategy_settings& s, const graph& g, const device_description& d,
                               const plan_options& o = {}) {
  switch (s.mode) {
    case execution_mode::sharded: return sharded_execution{s.stages, s.auto_stage}.plan(g, d, o);
    case execution_mode::pipelined: return pipelined_execution{s.stages, s.auto_stage}.plan(g, d, o);
    case execution_mode::serial_phased: return serial_phased_execution{s.phases, s.tensors_liveness}.plan(g, d, o);
    case execution_mode::parallel_phased: return parallel_phased_execution{s.phases, s.tensors_liveness}.plan(g, d, o);
  }
  throw error(error_category::internal, "unknown execution mode", "plan_with");
}

/// The plan options PopTorch's options imply for a training (or inference) model. The forward plan
/// does not depend on autoRecomputation: a training step's prediction takes it from
/// training_plan_options_from (options::validate refuses it for inference).
inline plan_options plan_options_from(const options& opts, bool training) {
  opts.validate(training);
  plan_options o;
  o.batches_per_step = static_cast<std::uint64_t>(opts.device_iterations());
  o.gradient_accumulation = training ? static_cast<std::uint64_t>(opts.gradient_accumulation()) : 1;
  o.replication_factor = static_cast<std::uint32_t>(opts.replication_factor());
  o.input_group_size = static_cast<std::uint32_t>(opts.input_group_size());
  o.is_inference = !training;
  // One figure for every IPU: the tightest the options give, so no IPU is planned beyond its own.
  double amp = opts.available_memory_proportion_for(-1);
  for (const auto& [ipu, v] : opts.per_ipu_available_memory_proportion()) amp = std::min(amp, v);
  o.available_memory_proportion = amp;
  o.auto_round_num_ipus = opts.auto_round_num_ipus();
  o.precision = opts.precision();
  o.partials_type = opts.partials_type();
  return o;
}

/// What predict_training takes from PopTorch's options besides `plan` (made by
/// plan_options_from(opts, true), which must outlive the result): the replicas and
/// autoRecomputation. A recomputation asked of a step that is not pipelined is refused (PopART
/// recomputes only in a pipeline's backward stages).
inline training_plan_options training_plan_options_from(const options& opts, const plan_options& plan) {
  const auto r = opts.auto_recomputation();
  if (r != recomputation::none && opts.execution_strategy().mode != execution_mode::pipelined)
    throw error(error_category::usage,
                "autoRecomputation " + std::string(to_string(r)) + " asked of a step that is not pipelined",
                "training_plan_options_from", "use PipelinedExecution, or leave autoRecomputation at None");
  training_plan_options t{&plan, static_cast<std::uint32_t>(opts.replication_factor())};
  t.recompute = r;
  return t;
}

/// Plans `g` on `d` as PopTorch's options say (strategy, replication, device iterations...).
inline executable plan_with(const options& opts, const graph& g, const device_description& d, bool training = false) {
  return plan_with(opts.execution_strategy(), g, d, plan_options_from(opts, training));
}

}  // namespace ipu
