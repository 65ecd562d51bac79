#pragma once
// Shape and type inference, usable in constant expressions: `infer_outputs` applies an op's shape
// rule (its row of the op table, ops/op_table.hpp; the rules are in ops/shape_rules.hpp) to one op,
// `infer_shapes` to every op of a graph in topological order.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/known_values.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/ops/op_table.hpp"
#include "ipu/ops/plan_annotations.hpp"
#include "ipu/ops/shape_rules.hpp"
#include "ipu/tensor_info.hpp"

namespace ipu {

/// The inference rule for an op type, or nullptr when the library has none.
// Rows are found by index: a pointer's comparison with null is not a constant expression under the
// sanitizers' -fno-delete-null-pointer-checks.
constexpr infer_fn find_shape_inference(std::string_view domain, std::string_view type) noexcept {
  const auto i = op_def_index(domain, type);
  return i != no_op_def && op_row_at(i).shape ? op_row_at(i).shape.fn : nullptr;
}

constexpr bool has_shape_inference(std::string_view domain, std::string_view type) noexcept {
  const auto i = op_def_index(domain, type);
  return i != no_op_def && op_row_at(i).shape;
}

/// The infos of the first `num_outputs` outputs of `op`, given its inputs (op.inputs is ignored).
constexpr std::vector<tensor_info> infer_outputs(const op_node& op, std::span<const infer_input> inputs,
                                                 std::size_t num_outputs) {
  const auto row = op_def_index(op.domain, op.type);
  if (row == no_op_def || !op_row_at(row).shape)
    throw error(error_category::graph,
                "no shape inference for op type '" + op.type + "'" +
                    (op.domain.empty() ? std::string() : " in domain '" + op.domain + "'"),
                "op " + graph::describe(op), "give the output infos explicitly");
  check_plan_annotations(op);
  const infer_context ctx(op, inputs, num_outputs);
  auto out = op_row_at(row).shape.fn(ctx);
  if (out.size() < num_outputs)
    throw ctx.fail(std::to_string(num_outputs) + " outputs requested but the op has at most " +
                   std::to_string(out.size()));
  out.resize(num_outputs);
  return out;
}


/// The infos of `op`'s outputs, reading its inputs (and any constant contents) from `g`.
constexpr std::vector<tensor_info> infer_outputs(const graph& g, const op_node& op) {
  std::vector<infer_input> in;
  in.reserve(op.inputs.size());
  for (auto t : op.inputs) {
    if (t == no_tensor) in.push_back({});
    else in.push_back({&g.tensor(t).info, known_data(g, t)});
  }
  return infer_outputs(op, in, op.outputs.size());
}

/// Checks that every op's outputs carry the infos its shape rule computes from its inputs. A graph
/// read from a file holds claims: kernels size their loops from their inputs and their buffers
/// from the outputs' infos, so a claim the rule refutes (ONNX's inference does not check
/// ConvInteger's channels, say) is refused here, naming the op, before anything runs. Ops without
/// a rule, and ops whose rule needs the contents of an input computed at run time, are not checked.
constexpr void check_shape_rules(const graph& g, const std::string& where) {
  std::vector<infer_input> in;
  for (const auto& op : g.ops()) {
    check_string_operands(g, op, where);
    try {
      check_plan_annotations(op);
    } catch (const error& e) {
      throw error(e.category(), e.message(), where + ": " + e.location(), e.hint());
    }
    const auto row = op_def_index(op.domain, op.type);
    if (row == no_op_def || !op_row_at(row).shape) continue;
    in.clear();
    for (auto t : op.inputs) {
      if (t == no_tensor) in.push_back({});
      else in.push_back({&g.tensor(t).info, known_data(g, t)});
    }
    const infer_context ctx(op, in, op.outputs.size());
    std::vector<tensor_info> computed;
    try {
      computed = op_row_at(row).shape.fn(ctx);
    } catch (const error& e) {
      if (ctx.needed_unknown_value()) continue;
      throw error(error_category::shape, "op " + graph::describe(op) + " cannot run on the inputs it is given: " + e.message(),
                  where, "the model's shapes are inconsistent: fix the op's inputs or attributes, or re-export the model");
    }
    for (std::size_t i = 0; i < op.outputs.size() && i < computed.size(); ++i) {
      if (op.outputs[i] == no_tensor) continue;
      const auto& held = g.tensor(op.outputs[i]);
      if (held.info != computed[i])
        throw error(error_category::shape,
                    "output '" + held.name + "' of op " + graph::describe(op) + " is declared " + to_string(held.info) +
                        " but the op computes " + to_string(computed[i]),
                    where, "the model's declared shapes are wrong: correct or delete them, or re-export the model");
    }
  }
}

/// Recomputes the info of every op output in `g`, in topological order. Ops without an
/// inference rule keep the infos their outputs already have. Returns how many ops were inferred.
constexpr std::size_t infer_shapes(graph& g) {
  std::size_t n = 0;
  for (auto id : topological_order(g)) {
    const auto& op = g.op(id);
    if (!has_shape_inference(op.domain, op.type)) continue;
    auto infos = infer_outputs(g, op);
    for (std::size_t i = 0; i < infos.size(); ++i)
      if (op.outputs[i] != no_tensor) g.tensor(op.outputs[i]).info = std::move(infos[i]);
    ++n;
  }
  return n;
}

}  // namespace ipu
