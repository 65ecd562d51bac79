#pragma once
// Replication: `replicas` copies of a strategy's plan, each on its own IPUs (replica r on IPUs
// r x ipus_per_replica onwards), each with its own data. Replicas in input groups of `group_size`
// receive the same data (PopTorch's inputReplicaGrouping), so distinct samples per step scale by
// replicas / group_size. The IPUs of all replicas must fit the device and be a power of two (unless
// auto-rounded).
//
//   ipu::replicated_execution<ipu::pipelined_execution> r{{}, 2};
//   ipu::executable e = r.plan(graph, ipu::ipu_model<ipu::mk2, 8>::description(), options);
//
// Replication composes with any strategy: it is the same plan with `plan_options::replication_factor`
// and `input_group_size` set. Planning the inner strategy with those options is equivalent.
#include <cstdint>
#include <string>
#include <string_view>

#include "ipu/device/device_model.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/sched/annotation_rules.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/sched/execution_strategy.hpp"
#include "ipu/sched/schedule.hpp"

namespace ipu {

namespace detail::sched {
template <class S>
struct replicated_schedule_of {
  using type = replicated<S>;
};
template <>
struct replicated_schedule_of<any_schedule> {
  using type = any_schedule;
};
}  // namespace detail::sched

template <class Inner>
struct replicated_execution {
  static_assert(detail::check_execution_strategy<Inner>(), "ipu: replicated_execution<Inner> needs an execution strategy");
  using strategy_concept = execution_strategy_tag;
  using schedule = typename detail::sched::replicated_schedule_of<typename Inner::schedule>::type;
  static constexpr std::string_view name = "replicated";

  Inner inner{};
  std::uint32_t replicas = 1;
  std::uint32_t group_size = 1;  // replicas per input group

  [[nodiscard]] constexpr executable plan(const graph& g, const device_description& d, const plan_options& o) const {
    if (o.replication_factor != 1 && o.replication_factor != replicas)
      detail::sched::fail("the options ask for " + ipu::format_uint(o.replication_factor) +
                              " replicas but the strategy for " + ipu::format_uint(replicas),
                          "replicated " + std::string(Inner::name), "set the replication factor in one place");
    plan_options r = o;
    r.replication_factor = replicas;
    r.input_group_size = group_size;
    executable e = inner.plan(g, d, r);
    e.strategy = "replicated " + e.strategy;
    return e;
  }
};

}  // namespace ipu
