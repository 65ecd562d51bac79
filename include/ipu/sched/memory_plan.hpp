#pragma once
// Tensor placement on tiles and per-IPU memory, checked with the device memory model (memory.hpp).
//
// Placement: every tensor is mapped linearly (whole vectors per tile, Poplar's mapTensorLinearly).
// A tensor too small to cover all tiles starts where the previous small tensor on its IPU ended,
// so small tensors spread over the IPU instead of piling up on tile 0. Views (Reshape, Flatten,
// Squeeze, Unsqueeze, Identity, Dropout in inference: ipu/ops/flags.hpp) share their input's storage.
//
// What an IPU holds, per scope (the whole program for sharded and pipelined execution, each phase
// for phased execution):
//  - variables and constants its ops read (phased, weights off chip: only the phase's variables);
//  - activations live at the scope's peak: a tensor is live from the op producing it (or the start
//    of the scope, when it arrives from elsewhere) to its last reader in the scope, or to the end
//    when a later scope or the host still needs it; phased execution with activations on chip also
//    keeps the tensors later phases read;
//  - pipelines: a receive buffer for the next micro-batch of every input arriving over IPU-Links,
//    and in training the stashed inputs of the micro-batches in flight: PopART's lockstep pipeline
//    of 2S - 1 stages runs stage i's forward 2 (S - i) - 2 cycles before its backward, so stage i
//    holds 2 (S - i) - 1 micro-batches' inputs (the stage is recomputed from them for the backward);
//  - the largest temporary of any of the scope's ops (operand copies and partial sums of a matmul
//    or convolution, from the planner);
//  - vertex state of every op on the IPU (code stays on chip for the whole program).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/device/compute_cost.hpp"
#include "ipu/device/memory.hpp"
#include "ipu/device/tile_mapping.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/ops/op_table.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/ops/op_cost.hpp"
#include "ipu/sched/program_builder.hpp"
#include "ipu/sched/stage_builder.hpp"

namespace ipu::detail::sched {

/// `op label + suffix`, appended piece by piece: GCC 12 cannot constant-evaluate graph::describe's
/// conditional between string temporaries.
constexpr std::string op_label(const op_node& op, std::string_view suffix) {
  std::string s = op.type;
  if (!op.name.empty()) {
    s += " '";
    s += op.name;
    s += '\'';
  }
  s += suffix;
  return s;
}

constexpr std::string tensor_label(const tensor_node& t, std::string_view suffix, std::string_view number = {}) {
  std::string s = t.name;
  s += suffix;
  if (!number.empty()) {
    s += number;
    s += ')';
  }
  return s;
}

/// Whether input `i` of `op` is a shape or index parameter (Reshape's shape, Slice's starts...): with a
/// constant there, Poplar folds the value into the program, so it takes no tile memory.
constexpr bool is_shape_operand(const graph& g, const op_node& op, std::size_t i) {
  if (i == 0 || i >= op.inputs.size() || op.inputs[i] == no_tensor) return false;
  if (!op.domain.empty() && op.domain != "ai.onnx") return false;
  if (g.tensor(op.inputs[i]).kind != tensor_kind::constant) return false;
  constexpr std::string_view ops[] = {"Reshape", "Slice",  "Squeeze", "Unsqueeze", "Pad",       "Split",
                                      "Tile",    "Expand", "TopK",    "Resize",    "ReduceSum", "ReduceMean",
                                      "ReduceMax", "ReduceMin", "ReduceProd", "Clip", "Dropout"};
  for (auto o : ops)
    if (op.type == o) return true;
  return false;
}

/// For every tensor, the tensor whose storage it uses (itself unless a view's output).
constexpr std::vector<tensor_id> storage_roots(const graph& g, const std::vector<op_id>& order) {
  std::vector<tensor_id> root(g.num_tensors());
  for (std::size_t t = 0; t < root.size(); ++t) root[t] = static_cast<tensor_id>(t);
  for (auto id : order) {
    const auto& op = g.op(id);
    if (ipu::is_view(g, op)) root[op.outputs[0]] = root[op.inputs[0]];
  }
  return root;
}

struct memory_plan {
  std::vector<tensor_placement> placement;
  std::vector<ipu_memory_use> memory;  // per IPU of one replica
};

/// Linear placements with a per-IPU cursor for tensors smaller than an IPU.
class tile_placer {
 public:
  constexpr tile_placer(const architecture_description& a, std::uint32_t ipus) : arch_(&a), cursor_(ipus, 0) {}

