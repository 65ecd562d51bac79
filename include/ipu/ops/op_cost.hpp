#pragma once
// What an op costs on one IPU for one micro-batch: estimate_op_cost applies the op's cost rule
// (its row of the op table, ops/op_table.hpp; the rules and the model behind them are in
// ops/cost_rules.hpp), after the user's hook when there is one. Usable in constant expressions.
#include <string_view>

#include "ipu/device/device_model.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/ops/cost_rules.hpp"
#include "ipu/ops/op_table.hpp"

namespace ipu {

/// The cost rule of (domain, type), or nullptr when the op table has no row for it.
constexpr op_cost_fn find_op_cost(std::string_view domain, std::string_view type) noexcept {
  const auto i = op_def_index(domain, type);
  return i == no_op_def ? nullptr : op_row_at(i).cost.fn;
}

/// The predicted cost of op `id` of `g` on one IPU of `d` for one micro-batch (the graph's shapes).
/// `hook`, when given, is asked first. Throws ipu::error (device) for a device without cost figures
/// (the host).
constexpr op_cost estimate_op_cost(const graph& g, op_id id, const device_description& d,
                                   const op_cost_options& o = {}, op_cost_hook hook = nullptr) {
  ipu::require_ipu_figures(d.arch, "estimate_op_cost");
  const op_cost_context c{&g, &g.op(id), &d, o, estimate_op_cost};
  if (hook)
    if (auto r = hook(c)) return *r;
  // Looked up by index: a function's address is not compared with null in constant expressions
  // under -fno-delete-null-pointer-checks (which the sanitizers imply).
  const auto i = op_def_index(c.op->domain, c.op->type);
  if (i != no_op_def && op_row_at(i).cost) return op_row_at(i).cost.fn(c);
  return detail::cost_rules::generic(c);
}

}  // namespace ipu
