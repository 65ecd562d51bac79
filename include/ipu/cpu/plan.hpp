#pragma once
// The static execution plan the CPU device runs: computed once per graph, before any input is seen.
//
// - Ops run in topological order.
// - Every intermediate lives in one arena allocated up front. Each buffer is live from the step
//   that produces it to its last reader; buffers whose lifetimes do not overlap share memory
//   (greedy offset assignment, largest first).
// - An op writes in place when that is legal: element-wise ops may write output 0 over input 0
//   or 1 when it has the output's element count and element size and dies at the op; view ops
//   (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout in inference: ipu/ops/flags.hpp) reuse
//   their dying input's bytes and run no kernel at all. Contract for element-wise kernels: out[i] may share memory with in[i] of
//   input 0 or 1, so a kernel must read in[i] before writing out[i] and never read in[j] for
//   j < i afterwards (reading the whole input into a staging buffer first is also fine).
// - The device zeroes every fresh output buffer before its kernel runs (so kernels that
//   accumulate see zeros, as in a new host_tensor); in-place outputs hold the input instead.
// - Graph outputs are written straight into the host tensors `run` returns; graph inputs,
//   weights and constants are read where they are (never written: nothing aliases them).
// - Subgraphs (If / Loop bodies) may read tensors of enclosing graphs by name; such a tensor is
//   kept alive until the op that owns the subgraph has run.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/captures.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/ops/op_table.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::cpu {

/// Where a tensor's bytes are during a run.
enum class storage : std::uint8_t {
  none,         // neither produced nor read (an unused declaration)
  graph_input,  // bound by the caller to `run` (or by a subgraph's caller)
  graph_data,   // a weight or constant, read in place from the graph's byte_buffer
  outer,        // a tensor of an enclosing graph, found by name (subgraphs only)
  arena,        // an intermediate in the arena
  output,       // a graph output, written into the host tensor returned by `run`
};

constexpr std::string_view to_string(storage s) noexcept {
  switch (s) {
    case storage::none: return "none";
    case storage::graph_input: return "graph_input";
    case storage::graph_data: return "graph_data";
    case storage::outer: return "outer";
    case storage::arena: return "arena";
    case storage::output: return "output";
  }
  return "?";
}

struct tensor_placement {
  storage where = storage::none;
  std::size_t offset = 0;  // arena: byte offset
  std::size_t bytes = 0;
  std::size_t index = 0;              // graph_input: input position; output: output position
  tensor_id alias_of = no_tensor;     // written in place over this (dying) input's buffer
  std::size_t first_step = 0, last_step = 0;  // arena: live interval, in steps (inclusive)
};

struct plan_step {
  op_id op = no_op;
  kernel_fn kernel = nullptr;
  bool view_only = false;  // a view op whose output aliases its input: nothing to compute
  bool writes_all = false;  // op_entry::writes_all_outputs: no zeroing of its arena outputs first
};

struct execution_plan {
  std::vector<plan_step> steps;            // in execution order
  std::vector<tensor_placement> tensors;   // indexed by tensor_id
  std::size_t arena_bytes = 0;             // peak: the arena's size
  std::size_t intermediate_bytes = 0;      // what the arena would need without any reuse

  /// The number of ops that write over an input instead of a fresh buffer.
  [[nodiscard]] std::size_t num_in_place() const noexcept {
    return static_cast<std::size_t>(
        std::count_if(tensors.begin(), tensors.end(), [](const tensor_placement& p) { return p.alias_of != no_tensor; }));
  }
};

struct plan_options {
  bool reuse_memory = true;  // false: every intermediate gets its own bytes (for debugging kernels)
  bool in_place = true;      // false: no op writes over its input
  std::size_t alignment = 64;
};

