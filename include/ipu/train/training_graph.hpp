#pragma once
// The training step as one graph: the model, its loss, the backward graph (autodiff) and the
// optimizer's updates, all ordinary ops. Weights and optimizer state are graph inputs whose
// updated values are graph outputs, so one run of the graph is one weight update; the session
// (ipu/train/session.hpp) feeds each step's outputs back as the next step's inputs.
//
// Trained: every floating-point weight of the model but the frozen ones and BatchNormalization's
// running statistics (buffers, as PyTorch calls them). BatchNormalization trains as PyTorch's
// train() mode does: it normalises with the batch's statistics (one op of the library's own,
// ipu::BatchNormalizationTraining, with a gradient rule in the op table like any op) and updates
// the running statistics each step, as buffers the step returns.
//
// A layer normalisation written out as ONNX ops (PyTorch's export below opset 17) is fused into
// one LayerNormalization first (passes/fuse_layer_normalization.hpp), so its backward is one op too,
// as PyTorch's own is.
//
// A Dropout in training mode (training_mode a constant true, as PyTorch exports train() mode) is
// written out as ops: ipu::DropoutMask draws its mask from the step input "dropout/seed" (the
// session's seed, the step and the micro-batch, fed by the session), and Y = X * Cast(mask) /
// (1 - ratio). The mask is drawn once in the forward pass and autodiff's Mul rule reuses it:
// dX = dY * mask / (1 - ratio). The Dropout's Y and mask outputs keep their tensor ids.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/known_values.hpp"
#include "ipu/half.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/ops/infer.hpp"
#include "ipu/passes/fuse_layer_normalization.hpp"
#include "ipu/train/autodiff.hpp"
#include "ipu/train/loss.hpp"
#include "ipu/train/optimizer.hpp"
#include "ipu/train/optimizer_update.hpp"
#include "ipu/train/recurrent.hpp"

