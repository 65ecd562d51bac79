#pragma once
// Per-channel arithmetic on channel-blocked data (ops/kernels/nchwc.hpp's layout), so the ops
// that scale each channel no longer end a blocked group with a reorder on each side:
//  - ipu::NchwcBatchNormalization(X, scale, B, input_mean, input_var): inference
//    BatchNormalization, as DenseNet puts one before each of its convolutions (pre-activation);
//  - ipu::NchwcScale(X, S): X times S [N or 1, C, 1, 1], one factor per image and channel, as
//    squeeze-and-excitation rescales EfficientNet's and RegNet's channels.
// Each computes what the plain op does, to the bit: BatchNormalization's per-channel a = scale /
// sqrt(var + epsilon) and b = B - mean * a in double, then X * a + b in the compute type; Mul's
// X * S. The unused channels of the last block get factor 0 (and no shift), so they stay zero.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ipu/ops/kernels/nchwc.hpp"
#include "ipu/ops/kernels/norm.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/kernels/vector_isa.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

/// Blocks [u0, u1) of (image, channel block) of blocked X [.., plane, B] into Y: each pixel's B
/// channels times factor[lanes] (plus shift[lanes] when Shift), the lanes of unit u at
/// (per_image ? u : u % blocks) * B.
template <bool Shift, std::int64_t B, class T>
void nchwc_affine_blocks(const T* x, T* y, std::size_t u0, std::size_t u1, std::int64_t blocks, std::int64_t plane,
                         const float* factor, const float* shift, bool per_image) {
  using F = typename nchwc_lanes<B>::f;
  static_assert(std::is_same_v<compute_t<T>, float>, "ipu: blocked channel ops compute in float lanes");
  for (auto u = static_cast<std::int64_t>(u0); u < static_cast<std::int64_t>(u1); ++u) {
    const std::int64_t lanes = (per_image ? u : u % blocks) * B;
    F a, b;
    std::memcpy(&a, factor + lanes, sizeof a);
    if constexpr (Shift) std::memcpy(&b, shift + lanes, sizeof b);
    const T* xu = x + u * plane * B;
    T* yu = y + u * plane * B;
    for (std::int64_t p = 0; p < plane; ++p) {
      F e;
      if constexpr (std::is_same_v<T, float>) std::memcpy(&e, xu + p * B, sizeof e);
      else
        for (std::int64_t l = 0; l < B; ++l) e[l] = widen(xu[p * B + l]);
      F r = e * a;
      if constexpr (Shift) r = r + b;
      if constexpr (std::is_same_v<T, float>) std::memcpy(yu + p * B, &r, sizeof r);
      else
        for (std::int64_t l = 0; l < B; ++l) yu[p * B + l] = narrow<T>(r[l]);
    }
  }
}

/// Y = X * factor (+ shift) over blocked X, factor and shift holding (per_image ? N : 1) * Cp lanes.
template <bool Shift>
void nchwc_affine(const kernel_context& ctx, const tensor_view& y, const const_tensor_view& x, std::int64_t block,
                  const std::vector<float>& factor, const std::vector<float>& shift, bool per_image) {
  const shape& s = x.info().shape;
  const std::int64_t blocks = s[1] / block, plane = s[2] * s[3];
  if (s.num_elements() == 0) return;
  visit(nchwc_types, x.info().type, ctx, [&]<class T>() {
    const T* in = x.as<T>().data();
    T* out = y.as<T>().data();
    vectorised_blocks(ctx, static_cast<std::size_t>(s[0] * blocks),
                      static_cast<std::size_t>(std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(plane * block, 1))),
                      [&](std::size_t u0, std::size_t u1) {
                        if (block == 8)
                          nchwc_affine_blocks<Shift, 8>(in, out, u0, u1, blocks, plane, factor.data(), shift.data(), per_image);
                        else
                          nchwc_affine_blocks<Shift, 16>(in, out, u0, u1, blocks, plane, factor.data(), shift.data(),
                                                         per_image);
                      });
  });
}