namespace detail {

inline void collect_missing_kernels(const graph& g, const op_registry& registry, std::vector<std::string>& missing,
                                    std::vector<std::size_t>& counts) {
  for (const auto& op : g.ops()) {
    if (!registry.find(op.domain, op.type)) {
      const std::string name = (op.domain.empty() || op.domain == "ai.onnx" ? "" : op.domain + "::") + op.type;
      auto it = std::find(missing.begin(), missing.end(), name);
      if (it == missing.end()) {
        missing.push_back(name);
        counts.push_back(1);
      } else {
        ++counts[static_cast<std::size_t>(it - missing.begin())];
      }
    }
    for_each_subgraph(op, [&](const graph& body) { collect_missing_kernels(body, registry, missing, counts); });
  }
}

/// Kahn's algorithm over explicit and implicit (subgraph) inputs; ties keep the order ops were
/// added in, like topological_order().
inline std::vector<op_id> execution_order(const graph& g, const std::vector<std::vector<tensor_id>>& implicit_inputs) {
  const auto n = g.num_ops();
  std::vector<std::vector<op_id>> readers(n);  // producer op -> ops waiting on it, one entry per edge
  std::vector<std::size_t> pending(n, 0);
  for (std::size_t o = 0; o < n; ++o) {
    auto wait_for = [&](tensor_id t) {
      if (t == no_tensor) return;
      const auto producer = g.tensor(t).producer;
      if (producer == no_op) return;
      readers[producer].push_back(static_cast<op_id>(o));
      ++pending[o];
    };
    for (auto t : g.op(static_cast<op_id>(o)).inputs) wait_for(t);
    for (auto t : implicit_inputs[o]) wait_for(t);
  }
  std::vector<op_id> ready, order;
  for (std::size_t o = 0; o < n; ++o)
    if (pending[o] == 0) ready.push_back(static_cast<op_id>(o));
  // A min-heap on op id keeps the order deterministic and close to the model's own.
  std::make_heap(ready.begin(), ready.end(), std::greater<>());
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), std::greater<>());
    const auto o = ready.back();
    ready.pop_back();
    order.push_back(o);
    for (auto r : readers[o])
      if (--pending[r] == 0) {
        ready.push_back(r);
        std::push_heap(ready.begin(), ready.end(), std::greater<>());
      }
  }
  if (order.size() != n)
    throw error(error_category::graph, "the graph has a cycle through an If/Loop body's reads of enclosing tensors",
                "graph '" + g.name() + "'", "a subgraph may not read what its own op produces");
  return order;
}

inline std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

}  // namespace detail

/// Throws one error listing every op type (in `g` and its subgraphs) without a kernel in `registry`.
inline void check_kernels(const graph& g, const op_registry& registry) {
  std::vector<std::string> missing;
  std::vector<std::size_t> counts;
  detail::collect_missing_kernels(g, registry, missing, counts);
  if (missing.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < missing.size(); ++i) {
    if (i) list += ", ";
    list += missing[i];
    if (counts[i] > 1) list += " (x" + std::to_string(counts[i]) + ")";
  }
  throw error(error_category::runtime,
              std::to_string(missing.size()) + " op type" + (missing.size() == 1 ? "" : "s") +
                  " without a host kernel: " + list,
              "graph '" + g.name() + "'", "implement the kernels or rewrite the model to avoid these ops");
}

