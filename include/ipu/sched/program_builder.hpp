#pragma once
// The executable's programs and host streams, with every step costed by the device model:
//
//   host_to_device / device_to_host   bytes / host link bytes/s             (transfer.hpp)
//   ipu_copy                          bytes / (links of the route x link bytes/s)
//   from_remote / to_remote           bytes / Streaming Memory bytes/s
//   compute                           the op's estimate (ops/op_cost.hpp)
//   sync                              one global sync (bsp.hpp)
//
// The main program follows one micro-batch stage by stage (see executable.hpp). A tensor is
// streamed from the host to the first IPU that needs it and copied over IPU-Links to any other;
// an intermediate tensor is copied from its producer's IPU to each other IPU that reads it. In
// phased execution the liveness decides what goes through Streaming Memory:
//   AlwaysLive                 weights and activations stay on chip; nothing is off chip;
//   OffChipAfterFwd(NoOverlap) weights live in Streaming Memory and are loaded at the start of every
//                              phase that uses them; activations stay on chip during the forward
//                              pass (in inference, all of it);
//   OffChipAfterEachPhase      as above, and activations read by a later phase are stored at the end
//                              of their phase and loaded back by the phase that reads them.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/device/cost.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/poptorch/strategy.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/ops/op_cost.hpp"
#include "ipu/sched/stage_builder.hpp"

