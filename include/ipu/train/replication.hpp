#pragma once
// Replicated training's settings (PopTorch 4.4.3, replicationFactor, inputReplicaGrouping and a
// parameter's replicaGrouping) and the arithmetic of its groups, for the training session
// (ipu/train/session.hpp).
//
// R replicas each run micro-batches of a weight update. With gradient accumulation G, a step takes
// G * R micro-batches; micro-batch j (0 <= j < G * R) runs on replica j % R as its accumulation
// index j / R (PopART's [accumulation][replica] layout of a step's data), and its gradients are
// reduced in the order of j: the same additions, in the same order, as one replica accumulating
// G * R micro-batches, so the weights are the same bit for bit. The mean reduction divides by G * R.
//
// A weight grouped across replicas holds one value per group of replicas; its gradients are
// reduced within its group only, and each group's value is updated with its own optimizer state.
// The groups (PopART's CommGroup) of R replicas, of size S:
//   all          one group of every replica (S is 0 or R)
//   consecutive  replica r in group r / S: {0..S-1}, {S..2S-1}, ...
//   orthogonal   replica r in group r % (R / S): {0, R/S, 2R/S, ...}, {1, R/S + 1, ...}, ...
//   none         each replica alone (S is 0 or 1)
// Inputs grouped likewise (inputReplicaGrouping): the replicas of one input group take the same
// data, so a step's inputs hold G * (number of input groups) micro-batches, the input group's
// micro-batch of accumulation index a being a * groups + group.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ipu/error.hpp"

namespace ipu::train {

/// PopART's CommGroupType.
enum class comm_group_type : std::uint8_t { all, consecutive, orthogonal, none };
/// What reading a grouped weight returns (PopTorch's VariableRetrievalMode): one value per group,
/// stacked along a new first axis, or one per replica.
enum class variable_retrieval_mode : std::uint8_t { one_per_group, all_replicas };

constexpr const char* to_string(comm_group_type t) noexcept {
  switch (t) {
    case comm_group_type::all: return "All";
    case comm_group_type::consecutive: return "Consecutive";
    case comm_group_type::orthogonal: return "Orthogonal";
    case comm_group_type::none: return "None";
  }
  return "?";
}

/// How a weight (or the inputs) is shared across replicas.
struct replica_grouping {
  comm_group_type type = comm_group_type::all;
  std::int64_t group_size = 0;  // replicas per group (consecutive, orthogonal)
  variable_retrieval_mode retrieval = variable_retrieval_mode::one_per_group;
  friend constexpr bool operator==(const replica_grouping&, const replica_grouping&) = default;
};

/// The groups of `g` over `replicas`, checked: how many, and which one replica `r` is in.
struct replica_groups {
  std::int64_t count = 1;
  std::int64_t size = 1;
  comm_group_type type = comm_group_type::all;
  [[nodiscard]] constexpr std::int64_t group_of(std::int64_t r) const noexcept {
    switch (type) {
      case comm_group_type::all: return 0;
      case comm_group_type::consecutive: return r / size;
      case comm_group_type::orthogonal: return r % count;
      case comm_group_type::none: return r;
    }
    return 0;
  }
};

constexpr replica_groups groups_of(const replica_grouping& g, std::int64_t replicas, const std::string& what) {
  // All and None imply their group size: another size given with them is refused, not ignored.
  if ((g.type == comm_group_type::all && g.group_size != 0 && g.group_size != replicas) ||
      (g.type == comm_group_type::none && g.group_size != 0 && g.group_size != 1))
    throw error(error_category::usage,
                what + ": " + to_string(g.type) + " groups with a group size of " + std::to_string(g.group_size) +
                    " over " + std::to_string(replicas) + " replicas",
                "replica grouping",
                g.type == comm_group_type::all ? "All is one group of every replica: give size 0 (or " + std::to_string(replicas) + ")"
                                               : "None is each replica alone: give size 0 (or 1)");
  switch (g.type) {
    case comm_group_type::all: return {1, replicas, g.type};
    case comm_group_type::none: return {replicas, 1, g.type};
    case comm_group_type::consecutive:
    case comm_group_type::orthogonal:
      if (g.group_size < 1 || replicas % g.group_size != 0)
        throw error(error_category::usage,
                    what + ": " + to_string(g.type) + " groups of " + std::to_string(g.group_size) +
                        " replicas do not divide the replication factor " + std::to_string(replicas),
                    "replica grouping", "choose a group size that divides " + std::to_string(replicas));
      return {replicas / g.group_size, g.group_size, g.type};
  }
  return {};
}

/// Replicas spread over processes (PopRun's instances; ipu/dist/ does it over MPI): this process
/// runs replicas [first, first + count) of the R, and `gather` brings every replica's outputs of
/// each micro-batch, in replica order, so that every process reduces all R replicas' gradients in
/// the order one process would and holds the same weights. count 0: every replica, here.
struct replica_instance {
  std::int64_t first = 0;
  std::int64_t count = 0;
  /// Called once per accumulation index of step `step`: `mine` holds this process's replicas'
  /// outputs (count of them, each the same number of bytes), `all` receives every replica's.
  std::function<void(std::uint64_t step, std::int64_t accumulation, std::span<const std::byte> mine,
                     std::span<std::byte> all)>
      gather{};
  /// The inputs this process is given: false, the whole step's (every input group's micro-batches,
  /// as one process takes them); true, only its own replicas' input groups (in group order, G times
  /// over), so each process reads only its rows. The training is the same either way.
  bool local_inputs = false;
  /// Called instead of `gather` when one of this process's replicas failed at that accumulation
  /// index, with the failure's message: it tells the other processes, whose `gather` then fails at
  /// once with this message instead of waiting for outputs that will not come. Unset: not told.
  std::function<void(std::uint64_t step, std::int64_t accumulation, std::size_t bytes, const std::string& message)> fail{};
};

/// Replicated training: the replication factor, the weights grouped across replicas (by name; a
/// weight not named is shared by all) and the inputs' grouping (unset: each replica its own data).
struct replication_options {
  std::int64_t replicas = 1;
  std::vector<std::pair<std::string, replica_grouping>> weights{};
  std::optional<replica_grouping> inputs{};
  replica_instance instance{};  // unset: this process runs every replica
  [[nodiscard]] bool replicated() const noexcept {
    return replicas > 1 || !weights.empty() || inputs.has_value() || instance.count != 0;
  }
};

}  // namespace ipu::train
