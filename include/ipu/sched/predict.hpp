#pragma once
// The cost model's predictions for a plan: cycles per step, latency, throughput and pipeline bubble,
// from the costed steps of the main program (program_builder.hpp) and the pipeline arithmetic of
// pipeline_cost.hpp.
//
// Per stage and micro-batch: in = streams, copies and loads into the stage; compute = its ops;
// out = streams to the host and stores; plus the sync that closes it.
//
//   sharded      per micro-batch  = sum of the stages (one IPU at a time)
//   pipelined    per step         = (M + S - 1) x slowest stage          (lockstep pipeline)
//                latency          = S x slowest stage;  bubble = (S - 1) / (M + S - 1)
//   phased       per micro-batch  = sum over phases of (loads + compute + stores + sync); parallel
//                                   phased execution (except the NoOverlap liveness) loads phase
//                                   p + 1 on the other IPU group while phase p computes:
//                                   loads_0 + sum_p (max(compute_p + stores_p, loads_p+1) + sync)
//   throughput   = micro-batch size x micro-batches per step x replicas / input group size
//                  / seconds per step
//
// Training, in the executable's own prediction (the graph holds the forward pass; the backward pass
// is modelled, not built; sched/training_plan.hpp costs the built training step op by op instead): the
// backward pass of a stage costs twice its forward compute (a data-gradient and a weight-gradient
// product per forward one) and sends gradients back over the same links; pipelines have 2S - 1
// stages and fill once per weight update (M = gradient accumulation); each weight update adds an
// element-wise pass over the weights and, with replicas, a ring all-reduce of the gradients
// (2 (R - 1) / R of the weight bytes over the IPU-Links between replicas).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ipu/device/cost.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/poptorch/strategy.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/sched/execution_strategy.hpp"
#include "ipu/ops/op_cost.hpp"

namespace ipu::detail::sched {

struct stage_time {
  std::uint64_t in = 0;       // host_to_device, ipu_copy, from_remote
  std::uint64_t compute = 0;  // ops
  std::uint64_t to_host = 0;  // device_to_host
  std::uint64_t store = 0;    // to_remote
  std::uint64_t sync = 0;
  std::uint64_t remote_bytes = 0;
  [[nodiscard]] constexpr std::uint64_t total() const noexcept { return in + compute + to_host + store + sync; }
};

constexpr std::vector<stage_time> stage_times(const program& main, std::size_t num_stages) {
  std::vector<stage_time> r(num_stages);
  for (const auto& st : main.steps) {
    if (st.stage >= num_stages) continue;
    auto& t = r[st.stage];
    switch (st.kind) {
      case step_kind::compute: t.compute += st.cycles; break;
      case step_kind::host_to_device:
      case step_kind::ipu_copy: t.in += st.cycles; break;
      case step_kind::from_remote:
        t.in += st.cycles;
        t.remote_bytes += st.bytes;
        break;
      case step_kind::device_to_host: t.to_host += st.cycles; break;
      case step_kind::to_remote:
        t.store += st.cycles;
        t.remote_bytes += st.bytes;
        break;
      case step_kind::sync: t.sync += st.cycles; break;
    }
  }
  return r;
}

struct predict_context {
  schedule_kind schedule = schedule_kind::sequential;
  bool parallel_phases = false;
  bool overlap_phase_io = true;  // false for OffChipAfterFwdNoOverlap
  const plan_options* options = nullptr;
  device_description device{};  // reserved IPUs
  op_cost_options costing{};
  std::uint32_t ipus_per_replica = 1;
};

/// Cycles of one weight update on the busiest IPU: an element-wise pass over its variables, plus the
/// gradient all-reduce across replicas.
constexpr std::uint64_t weight_update_cycles(const predict_context& c, const graph& g, const std::vector<stage_plan>& stages) {
  const auto& a = c.device.arch;
  std::uint64_t worst = 0;
  for (std::uint32_t ipu = 0; ipu < c.ipus_per_replica; ++ipu) {
    std::vector<tensor_id> vars;
    for (const auto& st : stages) {
      if (st.ipu != ipu) continue;
      for (auto id : st.ops)
        for (auto t : g.op(id).inputs)
          if (t != no_tensor && g.tensor(t).kind == tensor_kind::variable && std::find(vars.begin(), vars.end(), t) == vars.end())
            vars.push_back(t);
    }
    std::uint64_t cycles = 0, bytes = 0;
    for (auto v : vars) {
      const auto& info = g.tensor(v).info;
      const auto n = info.num_elements() > 0 ? static_cast<std::uint64_t>(info.num_elements()) : 0;
      cycles += elementwise_cost(a, costed_type(info.type, c.costing), n, 2, 2).cycles;
      bytes += costed_bytes(info, c.costing);
    }
    const auto r = c.options->replication_factor;
    if (r > 1 && bytes > 0) {
      const std::uint64_t ring = bytes * 2 * (r - 1) / r;
      cycles += ipu_link_copy_cycles(c.device, ipu, ipu + c.ipus_per_replica, ring);
    }
    worst = std::max(worst, cycles);
  }
  return worst;
}

/// Fills each stage's cycles and returns the prediction.
constexpr prediction predict(const predict_context& c, const graph& g, std::vector<stage_plan>& stages,
                             const program& main, std::uint64_t micro_batch_size) {
  const auto& o = *c.options;
  const bool training = !o.is_inference;
  const auto times = stage_times(main, stages.size());
  prediction p;
  if (stages.empty()) return p;
  std::uint64_t slowest = 0;
  std::uint64_t remote_per_mb = 0;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    stages[i].cycles = times[i].total();
    const auto cyc = times[i].total() + (training ? 2 * times[i].compute + times[i].in : 0);
    if (cyc > slowest) {
      slowest = cyc;
      p.slowest_stage = static_cast<std::uint32_t>(i);
    }
  }
  {
    std::vector<std::uint64_t> per_ipu(c.ipus_per_replica, 0);
    for (std::size_t i = 0; i < stages.size(); ++i)
      if (stages[i].ipu < per_ipu.size()) per_ipu[stages[i].ipu] += times[i].remote_bytes;
    for (auto b : per_ipu) remote_per_mb = std::max(remote_per_mb, b);
  }
  const std::uint64_t bps = o.batches_per_step;
  const std::uint64_t accumulation = training ? o.gradient_accumulation : 1;
  p.micro_batches_per_step = bps * accumulation;
  const std::uint64_t update = training ? weight_update_cycles(c, g, stages) : 0;