namespace ipu::detail::sched {

// The host CPU device has no cost figures: its steps take 0 cycles.
constexpr std::uint64_t host_cycles(const architecture_description& a, std::uint64_t bytes) {
  return bytes == 0 || a.clock_hz == 0 ? 0 : seconds_to_cycles(a, host_transfer_seconds(a, bytes));
}
constexpr std::uint64_t remote_cycles(const architecture_description& a, std::uint64_t bytes) {
  return bytes == 0 || a.clock_hz == 0 ? 0 : seconds_to_cycles(a, streaming_memory_seconds(a, bytes));
}
constexpr std::uint64_t copy_cycles(const device_description& d, std::uint32_t from, std::uint32_t to, std::uint64_t bytes) {
  return d.has_tile_limits() ? ipu_link_copy_cycles(d, from, to, bytes) : 0;
}
constexpr std::uint64_t sync_step_cycles(const device_description& d) { return d.has_tile_limits() ? sync_cycles(d) : 0; }

/// What the program builder needs besides the graph and the stages.
struct program_context {
  const graph* model = nullptr;
  device_description device{};  // the IPUs the program runs on (syncs span them)
  op_cost_options costing{};
  const std::vector<std::uint64_t>* op_cycles = nullptr;
  bool phased = false;
  liveness live = liveness::always_live;
  bool training = false;
};

constexpr bool is_graph_output(const graph& g, tensor_id t) {
  return std::find(g.outputs().begin(), g.outputs().end(), t) != g.outputs().end();
}

/// Variables read by the ops of a stage (each once, in first-use order).
constexpr std::vector<tensor_id> stage_variables(const graph& g, const stage_plan& st) {
  std::vector<tensor_id> v;
  for (auto id : st.ops)
    for (auto t : g.op(id).inputs)
      if (t != no_tensor && g.tensor(t).kind == tensor_kind::variable && std::find(v.begin(), v.end(), t) == v.end())
        v.push_back(t);
  return v;
}

/// Whether an op of a phase after `phase` reads `t`.
constexpr bool read_after_phase(const graph& g, const staged_ops& s, tensor_id t, std::int64_t phase) {
  for (auto c : g.tensor(t).consumers)
    if (s.stages[s.op_stage[c]].phase > phase) return true;
  return false;
}

constexpr step make_step(step_kind k, std::uint32_t stage, std::uint32_t ipu, op_id op, tensor_id t,
                         std::uint64_t bytes, std::uint64_t cycles, std::uint32_t peer = 0) {
  step s;
  s.kind = k;
  s.op = op;
  s.tensor = t;
  s.ipu = ipu;
  s.peer = peer;
  s.bytes = bytes;
  s.cycles = cycles;
  s.stage = stage;
  return s;
}

/// The main program (see the file comment).
constexpr program main_program(const program_context& c, const staged_ops& s) {
  const graph& g = *c.model;
  const auto& a = c.device.arch;
  program p;
  p.name = "main";
  std::vector<std::vector<std::uint32_t>> held(g.num_tensors());  // IPUs holding each tensor now
  std::vector<bool> off_chip(g.num_tensors(), false);
  std::vector<bool> sent_to_host(g.num_tensors(), false);
  auto holds = [&](tensor_id t, std::uint32_t ipu) {
    return std::find(held[t].begin(), held[t].end(), ipu) != held[t].end();
  };
  auto bytes_of = [&](tensor_id t) { return costed_bytes(g.tensor(t).info, c.costing); };
  const bool weights_off_chip = c.phased && c.live != liveness::always_live;
  const bool activations_off_chip = c.phased && c.live == liveness::off_chip_after_each_phase;

  auto run_stage = [&](std::uint32_t si) {
    const auto& st = s.stages[si];
    if (weights_off_chip)
      for (auto v : stage_variables(g, st))
        p.steps.push_back(make_step(step_kind::from_remote, si, st.ipu, no_op, v, bytes_of(v), remote_cycles(a, bytes_of(v))));
    for (auto t : st.inputs) {
      if (holds(t, st.ipu)) continue;
      const auto b = bytes_of(t);
      if (off_chip[t]) {
        p.steps.push_back(make_step(step_kind::from_remote, si, st.ipu, no_op, t, b, remote_cycles(a, b)));
      } else if (held[t].empty()) {  // a graph input nobody has yet
        p.steps.push_back(make_step(step_kind::host_to_device, si, st.ipu, no_op, t, b, host_cycles(a, b)));
      } else {
        const auto from = held[t].front();
        p.steps.push_back(make_step(step_kind::ipu_copy, si, from, no_op, t, b,
                                    copy_cycles(c.device, from, st.ipu, b), st.ipu));
      }
      held[t].push_back(st.ipu);
    }
    for (auto id : st.ops) {
      p.steps.push_back(make_step(step_kind::compute, si, st.ipu, id, no_tensor, 0, (*c.op_cycles)[id]));
      for (auto t : g.op(id).outputs) held[t] = {st.ipu};
    }
    for (auto t : st.outputs)
      if (is_graph_output(g, t) && !sent_to_host[t]) {
        sent_to_host[t] = true;
        p.steps.push_back(make_step(step_kind::device_to_host, si, st.ipu, no_op, t, bytes_of(t), host_cycles(a, bytes_of(t))));
      }
  };
  auto close_stage = [&](std::uint32_t si) {
    const auto& st = s.stages[si];
    if (activations_off_chip)
      for (auto t : st.outputs)
        if (read_after_phase(g, s, t, st.phase)) {
          p.steps.push_back(make_step(step_kind::to_remote, si, st.ipu, no_op, t, bytes_of(t), remote_cycles(a, bytes_of(t))));
          off_chip[t] = true;
          held[t].clear();
        }
    p.steps.push_back(make_step(step_kind::sync, si, st.ipu, no_op, no_tensor, 0, sync_step_cycles(c.device)));
  };

  if (!c.phased) {
    for (std::uint32_t si = 0; si < s.stages.size(); ++si) {
      run_stage(si);
      close_stage(si);
    }
  } else {
    // A phase's stages run, then the phase ends on every IPU at once (stores, then the sync).
    for (std::uint32_t first = 0; first < s.stages.size();) {
      std::uint32_t last = first;
      while (last < s.stages.size() && s.stages[last].phase == s.stages[first].phase) ++last;
      for (auto si = first; si < last; ++si) run_stage(si);
      for (auto si = first; si < last; ++si) close_stage(si);
      first = last;
    }
  }
  // Graph outputs no op produces (an input or a weight passed through) come back from IPU 0.
  for (auto t : g.outputs())
    if (!sent_to_host[t] && !s.stages.empty()) {
      sent_to_host[t] = true;
      const auto last = static_cast<std::uint32_t>(s.stages.size() - 1);
      p.steps.push_back(make_step(step_kind::device_to_host, last, held[t].empty() ? 0 : held[t].front(), no_op, t,
                                  bytes_of(t), host_cycles(a, bytes_of(t))));
    }
  return p;
}

/// The first stage on `ipu` that reads `t` (for the stage field of load / save steps).
constexpr std::uint32_t first_stage_reading(const graph& g, const staged_ops& s, tensor_id t, std::uint32_t ipu) {
  for (std::uint32_t si = 0; si < s.stages.size(); ++si) {
    if (s.stages[si].ipu != ipu) continue;
    for (auto id : s.stages[si].ops)
      if (std::find(g.op(id).inputs.begin(), g.op(id).inputs.end(), t) != g.op(id).inputs.end()) return si;
  }
  return 0;
}

/// (variable, IPU) pairs: every IPU that reads each variable.
constexpr std::vector<std::pair<tensor_id, std::uint32_t>> variable_homes(const graph& g, const staged_ops& s) {
  std::vector<std::pair<tensor_id, std::uint32_t>> r;
  for (const auto& st : s.stages)
    for (auto v : stage_variables(g, st))
      if (std::find(r.begin(), r.end(), std::pair<tensor_id, std::uint32_t>{v, st.ipu}) == r.end())
        r.emplace_back(v, st.ipu);
  return r;
}

/// WeightsFromHost: every variable to every IPU reading it, or once into Streaming Memory when the
/// liveness keeps weights off chip.
constexpr program load_program(const program_context& c, const staged_ops& s) {
  const graph& g = *c.model;
  program p;
  p.name = "weights_from_host";
  const bool off_chip = c.phased && c.live != liveness::always_live;
  std::vector<tensor_id> done;
  for (const auto& [v, ipu] : variable_homes(g, s)) {
    if (off_chip && std::find(done.begin(), done.end(), v) != done.end()) continue;
    done.push_back(v);
    const auto b = costed_bytes(g.tensor(v).info, c.costing);
    p.steps.push_back(make_step(step_kind::host_to_device, first_stage_reading(g, s, v, ipu), ipu, no_op, v, b,
                                host_cycles(c.device.arch, b)));
  }
  return p;
}

/// WeightsToHost: every variable once, from the first IPU holding it.
constexpr program save_program(const program_context& c, const staged_ops& s) {
  const graph& g = *c.model;
  program p;
  p.name = "weights_to_host";
  std::vector<tensor_id> done;
  for (const auto& [v, ipu] : variable_homes(g, s)) {
    if (std::find(done.begin(), done.end(), v) != done.end()) continue;
    done.push_back(v);
    const auto b = costed_bytes(g.tensor(v).info, c.costing);
    p.steps.push_back(make_step(step_kind::device_to_host, first_stage_reading(g, s, v, ipu), ipu, no_op, v, b,
                                host_cycles(c.device.arch, b)));
  }
  return p;
}

/// All PopART program slots, 0 (WeightsFromHost) to 8 (CycleCountTensorToHost).
constexpr std::vector<program> all_programs(const program_context& c, const staged_ops& s) {
  std::vector<program> ps(9);
  constexpr const char* names[] = {"weights_from_host",     "optimizer_from_host", "random_seed_from_host",
                                   "random_seed_to_host",   "rng_state_from_host", "main",
                                   "rng_state_to_host",     "weights_to_host",     "cycle_count_to_host"};
  for (std::size_t i = 0; i < ps.size(); ++i) ps[i].name = names[i];
  ps[static_cast<std::size_t>(program_index::weights_from_host)] = load_program(c, s);
  ps[static_cast<std::size_t>(program_index::main)] = main_program(c, s);
  ps[static_cast<std::size_t>(program_index::weights_to_host)] = save_program(c, s);
  return ps;
}

/// One stream per graph input (to the IPU that first receives it) and per graph output (from the
/// IPU that sends it), read off the main program.
constexpr std::vector<host_stream> host_streams(const graph& g, const program& main) {
  std::vector<host_stream> r;
  for (auto t : g.inputs()) {
    host_stream h{"h2d_" + g.tensor(t).name, t, stream_direction::to_device, 0};
    for (const auto& st : main.steps)
      if (st.kind == step_kind::host_to_device && st.tensor == t) {
        h.ipu = st.ipu;
        break;
      }
    r.push_back(h);
  }
  for (auto t : g.outputs()) {
    host_stream h{"d2h_" + g.tensor(t).name, t, stream_direction::to_host, 0};
    for (const auto& st : main.steps)
      if (st.kind == step_kind::device_to_host && st.tensor == t) {
        h.ipu = st.ipu;
        break;
      }
    r.push_back(h);
  }
  return r;
}

}  // namespace ipu::detail::sched
