#pragma once
// A training session on the host device: the training step (ipu/train/training_graph.hpp) compiled
// once for the CPU device, run once per weight update with the weights and optimizer state it
// returned the step before. A step with training-mode Dropout is fed its seed input each run:
// {training_options::seed, step, micro-batch}, so each run draws its own masks, reproducibly.
//
//   ipu::train::training_session s(model, {.output = "fc", .loss = {.kind = loss_kind::mse}});
//   for (...) { auto r = s.run({{"x", x.view()}}, target.view()); use(r.loss); }
//   ipu::graph trained = s.trained_model();  // the model with its trained weights
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <type_traits>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/half.hpp"
#include "ipu/tensor.hpp"
#include "ipu/train/replication.hpp"
#include "ipu/train/training_graph.hpp"

namespace ipu::train {

/// Rows [first, first + n) of `all` (stacked samples, batch first), wrapping around at the end: the
/// micro-batch a step takes from a data set.
inline host_tensor take_rows(const host_tensor& all, std::int64_t first, std::int64_t n) {
  const auto& s = all.info().shape;
  if (s.rank() == 0 || s[0] < 1 || n < 1 || first < 0)
    throw error(error_category::usage,
                "cannot take " + std::to_string(n) + " rows from row " + std::to_string(first) + " of " + to_string(all.info()),
                "take_rows", "give stacked samples (batch first) and a positive number of rows");
  auto dims = s.dims();
  const auto total = dims[0];
  dims[0] = n;
  host_tensor t(tensor_info{all.info().type, shape(dims)});
  const auto row_bytes = t.bytes().size() / static_cast<std::size_t>(n);
  const auto start = first % total;  // first + i could overflow
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(t.bytes().data() + static_cast<std::size_t>(i) * row_bytes,
                all.bytes().data() + static_cast<std::size_t>((start + i % total) % total) * row_bytes, row_bytes);
  return t;
}

/// What a step returns of the model's outputs, one per micro-batch (PopTorch's OutputMode for a
/// training model): the last micro-batch's (Final, the default), all of them stacked along the
/// first axis, or their sum.
enum class output_mode : std::uint8_t { final, all, sum };

/// What one step returns.
struct step_result {
  /// The loss the update descended, before the update: the mean (or, with sum reduction, the sum)
  /// of the micro-batches' losses.
  double loss = 0;
  std::vector<double> micro_batch_losses;
  std::vector<host_tensor> outputs;  // the model's outputs, before the update, by the output mode
};

class training_session {
 public:
  explicit training_session(const graph& model, training_options options = {}, cpu::device_options device = {},
                            output_mode outputs = output_mode::final)
      : training_session(model, std::move(options), device, outputs, replication_options{}) {}

  /// A replicated session (ipu/train/replication.hpp): `replication.replicas` replicas run each
  /// step's micro-batches on host threads at once, each on a CPU device of its own with `device`'s
  /// options (the same kernel threads as one replica: the device's results depend on them). A step takes gradient_accumulation * replicas micro-batches (times the input
  /// groups instead of the replicas when the inputs are grouped), in the order replication.hpp
  /// describes, and updates the weights as one replica accumulating all of them would, bit for bit.
  /// Each replica keeps its own BatchNormalization running statistics (each updated by its own
  /// micro-batches, as PopTorch's replicas do); buffer() and trained_model() give replica 0's.
  training_session(const graph& model, training_options options, cpu::device_options device, output_mode outputs,
                   replication_options replication)
      : options_(as_compiled(replicated_options(std::move(options), replication))), model_(model),
        tg_(make_training_graph(model, options_)), mode_(outputs), replication_(std::move(replication)),
        step_(tg_.step, per_replica(device, replication_.replicas)) {
    for (const auto& op : model.ops())
      if (op.where.recompute)
        throw error(error_category::usage,
                    "op " + graph::describe(op) + " is marked for recomputation (RecomputeType::Recompute), "
                        "which applies to a pipelined training step's backward stages",
                    where(), "train it with ipu::placed_training_session, pipelined, or drop the mark");
    if (tg_.micro_batches > 1) update_.emplace(tg_.update, device);
    if (mode_ == output_mode::sum && tg_.micro_batches > 1)
      for (auto t : tg_.step.outputs())
        if (const auto type = tg_.step.tensor(t).info.type; tg_.step.tensor(t).kind != tensor_kind::input &&
            std::find(tg_.model_outputs.begin(), tg_.model_outputs.end(), tg_.step.tensor(t).name) != tg_.model_outputs.end() &&
            type != data_type::F32 && type != data_type::F64 && type != data_type::S32 && type != data_type::S64)
          throw error(error_category::usage,
                      "output '" + tg_.step.tensor(t).name + "' is " + std::string(ipu::to_string(type)) +
                          ": output_mode::sum adds F32, F64, S32 or S64 outputs",
                      where(), "use output_mode::final or output_mode::all");
    for (const auto& w : tg_.weights) weights_.push_back(initial_value(w.name, w.info, w.initial, "weight"));
    for (const auto& b : tg_.buffers) buffers_.push_back(initial_value(b.name, b.info, b.initial, "buffer"));
    if (replication_.replicated()) set_up_replicas(device);
    reset_state();
    for (const auto& a : tg_.accumulators) accumulators_.emplace_back(a.info);
    step_in_ = bind_inputs(step_.model());
    step_out_ = bind_outputs(step_.model());
    if (update_) {
      update_in_ = bind_inputs(update_->model());
      update_out_ = bind_outputs(update_->model());
    }
  }

  [[nodiscard]] const training_graph& graph_of_step() const noexcept { return tg_; }
  [[nodiscard]] std::uint64_t steps() const noexcept { return steps_; }
  [[nodiscard]] const optimizer& current_optimizer() const noexcept { return options_.opt; }
  /// The loss scale the next step uses (automatic loss scaling changes it).
  [[nodiscard]] double loss_scaling() const noexcept {
    return std::visit([](const auto& x) { return x.loss_scaling.value(); }, options_.opt);
  }

  /// Changes the optimizer's variable attributes for the next steps (PopART's
  /// updateOptimizerFromHost, PopTorch's setOptimizer). What is compiled into the step (the kind,
  /// the flags and types, which attributes are variable, the constant attributes' values) cannot
  /// change: that needs a new session.
  void set_optimizer(const optimizer& given) {
    auto next = options_;
    next.opt = given;
    const auto o = as_compiled(std::move(next)).opt;  // automatic loss scaling: its loss scale variable
    check(o);
    check_same_step(tg_.compiled, o, where());
    options_.opt = o;
  }

  /// One weight update of a model that computes its own loss (loss_kind::output): its inputs only.
  step_result run(const std::vector<std::pair<std::string, const_tensor_view>>& inputs) { return run(inputs, {}); }

