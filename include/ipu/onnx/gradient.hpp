#pragma once
// ONNX's Gradient op (domain ai.onnx.preview.training, opset 1) written out as ordinary ops. Its
// outputs are the derivatives of y with respect to each of xs, y's own gradient being all ones:
// that is the gradient of the sum of y's elements, which reverse-mode autodiff
// (ipu::train::add_gradients) adds to the graph from a scalar. The importer calls this where the
// Gradient node stands (import.hpp); nothing of the op is left for a kernel.
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/half.hpp"
#include "ipu/train/autodiff.hpp"

namespace ipu::onnx {

namespace detail {

/// Tensors depending on `from` through ops (itself included), in a graph's topological `order`.
inline std::vector<bool> depends_on(const graph& g, tensor_id from, const std::vector<op_id>& order) {
  std::vector<bool> mark(g.num_tensors(), false);
  mark[from] = true;
  for (auto id : order) {
    const auto& op = g.op(id);
    bool any = false;
    for (auto t : op.inputs) any = any || (t != no_tensor && mark[t]);
    if (any)
      for (auto t : op.outputs)
        if (t != no_tensor) mark[t] = true;
  }
  return mark;
}

inline bool is_float_type(data_type t) { return t == data_type::F16 || t == data_type::F32 || t == data_type::F64; }

}  // namespace detail

/// Adds to `g` the ops computing d sum(y) / d x for each x of `xs` and returns the tensors holding
/// them; no_tensor for an x that y does not depend on (its gradient is zero). The xs must be
/// independent of one another, as ONNX requires. `where` names the Gradient node for errors.
inline std::vector<tensor_id> add_onnx_gradient(graph& g, tensor_id y, std::span<const tensor_id> xs,
                                                const std::string& where) {
  const auto y_info = g.tensor(y).info;
  if (!detail::is_float_type(y_info.type))
    throw error(error_category::onnx, "Gradient's y '" + g.tensor(y).name + "' is " + to_string(y_info) +
                                          ", not a floating-point tensor",
                where, "differentiate a floating-point tensor");
  const auto order = topological_order(g);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const auto& x = g.tensor(xs[i]);
    if (!detail::is_float_type(x.info.type))
      throw error(error_category::onnx, "Gradient's x '" + x.name + "' is " + to_string(x.info) +
                                            ", not a floating-point tensor",
                  where, "list only floating-point tensors in xs");
    const auto down = detail::depends_on(g, xs[i], order);
    for (std::size_t j = 0; j < xs.size(); ++j)
      if (j != i && down[xs[j]])
        throw error(error_category::onnx,
                    "Gradient's xs '" + x.name + "' and '" + g.tensor(xs[j]).name +
                        "' are not independent: the second is computed from the first",
                    where, "list in xs only tensors that none of the others computes (ONNX's rule)");
  }

  // The loss: y itself when it is one value, else the sum of its elements (ReduceSum's gradient
  // broadcasts the seed's 1 back to every element of y).
  tensor_id loss = y;
  if (y_info.shape.rank() != 0) {
    op_node sum;
    sum.type = "ReduceSum";
    sum.name = "Gradient/" + g.tensor(y).name + "/sum";
    sum.inputs = {y};
    sum.attributes.push_back({"keepdims", std::int64_t{0}});
    loss = g.add_tensor(sum.name, tensor_info{y_info.type, shape{}});
    sum.outputs = {loss};
    g.add_op(std::move(sum));
  }

  std::vector<tensor_id> reachable;
  std::vector<bool> feeds_y(xs.size(), false);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    feeds_y[i] = detail::depends_on(g, xs[i], topological_order(g))[loss];
    if (feeds_y[i]) reachable.push_back(xs[i]);
  }
  std::vector<tensor_id> out(xs.size(), no_tensor);
  if (reachable.empty()) return out;
  tensor_id seed = no_tensor;  // autodiff seeds F32 and F64 losses with 1 itself
  if (y_info.type == data_type::F16) {
    const half one(1.0f);
    seed = g.add_tensor("Gradient/seed", tensor_info{data_type::F16, shape{}}, tensor_kind::constant,
                        byte_buffer::from_values(std::span<const half>(&one, 1)));
  }
  const auto grads = train::add_gradients(g, loss, reachable, seed);
  for (std::size_t i = 0, r = 0; i < xs.size(); ++i)
    if (feeds_y[i]) out[i] = grads[r++];
  return out;
}

}  // namespace ipu::onnx
