#pragma once
// The cost model's view of training: the training step graph (ipu/train/training_graph.hpp: the
// model, its loss, the backward ops autodiff added and the optimizer's updates, all ordinary ops)
// costed op by op through the op table, laid on the stages of a plan of the forward model, with the
// gradient all-reduce across replicas (device/collective_cost.hpp) and the memory training adds.
//
// Stages: a step op that computes a model tensor runs on that tensor's stage; the ops a written-out
// op became (training-mode BatchNormalization, Dropout) run where their result is read; the loss
// runs on the last stage; the backward ops of an op (autodiff names them "grad/<op>/...") run on
// that op's stage; accumulation and optimizer ops run on the stage of the weight they update.
//
// Per micro-batch and stage: forward = its forward ops + the forward's transfers and sync;
// backward = its backward ops (gradient accumulation included) + the gradients of its inputs sent
// back over the same IPU-Links as the inputs came + a sync. Once per weight update: the all-reduce
// of the gradients across replicas, then the optimizer's ops.
//
//   sharded / one IPU   per weight update = G x (sum of forward + sum of backward)
//   pipelined (N IPUs)  PopART's lockstep 2N - 1 stage pipeline: in pipeline cycle k, forward stage
//                       s runs micro-batch k - s and backward stage s micro-batch k - (2N - 2 - s)
//                       (the last stage's forward and backward are one stage); a cycle lasts as long
//                       as the busiest IPU in it, so ramp-up (forwards only) and ramp-down
//                       (backwards only) cycles are shorter than the steady ones: G + 2N - 2 cycles.
//   per step            = device iterations x (pipeline + all-reduce + update + outputs to the host)
//                         (the model's outputs leave once per weight update: PopTorch's training
//                         default OutputMode.Final returns the last micro-batch's)
//   samples/s           = micro-batch x G x device iterations x replicas / seconds per step
//
// Memory per IPU: the forward plan's (weights, live activations, stashes of the in-flight
// micro-batches' stage inputs, temporaries, vertex state; sched/memory_plan.hpp); the forward values
// the backward reads, once, and in a pipeline, for the other micro-batches in flight, those a
// stage's backward does not recompute (train/recomputation.hpp); plus per weight on the IPU:
// one gradient (G = 1) or one accumulator (G > 1, in the accumulation type), and the optimizer's
// state (SGD with momentum one copy, Adam / AdamW / LAMB two, RMSprop one to three, Adagrad one).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/constexpr_math.hpp"
#include "ipu/device/collective_cost.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"
#include "ipu/format.hpp"
#include "ipu/graph/captures.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/ops/op_cost.hpp"
#include "ipu/ops/op_table.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/sched/predict.hpp"
#include "ipu/train/recomputation.hpp"
#include "ipu/train/training_graph.hpp"

