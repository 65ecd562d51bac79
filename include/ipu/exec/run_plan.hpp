#pragma once
// How the host executor will run an executable: derived once from the plan and checked before
// anything runs, so a plan that cannot work fails with an error naming the stage and tensor.
//
// What the executor reads from an executable:
// - `stages` (ops in execution order, IPU, phase), `op_stage`, `schedule`, the step counts and
//   `replication_factor`;
// - the main program (the programs listed in `flow.main`, else program 5) as the steps of ONE
//   micro-batch, in order: a stage runs where its first compute step is; to_remote / from_remote
//   steps move tensors between an IPU and Streaming Memory there; ipu_copy steps of streamed
//   tensors move them between IPUs; the other steps and the cycles of every step feed the
//   timeline. Without compute steps, stages run in the order of `stages`.
// - `from_remote` steps of the load programs (`flow.load`), run once before the first step.
// - "streamed" tensors — those in a transfer step or placed `in_streaming_memory` — are on an
//   IPU only between a from_remote (or the stage producing them there) and a to_remote; a
//   stage reading one that is not on its IPU at that point is an error. Weights among them are
//   in Streaming Memory from the start. Other tensors travel between IPUs implicitly.
#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/exec/stage_graph.hpp"
#include "ipu/exec/step_io.hpp"
#include "ipu/exec/timeline.hpp"

