#pragma once
// From a model's annotations and a strategy's stage / phase lists to where every op runs, with the
// rules of PopART and PopTorch checked on the way. Every violation is an ipu::error (category
// schedule) that names the op or block, the rule, and how to fix it.
//
// Where the placement comes from, in order:
//  1. the strategy's explicit stages (PopTorch's Stage("A", "B").ipu(n)) or phases: the ops'
//     blocks (annotation::block) say which stage each op is in;
//  2. blocks without explicit stages: AutoStage. SameAsIpu makes the stage the block's IPU;
//     AutoIncrement gives each new block the next stage;
//  3. per-op annotations (PopART's virtual graph, pipeline stage, execution phase);
//  4. nothing at all: every op on IPU 0, in one stage.
//
// Rules (the reference's list): all ops annotated or none; ops in one pipeline stage share one IPU;
// pipelining needs virtual graphs; pipeline depth >= stages; a block in more than one stage;
// unknown block ids; AutoStage.SameAsIpu without an IPU; no AutoStage for phased execution; ops
// outside any block; the IPU count a power of two unless auto-rounded (at most 64); IPU ids beyond
// the device. Also: stages and phases must follow the data flow, stages of a phase use distinct
// IPUs, even phases on even IPUs and odd phases on odd IPUs (parallel phased execution), and every
// phase has one stage per IPU of its group.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/format.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/poptorch/strategy.hpp"

namespace ipu {

/// Where one op runs, before stages are numbered.
struct op_assignment {
  std::uint32_t ipu = 0;
  std::int64_t stage = 0;   // the stage key: pipeline stage id, or the stage's position in its phase
  std::int64_t phase = -1;  // phased execution; -1 otherwise
  friend constexpr bool operator==(const op_assignment&, const op_assignment&) = default;
};

namespace detail::sched {

using ipu::format_uint;

[[noreturn]] inline void fail(std::string what, std::string where, std::string hint) {
  throw error(error_category::schedule, std::move(what), std::move(where), std::move(hint));
}

constexpr std::string format_int(std::int64_t v) {
  return v < 0 ? "-" + format_uint(static_cast<std::uint64_t>(-(v + 1)) + 1) : format_uint(static_cast<std::uint64_t>(v));
}

constexpr std::string op_where(const op_node& op) { return "op " + graph::describe(op); }
constexpr std::string graph_where(const graph& g) { return "graph '" + g.name() + "'"; }

/// A PopTorch block: its user id, its IPU (from its ops' annotations) and its first op.
struct block_info {
  std::string name;
  std::optional<std::int64_t> ipu;
  op_id first_op = no_op;
};

/// Whether any op carries a block name.
constexpr bool uses_blocks(const graph& g) {
  for (const auto& op : g.ops())
    if (!op.where.block.empty()) return true;
  return false;
}

/// The blocks in the order their first op runs. Rules: ops outside any block; a block's ops share
/// one IPU.
constexpr std::vector<block_info> collect_blocks(const graph& g, const std::vector<op_id>& order) {
  std::vector<block_info> blocks;
  const op_node* with_block = nullptr;
  for (auto id : order)
    if (!g.op(id).where.block.empty()) {
      with_block = &g.op(id);
      break;
    }
  if (with_block == nullptr) return blocks;
  for (auto id : order) {
    const auto& op = g.op(id);
    if (op.where.block.empty())
      fail("op " + graph::describe(op) + " is outside any block, but op " + graph::describe(*with_block) +
               " is in block '" + with_block->where.block + "' (rule: no ops outside any block)",
           graph_where(g),
           "declare every layer inside a Block (builder::block), or use BeginBlock so later layers join the last "
           "block");
    auto it = std::find_if(blocks.begin(), blocks.end(), [&](const block_info& b) { return b.name == op.where.block; });
    if (it == blocks.end()) {
      blocks.push_back(block_info{op.where.block, op.where.ipu, id});
      continue;
    }
    if (op.where.ipu && it->ipu && *op.where.ipu != *it->ipu)
      fail("block '" + it->name + "' has op " + graph::describe(g.op(it->first_op)) + " on IPU " + format_int(*it->ipu) +
               " and op " + graph::describe(op) + " on IPU " + format_int(*op.where.ipu) +
               " (rule: ops in one stage share one IPU)",
           graph_where(g), "give every op of a block the same IPU");
    if (!it->ipu) it->ipu = op.where.ipu;
  }
  return blocks;
}

/// The index of block `name`, or blocks.size() when there is none.
constexpr std::size_t find_block(const std::vector<block_info>& blocks, std::string_view name) {
  for (std::size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i].name == name) return i;
  return blocks.size();
}

/// The index of block `name` (every op's block is in `blocks`: collect_blocks made them so).
constexpr std::size_t block_index(const std::vector<block_info>& blocks, std::string_view name) {
  for (std::size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i].name == name) return i;
  throw error(error_category::internal, "block '" + std::string(name) + "' was not collected", "annotation rules");
}

