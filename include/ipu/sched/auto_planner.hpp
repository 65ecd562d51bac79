#pragma once
// The automatic planner: for a model without annotations (typically one that does not fit one
// IPU), proposes where to cut it into `stages` contiguous pieces of its topological order, so that
// the predicted stage times are as balanced as the cuts allow while each piece fits an IPU.
//
//   auto p = ipu::propose_stages(model, ipu::ipu_model<ipu::mk2, 4>::description(), 4);
//   auto e = ipu::pipelined_execution{}.plan(p.annotated, device, options);
//
// Method: the op costs come from the cost model (ops/op_cost.hpp), plus the host streams of the graph
// inputs and outputs where they are read and produced; cutting before position i of the order adds
// the IPU-Link copy of every tensor crossing the cut, over the route between the two stages' IPUs,
// to the next stage. A dynamic
// program over (stage, cut position) minimises the slowest stage (each stage at least one op),
// subject to a memory estimate per stage: its weights, the largest temporaries plus operands of any
// of its ops, and its vertex state, within `memory_fill` of the IPU's SRAM. The estimate is only a
// filter: the strategy's plan checks memory tile by tile. `propose_phases` does the same for phased
// execution, doubling the number of phases until every phase fits.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ipu/device/cost.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/device/memory.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/sched/annotation_rules.hpp"
#include "ipu/sched/execution_strategy.hpp"
#include "ipu/ops/op_cost.hpp"