namespace ipu::train {

/// PopART's automatic loss scaling (PopTorch's Training.setAutomaticLossScaling, a preview
/// feature there): after every `update_period` weight updates, the loss scale halves when more than
/// `threshold_upper_count_proportion` of the gradients' elements seen since the last change (every
/// weight's, every micro-batch's, as the backward pass made them: scaled) lie at or above
/// `bin_edge_location` times the largest finite value of their type (or are not finite), and
/// doubles otherwise. With float16 weights or gradients the scale stays at most 2^15, else at most
/// 2^64. It starts from the optimizer's loss_scaling, which it makes variable.
struct automatic_loss_scaling {
  bool enabled = false;
  double bin_edge_location = 1.0 / 16;
  double threshold_upper_count_proportion = 1e-7;
  std::int64_t update_period = 1;
  friend constexpr bool operator==(const automatic_loss_scaling&, const automatic_loss_scaling&) = default;
};

struct training_options {
  std::string output;  // the model output the loss applies to; empty: the model's only output
  loss_options loss{};
  optimizer opt = sgd{};
  std::vector<std::string> frozen;  // weights left as they are
  bool batch_norm_training = true;  // false: BatchNormalization keeps its running statistics (frozen)
  /// Micro-batches whose gradients one weight update uses (PopTorch's gradientAccumulation), and
  /// how they are combined (accumulationAndReplicationReductionType).
  std::int64_t gradient_accumulation = 1;
  accumulation_reduction reduction = accumulation_reduction::mean;
  automatic_loss_scaling auto_loss_scaling{};
  /// Seed of the step's random ops (training-mode Dropout; PopTorch's randomSeed): each Dropout's
  /// mask is drawn from (seed, step, micro-batch, which Dropout), so the same seed trains bit for
  /// bit the same and every step and micro-batch draws afresh. 0 unless set.
  std::uint64_t seed = 0;
};

/// The step input a training session feeds with U64 {seed, step, micro-batch} for each run, when
/// the model has a training-mode Dropout.
inline constexpr std::string_view dropout_seed_input = "dropout/seed";

struct trained_weight {
  std::string name;     // the graph input holding the weight (its name in the model)
  std::string updated;  // the graph output holding it after the step
  tensor_info info;
  byte_buffer initial;  // the model's value
};

struct training_graph {
  graph step;                              // one weight update
  std::vector<std::string> model_inputs;   // the model's own inputs
  std::vector<std::string> model_outputs;  // the model's outputs (the step's first outputs)
  std::string prediction;                  // the output the loss applies to
  std::string labels;                      // the labels input
  std::string loss;                        // the scalar loss output
  std::vector<trained_weight> weights;     // in the model's order
  std::vector<trained_weight> buffers;     // BatchNormalization's running statistics, updated each step
  std::vector<state_slot> state;           // optimizer state, state_slot::initial before the first step
  /// With gradient accumulation (micro_batches > 1) the step is two graphs: `step` runs once per
  /// micro-batch and adds its gradients to the accumulators (zero at the start of a weight
  /// update); `update` then applies the optimizer to the weights once, from the accumulators.
  /// With one micro-batch, `step` does both and `update` is empty.
  std::int64_t micro_batches = 1;
  std::vector<state_slot> accumulators;  // inputs and outputs of `step`; inputs of `update` by the same names
  graph update;
  optimizer compiled;  // the optimizer the step was built for: what is constant in it stays so
  /// With automatic loss scaling, the step's outputs holding each trained weight's gradient as the
  /// backward pass made it (scaled), in the order of `weights` (empty where the loss does not
  /// depend on the weight).
  std::vector<std::string> gradients;
  /// Ops [0, forward_ops) of `step` are the model's and the loss's; the backward pass, the
  /// accumulation and (with one micro-batch) the update follow them.
  std::size_t forward_ops = 0;
};

namespace detail {
/// BatchNormalization's running statistics in `g`: for each statistic tensor, the variable holding
/// its value: itself, or the variable an Identity copies (PyTorch's export shares equal initial
/// statistics that way). `copies` marks those Identity ops.
struct running_statistics_of {
  std::vector<tensor_id> source;  // per tensor: the variable with its value, or no_tensor
  std::vector<bool> is_source;    // per tensor: a variable only statistics take their value from
  std::vector<bool> copies;       // per op: an Identity that only hands a variable to a statistic
};
constexpr running_statistics_of running_statistics(const graph& g) {
  running_statistics_of r{std::vector<tensor_id>(g.num_tensors(), no_tensor), std::vector<bool>(g.num_tensors(), false),
                          std::vector<bool>(g.num_ops(), false)};
  for (const auto& op : g.ops()) {
    if (op.type != "BatchNormalization" || !(op.domain.empty() || op.domain == "ai.onnx")) continue;
    for (std::size_t i = 3; i < 5 && i < op.inputs.size(); ++i) {
      const auto t = op.inputs[i];
      if (t == no_tensor) continue;
      const auto& n = g.tensor(t);
      if (n.kind == tensor_kind::variable) {
        r.source[t] = t;
      } else if (n.producer != no_op && g.op(n.producer).type == "Identity" && !g.op(n.producer).inputs.empty() &&
                 g.op(n.producer).inputs[0] != no_tensor &&
                 g.tensor(g.op(n.producer).inputs[0]).kind == tensor_kind::variable) {
        r.source[t] = g.op(n.producer).inputs[0];
        r.copies[n.producer] = true;
      } else {
        continue;
      }
      r.is_source[r.source[t]] = true;
    }
  }
  // A variable that something else reads too is not only a statistic's value: PyTorch's export
  // hands a BatchNormalization's running variance over as an Identity of its weight when both are
  // ones at export time, and the weight still trains.
  // A consumer that reads it as a running statistic (BatchNormalization's inputs 3 and 4) is not.
  auto as_statistic_only = [&](op_id c, tensor_id t) {
    const auto& op = g.op(c);
    if (op.type != "BatchNormalization" || !(op.domain.empty() || op.domain == "ai.onnx")) return false;
    for (std::size_t i = 0; i < op.inputs.size(); ++i)
      if (op.inputs[i] == t && i != 3 && i != 4) return false;
    return true;
  };
  for (tensor_id t = 0; t < g.num_tensors(); ++t)
    if (r.is_source[t])
      for (auto c : g.tensor(t).consumers)
        if (!r.copies[c] && !as_statistic_only(c, t)) r.is_source[t] = false;
  return r;
}
}  // namespace detail

/// `g` with every Identity of a floating-point variable turned into a variable of its own holding a
/// copy of the value, under the Identity output's name (same tensor ids; the Identity ops dropped).
/// PyTorch's export shares equal initial values that way (every BatchNorm weight of ones, every bias
/// of zeros, a LayerNorm's bias and an attention block's bias...), naming the copy as the parameter
/// it stands for; PyTorch trains each of them separately, so each must be a weight of its own.
constexpr graph untie_copies(const graph& g) {
  std::vector<bool> copy(g.num_ops(), false), untied(g.num_tensors(), false), output(g.num_tensors(), false);
  for (auto t : g.outputs()) output[t] = true;
  for (op_id id = 0; id < g.num_ops(); ++id) {
    const auto& op = g.op(id);
    if (op.type != "Identity" || !(op.domain.empty() || op.domain == "ai.onnx") || op.inputs.size() != 1 ||
        op.outputs.size() != 1 || op.inputs[0] == no_tensor)
      continue;
    const auto& in = g.tensor(op.inputs[0]);
    if (in.kind != tensor_kind::variable || !detail::is_float(in.info.type) || output[op.outputs[0]]) continue;
    copy[id] = true;
    untied[op.outputs[0]] = true;
  }
  graph r(g.name());
  for (tensor_id t = 0; t < g.num_tensors(); ++t) {
    const auto& n = g.tensor(t);
    if (untied[t])
      r.add_tensor(n.name, n.info, tensor_kind::variable, g.tensor(g.op(n.producer).inputs[0]).data);
    else
      r.add_tensor(n.name, n.info, n.kind, n.data);
  }
  for (op_id id = 0; id < g.num_ops(); ++id)
    if (!copy[id]) r.add_op(g.op(id));
  for (auto t : g.outputs()) r.mark_output(t);
  r.set_opset_imports(g.opset_imports());
  return r;
}

namespace detail {
/// Writes BatchNormalization `op` (inference form, one output) of `g` out in training mode: one
/// ipu::BatchNormalizationTraining, normalising with the batch's mean and biased variance (one op
/// forward, one op backward, where ONNX ops would be a dozen passes over X each way), and the
/// running statistics updated as PyTorch does (momentum on the old value; the unbiased variance).
/// Its ops are named "bn_train/<index>/..." (recomputation's NormOnly picks them by that).
/// Returns the tensors holding the updated running mean and variance.
constexpr std::pair<tensor_id, tensor_id> batch_norm_training(graph& g, const op_node& op, std::size_t index) {
  if (op.outputs.size() != 1 || op.inputs.size() != 5)
    throw error(error_category::usage, "op " + graph::describe(op) + " is already in training form", "training graph",
                "export the model in inference mode (PyTorch's default)");
  const auto x = op.inputs[0], scale = op.inputs[1], bias = op.inputs[2], mean = op.inputs[3], var = op.inputs[4];
  const auto info = g.tensor(x).info;
  const auto type = info.type;
  const auto rank = info.shape.rank();
  if (rank < 2) throw error(error_category::shape, "BatchNormalization of a rank-" + format_uint(rank) + " input", "op " + graph::describe(op));
  float eps = 1e-5f;
  double momentum = 0.9;
  if (const auto* a = op.find_attribute("epsilon"))
    if (const auto* v = std::get_if<float>(&a->value)) eps = *v;
  if (const auto* a = op.find_attribute("momentum"))
    if (const auto* v = std::get_if<float>(&a->value)) momentum = *v;
  std::int64_t n = info.shape[0];
  for (std::size_t i = 2; i < rank; ++i) n *= info.shape[i];
  const std::string prefix = "bn_train/" + format_uint(index) + "/";
  std::size_t k = 0;
  auto scalar = [&](double v) {
    byte_buffer data;
    if (type == data_type::F64) {
      data = byte_buffer::from_values(std::span<const double>(&v, 1));
    } else if (type == data_type::F16) {
      const half h(static_cast<float>(v));
      data = byte_buffer::from_values(std::span<const half>(&h, 1));
    } else {
      const auto f = static_cast<float>(v);
      data = byte_buffer::from_values(std::span<const float>(&f, 1));
    }
    return g.add_tensor(prefix + "c" + format_uint(k++), tensor_info{type, shape{}}, tensor_kind::constant, std::move(data));
  };
  auto emit = [&](std::string_view t, std::string_view domain, std::vector<tensor_id> in, std::vector<attribute> at,
                  std::vector<tensor_id> out) {
    op_node o;
    o.type = std::string(t);
    o.domain = std::string(domain);
    if (!domain.empty()) o.opset = 1;
    o.name = prefix + std::string(t) + format_uint(k++);
    o.inputs = std::move(in);
    o.attributes = std::move(at);
    o.where = op.where;
    o.outputs.assign(out.size(), no_tensor);
    const auto infos = infer_outputs(g, o);
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i] != no_tensor) {
        o.outputs[i] = out[i];
        continue;
      }
      std::string name = o.name;  // appended piece by piece: ":" + std::string trips GCC 12's -Wrestrict
      if (i != 0) name.append(1, ':').append(format_uint(i));
      o.outputs[i] = g.add_tensor(name, infos.at(i));
    }
    auto r = o.outputs;
    g.add_op(std::move(o));
    return r;
  };
  const auto made = emit("BatchNormalizationTraining", "ipu", {x, scale, bias}, {{"epsilon", eps}},
                         {op.outputs[0], no_tensor, no_tensor});
  const auto batch_mean = made[1], batch_var = made[2];
  const auto keep_old = scalar(momentum), take_new = scalar(1 - momentum);
  auto blend = [&](tensor_id old, tensor_id batch) {
    const auto kept = emit("Mul", "", {old, keep_old}, {}, {no_tensor})[0];
    return emit("Add", "", {kept, emit("Mul", "", {batch, take_new}, {}, {no_tensor})[0]}, {}, {no_tensor})[0];
  };
  const auto unbiased = emit("Mul", "", {batch_var, scalar(n > 1 ? static_cast<double>(n) / static_cast<double>(n - 1) : 1.0)},
                             {}, {no_tensor})[0];
  return {blend(mean, batch_mean), blend(var, unbiased)};
}