constexpr std::string block_list(const std::vector<block_info>& blocks) {
  std::string s;
  for (std::size_t i = 0; i < blocks.size() && i < 8; ++i) s += (i ? ", '" : "'") + blocks[i].name + "'";
  if (blocks.size() > 8) s += ", ...";
  return s.empty() ? "none" : s;
}

/// PopART's rule for one annotation field: every op has it or none has.
template <class Field>
constexpr void check_all_or_none(const graph& g, const std::vector<op_id>& order, Field field, const char* what,
                                 const char* hint) {
  const op_node* with = nullptr;
  const op_node* without = nullptr;
  for (auto id : order) {
    const auto& op = g.op(id);
    const auto& v = field(op.where);
    if (v && *v < 0)
      fail(std::string(what) + " " + format_int(*v) + " of op " + graph::describe(op) + " is negative", op_where(op),
           "number IPUs, stages and phases from 0");
    (v ? with : without) = &op;
    if (with && without)
      fail("op " + graph::describe(*with) + " has " + what + " set but op " + graph::describe(*without) +
               " has none (rule: all ops annotated or none)",
           graph_where(g), hint);
  }
}

/// Resolves sharded / pipelined placement. `stages`: explicit stages (empty: AutoStage `mode`).
/// `pipelined` enables the pipeline-only rules (stages need virtual graphs).
constexpr std::vector<op_assignment> resolve_staged(const graph& g, const std::vector<op_id>& order,
                                                    const std::vector<ipu::stage>& stages, auto_stage mode,
                                                    std::string_view strategy) {
  std::vector<op_assignment> out(g.num_ops());
  const std::string where = std::string(strategy) + " on " + graph_where(g);
  for (auto id : order)
    if (g.op(id).where.phase)
      fail("op " + graph::describe(g.op(id)) + " has execution phase " + format_int(*g.op(id).where.phase) + " but " +
               std::string(strategy) + " has no phases",
           op_where(g.op(id)), "use serial or parallel phased execution, or drop the phase annotations");

  if (!stages.empty() || uses_blocks(g)) {
    const auto blocks = collect_blocks(g, order);
    if (!stages.empty()) {
      // Explicit stages: every block in exactly one stage, every named block exists.
      std::vector<std::int64_t> block_stage(blocks.size(), -1);
      std::vector<std::int64_t> stage_ipu(stages.size(), -1);
      for (std::size_t s = 0; s < stages.size(); ++s) {
        if (stages[s].blocks.empty())
          fail("stage " + format_uint(s) + " has no blocks", where, "give each stage the user ids of its blocks");
        for (const auto& name : stages[s].blocks) {
          const auto bi = find_block(blocks, name);
          if (bi == blocks.size())
            fail("stage " + format_uint(s) + " names block '" + name + "', which no op belongs to (rule: unknown block ids)",
                 where, "the model's blocks are " + block_list(blocks) + "; check the spelling");
          const auto* b = &blocks[bi];
          if (block_stage[bi] >= 0)
            fail("block '" + name + "' is in stage " + format_int(block_stage[bi]) + " and stage " + format_uint(s) +
                     " (rule: a block in more than one stage)",
                 where, "put each block in exactly one stage");
          block_stage[bi] = static_cast<std::int64_t>(s);
          const std::int64_t ipu = stages[s].ipu ? *stages[s].ipu : b->ipu ? *b->ipu : -1;
          if (stages[s].ipu && *stages[s].ipu < 0)
            fail("stage " + format_uint(s) + " is on IPU " + format_int(*stages[s].ipu), where, "IPU numbers start at 0");
          if (ipu >= 0 && stage_ipu[s] >= 0 && ipu != stage_ipu[s])
            fail("stage " + format_uint(s) + " has blocks on IPU " + format_int(stage_ipu[s]) + " and IPU " +
                     format_int(ipu) + " (block '" + name + "') (rule: ops in one stage share one IPU)",
                 where, "set the stage's IPU with Stage(...).ipu(n), or annotate its blocks with one IPU");
          if (ipu >= 0) stage_ipu[s] = ipu;
        }
      }
      for (std::size_t bi = 0; bi < blocks.size(); ++bi)
        if (block_stage[bi] < 0)
          fail("block '" + blocks[bi].name + "' (op " + graph::describe(g.op(blocks[bi].first_op)) +
                   ") is in no stage (rule: no ops outside any stage)",
               where, "add the block to one of the stages");
      for (auto id : order) {
        const auto bi = block_index(blocks, g.op(id).where.block);
        const auto s = block_stage[bi];
        // A stage with no IPU anywhere runs on the IPU numbered like the stage.
        const auto ipu = stage_ipu[static_cast<std::size_t>(s)] >= 0 ? stage_ipu[static_cast<std::size_t>(s)] : s;
        out[id] = op_assignment{static_cast<std::uint32_t>(ipu), s, -1};
      }
      return out;
    }
    // AutoStage over blocks.
    std::vector<std::int64_t> block_stage(blocks.size(), 0);
    for (std::size_t bi = 0; bi < blocks.size(); ++bi) {
      if (mode == auto_stage::same_as_ipu) {
        if (!blocks[bi].ipu)
          fail("block '" + blocks[bi].name + "' (op " + graph::describe(g.op(blocks[bi].first_op)) +
                   ") has no IPU, but AutoStage.SameAsIpu takes the stage from the IPU (rule: AutoStage.SameAsIpu "
                   "without an IPU)",
               where,
               "give the block an IPU (Block(name, ipu_id)), list the stages explicitly, or use AutoStage.AutoIncrement");
        block_stage[bi] = *blocks[bi].ipu;
      } else {
        block_stage[bi] = static_cast<std::int64_t>(bi);
      }
    }
    for (auto id : order) {
      const auto bi = block_index(blocks, g.op(id).where.block);
      const auto ipu = blocks[bi].ipu ? *blocks[bi].ipu : 0;
      if (ipu < 0) fail("block '" + blocks[bi].name + "' is on IPU " + format_int(ipu), where, "IPU numbers start at 0");
      out[id] = op_assignment{static_cast<std::uint32_t>(ipu), block_stage[bi], -1};
    }
    return out;
  }

  // Per-op annotations (PopART).
  check_all_or_none(
      g, order, [](const annotation& a) -> const auto& { return a.ipu; }, "an IPU (virtual graph)",
      "annotate every op with an IPU, or none and let the strategy place them");
  check_all_or_none(
      g, order, [](const annotation& a) -> const auto& { return a.stage; }, "a pipeline stage",
      "annotate every op with a pipeline stage, or none");
  const bool has_ipu = !order.empty() && g.op(order.front()).where.ipu.has_value();
  const bool has_stage = !order.empty() && g.op(order.front()).where.stage.has_value();
  if (has_stage && !has_ipu)
    fail("op " + graph::describe(g.op(order.front())) + " has pipeline stage " +
             format_int(*g.op(order.front()).where.stage) +
             " but no IPU (rule: pipelining needs virtual graphs)",
         where, "annotate every op with the IPU (virtual graph) of its stage");
  std::int64_t auto_stage_id = -1;
  std::int64_t last_ipu = -1;
  // The first op seen in each stage, to check that a stage stays on one IPU.
  std::vector<std::pair<std::int64_t, op_id>> stage_first;
  for (auto id : order) {
    const auto& w = g.op(id).where;
    const std::int64_t ipu = has_ipu ? *w.ipu : 0;
    std::int64_t stage = 0;
    if (has_stage) {
      stage = *w.stage;
      auto it = std::find_if(stage_first.begin(), stage_first.end(), [&](const auto& p) { return p.first == stage; });
      if (it == stage_first.end()) {
        stage_first.emplace_back(stage, id);
      } else if (*g.op(it->second).where.ipu != ipu) {
        fail("pipeline stage " + format_int(stage) + " has op " + graph::describe(g.op(it->second)) + " on IPU " +
                 format_int(*g.op(it->second).where.ipu) + " and op " + graph::describe(g.op(id)) + " on IPU " +
                 format_int(ipu) + " (rule: ops in one pipeline stage share one IPU)",
             where, "place every op of a stage on the same IPU");
      }
    } else if (has_ipu) {
      // IPUs without stages: AutoStage decides (SameAsIpu: the IPU; AutoIncrement: each IPU change).
      if (mode == auto_stage::same_as_ipu) {
        stage = ipu;
      } else {
        if (ipu != last_ipu) ++auto_stage_id;
        stage = auto_stage_id;
      }
      last_ipu = ipu;
    }
    out[id] = op_assignment{static_cast<std::uint32_t>(ipu), stage, -1};
  }
  return out;
}