namespace ipu::detail::exec {

enum class item_kind : std::uint8_t {
  stage,     // run a stage
  transfer,  // move a streamed tensor: to_remote, from_remote, or ipu_copy between IPUs
  note,      // a step with no host work (ipu_copy of an implicitly shared tensor, sync): timeline only
};

struct run_item {
  item_kind kind = item_kind::stage;
  std::uint32_t stage = no_stage;  // stage: index into executable::stages
  step what{};                     // transfer / note: the step
  std::uint32_t ipu = 0;           // where it runs
};

struct stage_run {
  std::uint32_t ipu = 0;
  std::int64_t phase = -1;
  std::vector<tensor_id> reads;              // what it reads and does not produce (weights excluded unless streamed)
  std::vector<tensor_id> outputs;            // what leaves the stage
  std::vector<tensor_id> weights_as_inputs;  // streamed weights, read from the IPU's store
  std::vector<std::size_t> anchors;          // indices into step_layout::anchors it produces
  std::vector<step> copies;                  // pipelined: ipu_copy steps of its outputs (timeline)
  std::uint64_t cycles = 0;                  // predicted cycles for one micro-batch
};

struct run_plan {
  schedule_kind schedule = schedule_kind::sequential;
  std::vector<stage_run> stages;            // by executable::stages index
  std::vector<std::uint32_t> pipeline;      // pipelined: stages in chain order
  std::vector<run_item> items;              // sequential / phased: one micro-batch, in order
  std::vector<run_item> load_items;         // from_remote steps of the load programs
  std::vector<std::uint32_t> workers;       // phased: the IPU each worker runs
  /// Phased: rounds separated by a sync; per round and worker, indices into `items`.
  std::vector<std::vector<std::vector<std::size_t>>> rounds;
  std::vector<bool> streamed;               // by tensor
  std::vector<std::uint32_t> producer;      // by tensor: the stage producing it, or no_stage
  std::vector<std::uint64_t> op_cycles;     // by op
  std::vector<std::uint64_t> h2d_cycles;    // by tensor
  std::vector<std::uint64_t> d2h_cycles;    // by tensor
  std::vector<std::size_t> host_anchors;    // anchors nothing computes (inputs, weights)
};

inline std::string stage_name(const executable& exe, std::uint32_t s) {
  return "stage " + std::to_string(exe.stages[s].id) + " (IPU " + std::to_string(exe.stages[s].ipu) + ")";
}

inline error plan_error(const executable& exe, const std::string& what, const std::string& fix) {
  return error(error_category::schedule, what, "executable '" + exe.strategy + "' for graph '" + exe.model.name() + "'",
               fix);
}

/// The main program steps, in order.
inline std::vector<const step*> main_steps(const executable& exe) {
  std::vector<std::uint32_t> ids = exe.flow.main;
  if (ids.empty() && exe.programs.size() > static_cast<std::size_t>(program_index::main))
    ids.push_back(static_cast<std::uint32_t>(program_index::main));
  std::vector<const step*> out;
  for (auto id : ids) {
    if (id >= exe.programs.size())
      throw plan_error(exe, "the program flow runs program " + std::to_string(id) + " but there are " +
                                std::to_string(exe.programs.size()) + " programs",
                       "list only existing programs in flow.main");
    for (const auto& s : exe.programs[id].steps) out.push_back(&s);
  }
  return out;
}

inline bool is_transfer(step_kind k) noexcept { return k == step_kind::to_remote || k == step_kind::from_remote; }

/// Replays `items` (after `load`) twice — the second pass checks the state one micro-batch leaves
/// for the next — and throws when a stage reads a tensor that is not where it runs.
inline void check_residency(const executable& exe, const run_plan& p, const std::vector<run_item>& items,
                            const std::vector<run_item>& load) {
  const auto& g = exe.model;
  const auto nt = g.num_tensors();
  const std::uint32_t nipus = std::max<std::uint32_t>(exe.device.num_ipus, 1);
  std::vector<std::vector<bool>> chip(nipus, std::vector<bool>(nt, false));
  std::vector<bool> remote(nt, false);
  for (std::size_t t = 0; t < nt; ++t)
    if (p.streamed[t] && g.tensor(static_cast<tensor_id>(t)).has_data()) remote[t] = true;
  auto name = [&](tensor_id t) { return "'" + g.tensor(t).name + "'"; };
  auto apply = [&](const run_item& it, const std::vector<bool>& have) {
    const auto& s = it.what;
    if (it.kind == item_kind::transfer) {
      if (s.kind == step_kind::from_remote) {
        if (!remote[s.tensor])
          throw plan_error(exe, "from_remote brings " + name(s.tensor) + " to IPU " + std::to_string(s.ipu) +
                                    " but it is not in Streaming Memory at that point",
                           "move it to Streaming Memory (to_remote) after it is produced and before this step");
        chip[s.ipu][s.tensor] = true;
      } else if (s.kind == step_kind::to_remote) {
        if (!chip[s.ipu][s.tensor])
          throw plan_error(exe, "to_remote moves " + name(s.tensor) + " off IPU " + std::to_string(s.ipu) +
                                    " but it is not on that IPU at that point",
                           "produce it on that IPU or bring it there first");
        remote[s.tensor] = true;
        chip[s.ipu][s.tensor] = false;
      } else if (s.kind == step_kind::ipu_copy) {
        if (!chip[s.ipu][s.tensor])
          throw plan_error(exe, "ipu_copy copies " + name(s.tensor) + " from IPU " + std::to_string(s.ipu) +
                                    " but it is not on that IPU at that point",
                           "copy it after it is produced or brought there");
        chip[s.peer][s.tensor] = true;
      }
      return;
    }
    if (it.kind != item_kind::stage) return;
    const auto& st = p.stages[it.stage];
    for (auto t : st.reads) {
      if (p.streamed[t]) {
        if (!chip[st.ipu][t])
          throw plan_error(exe, stage_name(exe, it.stage) + " reads " + name(t) +
                                    ", which is in Streaming Memory or on another IPU when the stage runs",
                           "bring it to IPU " + std::to_string(st.ipu) + " with from_remote (or ipu_copy) before the stage");
      } else if (!have[t]) {
        const auto by = p.producer[t];
        throw plan_error(exe,
                         stage_name(exe, it.stage) + " reads " + name(t) + " before " +
                             (by == no_stage ? std::string("anything produces it") : stage_name(exe, by) + " produces it"),
                         "order the stages so producers run first");
      }
    }
    for (auto t : st.outputs)
      if (p.streamed[t]) chip[st.ipu][t] = true;
  };
  std::vector<bool> have(nt, false);
  for (const auto& it : load) apply(it, have);
  for (int pass = 0; pass < 2; ++pass) {
    std::fill(have.begin(), have.end(), false);
    for (auto t : g.inputs()) have[t] = true;
    for (const auto& it : items) {
      apply(it, have);
      if (it.kind == item_kind::stage)
        for (auto t : p.stages[it.stage].outputs) have[t] = true;
    }
  }
}

/// Splits `items` into rounds: items on different IPUs share a round unless one writes what the
/// other reads or writes; items on one IPU keep their order within a round.
inline void make_rounds(run_plan& p) {
  std::map<std::uint32_t, std::size_t> worker_of;
  for (const auto& it : p.items) worker_of.emplace(it.ipu, 0);
  p.workers.clear();
  for (auto& [ipu, w] : worker_of) {
    w = p.workers.size();
    p.workers.push_back(ipu);
  }
  enum : std::uint64_t { values = 1, chip = 2, remote = 3 };
  auto key = [](std::uint64_t space, std::uint64_t ipu, tensor_id t) { return space << 60 | ipu << 32 | t; };
  struct use {
    std::vector<std::uint32_t> readers, writers;
  };
  std::map<std::uint64_t, use> round_uses;
  p.rounds.clear();
  auto new_round = [&] {
    p.rounds.emplace_back(p.workers.size());
    round_uses.clear();
  };
  new_round();
  for (std::size_t i = 0; i < p.items.size(); ++i) {
    const auto& it = p.items[i];
    std::vector<std::uint64_t> reads, writes;
    if (it.kind == item_kind::stage) {
      const auto& st = p.stages[it.stage];
      for (auto t : st.reads) reads.push_back(p.streamed[t] ? key(chip, st.ipu, t) : key(values, 0, t));
      for (auto t : st.outputs) writes.push_back(p.streamed[t] ? key(chip, st.ipu, t) : key(values, 0, t));
    } else if (it.kind == item_kind::transfer) {
      const auto& s = it.what;
      if (s.kind == step_kind::from_remote) {
        reads.push_back(key(remote, 0, s.tensor));
        writes.push_back(key(chip, s.ipu, s.tensor));
      } else if (s.kind == step_kind::to_remote) {
        writes.push_back(key(chip, s.ipu, s.tensor));  // it leaves the IPU
        writes.push_back(key(remote, 0, s.tensor));
      } else {
        reads.push_back(key(chip, s.ipu, s.tensor));
        writes.push_back(key(chip, s.peer, s.tensor));
      }
    }
    auto others = [&](const std::vector<std::uint32_t>& ipus) {
      return std::any_of(ipus.begin(), ipus.end(), [&](std::uint32_t x) { return x != it.ipu; });
    };
    bool conflict = false;
    for (auto k : reads)
      if (auto u = round_uses.find(k); u != round_uses.end() && others(u->second.writers)) conflict = true;
    for (auto k : writes)
      if (auto u = round_uses.find(k);
          u != round_uses.end() && (others(u->second.writers) || others(u->second.readers)))
        conflict = true;
    if (conflict) new_round();
    for (auto k : reads) round_uses[k].readers.push_back(it.ipu);
    for (auto k : writes) round_uses[k].writers.push_back(it.ipu);
    p.rounds.back()[worker_of.at(it.ipu)].push_back(i);
  }
}

/// Derives and checks the host run of `exe` for the step arrays `layout`.
inline run_plan analyse(const executable& exe, const step_layout& layout) {
  const auto& g = exe.model;
  const auto nt = g.num_tensors();
  const auto nops = g.num_ops();
  const auto nstages = static_cast<std::uint32_t>(exe.stages.size());
  run_plan p;
  p.schedule = exe.schedule;
  if (exe.replication_factor == 0 || exe.batches_per_step == 0 || exe.gradient_accumulation == 0)
    throw plan_error(exe, "replication factor, batches per step and gradient accumulation must be at least 1",
                     "plan with counts of 1 or more");
  if (nops && exe.stages.empty()) throw plan_error(exe, "the executable has no stages", "plan the model first");

  // --- ops to stages ----------------------------------------------------------------------------
  std::vector<std::uint32_t> stage_of(nops, no_stage);
  p.stages.resize(nstages);
  for (std::uint32_t s = 0; s < nstages; ++s) {
    const auto& sp = exe.stages[s];
    if (sp.ipu >= std::max<std::uint32_t>(exe.device.num_ipus, 1))
      throw plan_error(exe, stage_name(exe, s) + " is on IPU " + std::to_string(sp.ipu) + " but the device has " +
                                std::to_string(exe.device.num_ipus) + " IPUs",
                       "place stages on the device's IPUs");
    p.stages[s].ipu = sp.ipu;
    p.stages[s].phase = sp.phase;
    for (auto o : sp.ops) {
      if (o >= nops)
        throw plan_error(exe, stage_name(exe, s) + " lists op id " + std::to_string(o) + ", which does not exist",
                         "list the model's ops");
      if (stage_of[o] != no_stage)
        throw plan_error(exe, "op " + graph::describe(g.op(o)) + " is in " + stage_name(exe, stage_of[o]) + " and " +
                                  stage_name(exe, s),
                         "put every op in exactly one stage");
      stage_of[o] = s;
    }
  }
  for (std::size_t o = 0; o < nops; ++o) {
    if (stage_of[o] == no_stage)
      throw plan_error(exe, "op " + graph::describe(g.op(static_cast<op_id>(o))) + " is in no stage",
                       "put every op in exactly one stage");
    if (!exe.op_stage.empty() && (exe.op_stage.size() != nops || exe.op_stage[o] != stage_of[o]))
      throw plan_error(exe, "op_stage disagrees with the stages' op lists for op " + graph::describe(g.op(static_cast<op_id>(o))),
                       "keep op_stage and stages in step");
  }
  p.producer.assign(nt, no_stage);
  for (std::size_t o = 0; o < nops; ++o)
    for (auto t : g.op(static_cast<op_id>(o)).outputs) p.producer[t] = stage_of[o];

  // --- the programs -----------------------------------------------------------------------------
  const auto steps = main_steps(exe);
  p.streamed.assign(nt, false);
  p.op_cycles.assign(nops, 0);
  p.h2d_cycles.assign(nt, 0);
  p.d2h_cycles.assign(nt, 0);
  auto check_tensor = [&](const step& s) {
    if (s.tensor >= nt)
      throw plan_error(exe, std::string(to_string(s.kind)) + " step names tensor id " + std::to_string(s.tensor) +
                                ", which does not exist",
                       "name a tensor of the model");
    const auto n = std::max<std::uint32_t>(exe.device.num_ipus, 1);
    if (s.ipu >= n || (s.kind == step_kind::ipu_copy && s.peer >= n))
      throw plan_error(exe, std::string(to_string(s.kind)) + " step of '" + g.tensor(s.tensor).name +
                                "' names an IPU the device does not have",
                       "use IPUs 0 to " + std::to_string(n - 1));
  };
  for (const auto* s : steps) {
    switch (s->kind) {
      case step_kind::compute:
        if (s->op >= nops)
          throw plan_error(exe, "a compute step names op id " + std::to_string(s->op) + ", which does not exist",
                           "name the model's ops");
        p.op_cycles[s->op] += s->cycles;
        break;
      case step_kind::host_to_device: check_tensor(*s); p.h2d_cycles[s->tensor] += s->cycles; break;
      case step_kind::device_to_host: check_tensor(*s); p.d2h_cycles[s->tensor] += s->cycles; break;
      case step_kind::to_remote:
      case step_kind::from_remote: check_tensor(*s); p.streamed[s->tensor] = true; break;
      case step_kind::ipu_copy: check_tensor(*s); break;
      case step_kind::sync: break;
    }
  }
  for (const auto& pl : exe.placement)
    if (pl.in_streaming_memory && pl.tensor < nt) p.streamed[pl.tensor] = true;
  for (auto id : exe.flow.load) {
    if (id >= exe.programs.size())
      throw plan_error(exe, "the program flow loads with program " + std::to_string(id) + " but there are " +
                                std::to_string(exe.programs.size()) + " programs",
                       "list only existing programs in flow.load");
    for (const auto& s : exe.programs[id].steps)
      if (s.kind == step_kind::from_remote) {
        check_tensor(s);
        p.streamed[s.tensor] = true;
        p.load_items.push_back(run_item{item_kind::transfer, no_stage, s, s.ipu});
      }
  }

  // --- what each stage reads and sends on -------------------------------------------------------
  std::vector<std::vector<std::uint32_t>> readers(nt);  // stages reading each tensor
  for (std::uint32_t s = 0; s < nstages; ++s) {
    auto& st = p.stages[s];
    std::vector<bool> seen(nt, false);
    auto read = [&](tensor_id t) {
      if (t == no_tensor || seen[t]) return;
      seen[t] = true;
      if (p.producer[t] == s) return;
      if (g.tensor(t).has_data()) {
        if (!p.streamed[t]) return;  // a weight the stage keeps
        st.weights_as_inputs.push_back(t);
      }
      st.reads.push_back(t);
      readers[t].push_back(s);
    };
    for (auto o : exe.stages[s].ops) {
      for (auto t : g.op(o).inputs) read(t);
      for (auto t : implicit_inputs(g, g.op(o))) read(t);
    }
    std::uint64_t sum = 0;
    for (auto o : exe.stages[s].ops) sum += p.op_cycles[o];
    st.cycles = exe.stages[s].cycles ? exe.stages[s].cycles : sum;
  }
  std::vector<bool> leaves(nt, false);
  for (std::size_t t = 0; t < nt; ++t)
    if (!readers[t].empty() || p.streamed[t]) leaves[t] = true;
  for (std::size_t a = 0; a < layout.anchors.size(); ++a) {
    const auto t = layout.anchors[a].tensor;
    leaves[t] = true;
    if (p.producer[t] == no_stage) p.host_anchors.push_back(a);
    else p.stages[p.producer[t]].anchors.push_back(a);
  }
  for (std::uint32_t s = 0; s < nstages; ++s)
    for (auto o : exe.stages[s].ops)
      for (auto t : g.op(o).outputs)
        if (leaves[t]) p.stages[s].outputs.push_back(t);

  // --- the schedule -----------------------------------------------------------------------------
  if (p.schedule == schedule_kind::pipelined) {
    if (std::find(p.streamed.begin(), p.streamed.end(), true) != p.streamed.end())
      throw plan_error(exe, "a pipelined executable moves tensors through Streaming Memory",
                       "use a phased schedule for Streaming Memory transfers");
    std::vector<std::uint32_t> position(nstages);
    for (std::uint32_t s = 0; s < nstages; ++s) {
      p.pipeline.push_back(s);
      position[s] = s;
    }
    for (std::uint32_t s = 0; s < nstages; ++s)
      for (auto t : p.stages[s].reads) {
        const auto by = p.producer[t];
        if (by == no_stage) {
          if (g.tensor(t).kind != tensor_kind::input)
            throw plan_error(exe, stage_name(exe, s) + " reads '" + g.tensor(t).name + "', which nothing produces",
                             "produce it in an earlier stage");
        } else if (position[by] >= position[s]) {
          throw plan_error(exe, stage_name(exe, s) + " reads '" + g.tensor(t).name + "' from the later " +
                                    stage_name(exe, by),
                           "a pipeline's stages must form a chain: put producers in earlier stages");
        }
      }
    for (const auto* s : steps)
      if (s->kind == step_kind::ipu_copy && p.producer[s->tensor] != no_stage)
        p.stages[p.producer[s->tensor]].copies.push_back(*s);
    return p;
  }

  std::vector<bool> placed(nstages, false);
  bool any_compute = false;
  for (const auto* s : steps) {
    if (s->kind == step_kind::compute) {
      any_compute = true;
      const auto st = stage_of[s->op];
      if (!placed[st]) {
        placed[st] = true;
        p.items.push_back(run_item{item_kind::stage, st, {}, exe.stages[st].ipu});
      }
    } else if (is_transfer(s->kind) || (s->kind == step_kind::ipu_copy && p.streamed[s->tensor])) {
      p.items.push_back(run_item{item_kind::transfer, no_stage, *s, s->ipu});
    } else if (s->kind == step_kind::ipu_copy || s->kind == step_kind::sync) {
      p.items.push_back(run_item{item_kind::note, no_stage, *s, s->ipu});
    }
  }
  if (!any_compute) {
    if (std::any_of(p.items.begin(), p.items.end(), [](const run_item& i) { return i.kind == item_kind::transfer; }))
      throw plan_error(exe, "the main program moves tensors but runs no compute step, so the moves cannot be placed",
                       "list the compute steps of every op in the main program");
    p.items.clear();
    std::vector<std::uint32_t> order(nstages);
    for (std::uint32_t s = 0; s < nstages; ++s) order[s] = s;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return exe.stages[a].phase < exe.stages[b].phase; });
    for (auto s : order) p.items.push_back(run_item{item_kind::stage, s, {}, exe.stages[s].ipu});
  } else {
    for (std::uint32_t s = 0; s < nstages; ++s)
      if (!placed[s] && !exe.stages[s].ops.empty())
        throw plan_error(exe, stage_name(exe, s) + " has ops but no compute step in the main program",
                         "list a compute step for every op");
  }
  check_residency(exe, p, p.items, p.load_items);
  if (p.schedule == schedule_kind::phased) make_rounds(p);
  return p;
}

}  // namespace ipu::detail::exec
