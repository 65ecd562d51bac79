#pragma once
// The op table's recurrent family: recurrent layers: LSTM, GRU, RNN. A row holds what the library
// knows about an op: shape rule (ops/shape_rules.hpp), cost rule (ops/cost_rules.hpp), flags
// (ops/flags.hpp) and the slot for its gradient rule; the host kernels sit beside it, in
// ipu/ops/kernels/recurrent.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def recurrent[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "RNN", detail::infer::recurrent, detail::cost_rules::recurrent, {}},
    {"", "GRU", detail::infer::recurrent, detail::cost_rules::recurrent, {}},
    {"", "LSTM", detail::infer::recurrent, detail::cost_rules::recurrent, {}},
};

}  // namespace ipu::op_families
