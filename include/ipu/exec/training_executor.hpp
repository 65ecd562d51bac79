#pragma once
// Pipelined and phased training on host threads: the training step of an annotated model
// (train/training_graph.hpp, make_placed_training_graph) cut into the stages or phases
// train/training_placement.hpp gives (forward, then backward in reverse, 2N - 1 or 2N of them),
// each stage a graph of its own (stage_graph.hpp) run by its own ipu::cpu::device, the stages run
// for every micro-batch on a pool of threads (stage_pool.hpp).
//
//   ipu::placed_training_session s(model, {.loss = {...}, .gradient_accumulation = 8},
//                                  {.placement = {.schedule = ipu::train::training_schedule::pipelined}});
//   auto r = s.run({{"x", x.view()}}, labels.view());  // 8 micro-batches stacked, as training_session takes them
//
// Results are bit for bit those of ipu::train::training_session with the same options: every op
// runs the same kernel on the same inputs; each stage takes the micro-batches in order, so the
// gradient accumulators (on the backward stage of their weight) add them in micro-batch order, and
// BatchNormalization's running statistics (on its forward stage) see them in order; the optimizer
// updates the weights once per step, after the last micro-batch, from the accumulated gradients.
// What a micro-batch's later stages read (the stashed activations) is kept from the stage that makes
// it to the last stage that reads it, then freed. With recomputation a backward stage runs again
// the forward ops whose results it reads, from what the forward stage received, so those results
// are not kept (PopART's autoRecomputation; the forward stages' boundaries are the checkpoints, and
// so are the ops marked annotation::checkpoint, whose outputs are stashed instead). An op marked
// annotation::recompute (PopART's RecomputeType::Recompute) is recomputed whatever the automatic
// setting; phased execution refuses the mark.
//
// Not supported (refused): automatic loss scaling, and output modes other than the last
// micro-batch's outputs.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/captures.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/half.hpp"
#include "ipu/tensor.hpp"
#include "ipu/exec/stage_graph.hpp"
#include "ipu/exec/stage_pool.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/poptorch/strategy.hpp"
#include "ipu/train/optimizer.hpp"
#include "ipu/train/recomputation.hpp"
#include "ipu/train/session.hpp"
#include "ipu/train/training_graph.hpp"
#include "ipu/train/training_placement.hpp"

