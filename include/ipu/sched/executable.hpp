#pragma once
// The executable: what an execution strategy decided, as plain data — independent of how it will be
// run (the executor) or stored (PopEF).
//
// It holds the model, where every op runs (IPU, pipeline stage, execution phase), the programs
// (PopART's numbering: WeightsFromHost = 0 ... Program = 5 ... WeightsToHost = 7) as per-IPU step
// lists, the host streams, inter-IPU copies and phase transfers, tensor placement on tiles, and the
// cost model's predictions. Everything is constexpr so a plan can be made and inspected inside a
// constant expression.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/data_type.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/graph/graph.hpp"

namespace ipu {

/// How the executor runs the main program's steps.
enum class schedule_kind : std::uint8_t {
  sequential,  // sharded: one IPU at a time, in op order
  pipelined,   // one worker per stage, micro-batches flowing through ring buffers
  phased,      // phases one after another, each phase's stages in parallel, with transfers between
};

constexpr std::string_view to_string(schedule_kind k) noexcept {
  switch (k) {
    case schedule_kind::sequential: return "sequential";
    case schedule_kind::pipelined: return "pipelined";
    case schedule_kind::phased: return "phased";
  }
  return "?";
}

/// PopART's program numbering, kept so PopEF program flows read the same.
enum class program_index : std::uint32_t {
  weights_from_host = 0,
  optimizer_from_host = 1,
  random_seed_from_host = 2,
  random_seed_to_host = 3,
  rng_state_from_host = 4,
  main = 5,
  rng_state_to_host = 6,
  weights_to_host = 7,
  cycle_count_to_host = 8,
};

enum class step_kind : std::uint8_t {
  compute,           // run `op` on `ipu`
  host_to_device,    // stream `tensor` from the host to `ipu`
  device_to_host,    // stream `tensor` from `ipu` to the host
  ipu_copy,          // copy `tensor` from `ipu` to `peer` over IPU-Links
  to_remote,         // move `tensor` from `ipu` to Streaming Memory (phased liveness)
  from_remote,       // bring `tensor` back from Streaming Memory to `ipu`
  sync,              // a global sync across IPUs
};

constexpr std::string_view to_string(step_kind k) noexcept {
  switch (k) {
    case step_kind::compute: return "compute";
    case step_kind::host_to_device: return "host_to_device";
    case step_kind::device_to_host: return "device_to_host";
    case step_kind::ipu_copy: return "ipu_copy";
    case step_kind::to_remote: return "to_remote";
    case step_kind::from_remote: return "from_remote";
    case step_kind::sync: return "sync";
  }
  return "?";
}

struct step {
  step_kind kind = step_kind::compute;
  op_id op = no_op;              // compute
  tensor_id tensor = no_tensor;  // streams, copies, remote transfers
  std::uint32_t ipu = 0;         // where it runs (copies: the source)
  std::uint32_t peer = 0;        // ipu_copy: the destination
  std::uint64_t bytes = 0;       // bytes moved (0 for compute)
  std::uint64_t cycles = 0;      // predicted IPU cycles
  /// The stage (index into executable::stages) the step belongs to: compute, the streams and
  /// transfers feeding or draining the stage, and the sync that closes it. Steps of the load and
  /// save programs name the first stage on their IPU.
  std::uint32_t stage = 0;
  friend constexpr bool operator==(const step&, const step&) = default;
};

struct program {
  std::string name;
  std::vector<step> steps;
  friend constexpr bool operator==(const program&, const program&) = default;
};

/// Which programs run when (PopEF's program flow).
struct program_flow {
  std::vector<std::uint32_t> load;  // e.g. [0]: weights from host
  std::vector<std::uint32_t> main;  // e.g. [5]
  std::vector<std::uint32_t> save;  // e.g. [7] when training
  friend constexpr bool operator==(const program_flow&, const program_flow&) = default;
};

/// A contiguous group of ops on one IPU (a pipeline stage, or a shard's share).
struct stage_plan {
  std::uint32_t id = 0;
  std::uint32_t ipu = 0;
  std::int64_t phase = -1;        // phased: the phase the stage belongs to; -1 otherwise
  std::vector<op_id> ops;         // in execution order
  std::vector<tensor_id> inputs;  // tensors received from earlier stages or the host
  std::vector<tensor_id> outputs; // tensors sent to later stages or the host
  std::uint64_t cycles = 0;       // predicted cycles for one micro-batch
  friend constexpr bool operator==(const stage_plan&, const stage_plan&) = default;
};

/// Where a tensor lives on the device.
struct tensor_placement {
  tensor_id tensor = no_tensor;
  std::uint32_t ipu = 0;
  std::uint32_t first_tile = 0;
  std::uint32_t num_tiles = 0;
  bool in_streaming_memory = false;  // off chip between uses (phased liveness)
  friend constexpr bool operator==(const tensor_placement&, const tensor_placement&) = default;
};

enum class stream_direction : std::uint8_t { to_device, to_host };

/// A host stream: one per graph input and per anchor.
struct host_stream {
  std::string handle;  // "h2d_<tensor>" / "d2h_<tensor>"
  tensor_id tensor = no_tensor;
  stream_direction direction = stream_direction::to_device;
  std::uint32_t ipu = 0;
  friend constexpr bool operator==(const host_stream&, const host_stream&) = default;
};

/// Per-IPU memory use predicted by the plan.
struct ipu_memory_use {
  std::uint32_t ipu = 0;
  std::uint64_t total_bytes = 0;
  std::uint64_t worst_tile_bytes = 0;
  std::uint32_t worst_tile = 0;
  friend constexpr bool operator==(const ipu_memory_use&, const ipu_memory_use&) = default;
};

/// The cost model's summary of one step of the main program.
struct prediction {
  std::uint64_t cycles_per_step = 0;      // one call of the main program (all micro-batches)
  std::uint64_t latency_cycles = 0;       // one micro-batch through the whole model
  double samples_per_second = 0;          // all replicas
  double pipeline_bubble = 0;             // fraction of the step lost to fill and drain
  double seconds_per_step = 0;            // cycles_per_step at the device clock
  double latency_seconds = 0;             // latency_cycles at the device clock
  std::uint64_t micro_batches_per_step = 0;  // per replica
  std::uint32_t slowest_stage = 0;        // index into stages of the stage bounding the throughput
  std::uint64_t streaming_memory_bytes = 0;  // per step and IPU at most (phased liveness traffic)
  friend constexpr bool operator==(const prediction&, const prediction&) = default;
};

/// The plan. Programs:
///  - load (programs[0], WeightsFromHost): one host_to_device step per variable and IPU holding it
///    (into Streaming Memory when phased liveness keeps it off chip);
///  - main (programs[5]): the steps of ONE micro-batch through the model, stage by stage in an
///    order that is valid when run one after another: per stage, the host streams and IPU-Link
///    copies of its inputs (and from_remote loads in phased execution), one compute step per op,
///    the device_to_host streams of graph outputs it produces (and to_remote stores), then a sync.
///    A step of the main program runs batches_per_step x gradient_accumulation micro-batches;
///    `schedule` says how they overlap (sequential, pipelined across stages, phases in turn);
///  - save (programs[7], WeightsToHost): one device_to_host step per variable.
/// Other PopART program slots are present and empty. IPU numbers are those of one replica
/// (0 .. ipus_per_replica - 1); replica r runs on IPUs r x ipus_per_replica onwards.
struct executable {
  std::string strategy;  // the strategy's name, e.g. "pipelined"
  schedule_kind schedule = schedule_kind::sequential;
  device_description device;
  graph model;

