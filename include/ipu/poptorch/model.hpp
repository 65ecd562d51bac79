#pragma once
// PopTorch's model wrappers (poptorch.trainingModel, poptorch.inferenceModel and what their
// PoplarExecutor offers) over a host model: a graph and the host's values of its weights (the
// PyTorch model's parameters and buffers).
//
//   ipu::poptorch::model m(ipu::onnx::load_model("net.onnx"));
//   ipu::poptorch::loss_spec mse;  mse.loss.kind = ipu::train::loss_kind::mse;
//   ipu::poptorch::training_model train(m, ipu::options(), ipu::train::sgd{}, mse);
//   ipu::poptorch::inference_model infer(m);
//   auto r = train({{"x", x.view()}}, target.view());   // one weight update: r.outputs, r.loss
//   auto y = infer({{"x", x.view()}});                   // sees the trained weights
//   m.weight("fc.weight");                               // so does the host model
//
// The weights are kept in sync implicitly, as PopTorch keeps them: after a training call the host
// copy is stale, and it fetches the training model's weights the first time something reads it (a
// read of the host model, a call of another wrapper). A wrapper whose device holds older weights
// than the host's loads them before its next call. A change of the host model by other means
// (set_weight) is not seen by the wrappers until copy_weights_to_device().
//
// Buffers (PopTorch 4.8): an initializer registered with register_buffer(name, update) takes the
// value of tensor `update` after each call, and keeps it for the next. An inference model's buffers
// stay on its device: the host's copy changes only with copy_weights_to_host(), and only
// copy_weights_to_device() replaces them. An initializer that is not registered is frozen.
// In a training model, BatchNormalization's running statistics are the buffers
// (ipu/train/session.hpp), synced with the parameters.
//
// Both wrappers run on the CPU device, exactly. The wrappers keep a pointer to themselves in the
// host model's state while they hold its newest weights, so they can be neither copied nor moved.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/log.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/tensor.hpp"
#include "ipu/train/session.hpp"
#include "ipu/train/training_graph.hpp"

namespace ipu::poptorch {

class training_model;
class inference_model;

/// The host model: a graph and the host's copy of its weights, every floating-point initializer
/// (PyTorch's parameters and buffers, what copyWeightsToHost and copyWeightsToDevice move).
class model {
 public:
  /// PyTorch's export shares equal initial values through Identity ops of one initializer; each
  /// copy is a parameter of its own here (train::untie_copies), as PyTorch trains it.
  explicit model(const graph& g) : s_(std::make_shared<state>()) {
    s_->network = train::untie_copies(g);
    const auto& net = s_->network;
    for (tensor_id t = 0; t < net.num_tensors(); ++t) {
      const auto& n = net.tensor(t);
      if (n.kind != tensor_kind::variable || !is_floating_point(n.info.type)) continue;
      host_tensor v(n.info);
      if (n.data.bytes().size() != v.bytes().size())
        throw error(error_category::graph,
                    "initializer '" + n.name + "' holds " + std::to_string(n.data.bytes().size()) + " bytes but " +
                        to_string(n.info) + " needs " + std::to_string(v.bytes().size()),
                    where());
      if (!v.bytes().empty()) std::memcpy(v.bytes().data(), n.data.bytes().data(), v.bytes().size());
      s_->names.push_back(n.name);
      s_->values.push_back(std::move(v));
    }
  }

