#pragma once
// The training step as one graph: the model, its loss, the backward graph (autodiff) and the
// optimizer's updates, all ordinary ops. Weights and optimizer state are graph inputs whose
// updated values are graph outputs, so one run of the graph is one weight update; the session
// (ipu/train/session.hpp) feeds each step's outputs back as the next step's inputs.
//
// Trained: every floating-point weight of the model but the frozen ones and BatchNormalization's
// running statistics (buffers, as PyTorch calls them).
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/train/autodiff.hpp"
#include "ipu/train/loss.hpp"
#include "ipu/train/optimizer.hpp"

namespace ipu::train {

struct training_options {
  std::string output;  // the model output the loss applies to; empty: the model's only output
  loss_options loss{};
  optimizer opt = sgd{};
  std::vector<std::string> frozen;  // weights left as they are
};

struct trained_weight {
  std::string name;     // the graph input holding the weight (its name in the model)
  std::string updated;  // the graph output holding it after the step
  tensor_info info;
  byte_buffer initial;  // the model's value
};

struct training_graph {
  graph step;                              // one weight update
  std::vector<std::string> model_inputs;   // the model's own inputs
  std::vector<std::string> model_outputs;  // the model's outputs (the step's first outputs)
  std::string prediction;                  // the output the loss applies to
  std::string labels;                      // the labels input
  std::string loss;                        // the scalar loss output
  std::vector<trained_weight> weights;     // in the model's order
  std::vector<state_slot> state;           // optimizer state, zero before the first step
  optimizer_structure structure;
};

namespace detail {
/// Weights of `g` read as BatchNormalization's running mean or variance: buffers, not trained.
constexpr std::vector<bool> running_statistics(const graph& g) {
  std::vector<bool> r(g.num_tensors(), false);
  for (const auto& op : g.ops())
    if (op.type == "BatchNormalization" && (op.domain.empty() || op.domain == "ai.onnx"))
      for (std::size_t i = 3; i < 5 && i < op.inputs.size(); ++i)
        if (op.inputs[i] != no_tensor) r[op.inputs[i]] = true;
  return r;
}
}  // namespace detail

/// Builds the training step of `model`.
constexpr training_graph make_training_graph(const graph& model, const training_options& o) {
  const std::string where = "training graph of '" + model.name() + "'";
  check(o.opt);
  for (const auto& op : model.ops())
    if (op.where != annotation{})
      throw error(error_category::usage, "op " + graph::describe(op) + " carries an IPU, stage or phase annotation",
                  where, "train an unannotated model: placed training (pipelined, phased) is not built yet");
  for (const auto& f : o.frozen)
    if (!model.find_tensor(f) || model.tensor(*model.find_tensor(f)).kind != tensor_kind::variable)
      throw error(error_category::usage, "frozen weight '" + f + "' is not a weight of the model", where,
                  "name weights as the model does");

  training_graph r;
  // The output the loss applies to.
  if (model.outputs().empty()) throw error(error_category::usage, "the model has no outputs", where);
  tensor_id prediction = no_tensor;
  for (auto t : model.outputs()) {
    r.model_outputs.push_back(model.tensor(t).name);
    if (model.tensor(t).name == o.output) prediction = t;
  }
  if (o.output.empty()) {
    if (model.outputs().size() != 1) {
      std::string names;
      for (const auto& n : r.model_outputs) names += (names.empty() ? "" : ", ") + n;
      throw error(error_category::usage, "the model has " + format_uint(model.outputs().size()) + " outputs", where,
                  "name the one the loss applies to: " + names);
    }
    prediction = model.outputs().front();
  }
  if (prediction == no_tensor) {
    std::string names;
    for (const auto& n : r.model_outputs) names += (names.empty() ? "" : ", ") + n;
    throw error(error_category::usage, "the model has no output named '" + o.output + "'", where,
                "the outputs are: " + names);
  }
  r.prediction = model.tensor(prediction).name;
  for (auto t : model.inputs()) r.model_inputs.push_back(model.tensor(t).name);

  // The model again, its trainable weights turned into inputs (same tensor and op ids).
  const auto buffers = detail::running_statistics(model);
  graph g(model.name());
  std::vector<tensor_id> weights;
  for (tensor_id t = 0; t < model.num_tensors(); ++t) {
    const auto& n = model.tensor(t);
    const bool trained = n.kind == tensor_kind::variable && detail::is_float(n.info.type) && !buffers[t] &&
                         std::find(o.frozen.begin(), o.frozen.end(), n.name) == o.frozen.end();
    if (trained) {
      g.add_tensor(n.name, n.info, tensor_kind::input);
      weights.push_back(t);
      r.weights.push_back({n.name, {}, n.info, n.data});
    } else {
      g.add_tensor(n.name, n.info, n.kind, n.data);
    }
  }
  if (weights.empty()) throw error(error_category::usage, "the model has no trainable weights", where);
  for (const auto& op : model.ops()) g.add_op(op);
  for (auto t : model.outputs()) g.mark_output(t);
  g.set_opset_imports(model.opset_imports());

  // The loss.
  builder lb(std::move(g));
  auto lo = o.loss;
  if (lb.current().find_tensor(lo.labels_name))
    throw error(error_category::usage, "the model already has a tensor named '" + lo.labels_name + "'", where,
                "name the labels input otherwise (loss_options::labels_name)");
  const auto lt = add_loss(lb, prediction, lo);
  r.labels = lb.name_of(lt.labels);
  r.loss = lb.name_of(lt.loss);
  lb.add_output(lt.loss);
  g = std::move(lb).build();

  // The backward graph, then the updates.
  const auto grads = add_gradients(g, lt.loss, weights);
  builder ub(std::move(g));
  std::vector<tensor_id> updated;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (grads[i] == no_tensor) continue;  // the loss does not depend on it: left unchanged, as PyTorch does
    auto u = add_update(ub, o.opt, weights[i], grads[i]);
    r.weights[i].updated = ub.name_of(u.new_weight);
    updated.push_back(u.new_weight);
    for (auto& s : u.state) r.state.push_back(std::move(s));
  }
  for (auto t : updated) ub.add_output(t);
  for (const auto& s : r.state) ub.add_output(*ub.current().find_tensor(s.output));
  r.step = std::move(ub).build();
  r.structure = structure_of(o.opt);
  return r;
}

}  // namespace ipu::train
