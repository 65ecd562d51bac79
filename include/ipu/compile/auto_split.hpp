#pragma once
// Splitting a model that carries no placement annotations over several IPUs, for compiling plain
// ONNX files (`ipu compile model.onnx --ipus 4 --strategy pipelined`).
//
// The ops, in topological order, are cut into contiguous runs of about equal predicted cycles (the
// cost model's figures for one IPU of the target; for the host device, which the cost model does
// not time, the elements each op reads and writes). Contiguous runs of a topological order only
// pass data forward, as pipelines and phases require. Run k becomes:
//   pipelined / sharded:  ops annotated with IPU k and pipeline stage k;
//   serial phased:        block "phase<k>", phase k of the strategy, on IPU 0;
//   parallel phased:      block "phase<k>", phase k on IPU k mod 2 (even phases on even IPUs, odd on
//                         odd).
// Phased strategies list their phases explicitly (there is no AutoStage for them), so the split
// comes with the strategy settings that name its blocks.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/sched/execution_strategy.hpp"
#include "ipu/sched/sharded_execution.hpp"

namespace ipu::popef {

/// True when no op says where it runs (IPU, stage, phase or block).
inline bool has_placement_annotations(const graph& g) {
  for (const auto& op : g.ops())
    if (op.where.ipu || op.where.stage || op.where.phase || !op.where.block.empty()) return true;
  return false;
}

/// Predicted cycles of each op on one IPU of `device` (host device: elements read and written).
inline std::vector<std::uint64_t> op_costs(const graph& g, const device_description& device) {
  std::vector<std::uint64_t> costs(g.num_ops(), 0);
  if (device.kind == device_kind::ipu) {
    plan_options o;
    o.check_memory = false;  // only the costs are wanted; the split is what makes the model fit
    const auto e = sharded_execution{}.plan(g, make_device_description(device.arch, 1), o);
    if (e.op_cycles.size() == costs.size()) costs = e.op_cycles;
  }
  if (std::all_of(costs.begin(), costs.end(), [](auto c) { return c == 0; }))
    for (std::size_t i = 0; i < g.num_ops(); ++i) {
      std::uint64_t elements = 1;
      const auto& op = g.op(static_cast<op_id>(i));
      for (auto t : op.inputs)
        if (t != no_tensor) elements += static_cast<std::uint64_t>(g.tensor(t).info.num_elements());
      for (auto t : op.outputs) elements += static_cast<std::uint64_t>(g.tensor(t).info.num_elements());
      costs[i] = elements;
    }
  return costs;
}

struct split_model {
  graph model;                 // every op annotated
  strategy_settings strategy;  // the strategy that runs the annotations
};

/// `g` with every op annotated for `mode`, in `parts` runs of about equal cost (fewer when the
/// model has fewer ops), and the strategy settings for it. Throws ipu::error (usage) when `g`
/// already has annotations.
inline split_model auto_split(const graph& g, execution_mode mode, std::uint32_t parts,
                              const std::vector<std::uint64_t>& costs) {
  if (has_placement_annotations(g))
    throw error(error_category::usage, "the model already says where its ops run", "graph '" + g.name() + "'",
                "compile it with its own annotations instead of splitting it");
  if (parts == 0) throw error(error_category::usage, "cannot split a model into 0 parts", "graph '" + g.name() + "'");
  if (costs.size() != g.num_ops()) throw error(error_category::internal, "auto_split: one cost per op expected");
  graph out = g;
  const auto order = topological_order(g);
  const auto n = order.size();
  parts = static_cast<std::uint32_t>(std::min<std::size_t>(parts, std::max<std::size_t>(n, 1)));
  std::uint64_t total = 0;
  for (auto c : costs) total += c;
  std::uint64_t done = 0;
  std::uint32_t part = 0;
  for (std::size_t i = 0; i < n; ++i) {
    // Move on once this part has its share of the cost, or when the ops left are just enough to
    // give each later part one; each part gets at least one op.
    if (i > 0 && part + 1 < parts) {
      const auto left_ops = n - i;
      const auto later_parts = static_cast<std::size_t>(parts - part - 1);
      if (left_ops <= later_parts || done * parts >= total * (part + 1)) ++part;
    }
    auto& where = out.op(order[i]).where;
    const auto p = static_cast<std::int64_t>(part);
    switch (mode) {
      case execution_mode::pipelined:
      case execution_mode::sharded:
        where.ipu = p;
        where.stage = p;
        break;
      case execution_mode::serial_phased:
      case execution_mode::parallel_phased: where.block = "phase" + std::to_string(part); break;
    }
    done += costs[order[i]];
  }
  strategy_settings s;
  switch (mode) {
    case execution_mode::pipelined: s = strategy_settings::pipelined(); break;
    case execution_mode::sharded: s = strategy_settings::sharded(); break;
    case execution_mode::serial_phased:
    case execution_mode::parallel_phased: {
      const bool parallel = mode == execution_mode::parallel_phased;
      std::vector<phase> phases;
      for (std::uint32_t k = 0; k <= part; ++k)
        phases.push_back(phase{{stage{{"phase" + std::to_string(k)}, parallel ? std::int64_t{k % 2} : std::int64_t{0}}}});
      s = parallel ? strategy_settings::parallel_phased(std::move(phases)) : strategy_settings::serial_phased(std::move(phases));
      break;
    }
  }
  return {std::move(out), std::move(s)};
}

}  // namespace ipu::popef