  /// Makes initializer `name` a buffer (PyTorch's register_buffer plus an in-place update): after
  /// each call of a wrapper it takes the value of tensor `update`, which must have its type and
  /// shape. Register buffers before wrapping the model.
  void register_buffer(std::string_view name, std::string_view update) {
    if (s_->wrapped)
      throw error(error_category::usage, "buffer '" + std::string(name) + "' registered after the model was wrapped",
                  where(), "register every buffer before making a training or inference model of it");
    const auto i = s_->find(name);
    if (i == npos)
      throw error(error_category::usage, "'" + std::string(name) + "' is not a floating-point initializer of the model",
                  where(), "a buffer is an initializer; the model's are: " + join(s_->names));
    for (const auto& b : s_->buffers)
      if (b.first == name)
        throw error(error_category::usage, "buffer '" + std::string(name) + "' is registered twice", where(),
                    "register it once");
    const auto u = s_->network.find_tensor(update);
    if (!u)
      throw error(error_category::usage,
                  "buffer '" + std::string(name) + "' takes the value of '" + std::string(update) +
                      "', which is no tensor of the model",
                  where(), "name the tensor that holds the buffer's new value");
    const auto& want = s_->values[i].info();
    const auto& got = s_->network.tensor(*u).info;
    if (got != want)
      throw error(error_category::usage,
                  "buffer '" + std::string(name) + "' is " + to_string(want) + " but its update '" + std::string(update) +
                      "' is " + to_string(got),
                  where(), "update a buffer with a tensor of its type and shape");
    s_->buffers.emplace_back(std::string(name), std::string(update));
  }

  [[nodiscard]] const graph& network() const noexcept { return s_->network; }
  /// Every weight the host holds: parameters and buffers, in the graph's order.
  [[nodiscard]] const std::vector<std::string>& weight_names() const noexcept { return s_->names; }
  /// The registered buffers.
  [[nodiscard]] std::vector<std::string> buffer_names() const {
    std::vector<std::string> n;
    for (const auto& b : s_->buffers) n.push_back(b.first);
    return n;
  }

  /// The host's value of weight `name`, fetched first from a training model that has trained it
  /// since (the implicit copyWeightsToHost).
  [[nodiscard]] const host_tensor& weight(std::string_view name) const {
    s_->sync();
    return s_->values[checked(name)];
  }
  /// Changes the host's value of weight `name` by other means than a wrapper: the wrappers keep
  /// theirs until copy_weights_to_device().
  void set_weight(std::string_view name, const_tensor_view value) {
    s_->sync();  // or a training model's pending weights would overwrite it later
    const auto i = checked(name);
    if (value.info() != s_->values[i].info() || (value.data() == nullptr && value.info().num_bytes() > 0))
      throw error(error_category::usage,
                  "weight '" + std::string(name) + "' is " + to_string(s_->values[i].info()) + ", the value given " +
                      to_string(value.info()),
                  where(), "give a value of the weight's type and shape");
    if (value.info().num_bytes() > 0) std::memcpy(s_->values[i].bytes().data(), value.data(), value.info().num_bytes());
  }

 private:
  friend class training_model;
  friend class inference_model;
  static constexpr auto npos = static_cast<std::size_t>(-1);

  struct state {
    graph network;
    std::vector<std::string> names;  // the weights, in the graph's order
    std::vector<host_tensor> values;  // the host's copy, by names' order
    std::vector<std::pair<std::string, std::string>> buffers;  // registered: name, the tensor it takes
    bool wrapped = false;
    std::uint64_t generation = 0;  // bumped each time the host copy takes a device's weights
    const void* newer_owner = nullptr;  // the wrapper whose device holds newer weights than the host copy
    std::function<void()> pull_newer;   // fetches them

    [[nodiscard]] std::size_t find(std::string_view name) const {
      for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == name) return i;
      return npos;
    }
    [[nodiscard]] bool is_buffer(std::size_t i) const {
      for (const auto& b : buffers)
        if (b.first == names[i]) return true;
      return false;
    }
    /// The implicit copyWeightsToHost: fetches the newer weights of a training model, if any.
    void sync() {
      if (!pull_newer) return;
      auto pull = std::exchange(pull_newer, nullptr);
      newer_owner = nullptr;
      ++generation;
      pull();
    }
  };

  [[nodiscard]] std::string where() const { return "PopTorch model '" + s_->network.name() + "'"; }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s.empty() ? "(none)" : s;
  }
  [[nodiscard]] std::size_t checked(std::string_view name) const {
    const auto i = s_->find(name);
    if (i == npos)
      throw error(error_category::usage, "the model has no weight named '" + std::string(name) + "'", where(),
                  "its weights are: " + join(s_->names));
    return i;
  }

  std::shared_ptr<state> s_;
};