  /// One weight update from the micro-batches of a step: the model's inputs by name, and the labels.
  /// With gradient accumulation G each holds G micro-batches stacked along the first axis (G times
  /// the model's batch, as PopTorch takes them), used in order.
  step_result run(const std::vector<std::pair<std::string, const_tensor_view>>& inputs, const_tensor_view labels) {
    if (tg_.labels.empty() && labels.data() != nullptr)
      throw error(error_category::usage, "labels given, but the loss is an output of the model and takes none", where(),
                  "feed what the loss reads as model inputs, and call run(inputs)");
    if (!tg_.labels.empty() && labels.data() == nullptr)
      throw error(error_category::usage, "no labels given; the " + std::string(to_string(options_.loss.kind)) +
                                             " loss reads them from input '" + tg_.labels + "'",
                  where(), "pass the step's labels");
    std::vector<const_tensor_view> given(tg_.model_inputs.size());
    std::vector<bool> seen(tg_.model_inputs.size(), false);
    for (const auto& [name, view] : inputs) {
      std::size_t i = 0;
      while (i < tg_.model_inputs.size() && tg_.model_inputs[i] != name) ++i;
      if (i == tg_.model_inputs.size())
        throw error(error_category::usage, "the model has no input named '" + name + "'", where(),
                    "its inputs are: " + join(tg_.model_inputs));
      if (seen[i]) throw error(error_category::usage, "input '" + name + "' is given twice", where(), "give each input once");
      seen[i] = true;
      given[i] = view;
    }
    for (std::size_t i = 0; i < seen.size(); ++i)
      if (!seen[i])
        throw error(error_category::usage, "input '" + tg_.model_inputs[i] + "' is not given", where(),
                    "give every model input: " + join(tg_.model_inputs));
    const auto micro = tg_.micro_batches;
    // The micro-batches the inputs hold: with replicas, G per input group.
    const auto given_micro = replicated_ ? micro / replicas_ * given_groups() : micro;
    // Each micro-batch is a view into the caller's rows: no copy.
    auto micro_batch = [&](const const_tensor_view& all, const std::string& name, std::int64_t j) {
      if (given_micro == 1) return all;
      const auto& want = tensor_of(step_.model(), name).info;
      const auto dims = want.shape.dims();
      // Compared by division: the number of rows times the micro-batches could overflow.
      const bool ok = !dims.empty() && all.info().type == want.type && all.info().shape.rank() == dims.size() &&
                      all.data() != nullptr && all.info().shape[0] % given_micro == 0 &&
                      all.info().shape[0] / given_micro == dims[0] &&
                      std::equal(dims.begin() + 1, dims.end(), all.info().shape.dims().begin() + 1);
      if (!ok)
        throw error(error_category::shape,
                    "'" + name + "' is " + to_string(all.info()) + "; a step takes " + std::to_string(given_micro) +
                        " micro-batches of " + to_string(want) +
                        (replicated_ ? " (gradient accumulation " + std::to_string(micro / replicas_) + " times " +
                                           std::to_string(given_groups()) +
                                           (replication_.instance.local_inputs ? " input groups of this process's replicas)"
                                                                               : " input groups)")
                                     : std::string()),
                    where(), "stack the step's micro-batches along the first axis");
      return const_tensor_view(want, all.data() + static_cast<std::size_t>(j) * want.num_bytes());
    };
    if (replicated_) return run_replicated(given, labels, micro_batch);
    const auto scalars = step_scalars(options_.opt, steps_, micro, options_.reduction);
    std::vector<host_tensor> scalar_values;  // kept alive for the views below
    step_result r;
    // What the step changes is kept aside and taken only once the whole step has run: a failure in
    // any micro-batch or in the update leaves the session as it was.
    pending next{std::vector<std::optional<host_tensor>>(weights_.size()),
                 std::vector<std::optional<host_tensor>>(state_.size()), buffers_};
    for (auto& a : accumulators_) std::fill(a.bytes().begin(), a.bytes().end(), std::byte{0});
    for (std::int64_t j = 0; j < micro; ++j) {
      auto views = views_for(step_in_, step_.model(), scalars, scalar_values, next.buffers, [&](std::size_t i) {
        return micro_batch(given[i], tg_.model_inputs[i], j);
      }, tg_.labels.empty() ? const_tensor_view{} : micro_batch(labels, tg_.labels, j), j);
      auto out = step_.run(std::span<const const_tensor_view>(views));
      take_outputs(step_out_, out, r, j, next);
    }
    if (update_) {
      auto views = views_for(update_in_, update_->model(), scalars, scalar_values, next.buffers, nullptr, {}, 0);
      auto out = update_->run(std::span<const const_tensor_view>(views));
      take_outputs(update_out_, out, r, 0, next);
    }
    double total = 0;
    for (double l : r.micro_batch_losses) total += l;
    r.loss = options_.reduction == accumulation_reduction::mean ? total / static_cast<double>(micro) : total;
    // The replaced values go back to the device that produced their successors, whose next step
    // writes its outputs into them rather than into freshly allocated memory.
    cpu::device& producer = update_ ? *update_ : step_;
    for (std::size_t i = 0; i < weights_.size(); ++i)
      if (next.weights[i]) {
        producer.recycle(std::move(weights_[i]));
        weights_[i] = std::move(*next.weights[i]);
      }
    for (std::size_t i = 0; i < state_.size(); ++i)
      if (next.state[i]) {
        producer.recycle(std::move(state_[i]));
        state_[i] = std::move(*next.state[i]);
      }
    buffers_ = std::move(next.buffers);
    previous_momentum_ = momentum();
    ++steps_;
    update_loss_scale(next);
    return r;
  }

  /// The current value of trained weight `name`. A weight grouped across replicas reads as its
  /// retrieval mode says: one value per group, or one per replica, stacked along a new first axis.
  [[nodiscard]] const host_tensor& weight(std::string_view name) const {
    for (std::size_t i = 0; i < weights_.size(); ++i)
      if (tg_.weights[i].name == name) return replicated_ && all_replicas_[i] ? readout_[i] : weights_[i];
    throw error(error_category::usage, "no trained weight named '" + std::string(name) + "'", where());
  }
  [[nodiscard]] std::vector<std::string> weight_names() const {
    std::vector<std::string> n;
    for (const auto& w : tg_.weights) n.push_back(w.name);
    return n;
  }
  /// Replaces trained weight `name` (PopART's writeWeights, PopTorch's copyWeightsToDevice). A
  /// weight grouped across replicas takes one value for every group, or one per group (stacked),
  /// or, read out for all replicas, one per replica (each group takes its first replica's).
  void set_weight(std::string_view name, const_tensor_view value) {
    for (std::size_t i = 0; i < weights_.size(); ++i)
      if (tg_.weights[i].name == name) {
        const auto& plain = tg_.weights[i].info;
        const auto what = "weight '" + std::string(name) + "'";
        if (!replicated_ || value.info() == stored_info(plain, i) || (!stacked_[i] && !all_replicas_[i])) {
          weights_[i] = copy_checked(value, stored_info(plain, i), what);
        } else if (value.info() == plain || (all_replicas_[i] && value.info().shape.rank() == plain.shape.rank() + 1 &&
                                              value.info().shape[0] == replicas_)) {
          const auto per_replica = value.info() != plain;
          const auto whole = copy_checked(value, value.info(), what);
          host_tensor t(stored_info(plain, i));
          std::vector<bool> seen(static_cast<std::size_t>(weight_groups_[i].count), false);
          for (std::int64_t r = 0; r < replicas_; ++r) {
            const auto g = weight_groups_[i].group_of(r);
            if (seen[static_cast<std::size_t>(g)]) continue;
            seen[static_cast<std::size_t>(g)] = true;
            std::memcpy(t.bytes().data() + static_cast<std::size_t>(stacked_[i] ? g : 0) * plain.num_bytes(),
                        whole.bytes().data() + static_cast<std::size_t>(per_replica ? r : 0) * plain.num_bytes(),
                        plain.num_bytes());
          }
          weights_[i] = std::move(t);
        } else {
          throw error(error_category::usage,
                      what + " is " + to_string(value.info()) + " but must be " + to_string(plain) + " (every group), " +
                          to_string(stored_info(plain, i)) + " (one per group)" +
                          (all_replicas_[i] ? " or one per replica" : ""),
                      where(), "give a tensor of one of those types and shapes");
        }
        refresh_readout();
        return;
      }
    throw error(error_category::usage, "no trained weight named '" + std::string(name) + "'", where(),
                "its weights are: " + join(weight_names()));
  }
  /// The current value of buffer `name` (a BatchNormalization running statistic).
  [[nodiscard]] const host_tensor& buffer(std::string_view name) const {
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      if (tg_.buffers[i].name == name) return buffers_[i];
    throw error(error_category::usage, "no buffer named '" + std::string(name) + "'", where());
  }
  [[nodiscard]] std::vector<std::string> buffer_names() const {
    std::vector<std::string> n;
    for (const auto& b : tg_.buffers) n.push_back(b.name);
    return n;
  }
  /// Replaces buffer `name` (a BatchNormalization running statistic), as a checkpoint restores it.
  void set_buffer(std::string_view name, const_tensor_view value) {
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      if (tg_.buffers[i].name == name) {
        buffers_[i] = copy_checked(value, tg_.buffers[i].info, "buffer '" + std::string(name) + "'");
        return;
      }
    throw error(error_category::usage, "no buffer named '" + std::string(name) + "'", where(),
                "its buffers are: " + join(buffer_names()));
  }

