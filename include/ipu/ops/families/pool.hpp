#pragma once
// The op table's pool family: pooling: max, average, Lp and their global forms, and MaxUnpool. A
// row holds what the library knows about an op: shape rule (ops/shape_rules.hpp, or beside the
// rows for MaxUnpool's), cost rule (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for
// its gradient rule; the host kernels sit beside it, in ipu/ops/kernels/pool.hpp.
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/ops/op_def.hpp"

namespace ipu {

namespace detail::infer {

/// MaxUnpool: the output_shape input when given (it must then be a constant for the shape to be
/// known here), else the shape MaxPool's input had: (in - 1) * stride - pads + kernel per axis.
constexpr std::vector<tensor_info> max_unpool(const infer_context& c) {
  need_rank(c, 0, 3, "X [N, C, D1, ..., Dr]");
  const auto& x = c.in_shape(0);
  const auto spatial = x.rank() - 2;
  if (c.has_input(2)) {
    if (c.in_type(2) != data_type::S64)
      throw c.fail("output_shape is " + to_string(c.input(2)) + ", the specification takes INT64",
                   "give output_shape as an INT64 tensor");
    const auto given = c.int_values(2, "output_shape");
    if (given.size() != x.rank())
      throw c.fail("output_shape " + list(given) + " does not have X's rank " + std::to_string(x.rank()),
                   "give one size per axis of X");
    return {tensor_info{c.in_type(0), shape(dims(given.begin(), given.end()))}};
  }
  if (!c.has_attr("kernel_shape")) throw c.fail("attribute kernel_shape is required", "set kernel_shape");
  const auto kernel = c.attr_ints("kernel_shape");
  const auto strides = c.attr_ints("strides", std::vector<std::int64_t>(spatial, 1));
  const auto pads = c.attr_ints("pads", std::vector<std::int64_t>(2 * spatial, 0));
  if (kernel.size() != spatial || strides.size() != spatial || pads.size() != 2 * spatial)
    throw c.fail("kernel_shape " + list(kernel) + ", strides " + list(strides) + " and pads " + list(pads) +
                     " do not match X's " + std::to_string(spatial) + " spatial axes",
                 "give one kernel size and stride and two pads per spatial axis");
  dims out{x[0], x[1]};
  for (std::size_t i = 0; i < spatial; ++i) {
    std::int64_t d = 0;
    if (kernel[i] < 1 || strides[i] < 1 || pads[i] < 0 || pads[i + spatial] < 0 || x[i + 2] < 1 ||
        __builtin_mul_overflow(x[i + 2] - 1, strides[i], &d) || __builtin_add_overflow(d, kernel[i], &d) ||
        __builtin_sub_overflow(d, pads[i], &d) || __builtin_sub_overflow(d, pads[i + spatial], &d) || d < 1)
      throw c.fail("kernel_shape " + list(kernel) + ", strides " + list(strides) + " and pads " + list(pads) +
                       " give no valid output size for X " + to_string(c.input(0)),
                   "give positive kernel sizes and strides and non-negative pads that leave each axis a size");
    out.push_back(d);
  }
  return {tensor_info{c.in_type(0), shape(std::move(out))}};
}

}  // namespace detail::infer

namespace op_families {

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
    // MaxPool and AveragePool on channel-blocked data (ops/kernels/nchwc.hpp's layout), which the
    // nchwc-layout pass makes of the pools between blocked convolutions. Inference only: no gradient.
    {"ipu", "NchwcMaxPool", detail::infer::nchwc_pool, detail::cost_rules::nchwc_pooling, {}},
    {"ipu", "NchwcAveragePool", detail::infer::nchwc_pool, detail::cost_rules::nchwc_pooling, {}},
    // A scatter of X into zeros: moving the output.
    {"", "MaxUnpool", detail::infer::max_unpool, detail::cost_rules::data_movement, {}},
};

}  // namespace op_families

}  // namespace ipu
