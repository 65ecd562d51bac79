#pragma once
// The op table's reduce family: reductions, ArgMax / ArgMin and CumSum. A row holds what the
// library knows about an op: shape rule (ops/shape_rules.hpp), cost rule (ops/cost_rules.hpp),
// flags (ops/flags.hpp) and the slot for its gradient rule; the host kernels sit beside it, in
// ipu/ops/kernels/reduce.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def reduce[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "ReduceSum", detail::infer::reduce, detail::cost_rules::reduce, {}, detail::grad::reduce_sum},
    {"", "ReduceMean", detail::infer::reduce, detail::cost_rules::reduce, {}, detail::grad::reduce_mean},
    {"", "ReduceMax", detail::infer::reduce, detail::cost_rules::reduce, {},
     detail::grad::reduce_other},
    {"", "ReduceMin", detail::infer::reduce, detail::cost_rules::reduce, {},
     detail::grad::reduce_other},
    {"", "ReduceProd", detail::infer::reduce, detail::cost_rules::reduce, {},
     detail::grad::reduce_other},
    {"", "ReduceL1", detail::infer::reduce, detail::cost_rules::reduce_with_map, {},
     detail::grad::reduce_other},
    {"", "ReduceL2", detail::infer::reduce, detail::cost_rules::reduce_with_map, {},
     detail::grad::reduce_other},
    {"", "ReduceLogSum", detail::infer::reduce, detail::cost_rules::reduce_with_map, {},
     detail::grad::reduce_other},
    {"", "ReduceLogSumExp", detail::infer::reduce, detail::cost_rules::reduce_with_map, {},
     detail::grad::reduce_other},
    {"", "ReduceSumSquare", detail::infer::reduce, detail::cost_rules::reduce_with_map, {},
     detail::grad::reduce_other},
    {"", "ArgMax", detail::infer::arg_reduce, detail::cost_rules::select_reduction, {}},
    {"", "ArgMin", detail::infer::arg_reduce, detail::cost_rules::select_reduction, {}},
    {"", "CumSum", detail::infer::cumsum, detail::cost_rules::two_op_elementwise, {},
     detail::grad::cumsum},
};

}  // namespace ipu::op_families
