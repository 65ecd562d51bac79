#pragma once
// Where each op of a training step runs when the step is spread over IPUs, pipelined or phased, as
// PopTorch builds it (poptorch-features 4.4.2): the model's annotations give N forward stages (or
// phases); the backward pass gets N more, in reverse order, each backward op on the stage of the
// forward op it differentiates. The last forward stage and its backward share one stage, so a
// pipeline has 2N - 1 stages; phased execution may give that backward a phase of its own
// (useSeparateBackwardPhase), 2N phases.
//
// Positions run 0 .. stages-1 in the order a micro-batch visits them: forward stage s is position s,
// its backward 2N-2-s (2N-1-s with a separate backward phase). An op the model did not annotate
// (the loss, the accumulation, the fused update) goes where its inputs are: the latest position
// among their producers, and never before the backward pass starts when it is a backward op.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/format.hpp"
#include "ipu/graph/captures.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/train/training_graph.hpp"

namespace ipu::train {

enum class training_schedule : std::uint8_t {
  pipelined,        // PopTorch's PipelinedExecution: micro-batches overlap across stages
  serial_phased,    // SerialPhasedExecution: one phase at a time
  parallel_phased,  // ParallelPhasedExecution: phases alternate between two IPU groups
};

constexpr std::string_view to_string(training_schedule s) noexcept {
  switch (s) {
    case training_schedule::pipelined: return "pipelined";
    case training_schedule::serial_phased: return "serial phased";
    case training_schedule::parallel_phased: return "parallel phased";
  }
  return "?";
}

struct placement_options {
  training_schedule schedule = training_schedule::pipelined;
  /// Phased only (PopTorch's useSeparateBackwardPhase): the backward pass of the last forward phase
  /// runs in a phase of its own rather than in that forward phase.
  bool separate_backward_phase = false;
};

struct training_placement {
  std::size_t forward_stages = 0;   // N, from the model's annotations
  std::size_t stages = 0;           // positions a micro-batch visits: 2N - 1, or 2N
  std::vector<std::uint32_t> stage_of;  // per op of the step graph, its position
};

namespace detail {
/// The forward stage (pipelined: the stage, else the IPU, PopTorch's AutoStage.SameAsIpu) or the
/// phase an op's annotation names.
constexpr std::optional<std::int64_t> annotated_index(const annotation& w, training_schedule s) {
  if (s == training_schedule::pipelined) return w.stage ? w.stage : w.ipu;
  return w.phase;
}
}  // namespace detail

/// Places the ops of `tg`'s step graph (built by make_placed_training_graph) for `o`'s schedule.
/// Throws ipu::error (usage) for a model without annotations, stages with gaps, an op that reads
/// from a later stage (forward or backward), a separate backward phase asked of a pipeline, and, for
/// a pipeline, a gradient accumulation below the stage count (PopTorch's rule).
inline training_placement place_training_step(const training_graph& tg, const placement_options& o) {
  const graph& g = tg.step;
  const bool pipelined = o.schedule == training_schedule::pipelined;
  const std::string where = std::string(to_string(o.schedule)) + " training of '" + g.name() + "'";
  const char* unit = pipelined ? "stage" : "phase";
  if (pipelined && o.separate_backward_phase)
    throw error(error_category::usage, "a separate backward phase was asked of a pipeline", where,
                "use it with serial or parallel phased execution (a pipeline's last stage runs its own backward)");
  std::int64_t top = -1;
  std::vector<bool> used;
  for (op_id id = 0; id < tg.forward_ops; ++id)
    if (const auto s = detail::annotated_index(g.op(id).where, o.schedule)) {
      if (*s < 0)
        throw error(error_category::usage, "op " + graph::describe(g.op(id)) + " is in " + unit + " " + std::to_string(*s),
                    where, std::string("number ") + unit + "s from 0");
      top = std::max(top, *s);
      if (used.size() <= static_cast<std::size_t>(*s)) used.resize(static_cast<std::size_t>(*s) + 1, false);
      used[static_cast<std::size_t>(*s)] = true;
    }
  if (top < 0)
    throw error(error_category::usage, std::string("no op of the model names its ") + unit, where,
                pipelined ? "annotate ops with pipeline stages or IPUs (Builder scope().stage(n), PopTorch BeginBlock), "
                            "or have the automatic planner cut the model (propose_stages)"
                          : "annotate ops with phases (Builder scope().phase(n), PopTorch Phase), or have the automatic "
                            "planner cut the model (propose_phases)");
  for (std::size_t s = 0; s < used.size(); ++s)
    if (!used[s])
      throw error(error_category::usage, std::string(unit) + " " + format_uint(s) + " has no ops, but later ones do", where,
                  std::string("number ") + unit + "s from 0 without gaps");
  training_placement r;
  r.forward_stages = static_cast<std::size_t>(top) + 1;
  const auto n = r.forward_stages;
  r.stages = o.separate_backward_phase ? 2 * n : 2 * n - 1;
  const std::size_t first_backward = o.separate_backward_phase ? n : n - 1;
  if (pipelined && tg.micro_batches < static_cast<std::int64_t>(r.stages))
    throw error(error_category::usage,
                "gradient accumulation of " + std::to_string(tg.micro_batches) + " is below the pipeline's " +
                    format_uint(r.stages) + " stages (" + format_uint(n) + " forward, " + format_uint(n - 1) +
                    " backward, the last forward stage running its own backward)",
                where,
                "accumulate at least " + format_uint(r.stages) +
                    " micro-batches per weight update (Training.gradientAccumulation), as PopTorch requires");

  r.stage_of.assign(g.num_ops(), 0);
  std::vector<std::uint32_t> made_in(g.num_tensors(), 0);
  std::vector<op_id> producer(g.num_tensors(), no_op);
  for (op_id id = 0; id < g.num_ops(); ++id) {
    const auto& op = g.op(id);
    const bool backward = id >= tg.forward_ops;
    std::uint32_t latest = backward ? static_cast<std::uint32_t>(first_backward) : 0;
    auto inputs = op.inputs;
    for (auto t : implicit_inputs(g, op)) inputs.push_back(t);
    for (auto t : inputs)
      if (t != no_tensor && producer[t] != no_op) latest = std::max(latest, made_in[t]);
    std::uint32_t at = latest;
    if (const auto s = detail::annotated_index(op.where, o.schedule)) {
      const auto fs = static_cast<std::size_t>(*s);
      at = static_cast<std::uint32_t>(!backward ? fs : (o.separate_backward_phase ? 2 * n - 1 - fs : 2 * n - 2 - fs));
      for (auto t : inputs) {
        if (t == no_tensor || producer[t] == no_op || made_in[t] <= at) continue;
        const auto& p = g.op(producer[t]);
        throw error(error_category::usage,
                    std::string(backward ? "the backward of op " : "op ") + graph::describe(op) + " (forward " + unit + " " +
                        format_uint(fs) + ") would run at " + unit + " " + format_uint(at) + " of " + format_uint(r.stages) +
                        " but reads '" + g.tensor(t).name + "', made later, at " + unit + " " + format_uint(made_in[t]) +
                        " by " + graph::describe(p),
                    where,
                    std::string("annotate each op with a ") + unit +
                        " at or after the ones of the ops it reads from: a micro-batch only moves forward through the "
                        "forward " + unit + "s and back through the backward ones");
      }
    }
    r.stage_of[id] = at;
    for (auto t : op.outputs)
      if (t != no_tensor) {
        made_in[t] = at;
        producer[t] = id;
      }
  }
  return r;
}

}  // namespace ipu::train
