#pragma once
// A stage of an executable as a graph of its own, so the host runs it with the CPU device
// (ipu::cpu::device) — the same plan, kernels and thread chunking as running the whole model,
// hence bitwise the same results.
//
// Tensors keep their names (If/Loop bodies find enclosing tensors by name). What the stage's ops
// read but do not produce becomes a graph input, except weights and constants, which stay
// weights sharing the model's bytes — unless the caller asks for them as inputs (weights that
// live in Streaming Memory and are brought on chip by transfers).
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/captures.hpp"
#include "ipu/graph/graph.hpp"

namespace ipu {

struct stage_graph {
  graph model;                     // the stage's ops as a standalone graph
  std::vector<tensor_id> inputs;   // the model's id of each input of `model`, in input order
  std::vector<tensor_id> outputs;  // the model's id of each output of `model`, in output order
  std::vector<op_id> ops;          // the model's id of each op of `model`
};

/// The ops `ops` of `g` (in execution order) as a graph. `outputs` lists tensors produced by those
/// ops that must leave the stage, in the order the stage graph returns them; `weights_as_inputs`
/// lists weights or constants to take as inputs instead of reading `g`'s bytes. `owner` keeps
/// `g`'s weight bytes alive for as long as the stage graph shares them.
inline stage_graph extract_stage(const graph& g, std::span<const op_id> ops, std::span<const tensor_id> outputs,
                                 std::span<const tensor_id> weights_as_inputs,
                                 const std::shared_ptr<const void>& owner, std::string_view name) {
  const auto nt = g.num_tensors();
  std::vector<bool> in_stage(g.num_ops(), false), produced(nt, false), as_input(nt, false);
  for (auto o : ops) {
    if (o >= g.num_ops())
      throw error(error_category::schedule, "op id " + std::to_string(o) + " does not exist", "stage '" + std::string(name) + "'");
    if (in_stage[o])
      throw error(error_category::schedule, "op " + graph::describe(g.op(o)) + " is listed twice",
                  "stage '" + std::string(name) + "'", "list each op of a stage once");
    in_stage[o] = true;
    for (auto t : g.op(o).outputs) produced[t] = true;
  }
  for (auto t : weights_as_inputs) as_input[t] = true;

  stage_graph s;
  s.model = graph(name);
  s.model.set_opset_imports(g.opset_imports());
  std::vector<tensor_id> local(nt, no_tensor);

  // Inputs and weights first, in order of first use, so the stage's input order is stable.
  auto need = [&](tensor_id t) {
    if (t == no_tensor || produced[t] || local[t] != no_tensor) return;
    const auto& node = g.tensor(t);
    if (node.has_data() && !as_input[t]) {
      // Share the model's bytes (no copy): the stage graph lives no longer than `owner`.
      const auto& d = node.data;
      local[t] = s.model.add_tensor(node.name, node.info, node.kind,
                                    d.size() ? byte_buffer::share(owner, d.data(), d.size()) : byte_buffer{});
    } else {
      local[t] = s.model.add_tensor(node.name, node.info, tensor_kind::input);
      s.inputs.push_back(t);
    }
  };
  for (auto o : ops) {
    for (auto t : g.op(o).inputs) need(t);
    for (auto t : implicit_inputs(g, g.op(o))) need(t);
  }
  for (auto o : ops)
    for (auto t : g.op(o).outputs) local[t] = s.model.add_tensor(g.tensor(t).name, g.tensor(t).info);
  for (auto o : ops) {
    op_node copy = g.op(o);
    for (auto& t : copy.inputs)
      if (t != no_tensor) t = local[t];
    for (auto& t : copy.outputs) t = local[t];
    s.model.add_op(std::move(copy));
    s.ops.push_back(o);
  }
  for (auto t : outputs) {
    if (t >= nt || !produced[t])
      throw error(error_category::internal,
                  "tensor " + (t < nt ? "'" + g.tensor(t).name + "'" : std::to_string(t)) + " is not produced by the stage",
                  "stage '" + std::string(name) + "'");
    s.model.mark_output(local[t]);
    s.outputs.push_back(t);
  }
  return s;
}

}  // namespace ipu