  switch (c.schedule) {
    case schedule_kind::sequential: {
      std::uint64_t per_mb = 0;
      for (const auto& t : times) per_mb += t.total() + (training ? 2 * t.compute + t.in : 0);
      p.latency_cycles = per_mb;
      p.cycles_per_step = per_mb * p.micro_batches_per_step + bps * update;
      break;
    }
    case schedule_kind::pipelined: {
      const std::uint64_t s = training ? 2 * stages.size() - 1 : stages.size();
      const std::uint64_t m = training ? accumulation : bps;
      p.latency_cycles = s * slowest;
      p.cycles_per_step = training ? bps * (pipeline_cycles(slowest, s, m) + update) : pipeline_cycles(slowest, s, m);
      p.pipeline_bubble = pipeline_bubble_fraction(s, m);
      break;
    }
    case schedule_kind::phased: {
      struct phase_time {
        std::uint64_t load = 0, compute = 0, store = 0, sync = 0;
      };
      std::vector<phase_time> phases;
      for (std::size_t i = 0; i < stages.size(); ++i) {
        if (i == 0 || stages[i].phase != stages[i - 1].phase) phases.push_back({});
        auto& ph = phases.back();
        ph.load = std::max(ph.load, times[i].in);
        ph.compute = std::max(ph.compute, times[i].compute + times[i].to_host);
        ph.store = std::max(ph.store, times[i].store);
        ph.sync = std::max(ph.sync, times[i].sync);
      }
      std::uint64_t fwd = 0;
      if (c.parallel_phases && c.overlap_phase_io) {
        fwd = phases.front().load;
        for (std::size_t q = 0; q < phases.size(); ++q) {
          const auto next = q + 1 < phases.size() ? phases[q + 1].load : 0;
          fwd += std::max(phases[q].compute + phases[q].store, next) + phases[q].sync;
        }
      } else {
        for (const auto& ph : phases) fwd += ph.load + ph.compute + ph.store + ph.sync;
      }
      std::uint64_t bwd = 0;
      if (training)
        for (const auto& ph : phases) bwd += 2 * ph.compute + ph.load + ph.store + ph.sync;
      p.latency_cycles = fwd;
      p.cycles_per_step = (fwd + bwd) * p.micro_batches_per_step + bps * update;
      break;
    }
  }
  const auto clock = static_cast<double>(c.device.arch.clock_hz);
  p.seconds_per_step = static_cast<double>(p.cycles_per_step) / clock;
  p.latency_seconds = static_cast<double>(p.latency_cycles) / clock;
  p.streaming_memory_bytes = remote_per_mb * p.micro_batches_per_step * (training ? 2 : 1);
  const double distinct_replicas =
      static_cast<double>(o.replication_factor) / static_cast<double>(o.input_group_size == 0 ? 1 : o.input_group_size);
  if (p.seconds_per_step > 0)
    p.samples_per_second = static_cast<double>(micro_batch_size) * static_cast<double>(p.micro_batches_per_step) *
                           distinct_replicas / p.seconds_per_step;
  return p;
}

}  // namespace ipu::detail::sched
