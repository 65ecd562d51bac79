#pragma once
// From per-op assignments (annotation_rules.hpp) to the executable's stages: which ops each stage
// runs, in what order, and which tensors cross its boundary.
//
//  - sequential (sharded): a stage is a maximal run of ops on one IPU in an execution order that
//    stays on the current IPU while it can (fewer hand-overs than plain topological order);
//  - pipelined: one stage per pipeline stage id, in id order; consecutive stages on the same IPU
//    merge into one (PopTorch does the same);
//  - phased: one stage per (phase, IPU), phases in order.
// A stage's inputs are the graph inputs and the tensors of other stages its ops read (weights and
// constants live on the stage's IPU and are not listed); its outputs are the tensors it produces
// that other stages read or that are graph outputs.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/sched/annotation_rules.hpp"
#include "ipu/sched/executable.hpp"

namespace ipu::detail::sched {

/// A topological order that keeps running ops of the IPU it is on while any is ready; ties by the
/// order ops were added.
constexpr std::vector<op_id> ipu_affine_order(const graph& g, const std::vector<op_assignment>& a) {
  const auto n = g.num_ops();
  std::vector<std::size_t> pending(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (auto t : g.op(static_cast<op_id>(i)).inputs)
      if (t != no_tensor && g.tensor(t).producer != no_op) ++pending[i];
  std::vector<op_id> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push_back(static_cast<op_id>(i));
  std::vector<op_id> order;
  order.reserve(n);
  std::uint32_t current = n ? a[0].ipu : 0;
  bool started = false;
  while (!ready.empty()) {
    auto pick = ready.end();
    for (auto it = ready.begin(); it != ready.end(); ++it) {
      const bool same = started && a[*it].ipu == current;
      if (pick == ready.end()) {
        pick = it;
      } else {
        const bool pick_same = started && a[*pick].ipu == current;
        if ((same && !pick_same) || (same == pick_same && *it < *pick)) pick = it;
      }
    }
    const op_id id = *pick;
    ready.erase(pick);
    order.push_back(id);
    current = a[id].ipu;
    started = true;
    for (auto t : g.op(id).outputs)
      for (auto c : g.tensor(t).consumers)
        for (auto in : g.op(c).inputs)
          if (in == t && --pending[c] == 0) ready.push_back(c);
  }
  return order;
}

struct staged_ops {
  std::vector<stage_plan> stages;
  std::vector<std::uint32_t> op_stage;  // per op
  std::vector<op_id> order;             // execution order of the main program
};

/// Fills stage inputs and outputs from ops already assigned to stages.
constexpr void link_stages(const graph& g, staged_ops& s) {
  const auto is_output = [&](tensor_id t) {
    return std::find(g.outputs().begin(), g.outputs().end(), t) != g.outputs().end();
  };
  for (std::uint32_t si = 0; si < s.stages.size(); ++si) {
    auto& st = s.stages[si];
    for (auto id : st.ops) {
      const auto& op = g.op(id);
      for (auto t : op.inputs) {
        if (t == no_tensor) continue;
        const auto& tn = g.tensor(t);
        const bool from_host = tn.kind == tensor_kind::input;
        const bool from_other = tn.kind == tensor_kind::intermediate && tn.producer != no_op && s.op_stage[tn.producer] != si;
        if ((from_host || from_other) && std::find(st.inputs.begin(), st.inputs.end(), t) == st.inputs.end())
          st.inputs.push_back(t);
      }
      for (auto t : op.outputs) {
        bool leaves = is_output(t);
        for (auto c : g.tensor(t).consumers) leaves = leaves || s.op_stage[c] != si;
        if (leaves) st.outputs.push_back(t);
      }
    }
  }
}

/// Sharded: maximal runs of one IPU along the IPU-affine order.
constexpr staged_ops sequential_stages(const graph& g, const std::vector<op_assignment>& a) {
  staged_ops s;
  s.order = ipu_affine_order(g, a);
  s.op_stage.assign(g.num_ops(), 0);
  for (auto id : s.order) {
    if (s.stages.empty() || s.stages.back().ipu != a[id].ipu) {
      stage_plan st;
      st.id = static_cast<std::uint32_t>(s.stages.size());
      st.ipu = a[id].ipu;
      s.stages.push_back(st);
    }
    s.stages.back().ops.push_back(id);
    s.op_stage[id] = s.stages.back().id;
  }
  link_stages(g, s);
  return s;
}

/// Pipelined (`phased` false: by stage key, merging consecutive keys on one IPU) or phased (by
/// phase, then IPU). Ops keep topological order within a stage.
constexpr staged_ops keyed_stages(const graph& g, const std::vector<op_assignment>& a, bool phased) {
  staged_ops s;
  const auto topo = topological_order(g);
  // Distinct keys: (phase, ipu) or (stage, ipu), with the position of their first op.
  std::vector<std::pair<std::int64_t, std::int64_t>> keys;
  std::vector<std::size_t> first_pos;
  auto key_of = [&](op_id id) {
    return phased ? std::pair<std::int64_t, std::int64_t>{a[id].phase, a[id].ipu}
                  : std::pair<std::int64_t, std::int64_t>{a[id].stage, a[id].ipu};
  };
  for (std::size_t i = 0; i < topo.size(); ++i) {
    const auto k = key_of(topo[i]);
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      keys.push_back(k);
      first_pos.push_back(i);
    }
  }
  // Pipelines by (stage, ipu). Phases by phase; within a phase, stages feeding other stages of the
  // phase come first (ties: the stage whose ops come first in the model).
  std::vector<std::size_t> idx(keys.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](std::size_t x, std::size_t y) {
    if (keys[x].first != keys[y].first) return keys[x].first < keys[y].first;
    return phased ? first_pos[x] < first_pos[y] : keys[x].second < keys[y].second;
  });
  if (phased) {
    auto key_index = [&](op_id id) {
      return static_cast<std::size_t>(std::find(keys.begin(), keys.end(), key_of(id)) - keys.begin());
    };
    // feeds[a][b]: key a produces a tensor key b reads, within one phase.
    std::vector<std::vector<bool>> feeds(keys.size(), std::vector<bool>(keys.size(), false));
    for (auto id : topo) {
      const auto b = key_index(id);
      for (auto t : g.op(id).inputs) {
        if (t == no_tensor || g.tensor(t).producer == no_op) continue;
        const auto src = key_index(g.tensor(t).producer);
        if (src != b && keys[src].first == keys[b].first) feeds[src][b] = true;
      }
    }
    // Within each phase, repeatedly take the first key (in `idx` order) no pending key feeds.
    std::vector<std::size_t> ordered;
    for (std::size_t begin = 0; begin < idx.size();) {
      std::size_t end = begin;
      while (end < idx.size() && keys[idx[end]].first == keys[idx[begin]].first) ++end;
      std::vector<std::size_t> pending(idx.begin() + static_cast<std::ptrdiff_t>(begin),
                                       idx.begin() + static_cast<std::ptrdiff_t>(end));
      while (!pending.empty()) {
        std::size_t pick = 0;  // on a cycle, the first (check_stage_order reports it)
        for (std::size_t i = 0; i < pending.size(); ++i) {
          bool free = true;
          for (auto other : pending) free = free && !feeds[other][pending[i]];
          if (free) {
            pick = i;
            break;
          }
        }
        ordered.push_back(pending[pick]);
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(pick));
      }
      begin = end;
    }
    idx = ordered;
  }
  {
    std::vector<std::pair<std::int64_t, std::int64_t>> sorted;
    for (auto i : idx) sorted.push_back(keys[i]);
    keys = sorted;
  }
  // Stage index of each key; pipelines merge consecutive keys on one IPU.
  std::vector<std::uint32_t> key_stage(keys.size(), 0);
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const bool merge = !phased && k > 0 && keys[k].second == keys[k - 1].second;
    if (k == 0 || !merge) {
      stage_plan st;
      st.id = static_cast<std::uint32_t>(s.stages.size());
      st.ipu = static_cast<std::uint32_t>(keys[k].second);
      st.phase = phased ? keys[k].first : -1;
      s.stages.push_back(st);
    }
    key_stage[k] = s.stages.back().id;
  }
  s.op_stage.assign(g.num_ops(), 0);
  for (auto id : topo) {
    const auto k = static_cast<std::size_t>(std::find(keys.begin(), keys.end(), key_of(id)) - keys.begin());
    s.op_stage[id] = key_stage[k];
    s.stages[key_stage[k]].ops.push_back(id);
  }
  for (const auto& st : s.stages) s.order.insert(s.order.end(), st.ops.begin(), st.ops.end());
  link_stages(g, s);
  return s;
}

/// Every stage must only read tensors of earlier stages (two stages of one phase feeding each
/// other cannot be ordered).
constexpr void check_stage_order(const graph& g, const staged_ops& s, std::string_view strategy) {
  for (std::uint32_t si = 0; si < s.stages.size(); ++si)
    for (auto t : s.stages[si].inputs) {
      const auto p = g.tensor(t).producer;
      if (p == no_op || s.op_stage[p] < si) continue;
      const auto& st = s.stages[si];
      fail("op " + graph::describe(g.op(p)) + " on IPU " + format_uint(s.stages[s.op_stage[p]].ipu) + " feeds '" +
               g.tensor(t).name + "' to IPU " + format_uint(st.ipu) + (st.phase >= 0 ? " in phase " + format_int(st.phase) : std::string()) +
               ", which also feeds it back (rule: stages must follow the data flow)",
           std::string(strategy) + " on " + graph_where(g), "split the two stages into consecutive phases or stages");
    }
}

}  // namespace ipu::detail::sched