  /// The optimizer's state (poptorch.optim's state_dict): every state tensor by its name
  /// ("<weight>/momentum", "<weight>/exp_avg", ...) and "step", the updates made so far (S64).
  [[nodiscard]] std::vector<std::pair<std::string, host_tensor>> optimizer_state() const {
    std::vector<std::pair<std::string, host_tensor>> d;
    for (std::size_t i = 0; i < state_.size(); ++i) d.emplace_back(tg_.state[i].input, state_[i]);
    d.emplace_back("step", host_tensor::from<std::int64_t>({}, {static_cast<std::int64_t>(steps_)}));
    if (options_.auto_loss_scaling.enabled) {
      d.emplace_back("automatic_loss_scaling/upper_count", host_tensor::from<double>({}, {als_upper_}));
      d.emplace_back("automatic_loss_scaling/lower_count", host_tensor::from<double>({}, {als_lower_}));
    }
    return d;
  }
  /// Restores a state that optimizer_state() gave (load_state_dict): every entry, each of its
  /// type and shape, nothing unknown. Nothing changes unless all of it is right.
  void load_optimizer_state(const std::vector<std::pair<std::string, host_tensor>>& d) {
    std::vector<host_tensor> next(state_.size());
    std::vector<bool> seen(state_.size(), false);
    std::optional<std::uint64_t> step;
    std::optional<double> upper, lower;
    for (const auto& [name, t] : d) {
      if (options_.auto_loss_scaling.enabled &&
          (name == "automatic_loss_scaling/upper_count" || name == "automatic_loss_scaling/lower_count")) {
        auto& slot_of = name == "automatic_loss_scaling/upper_count" ? upper : lower;
        if (slot_of || t.info() != tensor_info{data_type::F64, {}} || !(t.as<double>()[0] >= 0) ||
            !std::isfinite(t.as<double>()[0]))
          throw error(error_category::usage, "'" + name + "' must be given once, as a finite non-negative F64 scalar", where(),
                      "load a state this session's optimizer_state() gave");
        slot_of = t.as<double>()[0];
        continue;
      }
      if (name == "step") {
        if (step || t.info() != tensor_info{data_type::S64, {}} || t.as<std::int64_t>()[0] < 0)
          throw error(error_category::usage, "'step' must be given once, as a non-negative S64 scalar", where(),
                      "load a state this session's optimizer_state() gave");
        step = static_cast<std::uint64_t>(t.as<std::int64_t>()[0]);
        continue;
      }
      std::size_t i = 0;
      while (i < state_.size() && tg_.state[i].input != name) ++i;
      if (i == state_.size())
        throw error(error_category::usage, "the optimizer has no state named '" + name + "'", where(),
                    "load a state this session's optimizer_state() gave");
      if (seen[i]) throw error(error_category::usage, "state '" + name + "' is given twice", where(), "give it once");
      seen[i] = true;
      next[i] = copy_checked(t.view(), replicated_ ? stored_info(tg_.state[i].info, state_weight_[i]) : tg_.state[i].info,
                             "state '" + name + "'");
    }
    for (std::size_t i = 0; i < seen.size(); ++i)
      if (!seen[i])
        throw error(error_category::usage, "state '" + tg_.state[i].input + "' is missing", where(),
                    "load a state this session's optimizer_state() gave, whole");
    if (!step)
      throw error(error_category::usage, "'step' is missing", where(),
                  "load a state this session's optimizer_state() gave, whole");
    if (options_.auto_loss_scaling.enabled && (!upper || !lower))
      throw error(error_category::usage, "automatic loss scaling's counts are missing", where(),
                  "load a state this session's optimizer_state() gave, whole");
    state_ = std::move(next);
    steps_ = *step;
    if (upper) als_upper_ = *upper;
    if (lower) als_lower_ = *lower;
    previous_momentum_ = momentum();  // the loaded state was made with momentum
  }

  /// The model with its weights as trained so far (PopART's modelToHost).
  [[nodiscard]] graph trained_model() const {
    graph g(model_.name());
    std::vector<bool> now_data(model_.num_tensors(), false);  // weights and buffers the model computed by an Identity
    for (tensor_id t = 0; t < model_.num_tensors(); ++t) {
      const auto& n = model_.tensor(t);
      byte_buffer data = n.data;
      auto kind = n.kind;
      auto take = [&](const host_tensor& v) {
        // A weight grouped across replicas: replica 0's value, its group's (the first stacked).
        data = byte_buffer::copy(v.bytes().first(n.info.num_bytes()));
        if (kind == tensor_kind::intermediate) {  // an Identity of a shared initial value: its own value now
          kind = tensor_kind::variable;
          now_data[t] = true;
        }
      };
      for (std::size_t i = 0; i < weights_.size(); ++i)
        if (tg_.weights[i].name == n.name) take(weights_[i]);
      for (std::size_t i = 0; i < buffers_.size(); ++i)
        if (tg_.buffers[i].name == n.name) take(buffers_[i]);
      g.add_tensor(n.name, n.info, kind, std::move(data));
    }
    for (const auto& op : model_.ops())
      if (op.outputs.size() != 1 || !now_data[op.outputs[0]]) g.add_op(op);
    for (auto t : model_.outputs()) g.mark_output(t);
    g.set_opset_imports(model_.opset_imports());
    return g;
  }

 private:
  /// Where a graph input's value comes from, or where a graph output's value goes.
  enum class slot : std::uint8_t {
    model_input, model_output, labels, loss, weight, state, buffer, accumulator, scalar, first_step, dropout_seed, gradient
  };
  struct binding {
    slot kind;
    std::size_t index = 0;
    std::string scalar;  // for slot::scalar: the step scalar's name
  };