namespace ipu {

// ipu::recomputation (PopART's autoRecomputation) and recomputation_from are in poptorch/strategy.hpp,
// where ipu::options can hold them.

/// A stage's host memory, as planned before any step runs: its device's arena (cpu/plan.hpp) and
/// the stash, the values it makes that later stages read, times the micro-batches holding them at
/// once. In a lockstep pipeline a value made at stage k and last read at stage l is held for
/// l - k + 1 micro-batches (PopART's 2 (N - s) - 1 for a forward stage s read by its backward);
/// phased execution runs every micro-batch through a phase before the next reads it, so all G.
/// At most the step's G either way. Host threads running ahead of lockstep may hold more; the
/// measured figure is placed_training_session::peak_stashed_bytes().
struct stage_memory {
  std::size_t arena_bytes = 0;                  // the stage device's intermediates
  std::size_t stash_bytes_per_micro_batch = 0;  // what one micro-batch leaves for later stages
  std::size_t stash_bytes = 0;                  // that, for every micro-batch holding it at once
  [[nodiscard]] constexpr std::size_t total() const noexcept { return arena_bytes + stash_bytes; }
  friend constexpr bool operator==(const stage_memory&, const stage_memory&) = default;
};

struct placed_training_options {
  train::placement_options placement{};
  recomputation recompute = recomputation::none;  // pipelined only
  cpu::device_options device{};  // each stage's CPU device (the same as a training_session's gives the same results)
  std::size_t threads = 0;       // host threads running the stages; 0: one per core, at most one per stage
};

/// The placement PopTorch's execution strategy asks of a training step: PipelinedExecution
/// (AutoStage.SameAsIpu), SerialPhasedExecution or ParallelPhasedExecution, with
/// useSeparateBackwardPhase, each op's stage or phase taken from its annotation. Refused: a sharded
/// strategy (ipu::train::training_session runs it), explicit stage or phase lists (PopTorch's phased
/// strategies always list phases: not mapped to ops yet), AutoStage.AutoIncrement,
/// and a liveness other than AlwaysLive (it moves tensors to Streaming Memory between phases, which
/// the host executor does not model).
inline placed_training_options placed_options_from(const strategy_settings& s) {
  const std::string where = "execution strategy of a placed training";
  placed_training_options p;
  switch (s.mode) {
    case execution_mode::pipelined: p.placement.schedule = train::training_schedule::pipelined; break;
    case execution_mode::serial_phased: p.placement.schedule = train::training_schedule::serial_phased; break;
    case execution_mode::parallel_phased: p.placement.schedule = train::training_schedule::parallel_phased; break;
    case execution_mode::sharded:
      throw error(error_category::usage, "a sharded strategy places nothing to overlap", where,
                  "train with ipu::train::training_session, or choose a pipelined or phased strategy");
  }
  if (!s.stages.empty() || !s.phases.empty())
    throw error(error_category::usage, "the strategy lists its stages or phases", where,
                "annotate the model's ops with stages or phases instead (Builder scopes, ONNX attributes)");
  if (s.mode == execution_mode::pipelined && s.auto_stage != auto_stage::same_as_ipu)
    throw error(error_category::usage, "AutoStage.AutoIncrement is not applied to training", where,
                "annotate the ops with pipeline stages, or use AutoStage.SameAsIpu");
  if (s.tensors_liveness != liveness::always_live)
    throw error(error_category::usage, "a liveness other than AlwaysLive is not applied by the host executor", where,
                "use Liveness.AlwaysLive; the other settings only move tensors to Streaming Memory");
  p.placement.separate_backward_phase = s.separate_backward_phase;
  return p;
}

/// The placement and recomputation PopTorch's options ask of a training step: their execution
/// strategy (as above) and PopART's autoRecomputation (`_Popart.set("autoRecomputation", ...)`).
/// Every other option is the training session's to apply or refuse.
inline placed_training_options placed_options_from(const options& o) {
  o.validate(true);
  auto p = placed_options_from(o.execution_strategy());
  p.recompute = o.auto_recomputation();
  return p;
}

class placed_training_session {
 public:
  placed_training_session(const graph& model, train::training_options options, placed_training_options p = {})
      : options_(train::as_compiled(std::move(options))),
        p_(std::move(p)),
        tg_(std::make_shared<train::training_graph>(train::make_placed_training_graph(model, options_))),
        placement_(train::place_training_step(*tg_, p_.placement)) {
    if (p_.recompute != recomputation::none && p_.placement.schedule != train::training_schedule::pipelined)
      throw error(error_category::usage, "recomputation was asked of phased execution", where(),
                  "recompute in a pipeline; a phase's activations go to Streaming Memory instead");
    if (p_.placement.schedule != train::training_schedule::pipelined)
      for (const auto& op : model.ops())
        if (op.where.recompute)
          throw error(error_category::usage,
                      "op " + graph::describe(op) + " is marked for recomputation (RecomputeType::Recompute) in phased execution",
                      where(), "recompute in a pipeline, or drop the mark; a phase's activations go to Streaming Memory instead");
    if (options_.auto_loss_scaling.enabled)
      throw error(error_category::usage, "automatic loss scaling is not supported here", where(),
                  "train with ipu::train::training_session, or set the loss scale by hand");
    for (const auto& w : tg_->weights) weights_.push_back(value_of(w.info, w.initial));
    for (const auto& b : tg_->buffers) buffers_.push_back(value_of(b.info, b.initial));
    for (const auto& s : tg_->state) state_.push_back(initial_state(s));
    build();
    if (tg_->micro_batches > 1) update_.emplace(tg_->update, p_.device);
  }