/// Whether the Dropout `op` of `g` runs in training mode: training_mode given and a constant true.
/// One computed at run time cannot be written out, and is refused.
constexpr bool dropout_in_training(const graph& g, const op_node& op, std::string_view where) {
  if (op.type != "Dropout" || !(op.domain.empty() || op.domain == "ai.onnx")) return false;
  if (op.inputs.size() < 3 || op.inputs[2] == no_tensor) return false;
  const auto* d = known_data(g, op.inputs[2]);
  if (!d || d->size() != 1)
    throw error(error_category::usage, "the training_mode of Dropout " + graph::describe(op) + " is computed at run time",
                std::string(where), "give training_mode as a constant (PyTorch's export does)");
  return d->load<std::uint8_t>(0) != 0;
}

/// Writes the training-mode Dropout `op` (the step's `stream`-th) of `g` out as ops: its mask
/// drawn by ipu::DropoutMask from `seed`, then Y = X * (Cast(mask) * 1 / (1 - ratio)).
constexpr void dropout_training(graph& g, const op_node& op, std::int64_t stream, tensor_id seed, std::string_view where) {
  const auto x = op.inputs.at(0);
  const auto type = g.tensor(x).info.type;
  if (!is_float(type))
    throw error(error_category::usage, "Dropout " + graph::describe(op) + " of a " + std::string(to_string(type)) + " tensor",
                std::string(where), "apply training-mode Dropout to F16, F32 or F64 tensors");
  double ratio = 0.5;  // ONNX's default
  tensor_id ratio_tensor = no_tensor;
  if (op.inputs.size() > 1 && op.inputs[1] != no_tensor) {
    ratio_tensor = op.inputs[1];
    const auto known = known_float_scalar(g, ratio_tensor);
    if (!known)
      throw error(error_category::usage, "the ratio of Dropout " + graph::describe(op) + " is not a constant float scalar",
                  std::string(where), "give the ratio as a constant (PyTorch's export does)");
    ratio = *known;
  }
  if (!(ratio >= 0 && ratio < 1))
    throw error(error_category::usage, "Dropout " + graph::describe(op) + " has ratio " + std::to_string(ratio) +
                                           ", outside [0, 1)",
                std::string(where), "give a ratio in [0, 1): the probability of zeroing an element");
  const std::string prefix = "dropout/" + format_uint(static_cast<std::uint64_t>(stream)) + "/";
  auto scalar = [&](std::string_view name, data_type t, double v) {
    byte_buffer data;
    if (t == data_type::F64) data = byte_buffer::from_values(std::span<const double>(&v, 1));
    else if (t == data_type::F32) {
      const float f = static_cast<float>(v);
      data = byte_buffer::from_values(std::span<const float>(&f, 1));
    } else {
      const half h(static_cast<float>(v));
      data = byte_buffer::from_values(std::span<const half>(&h, 1));
    }
    return g.add_tensor(prefix + std::string(name), tensor_info{t, {}}, tensor_kind::constant, std::move(data));
  };
  if (ratio_tensor == no_tensor) ratio_tensor = scalar("ratio", data_type::F32, ratio);
  std::size_t muls = 0;
  auto emit = [&](std::string_view domain, std::string_view t, std::vector<tensor_id> in, std::vector<attribute> at,
                  tensor_id out) {
    op_node o;
    o.domain = std::string(domain);
    o.type = std::string(t);
    o.name = prefix + std::string(t) + (t == "Mul" ? format_uint(muls++) : std::string());
    o.inputs = std::move(in);
    o.attributes = std::move(at);
    o.where = op.where;
    o.outputs = {no_tensor};
    if (out == no_tensor) out = g.add_tensor(o.name, infer_outputs(g, o).at(0));
    o.outputs[0] = out;
    g.add_op(std::move(o));
    return out;
  };
  const auto mask_out = op.outputs.size() > 1 ? op.outputs[1] : no_tensor;
  const auto mask = emit("ipu", "DropoutMask", {x, ratio_tensor, seed}, {{"stream", stream}}, mask_out);
  const auto keep = emit("", "Cast", {mask}, {{"to", onnx_code_of(type)}}, no_tensor);
  // The scale, rounded once to X's type: a kept element is X * (1 / (1 - ratio)) exactly so.
  const auto factor = emit("", "Mul", {keep, scalar("scale", type, 1.0 / (1.0 - ratio))}, {}, no_tensor);
  (void)emit("", "Mul", {x, factor}, {}, op.outputs.at(0));
}

}  // namespace detail

