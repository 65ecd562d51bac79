#pragma once
// The op table's conv family: convolutions: Conv and ConvTranspose (groups, dilations, strides,
// pads), and the library's own ipu::ConvWeightsGrad, the weight gradient Conv's rule makes, and
// ipu::NchwcConv with its layout changes. A row holds what the library knows about an op: shape rule (ops/shape_rules.hpp), cost
// rule (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its gradient rule; the host
// kernels sit beside it, in ipu/ops/kernels/conv.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def conv[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "Conv", detail::infer::conv, detail::cost_rules::conv, {}, detail::grad::conv},
    {"", "ConvTranspose", detail::infer::conv_transpose, detail::cost_rules::conv_transpose, {},
     detail::grad::conv_transpose},
    {"ipu", "ConvWeightsGrad", detail::infer::conv_weights_grad, detail::cost_rules::conv_weights_grad, {}},
    // Conv with its activation (and a residual Z) applied as it writes, as ONNX Runtime's graph
    // optimizer fuses them; the fuse-conv-activation pass makes it. Inference only: no gradient.
    {"com.microsoft", "FusedConv", detail::infer::fused_conv, detail::cost_rules::fused_conv, {}},
    // FusedConv on channel-blocked data, and the reorders into and out of it, which the nchwc-layout
    // pass puts around chains of convolutions so that the host's kernels keep one layout between
    // them. Inference only: no gradient.
    {"ipu", "NchwcConv", detail::infer::nchwc_conv, detail::cost_rules::nchwc_conv, {}},
    {"ipu", "ToNchwc", detail::infer::to_nchwc, detail::cost_rules::nchwc_reorder, {}},
    {"ipu", "FromNchwc", detail::infer::from_nchwc, detail::cost_rules::nchwc_reorder, {}},
};

}  // namespace ipu::op_families