/// What a training model's loss applies to: the model output (empty: its only output) and the loss
/// (train::loss_kind::output: the output is a loss the model computes itself, and calls take no
/// labels).
struct loss_spec {
  std::string output;
  train::loss_options loss{};
};

namespace wrapping {
/// Refuses every option in `o` but the ones named by the prefixes in `allowed` (nothing is
/// accepted and ignored). The log level, which `to_config` does not write, is applied.
inline void take_options(const ipu::options& o, bool training, std::span<const std::string_view> allowed,
                         const std::string& where) {
  o.validate(training);
  if (o.log_level()) log::set_level(*o.log_level());
  std::string refused;
  for (const auto& line : settings_not_applied(o, allowed)) refused += (refused.empty() ? "" : ", ") + line;
  if (!refused.empty())
    throw error(error_category::usage, std::string(training ? "a training" : "an inference") +
                                           " model does not apply these options yet: " + refused,
                where, "leave them at their defaults");
}
/// A host copy whose shape is not the graph's is a weight a training model grouped across
/// replicas (one value per group or per replica): another wrapper cannot run the graph with it.
inline void refuse_grouped(const graph& g, const std::vector<std::string>& names, const std::vector<host_tensor>& values,
                           const std::string& where) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto t = g.find_tensor(names[i]);
    if (t && g.tensor(*t).info != values[i].info())
      throw error(error_category::usage,
                  "weight '" + names[i] + "' holds " + to_string(values[i].info()) + ", not the graph's " +
                      to_string(g.tensor(*t).info) + ": a training model grouped it across replicas",
                  where, "set_weight one value of the graph's shape first, then wrap the model");
  }
}
}  // namespace wrapping

/// poptorch.trainingModel: each call is one weight update (with gradient accumulation G, of G
/// micro-batches stacked along the inputs' first axis) and returns the model's outputs (by the
/// output mode; the last micro-batch's by default) and the loss. The options may set gradient
/// accumulation, its reduction type, the output mode (not EveryN), automatic loss scaling, the
/// replication factor and the inputs' replica grouping (ipu/train/replication.hpp: a call then takes
/// G micro-batches per input group, and updates the weights as one replica accumulating all of
/// them would), the random seed (training-mode Dropout's masks and the model's random ops), and the
/// log level. Weights grouped across replicas are the training session's
/// (train::replication_options).
class training_model {
 public:
  training_model(model& m, const ipu::options& o = {}, train::optimizer opt = train::sgd{}, loss_spec loss = {})
      : host_(m.s_) {
    static constexpr std::string_view allowed[] = {"Training.gradientAccumulation(",
                                                   "Training.accumulationAndReplicationReductionType(", "outputMode(",
                                                   "Training.setAutomaticLossScaling(", "replicationFactor(",
                                                   "inputReplicaGrouping(", "randomSeed("};
    wrapping::take_options(o, true, allowed, where());
    host_->sync();
    wrapping::refuse_grouped(host_->network, host_->names, host_->values, where());
    if (!host_->buffers.empty())
      throw error(error_category::usage,
                  "the model has registered buffers (" + model::join(m.buffer_names()) +
                      "); a training model updates only BatchNormalization's running statistics in place",
                  where(), "train a model without registered buffers, or run it as an inference model");
    const auto mode = o.resolved_output_mode(true);
    if (mode == ipu::output_mode::every_n)
      throw error(error_category::usage, "output mode EveryN is not built for training models yet", where(),
                  "use Final, All or Sum");
    train::training_options t;
    t.output = std::move(loss.output);
    t.loss = loss.loss;
    t.opt = std::move(opt);
    t.gradient_accumulation = o.gradient_accumulation();
    t.seed = o.random_seed().value_or(0);
    device_.random_seed = o.random_seed().value_or(random_source::default_seed);
    t.auto_loss_scaling.enabled = o.automatic_loss_scaling();
    t.reduction = o.accumulation_and_replication_reduction_type() == reduction_type::sum ? train::accumulation_reduction::sum
                                                                                          : train::accumulation_reduction::mean;
    train::replication_options replication{.replicas = o.replication_factor()};
    if (o.input_group_size() != 1 || o.input_group_type() != comm_group_type::ungrouped) {
      const auto type = o.input_group_type();
      replication.inputs = train::replica_grouping{
          type == comm_group_type::all           ? train::comm_group_type::all
          : type == comm_group_type::consecutive ? train::comm_group_type::consecutive
          : type == comm_group_type::orthogonal  ? train::comm_group_type::orthogonal
                                                 : train::comm_group_type::none,
          o.input_group_size()};
    }
    training_ = t;
    mode_ = mode == ipu::output_mode::all   ? train::output_mode::all
            : mode == ipu::output_mode::sum ? train::output_mode::sum
                                            : train::output_mode::final;
    replication_ = std::move(replication);
    session_ = std::make_unique<train::training_session>(with_host_values(), training_, device_, mode_, replication_);
    // Every weight and buffer of the step is a host weight (the host model's graph is untied as the
    // step's is), so the two copies map one to one.
    for (const auto& names : {session_->weight_names(), session_->buffer_names()})
      for (const auto& n : names)
        if (host_->find(n) == model::npos)
          throw error(error_category::internal, "the training step has a weight '" + n + "' the host model does not hold",
                      where());
    host_->wrapped = true;
    seen_ = host_->generation;
  }
  training_model(const training_model&) = delete;
  training_model& operator=(const training_model&) = delete;
  ~training_model() {
    if (host_->newer_owner == this) host_->sync();  // the trained weights stay with the host model
  }

