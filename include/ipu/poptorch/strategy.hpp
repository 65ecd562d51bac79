#pragma once
// PopTorch's enumerations and execution-strategy settings as plain data: what setExecutionStrategy
// takes (pipelined, sharded, serial/parallel phased, with stages, phases, AutoStage and tensor
// liveness) and the enums the options use, spelled as PopTorch spells them. The planner (sched/)
// reads these; `ipu::options` (options.hpp), with its file parser, is for those who compile.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/train/recomputation.hpp"

namespace ipu {

// --- enumerations, spelled as PopTorch spells them ---------------------------------------------------

/// What the device returns for each output per run. `default_`: `all` for inference, `final` for
/// training.
enum class output_mode : std::uint8_t { all, sum, final, every_n, default_ };
/// How blocks without an explicit stage get one: the stage is the block's IPU, or one stage per block.
enum class auto_stage : std::uint8_t { same_as_ipu, auto_increment };
/// When tensors of phased execution live on chip.
enum class liveness : std::uint8_t { always_live, off_chip_after_fwd, off_chip_after_fwd_no_overlap, off_chip_after_each_phase };
enum class execution_mode : std::uint8_t { pipelined, sharded, serial_phased, parallel_phased };
/// When to attach to the device: from the start, once compiled, or never (offline compilation).
enum class connection_type : std::uint8_t { always, on_demand, never };
enum class sync_pattern : std::uint8_t { full, single_pipeline, replica_and_ladder };
/// How gradients are combined across accumulation steps and replicas.
enum class reduction_type : std::uint8_t { sum, mean };
/// When a mean reduction divides: as it goes (running) or once at the end (post).
enum class mean_reduction_strategy : std::uint8_t { running, post };
enum class comm_group_type : std::uint8_t { all, consecutive, orthogonal, ungrouped };
/// What an op mixing float16 and float32 inputs computes in.
enum class half_float_casting : std::uint8_t { float_downcast_to_half, half_upcast_to_float };

// ipu::recomputation (PopART's autoRecomputation) is in train/recomputation.hpp, with the rule it picks ops by.

/// PopART's RecomputationType by name (None, Standard, NormOnly, RecomputeAll, Pipeline), or its
/// value in that order; PopTorch sets it as `_Popart.set("autoRecomputation", value)`.
inline recomputation recomputation_from(std::string_view name) {
  if (name.starts_with("popart.RecomputationType.")) name.remove_prefix(25);  // as PopART's Python spells it
  if (name == "None" || name == "0") return recomputation::none;
  if (name == "Standard" || name == "1") return recomputation::standard;
  if (name == "NormOnly" || name == "2") return recomputation::norm_only;
  if (name == "RecomputeAll" || name == "Pipeline" || name == "3" || name == "4") return recomputation::all;
  throw error(error_category::usage, "unknown recomputation type '" + std::string(name) + "'", "autoRecomputation",
              "use None, Standard, NormOnly, RecomputeAll or Pipeline (or 0 to 4)");
}

/// The PopART name of `r` (RecomputeAll and Pipeline are one setting here: RecomputeAll).
constexpr std::string_view to_string(recomputation r) noexcept {
  switch (r) {
    case recomputation::none: return "None";
    case recomputation::standard: return "Standard";
    case recomputation::norm_only: return "NormOnly";
    case recomputation::all: return "RecomputeAll";
  }
  return "?";
}
/// PopART's RecomputationType value of `r`: None 0, Standard 1, NormOnly 2, RecomputeAll 4.
constexpr int popart_value(recomputation r) noexcept { return r == recomputation::all ? 4 : static_cast<int>(r); }

namespace detail {
template <class E>
struct enum_names;  // python: the PopTorch enum; names: indexed by the enumerator's value
template <> struct enum_names<output_mode> {
  static constexpr std::string_view python = "poptorch.OutputMode";
  static constexpr std::array<std::string_view, 5> names{"All", "Sum", "Final", "EveryN", "Default"};
};
template <> struct enum_names<auto_stage> {
  static constexpr std::string_view python = "poptorch.AutoStage";
  static constexpr std::array<std::string_view, 2> names{"SameAsIpu", "AutoIncrement"};
};
template <> struct enum_names<liveness> {
  static constexpr std::string_view python = "poptorch.Liveness";
  static constexpr std::array<std::string_view, 4> names{"AlwaysLive", "OffChipAfterFwd", "OffChipAfterFwdNoOverlap",
                                                         "OffChipAfterEachPhase"};
};
template <> struct enum_names<execution_mode> {
  static constexpr std::string_view python = "poptorch";
  static constexpr std::array<std::string_view, 4> names{"PipelinedExecution", "ShardedExecution", "SerialPhasedExecution",
                                                         "ParallelPhasedExecution"};
};
template <> struct enum_names<connection_type> {
  static constexpr std::string_view python = "poptorch.ConnectionType";
  static constexpr std::array<std::string_view, 3> names{"Always", "OnDemand", "Never"};
};
template <> struct enum_names<sync_pattern> {
  static constexpr std::string_view python = "poptorch.SyncPattern";
  static constexpr std::array<std::string_view, 3> names{"Full", "SinglePipeline", "ReplicaAndLadder"};
};
template <> struct enum_names<reduction_type> {
  static constexpr std::string_view python = "poptorch.ReductionType";
  static constexpr std::array<std::string_view, 2> names{"Sum", "Mean"};
};
template <> struct enum_names<mean_reduction_strategy> {
  static constexpr std::string_view python = "poptorch.MeanReductionStrategy";
  static constexpr std::array<std::string_view, 2> names{"Running", "Post"};
};
template <> struct enum_names<comm_group_type> {
  static constexpr std::string_view python = "poptorch.CommGroupType";
  static constexpr std::array<std::string_view, 4> names{"All", "Consecutive", "Orthogonal", "Ungrouped"};
};
template <> struct enum_names<half_float_casting> {
  static constexpr std::string_view python = "poptorch.HalfFloatCastingBehavior";
  static constexpr std::array<std::string_view, 2> names{"FloatDowncastToHalf", "HalfUpcastToFloat"};
};
template <class E>
concept named_enum = requires { enum_names<E>::names; };
}  // namespace detail

/// PopTorch's name of an enumerator: "EveryN", "SameAsIpu", "ShardedExecution"...
template <detail::named_enum E>
constexpr std::string_view to_string(E e) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i < detail::enum_names<E>::names.size() ? detail::enum_names<E>::names[i] : "?";
}