namespace ipu {

/// The kinds of work a training step does, as the predicted timeline draws them.
enum class training_work : std::uint8_t { forward, backward, update, all_reduce };

constexpr std::string_view to_string(training_work w) noexcept {
  switch (w) {
    case training_work::forward: return "forward";
    case training_work::backward: return "backward";
    case training_work::update: return "update";
    case training_work::all_reduce: return "all-reduce";
  }
  return "?";
}

struct training_stage_cost {
  std::uint32_t stage = 0, ipu = 0;
  std::uint64_t forward = 0;      // forward ops, one micro-batch
  std::uint64_t forward_io = 0;   // the forward's streams, copies and sync
  std::uint64_t backward = 0;     // backward and accumulation ops, one micro-batch
  std::uint64_t backward_io = 0;  // gradients sent back to the previous stages, and a sync
  std::uint64_t update = 0;       // optimizer ops, once per weight update
  std::uint64_t recompute = 0;    // pipelined: the forward ops its backward reruns (train/recomputation.hpp)
  std::uint32_t forward_ops = 0, backward_ops = 0, update_ops = 0;
  friend constexpr bool operator==(const training_stage_cost&, const training_stage_cost&) = default;
};

struct training_memory {
  std::uint32_t ipu = 0;
  std::uint64_t plan_bytes = 0;        // the forward plan's, stashes included
  std::uint64_t gradient_bytes = 0;    // gradients (G = 1) or accumulators (G > 1)
  std::uint64_t optimizer_bytes = 0;   // optimizer state
  std::uint64_t activation_bytes = 0;  // forward tensors the backward reads (one micro-batch)
  std::uint64_t stash_bytes = 0;       // pipelined: those of them stashed, for the other micro-batches in flight
  std::uint64_t weight_bytes = 0;      // the weights the IPU updates (what it all-reduces)
  [[nodiscard]] constexpr std::uint64_t total() const noexcept {
    return plan_bytes + gradient_bytes + optimizer_bytes + activation_bytes + stash_bytes;
  }
  friend constexpr bool operator==(const training_memory&, const training_memory&) = default;
};

/// One cycle of the training pipeline: which micro-batch each stage's forward and backward run
/// (-1: idle), when it starts and how long it lasts.
struct training_cycle {
  std::vector<std::int64_t> forward, backward;  // per stage
  std::uint64_t begin = 0, cycles = 0;
  friend constexpr bool operator==(const training_cycle&, const training_cycle&) = default;
};

struct training_prediction {
  std::vector<training_stage_cost> stages;
  std::vector<training_memory> memory;  // per IPU of one replica
  std::vector<training_cycle> cycles;   // of one weight update (pipelined: G + 2N - 2)
  bool pipelined = false;
  std::uint64_t pipeline_stages = 1;    // 2N - 1 when pipelined, else the forward stages
  std::uint64_t gradient_accumulation = 1;
  std::uint64_t weight_updates_per_step = 1;  // device iterations
  std::uint32_t replicas = 1, ipus_per_replica = 1;
  std::uint64_t micro_batch_size = 1;
  all_reduce_cost all_reduce{};         // of the IPU with the most gradient bytes
  std::uint64_t accumulation_cycles = 0;  // micro-batches of one weight update
  std::uint64_t update_cycles = 0;        // busiest IPU
  std::uint64_t output_cycles = 0;        // the last micro-batch's outputs to the host
  std::uint64_t cycles_per_update = 0;
  std::uint64_t cycles_per_step = 0;
  double seconds_per_step = 0;
  double samples_per_second = 0;          // all replicas
  double pipeline_bubble = 0;             // of the accumulation cycles
  std::vector<std::string> uncosted_ops;  // op types the op table has no cost rule for (costed generically)
  friend constexpr bool operator==(const training_prediction&, const training_prediction&) = default;
};

namespace detail::sched {

/// Op types of `g` without a cost rule in the op table, each once.
constexpr std::vector<std::string> ops_without_cost_rule(const graph& g) {
  std::vector<std::string> out;
  for (const auto& op : g.ops()) {
    const auto i = op_def_index(op.domain, op.type);
    if (i != no_op_def && ::ipu::op_row_at(i).cost) continue;
    std::string name = op.domain.empty() || op.domain == "ai.onnx" ? op.type : op.domain + "::" + op.type;
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  }
  return out;
}

constexpr bool starts_with(std::string_view s, std::string_view p) noexcept { return s.substr(0, p.size()) == p; }

/// The forward op a backward op of autodiff stands for ("grad/<op>/..."), or no_op.
constexpr op_id gradient_of(std::string_view name) noexcept {
  if (!starts_with(name, "grad/")) return no_op;
  std::uint64_t n = 0;
  std::size_t i = 5;
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return no_op;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) n = n * 10 + static_cast<std::uint64_t>(name[i] - '0');
  return static_cast<op_id>(n);
}

/// The stage of every op of the training step `step` (and, in `update_stage`, of its separate update
/// graph), from the stages of plan `e` of the forward model. `work` says forward or backward / update.
struct step_stages {
  std::vector<std::uint32_t> step_stage;
  std::vector<training_work> step_work;
  std::vector<std::uint32_t> update_stage;
};

constexpr step_stages assign_stages(const executable& e, const train::training_graph& tg) {
  const graph& model = e.model;
  const graph& g = tg.step;
  constexpr std::int64_t none = -1;
  std::vector<std::int64_t> ts(g.num_tensors(), none);
  const auto last_stage = static_cast<std::int64_t>(e.stages.empty() ? 0 : e.stages.size() - 1);
  // Model tensors keep their ids in the step.
  for (tensor_id t = 0; t < std::min(model.num_tensors(), g.num_tensors()); ++t) {
    const auto& n = model.tensor(t);
    if (n.name != g.tensor(t).name) continue;
    if (n.producer != no_op) {
      ts[t] = e.op_stage[n.producer];
    } else {
      for (auto c : n.consumers) ts[t] = ts[t] == none ? e.op_stage[c] : std::min<std::int64_t>(ts[t], e.op_stage[c]);
    }
  }
  const auto nops = g.num_ops();
  step_stages r{std::vector<std::uint32_t>(nops, 0), std::vector<training_work>(nops, training_work::forward), {}};
  std::vector<std::int64_t> os(nops, none);
  op_id first_grad = static_cast<op_id>(nops), last_grad = 0;
  for (op_id id = 0; id < nops; ++id)
    if (starts_with(g.op(id).name, "grad/")) {
      first_grad = std::min(first_grad, id);
      last_grad = id;
    }
  auto max_input = [&](const op_node& op, const std::vector<std::int64_t>& stages) {
    std::int64_t s = none;
    for (auto t : op.inputs)
      if (t != no_tensor && t < stages.size()) s = std::max(s, stages[t]);
    return s;
  };
  // Forward ops that compute model tensors.
  for (op_id id = 0; id < first_grad; ++id)
    for (auto t : g.op(id).outputs)
      if (t != no_tensor && t < model.num_tensors() && ts[t] != none && model.tensor(t).producer != no_op) os[id] = ts[t];
  // Written-out ops: where their results are read (reverse order reaches chains), else after their inputs.
  for (op_id id = first_grad; id-- > 0;) {
    if (os[id] != none) continue;
    std::int64_t s = none;
    for (auto t : g.op(id).outputs)
      if (t != no_tensor)
        for (auto c : g.tensor(t).consumers)
          if (c < first_grad && os[c] != none) s = s == none ? os[c] : std::min(s, os[c]);
    os[id] = s;
  }
  for (op_id id = 0; id < nops; ++id) {
    const auto& op = g.op(id);
    if (id < first_grad) {
      // The loss reads the prediction (last stage) and the labels (no stage): after its inputs.
      if (os[id] == none) os[id] = std::max<std::int64_t>(max_input(op, ts), 0);
    } else if (const auto f = gradient_of(op.name); f != no_op && f < nops) {
      os[id] = os[f];
      r.step_work[id] = training_work::backward;
    } else {
      // grad/sum, accumulation and (one micro-batch) optimizer ops: after their inputs.
      os[id] = std::max<std::int64_t>(max_input(op, ts), 0);
      const bool update = tg.micro_batches == 1 && id > last_grad;
      r.step_work[id] = update ? training_work::update : training_work::backward;
      if (starts_with(op.name, "grad/sum")) {
        std::int64_t s = none;
        for (auto t : op.inputs)
          if (t != no_tensor && ts[t] != none) s = s == none ? ts[t] : std::min(s, ts[t]);
        if (s != none) os[id] = s;
      }
    }
    os[id] = std::min(os[id], last_stage);
    for (auto t : op.outputs)
      if (t != no_tensor) ts[t] = os[id];
  }
  for (op_id id = 0; id < nops; ++id) r.step_stage[id] = static_cast<std::uint32_t>(os[id]);

  // The separate update graph: inputs named after a weight ("<w>", "<w>/accum", "<w>/<state>").
  if (tg.update.num_ops() > 0) {
    const graph& u = tg.update;
    std::vector<std::int64_t> us(u.num_tensors(), none);
    for (tensor_id t = 0; t < u.num_tensors(); ++t) {
      const auto& name = u.tensor(t).name;
      std::size_t best = 0;
      for (const auto& w : tg.weights) {
        if (w.name.size() <= best || !starts_with(name, w.name)) continue;
        if (name.size() != w.name.size() && name[w.name.size()] != '/') continue;
        if (auto id = g.find_tensor(w.name); id && ts[*id] != none) {
          us[t] = ts[*id];
          best = w.name.size();
        }
      }
    }
    r.update_stage.resize(u.num_ops(), 0);
    for (op_id id = 0; id < u.num_ops(); ++id) {
      const auto s = std::min(std::max<std::int64_t>(max_input(u.op(id), us), 0), last_stage);
      r.update_stage[id] = static_cast<std::uint32_t>(s);
      for (auto t : u.op(id).outputs)
        if (t != no_tensor) us[t] = s;
    }
  }
  return r;
}

}  // namespace detail::sched

