#pragma once
// SerialPhasedExecution and ParallelPhasedExecution: the model is cut into phases run one after
// another; the stages of a phase run in parallel, one per IPU of the phase's group, and weights and
// activations move to and from Streaming Memory between phases as the liveness says (see
// program_builder.hpp):
//
//   serial    every phase on the same group of IPUs (default: IPUs 0 .. stages - 1);
//   parallel  phases alternate between two groups: even phases on even IPUs, odd phases on odd
//             IPUs (default: 2s + phase % 2 for stage s), so phase p + 1 loads its weights while
//             phase p computes (except with Liveness.OffChipAfterFwdNoOverlap).
//
// Phases come from the strategy (PopTorch's Phase(Stage("A"), Stage("B")), matched to the model's
// blocks) or from the ops' execution-phase and IPU annotations (PopART). There is no AutoStage for
// phased execution.
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

namespace detail::sched {
template <bool Parallel>
struct phased_execution {
  using strategy_concept = execution_strategy_tag;
  using schedule = phased_schedule;
  static constexpr std::string_view name = Parallel ? "parallel-phased" : "serial-phased";

  /// The phases in order (phase id = index); empty: the ops' execution-phase annotations.
  std::vector<phase> phases{};
  liveness tensors_liveness = liveness::always_live;

  [[nodiscard]] constexpr executable plan(const graph& g, const device_description& d, const plan_options& o) const {
    check_plan_options(o, name);
    const auto order = topological_order(g);
    const auto a = resolve_phased(g, order, phases, Parallel, name);
    check_data_flow_order(g, a, true, name);
    const auto ipus = reserve_ipus(g, a, d, o.replication_factor, o.auto_round_num_ipus, name);
    return build_executable(g, d, o, {name, schedule_kind::phased, Parallel, tensors_liveness}, a, ipus);
  }
};
}  // namespace detail::sched

using serial_phased_execution = detail::sched::phased_execution<false>;
using parallel_phased_execution = detail::sched::phased_execution<true>;

static_assert(execution_strategy<serial_phased_execution>);
static_assert(execution_strategy<parallel_phased_execution>);

}  // namespace ipu
