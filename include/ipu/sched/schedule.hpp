#pragma once
// Schedules as types: how the host engine runs a step of an executable's main program.
//
// Every execution strategy names the schedule its plans run with (`using schedule =
// ipu::pipelined_schedule;`), so `ipu::executor<Strategy, Device>` instantiates the engine's step
// loop for that schedule at compile time. A plan loaded at run time picks its schedule once, from
// the kind the executable records (`ipu::any_schedule`, `ipu::schedule_for`).
//
// Built in:
//   sequential_schedule  sharded: one worker per replica runs each micro-batch's stages in order;
//   pipelined_schedule   one worker per stage, micro-batches overlapping, on a pool of threads;
//   phased_schedule      one worker per IPU of the phases, rounds of a micro-batch in turn;
//   replicated<Inner>    Inner's step, named for replicated_execution<S> (every schedule runs all of
//                        the executable's replicas side by side).
//
// The `schedule` concept, for a user's own schedule:
//
//   struct my_schedule {
//     using schedule_concept = ipu::schedule_tag;
//     static constexpr std::string_view name = "mine";
//     // The plan layout it runs (what the engine prepares from the executable: the stages in order
//     // for sequential, the stage chain for pipelined, the rounds for phased). The engine refuses
//     // an executable of another kind.
//     static constexpr ipu::schedule_kind kind = ipu::schedule_kind::sequential;
//     // Workers (timeline lanes) per replica; each has a recorder, engine.recorder_of(r, w).
//     std::size_t workers_per_replica(const ipu::exec::engine_base&) const;
//     // Appends the step's jobs, each run on its own host thread (one job runs on the caller's).
//     void add_jobs(ipu::exec::engine_base&, ipu::exec::job_list&);
//     // Optional: the jobs add_jobs adds (what executor::num_threads reports); without it, one
//     // per worker.
//     std::size_t num_threads(const ipu::exec::engine_base&) const;
//   };
//
// A job runs micro-batches through the engine's public steps (start_micro_batch, run_item,
// run_stage, note) and reports a failure with engine.fail(worker) from its catch block. The engine
// owns one schedule object, used by one step at a time. See engine.hpp for the API and the built-in
// schedules' loops.
#include <concepts>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/sched/executable.hpp"

namespace ipu {

namespace exec {
class engine_base;
/// The jobs of one step: each runs on its own host thread.
using job_list = std::vector<std::function<void()>>;
}  // namespace exec

struct schedule_tag {};

/// True for types declaring `using schedule_concept = ipu::schedule_tag;`; specialise to opt in a
/// type you cannot change.
template <class S>
inline constexpr bool enable_schedule = requires { requires std::same_as<typename S::schedule_concept, schedule_tag>; };

template <class S>
concept schedule = enable_schedule<S> && std::default_initializable<S> &&
                   requires(const S& cs, S& s, ipu::exec::engine_base& e, ipu::exec::job_list& jobs) {
                     { S::name } -> std::convertible_to<std::string_view>;
                     { S::kind } -> std::convertible_to<schedule_kind>;
                     { cs.workers_per_replica(e) } -> std::convertible_to<std::size_t>;
                     s.add_jobs(e, jobs);
                   };

// --- the built-in schedules (their loops are defined in engine.hpp) ----------------------------------
struct sequential_schedule {
  using schedule_concept = schedule_tag;
  static constexpr std::string_view name = "sequential";
  static constexpr schedule_kind kind = schedule_kind::sequential;
  [[nodiscard]] std::size_t workers_per_replica(const ipu::exec::engine_base&) const { return 1; }
  void add_jobs(ipu::exec::engine_base& e, ipu::exec::job_list& jobs);
};

struct pipelined_schedule {
  using schedule_concept = schedule_tag;
  static constexpr std::string_view name = "pipelined";
  static constexpr schedule_kind kind = schedule_kind::pipelined;
  [[nodiscard]] std::size_t workers_per_replica(const ipu::exec::engine_base& e) const;
  /// The stages share a pool: min(pipeline_threads or cores / threads_per_worker, workers).
  [[nodiscard]] std::size_t num_threads(const ipu::exec::engine_base& e) const;
  void add_jobs(ipu::exec::engine_base& e, ipu::exec::job_list& jobs);
};

struct phased_schedule {
  using schedule_concept = schedule_tag;
  static constexpr std::string_view name = "phased";
  static constexpr schedule_kind kind = schedule_kind::phased;
  [[nodiscard]] std::size_t workers_per_replica(const ipu::exec::engine_base& e) const;
  void add_jobs(ipu::exec::engine_base& e, ipu::exec::job_list& jobs);
};

/// Replicas of Inner's step. Each replica already runs on its own workers under every schedule, so
/// this runs exactly as Inner; it is the schedule replicated_execution<S> names.
template <class Inner>
struct replicated : Inner {
  static_assert(schedule<Inner>, "ipu: replicated<Inner> needs a schedule; see the `schedule` concept in ipu/sched/schedule.hpp");
  using inner_schedule = Inner;
  static constexpr std::string_view name = "replicated";
};

/// A schedule known at run time: the variant index is the executable's schedule_kind.
using any_schedule = std::variant<sequential_schedule, pipelined_schedule, phased_schedule>;

/// The schedule an executable of kind `k` runs with; ipu::error (schedule) for a kind this build
/// does not know (a damaged or newer file).
inline any_schedule schedule_for(schedule_kind k) {
  switch (k) {
    case schedule_kind::sequential: return sequential_schedule{};
    case schedule_kind::pipelined: return pipelined_schedule{};
    case schedule_kind::phased: return phased_schedule{};
  }
  throw error(error_category::schedule, "unknown schedule kind " + std::to_string(static_cast<int>(k)), "executable",
              "plan it again with this version of the library");
}

namespace detail {
/// The schedule concept's requirements one by one, each failing with a message saying how to fix
/// it (a plain concept failure lists the requirements, not the fix).
template <class S>
consteval bool check_schedule() {
  static_assert(enable_schedule<S>, "ipu: this type is not a schedule; declare `using schedule_concept = ipu::schedule_tag;`");
  static_assert(std::default_initializable<S>, "ipu: a schedule must be default-constructible (the engine owns one)");
  static_assert(requires { { S::name } -> std::convertible_to<std::string_view>; },
                "ipu: a schedule needs `static constexpr std::string_view name`");
  static_assert(requires { { S::kind } -> std::convertible_to<schedule_kind>; },
                "ipu: a schedule needs `static constexpr ipu::schedule_kind kind`, the plan layout it runs");
  static_assert(requires(const S& s, ipu::exec::engine_base& e) { { s.workers_per_replica(e) } -> std::convertible_to<std::size_t>; },
                "ipu: a schedule needs `std::size_t workers_per_replica(const ipu::exec::engine_base&) const`");
  static_assert(requires(S& s, ipu::exec::engine_base& e, ipu::exec::job_list& jobs) { s.add_jobs(e, jobs); },
                "ipu: a schedule needs `void add_jobs(ipu::exec::engine_base&, ipu::exec::job_list&)`");
  return schedule<S>;
}
}  // namespace detail

static_assert(schedule<sequential_schedule> && schedule<pipelined_schedule> && schedule<phased_schedule>);
static_assert(schedule<replicated<pipelined_schedule>>);
static_assert(std::variant_size_v<any_schedule> == 3 &&
              std::is_same_v<std::variant_alternative_t<static_cast<std::size_t>(schedule_kind::phased), any_schedule>, phased_schedule>,
              "ipu: any_schedule's alternatives are in schedule_kind order");

}  // namespace ipu