  /// One weight update of a model that computes its own loss (loss_kind::output).
  train::step_result operator()(const cpu::named_tensors& inputs) { return (*this)(inputs, {}); }
  /// One weight update: the model's inputs by name, and the labels.
  train::step_result operator()(const cpu::named_tensors& inputs, const_tensor_view labels) {
    refresh();
    called_ = true;
    auto r = session_->run(inputs, labels);
    host_->newer_owner = this;
    host_->pull_newer = [this] { pull(); };
    return r;
  }

  /// Fetches the device's weights and running statistics into the host model.
  void copy_weights_to_host() {
    refresh();
    if (host_->newer_owner == this) {
      host_->sync();
      return;
    }
    ++host_->generation;
    pull();
  }
  /// Sends the host model's weights to the device (after they were changed by other means).
  void copy_weights_to_device() {
    host_->sync();
    push();
  }

  /// PopTorch's `replicaGrouping` of a weight (`pt_m.W.replicaGrouping(type, size, mode)`): its
  /// value is one per group of replicas (train::replication: All, Consecutive, Orthogonal, or
  /// ungrouped: each replica alone), its gradients reduced within the group. Set before the first
  /// call, as PopTorch compiles then. From then on the host's copy of the weight (m.weight,
  /// copy_weights_to_host) holds what `mode` says: one value per group, or one per replica,
  /// stacked along a new first axis; every group starts from the weight's current value, and
  /// m.set_weight of a stacked value followed by copy_weights_to_device gives each group its own.
  /// Throws ipu::error (usage) after the first call, for a name that is no trained weight, a
  /// weight grouped twice and a group size that does not fit the replication factor; nothing
  /// changes then.
  void replica_grouping(std::string_view weight, comm_group_type type, std::int64_t group_size = 0,
                        train::variable_retrieval_mode mode = train::variable_retrieval_mode::one_per_group) {
    const std::string name(weight);
    if (called_)
      throw error(error_category::usage, "replicaGrouping of '" + name + "' after the first call: the step is compiled", where(),
                  "group weights before calling the training model");
    refresh();
    auto replication = replication_;
    replication.weights.emplace_back(name, train::replica_grouping{
                                               type == comm_group_type::all           ? train::comm_group_type::all
                                               : type == comm_group_type::consecutive ? train::comm_group_type::consecutive
                                               : type == comm_group_type::orthogonal  ? train::comm_group_type::orthogonal
                                                                                      : train::comm_group_type::none,
                                               group_size, mode});
    // A new step with the grouping, fed the host's values (the grouped ones included); the old one
    // stays unless all of it works.
    auto next = std::make_unique<train::training_session>(with_host_values(), training_, device_, mode_, replication);
    std::swap(session_, next);
    try {
      push();
    } catch (...) {
      std::swap(session_, next);
      throw;
    }
    replication_ = std::move(replication);
    host_->values[host_->find(name)] = session_->weight(name);
  }