namespace ipu {

struct auto_plan {
  graph annotated;                        // the model, every op annotated with its IPU and stage (or phase)
  std::vector<op_id> order;               // the topological order that was cut
  std::vector<std::size_t> stage_begin;   // position in `order` where each stage starts
  std::vector<std::uint64_t> stage_cycles;  // predicted compute + incoming copy cycles per stage
  std::vector<std::uint64_t> stage_bytes;   // memory estimate per stage
};

struct auto_plan_options {
  /// Fraction of an IPU's SRAM the estimate may fill (the tile-level check decides in the end).
  double memory_fill = 0.9;
  /// propose_phases: the fewest phases to start from (more when a phase would not fit).
  std::uint32_t min_phases = 0;
  /// propose_stages: copies of every variable's bytes a stage holds. Training keeps, besides the
  /// weight, its gradient or accumulator and the optimizer's state (Adam: 4 copies in all).
  double variable_copies = 1;
  /// propose_stages: copies of every op's outputs a stage holds all step long (training: 1, the
  /// activations the backward reads).
  double kept_output_copies = 0;
};

/// True when some op says where it runs (IPU, stage, phase or block): the automatic planner places
/// only models that say nothing.
constexpr bool has_placement_annotations(const graph& g) {
  for (const auto& op : g.ops())
    if (op.where.ipu || op.where.stage || op.where.phase || !op.where.block.empty()) return true;
  return false;
}

namespace detail::sched {

constexpr std::uint64_t tensor_bytes(const graph& g, tensor_id t, const op_cost_options& o) {
  return costed_bytes(g.tensor(t).info, o);
}

/// Costs and memory figures of the ops in `order`, and the bytes crossing each cut position.
struct cut_problem {
  std::vector<std::uint64_t> cycles;        // per position
  std::vector<std::uint64_t> weight_bytes;  // weights first read at this position
  std::vector<std::uint64_t> variable_bytes;  // the variables among them
  std::vector<std::uint64_t> working_bytes; // temporaries + operands of the op
  std::vector<std::uint64_t> code_bytes;    // vertex state
  std::vector<std::uint64_t> cross_bytes;   // tensors crossing a cut before position i (i >= 1)
  std::vector<std::uint64_t> host_cycles;   // graph inputs first read / outputs produced here, streamed
};

constexpr cut_problem make_cut_problem(const graph& g, const std::vector<op_id>& order, const device_description& d,
                                       const plan_options& po) {
  const op_cost_options o{po.precision, po.partials_type, po.available_memory_proportion, 0};
  const auto n = order.size();
  cut_problem p;
  // assign, not resize: GCC 12 at -O3 reads resize() of an empty vector as a null dereference.
  p.cycles.assign(n, 0);
  p.weight_bytes.assign(n, 0);
  p.variable_bytes.assign(n, 0);
  p.working_bytes.assign(n, 0);
  p.code_bytes.assign(n, 0);
  p.cross_bytes.assign(n + 1, 0);
  p.host_cycles.assign(n, 0);
  std::vector<std::size_t> pos(g.num_ops(), 0);
  for (std::size_t i = 0; i < n; ++i) pos[order[i]] = i;
  std::vector<bool> seen(g.num_tensors(), false);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& op = g.op(order[i]);
    const auto c = estimate_op_cost(g, order[i], d, o, po.cost_hook);
    p.cycles[i] = c.cycles();
    std::uint64_t operands = 0;
    for (auto t : op.inputs) {
      if (t == no_tensor) continue;
      const auto k = g.tensor(t).kind;
      if (k == tensor_kind::variable || k == tensor_kind::constant) {
        if (!seen[t]) p.weight_bytes[i] += tensor_bytes(g, t, o);
        if (!seen[t] && k == tensor_kind::variable) p.variable_bytes[i] += tensor_bytes(g, t, o);
        seen[t] = true;
      } else {
        operands += tensor_bytes(g, t, o);
      }
    }
    for (auto t : op.outputs) operands += tensor_bytes(g, t, o);
    p.working_bytes[i] = c.temporary_bytes_per_tile * c.tiles + operands;
    p.code_bytes[i] = c.tiles == 0 ? 0
                                   : vertex_state_bytes(d.arch, static_cast<std::uint32_t>(op.inputs.size() + op.outputs.size())) *
                                         c.tiles;
  }
  // A tensor produced at position a and last read at b crosses cuts a+1..b. A graph input is streamed
  // from the host to its first reader (at position f) and copied from there: it crosses f+1..b.
  for (std::size_t t = 0; t < g.num_tensors(); ++t) {
    const auto& tn = g.tensor(static_cast<tensor_id>(t));
    if (tn.kind == tensor_kind::variable || tn.kind == tensor_kind::constant || tn.consumers.empty()) continue;
    const auto bytes = tensor_bytes(g, static_cast<tensor_id>(t), o);
    std::size_t first = n, last = 0;
    for (auto c : tn.consumers) {
      first = std::min(first, pos[c]);
      last = std::max(last, pos[c]);
    }
    // Inputs travel host -> IPU, as reads of host memory.
    if (tn.producer == no_op && first < n)
      p.host_cycles[first] += seconds_to_cycles(d.arch, host_read_seconds(d.arch, bytes));
    const std::size_t from = tn.producer == no_op ? first + 1 : pos[tn.producer] + 1;
    for (std::size_t cut = from; cut <= last && cut < n; ++cut) p.cross_bytes[cut] += bytes;
  }
  for (auto t : g.outputs())
    if (g.tensor(t).producer != no_op)
      p.host_cycles[pos[g.tensor(t).producer]] +=
          seconds_to_cycles(d.arch, host_transfer_seconds(d.arch, tensor_bytes(g, t, o)));
  return p;
}

struct segmentation {
  std::vector<std::size_t> begin;
  std::vector<std::uint64_t> cycles;
  std::vector<std::uint64_t> bytes;
  bool fits = false;
};

/// Cuts positions [0, n) into `k` non-empty contiguous segments minimising the slowest one, within
/// `budget` bytes each (when impossible, within no budget, with fits = false). Segment j runs on IPU
/// `ipu_of(j)`; its time is its ops, its host streams and the copy of what crosses its first cut
/// from the previous segment's IPU.
template <class IpuOf>
constexpr segmentation segment(const cut_problem& p, const device_description& d, std::size_t k, std::uint64_t budget,
                               IpuOf ipu_of) {
  const auto n = p.cycles.size();
  constexpr auto inf = std::numeric_limits<std::uint64_t>::max();
  auto copy_into = [&](std::size_t j, std::size_t b) -> std::uint64_t {  // segment j (0-based) starting at b
    if (j == 0 || b == 0 || p.cross_bytes[b] == 0) return 0;
    return ipu_link_copy_cycles(d, ipu_of(j - 1), ipu_of(j), p.cross_bytes[b]);
  };
  auto run = [&](std::uint64_t limit) {
    // cost[j][e]: best slowest segment for the first e positions in j segments; from[j][e]: last cut.
    std::vector<std::vector<std::uint64_t>> cost(k + 1, std::vector<std::uint64_t>(n + 1, inf));
    std::vector<std::vector<std::size_t>> from(k + 1, std::vector<std::size_t>(n + 1, 0));
    cost[0][0] = 0;
    for (std::size_t e = 1; e <= n; ++e) {
      // Segment [b, e): scan b downwards, accumulating its figures.
      std::uint64_t cyc = 0, weights = 0, working = 0, code = 0;
      for (std::size_t b = e; b-- > 0;) {
        cyc += p.cycles[b] + p.host_cycles[b];
        weights += p.weight_bytes[b];
        working = std::max(working, p.working_bytes[b]);
        code += p.code_bytes[b];
        if (weights + working + code > limit) break;  // longer segments only grow
        if (weights + working + code + (b > 0 ? p.cross_bytes[b] : 0) > limit) continue;
        for (std::size_t j = 1; j <= k && j <= e; ++j) {
          if (cost[j - 1][b] == inf) continue;
          const auto c = std::max(cost[j - 1][b], cyc + copy_into(j - 1, b));
          if (c < cost[j][e]) {
            cost[j][e] = c;
            from[j][e] = b;
          }
        }
      }
    }
    segmentation s;
    if (cost[k][n] == inf) return s;
    s.fits = true;
    s.begin.assign(k, 0);
    for (std::size_t j = k, e = n; j > 0; --j) {
      s.begin[j - 1] = from[j][e];
      e = from[j][e];
    }
    for (std::size_t j = 0; j < k; ++j) {
      const auto b = s.begin[j], e = j + 1 < k ? s.begin[j + 1] : n;
      std::uint64_t cyc = 0, weights = 0, working = 0, code = 0;
      for (auto i = b; i < e; ++i) {
        cyc += p.cycles[i] + p.host_cycles[i];
        weights += p.weight_bytes[i];
        working = std::max(working, p.working_bytes[i]);
        code += p.code_bytes[i];
      }
      s.cycles.push_back(cyc + copy_into(j, b));
      s.bytes.push_back(weights + working + code + (b > 0 ? p.cross_bytes[b] : 0));
    }
    return s;
  };
  auto s = run(budget);
  if (s.fits) return s;
  s = run(inf);
  s.fits = false;
  return s;
}

/// Fills `r` from segmentation `s` of `r.order`: its figures, and `g` with every op of piece j
/// annotated by `annotate(where, j)`.
template <class Annotate>
constexpr void annotate_pieces(auto_plan& r, const graph& g, const segmentation& s, Annotate annotate) {
  r.stage_begin = s.begin;
  r.stage_cycles = s.cycles;
  r.stage_bytes = s.bytes;
  r.annotated = g;
  for (std::size_t j = 0; j < s.begin.size(); ++j) {
    const auto e = j + 1 < s.begin.size() ? s.begin[j + 1] : r.order.size();
    for (auto i = s.begin[j]; i < e; ++i) annotate(r.annotated.op(r.order[i]).where, static_cast<std::int64_t>(j));
  }
}

constexpr void require_unannotated(const graph& g, std::string_view what) {
  if (!has_placement_annotations(g)) return;
  for (const auto& op : g.ops())
    if (op.where.ipu || op.where.stage || op.where.phase || !op.where.block.empty())
      fail("op " + graph::describe(op) + " is already annotated", std::string(what),
           "the automatic planner places unannotated models; plan an annotated model with its annotations");
}

}  // namespace detail::sched