/// Resolves phased placement from the strategy's phases (or per-op phase annotations when the
/// strategy lists none). `parallel`: ParallelPhasedExecution's even / odd IPU rule.
constexpr std::vector<op_assignment> resolve_phased(const graph& g, const std::vector<op_id>& order,
                                                    const std::vector<ipu::phase>& phases, bool parallel,
                                                    std::string_view strategy) {
  std::vector<op_assignment> out(g.num_ops());
  const std::string where = std::string(strategy) + " on " + graph_where(g);
  auto parity_rule = [&](std::int64_t phase, std::int64_t ipu, const std::string& what) {
    if (parallel && (ipu % 2) != (phase % 2))
      fail(what + " is on IPU " + format_int(ipu) + " but phase " + format_int(phase) + " is " +
               (phase % 2 ? "odd" : "even") + " (rule: even phases on even IPUs, odd phases on odd IPUs)",
           where, "in parallel phased execution put even phases on IPUs 0, 2, ... and odd phases on IPUs 1, 3, ...");
  };

  if (!phases.empty()) {
    const auto blocks = collect_blocks(g, order);
    if (blocks.empty())
      fail("the strategy lists phases but no op belongs to a block (rule: ops outside any block)", where,
           "build the model's layers inside blocks named like the phases' stages");
    std::vector<op_assignment> block_at(blocks.size(), op_assignment{0, -1, -1});
    std::size_t group = 0;
    for (const auto& ph : phases) group = std::max(group, ph.stages.size());
    for (std::size_t p = 0; p < phases.size(); ++p) {
      const auto& ph = phases[p];
      const auto pi = static_cast<std::int64_t>(p);
      if (ph.stages.size() != group)
        fail("phase " + format_uint(p) + " has " + format_uint(ph.stages.size()) + " stages but phase groups have " +
                 format_uint(group) + " IPUs (rule: each phase has one stage per IPU of its group)",
             where, "give every phase the same number of stages");
      std::vector<std::int64_t> used;
      for (std::size_t s = 0; s < ph.stages.size(); ++s) {
        const auto& st = ph.stages[s];
        const std::string name = "phase " + format_uint(p) + " stage " + format_uint(s);
        if (st.blocks.empty()) fail(name + " has no blocks", where, "give each stage the user ids of its blocks");
        // Default IPUs: serial phases use IPUs 0..n-1; parallel phases alternate groups (even IPUs for
        // even phases, odd for odd), as in PopTorch's examples.
        std::int64_t ipu = st.ipu ? *st.ipu : -1;
        for (const auto& bn : st.blocks) {
          const auto bi = find_block(blocks, bn);
          if (bi == blocks.size())
            fail(name + " names block '" + bn + "', which no op belongs to (rule: unknown block ids)", where,
                 "the model's blocks are " + block_list(blocks) + "; check the spelling");
          const auto* b = &blocks[bi];
          if (block_at[bi].stage >= 0)
            fail("block '" + bn + "' is in phase " + format_int(block_at[bi].phase) + " and phase " + format_uint(p) +
                     " (rule: a block in more than one stage)",
                 where, "put each block in exactly one stage");
          if (!st.ipu && b->ipu) {
            if (ipu >= 0 && ipu != *b->ipu)
              fail(name + " has blocks on IPU " + format_int(ipu) + " and IPU " + format_int(*b->ipu) +
                       " (rule: ops in one stage share one IPU)",
                   where, "set the stage's IPU explicitly, or annotate its blocks with one IPU");
            ipu = *b->ipu;
          }
        }
        if (ipu < 0) ipu = parallel ? 2 * static_cast<std::int64_t>(s) + pi % 2 : static_cast<std::int64_t>(s);
        parity_rule(pi, ipu, name);
        if (std::find(used.begin(), used.end(), ipu) != used.end())
          fail(name + " shares IPU " + format_int(ipu) + " with another stage of its phase (rule: stages of a phase run in "
                      "parallel, each on its own IPU)",
               where, "give the stages of a phase distinct IPUs");
        used.push_back(ipu);
        for (const auto& bn : st.blocks) {
          const auto bi = block_index(blocks, bn);
          block_at[bi] = op_assignment{static_cast<std::uint32_t>(ipu), static_cast<std::int64_t>(s), pi};
        }
      }
    }
    for (std::size_t bi = 0; bi < blocks.size(); ++bi)
      if (block_at[bi].stage < 0)
        fail("block '" + blocks[bi].name + "' (op " + graph::describe(g.op(blocks[bi].first_op)) +
                 ") is in no phase (rule: no ops outside any stage)",
             where, "add the block to a stage of one of the phases");
    for (auto id : order)
      out[id] = block_at[block_index(blocks, g.op(id).where.block)];
    return out;
  }

  // No phase list: per-op execution phases (PopART), or nothing to go on.
  bool any_phase = false;
  for (auto id : order) any_phase = any_phase || g.op(id).where.phase.has_value();
  if (!any_phase)
    fail(std::string(strategy) + " needs phases, and neither the strategy nor the ops give any (rule: no AutoStage "
                                 "for phased execution)",
         where,
         "list the phases explicitly (Phase(Stage(\"A\"), ...)) or annotate every op with an execution phase and an "
         "IPU");
  check_all_or_none(
      g, order, [](const annotation& a) -> const auto& { return a.phase; }, "an execution phase",
      "annotate every op with an execution phase, or list the phases in the strategy");
  check_all_or_none(
      g, order, [](const annotation& a) -> const auto& { return a.ipu; }, "an IPU (virtual graph)",
      "annotate every op with an IPU, or none");
  const bool has_ipu = g.op(order.front()).where.ipu.has_value();
  for (auto id : order) {
    const auto& w = g.op(id).where;
    const std::int64_t ph = *w.phase;
    const std::int64_t ipu = has_ipu ? *w.ipu : (parallel ? ph % 2 : 0);
    parity_rule(ph, ipu, "op " + graph::describe(g.op(id)));
    out[id] = op_assignment{static_cast<std::uint32_t>(ipu), 0, ph};
  }
  return out;
}