/// What the training prediction needs besides the forward plan and the step.
struct training_plan_options {
  const plan_options* options = nullptr;  // as the forward plan was made (is_inference false)
  std::uint32_t replicas = 1;             // may exceed the plan's (replicas over pods)
  /// PopTorch's replicated tensor sharding of the optimizer state: each replica keeps 1/R of the
  /// state and updates 1/R of the weights; gradients are reduce-scattered and the updated weights
  /// all-gathered, the same bytes over the same rings as the all-reduce.
  bool shard_optimizer_state = false;
  /// Pipelined: PopART's autoRecomputation; the step's per-op marks (annotation::recompute,
  /// annotation::checkpoint) apply whatever it says. Which ops a backward stage reruns is the host
  /// executor's rule (train/recomputation.hpp): a stage's recompute is their forward cycles.
  recomputation recompute = recomputation::none;
};

/// Costs training step `tg` on the stages of `e`, a plan of the same model's forward pass made for
/// training (plan_options::is_inference false). Throws ipu::error (schedule) for a phased plan,
/// (memory) when an IPU does not hold what training needs.
constexpr training_prediction predict_training(const executable& e, const train::training_graph& tg,
                                               const training_plan_options& to) {
  using namespace detail::sched;
  const auto& o = *to.options;
  const std::string where = "training prediction for '" + e.model.name() + "' (" + e.strategy + ")";
  if (e.schedule == schedule_kind::phased)
    throw error(error_category::schedule, "phased training is not in the training cost model yet", where,
                "plan training with the sharded or pipelined strategy");
  if (e.is_inference)
    throw error(error_category::usage, "the plan was made for inference", where,
                "plan the forward model with plan_options::is_inference = false");
  const auto& a = e.device.arch;
  const op_cost_options costing{o.precision, o.partials_type, o.available_memory_proportion, 0};
  const auto st = assign_stages(e, tg);
  training_prediction p;
  p.pipelined = e.schedule == schedule_kind::pipelined;
  p.gradient_accumulation = o.gradient_accumulation;
  p.weight_updates_per_step = o.batches_per_step;
  p.replicas = to.replicas;
  p.ipus_per_replica = e.ipus_per_replica;
  p.micro_batch_size = e.micro_batch_size;
  p.uncosted_ops = ops_without_cost_rule(tg.step);
  for (auto& n : ops_without_cost_rule(tg.update))
    if (std::find(p.uncosted_ops.begin(), p.uncosted_ops.end(), n) == p.uncosted_ops.end()) p.uncosted_ops.push_back(n);

  const std::size_t ns = e.stages.size();
  for (const auto& s : e.stages) p.stages.push_back(training_stage_cost{s.id, s.ipu});
  for (op_id id = 0; id < tg.step.num_ops(); ++id) {
    const auto cycles = estimate_op_cost(tg.step, id, e.device, costing, o.cost_hook).cycles();
    auto& s = p.stages[st.step_stage[id]];
    switch (st.step_work[id]) {
      case training_work::forward: s.forward += cycles, ++s.forward_ops; break;
      case training_work::backward: s.backward += cycles, ++s.backward_ops; break;
      default: s.update += cycles, ++s.update_ops; break;
    }
  }
  for (op_id id = 0; id < tg.update.num_ops(); ++id) {
    auto& s = p.stages[st.update_stage[id]];
    s.update += estimate_op_cost(tg.update, id, e.device, costing, o.cost_hook).cycles();
    ++s.update_ops;
  }
  // Transfers: the forward's as planned; backward sends each copied input's gradient back.
  const auto& main = e.programs[static_cast<std::size_t>(program_index::main)];
  const auto times = stage_times(main, ns);
  // The model's outputs go to the host once per weight update (PopTorch's training default,
  // OutputMode.Final: the last micro-batch's), not with every micro-batch.
  std::vector<std::uint64_t> to_host(e.ipus_per_replica, 0);
  for (std::size_t i = 0; i < ns; ++i) {
    p.stages[i].forward_io = times[i].in + times[i].store + times[i].sync;
    p.stages[i].backward_io = times[i].sync;
    to_host[e.stages[i].ipu] += times[i].to_host;
  }
  p.output_cycles = to_host.empty() ? 0 : *std::max_element(to_host.begin(), to_host.end());
  for (const auto& s : main.steps)
    if (s.kind == step_kind::ipu_copy && s.stage < ns) p.stages[s.stage].backward_io += s.cycles;
  std::vector<std::uint64_t> stash(ns, 0);  // per forward stage
  if (p.pipelined) {
    const train::forward_stages_view fv{tg.forward_ops, ns, st.step_stage};
    std::vector<std::vector<op_id>> readers(ns);
    for (op_id id = 0; id < tg.step.num_ops(); ++id)
      if (st.step_work[id] != training_work::forward) readers[st.step_stage[id]].push_back(id);
    for (std::size_t i = 0; i + 1 < ns; ++i) {
      const auto rerun = train::recomputed_ops(tg.step, fv, readers[i], to.recompute);
      for (auto id : rerun) p.stages[i].recompute += estimate_op_cost(tg.step, id, e.device, costing, o.cost_hook).cycles();
      // The stash: what stage i's backward, and the forward ops it reruns, read of the values its own
      // forward made and it does not rerun, held for each micro-batch between stage i's forward and
      // its backward (2 (N - i) - 1 in lockstep, at most G, as the host executor holds them). One
      // micro-batch's copy is in activation_bytes; values from earlier stages arrive as the stage's
      // inputs, which the forward plan stashes already.
      const auto held = std::min<std::uint64_t>(2 * (ns - i) - 1, o.gradient_accumulation);
      if (held < 2) continue;
      std::vector<bool> reruns(tg.step.num_ops(), false), seen(tg.step.num_tensors(), false);
      for (auto id : rerun) reruns[id] = true;
      auto stashed = [&](tensor_id t) {
        if (t == no_tensor || t >= seen.size() || seen[t]) return;
        seen[t] = true;
        const auto made = tg.step.tensor(t).producer;
        if (made == no_op || st.step_work[made] != training_work::forward || st.step_stage[made] != i || reruns[made]) return;
        stash[i] += costed_bytes(tg.step.tensor(t).info, costing) * (held - 1);
      };
      auto reads = [&](op_id id) {
        for (auto t : tg.step.op(id).inputs) stashed(t);
        for (auto t : implicit_inputs(tg.step, tg.step.op(id))) stashed(t);
      };
      for (auto id : readers[i]) reads(id);
      for (auto id : rerun) reads(id);
    }
  }

  // Memory.
  for (const auto& m : e.memory) p.memory.push_back(training_memory{m.ipu, m.total_bytes});
  for (std::size_t i = 0; i < ns; ++i)
    for (auto& m : p.memory)
      if (m.ipu == e.stages[i].ipu) m.stash_bytes += stash[i];
  auto ipu_of_weight = [&](std::string_view name) -> std::uint32_t {
    if (auto t = tg.step.find_tensor(name))
      for (auto c : tg.step.tensor(*t).consumers) return e.stages[st.step_stage[c]].ipu;
    return 0;
  };
  auto add_bytes = [&](std::uint32_t ipu, std::uint64_t training_memory::*field, std::uint64_t b) {
    for (auto& m : p.memory)
      if (m.ipu == ipu) m.*field += b;
  };
  auto owner = [&](std::string_view slot) -> const train::trained_weight* {
    const train::trained_weight* best = nullptr;
    for (const auto& w : tg.weights)
      if (starts_with(slot, w.name) && slot.size() > w.name.size() && slot[w.name.size()] == '/' &&
          (!best || w.name.size() > best->name.size()))
        best = &w;
    return best;
  };
  for (const auto& w : tg.weights) {
    if (w.updated.empty()) continue;
    const auto ipu = ipu_of_weight(w.name);
    const auto bytes = costed_bytes(w.info, costing);
    add_bytes(ipu, &training_memory::weight_bytes, bytes);
    if (tg.micro_batches == 1) add_bytes(ipu, &training_memory::gradient_bytes, bytes);
  }
  for (const auto& acc : tg.accumulators)
    if (const auto* w = owner(acc.input)) add_bytes(ipu_of_weight(w->name), &training_memory::gradient_bytes, costed_bytes(acc.info, costing));
  for (const auto& s : tg.state)
    if (const auto* w = owner(s.input)) add_bytes(ipu_of_weight(w->name), &training_memory::optimizer_bytes, costed_bytes(s.info, costing));
  {
    std::vector<bool> seen(tg.step.num_tensors(), false);
    for (op_id id = 0; id < tg.step.num_ops(); ++id) {
      if (st.step_work[id] != training_work::backward) continue;
      for (auto t : tg.step.op(id).inputs) {
        if (t == no_tensor || seen[t]) continue;
        const auto& n = tg.step.tensor(t);
        if (n.kind != tensor_kind::intermediate && n.kind != tensor_kind::input) continue;
        if (n.producer != no_op && st.step_work[n.producer] != training_work::forward) continue;
        if (n.producer == no_op && (n.consumers.empty() || st.step_work[n.consumers.front()] != training_work::forward)) continue;
        seen[t] = true;
        // Weights are inputs of the step: counted with the plan already.
        if (n.producer == no_op && std::any_of(tg.weights.begin(), tg.weights.end(),
                                               [&](const train::trained_weight& w) { return w.name == n.name; }))
          continue;
        add_bytes(e.stages[st.step_stage[id]].ipu, &training_memory::activation_bytes, costed_bytes(n.info, costing));
      }
    }
  }
  if (to.shard_optimizer_state) {
    if (to.replicas < 2)
      throw error(error_category::usage, "replicated tensor sharding of the optimizer state with one replica", where,
                  "shard over 2 or more replicas, or leave sharding off");
    for (auto& m : p.memory) m.optimizer_bytes = ipu::ceil_div(m.optimizer_bytes, to.replicas);
    for (auto& s : p.stages) s.update = ipu::ceil_div(s.update, to.replicas);
  }
  const auto sram = a.sram_bytes_per_ipu();
  for (const auto& m : p.memory)
    if (o.check_memory && m.total() > sram)
      throw error(error_category::memory,
                  "IPU " + format_uint(m.ipu) + " needs " + format_uint(m.total() >> 20) + " MiB for training (plan " +
                      format_uint(m.plan_bytes >> 20) + " MiB, gradients " + format_uint(m.gradient_bytes >> 20) +
                      " MiB, optimizer state " + format_uint(m.optimizer_bytes >> 20) + " MiB, activations for the backward " +
                      format_uint(m.activation_bytes >> 20) + " MiB, stashed for the micro-batches in flight " +
                      format_uint(m.stash_bytes >> 20) + " MiB) but has " +
                      format_uint(sram >> 20) + " MiB",
                  where, m.stash_bytes > 0 ? "recompute in the backward (PopART's autoRecomputation: a pipeline stashes less), "
                                             "use a smaller micro-batch, FP16, more IPUs per replica, or an optimizer with less state"
                                           : "use a smaller micro-batch, FP16, more IPUs per replica, or an optimizer with less state");

  // One weight update's micro-batches.
  std::vector<std::uint64_t> busy(e.ipus_per_replica, 0);
  const std::uint64_t g = o.gradient_accumulation;
  if (p.pipelined) {
    const std::uint64_t n = ns;
    p.pipeline_stages = 2 * n - 1;
    std::uint64_t steady = 0;
    for (const auto& s : p.stages) steady = std::max(steady, s.forward + s.forward_io + s.recompute + s.backward + s.backward_io);
    std::uint64_t t = 0;
    for (std::uint64_t k = 0; k < g + 2 * n - 2; ++k) {
      training_cycle c;
      std::fill(busy.begin(), busy.end(), 0);
      for (std::uint64_t s = 0; s < n; ++s) {
        const auto f = static_cast<std::int64_t>(k) - static_cast<std::int64_t>(s);
        const auto b = static_cast<std::int64_t>(k) - static_cast<std::int64_t>(2 * n - 2 - s);
        const bool fa = f >= 0 && f < static_cast<std::int64_t>(g), ba = b >= 0 && b < static_cast<std::int64_t>(g);
        c.forward.push_back(fa ? f : -1);
        c.backward.push_back(ba ? b : -1);
        const auto& sc = p.stages[s];
        busy[sc.ipu] += (fa ? sc.forward + sc.forward_io : 0) + (ba ? sc.recompute + sc.backward + sc.backward_io : 0);
      }
      c.begin = t;
      c.cycles = *std::max_element(busy.begin(), busy.end());
      t += c.cycles;
      p.cycles.push_back(std::move(c));
    }
    p.accumulation_cycles = t;
    p.pipeline_bubble = t == 0 ? 0 : 1.0 - static_cast<double>(g * steady) / static_cast<double>(t);
  } else {
    p.pipeline_stages = ns;
    std::uint64_t per_mb = 0;
    for (const auto& s : p.stages) per_mb += s.forward + s.forward_io + s.backward + s.backward_io;
    for (std::uint64_t k = 0; k < g; ++k) {
      training_cycle c;
      c.forward.assign(ns, static_cast<std::int64_t>(k));
      c.backward.assign(ns, static_cast<std::int64_t>(k));
      c.begin = k * per_mb;
      c.cycles = per_mb;
      p.cycles.push_back(std::move(c));
    }
    p.accumulation_cycles = g * per_mb;
  }
  // All-reduce (the IPU with the most gradient bytes bounds it), then the optimizer.
  // Replicas sit at the stride of the IPUs reserved for each (a power of two: autoRoundNumIPUs
  // leaves the excess idle).
  const auto stride = e.replication_factor == 0 || e.ipus_reserved < e.replication_factor
                          ? e.ipus_per_replica
                          : e.ipus_reserved / e.replication_factor;
  for (const auto& m : p.memory) {
    const auto ar = ring_all_reduce_cost(a, stride, to.replicas, m.weight_bytes);
    if (ar.cycles >= p.all_reduce.cycles) p.all_reduce = ar;
  }
  std::fill(busy.begin(), busy.end(), 0);
  for (const auto& s : p.stages) busy[s.ipu] += s.update;
  p.update_cycles = busy.empty() ? 0 : *std::max_element(busy.begin(), busy.end());
  p.cycles_per_update = p.accumulation_cycles + p.all_reduce.cycles + p.update_cycles + p.output_cycles;
  p.cycles_per_step = o.batches_per_step * p.cycles_per_update;
  p.seconds_per_step = static_cast<double>(p.cycles_per_step) / static_cast<double>(a.clock_hz);
  const double distinct = static_cast<double>(to.replicas) / static_cast<double>(o.input_group_size == 0 ? 1 : o.input_group_size);
  if (p.seconds_per_step > 0)
    p.samples_per_second = static_cast<double>(e.micro_batch_size * g * o.batches_per_step) * distinct / p.seconds_per_step;
  return p;
}

}  // namespace ipu
