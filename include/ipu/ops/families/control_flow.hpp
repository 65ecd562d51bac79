#pragma once
// The op table's control flow family: control flow: If, Loop and Scan run subgraphs (their cost is
// their bodies'). A row holds what the library knows about an op: shape rule (ops/shape_rules.hpp),
// cost rule (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its gradient rule; the
// host kernels sit beside it, in ipu/ops/kernels/control_flow.hpp. No shape rule for Scan, If,
// Loop: their output shapes depend on input values or subgraphs, so importers and builders give
// them explicitly.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def control_flow[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "Scan", {}, detail::cost_rules::control_flow, {}},
    {"", "If", {}, detail::cost_rules::control_flow, {}},
    {"", "Loop", {}, detail::cost_rules::control_flow, {}},
};

}  // namespace ipu::op_families
