#pragma once
// The op table's einsum family: Einsum. A row holds what the library knows about an op: shape rule
// (ops/shape_rules.hpp), cost rule (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its
// gradient rule; the host kernels sit beside it, in ipu/ops/kernels/einsum.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def einsum[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "Einsum", detail::infer::einsum, detail::cost_rules::einsum, {},
     detail::grad::einsum},
};

}  // namespace ipu::op_families