/// Proposes `stages` pipeline stages (one per IPU 0 .. stages-1) for an unannotated model: the
/// returned graph has every op annotated with IPU = stage = its piece. Throws ipu::error (schedule)
/// for an annotated model or fewer ops than stages; when no cut fits the memory estimate it still
/// returns the most balanced cut (the plan's memory check reports what does not fit).
constexpr auto_plan propose_stages(const graph& g, const device_description& d, std::uint32_t stages,
                                   const plan_options& o = {}, const auto_plan_options& ao = {}) {
  using ipu::format_uint;
  const std::string what = "automatic planner for graph '" + g.name() + "'";
  detail::sched::require_unannotated(g, what);
  ipu::require_ipu_figures(d.arch, "automatic planner");
  if (stages == 0 || stages > d.num_ipus)
    detail::sched::fail("cannot cut the model into " + format_uint(stages) + " stages on a " + format_uint(d.num_ipus) +
                            "-IPU device",
                        what, "ask for 1 to " + format_uint(d.num_ipus) + " stages");
  auto_plan r;
  r.order = topological_order(g);
  if (r.order.size() < stages)
    detail::sched::fail("the model has " + format_uint(r.order.size()) + " ops, fewer than the " + format_uint(stages) +
                            " stages asked for",
                        what, "use fewer IPUs");
  auto p = detail::sched::make_cut_problem(g, r.order, d, o);
  if (ao.variable_copies > 1)
    for (std::size_t i = 0; i < p.weight_bytes.size(); ++i)
      p.weight_bytes[i] += static_cast<std::uint64_t>((ao.variable_copies - 1) * static_cast<double>(p.variable_bytes[i]));
  if (ao.kept_output_copies > 0) {
    const op_cost_options co{o.precision, o.partials_type, o.available_memory_proportion, 0};
    for (std::size_t i = 0; i < r.order.size(); ++i) {
      std::uint64_t out = 0;
      for (auto t : g.op(r.order[i]).outputs)
        if (t != no_tensor) out += detail::sched::tensor_bytes(g, t, co);
      p.weight_bytes[i] += static_cast<std::uint64_t>(ao.kept_output_copies * static_cast<double>(out));
    }
  }
  const auto budget = static_cast<std::uint64_t>(ao.memory_fill * static_cast<double>(d.arch.sram_bytes_per_ipu()));
  const auto s = detail::sched::segment(p, d, stages, budget, [](std::size_t j) { return static_cast<std::uint32_t>(j); });
  detail::sched::annotate_pieces(r, g, s, [](annotation& w, std::int64_t j) {
    w.ipu = j;
    w.stage = j;
  });
  return r;
}