  std::string where() const { return "training session of '" + model_.name() + "'"; }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  }
  static const tensor_node& tensor_of(const graph& g, std::string_view name) { return g.tensor(*g.find_tensor(name)); }

  host_tensor initial_value(const std::string& name, const tensor_info& info, const byte_buffer& data,
                            std::string_view what) const {
    host_tensor t(info);
    const auto bytes = data.bytes();
    if (bytes.size() != t.bytes().size())
      throw error(error_category::graph, std::string(what) + " '" + name + "' holds " + std::to_string(bytes.size()) +
                                             " bytes but " + to_string(info) + " needs " + std::to_string(t.bytes().size()),
                  where());
    if (!bytes.empty()) std::memcpy(t.bytes().data(), bytes.data(), bytes.size());
    return t;
  }
  host_tensor copy_checked(const const_tensor_view& v, const tensor_info& info, const std::string& what) const {
    if (v.info() != info || (v.data() == nullptr && info.num_bytes() > 0))
      throw error(error_category::usage, what + " is " + to_string(v.info()) + " but must be " + to_string(info), where(),
                  "give a tensor of that type and shape");
    host_tensor t(info);
    if (info.num_bytes() > 0) std::memcpy(t.bytes().data(), v.data(), info.num_bytes());
    return t;
  }
  /// The optimizer's state as before the first step.
  void reset_state() {
    state_.clear();
    for (std::size_t k = 0; k < tg_.state.size(); ++k) {
      const auto& s = tg_.state[k];
      host_tensor t(replicated_ ? stored_info(s.info, state_weight_[k]) : s.info);
      if (s.initial != 0) {
        if (s.info.type == data_type::F64) std::fill(t.as<double>().begin(), t.as<double>().end(), s.initial);
        else if (s.info.type == data_type::F32) std::fill(t.as<float>().begin(), t.as<float>().end(), static_cast<float>(s.initial));
        else std::fill(t.as<half>().begin(), t.as<half>().end(), half(static_cast<float>(s.initial)));
      }
      state_.push_back(std::move(t));
    }
  }