/// Stages (`phased` false) or phases (true) must follow the data flow: no op may consume a tensor
/// produced in a later stage / phase.
constexpr void check_data_flow_order(const graph& g, const std::vector<op_assignment>& a, bool phased,
                                     std::string_view strategy) {
  for (std::size_t i = 0; i < g.num_ops(); ++i) {
    const auto& op = g.op(static_cast<op_id>(i));
    const auto mine = phased ? a[i].phase : a[i].stage;
    for (auto t : op.inputs) {
      if (t == no_tensor) continue;
      const auto p = g.tensor(t).producer;
      if (p == no_op) continue;
      const auto theirs = phased ? a[p].phase : a[p].stage;
      if (theirs > mine) {
        const char* what = phased ? "phase " : "stage ";
        fail("op " + graph::describe(op) + " in " + what + format_int(mine) + " uses '" + g.tensor(t).name +
                 "' from op " + graph::describe(g.op(p)) + " in later " + what + format_int(theirs) + " (rule: " +
                 (phased ? "phases" : "stage ids") + " must ascend along the model)",
             std::string(strategy) + " on " + graph_where(g),
             phased ? std::string("put producers in the same or an earlier phase than their consumers")
                    : std::string("number stages in model order; with AutoStage.SameAsIpu a block on a lower IPU after a "
                                  "higher one goes back in time: use AutoStage.AutoIncrement or explicit stages"));
      }
    }
  }
}