// --- execution strategy ------------------------------------------------------------------------------

/// Blocks (by user id) that run together on one IPU. No IPU: decided by the blocks' annotations.
struct stage {
  std::vector<std::string> blocks;
  std::optional<std::int64_t> ipu;
  friend bool operator==(const stage&, const stage&) = default;
};

/// Stages that run in parallel, one per IPU, in phased execution.
struct phase {
  std::vector<stage> stages;
  friend bool operator==(const phase&, const phase&) = default;
};

/// How the model is split over IPUs: what PopTorch's setExecutionStrategy takes. (The scheduler's
/// `ipu::execution_strategy` concept is the code that carries it out.)
struct strategy_settings {
  execution_mode mode = execution_mode::pipelined;
  /// Pipelined / sharded without explicit stages: how blocks map to stages.
  ipu::auto_stage auto_stage = ipu::auto_stage::same_as_ipu;
  /// Pipelined / sharded: explicit stages in order (stage id = index); empty means AutoStage.
  std::vector<stage> stages;
  /// Phased: the phases in order (phase id = index).
  std::vector<phase> phases;
  /// Phased: when tensors go off chip.
  ipu::liveness tensors_liveness = ipu::liveness::always_live;
  /// Phased, training: backward phases are not shared with the last forward phase.
  bool separate_backward_phase = false;

