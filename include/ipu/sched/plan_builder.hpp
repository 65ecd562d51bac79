#pragma once
// What every strategy does once it knows where each op runs: stages, costs, programs, streams,
// placement, memory and predictions, assembled into an executable. Strategies differ only in how
// they resolve placement (annotation_rules.hpp) and in the schedule they ask for.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/device/device_model.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/poptorch/strategy.hpp"
#include "ipu/sched/annotation_rules.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/sched/execution_strategy.hpp"
#include "ipu/sched/memory_plan.hpp"
#include "ipu/ops/op_cost.hpp"
#include "ipu/sched/predict.hpp"
#include "ipu/sched/program_builder.hpp"
#include "ipu/sched/stage_builder.hpp"

namespace ipu::detail::sched {

/// What a strategy asks the builder for.
struct plan_request {
  std::string_view strategy;
  schedule_kind schedule = schedule_kind::sequential;
  bool parallel_phases = false;
  liveness live = liveness::always_live;
};

/// Checks of the plan options every strategy shares.
constexpr void check_plan_options(const plan_options& o, std::string_view strategy) {
  const std::string where = std::string(strategy) + " plan options";
  if (o.batches_per_step == 0) fail("device iterations (batches per step) is 0", where, "use at least 1");
  if (o.gradient_accumulation == 0) fail("gradient accumulation is 0", where, "use at least 1");
  if (o.is_inference && o.gradient_accumulation != 1)
    fail("gradient accumulation is " + format_uint(o.gradient_accumulation) + " for an inference model", where,
         "gradient accumulation applies to training; for inference use device iterations (batches_per_step)");
  if (o.replication_factor == 0) fail("the replication factor is 0", where, "use at least 1");
  if (o.input_group_size == 0 || o.replication_factor % o.input_group_size != 0)
    fail("input replica group size " + format_uint(o.input_group_size) + " does not divide the replication factor " +
             format_uint(o.replication_factor),
         where, "choose a group size that divides the replication factor");
  if (o.precision && *o.precision != data_type::F32 && *o.precision != data_type::F16)
    fail("precision must be F32 or F16, not " + std::string(to_string(*o.precision)), where, "use F32 or F16");
  if (o.partials_type != data_type::F32 && o.partials_type != data_type::F16)
    fail("partials type must be F32 or F16, not " + std::string(to_string(o.partials_type)), where, "use F32 or F16");
}

/// Pipeline depth: device iterations (inference) or gradient accumulation (training) >= stages.
constexpr void check_pipeline_depth(const graph& g, const staged_ops& s, const plan_options& o, std::string_view strategy) {
  const std::uint64_t stages = s.stages.size();
  if (o.is_inference) {
    if (o.batches_per_step < stages)
      fail("the pipeline has " + format_uint(stages) + " stages but device iterations is " + format_uint(o.batches_per_step) +
               " (rule: pipeline depth >= number of stages)",
           std::string(strategy) + " on " + graph_where(g),
           "set device iterations (batches per step) to at least " + format_uint(stages) + ", or use fewer stages");
  } else {
    const std::uint64_t total = 2 * stages - 1;
    if (o.gradient_accumulation < total)
      fail("the training pipeline has " + format_uint(total) + " stages (" + format_uint(stages) +
               " forward, their backward, the last combined) but gradient accumulation is " +
               format_uint(o.gradient_accumulation) + " (rule: pipeline depth >= number of stages)",
           std::string(strategy) + " on " + graph_where(g),
           "set gradient accumulation to at least " + format_uint(total) + ", or use fewer stages");
  }
}

/// The micro-batch size: the leading dimension of the first graph input (1 without inputs).
constexpr std::uint64_t micro_batch_size(const graph& g) {
  for (auto t : g.inputs()) {
    const auto& s = g.tensor(t).info.shape;
    if (s.rank() >= 1 && s[0] > 0) return static_cast<std::uint64_t>(s[0]);
  }
  return 1;
}

constexpr executable build_executable(const graph& g, const device_description& d, const plan_options& o,
                                      const plan_request& r, const std::vector<op_assignment>& a,
                                      const ipu_reservation& ipus) {
  const bool costed = d.has_tile_limits();
  const bool phased = r.schedule == schedule_kind::phased;
  device_description run = d;
  if (costed) run.num_ipus = ipus.reserved;  // syncs span the reserved IPUs

  // Not a conditional expression: GCC 12 double-frees a conditional between class prvalues in
  // constant evaluation.
  staged_ops s;
  if (r.schedule == schedule_kind::sequential) s = sequential_stages(g, a);
  else s = keyed_stages(g, a, phased);
  check_stage_order(g, s, r.strategy);
  if (r.schedule == schedule_kind::pipelined) check_pipeline_depth(g, s, o, r.strategy);
  if (phased && costed && r.live != liveness::always_live && !d.arch.has_streaming_memory())
    fail("liveness " + std::string(to_string(r.live)) + " keeps tensors in Streaming Memory, which " +
             std::string(d.arch.name) + " does not have",
         std::string(r.strategy) + " on " + to_string(d),
         "use Liveness.AlwaysLive, or an architecture with Streaming Memory (mk2, bow)");

  const op_cost_options costing{o.precision, o.partials_type, o.available_memory_proportion, 0};
  std::vector<op_cost> costs(g.num_ops());
  std::vector<std::uint64_t> cycles(g.num_ops(), 0);
  if (costed)
    for (std::size_t i = 0; i < g.num_ops(); ++i) {
      costs[i] = estimate_op_cost(g, static_cast<op_id>(i), run, costing, o.cost_hook);
      cycles[i] = costs[i].cycles();
    }

  const program_context pc{&g, run, costing, &cycles, phased, r.live, !o.is_inference};
  executable e;
  e.strategy = std::string(r.strategy);
  e.schedule = r.schedule;
  e.device = d;
  e.replication_factor = o.replication_factor;
  e.ipus_per_replica = ipus.per_replica;
  e.ipus_reserved = ipus.reserved;
  e.input_group_size = o.input_group_size;
  e.batches_per_step = o.batches_per_step;
  e.gradient_accumulation = o.gradient_accumulation;
  e.micro_batch_size = micro_batch_size(g);
  e.is_inference = o.is_inference;
  e.precision = o.precision;
  e.partials_type = o.partials_type;
  e.op_ipu.resize(g.num_ops());
  for (std::size_t i = 0; i < g.num_ops(); ++i) e.op_ipu[i] = s.stages[s.op_stage[i]].ipu;
  e.op_stage = s.op_stage;
  e.programs = all_programs(pc, s);
  const auto& main = e.programs[static_cast<std::size_t>(program_index::main)];
  e.streams = host_streams(g, main);
  e.flow.load = {static_cast<std::uint32_t>(program_index::weights_from_host)};
  e.flow.main = {static_cast<std::uint32_t>(program_index::main)};
  if (!o.is_inference) e.flow.save = {static_cast<std::uint32_t>(program_index::weights_to_host)};
  if (phased) {
    e.overlapped_phase_io = r.parallel_phases && r.live != liveness::off_chip_after_fwd_no_overlap;
    for (std::size_t i = 0; i < s.stages.size(); ++i)
      if (i == 0 || s.stages[i].phase != s.stages[i - 1].phase) ++e.num_phases;
  }

  if (costed) {
    memory_context mc;
    mc.programs = &pc;
    mc.stages = &s;
    mc.main = &main;
    mc.op_costs = &costs;
    mc.available_memory_proportion = o.available_memory_proportion;
    mc.check = o.check_memory;
    mc.ipus_per_replica = ipus.per_replica;
    mc.pipelined = r.schedule == schedule_kind::pipelined;
    auto mp = plan_memory(mc);
    e.placement = std::move(mp.placement);
    e.memory = std::move(mp.memory);
    predict_context cc;
    cc.schedule = r.schedule;
    cc.parallel_phases = r.parallel_phases;
    cc.overlap_phase_io = e.overlapped_phase_io;
    cc.options = &o;
    cc.device = run;
    cc.costing = costing;
    cc.ipus_per_replica = ipus.per_replica;
    e.predicted = predict(cc, g, s.stages, main, e.micro_batch_size);
  } else {
    // The host: tensors live where their ops run, with no tiles and nothing to predict.
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
      const auto& tn = g.tensor(static_cast<tensor_id>(t));
      const std::uint32_t ipu = tn.producer != no_op ? e.op_ipu[tn.producer]
                                : !tn.consumers.empty() ? e.op_ipu[tn.consumers.front()] : 0;
      e.placement.push_back(tensor_placement{static_cast<tensor_id>(t), ipu, 0, 0, false});
    }
    e.predicted.micro_batches_per_step = o.batches_per_step * (o.is_inference ? 1 : o.gradient_accumulation);
  }
  e.stages = std::move(s.stages);
  e.op_cycles = std::move(cycles);
  e.model = g;
  return e;
}

}  // namespace ipu::detail::sched
