#pragma once
// The op table's conv family: convolutions: Conv and ConvTranspose (groups, dilations, strides,
// pads), and the library's own ipu::ConvWeightsGrad, the weight gradient Conv's rule makes. A row holds what the library knows about an op: shape rule (ops/shape_rules.hpp), cost
// rule (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its gradient rule; the host
// kernels sit beside it, in ipu/ops/kernels/conv.hpp.
// ai.graphcore FusedConv(X, W[, B][, Z]) is a Conv whose output has Z added and then an activation
// applied: `activation` is "" (none), Relu, LeakyRelu (activation_params {alpha}), Clip ({min,
// max}), Sigmoid or Swish. The fuse-conv-activation pass makes it (passes/fuse_conv_activation.hpp).
// It has no gradient rule: the pass runs on inference graphs.
#include <string>
#include <vector>

#include "ipu/ops/op_def.hpp"

namespace ipu {
namespace detail::infer {

constexpr std::vector<tensor_info> fused_conv(const infer_context& c) {
  auto out = conv(c);
  const auto act = c.attr_string("activation", "");
  const auto params = c.attr_floats("activation_params");
  std::size_t want = 0;
  if (act == "LeakyRelu") want = 1;
  else if (act == "Clip") want = 2;
  else if (!act.empty() && act != "Relu" && act != "Sigmoid" && act != "Swish")
    throw c.fail("activation '" + act + "' is not one FusedConv applies", "give \"\", Relu, LeakyRelu, Clip, Sigmoid or Swish");
  if (params.size() != want)
    throw c.fail("activation " + act + " takes " + std::to_string(want) + " activation_params, not " +
                     std::to_string(params.size()),
                 "give LeakyRelu {alpha}, Clip {min, max}, and none for the others");
  if (c.has_input(3) && c.input(3) != out[0])
    throw c.fail("the residual Z is " + to_string(c.input(3)) + " but the convolution gives " + to_string(out[0]),
                 "give Z of the output's type and shape");
  return out;
}

}  // namespace detail::infer

namespace detail::cost_rules {
/// The convolution, plus one vector pass over its output for the residual add and activation
/// (fused on an IPU too: poplin's convolution leaves its partials on the tiles that add them).
constexpr op_cost fused_conv(const op_cost_context& c) {
  op_cost r = conv(c);
  const auto act = c.string_attr("activation");
  const std::uint32_t ops = (c.has_input(3) ? 1u : 0u) + (act.empty() ? 0u : act == "Sigmoid" || act == "Swish" ? 4u : 1u);
  if (ops > 0) r += vector_pass(c, c.type(c.output()), c.output_elements(), c.has_input(3) ? 2 : 1, ops);
  return r;
}
}  // namespace detail::cost_rules

namespace op_families {

inline constexpr op_def conv[] = {
    // domain, type, shape rule, cost rule, flags[, gradient rule]
    {"", "Conv", detail::infer::conv, detail::cost_rules::conv, {}, detail::grad::conv},
    {"", "ConvTranspose", detail::infer::conv_transpose, detail::cost_rules::conv_transpose, {},
     detail::grad::conv_transpose},
    {"ipu", "ConvWeightsGrad", detail::infer::conv_weights_grad, detail::cost_rules::conv_weights_grad, {}},
    {"ai.graphcore", "FusedConv", detail::infer::fused_conv, detail::cost_rules::fused_conv, {}},
};

}  // namespace op_families
}  // namespace ipu