  [[nodiscard]] const train::training_graph& graph_of_step() const noexcept { return *tg_; }
  [[nodiscard]] const train::training_placement& placement() const noexcept { return placement_; }
  /// Stages (pipelined) or phases a micro-batch visits: 2N - 1, or 2N with a separate backward phase.
  [[nodiscard]] std::size_t stages() const noexcept { return placement_.stages; }
  [[nodiscard]] std::uint64_t steps() const noexcept { return steps_; }
  /// The ops of stage `k` (ids in the step graph).
  [[nodiscard]] const std::vector<op_id>& stage_ops(std::size_t k) const { return stages_.at(k).ops; }
  /// The forward ops stage `k` runs again (recomputation) before its own.
  [[nodiscard]] const std::vector<op_id>& recomputed_ops(std::size_t k) const { return stages_.at(k).recomputed; }
  /// The most bytes of micro-batch values (stashed activations and what crosses between stages)
  /// held at once during the last step.
  [[nodiscard]] std::size_t peak_stashed_bytes() const noexcept { return peak_stashed_; }
  /// Stage `k`'s planned host memory: its arena and its stash (stage_memory).
  [[nodiscard]] const stage_memory& memory_plan(std::size_t k) const { return stages_.at(k).memory; }
  /// Host threads the last step ran on.
  [[nodiscard]] std::size_t threads_used() const noexcept { return threads_used_; }

  /// One weight update of a model that computes its own loss: its inputs only.
  train::step_result run(const std::vector<std::pair<std::string, const_tensor_view>>& inputs) { return run(inputs, {}); }