  constexpr linear_tile_mapping place(std::uint32_t ipu, std::uint64_t elements, data_type t) {
    const std::uint32_t tiles = arch_->tiles_per_ipu;
    auto m = map_linearly(elements, tiles, vector_width(*arch_, t));
    if (m.tiles_used == 0 || m.tiles_used >= tiles) return m;
    auto& c = cursor_[ipu];
    if (c + m.tiles_used > tiles) c = 0;
    m.first_tile = c;
    c = (c + m.tiles_used) % tiles;
    return m;
  }

 private:
  const architecture_description* arch_;
  std::vector<std::uint32_t> cursor_;
};

struct memory_context {
  const program_context* programs = nullptr;
  const staged_ops* stages = nullptr;
  const program* main = nullptr;
  const std::vector<op_cost>* op_costs = nullptr;
  double available_memory_proportion = default_available_memory_proportion;
  bool check = true;
  std::uint32_t ipus_per_replica = 1;
  bool pipelined = false;
};

/// Builds placements, checks every scope's memory (throwing the device model's out-of-memory error
/// when `check`) and returns the per-IPU totals.
constexpr memory_plan plan_memory(const memory_context& mc) {
  const auto& c = *mc.programs;
  const auto& s = *mc.stages;
  const graph& g = *c.model;
  const auto& d = c.device;
  const auto& a = d.arch;
  memory_plan out;
  const auto nt = g.num_tensors();
  const auto roots = storage_roots(g, s.order);
  const bool weights_off_chip = c.phased && c.live != liveness::always_live;
  const bool activations_off_chip = c.phased && c.live == liveness::off_chip_after_each_phase;

  // --- placements: (tensor root, ipu) -> mapping ---------------------------------------------
  tile_placer placer(a, d.num_ipus);
  std::vector<std::vector<std::pair<std::uint32_t, linear_tile_mapping>>> mapping(nt);
  auto type_of = [&](tensor_id t) { return costed_type(g.tensor(t).info.type, c.costing); };
  auto elements_of = [&](tensor_id t) {
    const auto n = g.tensor(t).info.num_elements();
    return n > 0 ? static_cast<std::uint64_t>(n) : std::uint64_t{0};
  };
  auto mapping_on = [&](tensor_id t, std::uint32_t ipu) -> const linear_tile_mapping& {
    const auto r = roots[t];
    for (const auto& [i, m] : mapping[r])
      if (i == ipu) return m;
    mapping[r].emplace_back(ipu, placer.place(ipu, elements_of(r), type_of(r)));
    return mapping[r].back().second;
  };
  std::vector<bool> remote(nt, false);
  for (const auto& st : mc.main->steps)
    if (st.kind == step_kind::to_remote) remote[roots[st.tensor]] = true;
  auto add_placement = [&](tensor_id t, std::uint32_t ipu, bool in_streaming) {
    for (const auto& p : out.placement)
      if (p.tensor == t && p.ipu == ipu) return;
    const auto& m = mapping_on(t, ipu);
    out.placement.push_back(tensor_placement{t, ipu, m.first_tile, m.tiles_used, in_streaming});
  };
  // Weights on every IPU reading them; activations where produced, streamed or copied.
  for (std::uint32_t si = 0; si < s.stages.size(); ++si) {
    const auto& st = s.stages[si];
    for (auto id : st.ops) {
      const auto& op = g.op(id);
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const auto t = op.inputs[i];
        if (t == no_tensor || is_shape_operand(g, op, i)) continue;
        const auto k = g.tensor(t).kind;
        if (k == tensor_kind::variable) add_placement(t, st.ipu, weights_off_chip);
        else if (k == tensor_kind::constant) add_placement(t, st.ipu, false);
      }
      for (auto t : g.op(id).outputs) add_placement(t, st.ipu, remote[roots[t]]);
    }
  }
  for (const auto& st : mc.main->steps) {
    if (st.tensor == no_tensor) continue;
    if (st.kind == step_kind::host_to_device || st.kind == step_kind::from_remote) add_placement(st.tensor, st.ipu, false);
    if (st.kind == step_kind::ipu_copy) add_placement(st.tensor, st.peer, false);
  }

  // --- memory per scope ----------------------------------------------------------------------
  // Per op: the IPU reading each tensor, and whether anything reads a tensor's storage after it.
  auto consumers_of_root = [&](tensor_id r, auto&& fn) {
    for (std::size_t t = 0; t < nt; ++t)
      if (roots[t] == r)
        for (auto op : g.tensor(static_cast<tensor_id>(t)).consumers) fn(op);
  };
  auto root_is_output = [&](tensor_id r) {
    for (auto t : g.outputs())
      if (roots[t] == r) return true;
    return false;
  };
  auto is_activation = [&](tensor_id r) {
    const auto k = g.tensor(r).kind;
    return k == tensor_kind::input || k == tensor_kind::intermediate;
  };
  std::vector<std::uint64_t> max_total(mc.ipus_per_replica, 0), max_worst(mc.ipus_per_replica, 0);
  std::vector<std::uint32_t> worst_tile(mc.ipus_per_replica, 0);
  const memory_options mopts{mc.available_memory_proportion, 5, 3};

