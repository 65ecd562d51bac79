#pragma once
// Reverse-mode automatic differentiation in the graph IR: from a scalar loss, the backward graph is
// added to the same graph as ordinary ops (each op's gradient rule is in its row of the op table,
// ipu/ops/gradient_rules.hpp), so planning, costing and execution treat it like any other op.
//
// Before anything is added, every op on a path from a weight to the loss is checked for a gradient
// rule: a model that cannot be trained fails with one error naming every such op.
#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/format.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/ops/gradient_rules.hpp"
#include "ipu/ops/infer.hpp"
#include "ipu/ops/op_table.hpp"

namespace ipu::train {

namespace detail {

constexpr bool is_float(data_type t) noexcept {
  return t == data_type::F32 || t == data_type::F16 || t == data_type::F64;
}

constexpr std::vector<tensor_info> infer_new_op(const graph& g, const op_node& n) { return infer_outputs(g, n); }

/// Floating-point tensors that depend on any of `sources` through ops (the sources included).
/// Integer and boolean results (shapes, indices, masks) carry no gradient, so the ops computing
/// them need no gradient rule.
constexpr std::vector<bool> downstream_of(const graph& g, std::span<const tensor_id> sources,
                                          const std::vector<op_id>& order) {
  std::vector<bool> mark(g.num_tensors(), false);
  for (auto s : sources) mark[s] = true;
  for (auto id : order) {
    const auto& op = g.op(id);
    bool any = false;
    for (auto t : op.inputs) any = any || (t != no_tensor && mark[t]);
    if (any)
      for (auto t : op.outputs)
        if (t != no_tensor && is_float(g.tensor(t).info.type)) mark[t] = true;
  }
  return mark;
}

/// Tensors `target` depends on (itself included).
constexpr std::vector<bool> upstream_of(const graph& g, tensor_id target, const std::vector<op_id>& order) {
  std::vector<bool> mark(g.num_tensors(), false);
  mark[target] = true;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto& op = g.op(*it);
    bool any = false;
    for (auto t : op.outputs) any = any || (t != no_tensor && mark[t]);
    if (any)
      for (auto t : op.inputs)
        if (t != no_tensor) mark[t] = true;
  }
  return mark;
}

}  // namespace detail

/// For each of `weights`, the tensor holding d loss / d weight, or no_tensor for a weight the loss
/// does not depend on (its optimizer leaves it unchanged, as PyTorch's does for a parameter without
/// a gradient). `seed` is the loss's own gradient (no_tensor: 1; the loss scale when scaling).
constexpr std::vector<tensor_id> add_gradients(graph& g, tensor_id loss, std::span<const tensor_id> weights,
                                               tensor_id seed = no_tensor) {
  const std::string where = "autodiff of graph '" + g.name() + "'";
  if (loss >= g.num_tensors()) throw error(error_category::usage, "the loss tensor does not exist", where);
  const auto loss_info = g.tensor(loss).info;
  if (loss_info.shape.num_elements() != 1 || loss_info.shape.rank() > 1)
    throw error(error_category::usage,
                "the loss '" + g.tensor(loss).name + "' is not a scalar: " + to_string(loss_info), where,
                "reduce it to one value (mean or sum), e.g. with identity_loss");
  if (!detail::is_float(loss_info.type))
    throw error(error_category::usage, "the loss '" + g.tensor(loss).name + "' is " + to_string(loss_info) +
                                           ", not a floating-point value",
                where);
  const auto order = topological_order(g);
  const auto from_weight = detail::downstream_of(g, weights, order);
  const auto to_loss = detail::upstream_of(g, loss, order);

  bool reachable = false;
  for (auto w : weights) reachable = reachable || to_loss[w];
  if (!reachable)
    throw error(error_category::usage, "the loss '" + g.tensor(loss).name + "' depends on none of the " +
                                           format_uint(weights.size()) + " trainable weights",
                where, "compute the loss from the model's outputs");

  // The ops gradients flow through: an input from a weight and an output the loss depends on.
  std::vector<op_id> path;
  std::string missing;
  for (auto id : order) {
    const auto& op = g.op(id);
    bool in = false, out = false;
    for (auto t : op.inputs) in = in || (t != no_tensor && from_weight[t]);
    for (auto t : op.outputs) out = out || (t != no_tensor && to_loss[t] && from_weight[t]);
    if (!in || !out) continue;
    path.push_back(id);
    const auto row = op_def_index(op.domain, op.type);
    if (row == no_op_def || !op_row_at(row).gradient) {
      if (!missing.empty()) missing += ", ";
      missing += graph::describe(op);
    }
  }
  if (!missing.empty())
    throw error(error_category::usage, "no gradient rule for the ops between the weights and the loss: " + missing,
                where, "replace these ops, or freeze the weights that reach the loss through them");

  // grads[t]: the gradient of tensor t accumulated so far.
  std::vector<tensor_id> grads(g.num_tensors(), no_tensor);
  if (seed == no_tensor) {
    byte_buffer data;
    if (loss_info.type == data_type::F64) {
      const double one = 1;
      data = byte_buffer::from_values(std::span<const double>(&one, 1));
    } else if (loss_info.type == data_type::F32) {
      const float one = 1;
      data = byte_buffer::from_values(std::span<const float>(&one, 1));
    } else {
      throw error(error_category::usage, "the loss '" + g.tensor(loss).name + "' is " + to_string(loss_info), where,
                  "compute the loss in F32 (cast it), or pass a seed of the loss's type");
    }
    seed = g.add_tensor("grad/seed", loss_info, tensor_kind::constant, std::move(data));
  }
  grads[loss] = seed;

  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const op_node op = g.op(*it);
    std::vector<tensor_id> out_grads;
    bool any = false;
    for (auto t : op.outputs) {
      out_grads.push_back(t == no_tensor ? no_tensor : grads[t]);
      any = any || (t != no_tensor && grads[t] != no_tensor);
    }
    if (!any) continue;
    std::vector<bool> wanted;
    for (auto t : op.inputs) wanted.push_back(t != no_tensor && from_weight[t] && detail::is_float(g.tensor(t).info.type));
    gradient_context ctx(g, *it, std::move(out_grads), std::move(wanted), detail::infer_new_op,
                         "grad/" + format_uint(*it) + "/");
    op_row_at(op_def_index(op.domain, op.type)).gradient.fn(ctx);
    const auto& in_grads = ctx.input_grads();
    grads.resize(g.num_tensors(), no_tensor);
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      const auto t = op.inputs[i];
      const auto dt = in_grads[i];
      if (t == no_tensor || dt == no_tensor) continue;
      if (g.tensor(dt).info != g.tensor(t).info)
        throw error(error_category::internal,
                    "the gradient of '" + g.tensor(t).name + "' is " + to_string(g.tensor(dt).info) + ", not " +
                        to_string(g.tensor(t).info),
                    "gradient rule of op " + graph::describe(op));
      if (grads[t] == no_tensor) {
        grads[t] = dt;
      } else {
        // A tensor read by several ops: its gradients add up.
        op_node sum;
        sum.type = "Add";
        sum.name = "grad/sum" + format_uint(g.num_ops());
        sum.inputs = {grads[t], dt};
        sum.where = op.where;
        const auto out = g.add_tensor(sum.name, g.tensor(t).info);
        sum.outputs = {out};
        g.add_op(std::move(sum));
        grads.resize(g.num_tensors(), no_tensor);
        grads[t] = out;
      }
    }
  }
  std::vector<tensor_id> result;
  for (auto w : weights) result.push_back(grads[w]);
  return result;
}

}  // namespace ipu::train
