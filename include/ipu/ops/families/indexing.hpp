#pragma once
// The op table's indexing family: gathers, scatters, Compress, Unique and NonZero. A row holds
// what the library knows about an op: shape rule (ops/shape_rules.hpp), cost rule
// (ops/cost_rules.hpp, or beside the rows for this family's own), flags (ops/flags.hpp) and the
// slot for its gradient rule; the host kernels sit beside it, in ipu/ops/kernels/indexing.hpp. No shape rule for Compress, Unique or NonZero: their output
// shapes depend on input values, so importers and builders give them explicitly.
#include <bit>
#include <cstdint>

#include "ipu/ops/op_def.hpp"

namespace ipu {

namespace detail::cost_rules {

/// Unique: a sort of the input (log2 n compare-and-select passes), a pass marking where values
/// change, then moving the outputs.
constexpr op_cost unique(const op_cost_context& c) {
  const auto n = c.input_elements(0);
  const auto passes = static_cast<std::uint32_t>(std::bit_width(n)) + 1;
  op_cost r = vector_pass(c, c.type(c.input(0)), n, 1, 2 * passes);
  r += data_movement(c);
  return r;
}

/// NonZero: a compare per element and a prefix count of the hits, then moving the indices.
constexpr op_cost non_zero(const op_cost_context& c) {
  op_cost r = vector_pass(c, c.type(c.input(0)), c.input_elements(0), 1, 2);
  r += data_movement(c);
  return r;
}

}  // namespace detail::cost_rules

namespace op_families {

inline constexpr op_def indexing[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "Gather", detail::infer::gather, detail::cost_rules::data_movement, string_op, detail::grad::gather},
    {"", "GatherElements", detail::infer::gather_elements, detail::cost_rules::data_movement, {},
     detail::grad::gather_elements},
    {"", "GatherND", detail::infer::gather_nd, detail::cost_rules::data_movement, {}},
    {"", "ScatterElements", detail::infer::unary, detail::cost_rules::data_movement, {}},
    {"", "ScatterND", detail::infer::unary, detail::cost_rules::data_movement, {}},
    {"", "Compress", {}, detail::cost_rules::data_movement, {}},
    {"", "Unique", {}, detail::cost_rules::unique, {}},
    {"", "NonZero", {}, detail::cost_rules::non_zero, {}},
};

}  // namespace op_families

}  // namespace ipu
