#pragma once
// The op table's linear-algebra family: Det. A row holds what the library knows about an op: shape
// rule, cost rule, flags and the slot for its gradient rule (the family's own rules sit here, as
// only its rows use them); the host kernels sit beside it, in ipu/ops/kernels/linalg.hpp.
#include <algorithm>
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

/// Det: an LU factorisation per matrix, M^3 / 3 multiply-adds with a pivot search per column. A
/// factorisation is a chain of dependent column steps, so it is not split: each tile factors whole
/// matrices, ceil(batch / tiles) of them one after another, on min(batch, tiles) tiles.
constexpr op_cost det(const op_cost_context& c) {
  const auto& x = c.input(0);
  const auto batch = c.output_elements();
  op_cost r;
  if (batch == 0) return r;
  const auto m = dim(x, -1);
  const auto lu = std::max<std::uint64_t>(mul_sat(mul_sat(m, m), m) / 3 + mul_sat(m, m), 1);
  const auto used = std::min<std::uint64_t>(batch, c.tiles());
  r.compute_cycles = vector_tile_cycles(c.arch(), c.type(x), mul_sat(ceil_div(batch, used), lu), 1, 1);
  r.sync_cycles = sync(c);
  r.tiles = static_cast<std::uint32_t>(used);
  return r;
}

}  // namespace detail::cost_rules

namespace op_families {

inline constexpr op_def linalg[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "Det", detail::infer::det, detail::cost_rules::det, {}},
};

}  // namespace op_families

}  // namespace ipu