  template <class Named>
  static std::size_t index_in(const std::vector<Named>& v, std::string_view name, auto field) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (field(v[i]) == name) return i;
    return static_cast<std::size_t>(-1);
  }

  /// What feeds each input of `g` (one of the step's graphs), found once.
  std::vector<binding> bind_inputs(const graph& g) const {
    std::vector<binding> b;
    constexpr auto none = static_cast<std::size_t>(-1);
    for (auto id : g.inputs()) {
      const auto& name = g.tensor(id).name;
      std::size_t i = none;
      if ((i = index_in(tg_.model_inputs, name, [](const auto& n) { return n; })) != none) b.push_back({slot::model_input, i, {}});
      else if (!tg_.labels.empty() && name == tg_.labels) b.push_back({slot::labels, 0, {}});
      else if ((i = index_in(tg_.weights, name, [](const auto& w) { return w.name; })) != none) b.push_back({slot::weight, i, {}});
      else if ((i = index_in(tg_.state, name, [](const auto& s) { return s.input; })) != none) b.push_back({slot::state, i, {}});
      else if ((i = index_in(tg_.buffers, name, [](const auto& w) { return w.name; })) != none) b.push_back({slot::buffer, i, {}});
      else if ((i = index_in(tg_.accumulators, name, [](const auto& a) { return a.input; })) != none)
        b.push_back({slot::accumulator, i, {}});
      else if (name == "optimizer/first_step") b.push_back({slot::first_step, 0, {}});
      else if (name == dropout_seed_input) b.push_back({slot::dropout_seed, 0, {}});
      else if (name.rfind("optimizer/", 0) == 0) b.push_back({slot::scalar, 0, name.substr(0, name.find(':'))});
      else throw error(error_category::internal, "step input '" + name + "' has no source", where());
    }
    return b;
  }
  /// Where each output of `g` goes, found once.
  std::vector<binding> bind_outputs(const graph& g) const {
    std::vector<binding> b;
    constexpr auto none = static_cast<std::size_t>(-1);
    for (std::size_t k = 0; k < g.outputs().size(); ++k) {
      const auto& name = g.tensor(g.outputs()[k]).name;
      std::size_t i = none;
      if (&g == &step_.model() && k < tg_.model_outputs.size()) b.push_back({slot::model_output, k, {}});
      else if (name == tg_.loss) b.push_back({slot::loss, 0, {}});
      else if ((i = index_in(tg_.weights, name, [](const auto& w) { return w.updated; })) != none) b.push_back({slot::weight, i, {}});
      else if ((i = index_in(tg_.state, name, [](const auto& s) { return s.output; })) != none) b.push_back({slot::state, i, {}});
      else if ((i = index_in(tg_.buffers, name, [](const auto& w) { return w.updated; })) != none) b.push_back({slot::buffer, i, {}});
      else if ((i = index_in(tg_.accumulators, name, [](const auto& a) { return a.output; })) != none)
        b.push_back({slot::accumulator, i, {}});
      else if ((i = index_in(tg_.gradients, name, [](const auto& n) { return n; })) != none) b.push_back({slot::gradient, i, {}});
      else throw error(error_category::internal, "step output '" + name + "' has no destination", where());
    }
    return b;
  }

  /// The views of one run of `g`: the model's inputs and labels (of the micro-batch), the weights,
  /// state, buffers and accumulators as they are now, and the step's scalars.
  template <class Inputs>
  std::vector<const_tensor_view> views_for(const std::vector<binding>& in, const graph& g,
                                           const std::vector<step_scalar>& scalars, std::vector<host_tensor>& keep,
                                           const std::vector<host_tensor>& buffers, Inputs model_input,
                                           const const_tensor_view& labels, std::int64_t micro_batch,
                                           std::int64_t replica = -1,
                                           const std::vector<host_tensor>* accumulators = nullptr) const {
    std::vector<const_tensor_view> views(in.size());
    keep.clear();  // the previous run's views are used up
    keep.reserve(in.size());  // no reallocation: the views point into these
    for (std::size_t p = 0; p < in.size(); ++p) {
      const auto& b = in[p];
      switch (b.kind) {
        case slot::model_input:
          if constexpr (!std::is_same_v<Inputs, std::nullptr_t>) views[p] = model_input(b.index);
          break;
        case slot::labels: views[p] = labels; break;
        case slot::weight:
          views[p] = replica < 0 ? weights_[b.index].view()
                                 : group_view(weights_[b.index], tg_.weights[b.index].info, b.index, replica);
          break;
        case slot::state:
          views[p] = replica < 0 ? state_[b.index].view()
                                 : group_view(state_[b.index], tg_.state[b.index].info, state_weight_[b.index], replica);
          break;
        case slot::buffer: views[p] = buffers[b.index].view(); break;
        case slot::accumulator:
          views[p] = !accumulators ? accumulators_[b.index].view()
                                   : group_view((*accumulators)[b.index], tg_.accumulators[b.index].info,
                                                accumulator_weight_[b.index], replica);
          break;
        case slot::first_step: {
          host_tensor t(tensor_info{data_type::BOOL, {}});
          // torch.optim.SGD starts the buffer afresh when there was none: on the first step, and
          // after a step whose momentum was 0 (a variable momentum raised from 0).
          const bool first = steps_ == 0 || previous_momentum_ == 0 || momentum() == 0;
          t.bytes()[0] = std::byte{first ? std::uint8_t{1} : std::uint8_t{0}};
          keep.push_back(std::move(t));
          views[p] = keep.back().view();
          break;
        }
        case slot::dropout_seed: {
          // Each micro-batch of each step draws its own masks, all from the session's seed.
          auto t = host_tensor::from<std::uint64_t>(
              shape{3}, {options_.seed, steps_, static_cast<std::uint64_t>(micro_batch)});
          keep.push_back(std::move(t));
          views[p] = keep.back().view();
          break;
        }
        case slot::scalar: {
          const auto found = std::find_if(scalars.begin(), scalars.end(), [&](const auto& s) { return s.name == b.scalar; });
          if (found == scalars.end())
            throw error(error_category::internal, "the optimizer gives no value for step input '" + b.scalar + "'", where());
          host_tensor t(g.tensor(g.inputs()[p]).info);
          if (t.info().type == data_type::F64) t.as<double>()[0] = found->value;
          else if (t.info().type == data_type::F16) t.as<half>()[0] = half(static_cast<float>(found->value));
          else t.as<float>()[0] = static_cast<float>(found->value);
          keep.push_back(std::move(t));
          views[p] = keep.back().view();
          break;
        }
        default: throw error(error_category::internal, "an output slot bound to an input", where());
      }
    }
    return views;
  }

  // --- replicated training -------------------------------------------------------------------
  /// The options the step is built with: a replicated step accumulates the micro-batches of every
  /// replica, G * R of them, so its update is the single replica's with G * R.
  static training_options replicated_options(training_options o, const replication_options& r) {
    if (r.replicas < 1)
      throw error(error_category::usage, "a replication factor of " + std::to_string(r.replicas), "training session",
                  "use at least 1 replica");
    if (!r.replicated() || o.gradient_accumulation < 1) return o;  // a bad accumulation: the training graph says so
    if (o.gradient_accumulation > std::numeric_limits<std::int64_t>::max() / r.replicas)
      throw error(error_category::usage,
                  "gradient accumulation " + std::to_string(o.gradient_accumulation) + " times " +
                      std::to_string(r.replicas) + " replicas is more micro-batches than can be counted",
                  "training session", "use fewer micro-batches");
    o.gradient_accumulation *= r.replicas;
    return o;
  }
  /// Each replica's device: the given options, its kernel threads included. The CPU device's
  /// results depend on its thread count (a large GEMM is cut into one block per thread), so a
  /// replica with fewer threads than the single replica would not compute the same bits.
  static cpu::device_options per_replica(cpu::device_options d, std::int64_t) { return d; }
  /// The weight a state or accumulator tensor ("<weight>/...") belongs to.
  [[nodiscard]] std::size_t owner_of(const std::string& name) const {
    std::size_t best = tg_.weights.size(), length = 0;
    for (std::size_t i = 0; i < tg_.weights.size(); ++i) {
      const auto& w = tg_.weights[i].name;
      if (name.size() > w.size() && name.compare(0, w.size(), w) == 0 && name[w.size()] == '/' && w.size() >= length) {
        best = i;
        length = w.size();
      }
    }
    if (best == tg_.weights.size())
      throw error(error_category::internal, "step tensor '" + name + "' belongs to no trained weight", where());
    return best;
  }
  /// `info` as stored for weight `w`: one value per group, stacked, for a grouped weight.
  [[nodiscard]] tensor_info stored_info(const tensor_info& info, std::size_t w) const {
    if (!replicated_ || !stacked_[w]) return info;
    // Built by push_back: GCC 12 warns of a null dereference in vector::insert at the front.
    std::vector<std::int64_t> dims{weight_groups_[w].count};
    for (const auto d : info.shape.dims()) dims.push_back(d);
    return {info.type, shape(dims)};
  }
  /// `t` (one value, or one per group) as replica `replica` sees it.
  [[nodiscard]] const_tensor_view group_view(const host_tensor& t, const tensor_info& plain, std::size_t w,
                                             std::int64_t replica) const {
    if (t.info() == plain) return t.view();
    const auto g = static_cast<std::size_t>(weight_groups_[w].group_of(replica));
    return const_tensor_view(plain, t.bytes().data() + g * plain.num_bytes());
  }
  static void write_group(host_tensor& stacked, const host_tensor& value, std::int64_t group) {
    const auto n = value.bytes().size();
    std::memcpy(stacked.bytes().data() + static_cast<std::size_t>(group) * n, value.bytes().data(), n);
  }
  void set_up_replicas(const cpu::device_options& device) {
    replicated_ = true;
    replicas_ = replication_.replicas;
    input_groups_ = replication_.inputs ? groups_of(*replication_.inputs, replicas_, "the inputs")
                                        : replica_groups{replicas_, 1, comm_group_type::none};
    weight_groups_.assign(tg_.weights.size(), replica_groups{1, replicas_, comm_group_type::all});
    stacked_.assign(tg_.weights.size(), false);
    all_replicas_.assign(tg_.weights.size(), false);
    std::vector<bool> named(tg_.weights.size(), false);
    for (const auto& [name, grouping] : replication_.weights) {
      std::size_t i = 0;
      while (i < tg_.weights.size() && tg_.weights[i].name != name) ++i;
      if (i == tg_.weights.size())
        throw error(error_category::usage, "replica grouping of '" + name + "': the step trains no weight of that name",
                    where(), "group trained weights: " + join(weight_names()));
      if (named[i])
        throw error(error_category::usage, "weight '" + name + "' is given a replica grouping twice", where(), "group it once");
      named[i] = true;
      weight_groups_[i] = groups_of(grouping, replicas_, "weight '" + name + "'");
      stacked_[i] = grouping.type != comm_group_type::all;
      all_replicas_[i] = grouping.retrieval == variable_retrieval_mode::all_replicas;
    }
    for (const auto& st : tg_.state) state_weight_.push_back(owner_of(st.input));
    for (const auto& a : tg_.accumulators) accumulator_weight_.push_back(owner_of(a.input));
    for (std::size_t i = 0; i < weights_.size(); ++i)  // every group starts from the model's value
      if (stacked_[i]) {
        host_tensor t(stored_info(weights_[i].info(), i));
        for (std::int64_t g = 0; g < weight_groups_[i].count; ++g) write_group(t, weights_[i], g);
        weights_[i] = std::move(t);
      }
    const auto& inst = replication_.instance;
    if (inst.count != 0) {
      if (inst.count < 0 || inst.first < 0 || inst.first >= replicas_ || inst.count > replicas_ - inst.first)
        throw error(error_category::usage,
                    "this process's replicas [" + std::to_string(inst.first) + ", " + std::to_string(inst.first) + " + " +
                        std::to_string(inst.count) + ") are not among the " + std::to_string(replicas_) + " replicas",
                    where(), "give a first replica and a count within the replication factor");
      if (!inst.gather)
        throw error(error_category::usage, "replicas spread over processes, but no gather function", where(),
                    "give replica_instance::gather (ipu/dist/ gives one over MPI)");
      local_first_ = inst.first;
      local_count_ = inst.count;
      distributed_ = true;
    } else {
      local_first_ = 0;
      local_count_ = replicas_;
    }
    if (inst.local_inputs && inst.count == 0)
      throw error(error_category::usage, "local inputs, but this process runs every replica", where(),
                  "set local_inputs only with replicas spread over processes (replica_instance::count)");
    for (std::int64_t r = local_first_; r < local_first_ + local_count_; ++r) local_groups_.push_back(input_groups_.group_of(r));
    std::sort(local_groups_.begin(), local_groups_.end());
    local_groups_.erase(std::unique(local_groups_.begin(), local_groups_.end()), local_groups_.end());
    for (const auto t : step_.model().outputs()) {
      const auto n = step_.model().tensor(t).info.num_bytes();
      constexpr auto most = std::numeric_limits<std::size_t>::max() / 2;
      if (n > most || replica_bytes_ > most - n || replica_bytes_ + n > most / static_cast<std::size_t>(replicas_))
        throw error(error_category::usage, "the replicas' step outputs are too large to exchange", where());
      replica_bytes_ += n;
    }
    // Devices only for the replicas this process runs (replica 0's is step_).
    for (std::int64_t r = 1; r < replicas_; ++r)
      replica_steps_.push_back(r >= local_first_ && r < local_first_ + local_count_
                                   ? std::make_unique<cpu::device>(tg_.step, per_replica(device, replicas_))
                                   : nullptr);
    replica_buffers_.assign(static_cast<std::size_t>(replicas_ - 1), buffers_);
    // The reduction adds each micro-batch's gradients with the step's own Add kernel: the same
    // arithmetic as the single replica's accumulation.
    builder b(model_.name() + "/replica_reduction");
    for (std::size_t k = 0; k < tg_.accumulators.size(); ++k) {
      const auto& info = tg_.accumulators[k].info;
      const auto x = b.add_input_tensor(info, "sum/" + std::to_string(k));
      const auto y = b.add_input_tensor(info, "gradient/" + std::to_string(k));
      b.add_output(b.add(x, y, "sum/" + std::to_string(k) + "/next"));
    }
    reduce_.emplace(std::move(b).build(), device);
    for (const auto& a : tg_.accumulators) zero_accumulators_.emplace_back(a.info);
    refresh_readout();
  }
  /// The readout of weights retrieved for all replicas: one value per replica, stacked.
  void refresh_readout() {
    if (!replicated_) return;
    readout_.resize(weights_.size());
    for (std::size_t i = 0; i < weights_.size(); ++i) {
      if (!all_replicas_[i]) continue;
      const auto& plain = tg_.weights[i].info;
      std::vector<std::int64_t> dims{replicas_};  // push_back: GCC 12 warns on vector::insert at the front
      for (const auto d : plain.shape.dims()) dims.push_back(d);
      host_tensor t(tensor_info{plain.type, shape(dims)});
      for (std::int64_t r = 0; r < replicas_; ++r) {
        const auto v = group_view(weights_[i], plain, i, r);
        std::memcpy(t.bytes().data() + static_cast<std::size_t>(r) * plain.num_bytes(), v.data(), plain.num_bytes());
      }
      readout_[i] = std::move(t);
    }
  }

  /// The input groups a step's inputs hold per accumulation index: every group, or (local inputs)
  /// those of this process's replicas.
  [[nodiscard]] std::int64_t given_groups() const noexcept {
    return replication_.instance.local_inputs ? static_cast<std::int64_t>(local_groups_.size()) : input_groups_.count;
  }
  /// Where replica `r`'s input group is among them.
  [[nodiscard]] std::int64_t given_group_of(std::int64_t r) const noexcept {
    const auto g = input_groups_.group_of(r);
    if (!replication_.instance.local_inputs) return g;
    return static_cast<std::int64_t>(std::lower_bound(local_groups_.begin(), local_groups_.end(), g) - local_groups_.begin());
  }

  /// One step of a replicated session: each accumulation index's micro-batches run on the replicas
  /// at once, each from zero accumulators; their gradients are then added in the order of the
  /// global micro-batch index, within each weight's groups; the update runs once per distinct
  /// combination of groups.
  template <class MicroBatch>
  step_result run_replicated(const std::vector<const_tensor_view>& given, const const_tensor_view& labels,
                             const MicroBatch& micro_batch) {
    const auto micro = tg_.micro_batches, R = replicas_, G = micro / R;
    const auto scalars = step_scalars(options_.opt, steps_, micro, options_.reduction);
    step_result res;
    pending next{std::vector<std::optional<host_tensor>>(weights_.size()),
                 std::vector<std::optional<host_tensor>>(state_.size()), {}};
    std::vector<std::vector<host_tensor>> buffers(static_cast<std::size_t>(R));  // each replica's, as it goes
    buffers[0] = buffers_;
    for (std::int64_t r = 1; r < R; ++r) buffers[static_cast<std::size_t>(r)] = replica_buffers_[static_cast<std::size_t>(r - 1)];
    std::vector<host_tensor> sums;  // the reduced gradients, one per accumulator and group
    for (std::size_t k = 0; k < tg_.accumulators.size(); ++k)
      sums.emplace_back(stored_info(tg_.accumulators[k].info, accumulator_weight_[k]));
    std::vector<std::vector<host_tensor>> outs(static_cast<std::size_t>(R));
    std::vector<std::exception_ptr> failed(static_cast<std::size_t>(R));
    auto run_one = [&](std::int64_t r, std::int64_t a) {
      const auto ri = static_cast<std::size_t>(r);
      try {
        const auto j = a * R + r;
        const auto m = a * given_groups() + given_group_of(r);
        std::vector<host_tensor> keep;
        auto views = views_for(
            step_in_, step_.model(), scalars, keep, buffers[ri],
            [&](std::size_t i) { return micro_batch(given[i], tg_.model_inputs[i], m); },
            tg_.labels.empty() ? const_tensor_view{} : micro_batch(labels, tg_.labels, m), j, r, &zero_accumulators_);
        auto& dev = r == 0 ? step_ : *replica_steps_[ri - 1];
        outs[ri] = dev.run(std::span<const const_tensor_view>(views));
        if (distributed_) return;  // the statistics are taken from the gathered outputs
        for (std::size_t k = 0; k < step_out_.size(); ++k)  // this replica's statistics, for its next micro-batch
          if (step_out_[k].kind == slot::buffer) buffers[ri][step_out_[k].index] = std::move(outs[ri][k]);
      } catch (...) {
        failed[ri] = std::current_exception();
      }
    };
    std::vector<const_tensor_view> reduce_in(2 * tg_.accumulators.size());
    for (std::int64_t a = 0; a < G; ++a) {
      {
        std::vector<std::jthread> workers;
        for (std::int64_t r = local_first_ + 1; r < local_first_ + local_count_; ++r) workers.emplace_back(run_one, r, a);
        run_one(local_first_, a);
      }
      for (const auto& f : failed)
        if (f) {
          // The other processes are waiting for this one's outputs: tell them why none come (their
          // step then fails at once, with this message), and fail here with the replica's own error.
          if (distributed_ && replication_.instance.fail) try {
              replication_.instance.fail(steps_, a, replica_bytes_ * static_cast<std::size_t>(local_count_), message_of(f));
            } catch (...) {  // the exchange's own failure (a timeout) says less than the replica's
            }
          std::rethrow_exception(f);
        }
      if (distributed_) gather_replicas(outs, buffers, a);
      for (std::int64_t r = 0; r < R; ++r) {  // in the order of j = a * R + r
        auto& out = outs[static_cast<std::size_t>(r)];
        for (std::size_t k = 0; k < step_out_.size(); ++k) {
          const auto& b = step_out_[k];
          switch (b.kind) {
            case slot::model_output: keep_output(res, b.index, std::move(out[k]), a * R + r); break;
            case slot::loss: res.micro_batch_losses.push_back(scalar_value(out[k])); break;
            case slot::accumulator:
              reduce_in[2 * b.index] = group_view(sums[b.index], tg_.accumulators[b.index].info, accumulator_weight_[b.index], r);
              reduce_in[2 * b.index + 1] = out[k].view();
              break;
            case slot::gradient: count_gradient(out[k], next); break;
            case slot::buffer: break;  // taken by the replica
            default: throw error(error_category::internal, "a replica's step returns a weight or state", where());
          }
        }
        auto reduced = reduce_->run(std::span<const const_tensor_view>(reduce_in));
        for (std::size_t k = 0; k < reduced.size(); ++k) {
          const auto w = accumulator_weight_[k];
          if (sums[k].info() == reduced[k].info()) sums[k] = std::move(reduced[k]);
          else write_group(sums[k], reduced[k], weight_groups_[w].group_of(r));
        }
      }
    }
    // The update, once per distinct combination of the weights' groups; each group's value taken once.
    std::vector<std::vector<bool>> done(weights_.size());
    for (std::size_t i = 0; i < weights_.size(); ++i) done[i].assign(static_cast<std::size_t>(weight_groups_[i].count), false);
    for (std::int64_t r = 0; r < R; ++r) {
      bool fresh = false;
      for (std::size_t i = 0; i < weights_.size(); ++i) fresh = fresh || !done[i][static_cast<std::size_t>(weight_groups_[i].group_of(r))];
      if (!fresh) continue;
      std::vector<host_tensor> keep;
      auto views = views_for(update_in_, update_->model(), scalars, keep, buffers_, nullptr, {}, 0, r, &sums);
      auto out = update_->run(std::span<const const_tensor_view>(views));
      auto take = [&](std::optional<host_tensor>& slot_of, const host_tensor& now, host_tensor value, std::size_t w) {
        if (done[w][static_cast<std::size_t>(weight_groups_[w].group_of(r))]) return;
        if (now.info() == value.info()) {
          slot_of = std::move(value);
          return;
        }
        if (!slot_of) slot_of = host_tensor(now.info()), std::memcpy(slot_of->bytes().data(), now.bytes().data(), now.bytes().size());
        write_group(*slot_of, value, weight_groups_[w].group_of(r));
      };
      for (std::size_t k = 0; k < update_out_.size(); ++k) {
        const auto& b = update_out_[k];
        if (b.kind == slot::weight) take(next.weights[b.index], weights_[b.index], std::move(out[k]), b.index);
        else if (b.kind == slot::state) take(next.state[b.index], state_[b.index], std::move(out[k]), state_weight_[b.index]);
        else throw error(error_category::internal, "the update returns what is neither a weight nor state", where());
      }
      for (std::size_t i = 0; i < weights_.size(); ++i) done[i][static_cast<std::size_t>(weight_groups_[i].group_of(r))] = true;
    }
    double total = 0;
    for (double l : res.micro_batch_losses) total += l;
    res.loss = options_.reduction == accumulation_reduction::mean ? total / static_cast<double>(micro) : total;
    for (std::size_t i = 0; i < weights_.size(); ++i)
      if (next.weights[i]) weights_[i] = std::move(*next.weights[i]);
    for (std::size_t i = 0; i < state_.size(); ++i)
      if (next.state[i]) state_[i] = std::move(*next.state[i]);
    buffers_ = std::move(buffers[0]);
    for (std::int64_t r = 1; r < R; ++r)
      replica_buffers_[static_cast<std::size_t>(r - 1)] = std::move(buffers[static_cast<std::size_t>(r)]);
    previous_momentum_ = momentum();
    ++steps_;
    update_loss_scale(next);
    refresh_readout();
    return res;
  }
  /// Replicas spread over processes: sends this process's replicas' outputs of accumulation index
  /// `a`, receives every replica's (replica order), and takes each replica's running statistics.
  void gather_replicas(std::vector<std::vector<host_tensor>>& outs, std::vector<std::vector<host_tensor>>& buffers,
                       std::int64_t a) {
    const auto& g = step_.model();
    std::vector<std::byte> mine(static_cast<std::size_t>(local_count_) * replica_bytes_);
    std::vector<std::byte> all(static_cast<std::size_t>(replicas_) * replica_bytes_);
    for (std::int64_t r = local_first_; r < local_first_ + local_count_; ++r) {
      auto* p = mine.data() + static_cast<std::size_t>(r - local_first_) * replica_bytes_;
      const auto& out = outs[static_cast<std::size_t>(r)];
      for (std::size_t k = 0; k < out.size(); ++k) {
        const auto n = g.tensor(g.outputs()[k]).info.num_bytes();
        if (out[k].bytes().size() != n)
          throw error(error_category::internal, "step output " + std::to_string(k) + " is not the size its graph gives", where());
        std::memcpy(p, out[k].bytes().data(), n);
        p += n;
      }
    }
    replication_.instance.gather(steps_, a, mine, all);
    for (std::int64_t r = 0; r < replicas_; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      const auto* p = all.data() + ri * replica_bytes_;
      outs[ri].clear();
      for (std::size_t k = 0; k < g.outputs().size(); ++k) {
        host_tensor t(g.tensor(g.outputs()[k]).info);
        std::memcpy(t.bytes().data(), p, t.bytes().size());
        p += t.bytes().size();
        if (step_out_[k].kind == slot::buffer) buffers[ri][step_out_[k].index] = t;  // for its next micro-batch
        outs[ri].push_back(std::move(t));
      }
    }
  }
  static double scalar_value(const host_tensor& l) {
    return l.info().type == data_type::F64   ? l.as<double>()[0]
           : l.info().type == data_type::F16 ? static_cast<double>(static_cast<float>(l.as<half>()[0]))
                                             : static_cast<double>(l.as<float>()[0]);
  }

  /// What a step changes, taken when the whole step has run.
  struct pending {
    std::vector<std::optional<host_tensor>> weights, state;
    std::vector<host_tensor> buffers;
    double upper = 0, lower = 0;  // automatic loss scaling: the gradients' elements above and below the bin edge
  };
  /// SGD's momentum now (0 for other optimizers).
  [[nodiscard]] double momentum() const noexcept {
    const auto* s = std::get_if<sgd>(&options_.opt);
    return s ? s->momentum.value() : 0.0;
  }

  /// Takes the outputs of one run (micro-batch `j` of the step, or the update).
  void take_outputs(const std::vector<binding>& out_bindings, std::vector<host_tensor>& out, step_result& r, std::int64_t j,
                    pending& next) {
    for (std::size_t k = 0; k < out_bindings.size(); ++k) {
      const auto& b = out_bindings[k];
      switch (b.kind) {
        case slot::model_output: keep_output(r, b.index, std::move(out[k]), j); break;
        case slot::loss: {
          const auto& l = out[k];
          r.micro_batch_losses.push_back(l.info().type == data_type::F64 ? l.as<double>()[0]
                                         : l.info().type == data_type::F16 ? static_cast<double>(static_cast<float>(l.as<half>()[0]))
                                                                           : static_cast<double>(l.as<float>()[0]));
          break;
        }
        case slot::weight: next.weights[b.index] = std::move(out[k]); break;
        case slot::state: next.state[b.index] = std::move(out[k]); break;
        case slot::buffer: next.buffers[b.index] = std::move(out[k]); break;
        case slot::accumulator: accumulators_[b.index] = std::move(out[k]); break;
        case slot::gradient: count_gradient(out[k], next); break;
        default: throw error(error_category::internal, "an input slot bound to an output", where());
      }
    }
  }
  /// Automatic loss scaling's statistics: the elements of gradient `g` at or above the bin edge (or
  /// not finite), and those below.
  void count_gradient(const host_tensor& g, pending& next) const {
    const double range = g.info().type == data_type::F16 ? 65504.0
                         : g.info().type == data_type::F32 ? static_cast<double>(std::numeric_limits<float>::max())
                                                            : std::numeric_limits<double>::max();
    const double edge = options_.auto_loss_scaling.bin_edge_location * range;
    std::size_t upper = 0, n = 0;
    auto count = [&](auto values) {
      n = values.size();
      for (const auto v : values) {
        const double x = std::fabs(static_cast<double>(static_cast<float>(v)));
        if (!(x < edge)) ++upper;  // NaN and infinities count as above
      }
    };
    if (g.info().type == data_type::F16) count(g.as<half>());
    else if (g.info().type == data_type::F32) count(g.as<float>());
    else {
      n = g.as<double>().size();
      for (const double v : g.as<double>())
        if (!(std::fabs(v) < edge)) ++upper;
    }
    next.upper += static_cast<double>(upper);
    next.lower += static_cast<double>(n - upper);
  }
  /// The largest loss scale automatic loss scaling may reach: 2^15 keeps a scale finite in F16 (F16
  /// weights or gradients), 2^64 otherwise.
  [[nodiscard]] double loss_scale_ceiling() const {
    for (const auto& w : tg_.weights)
      if (w.info.type == data_type::F16) return 32768.0;
    for (const auto& n : tg_.gradients)
      if (!n.empty() && tensor_of(step_.model(), n).info.type == data_type::F16) return 32768.0;
    return 18446744073709551616.0;
  }
  /// After a weight update: every `update_period` updates, halves the loss scale when too many
  /// gradient elements were near the top of their range since the last change, else doubles it.
  void update_loss_scale(const pending& next) {
    const auto& als = options_.auto_loss_scaling;
    if (!als.enabled) return;
    als_upper_ += next.upper;
    als_lower_ += next.lower;
    if (steps_ % static_cast<std::uint64_t>(als.update_period) != 0) return;
    const double t = als.threshold_upper_count_proportion;
    const bool down = t < 1 && als_upper_ > t / (1 - t) * als_lower_;
    const double ceiling = loss_scale_ceiling();
    std::visit(
        [&](auto& x) {
          const double scaled = down ? x.loss_scaling.value() / 2 : x.loss_scaling.value() * 2;
          x.loss_scaling = std::min(scaled, ceiling);  // a given value: variable
        },
        options_.opt);
    als_upper_ = als_lower_ = 0;
  }

  static std::string message_of(const std::exception_ptr& f) {
    try {
      std::rethrow_exception(f);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "an exception that is no std::exception";
    }
  }

  /// Output `i` of micro-batch `j`, kept as the output mode says.
  void keep_output(step_result& r, std::size_t i, host_tensor t, std::int64_t j) const {
    if (r.outputs.size() <= i) r.outputs.resize(i + 1);
    const auto micro = tg_.micro_batches;
    if (mode_ == output_mode::final || micro == 1) {
      if (j == micro - 1) r.outputs[i] = std::move(t);
      return;
    }
    if (mode_ == output_mode::all) {
      if (j == 0) {
        auto dims = t.info().shape.dims();
        if (dims.empty()) dims.push_back(micro);  // a scalar per micro-batch stacks into [G]
        else dims[0] *= micro;
        r.outputs[i] = host_tensor(tensor_info{t.info().type, shape(dims)});
      }
      const auto n = t.bytes().size();
      std::memcpy(r.outputs[i].bytes().data() + static_cast<std::size_t>(j) * n, t.bytes().data(), n);
      return;
    }
    if (j == 0) {  // sum
      r.outputs[i] = std::move(t);
      return;
    }
    auto add = [&](auto tag) {
      using T = decltype(tag);
      auto acc = r.outputs[i].as<T>();
      const auto x = t.as<T>();
      for (std::size_t e = 0; e < acc.size(); ++e) acc[e] = static_cast<T>(acc[e] + x[e]);
    };
    switch (t.info().type) {
      case data_type::F32: add(float{}); break;
      case data_type::F64: add(double{}); break;
      case data_type::S32: add(std::int32_t{}); break;
      case data_type::S64: add(std::int64_t{}); break;
      default:
        throw error(error_category::usage, "output " + std::to_string(i) + " is " + to_string(t.info()) + ": it cannot be summed",
                    where(), "use output_mode::final or output_mode::all");
    }
  }

  training_options options_;
  graph model_;
  training_graph tg_;
  output_mode mode_;
  replication_options replication_;  // before step_: its devices share the threads
  cpu::device step_;
  std::optional<cpu::device> update_;
  std::vector<host_tensor> weights_, state_, buffers_, accumulators_;
  std::vector<binding> step_in_, step_out_, update_in_, update_out_;
  // Replicated training (set_up_replicas): per weight, its groups, whether it is stored one value
  // per group (stacked) and read out one per replica; the weight each state and accumulator
  // tensor belongs to; replicas 1.. devices and running statistics (replica 0's are step_ and
  // buffers_); the reduction's device.
  bool replicated_ = false;
  std::int64_t replicas_ = 1;
  replica_groups input_groups_{};
  std::vector<std::int64_t> local_groups_;  // the input groups of this process's replicas, ascending
  std::vector<replica_groups> weight_groups_;
  std::vector<bool> stacked_, all_replicas_;
  std::vector<std::size_t> state_weight_, accumulator_weight_;
  std::vector<std::unique_ptr<cpu::device>> replica_steps_;  // null for the replicas of other processes
  // Replicas spread over processes (replication_options::instance): this process's, and the bytes
  // of one replica's step outputs, as gathered.
  bool distributed_ = false;
  std::int64_t local_first_ = 0, local_count_ = 1;
  std::size_t replica_bytes_ = 0;
  std::vector<std::vector<host_tensor>> replica_buffers_;
  std::optional<cpu::device> reduce_;
  std::vector<host_tensor> zero_accumulators_, readout_;
  std::uint64_t steps_ = 0;
  double previous_momentum_ = 0;  // SGD's momentum at the last step
  double als_upper_ = 0, als_lower_ = 0;  // automatic loss scaling's counts since the scale last changed
};

}  // namespace ipu::train