  /// The session running the step: its optimizer state, set_optimizer, the step's graph.
  [[nodiscard]] train::training_session& session() noexcept { return *session_; }

 private:
  [[nodiscard]] std::string where() const { return "training model of '" + host_->network.name() + "'"; }
  [[nodiscard]] graph with_host_values() const {
    graph g = host_->network;
    graph r(g.name());
    for (tensor_id t = 0; t < g.num_tensors(); ++t) {
      const auto& n = g.tensor(t);
      const auto i = host_->find(n.name);
      // A grouped weight's host copy is one value per group: the step starts from the graph's, and
      // push() then sets the groups.
      const bool host = i != model::npos && n.kind == tensor_kind::variable && host_->values[i].info() == n.info;
      r.add_tensor(n.name, n.info, n.kind, host ? byte_buffer::copy(host_->values[i].bytes()) : n.data);
    }
    for (const auto& op : g.ops()) r.add_op(op);
    for (auto t : g.outputs()) r.mark_output(t);
    r.set_opset_imports(g.opset_imports());
    return r;
  }
  /// Before a call: the newest weights, from the host model if they are newer than the device's.
  void refresh() {
    if (host_->newer_owner != this) host_->sync();
    if (host_->generation != seen_) push();
  }
  void push() {
    for (const auto& n : session_->weight_names()) session_->set_weight(n, host_->values[host_->find(n)].view());
    for (const auto& n : session_->buffer_names()) session_->set_buffer(n, host_->values[host_->find(n)].view());
    seen_ = host_->generation;
  }
  void pull() {
    for (const auto& n : session_->weight_names()) host_->values[host_->find(n)] = session_->weight(n);
    for (const auto& n : session_->buffer_names()) host_->values[host_->find(n)] = session_->buffer(n);
    seen_ = host_->generation;
  }

  std::shared_ptr<model::state> host_;
  train::training_options training_;
  cpu::device_options device_{};
  train::output_mode mode_ = train::output_mode::final;
  train::replication_options replication_;
  std::unique_ptr<train::training_session> session_;  // not movable: replica_grouping replaces it
  std::uint64_t seen_ = 0;  // the host generation the device's weights are
  bool called_ = false;     // replica groupings are set before the first call
};

/// poptorch.inferenceModel: each call runs the model once on the given inputs and returns its
/// outputs. The options may set the random seed of the model's random ops, and the log level.
class inference_model {
 public:
  explicit inference_model(model& m, const ipu::options& o = {}) : host_(m.s_) {
    static constexpr std::string_view allowed[] = {"randomSeed("};
    wrapping::take_options(o, false, allowed, where());
    random_seed_ = o.random_seed().value_or(random_source::default_seed);
    host_->sync();
    wrapping::refuse_grouped(host_->network, host_->names, host_->values, where());
    const auto& g = host_->network;
    // The device's graph: every host weight an input, fed from the device's copy of the weights;
    // each buffer's update an output.
    graph r(g.name());
    for (tensor_id t = 0; t < g.num_tensors(); ++t) {
      const auto& n = g.tensor(t);
      const bool weight = host_->find(n.name) != model::npos && n.kind == tensor_kind::variable;
      r.add_tensor(n.name, n.info, weight ? tensor_kind::input : n.kind, weight ? byte_buffer{} : n.data);
    }
    for (const auto& op : g.ops()) r.add_op(op);
    for (auto t : g.outputs()) r.mark_output(t);
    outputs_ = g.outputs().size();
    for (const auto& [name, update] : host_->buffers) {
      r.mark_output(*r.find_tensor(update));
      buffer_of_output_.push_back(host_->find(name));
    }
    r.set_opset_imports(g.opset_imports());
    for (auto t : r.inputs()) {
      const auto& n = r.tensor(t);
      const auto i = host_->find(n.name);
      if (i != model::npos && g.tensor(t).kind == tensor_kind::variable) feeds_.push_back({i, 0});
      else {
        feeds_.push_back({model::npos, input_names_.size()});
        input_names_.push_back(n.name);
        input_infos_.push_back(n.info);
      }
    }
    cpu::device_options d;
    d.random_seed = random_seed_;
    device_.emplace(std::move(r), std::move(d));
    values_ = host_->values;
    host_->wrapped = true;
    seen_ = host_->generation;
  }
  inference_model(const inference_model&) = delete;
  inference_model& operator=(const inference_model&) = delete;