/// Plans `g` for host execution. `is_subgraph` relaxes checks for If/Loop bodies, whose
/// producer-less tensors come from enclosing graphs.
inline execution_plan make_plan(const graph& g, const op_registry& registry, const plan_options& options = {},
                                bool is_subgraph = false) {
  if (!is_subgraph) validate(g);
  check_kernels(g, registry);
  for (const auto& op : g.ops()) check_string_operands(g, op, "graph '" + g.name() + "'");
  if (options.alignment == 0 || (options.alignment & (options.alignment - 1)) != 0)
    throw error(error_category::usage, "arena alignment " + std::to_string(options.alignment) + " is not a power of two",
                "cpu plan options", "use 64");

  execution_plan p;
  const auto nt = g.num_tensors();
  p.tensors.resize(nt);

  // --- where each tensor lives ----------------------------------------------------------------
  for (std::size_t i = 0; i < g.inputs().size(); ++i) {
    p.tensors[g.inputs()[i]].where = storage::graph_input;
    p.tensors[g.inputs()[i]].index = i;
  }
  for (std::size_t t = 0; t < nt; ++t) {
    const auto& node = g.tensor(static_cast<tensor_id>(t));
    auto& pl = p.tensors[t];
    pl.bytes = node.info.num_bytes();
    if (node.has_data()) pl.where = storage::graph_data;
    else if (node.kind == tensor_kind::intermediate && node.producer != no_op) pl.where = storage::arena;
    else if (node.kind == tensor_kind::intermediate && !node.consumers.empty()) {
      if (!is_subgraph)
        throw error(error_category::graph, "tensor '" + node.name + "' is read but never produced",
                    "graph '" + g.name() + "'", "add the op that produces it or make it a graph input");
      pl.where = storage::outer;
    }
  }
  for (std::size_t i = 0; i < g.outputs().size(); ++i) {
    const auto t = g.outputs()[i];
    auto& pl = p.tensors[t];
    if (pl.where == storage::arena) {
      pl.where = storage::output;  // the first listing owns the buffer; later listings copy it
      pl.index = i;
    } else if (pl.where == storage::none) {
      throw error(error_category::graph, "graph output '" + g.tensor(t).name + "' is never produced",
                  "graph '" + g.name() + "'", "produce it with an op or remove it from the outputs");
    }
  }

  // --- order and liveness -------------------------------------------------------------------
  // An op owning subgraphs also reads, implicitly, the enclosing tensors its bodies use: they
  // order it after their producers and keep them alive until it has run.
  std::unordered_map<std::string_view, tensor_id> by_name;
  for (std::size_t t = 0; t < nt; ++t) by_name.emplace(g.tensor(static_cast<tensor_id>(t)).name, static_cast<tensor_id>(t));
  std::vector<std::vector<tensor_id>> implicit_inputs(g.num_ops());
  for (std::size_t o = 0; o < g.num_ops(); ++o) {
    std::set<std::string> names;
    for_each_subgraph(g.op(static_cast<op_id>(o)),
                              [&](const graph& body) { collect_outer_names(body, names); });
    for (const auto& name : names)
      if (auto it = by_name.find(name); it != by_name.end())  // else defined further out, if anywhere
        implicit_inputs[o].push_back(it->second);
  }
  const auto order = detail::execution_order(g, implicit_inputs);
  std::vector<std::size_t> last_use(nt, 0);
  std::vector<bool> used(nt, false);
  for (std::size_t s = 0; s < order.size(); ++s) {
    const auto& op = g.op(order[s]);
    auto use = [&](tensor_id t) {
      last_use[t] = s;
      used[t] = true;
    };
    for (auto t : op.inputs)
      if (t != no_tensor) use(t);
    for (auto t : implicit_inputs[order[s]]) use(t);
    for (auto t : op.outputs) p.tensors[t].first_step = s;
  }

  // --- steps and in-place decisions -------------------------------------------------------
  // Buffers are grouped: an in-place output joins its input's group; a group is one allocation
  // live from its first member's birth to its last member's death.
  std::vector<tensor_id> group(nt);
  for (std::size_t t = 0; t < nt; ++t) {
    group[t] = static_cast<tensor_id>(t);
    auto& pl = p.tensors[t];
    if (pl.where == storage::arena) pl.last_step = used[t] ? std::max(last_use[t], pl.first_step) : pl.first_step;
  }
  p.steps.reserve(order.size());
  for (std::size_t s = 0; s < order.size(); ++s) {
    const auto& op = g.op(order[s]);
    plan_step step{order[s], registry.kernel(op.domain, op.type), false, registry.find(op.domain, op.type)->writes_all_outputs};
    const bool view = ipu::is_view(g, op);
    if (options.in_place && !op.outputs.empty() && p.tensors[op.outputs[0]].where == storage::arena &&
        (view || flags_of(op.domain, op.type).in_place)) {
      const auto out = op.outputs[0];
      const auto& out_info = g.tensor(out).info;
      // Only the first two inputs: variadic kernels (Sum, Max, ...) fold inputs 2.. into the
      // output pass by pass, which would overwrite a later input before reading it.
      const std::size_t candidates = std::min<std::size_t>(view ? 1 : 2, op.inputs.size());
      for (std::size_t i = 0; i < candidates; ++i) {
        const auto in = op.inputs[i];
        if (in == no_tensor || p.tensors[in].where != storage::arena || p.tensors[in].last_step != s) continue;
        if (std::find(implicit_inputs[order[s]].begin(), implicit_inputs[order[s]].end(), in) != implicit_inputs[order[s]].end())
          continue;
        const auto& in_info = g.tensor(in).info;
        if (size_of(in_info.type) != size_of(out_info.type) || in_info.num_elements() != out_info.num_elements())
          continue;
        if (view && in_info.type != out_info.type) continue;
        p.tensors[out].alias_of = in;
        group[out] = group[in];
        step.view_only = view;
        break;
      }
    }
    p.steps.push_back(step);
  }

  // --- offsets -----------------------------------------------------------------------------
  struct block {
    tensor_id root;
    std::size_t bytes = 0, first = 0, last = 0, offset = 0;
  };
  std::vector<block> blocks;
  std::vector<std::size_t> block_of(nt, SIZE_MAX);
  for (std::size_t t = 0; t < nt; ++t) {
    const auto& pl = p.tensors[t];
    if (pl.where != storage::arena) continue;
    p.intermediate_bytes += pl.bytes;
    const auto root = group[t];
    if (block_of[root] == SIZE_MAX) {
      block_of[root] = blocks.size();
      blocks.push_back({root, 0, pl.first_step, pl.last_step, 0});
    }
    auto& b = blocks[block_of[root]];
    b.bytes = std::max(b.bytes, detail::align_up(pl.bytes, options.alignment));
    b.first = std::min(b.first, pl.first_step);
    b.last = std::max(b.last, pl.last_step);
  }
  std::vector<std::size_t> by_size(blocks.size());
  for (std::size_t i = 0; i < by_size.size(); ++i) by_size[i] = i;
  std::stable_sort(by_size.begin(), by_size.end(), [&](std::size_t a, std::size_t b) {
    if (blocks[a].bytes != blocks[b].bytes) return blocks[a].bytes > blocks[b].bytes;
    return blocks[a].first < blocks[b].first;
  });
  std::vector<std::size_t> placed;
  std::size_t running = 0;  // offsets without reuse
  for (auto bi : by_size) {
    auto& b = blocks[bi];
    if (!options.reuse_memory) {
      b.offset = running;
      running += b.bytes;
    } else {
      // The lowest gap, among blocks live at the same time, that fits.
      std::vector<std::pair<std::size_t, std::size_t>> busy;  // [offset, end)
      for (auto pi : placed) {
        const auto& o = blocks[pi];
        if (o.first <= b.last && b.first <= o.last && o.bytes) busy.emplace_back(o.offset, o.offset + o.bytes);
      }
      std::sort(busy.begin(), busy.end());
      std::size_t offset = 0;
      for (auto [lo, hi] : busy) {
        if (lo >= offset + b.bytes) break;
        offset = std::max(offset, hi);
      }
      b.offset = offset;
    }
    placed.push_back(bi);
    p.arena_bytes = std::max(p.arena_bytes, b.offset + b.bytes);
  }
  for (std::size_t t = 0; t < nt; ++t)
    if (p.tensors[t].where == storage::arena) p.tensors[t].offset = blocks[block_of[group[t]]].offset;
  return p;
}

}  // namespace ipu::cpu
