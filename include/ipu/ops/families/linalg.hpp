#pragma once
// The op table's linear-algebra family: Det. A row holds what the library knows about an op: shape
// rule, cost rule, flags and the slot for its gradient rule (the family's own rules sit here, as
// only its rows use them); the host kernels sit beside it, in ipu/ops/kernels/linalg.hpp.
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/ops/op_def.hpp"

namespace ipu {

namespace detail::infer {

/// Det: [*, M, M] -> [*].
constexpr std::vector<tensor_info> det(const infer_context& c) {
  need_rank(c, 0, 2, "X [*, M, M]");
  need_float(c, 0);
  const auto& x = c.in_shape(0);
  if (x[x.rank() - 1] != x[x.rank() - 2])
    throw c.fail("X " + to_string(c.input(0)) + " is not a batch of square matrices", "give X as [*, M, M]");
  return {tensor_info{c.in_type(0), shape(dims(x.dims().begin(), x.dims().end() - 2))}};
}

}  // namespace detail::infer

namespace detail::cost_rules {

/// Det: an LU factorisation per matrix, M^3 / 3 multiply-adds with a pivot search per column;
/// each tile factors whole matrices (they are small), so the matrices are spread over the tiles.
constexpr op_cost det(const op_cost_context& c) {
  const auto& x = c.input(0);
  const auto m = dim(x, -1);
  const auto lu = std::max<std::uint64_t>(mul_sat(mul_sat(m, m), m) / 3 + mul_sat(m, m), 1);
  return vector_pass(c, c.type(x), mul_sat(c.output_elements(), lu), 1, 1);
}

}  // namespace detail::cost_rules

namespace op_families {

inline constexpr op_def linalg[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "Det", detail::infer::det, detail::cost_rules::det, {}},
};

}  // namespace op_families

}  // namespace ipu