  /// One weight update: the model's inputs by name and the labels, each with the step's
  /// micro-batches stacked along the first axis, as training_session::run takes them.
  train::step_result run(const std::vector<std::pair<std::string, const_tensor_view>>& inputs, const_tensor_view labels) {
    const auto& tg = *tg_;
    if (tg.labels.empty() != (labels.data() == nullptr))
      throw error(error_category::usage, tg.labels.empty() ? "labels given, but the loss takes none" : "no labels given",
                  where(), tg.labels.empty() ? "call run(inputs)" : "pass the step's labels");
    std::vector<const_tensor_view> given(tg.model_inputs.size());
    std::vector<bool> seen(given.size(), false);
    for (const auto& [name, view] : inputs) {
      const auto i = index_of(tg.model_inputs, name);
      if (i == npos) throw error(error_category::usage, "the model has no input named '" + name + "'", where());
      if (seen[i]) throw error(error_category::usage, "input '" + name + "' is given twice", where(), "give each input once");
      seen[i] = true;
      given[i] = view;
    }
    for (std::size_t i = 0; i < seen.size(); ++i)
      if (!seen[i]) throw error(error_category::usage, "input '" + tg.model_inputs[i] + "' is not given", where());
    const auto micro = static_cast<std::size_t>(tg.micro_batches);
    for (std::size_t i = 0; i < given.size(); ++i) check_stacked(given[i], tg.model_inputs[i]);
    if (!tg.labels.empty()) check_stacked(labels, tg.labels);

    // The step's scalars, the same for every micro-batch.
    const auto scalars = train::step_scalars(options_.opt, steps_, tg.micro_batches, options_.reduction);
    step_values sv;
    sv.scalars.resize(tg.step.num_tensors());
    auto fill_scalars = [&](const graph& g, std::vector<host_tensor>& into) {
      into.resize(g.num_tensors());
      for (auto id : g.inputs()) {
        const auto& n = g.tensor(id);
        if (n.name == "optimizer/first_step") {
          host_tensor t(tensor_info{data_type::BOOL, {}});
          const bool first = steps_ == 0 || previous_momentum_ == 0 || momentum() == 0;  // as training_session
          t.bytes()[0] = std::byte{first ? std::uint8_t{1} : std::uint8_t{0}};
          into[id] = std::move(t);
        } else if (n.name.rfind("optimizer/", 0) == 0) {
          const auto base = n.name.substr(0, n.name.find(':'));
          const auto found = std::find_if(scalars.begin(), scalars.end(), [&](const auto& s) { return s.name == base; });
          if (found == scalars.end())
            throw error(error_category::internal, "the optimizer gives no value for step input '" + n.name + "'", where());
          host_tensor t(n.info);
          if (t.info().type == data_type::F64) t.as<double>()[0] = found->value;
          else if (t.info().type == data_type::F16) t.as<half>()[0] = half(static_cast<float>(found->value));
          else t.as<float>()[0] = static_cast<float>(found->value);
          into[id] = std::move(t);
        }
      }
    };
    fill_scalars(tg.step, sv.scalars);
    sv.given = &given;
    sv.labels = labels;
    sv.values.assign(micro, std::vector<host_tensor>());
    for (auto& v : sv.values) v.resize(tg.step.num_tensors());
    sv.losses.assign(micro, 0.0);
    sv.next_weights.assign(weights_.size(), std::nullopt);
    sv.next_state.assign(state_.size(), std::nullopt);
    sv.outputs.resize(tg.model_outputs.size());
    // What the stages carry from micro-batch to micro-batch: accumulators from zero, statistics
    // from their values now. Taken only when the whole step has run.
    for (auto& c : carried_) {
      if (c.is_buffer) c.value = buffers_[c.index];
      else {
        c.value = host_tensor(tg.accumulators[c.index].info);
        std::fill(c.value.bytes().begin(), c.value.bytes().end(), std::byte{0});
      }
    }
    stashed_ = 0;
    peak_atomic_ = 0;

    const auto w = p_.placement.schedule == train::training_schedule::pipelined     ? exec::wavefront::pipelined
                   : p_.placement.schedule == train::training_schedule::serial_phased ? exec::wavefront::serial_phased
                                                                                       : exec::wavefront::parallel_phased;
    threads_used_ = exec::run_stage_grid(stages_.size(), micro, w, {.threads = p_.threads},
                                         [&](std::size_t k, std::size_t j) { run_stage(k, j, sv); });
    peak_stashed_ = peak_atomic_.load();

    std::vector<host_tensor> next_buffers = buffers_;
    for (auto& c : carried_)
      if (c.is_buffer) next_buffers[c.index] = std::move(c.value);
    if (update_) {
      std::vector<host_tensor> update_scalars;
      fill_scalars(tg.update, update_scalars);
      const auto& ug = tg.update;
      std::vector<const_tensor_view> views;
      for (auto id : ug.inputs()) {
        const auto& name = ug.tensor(id).name;
        std::size_t i = npos;
        if ((i = index_by(tg.weights, name, [](const auto& x) -> const std::string& { return x.name; })) != npos)
          views.push_back(weights_[i].view());
        else if ((i = index_by(tg.state, name, [](const auto& x) -> const std::string& { return x.input; })) != npos)
          views.push_back(state_[i].view());
        else if ((i = accumulator_slot(name)) != npos) views.push_back(carried_[i].value.view());
        else if (name.rfind("optimizer/", 0) == 0) views.push_back(update_scalars[id].view());
        else throw error(error_category::internal, "update input '" + name + "' has no source", where());
      }
      auto out = update_->run(std::span<const const_tensor_view>(views));
      for (std::size_t k = 0; k < ug.outputs().size(); ++k) {
        const auto& name = ug.tensor(ug.outputs()[k]).name;
        std::size_t i = npos;
        if ((i = index_by(tg.weights, name, [](const auto& x) -> const std::string& { return x.updated; })) != npos)
          sv.next_weights[i] = std::move(out[k]);
        else if ((i = index_by(tg.state, name, [](const auto& x) -> const std::string& { return x.output; })) != npos)
          sv.next_state[i] = std::move(out[k]);
        else throw error(error_category::internal, "update output '" + name + "' has no destination", where());
      }
    }
    train::step_result r;
    r.micro_batch_losses = sv.losses;
    double total = 0;
    for (double l : sv.losses) total += l;
    r.loss = options_.reduction == train::accumulation_reduction::mean ? total / static_cast<double>(micro) : total;
    r.outputs = std::move(sv.outputs);
    for (std::size_t i = 0; i < weights_.size(); ++i)
      if (sv.next_weights[i]) weights_[i] = std::move(*sv.next_weights[i]);
    for (std::size_t i = 0; i < state_.size(); ++i)
      if (sv.next_state[i]) state_[i] = std::move(*sv.next_state[i]);
    buffers_ = std::move(next_buffers);
    previous_momentum_ = momentum();
    ++steps_;
    return r;
  }