/// X checked as blocked data of `channels` channels, and Y of X's type and shape.
inline tensor_view nchwc_same_as_x(const kernel_context& ctx, const tensor_info& x, std::int64_t block,
                                   std::int64_t channels) {
  expect_nchwc_data(ctx, x);
  if (channels < 1 || nchwc_padded_channels(channels, block) != x.shape[1])
    throw ctx.fail("blocked X " + to_string(x) + " does not hold the " + std::to_string(channels) +
                       " channels of the other inputs in blocks of " + std::to_string(block),
                   "give one value per channel X had before ToNchwc");
  const auto y = output(ctx, 0);
  if (y.info() != x)
    throw ctx.fail("output " + to_string(y.info()) + " is not of blocked X's type and shape " + to_string(x),
                   "fix the output in the model");
  return y;
}

/// ipu::NchwcBatchNormalization(X, scale, B, input_mean, input_var), attribute epsilon.
inline void nchwc_batch_norm_kernel(const kernel_context& ctx) {
  tensor_ops::only_attributes(ctx, {"block", "epsilon"});
  const auto block = nchwc_block_of(ctx);
  const auto xv = ctx.input(0);
  const auto xi = xv.info();
  const auto c = ctx.input(1).info().num_elements();
  const auto y = nchwc_same_as_x(ctx, xi, block, c);
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const auto scale = channel_param(ctx, 1, c, "scale");
  const auto bias = channel_param(ctx, 2, c, "B");
  const auto mean = channel_param(ctx, 3, c, "input_mean");
  const auto var = channel_param(ctx, 4, c, "input_var");
  std::vector<float> a(static_cast<std::size_t>(xi.shape[1]), 0.0f), b(a.size(), 0.0f);
  for (std::size_t i = 0; i < static_cast<std::size_t>(c); ++i) {
    // BatchNormalization's own factors (ops/kernels/norm.hpp), rounded to the compute type as it does.
    const double ai = scale[i] / std::sqrt(var[i] + eps);
    a[i] = static_cast<float>(ai);
    b[i] = static_cast<float>(bias[i] - mean[i] * ai);
  }
  nchwc_affine<true>(ctx, y, xv, block, a, b, false);
}

/// ipu::NchwcScale(X, S): blocked X times S [N or 1, C, 1, 1], S in NCHW.
inline void nchwc_scale_kernel(const kernel_context& ctx) {
  tensor_ops::only_attributes(ctx, {"block"});
  const auto block = nchwc_block_of(ctx);
  const auto xv = ctx.input(0);
  const auto sv = ctx.input(1);
  const auto xi = xv.info();
  const auto si = sv.info();
  const shape& ss = si.shape;
  expect_nchwc_data(ctx, xi);
  if (si.type != xi.type || ss.rank() != 4 || (ss[0] != 1 && ss[0] != xi.shape[0]) || ss[2] != 1 || ss[3] != 1)
    throw ctx.fail("S " + to_string(si) + " is not one factor per image (or one for all) and channel of X " +
                       to_string(xi),
                   "give S [N or 1, C, 1, 1] of X's type");
  const auto y = nchwc_same_as_x(ctx, xi, block, ss[1]);
  const std::int64_t images = ss[0], cp = xi.shape[1];
  std::vector<float> a(static_cast<std::size_t>(images * cp), 0.0f);
  visit(nchwc_types, si.type, ctx, [&]<class T>() {
    const T* s = sv.as<T>().data();
    for (std::int64_t n = 0; n < images; ++n)
      for (std::int64_t ch = 0; ch < ss[1]; ++ch) a[static_cast<std::size_t>(n * cp + ch)] = widen(s[n * ss[1] + ch]);
  });
  nchwc_affine<false>(ctx, y, xv, block, a, {}, images > 1);
}

inline void register_nchwc_channel_kernels(op_registry& r) {
  r.add({"ipu", "NchwcBatchNormalization", &nchwc_batch_norm_kernel, true});
  r.add({"ipu", "NchwcScale", &nchwc_scale_kernel, true});
}

}  // namespace ipu::detail::math_ops
