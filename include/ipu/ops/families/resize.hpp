#pragma once
// The op table's resize family: Resize. A row holds what the library knows about an op: shape rule
// (ops/shape_rules.hpp), cost rule (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its
// gradient rule; the host kernels sit beside it, in ipu/ops/kernels/resize.hpp. No shape rule for
// Resize: its output shapes depend on input values or subgraphs, so importers and builders give
// them explicitly.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def resize[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "Resize", {}, detail::cost_rules::data_movement, {}},
};

}  // namespace ipu::op_families
