#pragma once
// ShardedExecution: the model split over IPUs, one IPU at a time. Ops run in model order; when
// the next op is on another IPU, the tensors it needs are copied over IPU-Links (no overlap
// between IPUs: sharding is for models that do not fit one IPU, not for speed).
//
//   ipu::sharded_execution s;                                  // placement from annotations
//   ipu::sharded_execution s{{ipu::stage{{"A"}, 0}, ipu::stage{{"B"}, 1}}};  // explicit stages
//   ipu::executable e = s.plan(graph, ipu::ipu_model<ipu::mk2, 2>::description(), {});
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

struct sharded_execution {
  using strategy_concept = execution_strategy_tag;
  using schedule = sequential_schedule;  // stages one after another
  static constexpr std::string_view name = "sharded";

  /// Explicit stages (blocks and IPUs); empty: AutoStage over blocks, or the ops' IPU annotations.
  std::vector<stage> stages{};
  ipu::auto_stage auto_stage = ipu::auto_stage::same_as_ipu;

  [[nodiscard]] constexpr executable plan(const graph& g, const device_description& d, const plan_options& o) const {
    detail::sched::check_plan_options(o, name);
    const auto order = topological_order(g);
    const auto a = detail::sched::resolve_staged(g, order, stages, auto_stage, name);
    const auto ipus = detail::sched::reserve_ipus(g, a, d, o.replication_factor, o.auto_round_num_ipus, name);
    return detail::sched::build_executable(g, d, o, {name, schedule_kind::sequential}, a, ipus);
  }
};

static_assert(execution_strategy<sharded_execution>);

}  // namespace ipu