  static strategy_settings pipelined(std::vector<stage> stages = {}) {
    return with_stages(execution_mode::pipelined, std::move(stages));
  }
  static strategy_settings pipelined(ipu::auto_stage a) { return with_auto_stage(execution_mode::pipelined, a); }
  static strategy_settings sharded(std::vector<stage> stages = {}) {
    return with_stages(execution_mode::sharded, std::move(stages));
  }
  static strategy_settings sharded(ipu::auto_stage a) { return with_auto_stage(execution_mode::sharded, a); }
  /// Phases run one after another on one group of IPUs.
  static strategy_settings serial_phased(std::vector<phase> phases) {
    return with_phases(execution_mode::serial_phased, std::move(phases));
  }
  /// Phases alternate between two groups of IPUs: even phases on even IPUs, odd on odd.
  static strategy_settings parallel_phased(std::vector<phase> phases) {
    return with_phases(execution_mode::parallel_phased, std::move(phases));
  }

  [[nodiscard]] bool is_phased() const noexcept {
    return mode == execution_mode::serial_phased || mode == execution_mode::parallel_phased;
  }

  /// Checks what can be checked without the model; throws ipu::error (options).
  void validate() const {
    const std::string where = "execution strategy " + std::string(to_string(mode));
    auto fail = [&](const std::string& what, const std::string& hint) { throw error(error_category::options, what, where, hint); };
    std::set<std::string> seen;
    auto check_stage = [&](const stage& s, const std::string& name) {
      if (s.blocks.empty()) fail(name + " has no blocks", "give each stage the user ids of its blocks");
      if (s.ipu && *s.ipu < 0) fail(name + " is on IPU " + std::to_string(*s.ipu), "IPU numbers start at 0");
      for (const auto& b : s.blocks)
        if (!seen.insert(b).second) fail("block '" + b + "' is in more than one stage", "put each block in exactly one stage");
    };
    if (!is_phased()) {
      if (!phases.empty()) fail("phases given to a non-phased strategy", "use serial_phased or parallel_phased for phases");
      if (tensors_liveness != ipu::liveness::always_live || separate_backward_phase)
        fail("tensor liveness and separate backward phases apply to phased execution only",
             "leave them at their defaults, or choose a phased strategy");
      for (std::size_t i = 0; i < stages.size(); ++i) check_stage(stages[i], "stage " + std::to_string(i));
      return;
    }
    if (!stages.empty()) fail("stages given outside phases", "put the stages inside phases");
    if (phases.empty()) fail("no phases", "there is no AutoStage for phased execution: list the phases explicitly");
    for (std::size_t p = 0; p < phases.size(); ++p) {
      const auto& ph = phases[p];
      if (ph.stages.empty()) fail("phase " + std::to_string(p) + " has no stages", "give each phase at least one stage");
      std::set<std::int64_t> ipus;
      for (std::size_t s = 0; s < ph.stages.size(); ++s) {
        const std::string name = "phase " + std::to_string(p) + " stage " + std::to_string(s);
        check_stage(ph.stages[s], name);
        const auto& ipu = ph.stages[s].ipu;
        if (!ipu) continue;
        if (!ipus.insert(*ipu).second)
          fail(name + " shares IPU " + std::to_string(*ipu) + " with another stage of its phase",
               "stages of one phase run in parallel, each on its own IPU");
        if (mode == execution_mode::parallel_phased && (*ipu % 2) != static_cast<std::int64_t>(p % 2))
          fail(name + " is on IPU " + std::to_string(*ipu) + " but phase " + std::to_string(p) + " is " +
                   (p % 2 ? "odd" : "even"),
               "in parallel phased execution even phases run on even IPUs and odd phases on odd IPUs");
      }
    }
  }

  friend bool operator==(const strategy_settings&, const strategy_settings&) = default;

 private:
  static strategy_settings with_stages(execution_mode m, std::vector<stage>&& s) {
    strategy_settings r;
    r.mode = m;
    r.stages = std::move(s);
    r.validate();
    return r;
  }
  static strategy_settings with_auto_stage(execution_mode m, ipu::auto_stage a) {
    strategy_settings r;
    r.mode = m;
    r.auto_stage = a;
    return r;
  }
  static strategy_settings with_phases(execution_mode m, std::vector<phase>&& p) {
    strategy_settings r;
    r.mode = m;
    r.phases = std::move(p);
    r.validate();
    return r;
  }
};

}  // namespace ipu