  auto scope_allocations = [&](std::uint32_t ipu, const std::vector<op_id>& ops, std::int64_t phase,
                               std::vector<memory_allocation>& allocs) {
    // Weights.
    std::vector<tensor_id> weights;
    for (const auto& st : s.stages) {
      if (st.ipu != ipu) continue;
      const bool in_scope = !c.phased || st.phase == phase;
      for (auto id : st.ops) {
        const auto& op = g.op(id);
        for (std::size_t i = 0; i < op.inputs.size(); ++i) {
          const auto t = op.inputs[i];
          if (t == no_tensor || is_shape_operand(g, op, i)) continue;
          const auto k = g.tensor(t).kind;
          const bool keep = k == tensor_kind::constant || (k == tensor_kind::variable && (!weights_off_chip || in_scope));
          if (keep && std::find(weights.begin(), weights.end(), t) == weights.end()) weights.push_back(t);
        }
      }
    }
    for (auto t : weights)
      allocs.push_back(tensor_allocation(g.tensor(t).name,
                                         g.tensor(t).kind == tensor_kind::variable ? memory_kind::variable : memory_kind::constant,
                                         type_of(t), ipu, mapping_on(t, ipu)));
    // Activations: live intervals over the scope's ops.
    const auto n = ops.size();
    struct interval {
      tensor_id root;
      std::size_t begin, end;
    };
    std::vector<interval> live;
    auto in_scope_index = [&](op_id id) -> std::size_t {
      for (std::size_t k = 0; k < n; ++k)
        if (ops[k] == id) return k;
      return n;
    };
    auto touch = [&](tensor_id r, std::size_t k, bool def) {
      for (auto& iv : live)
        if (iv.root == r) {
          iv.begin = std::min(iv.begin, def ? k : iv.begin);
          iv.end = std::max(iv.end, k);
          return;
        }
      live.push_back(interval{r, def ? k : 0, k});
    };
    for (std::size_t k = 0; k < n; ++k) {
      const auto& op = g.op(ops[k]);
      for (auto t : op.inputs)
        if (t != no_tensor && is_activation(roots[t])) touch(roots[t], k, false);
      if (!ipu::is_view(g, op))
        for (auto t : op.outputs) touch(roots[t], k, true);
    }
    for (auto& iv : live) {
      bool later = root_is_output(iv.root);
      consumers_of_root(iv.root, [&](op_id op) { later = later || in_scope_index(op) == n; });
      if (later && n > 0) iv.end = n - 1;
    }
    // Phased execution with activations on chip: tensors produced here earlier and read later.
    if (c.phased && !activations_off_chip)
      for (std::size_t r = 0; r < nt; ++r) {
        const auto& tn = g.tensor(static_cast<tensor_id>(r));
        if (roots[r] != r || tn.kind != tensor_kind::intermediate || tn.producer == no_op) continue;
        const auto& ps = s.stages[s.op_stage[tn.producer]];
        if (ps.ipu != ipu || ps.phase >= phase || !read_after_phase(g, s, static_cast<tensor_id>(r), phase)) continue;
        if (std::none_of(live.begin(), live.end(), [&](const interval& iv) { return iv.root == r; }))
          live.push_back(interval{static_cast<tensor_id>(r), 0, n > 0 ? n - 1 : 0});
      }
    std::size_t peak = 0;
    std::uint64_t peak_bytes = 0;
    for (std::size_t k = 0; k < std::max<std::size_t>(n, 1); ++k) {
      std::uint64_t b = 0;
      for (const auto& iv : live)
        if (iv.begin <= k && k <= iv.end) b += costed_bytes(g.tensor(iv.root).info, c.costing);
      if (b > peak_bytes) {
        peak_bytes = b;
        peak = k;
      }
    }
    for (const auto& iv : live) {
      if (!(iv.begin <= peak && peak <= iv.end)) continue;
      const auto& tn = g.tensor(iv.root);
      const bool here = tn.producer != no_op && s.stages[s.op_stage[tn.producer]].ipu == ipu;
      allocs.push_back(tensor_allocation(tn.name, here ? memory_kind::activation : memory_kind::exchange_buffer,
                                         type_of(iv.root), ipu, mapping_on(iv.root, ipu)));
    }
    // Pipelines: the next micro-batch's inputs arrive while this one computes; training stashes.
    if (mc.pipelined) {
      const auto num_stages = s.stages.size();
      for (std::uint32_t si = 0; si < num_stages; ++si) {
        const auto& st = s.stages[si];
        if (st.ipu != ipu) continue;
        for (auto t : st.inputs) {
          const auto r = roots[t];
          allocs.push_back(tensor_allocation(tensor_label(g.tensor(r), " (next micro-batch)"), memory_kind::exchange_buffer,
                                             type_of(r), ipu, mapping_on(r, ipu)));
          if (c.training)
            for (std::size_t k = 0; k < 2 * (num_stages - si) - 1; ++k)
              allocs.push_back(tensor_allocation(tensor_label(g.tensor(r), " (stash ", format_uint(k)),
                                                 memory_kind::activation, type_of(r), ipu, mapping_on(r, ipu)));
        }
      }
    }
    // The largest temporary of the scope's ops.
    const op_cost* biggest = nullptr;
    op_id biggest_op = no_op;
    for (auto id : ops) {
      const auto& oc = (*mc.op_costs)[id];
      if (oc.temporary_bytes_per_tile == 0) continue;
      if (!biggest || oc.temporary_bytes_per_tile * oc.tiles > biggest->temporary_bytes_per_tile * biggest->tiles) {
        biggest = &oc;
        biggest_op = id;
      }
    }
    if (biggest)
      allocs.push_back(per_tile_allocation(op_label(g.op(biggest_op), " temporaries"), memory_kind::temporary, ipu, 0,
                                           std::min(biggest->tiles, a.tiles_per_ipu), biggest->temporary_bytes_per_tile));
    // Vertex state of every op on the IPU.
    for (const auto& st : s.stages) {
      if (st.ipu != ipu) continue;
      for (auto id : st.ops) {
        const auto& oc = (*mc.op_costs)[id];
        if (oc.tiles == 0) continue;
        const auto& op = g.op(id);
        const auto operands = static_cast<std::uint32_t>(op.inputs.size() + op.outputs.size());
        allocs.push_back(per_tile_allocation(op_label(op, " vertex state"), memory_kind::code, ipu, 0,
                                             std::min(oc.tiles, a.tiles_per_ipu), vertex_state_bytes(a, operands)));
      }
    }
  };

