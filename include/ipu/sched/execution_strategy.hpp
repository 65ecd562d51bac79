#pragma once
// The `execution_strategy` concept: a type that turns a graph into an executable for a device.
//
// A strategy opts in explicitly with `using strategy_concept = ipu::execution_strategy_tag;`, names
// itself and the schedule its plans run with, and plans:
//
//   struct my_strategy {
//     using strategy_concept = ipu::execution_strategy_tag;
//     using schedule = ipu::pipelined_schedule;  // a type satisfying ipu::schedule (schedule.hpp)
//     static constexpr std::string_view name = "mine";
//     constexpr ipu::executable plan(const ipu::graph&, const ipu::device_description&,
//                                    const ipu::plan_options&) const;
//   };
//
// `plan` validates the model's annotations against the strategy's rules and throws ipu::error
// (category schedule) naming the op and the rule when they do not hold. Its executables record the
// schedule's kind (executable::schedule), which is how an executor knows a plan is its strategy's.
// A strategy whose plans differ in schedule names `using schedule = ipu::any_schedule;`: its
// executor picks the schedule once per plan, from the executable.
#include <concepts>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ipu/data_type.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/ops/op_cost.hpp"
#include "ipu/sched/schedule.hpp"

namespace ipu {

struct execution_strategy_tag {};

/// What every strategy is told besides the graph and the device.
struct plan_options {
  std::uint64_t batches_per_step = 1;       // device iterations
  std::uint64_t gradient_accumulation = 1;  // training only
  std::uint32_t replication_factor = 1;
  bool is_inference = true;
  double available_memory_proportion = 0.6;
  bool check_memory = true;  // throw ipu::error (memory) when a tile overflows
  /// Replicas in groups of this size receive the same input data (PopTorch's
  /// inputReplicaGrouping); must divide the replication factor.
  std::uint32_t input_group_size = 1;
  /// PopTorch's autoRoundNumIPUs: reserve the next power of two of IPUs instead of failing.
  bool auto_round_num_ipus = false;
  /// F32 or F16: float tensors are costed and stored as this type; unset: as the model has them.
  std::optional<data_type> precision;
  /// Type of matmul / convolution partial sums.
  data_type partials_type = data_type::F32;
  /// Asked for each op's cost before the built-in table (ops/op_cost.hpp); nullptr: the table only.
  op_cost_hook cost_hook = nullptr;
  friend constexpr bool operator==(const plan_options&, const plan_options&) = default;
};

template <class S>
inline constexpr bool enable_execution_strategy =
    requires { requires std::same_as<typename S::strategy_concept, execution_strategy_tag>; };

/// A strategy's schedule: a schedule type, or any_schedule (chosen per plan).
template <class S>
concept strategy_schedule = schedule<S> || std::same_as<S, any_schedule>;

template <class S>
concept execution_strategy =
    enable_execution_strategy<S> && requires(const S& s, const graph& g, const device_description& d, const plan_options& o) {
      { S::name } -> std::convertible_to<std::string_view>;
      { s.plan(g, d, o) } -> std::same_as<executable>;
      typename S::schedule;
    } && strategy_schedule<typename S::schedule>;

namespace detail {
/// The concept's requirements one by one, each failing with a message saying how to fix it.
template <class S>
consteval bool check_execution_strategy() {
  static_assert(enable_execution_strategy<S>,
                "ipu: this type is not an execution strategy; declare `using strategy_concept = ipu::execution_strategy_tag;`");
  static_assert(requires { { S::name } -> std::convertible_to<std::string_view>; },
                "ipu: an execution strategy needs `static constexpr std::string_view name`");
  static_assert(requires(const S& s, const graph& g, const device_description& d, const plan_options& o) {
                  { s.plan(g, d, o) } -> std::same_as<executable>;
                },
                "ipu: an execution strategy needs `ipu::executable plan(const ipu::graph&, const ipu::device_description&, "
                "const ipu::plan_options&) const`");
  static_assert(requires { typename S::schedule; },
                "ipu: an execution strategy names its schedule: `using schedule = ipu::pipelined_schedule;` (or "
                "sequential_schedule, phased_schedule, your own ipu::schedule, or ipu::any_schedule)");
  if constexpr (requires { typename S::schedule; }) {
    static_assert(strategy_schedule<typename S::schedule>,
                  "ipu: the strategy's `schedule` is not an ipu::schedule nor ipu::any_schedule; see ipu/sched/schedule.hpp");
    if constexpr (!std::same_as<typename S::schedule, any_schedule>) (void)check_schedule<typename S::schedule>();
  }
  return execution_strategy<S>;
}
}  // namespace detail

}  // namespace ipu