/// `o` as the step is built for it: automatic loss scaling feeds the loss scale each step, so
/// the optimizer's loss_scaling is variable whatever it was given as.
constexpr training_options as_compiled(training_options o) {
  if (o.auto_loss_scaling.enabled) std::visit([](auto& x) { x.loss_scaling.mark_as_variable(); }, o.opt);
  return o;
}

namespace detail {
constexpr training_graph build_training_graph(const graph& exported, const training_options& given, bool placed);
}  // namespace detail

/// Builds the training step of `model`, which must say nothing of where its ops run.
constexpr training_graph make_training_graph(const graph& exported, const training_options& given) {
  return detail::build_training_graph(exported, given, false);
}

/// Builds the training step of a model whose ops carry IPU, stage or phase annotations, for an
/// executor that places it (ipu/exec/training_executor.hpp): the annotations stay on the step's
/// ops, and each backward op carries the annotation of the forward op it differentiates.
constexpr training_graph make_placed_training_graph(const graph& exported, const training_options& given) {
  return detail::build_training_graph(exported, given, true);
}

namespace detail {
/// A scope of `b` placing what it builds as `w` places an op (placed training: the loss goes where
/// the prediction is made, a weight's accumulation and update where its gradient is).
constexpr builder::scope_guard placed_like(builder& b, const annotation& w) {
  auto s = b.scope();
  if (w.ipu) s.ipu(*w.ipu);
  if (w.stage) s.stage(*w.stage);
  if (w.phase) s.phase(*w.phase);
  if (!w.block.empty()) s.block(w.block);
  return s;
}
constexpr annotation where_made(const graph& g, tensor_id t) {
  const auto p = g.tensor(t).producer;
  return p == no_op ? annotation{} : g.op(p).where;
}
}  // namespace detail