/// Proposes phases for serial or parallel phased execution over `ipus` IPUs for an unannotated
/// model: phase p runs on IPU p mod ipus (even phases on even IPUs when `ipus` is even, as
/// ParallelPhasedExecution requires). Starts at `ipus` phases (at least 2 for parallel) and doubles
/// until every phase fits the memory estimate, or every op is its own phase. `ao.min_phases` raises
/// the starting count.
constexpr auto_plan propose_phases(const graph& g, const device_description& d, std::uint32_t ipus, bool parallel,
                                   const plan_options& o = {}, const auto_plan_options& ao = {}) {
  using ipu::format_uint;
  const std::string what = "automatic planner for graph '" + g.name() + "'";
  detail::sched::require_unannotated(g, what);
  ipu::require_ipu_figures(d.arch, "automatic planner");
  if (ipus == 0 || ipus > d.num_ipus || (parallel && (ipus < 2 || ipus % 2 != 0)))
    detail::sched::fail("cannot place " + std::string(parallel ? "parallel" : "serial") + " phases on " +
                            format_uint(ipus) + " IPUs of a " + format_uint(d.num_ipus) + "-IPU device",
                        what,
                        parallel ? "parallel phased execution alternates two groups: use an even number of IPUs >= 2"
                                 : "use 1 to the device's IPUs");
  auto_plan r;
  r.order = topological_order(g);
  const auto p = detail::sched::make_cut_problem(g, r.order, d, o);
  const auto budget = static_cast<std::uint64_t>(ao.memory_fill * static_cast<double>(d.arch.sram_bytes_per_ipu()));
  std::size_t phases =
      std::min<std::size_t>(std::max({ipus, parallel ? 2u : 1u, ao.min_phases}), r.order.size());
  detail::sched::segmentation s;
  for (;;) {
    s = detail::sched::segment(p, d, phases, budget, [ipus](std::size_t j) { return static_cast<std::uint32_t>(j % ipus); });
    if (s.fits || phases >= r.order.size()) break;
    phases = std::min(phases * 2, r.order.size());
  }
  detail::sched::annotate_pieces(r, g, s, [ipus](annotation& w, std::int64_t j) {
    w.phase = j;
    w.ipu = j % ipus;
  });
  return r;
}

}  // namespace ipu
