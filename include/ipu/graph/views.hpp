#pragma once
// Lazy range-v3 views for graph queries: which ops run on an IPU, in a stage or phase, who
// consumes a tensor, which tensors are weights...
//
//   for (ipu::op_id o : ipu::views::ops_on_ipu(g, 1)) ...
//   auto names = ipu::views::weights(g) | ipu::views::tensor_nodes(g)
//              | ranges::views::transform(&ipu::tensor_node::name);
//
// Views yield ids (op_id / tensor_id); `op_nodes(g)` and `tensor_nodes(g)` are adaptors turning
// ids into nodes. A view refers to the graph: keep the graph alive and unchanged while using it
// (views of a temporary graph do not compile).
#include <cstdint>
#include <string>
#include <string_view>

#include <range/v3/view/all.hpp>
#include <range/v3/view/filter.hpp>
#include <range/v3/view/iota.hpp>
#include <range/v3/view/transform.hpp>

#include "ipu/graph/graph.hpp"

namespace ipu::views {

// --- all ops and tensors ----------------------------------------------------------------------
/// Every op id, in the order ops were added.
inline auto op_ids(const graph& g) { return ranges::views::iota(op_id{0}, static_cast<op_id>(g.num_ops())); }
/// Every tensor id, in the order tensors were added.
inline auto tensor_ids(const graph& g) {
  return ranges::views::iota(tensor_id{0}, static_cast<tensor_id>(g.num_tensors()));
}

/// Adaptor: op ids to `const op_node&`.
inline auto op_nodes(const graph& g) {
  return ranges::views::transform([gp = &g](op_id o) -> const op_node& { return gp->op(o); });
}
/// Adaptor: tensor ids to `const tensor_node&`.
inline auto tensor_nodes(const graph& g) {
  return ranges::views::transform([gp = &g](tensor_id t) -> const tensor_node& { return gp->tensor(t); });
}

/// The ids of ops whose node satisfies `pred(const op_node&)`.
template <class Pred>
auto ops_where(const graph& g, Pred pred) {
  return op_ids(g) | ranges::views::filter([gp = &g, pred = std::move(pred)](op_id o) { return pred(gp->op(o)); });
}
/// The ids of tensors whose node satisfies `pred(const tensor_node&)`.
template <class Pred>
auto tensors_where(const graph& g, Pred pred) {
  return tensor_ids(g) |
         ranges::views::filter([gp = &g, pred = std::move(pred)](tensor_id t) { return pred(gp->tensor(t)); });
}

// --- ops by placement --------------------------------------------------------------------------
/// Ops annotated to run on IPU (virtual graph) `ipu`.
inline auto ops_on_ipu(const graph& g, std::int64_t ipu) {
  return ops_where(g, [ipu](const op_node& op) { return op.where.ipu == ipu; });
}
/// Ops in pipeline stage `stage`.
inline auto ops_in_stage(const graph& g, std::int64_t stage) {
  return ops_where(g, [stage](const op_node& op) { return op.where.stage == stage; });
}
/// Ops in execution phase `phase`.
inline auto ops_in_phase(const graph& g, std::int64_t phase) {
  return ops_where(g, [phase](const op_node& op) { return op.where.phase == phase; });
}
/// Ops built in the block named `block`.
inline auto ops_in_block(const graph& g, std::string_view block) {
  return ops_where(g, [b = std::string(block)](const op_node& op) { return op.where.block == b; });
}
/// Ops of type `type` ("Conv", "MatMul", ...) in any domain.
inline auto ops_of_type(const graph& g, std::string_view type) {
  return ops_where(g, [t = std::string(type)](const op_node& op) { return op.type == t; });
}

// --- connectivity ------------------------------------------------------------------------------
/// The ops reading tensor `t` (each once, in the order they were added).
inline auto consumers(const graph& g, tensor_id t) { return ranges::views::all(g.tensor(t).consumers); }

/// The tensors op `o` reads, skipping omitted optional inputs (repeats kept, in input order).
inline auto op_inputs(const graph& g, op_id o) {
  return ranges::views::all(g.op(o).inputs) | ranges::views::filter([](tensor_id t) { return t != no_tensor; });
}
/// The tensors op `o` writes.
inline auto op_outputs(const graph& g, op_id o) { return ranges::views::all(g.op(o).outputs); }

namespace detail {
/// The op producing input #i of `op`, or no_op.
inline op_id producer_of_input(const graph& g, const op_node& op, std::size_t i) {
  const auto t = op.inputs[i];
  return t == no_tensor ? no_op : g.tensor(t).producer;
}
}  // namespace detail

/// The ops producing op `o`'s inputs, each once, in input order. Graph inputs, weights and
/// constants have no producer and contribute nothing.
inline auto producers(const graph& g, op_id o) {
  const op_node* op = &g.op(o);
  return ranges::views::iota(std::size_t{0}, op->inputs.size()) |
         ranges::views::filter([gp = &g, op](std::size_t i) {
           const auto p = detail::producer_of_input(*gp, *op, i);
           if (p == no_op) return false;
           for (std::size_t j = 0; j < i; ++j)  // first input with this producer only
             if (detail::producer_of_input(*gp, *op, j) == p) return false;
           return true;
         }) |
         ranges::views::transform([gp = &g, op](std::size_t i) { return detail::producer_of_input(*gp, *op, i); });
}

/// The ops reading any output of op `o`, each once, ordered by output then by consumer.
inline auto successors(const graph& g, op_id o) {
  const op_node* op = &g.op(o);
  // Walk the consumers of all outputs as one flat sequence; keep a consumer at its first position.
  auto pairs = [gp = &g, op] {
    std::size_t n = 0;
    for (auto t : op->outputs) n += gp->tensor(t).consumers.size();
    return n;
  }();
  auto at = [gp = &g, op](std::size_t flat) {
    for (std::size_t i = 0;; ++i) {
      const auto& c = gp->tensor(op->outputs[i]).consumers;
      if (flat < c.size()) return c[flat];
      flat -= c.size();
    }
  };
  return ranges::views::iota(std::size_t{0}, pairs) | ranges::views::filter([at](std::size_t f) {
           const auto c = at(f);
           for (std::size_t j = 0; j < f; ++j)
             if (at(j) == c) return false;
           return true;
         }) |
         ranges::views::transform(at);
}

// --- tensors by role ---------------------------------------------------------------------------
/// Tensors of kind `kind`.
inline auto tensors_of_kind(const graph& g, tensor_kind kind) {
  return tensors_where(g, [kind](const tensor_node& t) { return t.kind == kind; });
}
/// The weights: variables initialised from host data (PopART's initialised inputs).
inline auto weights(const graph& g) { return tensors_of_kind(g, tensor_kind::variable); }
/// Constants folded into the executable.
inline auto constants(const graph& g) { return tensors_of_kind(g, tensor_kind::constant); }
/// Tensors produced by ops.
inline auto intermediates(const graph& g) { return tensors_of_kind(g, tensor_kind::intermediate); }
/// Graph inputs fed by the host, in declaration order.
inline auto inputs(const graph& g) { return ranges::views::all(g.inputs()); }
/// Graph outputs, in declaration order.
inline auto outputs(const graph& g) { return ranges::views::all(g.outputs()); }

// A view must not outlive its graph: views of a temporary are rejected at compile time.
void op_ids(const graph&&) = delete;
void tensor_ids(const graph&&) = delete;
void op_nodes(const graph&&) = delete;
void tensor_nodes(const graph&&) = delete;
template <class Pred>
void ops_where(const graph&&, Pred) = delete;
template <class Pred>
void tensors_where(const graph&&, Pred) = delete;
void ops_on_ipu(const graph&&, std::int64_t) = delete;
void ops_in_stage(const graph&&, std::int64_t) = delete;
void ops_in_phase(const graph&&, std::int64_t) = delete;
void ops_in_block(const graph&&, std::string_view) = delete;
void ops_of_type(const graph&&, std::string_view) = delete;
void consumers(const graph&&, tensor_id) = delete;
void op_inputs(const graph&&, op_id) = delete;
void op_outputs(const graph&&, op_id) = delete;
void producers(const graph&&, op_id) = delete;
void successors(const graph&&, op_id) = delete;
void tensors_of_kind(const graph&&, tensor_kind) = delete;
void weights(const graph&&) = delete;
void constants(const graph&&) = delete;
void intermediates(const graph&&) = delete;
void inputs(const graph&&) = delete;
void outputs(const graph&&) = delete;

}  // namespace ipu::views