constexpr training_graph detail::build_training_graph(const graph& exported, const training_options& given, bool placed) {
  const training_options o = as_compiled(given);
  const graph model = passes::fuse_layer_normalization(untie_copies(exported), {.statistics = true});
  const std::string where = "training graph of '" + model.name() + "'";
  check(o.opt);
  if (o.gradient_accumulation < 1)
    throw error(error_category::usage, "gradient accumulation of " + std::to_string(o.gradient_accumulation), where,
                "accumulate over at least 1 micro-batch");
  if (const auto& als = o.auto_loss_scaling; als.enabled) {
    if (!(als.bin_edge_location > 0 && als.bin_edge_location <= 1))
      throw error(error_category::usage, "automatic loss scaling's bin edge location is " + std::to_string(als.bin_edge_location),
                  where, "use a fraction of the type's range in (0, 1]");
    if (!(als.threshold_upper_count_proportion >= 0 && als.threshold_upper_count_proportion <= 1))
      throw error(error_category::usage,
                  "automatic loss scaling's threshold upper count proportion is " +
                      std::to_string(als.threshold_upper_count_proportion),
                  where, "use a proportion in [0, 1]");
    if (als.update_period < 1)
      throw error(error_category::usage, "automatic loss scaling's update period is " + std::to_string(als.update_period),
                  where, "update the scale every 1 or more weight updates");
  }
  for (const auto& op : model.ops())
    if (!placed && (op.where.ipu || op.where.stage || op.where.phase || !op.where.block.empty()))  // a checkpoint places nothing
      throw error(error_category::usage, "op " + graph::describe(op) + " carries an IPU, stage or phase annotation",
                  where, "train it with ipu::placed_training_session (pipelined or phased), or drop the annotations");
  for (const auto& f : o.frozen)
    if (!model.find_tensor(f) || model.tensor(*model.find_tensor(f)).kind != tensor_kind::variable)
      throw error(error_category::usage, "frozen weight '" + f + "' is not a weight of the model", where,
                  "name weights as the model does");

  training_graph r;
  // The output the loss applies to.
  if (model.outputs().empty()) throw error(error_category::usage, "the model has no outputs", where);
  tensor_id prediction = no_tensor;
  for (auto t : model.outputs()) {
    r.model_outputs.push_back(model.tensor(t).name);
    if (model.tensor(t).name == o.output) prediction = t;
  }
  if (o.output.empty()) {
    if (model.outputs().size() != 1) {
      std::string names;
      for (const auto& n : r.model_outputs) names += (names.empty() ? "" : ", ") + n;
      throw error(error_category::usage, "the model has " + format_uint(model.outputs().size()) + " outputs", where,
                  "name the one the loss applies to: " + names);
    }
    prediction = model.outputs().front();
  }
  if (prediction == no_tensor) {
    std::string names;
    for (const auto& n : r.model_outputs) names += (names.empty() ? "" : ", ") + n;
    throw error(error_category::usage, "the model has no output named '" + o.output + "'", where,
                "the outputs are: " + names);
  }
  r.prediction = model.tensor(prediction).name;
  for (auto t : model.inputs()) r.model_inputs.push_back(model.tensor(t).name);

  // The model again, its trainable weights turned into inputs (same tensor and op ids).
  const auto stats = detail::running_statistics(model);
  graph g(model.name());
  std::vector<tensor_id> weights;
  for (tensor_id t = 0; t < model.num_tensors(); ++t) {
    const auto& n = model.tensor(t);
    const bool trained = n.kind == tensor_kind::variable && detail::is_float(n.info.type) && !stats.is_source[t] &&
                         std::find(o.frozen.begin(), o.frozen.end(), n.name) == o.frozen.end();
    const bool buffer = o.batch_norm_training && stats.source[t] != no_tensor;
    if (trained) {
      g.add_tensor(n.name, n.info, tensor_kind::input);
      weights.push_back(t);
      r.weights.push_back({n.name, {}, n.info, n.data});
    } else if (buffer) {
      g.add_tensor(n.name, n.info, tensor_kind::input);
      r.buffers.push_back({n.name, {}, n.info, model.tensor(stats.source[t]).data});
    } else {
      g.add_tensor(n.name, n.info, n.kind, n.data);
    }
  }
  if (weights.empty()) throw error(error_category::usage, "the model has no trainable weights", where);
  std::vector<tensor_id> buffer_updates;
  std::size_t bn = 0;
  tensor_id dropout_seed = no_tensor;
  std::int64_t dropouts = 0;
  for (op_id id = 0; id < model.num_ops(); ++id) {
    const auto& op = model.op(id);
    if (o.batch_norm_training && stats.copies[id]) continue;  // its output is a buffer input now
    if (detail::dropout_in_training(model, op, where)) {
      if (dropout_seed == no_tensor) {
        if (model.find_tensor(dropout_seed_input))
          throw error(error_category::usage, "the model has a tensor named '" + std::string(dropout_seed_input) + "'",
                      where, "rename it: the training step feeds its Dropout seed under that name");
        dropout_seed = g.add_tensor(std::string(dropout_seed_input), tensor_info{data_type::U64, shape{3}}, tensor_kind::input);
      }
      detail::dropout_training(g, op, dropouts++, dropout_seed, where);
      continue;
    }
    if (is_recurrent(op)) {  // written out unrolled (train/recurrent.hpp): autodiff sees ordinary ops
      write_out_recurrent(g, op, "recurrent/" + format_uint(id) + "/");
      continue;
    }
    const bool is_bn = op.type == "BatchNormalization" && (op.domain.empty() || op.domain == "ai.onnx");
    if (!is_bn || !o.batch_norm_training) {
      g.add_op(op);
      continue;
    }
    const auto [new_mean, new_var] = detail::batch_norm_training(g, op, bn++);
    for (auto& b : r.buffers) {
      const bool is_mean = b.name == model.tensor(op.inputs[3]).name, is_var = b.name == model.tensor(op.inputs[4]).name;
      if (!is_mean && !is_var) continue;
      if (!b.updated.empty())
        throw error(error_category::usage, "running statistic '" + b.name + "' is shared by several BatchNormalization ops",
                    where, "give each BatchNormalization its own statistics");
      b.updated = g.tensor(is_mean ? new_mean : new_var).name;
    }
  }
  for (auto t : model.outputs()) g.mark_output(t);
  auto opsets = model.opset_imports();
  if (dropouts > 0 || bn > 0) opsets.push_back({"ipu", 1});  // ipu::DropoutMask, ipu::BatchNormalizationTraining
  g.set_opset_imports(std::move(opsets));

  // The loss.
  builder lb(std::move(g));
  auto loss_scope = detail::placed_like(lb, placed ? detail::where_made(lb.current(), prediction) : annotation{});
  auto lo = o.loss;
  if (lo.kind != loss_kind::output && lb.current().find_tensor(lo.labels_name))
    throw error(error_category::usage, "the model already has a tensor named '" + lo.labels_name + "'", where,
                "name the labels input otherwise (loss_options::labels_name)");
  auto lt = add_loss(lb, prediction, lo);
  // A loss the model computed is one of its outputs already; the step returns it once more, as
  // the loss, through an Identity of its own.
  if (lo.kind == loss_kind::output) lt.loss = lb.identity(lt.loss);
  if (lt.labels != no_tensor) r.labels = lb.name_of(lt.labels);
  r.loss = lb.name_of(lt.loss);
  lb.add_output(lt.loss);
  // Loss scaling: the backward pass starts from the loss times the scale (the optimizer's
  // gradient_scale divides it out again before the update).
  auto differentiated = lt.loss;
  for (const auto& s : step_scalars(o.opt, 0))
    if (s.name == "optimizer/loss_scaling" && (s.variable || s.value != 1)) {
      const auto type = lb.info(lt.loss).type;
      const auto scale = s.variable ? lb.add_input_tensor({type, {}}, detail::scalar_name(s.name, type))
                                    : lb.add_constant(detail::scalar_of(type, s.value), detail::scalar_name(s.name, type));
      differentiated = lb.mul(lt.loss, scale, "loss/scaled");
    }
  { auto done = std::move(loss_scope); }
  g = std::move(lb).build();

  // The backward graph, then the updates: in the same graph, or, with gradient accumulation, in a
  // graph of their own that reads the accumulated gradients.
  r.forward_ops = g.num_ops();
  const auto grads = add_gradients(g, differentiated, weights);
  r.micro_batches = o.gradient_accumulation;
  const update_options how{o.gradient_accumulation, o.reduction};
  const bool fused = o.gradient_accumulation == 1;
  builder ub(std::move(g));
  builder separate(model.name() + "/update");
  std::vector<tensor_id> updated;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (grads[i] == no_tensor) continue;  // the loss does not depend on it: left unchanged, as PyTorch does
    const auto grad_scope = detail::placed_like(ub, placed ? detail::where_made(ub.current(), grads[i]) : annotation{});
    update_tensors u;
    if (fused) {
      u = add_update(ub, o.opt, weights[i], grads[i], how);
      r.weights[i].updated = ub.name_of(u.new_weight);
      updated.push_back(u.new_weight);
    } else {
      const auto& w = r.weights[i];
      const auto accum_type = std::visit([](const auto& x) { return x.accum_type; }, o.opt).value_or(w.info.type);
      const tensor_info accum_info{accum_type, w.info.shape};
      const auto in = ub.add_input_tensor(accum_info, w.name + "/accum");
      const auto g_i = ub.info(grads[i]).type == accum_type ? grads[i] : ub.cast(grads[i], accum_type);
      const auto out = ub.add(in, g_i, w.name + "/accum/next");
      r.accumulators.push_back({w.name + "/accum", ub.name_of(out), accum_info, 0});
      u = add_update(separate, o.opt, separate.add_input_tensor(w.info, w.name),
                     separate.add_input_tensor(accum_info, w.name + "/accum"), how);
      r.weights[i].updated = separate.name_of(u.new_weight);
      updated.push_back(u.new_weight);
    }
    for (auto& s : u.state) r.state.push_back(std::move(s));
  }
  if (o.auto_loss_scaling.enabled) {
    r.gradients.assign(weights.size(), {});
    for (std::size_t i = 0; i < weights.size(); ++i)
      if (grads[i] != no_tensor) {
        r.gradients[i] = ub.name_of(grads[i]);
        ub.add_output(grads[i]);
      }
  }
  builder& ob = fused ? ub : separate;
  for (auto t : updated) ob.add_output(t);
  for (const auto& s : r.state) ob.add_output(*ob.current().find_tensor(s.output));
  for (const auto& a : r.accumulators) ub.add_output(*ub.current().find_tensor(a.output));
  for (const auto& b : r.buffers) {
    if (b.updated.empty())
      throw error(error_category::usage, "running statistic '" + b.name + "' is read by no BatchNormalization", where);
    ub.add_output(*ub.current().find_tensor(b.updated));
  }
  r.step = std::move(ub).build();
  if (!fused) r.update = std::move(separate).build();
  r.compiled = o.opt;
  return r;
}

}  // namespace ipu::train
