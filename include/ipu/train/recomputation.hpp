#pragma once
// Which forward ops a pipeline's backward stages run again (recompute) and which values stay
// stashed: one rule, shared by the host executor (exec/training_executor.hpp), which runs it, and
// the training cost model (sched/training_plan.hpp), which costs it.
//
// A backward stage reruns the recomputable forward ops whose results it reads, and those they read
// from their own forward stage; what it reads from any other op stays stashed. An op is recomputable
// when it is a forward op of a forward stage but the last (whose backward shares its stage), is not
// marked annotation::checkpoint (its output is stashed and recomputation starts after it), and is
// either marked annotation::recompute (PopART's RecomputeType::Recompute: whatever the automatic
// setting) or chosen by the automatic setting (PopART's autoRecomputation).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ipu/graph/captures.hpp"
#include "ipu/graph/graph.hpp"

namespace ipu {

/// PopART's autoRecomputation for a pipeline: forward activations a backward stage reads are
/// either stashed from the forward pass until then, or recomputed by that backward stage from the
/// forward stage's inputs (which are stashed anyway). Recomputation reruns the same kernels on the
/// same inputs: results do not change, only what is kept between stages. (Named and parsed with
/// the other PopTorch options in poptorch/strategy.hpp.)
enum class recomputation : std::uint8_t {
  none,       // stash every activation the backward pass reads
  standard,   // recompute every op of the forward stages but the last (whose backward shares its stage)
  norm_only,  // recompute only the normalisations (BatchNormalization's training ops, Layer-, Instance-,
              // MeanVariance-Normalization)
  all,        // RecomputeAll (and PopART's Pipeline): every op of the forward stages but the last. In a
              // pipeline Standard's checkpoints are the stages' inputs, so the two rerun the same ops.
};

}  // namespace ipu

namespace ipu::train {

/// A normalisation, as recomputation::norm_only picks them (training-mode BatchNormalization is
/// written out as ops named "bn_train/...").
constexpr bool is_normalisation(const op_node& op) {
  return op.name.rfind("bn_train/", 0) == 0 ||
         ((op.domain.empty() || op.domain == "ai.onnx") &&
          (op.type == "LayerNormalization" || op.type == "InstanceNormalization" || op.type == "MeanVarianceNormalization"));
}

/// Where a step graph's forward ops run, as the recomputation rule needs it.
struct forward_stages_view {
  std::size_t forward_ops = 0;             // ops [0, forward_ops) of the step are the forward pass
  std::size_t stages = 0;                  // N forward stages
  std::span<const std::uint32_t> stage_of; // per op of the step; for a forward op, its forward stage
};

/// Whether a backward stage reruns forward op `id` when it reads its result.
constexpr bool recomputable(const graph& g, const forward_stages_view& f, op_id id, recomputation r) {
  if (id >= f.forward_ops || f.stage_of[id] + 1 >= f.stages) return false;
  const auto& op = g.op(id);
  if (op.where.checkpoint) return false;  // stashed: recomputation starts after it
  if (op.where.recompute) return true;    // marked: whatever the automatic setting
  if (r == recomputation::none) return false;
  if (r != recomputation::norm_only) return true;
  return is_normalisation(op);
}

/// The forward ops a backward stage running `readers` reruns, in ascending id order.
constexpr std::vector<op_id> recomputed_ops(const graph& g, const forward_stages_view& f, std::span<const op_id> readers,
                                            recomputation r) {
  std::vector<op_id> out;
  bool any = r != recomputation::none;
  for (op_id id = 0; id < f.forward_ops && !any; ++id) any = g.op(id).where.recompute;
  if (!any) return out;
  auto inputs_of = [&](op_id id) {
    auto in = g.op(id).inputs;
    for (auto t : implicit_inputs(g, g.op(id))) in.push_back(t);
    return in;
  };
  auto producer = [&](tensor_id t) { return t < g.num_tensors() ? g.tensor(t).producer : no_op; };
  std::vector<bool> take(g.num_ops(), false);
  std::vector<op_id> todo;
  for (auto id : readers)
    for (auto t : inputs_of(id))
      if (t != no_tensor && producer(t) != no_op && recomputable(g, f, producer(t), r)) todo.push_back(producer(t));
  while (!todo.empty()) {
    const auto id = todo.back();
    todo.pop_back();
    if (take[id]) continue;
    take[id] = true;
    for (auto t : inputs_of(id))
      if (t != no_tensor && producer(t) != no_op && recomputable(g, f, producer(t), r) &&
          f.stage_of[producer(t)] == f.stage_of[id])
        todo.push_back(producer(t));
  }
  for (op_id id = 0; id < g.num_ops(); ++id)
    if (take[id]) out.push_back(id);
  return out;
}

}  // namespace ipu::train