  [[nodiscard]] std::vector<std::string> weight_names() const {
    std::vector<std::string> n;
    for (const auto& w : tg_->weights) n.push_back(w.name);
    return n;
  }
  [[nodiscard]] const host_tensor& weight(std::string_view name) const {
    const auto i = index_by(tg_->weights, name, [](const auto& x) -> const std::string& { return x.name; });
    if (i == npos) throw error(error_category::usage, "no trained weight named '" + std::string(name) + "'", where());
    return weights_[i];
  }
  [[nodiscard]] std::vector<std::string> buffer_names() const {
    std::vector<std::string> n;
    for (const auto& b : tg_->buffers) n.push_back(b.name);
    return n;
  }
  [[nodiscard]] const host_tensor& buffer(std::string_view name) const {
    const auto i = index_by(tg_->buffers, name, [](const auto& x) -> const std::string& { return x.name; });
    if (i == npos) throw error(error_category::usage, "no buffer named '" + std::string(name) + "'", where());
    return buffers_[i];
  }

 private:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  /// Where a stage's input comes from, or where its output goes.
  enum class source : std::uint8_t { earlier_stage, model_input, labels, weight, state, carried, step_scalar, dropout_seed };
  enum class sink : std::uint8_t { model_output, loss, weight, state, carried };
  struct in_binding {
    source kind;
    tensor_id tensor;  // in the step graph
    std::size_t index = 0;
  };
  struct out_binding {
    sink kind;
    std::size_t index = 0;
  };
  struct stage {
    std::vector<op_id> ops;          // placed here
    std::vector<op_id> recomputed;   // forward ops of an earlier stage run again here
    std::unique_ptr<cpu::device> device;  // none for a stage without ops
    std::vector<in_binding> in;
    std::vector<tensor_id> out;                     // the step graph's tensor of each output
    std::vector<bool> out_to_later;                 // read by a later stage
    std::vector<std::vector<out_binding>> out_to;   // step outputs each output is
    std::vector<tensor_id> last_read;               // values of earlier stages nobody reads after this stage
    stage_memory memory;
  };
  /// What a stage carries from one micro-batch to the next: a gradient accumulator or a running statistic.
  struct carried_value {
    bool is_buffer = false;
    std::size_t index = 0;  // in tg.accumulators or tg.buffers
    host_tensor value;
  };
  /// One step's values, shared by the stage jobs: each job writes only its stage's slots.
  struct step_values {
    const std::vector<const_tensor_view>* given = nullptr;
    const_tensor_view labels;
    std::vector<host_tensor> scalars;             // by step-graph tensor id
    std::vector<std::vector<host_tensor>> values;  // per micro-batch, by step-graph tensor id
    std::vector<double> losses;
    std::vector<std::optional<host_tensor>> next_weights, next_state;
    std::vector<host_tensor> outputs;
  };

  std::string where() const { return std::string(to_string(p_.placement.schedule)) + " training of '" + tg_->step.name() + "'"; }

  template <class V, class F>
  static std::size_t index_by(const std::vector<V>& v, std::string_view name, F field) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (field(v[i]) == name) return i;
    return npos;
  }
  static std::size_t index_of(const std::vector<std::string>& v, std::string_view name) {
    return index_by(v, name, [](const std::string& s) -> const std::string& { return s; });
  }
  std::size_t accumulator_slot(std::string_view name) const {
    for (std::size_t c = 0; c < carried_.size(); ++c)
      if (!carried_[c].is_buffer && tg_->accumulators[carried_[c].index].input == name) return c;
    return npos;
  }
  static host_tensor value_of(const tensor_info& info, const byte_buffer& data) {
    host_tensor t(info);
    if (data.size() != t.bytes().size())
      throw error(error_category::graph, "a weight holds " + std::to_string(data.size()) + " bytes but " + to_string(info) +
                                             " needs " + std::to_string(t.bytes().size()),
                  "placed training");
    if (data.size() > 0) std::memcpy(t.bytes().data(), data.data(), data.size());
    return t;
  }
  static host_tensor initial_state(const train::state_slot& s) {
    host_tensor t(s.info);
    if (s.initial != 0) {
      if (s.info.type == data_type::F64) std::fill(t.as<double>().begin(), t.as<double>().end(), s.initial);
      else if (s.info.type == data_type::F32) std::fill(t.as<float>().begin(), t.as<float>().end(), static_cast<float>(s.initial));
      else std::fill(t.as<half>().begin(), t.as<half>().end(), half(static_cast<float>(s.initial)));
    }
    return t;
  }
  [[nodiscard]] double momentum() const noexcept {
    const auto* s = std::get_if<train::sgd>(&options_.opt);
    return s ? s->momentum.value() : 0.0;
  }

