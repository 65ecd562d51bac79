#pragma once
// Constant folding: an op whose inputs are all known before the graph runs (constants, weights,
// Constant ops' values, or what an op folded before it left) is run once, here, with the op's own
// host kernel, and its outputs become constants. Exporters leave such ops behind: PyTorch's
// `Transpose(W)` before each Linear layer when exported without its own folding, the scale and
// zero point arithmetic of quantized models, shape arithmetic on weights. Each would otherwise run
// on every inference.
//
// Folding treats weights as constants: the optimised graph is for inference, and its folded values
// are new constants (the weights they came from are dropped when nothing else reads them), so a
// runtime that binds weights by name cannot bind a stale one. Not folded: ops whose outputs the
// graph returns (a graph output stays an op's output), ops with subgraphs or randomness, ops of
// other domains (Graphcore's Nop and PrintTensor are kept on purpose), and outputs larger than
// `max_bytes` or than four times the op's inputs (an Expand of a scalar would bloat the model).
// An op whose kernel fails on its constant inputs is left as it is, so the error comes when the
// graph runs, as it would have without the pass.
#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/known_values.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/ops/all.hpp"
#include "ipu/ops/op_table.hpp"
#include "ipu/passes/rewrite.hpp"
#include "ipu/tensor.hpp"

namespace ipu::passes {

struct constant_folding_options {
  /// The largest output one folded op may write.
  std::size_t max_bytes = std::size_t{64} << 20;
  /// Ops never folded, when given (fuse-qdq keeps DequantizeLinear to see the quantized weights).
  bool (*keep)(const op_node&) = nullptr;
};

namespace detail {
constexpr bool foldable_type(const op_node& op) {
  if (!(op.domain.empty() || op.domain == "ai.onnx")) return false;
  for (std::string_view t : {"Constant", "If", "Loop", "Scan"})
    if (op.type == t) return false;
  return !flags_of(op.domain, op.type).random;  // a draw folded once would be the same every run
}
}  // namespace detail

/// `g` with every op whose inputs are known folded into constants (see above).
inline graph fold_constants(const graph& g, constant_folding_options o = {}) {
  const auto& registry = default_op_registry();
  std::vector<bool> is_output(g.num_tensors(), false);
  for (auto t : g.outputs()) is_output[t] = true;
  // Folded values, each shared by the graph's constant that holds it: later passes and copies of
  // the graph share the bytes instead of copying them.
  std::unordered_map<tensor_id, std::shared_ptr<const host_tensor>> folded;
  auto view_of = [&](tensor_id t) -> const_tensor_view {
    const auto& info = g.tensor(t).info;
    if (const auto it = folded.find(t); it != folded.end()) return it->second->view();
    const auto* d = known_data(g, t);
    return d && d->size() == info.num_bytes() ? const_tensor_view(info, d->data()) : const_tensor_view();
  };
  graph_rewrite rw(g);
  rw.drop_unread_variables = true;
  bool any = false;
  for (const auto id : topological_order(g)) {
    const auto& op = g.op(id);
    if (!detail::foldable_type(op) || op.inputs.empty() || op.outputs.empty() || (o.keep && o.keep(op))) continue;
    std::vector<const_tensor_view> inputs;
    std::size_t in_bytes = 0, out_bytes = 0;
    bool known = true;
    for (auto t : op.inputs) {
      if (t == no_tensor) {
        inputs.emplace_back();
        continue;
      }
      inputs.push_back(view_of(t));
      // An empty known tensor has no bytes to point at; a kernel would take it for an omitted input.
      known = known && inputs.back().data() != nullptr && g.tensor(t).info.num_bytes() != 0 &&
              g.tensor(t).kind != tensor_kind::input;
      in_bytes += g.tensor(t).info.num_bytes();
    }
    for (auto t : op.outputs) {
      known = known && t != no_tensor && !is_output[t];
      if (t != no_tensor) out_bytes += g.tensor(t).info.num_bytes();
    }
    if (!known || out_bytes > o.max_bytes || out_bytes > 4 * in_bytes + 64) continue;
    const auto* entry = registry.find(op.domain, op.type);
    if (!entry || !entry->kernel) continue;
    std::vector<host_tensor> outs;
    std::vector<tensor_view> out_views;
    string_heap strings;  // a STRING output's characters, until copied into its own tensor below
    for (auto t : op.outputs) {
      outs.emplace_back(g.tensor(t).info);
      out_views.push_back(outs.back().view());
    }
    try {
      if (is_view(g, op)) {
        // A view's output is its input's bytes; its kernel may expect the executor to alias them.
        std::memcpy(outs[0].data(), inputs[0].data(), outs[0].info().num_bytes());
      } else {
        kernel_context ctx{op, inputs, out_views};
        ctx.strings = &strings;
        entry->kernel(ctx);
      }
      // A STRING output points into `strings` or into the graph's constants: it gets characters of
      // its own, so it outlives both.
      for (auto& out : outs)
        if (out.info().type == data_type::STRING) out = host_tensor::copy_of(out);
    } catch (const error&) {
      continue;  // left for run time, which reports it as the unoptimised graph would
    }
    rw.removed[id] = true;
    for (std::size_t i = 0; i < op.outputs.size(); ++i) {
      auto held = std::make_shared<const host_tensor>(std::move(outs[i]));
      rw.frozen.emplace_back(op.outputs[i], byte_buffer::share(held, held->data(), held->bytes().size()));
      folded.emplace(op.outputs[i], std::move(held));
    }
    any = true;
  }
  if (!any) return g;
  return apply(g, rw);
}

}  // namespace ipu::passes