  std::uint32_t replication_factor = 1;
  std::uint32_t ipus_per_replica = 1;
  /// IPUs reserved on the device: ipus_per_replica x replication_factor, rounded up to a power of
  /// two when PopTorch's autoRoundNumIPUs allows (the excess reserved but idle).
  std::uint32_t ipus_reserved = 1;
  /// Replicas in a group receive the same input data (PopTorch's inputReplicaGrouping).
  std::uint32_t input_group_size = 1;
  std::uint64_t batches_per_step = 1;       // device iterations
  std::uint64_t gradient_accumulation = 1;  // micro-batches per weight update (training)
  std::uint64_t micro_batch_size = 1;       // samples per micro-batch (leading input dimension)
  bool is_inference = true;

  std::vector<std::uint32_t> op_ipu;    // per op
  std::vector<std::uint32_t> op_stage;  // per op (index into `stages`)
  std::vector<stage_plan> stages;
  std::vector<program> programs;        // indexed by program_index where PopART defines one
  program_flow flow;
  std::vector<host_stream> streams;
  std::vector<tensor_placement> placement;
  std::vector<ipu_memory_use> memory;
  prediction predicted;

  std::vector<std::uint64_t> op_cycles;  // per op: predicted cycles for one micro-batch
  std::uint32_t num_phases = 0;          // phased: phases in the main program; 0 otherwise
  /// Phased: phase p + 1 loads its tensors on the other IPU group while phase p computes (parallel
  /// phased execution, unless the liveness forbids overlap).
  bool overlapped_phase_io = false;
  /// How ops were costed: float tensors as this type (F32 or F16; unset: as the model declares
  /// them), and the type of matmul / convolution partial sums.
  std::optional<data_type> precision;
  data_type partials_type = data_type::F32;

  friend constexpr bool operator==(const executable&, const executable&) = default;
};

}  // namespace ipu