  /// Runs the model once: its inputs by name, each once, of its type and shape.
  std::vector<host_tensor> operator()(const cpu::named_tensors& inputs = {}) {
    std::vector<const_tensor_view> given(input_names_.size());
    std::vector<bool> seen(input_names_.size(), false);
    for (const auto& [name, view] : inputs) {
      std::size_t k = 0;
      while (k < input_names_.size() && input_names_[k] != name) ++k;
      if (k == input_names_.size())
        throw error(error_category::usage, "the model has no input named '" + name + "'", where(),
                    "its inputs are: " + model::join(input_names_));
      if (seen[k]) throw error(error_category::usage, "input '" + name + "' is given twice", where(), "give each input once");
      if (view.info() != input_infos_[k] || (view.data() == nullptr && view.info().num_bytes() > 0))
        throw error(error_category::shape,
                    "input '" + name + "' is " + to_string(view.info()) + ", the model takes " + to_string(input_infos_[k]),
                    where(), "give the input the model's type and shape");
      seen[k] = true;
      given[k] = view;
    }
    for (std::size_t k = 0; k < seen.size(); ++k)
      if (!seen[k])
        throw error(error_category::usage, "input '" + input_names_[k] + "' is not given", where(),
                    "give every model input: " + model::join(input_names_));
    refresh();
    std::vector<const_tensor_view> views;
    for (const auto& f : feeds_) views.push_back(f.weight != model::npos ? values_[f.weight].view() : given[f.input]);
    auto out = device_->run(std::span<const const_tensor_view>(views));
    for (std::size_t b = 0; b < buffer_of_output_.size(); ++b) values_[buffer_of_output_[b]] = std::move(out[outputs_ + b]);
    out.resize(outputs_);
    return out;
  }

  /// Fetches the device's weights, buffers included, into the host model.
  void copy_weights_to_host() {
    refresh();
    ++host_->generation;
    host_->values = values_;
    seen_ = host_->generation;
  }
  /// Sends the host model's weights, buffers included, to the device.
  void copy_weights_to_device() {
    host_->sync();
    values_ = host_->values;
    seen_ = host_->generation;
  }

 private:
  struct feed {
    std::size_t weight;  // a host weight, or model::npos for a model input
    std::size_t input;   // the model input's index
  };
  [[nodiscard]] std::string where() const { return "inference model of '" + host_->network.name() + "'"; }
  /// Before a call: the newest weights, from the host model if they are newer than the device's.
  /// The buffers stay the device's: only copy_weights_to_device() replaces them.
  void refresh() {
    host_->sync();
    if (host_->generation == seen_) return;
    for (std::size_t i = 0; i < values_.size(); ++i)
      if (!host_->is_buffer(i)) values_[i] = host_->values[i];
    seen_ = host_->generation;
  }

  std::shared_ptr<model::state> host_;
  std::uint64_t random_seed_ = random_source::default_seed;
  std::optional<cpu::device> device_;
  std::vector<feed> feeds_;
  std::vector<std::string> input_names_;
  std::vector<tensor_info> input_infos_;
  std::size_t outputs_ = 0;
  std::vector<std::size_t> buffer_of_output_;  // per buffer output: the weight it updates
  std::vector<host_tensor> values_;  // the device's weights
  std::uint64_t seen_ = 0;  // the host generation the device's weights are
};

}  // namespace ipu::poptorch