/// IPUs of one replica and reserved on the device, after the IPU rules: ids beyond the device,
/// powers of two unless auto-rounded, at most 64.
struct ipu_reservation {
  std::uint32_t per_replica = 1;
  std::uint32_t reserved = 1;
};

constexpr ipu_reservation reserve_ipus(const graph& g, const std::vector<op_assignment>& a,
                                       const device_description& d, std::uint32_t replicas, bool auto_round,
                                       std::string_view strategy) {
  const std::string where = std::string(strategy) + " on " + to_string(d);
  if (replicas == 0) fail("the replication factor is 0", where, "use a replication factor of at least 1");
  op_id top = no_op;
  std::uint32_t top_ipu = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (top == no_op || a[i].ipu > top_ipu) {
      top = static_cast<op_id>(i);
      top_ipu = a[i].ipu;
    }
  const std::uint32_t used = top_ipu + 1;
  const std::uint64_t total = std::uint64_t{used} * replicas;
  if (used > d.num_ipus || total > d.num_ipus) {
    const std::string who = top != no_op ? "op " + graph::describe(g.op(top)) + " is on IPU " + format_uint(used - 1)
                                         : "the model uses " + format_uint(used) + " IPUs";
    fail(who + (replicas > 1 ? ", so " + format_uint(replicas) + " replicas need " + format_uint(total) + " IPUs," : "") +
             " but the device has " + format_uint(d.num_ipus) + " (rule: IPU ids within the device)",
         where,
         "acquire a device with at least " + format_uint(total) + " IPUs, lower the replication factor, or annotate "
         "the model for fewer IPUs");
  }
  std::uint64_t reserved = total;
  if (!ipu::is_power_of_two(total)) {
    if (!auto_round)
      fail("the model needs " + format_uint(total) + " IPUs (" + format_uint(used) + " per replica x " +
               format_uint(replicas) + " replicas), not a power of two (rule: IPU count a power of two unless auto-rounded)",
           where, "annotate the model for a power-of-two number of IPUs, or enable autoRoundNumIPUs to reserve the "
                  "next power of two (the excess stays idle)");
    reserved = 1;
    while (reserved < total) reserved *= 2;
  }
  if (reserved > max_ipus)
    fail("the model needs " + format_uint(reserved) + " IPUs, more than the 64 a device can have", where,
         "use fewer IPUs per replica or fewer replicas");
  if (reserved > d.num_ipus)
    fail("rounded up to a power of two the model needs " + format_uint(reserved) + " IPUs but the device has " +
             format_uint(d.num_ipus) + " (rule: IPU ids within the device)",
         where, "acquire a larger device, or annotate the model for a power-of-two number of IPUs");
  return {used, static_cast<std::uint32_t>(reserved)};
}

}  // namespace detail::sched
}  // namespace ipu