  /// `all` must hold the step's micro-batches of input `name`, stacked.
  void check_stacked(const const_tensor_view& all, const std::string& name) const {
    const auto& want = tg_->step.tensor(*tg_->step.find_tensor(name)).info;
    const auto micro = tg_->micro_batches;
    const auto dims = want.shape.dims();
    const bool ok = all.data() != nullptr && all.info().type == want.type && all.info().shape.rank() == dims.size() &&
                    (micro == 1 ? all.info().shape == want.shape
                                : !dims.empty() && all.info().shape[0] % micro == 0 && all.info().shape[0] / micro == dims[0] &&
                                      std::equal(dims.begin() + 1, dims.end(), all.info().shape.dims().begin() + 1));
    if (!ok)
      throw error(error_category::shape,
                  "'" + name + "' is " + to_string(all.info()) + "; a step takes " + std::to_string(micro) +
                      " micro-batches of " + to_string(want),
                  where(), "stack the step's micro-batches along the first axis");
  }

  /// Cuts the step graph into its stages and binds each stage's inputs and outputs.
  void build() {
    const auto& tg = *tg_;
    const graph& g = tg.step;
    const auto n = placement_.stages;
    const auto nt = g.num_tensors();
    std::vector<std::size_t> made_in(nt, npos), last_read(nt, 0);
    for (op_id id = 0; id < g.num_ops(); ++id)
      for (auto t : g.op(id).outputs)
        if (t != no_tensor) made_in[t] = placement_.stage_of[id];
    std::vector<bool> is_output(nt, false);
    for (auto t : g.outputs()) is_output[t] = true;
    stages_.resize(n);
    const auto order = topological_order(g);
    for (auto id : order) stages_[placement_.stage_of[id]].ops.push_back(id);
    auto inputs_of = [&](op_id id) {
      auto in = g.op(id).inputs;
      for (auto t : implicit_inputs(g, g.op(id))) in.push_back(t);
      return in;
    };
    // Recomputation (train/recomputation.hpp): each backward stage runs again the recomputable
    // forward ops whose results it reads, and those they read from their own stage; what crosses
    // between forward stages stays stashed (the checkpoints).
    const train::forward_stages_view fv{tg.forward_ops, placement_.forward_stages, placement_.stage_of};
    {
      std::vector<std::size_t> position(g.num_ops(), 0);
      for (std::size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
      for (std::size_t k = fv.stages; k < n; ++k) {
        stages_[k].recomputed = train::recomputed_ops(g, fv, stages_[k].ops, p_.recompute);
        std::sort(stages_[k].recomputed.begin(), stages_[k].recomputed.end(),
                  [&](op_id a, op_id b) { return position[a] < position[b]; });
      }
    }
    // The last stage that reads each value (a stage reads what its ops read and do not make).
    for (std::size_t k = 0; k < n; ++k) {
      std::vector<op_id> runs = stages_[k].recomputed;
      runs.insert(runs.end(), stages_[k].ops.begin(), stages_[k].ops.end());
      std::vector<bool> inside(nt, false);
      for (auto id : runs)
        for (auto t : g.op(id).outputs)
          if (t != no_tensor) inside[t] = true;
      for (auto id : runs)
        for (auto t : inputs_of(id))
          if (t != no_tensor && !inside[t]) last_read[t] = std::max(last_read[t], k);
    }
    // The carried values: an accumulator's or statistic's input and its update must be on one stage.
    auto carry = [&](bool is_buffer, std::size_t index, const std::string& in, const std::string& out) {
      const auto ti = *g.find_tensor(in);
      const auto to = *g.find_tensor(out);
      const auto at = made_in[to];
      for (auto c : g.tensor(ti).consumers)
        if (placement_.stage_of[c] != at)
          throw error(error_category::usage,
                      std::string(is_buffer ? "running statistic '" : "gradient accumulator '") + in + "' is read at stage " +
                          std::to_string(placement_.stage_of[c]) + " but updated at stage " + std::to_string(at),
                      where(), "keep a BatchNormalization's ops on one stage");
      carried_.push_back({is_buffer, index, {}});
    };
    for (std::size_t i = 0; i < tg.accumulators.size(); ++i) carry(false, i, tg.accumulators[i].input, tg.accumulators[i].output);
    for (std::size_t i = 0; i < tg.buffers.size(); ++i) carry(true, i, tg.buffers[i].name, tg.buffers[i].updated);
    auto carried_by_input = [&](std::string_view name) {
      for (std::size_t c = 0; c < carried_.size(); ++c) {
        const auto& x = carried_[c];
        if ((x.is_buffer ? tg.buffers[x.index].name : tg.accumulators[x.index].input) == name) return c;
      }
      return npos;
    };
    auto carried_by_output = [&](std::string_view name) {
      for (std::size_t c = 0; c < carried_.size(); ++c) {
        const auto& x = carried_[c];
        if ((x.is_buffer ? tg.buffers[x.index].updated : tg.accumulators[x.index].output) == name) return c;
      }
      return npos;
    };
    std::vector<bool> model_output(nt, false);
    for (std::size_t k = 0; k < tg.model_outputs.size(); ++k) model_output[g.outputs()[k]] = true;
    for (std::size_t k = 0; k < n; ++k) {
      auto& s = stages_[k];
      if (s.ops.empty()) continue;
      std::vector<tensor_id> outs;
      for (auto id : s.ops)
        for (auto t : g.op(id).outputs)
          if (t != no_tensor && ((last_read[t] > k) || is_output[t])) outs.push_back(t);
      std::vector<op_id> runs = s.recomputed;
      runs.insert(runs.end(), s.ops.begin(), s.ops.end());
      auto sg = extract_stage(g, runs, outs, {}, std::shared_ptr<const void>(tg_, &tg_->step), "stage " + std::to_string(k));
      for (auto t : sg.inputs) {
        const auto& name = g.tensor(t).name;
        std::size_t i = npos;
        if (made_in[t] != npos) {
          s.in.push_back({source::earlier_stage, t, 0});
          if (last_read[t] == k) s.last_read.push_back(t);
        } else if ((i = index_of(tg.model_inputs, name)) != npos) s.in.push_back({source::model_input, t, i});
        else if (!tg.labels.empty() && name == tg.labels) s.in.push_back({source::labels, t, 0});
        else if ((i = index_by(tg.weights, name, [](const auto& x) -> const std::string& { return x.name; })) != npos)
          s.in.push_back({source::weight, t, i});
        else if ((i = index_by(tg.state, name, [](const auto& x) -> const std::string& { return x.input; })) != npos)
          s.in.push_back({source::state, t, i});
        else if ((i = carried_by_input(name)) != npos) s.in.push_back({source::carried, t, i});
        else if (name == train::dropout_seed_input) s.in.push_back({source::dropout_seed, t, 0});
        else if (name.rfind("optimizer/", 0) == 0) s.in.push_back({source::step_scalar, t, 0});
        else throw error(error_category::internal, "step input '" + name + "' has no source", where());
      }
      for (auto t : sg.outputs) {
        const auto& name = g.tensor(t).name;
        s.out.push_back(t);
        s.out_to_later.push_back(last_read[t] > k);
        std::vector<out_binding> to;
        std::size_t i = npos;
        if (model_output[t])
          for (std::size_t m = 0; m < tg.model_outputs.size(); ++m)
            if (g.outputs()[m] == t) to.push_back({sink::model_output, m});
        if (name == tg.loss) to.push_back({sink::loss, 0});
        if ((i = index_by(tg.weights, name, [](const auto& x) -> const std::string& { return x.updated; })) != npos)
          to.push_back({sink::weight, i});
        if ((i = index_by(tg.state, name, [](const auto& x) -> const std::string& { return x.output; })) != npos)
          to.push_back({sink::state, i});
        if ((i = carried_by_output(name)) != npos) to.push_back({sink::carried, i});
        if (to.empty() && is_output[t])
          throw error(error_category::internal, "step output '" + name + "' has no destination", where());
        s.out_to.push_back(std::move(to));
      }
      s.device = std::make_unique<cpu::device>(std::move(sg.model), p_.device);
      s.memory.arena_bytes = s.device->plan().arena_bytes;
      const auto micro = static_cast<std::size_t>(tg.micro_batches);
      for (std::size_t q = 0; q < s.out.size(); ++q) {
        if (!s.out_to_later[q]) continue;
        const auto t = s.out[q];
        const auto bytes = g.tensor(t).info.num_bytes();
        const auto holding = p_.placement.schedule == train::training_schedule::pipelined
                                 ? std::min(last_read[t] - k + 1, micro)
                                 : micro;
        s.memory.stash_bytes_per_micro_batch += bytes;
        s.memory.stash_bytes += bytes * holding;  // a step's values: far below size_t's range
      }
    }
  }

  /// Runs micro-batch `j` through stage `k`.
  void run_stage(std::size_t k, std::size_t j, step_values& sv) {
    auto& s = stages_[k];
    if (!s.device) return;
    const auto& tg = *tg_;
    auto& values = sv.values[j];
    std::vector<const_tensor_view> views;
    views.reserve(s.in.size());
    std::optional<host_tensor> seed;
    auto micro_batch = [&](const const_tensor_view& all, tensor_id t) {
      if (tg.micro_batches == 1) return all;
      const auto& want = tg.step.tensor(t).info;
      return const_tensor_view(want, all.data() + j * want.num_bytes());
    };
    for (const auto& b : s.in) {
      switch (b.kind) {
        case source::earlier_stage: views.push_back(values[b.tensor].view()); break;
        case source::model_input: views.push_back(micro_batch((*sv.given)[b.index], b.tensor)); break;
        case source::labels: views.push_back(micro_batch(sv.labels, b.tensor)); break;
        case source::weight: views.push_back(weights_[b.index].view()); break;
        case source::state: views.push_back(state_[b.index].view()); break;
        case source::carried: views.push_back(carried_[b.index].value.view()); break;
        case source::step_scalar: views.push_back(sv.scalars[b.tensor].view()); break;
        case source::dropout_seed:
          // As training_session feeds it: each micro-batch of each step draws its own masks.
          seed = host_tensor::from<std::uint64_t>(shape{3}, {options_.seed, steps_, static_cast<std::uint64_t>(j)});
          views.push_back(seed->view());
          break;
      }
    }
    auto out = s.device->run(std::span<const const_tensor_view>(views));
    std::size_t added = 0;
    for (std::size_t q = 0; q < out.size(); ++q) {
      for (const auto& d : s.out_to[q]) {
        switch (d.kind) {
          case sink::model_output:
            if (j + 1 == sv.values.size()) sv.outputs[d.index] = out[q];  // the last micro-batch's (output_mode::final)
            break;
          case sink::loss: {
            const auto& l = out[q];
            sv.losses[j] = l.info().type == data_type::F64   ? l.as<double>()[0]
                           : l.info().type == data_type::F16 ? static_cast<double>(static_cast<float>(l.as<half>()[0]))
                                                             : static_cast<double>(l.as<float>()[0]);
            break;
          }
          case sink::weight: sv.next_weights[d.index] = out[q]; break;
          case sink::state: sv.next_state[d.index] = out[q]; break;
          case sink::carried: carried_[d.index].value = out[q]; break;
        }
      }
      if (s.out_to_later[q]) {
        added += out[q].bytes().size();
        values[s.out[q]] = std::move(out[q]);
      }
    }
    std::size_t freed = 0;
    for (auto t : s.last_read) {
      freed += values[t].bytes().size();
      values[t] = host_tensor();
    }
    const auto now = stashed_.fetch_add(added) + added;
    for (auto peak = peak_atomic_.load(); now > peak && !peak_atomic_.compare_exchange_weak(peak, now);) {}
    stashed_.fetch_sub(freed);
  }

  train::training_options options_;
  placed_training_options p_;
  std::shared_ptr<train::training_graph> tg_;
  train::training_placement placement_;
  std::vector<stage> stages_;
  std::vector<carried_value> carried_;
  std::optional<cpu::device> update_;
  std::vector<host_tensor> weights_, state_, buffers_;
  std::uint64_t steps_ = 0;
  double previous_momentum_ = 0;
  std::atomic<std::size_t> stashed_{0}, peak_atomic_{0};
  std::size_t peak_stashed_ = 0, threads_used_ = 0;
};

}  // namespace ipu
