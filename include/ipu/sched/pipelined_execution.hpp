#pragma once
// PipelinedExecution (PopTorch's default): each stage on its IPU works on a different micro-batch at
// the same time, passing activations on over IPU-Links.
//
// Stages come from the strategy's explicit stages, from AutoStage over the model's blocks
// (SameAsIpu: stage = the block's IPU; AutoIncrement: one stage per block in order), or from the
// ops' pipeline-stage (and IPU) annotations. Consecutive stages on one IPU merge. Stage ids must
// ascend along the model, and the pipeline must be deep enough: device iterations (inference) or
// gradient accumulation (training, 2S - 1 stages) at least the number of stages.
//
//   ipu::pipelined_execution p{.auto_stage = ipu::auto_stage::auto_increment};
//   ipu::plan_options o;
//   o.batches_per_step = 16;
//   ipu::executable e = p.plan(graph, ipu::ipu_model<ipu::mk2, 4>::description(), o);
#include <string_view>
#include <vector>

#include "ipu/device/device_model.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/poptorch/strategy.hpp"
#include "ipu/sched/annotation_rules.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/sched/execution_strategy.hpp"
#include "ipu/sched/plan_builder.hpp"

namespace ipu {

struct pipelined_execution {
  using strategy_concept = execution_strategy_tag;
  using schedule = pipelined_schedule;
  static constexpr std::string_view name = "pipelined";

  /// Explicit stages in order (stage id = index); empty: AutoStage or the ops' annotations.
  std::vector<stage> stages{};
  ipu::auto_stage auto_stage = ipu::auto_stage::same_as_ipu;

  [[nodiscard]] constexpr executable plan(const graph& g, const device_description& d, const plan_options& o) const {
    detail::sched::check_plan_options(o, name);
    const auto order = topological_order(g);
    const auto a = detail::sched::resolve_staged(g, order, stages, auto_stage, name);
    detail::sched::check_data_flow_order(g, a, false, name);
    const auto ipus = detail::sched::reserve_ipus(g, a, d, o.replication_factor, o.auto_round_num_ipus, name);
    return detail::sched::build_executable(g, d, o, {name, schedule_kind::pipelined}, a, ipus);
  }
};

static_assert(execution_strategy<pipelined_execution>);

}  // namespace ipu
