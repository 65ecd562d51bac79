#pragma once
// The op table's pool family: pooling: max, average, Lp and their global forms. A row holds what
// the library knows about an op: shape rule (ops/shape_rules.hpp), cost rule (ops/cost_rules.hpp),
// flags (ops/flags.hpp) and the slot for its gradient rule; the host kernels sit beside it, in
// ipu/ops/kernels/pool.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def pool[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "MaxPool", detail::infer::max_pool, detail::cost_rules::pooling, {}, detail::grad::max_pool},
    {"", "AveragePool", detail::infer::average_pool, detail::cost_rules::pooling, {},
     detail::grad::average_pool},
    {"", "LpPool", detail::infer::average_pool, detail::cost_rules::pooling, {}},
    {"", "GlobalMaxPool", detail::infer::global_pool, detail::cost_rules::global_pool, {},
     detail::grad::global_max_pool},
    {"", "GlobalAveragePool", detail::infer::global_pool, detail::cost_rules::global_pool, {},
     detail::grad::global_average_pool},
    {"", "GlobalLpPool", detail::infer::global_pool, detail::cost_rules::global_pool, {}},
};

}  // namespace ipu::op_families