  auto check_scope_set = [&](const std::vector<memory_allocation>& allocs, std::int64_t phase) {
    const auto report = check_memory(d, allocs, mopts);
    for (const auto& r : report.ipus) {
      if (r.ipu >= mc.ipus_per_replica) continue;
      max_total[r.ipu] = std::max(max_total[r.ipu], r.total_bytes);
      if (!r.worst_tiles.empty() && r.worst_tiles.front().total() > max_worst[r.ipu]) {
        max_worst[r.ipu] = r.worst_tiles.front().total();
        worst_tile[r.ipu] = r.worst_tiles.front().tile;
      }
    }
    if (mc.check && !report.fits()) {
      auto details = describe_out_of_memory(d, allocs, report, mopts);
      if (phase >= 0) details.location += ", execution phase " + format_int(phase);
      throw error(error_category::memory, std::move(details.message), std::move(details.location),
                  std::move(details.hint));
    }
  };

  if (!c.phased) {
    std::vector<memory_allocation> allocs;
    for (std::uint32_t ipu = 0; ipu < mc.ipus_per_replica; ++ipu) {
      std::vector<op_id> ops;
      for (auto id : s.order)
        if (s.stages[s.op_stage[id]].ipu == ipu) ops.push_back(id);
      if (!ops.empty()) scope_allocations(ipu, ops, -1, allocs);
    }
    check_scope_set(allocs, -1);
  } else {
    for (std::uint32_t first = 0; first < s.stages.size();) {
      std::uint32_t last = first;
      while (last < s.stages.size() && s.stages[last].phase == s.stages[first].phase) ++last;
      std::vector<memory_allocation> allocs;
      for (auto si = first; si < last; ++si) scope_allocations(s.stages[si].ipu, s.stages[si].ops, s.stages[si].phase, allocs);
      check_scope_set(allocs, s.stages[first].phase);
      first = last;
    }
  }
  for (std::uint32_t ipu = 0; ipu < mc.ipus_per_replica; ++ipu)
    out.memory.push_back(ipu_memory_use{ipu, max_total[ipu], max_worst[ipu], worst_tile[ipu]});
  return out;
}

}  // namespace ipu::detail::sched
