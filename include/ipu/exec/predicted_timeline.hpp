#pragma once
// The cost model's timeline of one step of the main program, before anything runs: every step of
// every micro-batch placed in simulated cycles on its IPU, as the schedule would run it.
//
//   sequential  micro-batches one after another, each step after the previous one;
//   pipelined   lockstep pipeline cycles as long as the slowest stage: stage s of micro-batch m
//               starts at (m + s) x slowest, its steps one after another;
//   phased      phases one after another, the stages of a phase side by side; with parallel phases
//               (and overlap allowed) the loads of phase p + 1 end as phase p ends.
// Events use the executor's timeline_event (simulated fields only; replica 0), so a predicted and a
// recorded timeline can be compared event by event; `worker` is the IPU whose time the step takes
// (the receiving IPU for a copy).
//
// Training (sched/training_plan.hpp) has a timeline of its own, per stage rather than per op: each
// pipeline cycle's forward and backward (recomputation included) on every IPU, then the gradient
// all-reduce on every IPU and the optimizer's update, for each weight update of the step.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ipu/sched/executable.hpp"
#include "ipu/sched/training_plan.hpp"
#include "ipu/exec/timeline.hpp"

namespace ipu {

namespace detail::sched {
constexpr timeline_event predicted_event(const step& s, const executable& e, std::uint64_t mb, std::uint64_t begin) {
  timeline_event ev;
  ev.kind = s.kind;
  ev.ipu = s.ipu;
  // The track the step occupies: a copy holds up the IPU receiving it (its stage waits for it).
  ev.worker = s.kind == step_kind::ipu_copy ? s.peer : s.ipu;
  ev.stage = s.stage;
  ev.phase = s.stage < e.stages.size() ? e.stages[s.stage].phase : -1;
  ev.micro_batch = mb;
  ev.op = s.op;
  ev.tensor = s.tensor;
  ev.peer = s.peer;
  ev.sim_begin = begin;
  ev.sim_cycles = s.cycles;
  return ev;
}
}  // namespace detail::sched

/// The predicted events of one step (batches_per_step x accumulation micro-batches), by start time.
constexpr std::vector<timeline_event> predicted_timeline(const executable& e) {
  using detail::sched::predicted_event;
  std::vector<timeline_event> out;
  if (e.programs.size() <= static_cast<std::size_t>(program_index::main)) return out;
  const auto& steps = e.programs[static_cast<std::size_t>(program_index::main)].steps;
  const std::uint64_t m = std::max<std::uint64_t>(e.predicted.micro_batches_per_step, 1);
  // Steps of each stage, in program order.
  std::vector<std::vector<const step*>> by_stage(e.stages.size());
  for (const auto& s : steps)
    if (s.stage < by_stage.size()) by_stage[s.stage].push_back(&s);
  auto lay = [&](const std::vector<const step*>& list, std::uint64_t mb, std::uint64_t t) {
    for (const auto* s : list) {
      out.push_back(predicted_event(*s, e, mb, t));
      t += s->cycles;
    }
    return t;
  };
  switch (e.schedule) {
    case schedule_kind::sequential: {
      std::uint64_t t = 0;
      for (std::uint64_t mb = 0; mb < m; ++mb)
        for (const auto& s : steps) {
          out.push_back(predicted_event(s, e, mb, t));
          t += s.cycles;
        }
      break;
    }
    case schedule_kind::pipelined: {
      std::uint64_t slowest = 0;
      for (const auto& st : e.stages) slowest = std::max(slowest, st.cycles);
      for (std::uint64_t mb = 0; mb < m; ++mb)
        for (std::size_t si = 0; si < by_stage.size(); ++si) lay(by_stage[si], mb, (mb + si) * slowest);
      break;
    }
    case schedule_kind::phased: {
      // Stage groups per phase.
      std::vector<std::vector<std::size_t>> phases;
      for (std::size_t si = 0; si < e.stages.size(); ++si) {
        if (si == 0 || e.stages[si].phase != e.stages[si - 1].phase) phases.emplace_back();
        phases.back().push_back(si);
      }
      const bool overlap = e.overlapped_phase_io;
      auto is_load = [](const step* s) {
        return s->kind == step_kind::from_remote || s->kind == step_kind::ipu_copy || s->kind == step_kind::host_to_device;
      };
      std::uint64_t t = 0;
      for (std::uint64_t mb = 0; mb < m; ++mb)
        for (std::size_t p = 0; p < phases.size(); ++p) {
          std::uint64_t end = t;
          for (auto si : phases[p]) {
            std::vector<const step*> loads, rest;
            for (const auto* s : by_stage[si]) (is_load(s) ? loads : rest).push_back(s);
            std::uint64_t load_cycles = 0;
            for (const auto* s : loads) load_cycles += s->cycles;
            // Overlapped loads run during the previous phase, ending when it ends.
            const bool early = overlap && (p > 0 || mb > 0);
            const std::uint64_t load_start = early ? (t > load_cycles ? t - load_cycles : 0) : t;
            const auto after_loads = lay(loads, mb, load_start);
            end = std::max(end, lay(rest, mb, early ? t : after_loads));
          }
          t = end;
        }
      break;
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const timeline_event& a, const timeline_event& b) { return a.sim_begin < b.sim_begin; });
  return out;
}

/// One piece of work of a predicted training step.
struct training_timeline_event {
  training_work work = training_work::forward;
  std::uint32_t ipu = 0;
  std::uint32_t stage = 0;
  std::int64_t micro_batch = -1;  // forward and backward; -1 for the all-reduce and the update
  std::uint64_t weight_update = 0;
  std::uint64_t begin = 0, cycles = 0;
  friend constexpr bool operator==(const training_timeline_event&, const training_timeline_event&) = default;
};

/// The predicted events of one training step (every weight update of it), by start time. Within a
/// pipeline cycle an IPU runs its forward, then its backward.
constexpr std::vector<training_timeline_event> predicted_training_timeline(const training_prediction& p) {
  std::vector<training_timeline_event> out;
  std::uint64_t base = 0;
  for (std::uint64_t u = 0; u < p.weight_updates_per_step; ++u) {
    for (const auto& c : p.cycles) {
      std::vector<std::uint64_t> cursor(p.ipus_per_replica, base + c.begin);
      auto add = [&](training_work w, const training_stage_cost& s, std::int64_t mb, std::uint64_t cycles) {
        if (mb < 0 || cycles == 0) return;
        out.push_back(training_timeline_event{w, s.ipu, s.stage, mb, u, cursor[s.ipu], cycles});
        cursor[s.ipu] += cycles;
      };
      for (std::size_t s = 0; s < p.stages.size(); ++s) {
        const auto& sc = p.stages[s];
        add(training_work::forward, sc, c.forward[s], sc.forward + sc.forward_io);
        add(training_work::backward, sc, c.backward[s], sc.recompute + sc.backward + sc.backward_io);
      }
    }
    const auto reduce_begin = base + p.accumulation_cycles;
    // The IPUs holding weights reduce their gradients at the same time, over rings of their own.
    if (p.all_reduce.cycles > 0)
      for (const auto& m : p.memory)
        if (m.weight_bytes > 0)
          out.push_back(training_timeline_event{training_work::all_reduce, m.ipu, 0, -1, u, reduce_begin, p.all_reduce.cycles});
    std::vector<std::uint64_t> cursor(p.ipus_per_replica, reduce_begin + p.all_reduce.cycles);
    for (const auto& sc : p.stages)
      if (sc.update > 0) {
        out.push_back(training_timeline_event{training_work::update, sc.ipu, sc.stage, -1, u, cursor[sc.ipu], sc.update});
        cursor[sc.ipu] += sc.update;
      }
    base += p.cycles_per_update;
  }
  std::sort(out.begin(), out.end(), [](const training_timeline_event& a, const training_timeline_event& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    return a.ipu < b.ipu;
  });
  return out;
}

}  // namespace ipu
