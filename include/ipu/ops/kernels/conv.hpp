#pragma once
// Conv and ConvTranspose over 1-D, 2-D and 3-D spatial data. Conv picks its algorithm by shape:
// depthwise convolutions run as a direct loop, 1x1 convolutions as one GEMM per group, kernels
// longer than the output (Conv's weight gradient) as a GEMM over kernel positions, and the rest as
// im2col + GEMM over blocks of output columns (bounded scratch, parallel over batch x group x block).
// ConvTranspose is GEMM + col2im. F16 is widened to F32 and rounded once at the end. The library's
// ipu::ConvWeightsGrad (a Conv's weight gradient, from its dY and X) is im2col + GEMM per group.
// F32 1-D / 2-D Conv and ConvTranspose run on oneDNN instead (ops/kernels/conv_dnnl.hpp, dnnl_conv);
// these kernels stay for other types, 3-D, what oneDNN refuses, and as the reference the tests
// compare with (F64 runs them).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ipu/ops/fused_activation.hpp"
#include "ipu/ops/kernels/blas.hpp"
#include "ipu/ops/kernels/conv_dnnl.hpp"
#include "ipu/ops/kernels/fast_math.hpp"
#include "ipu/ops/kernels/gemm.hpp"
#include "ipu/ops/kernels/numeric.hpp"
#include "ipu/ops/kernels/vector_isa.hpp"
#include "ipu/ops/kernels/window.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

/// Kernel spatial shape: the kernel_shape attribute, or W's trailing dimensions.
inline std::vector<std::int64_t> kernel_shape_of(const kernel_context& ctx, const shape& w) {
  std::vector<std::int64_t> from_w(w.begin() + 2, w.end());
  auto k = ctx.attr_ints("kernel_shape", from_w);
  if (k != from_w)
    throw ctx.fail("kernel_shape " + to_string(shape(k)) + " does not match the weights " + to_string(w),
                   "make kernel_shape equal W's spatial dimensions");
  return k;
}

/// Whether `g`'s output sizes are what its input, kernel, strides, dilations and pads make.
inline bool window_output_matches(const window_geometry& g) {
  for (std::size_t d = 0; d < window_geometry::max_rank; ++d) {
    const std::int64_t span = g.in[d] + g.pad_begin[d] + g.pad_end[d] - g.extent(d);
    if (g.out[d] != (span < 0 ? 0 : span / g.stride[d] + 1)) return false;
  }
  return true;
}

/// Writes rows [c0, c0 + cols) of the im2col matrix for one group: row (c, kd, kh, kw), column =
/// output position. `x` points at the group's first input channel.
template <class C>
void im2col(const C* x, std::int64_t channels, const window_geometry& g, std::int64_t c0, std::int64_t cols, C* col) {
  const std::int64_t oh_ow = g.out[1] * g.out[2];
  C* dst = col;
  for (std::int64_t c = 0; c < channels; ++c) {
    const C* xc = x + c * g.in_size();
    for (std::int64_t kd = 0; kd < g.kernel[0]; ++kd)
      for (std::int64_t kh = 0; kh < g.kernel[1]; ++kh)
        for (std::int64_t kw = 0; kw < g.kernel[2]; ++kw) {
          const auto [wlo, whi] = g.valid_range(2, kw);
          const std::int64_t wbase = kw * g.dilation[2] - g.pad_begin[2];
          for (std::int64_t j = c0; j < c0 + cols;) {
            const std::int64_t od = j / oh_ow, oh = (j % oh_ow) / g.out[2], ow = j % g.out[2];
            const std::int64_t seg = std::min(g.out[2] - ow, c0 + cols - j);
            C* d = dst + (j - c0);
            const std::int64_t id = od * g.stride[0] + kd * g.dilation[0] - g.pad_begin[0];
            const std::int64_t ih = oh * g.stride[1] + kh * g.dilation[1] - g.pad_begin[1];
            if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
              std::fill(d, d + seg, C{0});
            } else {
              const C* row = xc + (id * g.in[1] + ih) * g.in[2];
              const std::int64_t lo = std::clamp(wlo, ow, ow + seg), hi = std::clamp(whi, lo, ow + seg);
              std::fill(d, d + (lo - ow), C{0});
              if (g.stride[2] == 1) {
                std::copy(row + lo + wbase, row + hi + wbase, d + (lo - ow));
              } else {
                for (std::int64_t o = lo; o < hi; ++o) d[o - ow] = row[o * g.stride[2] + wbase];
              }
              std::fill(d + (hi - ow), d + seg, C{0});
            }
            j += seg;
          }
          dst += cols;
        }
  }
}

/// Depthwise convolution (one input channel per group) as a direct loop over 1-D / 2-D planes.
template <class C>
void depthwise_conv(const kernel_context& ctx, const C* x, const C* w, const C* bias, C* y, std::int64_t batch,
                    std::int64_t in_channels, std::int64_t out_channels, const window_geometry& g) {
  const std::int64_t multiplier = out_channels / in_channels;
  const std::int64_t planes = batch * out_channels;
  const std::int64_t kh_n = g.kernel[1], kw_n = g.kernel[2];
  // Taps per plane, divided out one factor at a time: their product need not fit an int64.
  const std::int64_t grain = std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(g.out_size(), 1) / g.kernel_size());
  // Valid output ranges per kernel column do not depend on the row: compute them once.
  std::vector<std::array<std::int64_t, 3>> columns;  // lo, hi, input offset
  for (std::int64_t kw = 0; kw < kw_n; ++kw) {
    const auto [lo, hi] = g.valid_range(2, kw);
    columns.push_back({lo, hi, kw * g.dilation[2] - g.pad_begin[2]});
  }
  const std::int64_t sw = g.stride[2];
  parallel_blocks(ctx, static_cast<std::size_t>(planes), static_cast<std::size_t>(grain),
                  [&](std::size_t p0, std::size_t p1) {
                    for (auto p = static_cast<std::int64_t>(p0); p < static_cast<std::int64_t>(p1); ++p) {
                      const std::int64_t n = p / out_channels, oc = p % out_channels;
                      const C* xp = x + (n * in_channels + oc / multiplier) * g.in_size();
                      const C* wp = w + oc * kh_n * kw_n;
                      C* yp = y + p * g.out_size();
                      std::fill(yp, yp + g.out_size(), bias ? bias[oc] : C{0});
                      for (std::int64_t oh = 0; oh < g.out[1]; ++oh) {
                        C* yrow = yp + oh * g.out[2];
                        for (std::int64_t kh = 0; kh < kh_n; ++kh) {
                          const std::int64_t ih = oh * g.stride[1] + kh * g.dilation[1] - g.pad_begin[1];
                          if (ih < 0 || ih >= g.in[1]) continue;
                          const C* xrow = xp + ih * g.in[2];
                          for (std::int64_t kw = 0; kw < kw_n; ++kw) {
                            const C wv = wp[kh * kw_n + kw];
                            const auto [lo, hi, base] = columns[static_cast<std::size_t>(kw)];
                            const C* xs = xrow + base;
                            if (sw == 1) {
                              for (std::int64_t o = lo; o < hi; ++o) yrow[o] += wv * xs[o];
                            } else if (sw == 2) {
                              for (std::int64_t o = lo; o < hi; ++o) yrow[o] += wv * xs[2 * o];
                            } else {
                              for (std::int64_t o = lo; o < hi; ++o) yrow[o] += wv * xs[o * sw];
                            }
                          }
                        }
                      }
                    }
                  });
}

/// Conv whose kernel covers more positions than its output, as Conv's weight gradient is (the rule
/// writes it as a Conv of X by dY with batch and channels swapped: a 56x56 "kernel", a 3x3 output).
/// The im2col GEMM would have an output only s_out columns wide and an inner dimension of channels x
/// kernel positions, gathered in runs of a few values. Instead exchange the roles of taps and output
/// positions: per input channel c, row (b, o) of col holds x[b, c, o * stride + k * dilation - pad]
/// over taps k (im2col with kernel / output and stride / dilation exchanged, in runs of a kernel
/// row), and Y[m, (b, o)] += W[m, c, :] x col^T: a GEMM as wide as a block of batch x s_out with the
/// kernel as its inner dimension. Parallel over blocks of batch; a block sums every channel itself.
template <class C>
void conv_small_output(const kernel_context& ctx, const C* x, const C* w, const C* bias, C* y, std::int64_t batch,
                       std::int64_t in_channels, std::int64_t out_channels, const window_geometry& g) {
  window_geometry t = g;
  t.kernel = g.out;
  t.out = g.kernel;
  t.stride = g.dilation;
  t.dilation = g.stride;
  const std::int64_t s_out = g.out_size(), ks = g.kernel_size(), s_in = g.in_size();
  // Batch rows per block: the col scratch near 4 MiB of floats.
  const std::int64_t rows_per_b = s_out * ks;
  const std::int64_t nb =
      std::clamp<std::int64_t>((std::int64_t{1} << 20) / std::max<std::int64_t>(rows_per_b, 1), 1, batch);
  const std::int64_t blocks = (batch + nb - 1) / nb;
  const double unit_flops =
      2.0 * static_cast<double>(out_channels * in_channels) * static_cast<double>(nb * rows_per_b);
  const auto grain = static_cast<std::size_t>(std::max(1.0, 2.0e6 / std::max(unit_flops, 1.0)));
  parallel_blocks(ctx, static_cast<std::size_t>(blocks), grain, [&](std::size_t u0, std::size_t u1) {
    for (auto u = static_cast<std::int64_t>(u0); u < static_cast<std::int64_t>(u1); ++u) {
      const std::int64_t b0 = u * nb, b1 = std::min(batch, b0 + nb), cols = (b1 - b0) * s_out;
      auto col = scratch<C, 3>(static_cast<std::size_t>((b1 - b0) * rows_per_b));
      auto acc = scratch<C, 4>(static_cast<std::size_t>(out_channels * cols));  // [M, (b, o)]
      if (in_channels == 0) std::fill(acc.begin(), acc.end(), C{0});
      for (std::int64_t c = 0; c < in_channels; ++c) {
        for (std::int64_t b = b0; b < b1; ++b)
          im2col(x + (b * in_channels + c) * s_in, 1, t, 0, ks, col.data() + (b - b0) * rows_per_b);
        gemm<C>(false, true, out_channels, cols, ks, C{1}, w + c * ks, in_channels * ks, col.data(), ks,
                c == 0 ? C{0} : C{1}, acc.data(), cols);
      }
      for (std::int64_t b = b0; b < b1; ++b)
        for (std::int64_t m = 0; m < out_channels; ++m) {
          const C* src = acc.data() + m * cols + (b - b0) * s_out;
          C* dst = y + (b * out_channels + m) * s_out;
          const C add = bias ? bias[m] : C{0};
          for (std::int64_t o = 0; o < s_out; ++o) dst[o] = src[o] + add;
        }
    }
  });
}

/// Conv as im2col + GEMM over blocks of output columns, or for 1x1 kernels one GEMM on X itself.
template <class C>
void conv_im2col(const kernel_context& ctx, const C* x, const C* w, const C* bias, C* y, std::int64_t batch,
                 std::int64_t in_channels, std::int64_t out_channels, std::int64_t group, const window_geometry& g) {
  const std::int64_t cg = in_channels / group, mg = out_channels / group;
  const std::int64_t s_out = g.out_size(), s_in = g.in_size();
  const bool pointwise = g.kernel_size() == 1 && g.stride == decltype(g.stride){1, 1, 1} &&
                         g.pad_begin == decltype(g.pad_begin){0, 0, 0} && g.pad_end == decltype(g.pad_end){0, 0, 0};
  const std::int64_t kg = cg * g.kernel_size();  // GEMM inner dimension
  // Column blocks keep the im2col scratch near 512 KiB and give the pool work to share.
  const std::int64_t block =
      std::clamp<std::int64_t>(((std::int64_t{1} << 17) / std::max<std::int64_t>(kg, 1) + 15) / 16 * 16,
                               std::min<std::int64_t>(128, std::max<std::int64_t>(s_out, 1)),
                               std::max<std::int64_t>(s_out, 1));
  const std::int64_t blocks = (s_out + block - 1) / block;
  const std::int64_t units = batch * group * blocks;
  const double unit_flops = 2.0 * static_cast<double>(mg) * static_cast<double>(kg) * static_cast<double>(block);
  const auto grain = static_cast<std::size_t>(std::max(1.0, 2.0e6 / std::max(unit_flops, 1.0)));
  parallel_blocks(ctx, static_cast<std::size_t>(units), grain, [&](std::size_t u0, std::size_t u1) {
    for (auto u = static_cast<std::int64_t>(u0); u < static_cast<std::int64_t>(u1); ++u) {
      const std::int64_t n = u / (group * blocks), gi = (u / blocks) % group, bi = u % blocks;
      const std::int64_t c0 = bi * block, cols = std::min(block, s_out - c0);
      C* yb = y + (n * out_channels + gi * mg) * s_out + c0;
      for (std::int64_t m = 0; m < mg; ++m) std::fill(yb + m * s_out, yb + m * s_out + cols, bias ? bias[gi * mg + m] : C{0});
      const C* xg = x + (n * in_channels + gi * cg) * s_in;
      const C* wg = w + gi * mg * kg;
      const C beta = bias ? C{1} : C{0};
      if (pointwise) {
        gemm<C>(false, false, mg, cols, kg, C{1}, wg, kg, xg + c0, s_in, beta, yb, s_out);
      } else {
        auto col = scratch<C, 1>(static_cast<std::size_t>(kg * cols));
        im2col(xg, cg, g, c0, cols, col.data());
        gemm<C>(false, false, mg, cols, kg, C{1}, wg, kg, col.data(), cols, beta, yb, s_out);
      }
    }
  });
}

/// Conv in the compute type C (float or double) on contiguous NC[D]HW data.
template <class C>
void conv_compute(const kernel_context& ctx, const C* x, const C* w, const C* bias, C* y, std::int64_t batch,
                  std::int64_t in_channels, std::int64_t out_channels, std::int64_t group, const window_geometry& g) {
  if (group == 1 && g.kernel_size() > g.out_size() && g.kernel_size() >= 32) {
    // A kernel longer than the output and long enough to be a GEMM's inner dimension (also for a
    // single input channel: the weight gradient of a batch of one).
    conv_small_output(ctx, x, w, bias, y, batch, in_channels, out_channels, g);
  } else if (in_channels == group && g.in[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.pad_begin[0] == 0) {
    depthwise_conv(ctx, x, w, bias, y, batch, in_channels, out_channels, g);
  } else {
    conv_im2col(ctx, x, w, bias, y, batch, in_channels, out_channels, group, g);
  }
}

// --- FusedConv's activation ------------------------------------------------------------------
/// The activation com.microsoft FusedConv applies to the convolution's output (after adding its
/// optional input Z), as ONNX Runtime's graph optimizer writes it and the fuse-conv-activation pass
/// makes it (the names: ops/fused_activation.hpp). Each computes what the standalone op's kernel
/// computes on F32, bit for bit.
using conv_activation_kind = fused_activation_kind;

struct conv_activation {
  conv_activation_kind kind = conv_activation_kind::none;
  float alpha = 0, beta = 0;  // Clip: min, max; LeakyRelu: alpha; HardSigmoid: alpha, beta
  const float* z = nullptr;   // Z, of the output's shape, added before the activation; may be null

  [[nodiscard]] bool empty() const noexcept { return kind == conv_activation_kind::none && z == nullptr; }
};

/// y[i] = activation(y[i] + z[i]) for the `n` outputs from `offset` on: one pass while they are
/// still in cache.
inline void apply_conv_activation(const conv_activation& a, float* y, std::size_t offset, std::size_t n) {
  y += offset;
  if (a.z)
    for (std::size_t i = 0; i < n; ++i) y[i] += a.z[offset + i];
  const float lo = a.alpha, hi = a.beta;
  switch (a.kind) {
    case conv_activation_kind::none: break;
    case conv_activation_kind::relu:
      for (std::size_t i = 0; i < n; ++i) y[i] = y[i] < 0.0f ? 0.0f : y[i];
      break;
    case conv_activation_kind::clip:
      for (std::size_t i = 0; i < n; ++i) y[i] = y[i] < lo ? lo : (y[i] > hi ? hi : y[i]);
      break;
    case conv_activation_kind::leaky_relu:
      for (std::size_t i = 0; i < n; ++i) y[i] = y[i] < 0.0f ? a.alpha * y[i] : y[i];
      break;
    case conv_activation_kind::hard_sigmoid:
      for (std::size_t i = 0; i < n; ++i) y[i] = std::clamp(a.alpha * y[i] + a.beta, 0.0f, 1.0f);
      break;
    case conv_activation_kind::sigmoid:
      for (std::size_t i = 0; i < n; ++i) y[i] = sigmoid_vectorisable(y[i]);
      break;
    case conv_activation_kind::tanh:
      for (std::size_t i = 0; i < n; ++i) y[i] = tanh_vectorisable(y[i]);
      break;
  }
}

/// FusedConv's `activation` and `activation_params`, and its Z input (F32's; an F16 Z is left to
/// the caller), checked.
inline conv_activation conv_activation_of(const kernel_context& ctx) {
  conv_activation a;
  if (ctx.has_input(3)) {
    expect_type(ctx, 3, ctx.input(0).info().type);
    if (ctx.input(3).info().shape != ctx.outputs[0].info().shape)
      throw ctx.fail("Z " + to_string(ctx.input(3).info()) + " is not of the output's shape " +
                         to_string(ctx.outputs[0].info()),
                     "give Z the convolution's output shape");
    if (ctx.input(3).info().type == data_type::F32) a.z = ctx.input(3).as<float>().data();  // F16: conv_with widens it
  }
  const auto name = ctx.attr_string("activation");
  const auto params = ctx.attr_floats("activation_params");
  const auto known = find_fused_activation(name);
  if (!known)
    throw ctx.fail("activation '" + name + "' is not one FusedConv applies", std::string(fused_activation_names_help));
  if (params.size() != known->params)
    throw ctx.fail("activation '" + name + "' takes " + std::to_string(known->params) + " activation_params, not " +
                       std::to_string(params.size()),
                   std::string(fused_activation_params_help));
  a.kind = known->kind;
  if (!params.empty()) a.alpha = params[0];
  if (params.size() > 1) a.beta = params[1];
  return a;
}

/// F32 Conv on oneDNN; false when oneDNN does not take it. A kernel longer than the output (the
/// shape of Conv's weight gradient in the gradient rule: X^T [C, N, in] by dY^T [M, N, out]) runs as
/// oneDNN's backward_weights of the convolution it differentiates: that Conv's stride is this one's
/// dilation and the reverse, its kernel this one's output, and its end pads what makes the shapes
/// agree (the taps they add or drop read only padding). On ResNet-18's weight-gradient shapes (batch
/// 8, one thread) convolution_forward ran them 1-2x slower than conv_small_output, backward_weights
/// 1.3-2.3x faster.
inline bool dnnl_conv(const kernel_context& ctx, const window_geometry& g, std::int64_t n, std::int64_t c,
                      std::int64_t m, std::int64_t group, const conv_activation& act) {
  const auto x = ctx.input(0).as<float>().data(), w = ctx.input(1).as<float>().data();
  const float* bias = ctx.has_input(2) ? ctx.input(2).as<float>().data() : nullptr;
  float* y = ctx.outputs[0].as<float>().data();
  dnnl_conv_shape s;
  if (!dnnl_conv_shape_of(g, s)) return false;
  if (group == 1 && g.kernel_size() > g.out_size() && g.kernel_size() >= 32) {
    if (bias || !act.empty()) return false;
    dnnl_conv_shape b;
    b.kind = dnnl_conv_kind::backward_weights;
    b.n = c;
    b.ic = n;
    b.oc = m;
    b.ih = s.ih;
    b.iw = s.iw;
    b.oh = s.kh;
    b.ow = s.kw;
    b.kh = s.oh;
    b.kw = s.ow;
    b.sh = s.dh;
    b.sw = s.dw;
    b.dh = s.sh;
    b.dw = s.sw;
    b.pt = s.pt;
    b.pl = s.pl;
    b.pb = (b.oh - 1) * b.sh + (b.kh - 1) * b.dh + 1 - b.ih - b.pt;
    b.pr = (b.ow - 1) * b.sw + (b.kw - 1) * b.dw + 1 - b.iw - b.pl;
    return dnnl_conv_run(ctx, b, w, x, nullptr, y, false);
  }
  s.n = n;
  s.ic = c;
  s.oc = m;
  s.group = group;
  if (act.empty()) return dnnl_conv_run(ctx, s, x, w, bias, y, ctx.input_is_constant(1));
  const auto per_image = static_cast<std::size_t>(m * g.out_size());
  return dnnl_conv_run(ctx, s, x, w, bias, y, ctx.input_is_constant(1), 0, [&](std::int64_t first, std::int64_t count) {
    run_on(host_vector_isa(), [&] {
      apply_conv_activation(act, y, static_cast<std::size_t>(first) * per_image, static_cast<std::size_t>(count) * per_image);
    });
  });
}

/// F32 pointwise convolution (1x1 kernel, stride 1, no padding, one group): per image one GEMM
/// Y[m, hw] = W[m, c] X[c, hw] straight on the NCHW data, the bias written first and accumulated
/// into. oneDNN's convolution reorders X into its blocked layout and Y back on every call, which
/// on these shapes cost more than the arithmetic (bench_kernels conv/mobilenet_pointwise_1x1, one
/// thread: 1.60 ms through oneDNN's convolution, see benchmarks/README.md for the GEMM's).
/// Work is shared out per image and, for small batches, per block of output channels; each output
/// element is one GEMM row's dot product, whatever the split. (Splitting a unit's columns to keep
/// the bias, the product and FusedConv's activation in cache lost more in OpenBLAS than it saved:
/// MobileNetV2's pointwise convolutions 26.7 -> 28.9 ms, one thread.)
inline bool pointwise_conv(const kernel_context& ctx, const window_geometry& g, std::int64_t n, std::int64_t c,
                           std::int64_t m, std::int64_t group, const conv_activation& act) {
  for (std::size_t d = 0; d < window_geometry::max_rank; ++d)
    if (g.kernel[d] != 1 || g.stride[d] != 1 || g.pad_begin[d] != 0 || g.pad_end[d] != 0) return false;
  if (group != 1 || g.in_size() != g.out_size()) return false;
  const float* x = ctx.input(0).as<float>().data();
  const float* w = ctx.input(1).as<float>().data();
  const float* bias = ctx.has_input(2) ? ctx.input(2).as<float>().data() : nullptr;
  float* y = ctx.outputs[0].as<float>().data();
  const std::int64_t hw = g.out_size();
  // Enough units for a few threads even at batch 1, none thinner than 16 output channels.
  const std::int64_t parts = std::max<std::int64_t>(1, std::min(ceil_div(std::int64_t{4}, n), m / 16));
  const std::int64_t rows = ceil_div(m, parts);
  ctx.parallel_for(static_cast<std::size_t>(n * parts), [&](std::size_t u0, std::size_t u1) {
    for (auto u = static_cast<std::int64_t>(u0); u < static_cast<std::int64_t>(u1); ++u) {
      const std::int64_t img = u / parts, r0 = (u % parts) * rows, r1 = std::min(m, r0 + rows);
      if (r0 >= r1) continue;
      float* yu = y + (img * m + r0) * hw;
      for (std::int64_t r = r0; r < r1; ++r) std::fill(yu + (r - r0) * hw, yu + (r - r0 + 1) * hw, bias ? bias[r] : 0.0f);
      gemm<float>(false, false, r1 - r0, hw, c, 1.0f, w + r0 * c, c, x + img * c * hw, hw, 1.0f, yu, hw);
      if (!act.empty())
        run_on(host_vector_isa(), [&] {
          apply_conv_activation(act, y, static_cast<std::size_t>((img * m + r0) * hw), static_cast<std::size_t>((r1 - r0) * hw));
        });
    }
  });
  return true;
}

/// One output plane of a K x K depthwise convolution from a zero-padded input plane: each output
/// element is its bias plus the taps in row-major order, summed in a register. With K fixed, the
/// compiler unrolls the taps and vectorises along the output row. Stride 1 reads `xp`, rows of
/// `pw` columns; stride 2 reads the padded plane's even and odd columns split into two planes
/// (`xp` and `xp + ph * pw`, rows of `pw` columns each), so that every tap reads consecutive
/// elements.
template <int K, int SW>
void depthwise_plane(const float* xp, std::int64_t ph, std::int64_t pw, const float* w, float bias, float* y,
                     std::int64_t oh, std::int64_t ow, std::int64_t sh) {
  float wk[K * K];  // a local copy: stores to y cannot alias it, so it stays in registers
  for (int i = 0; i < K * K; ++i) wk[i] = w[i];
  for (std::int64_t o = 0; o < oh; ++o) {
    const float* x0 = xp + o * sh * pw;
    const float* x1 = SW == 2 ? x0 + ph * pw : nullptr;
    float* yr = y + o * ow;
    for (std::int64_t q = 0; q < ow; ++q) {
      float acc = bias;
      for (int a = 0; a < K; ++a)
        for (int b = 0; b < K; ++b) {
          if constexpr (SW == 1) acc += wk[a * K + b] * x0[a * pw + q + b];
          else acc += wk[a * K + b] * (b % 2 == 0 ? x0[a * pw + q + b / 2] : x1[a * pw + q + b / 2]);
        }
      yr[q] = acc;
    }
  }
}

/// Copies input plane `x` ([ih, iw]) into the zero-padded plane `out` that depthwise_plane<K, sw>
/// reads: `ph` rows from input row -pad_h, `padded_cols` columns from -pad_w; for stride 2, even
/// columns then odd columns as two planes of `pw` columns, through `line` (2 * pw floats).
inline void pad_plane(const float* x, std::int64_t ih, std::int64_t iw, std::int64_t pad_h, std::int64_t pad_w,
                      std::int64_t sw, float* out, std::int64_t ph, std::int64_t pw, std::int64_t padded_cols,
                      float* line) {
  // Input columns [c0, c1) of the padded row are read from the input; the rest are zeros.
  const std::int64_t c0 = std::min<std::int64_t>(pad_w, padded_cols), c1 = std::min<std::int64_t>(padded_cols, pad_w + iw);
  for (std::int64_t r = 0; r < ph; ++r) {
    float* even = out + r * pw;
    float* odd = sw == 2 ? even + ph * pw : nullptr;
    const std::int64_t xr = r - pad_h;
    if (xr < 0 || xr >= ih) {
      std::fill(even, even + pw, 0.0f);
      if (sw == 2) std::fill(odd, odd + pw, 0.0f);
      continue;
    }
    const float* row = x + xr * iw;  // padded column col is row[col - pad_w], for col in [c0, c1)
    // Stride 2 pads the row into `line` first, then splits it without a test per element.
    float* padded = sw == 1 ? even : line;
    std::fill(padded, padded + c0, 0.0f);
    if (c1 > c0) std::copy(row + (c0 - pad_w), row + (c1 - pad_w), padded + c0);
    std::fill(padded + c1, padded + pw * sw, 0.0f);
    if (sw == 2)
      for (std::int64_t j = 0; j < pw; ++j) {
        even[j] = line[2 * j];
        odd[j] = line[2 * j + 1];
      }
  }
}

/// Channels a depthwise_block computes at once: one AVX2 vector (two SSE2 vectors) of floats.
inline constexpr std::int64_t depthwise_lanes = 8;

/// Eight channels of a K x K depthwise convolution at once, channels innermost: `xt` is their
/// zero-padded input planes interleaved ([ph][pw][8]), `wt` their taps ([K * K][8]), `yt` receives
/// the outputs ([oh][ow][8]). Each lane adds its bias and then its taps in row-major order, as
/// depthwise_plane does, so both give the same bits; but the vector runs across channels, so a 7x7
/// or 14x14 plane (EfficientNet's and MobileNet's last stages) fills it as a 112x112 one does, where
/// vectorising along a 7-wide row wastes most of it.
template <int K>
void depthwise_block(const float* xt, std::int64_t pw, const float* wt, const float* bias, float* yt, std::int64_t oh,
                     std::int64_t ow, std::int64_t sh, std::int64_t sw) {
  constexpr std::int64_t L = depthwise_lanes;
  for (std::int64_t o = 0; o < oh; ++o)
    for (std::int64_t q = 0; q < ow; ++q) {
      float acc[L];
      for (std::int64_t l = 0; l < L; ++l) acc[l] = bias[l];
      for (int a = 0; a < K; ++a)
        for (int b = 0; b < K; ++b) {
          const float* xv = xt + ((o * sh + a) * pw + q * sw + b) * L;
          const float* wv = wt + (a * K + b) * L;
          for (std::int64_t l = 0; l < L; ++l) acc[l] += wv[l] * xv[l];
        }
      float* yv = yt + (o * ow + q) * L;
      for (std::int64_t l = 0; l < L; ++l) yv[l] = acc[l];
    }
}

/// Output planes of at most this many columns run through depthwise_block. Its interleaving costs
/// a copy of each plane in and out, which only rows shorter than a 16-float vector repay: one
/// thread, batch 4, the Conv op alone, 5x5 taps on 7x7 planes 1.53 -> 0.65 ms, on 14x14 2.02 ->
/// 1.19 ms, 3x3 taps on 7x7 0.63 -> 0.40 ms; on 28x28, 3x3 taps 0.38 -> 0.62 ms (the planes' rows
/// fill their vectors there).
inline constexpr std::int64_t depthwise_block_max_width = 15;

/// F32 depthwise 2-D convolution (one input and one output channel per group, no dilation).
/// Square 3x3, 5x5 and 7x7 kernels copy each input plane into a zero-padded scratch plane and sum
/// each output's taps in a register (depthwise_plane), or, for outputs narrower than 16 columns,
/// eight planes interleaved at a time (depthwise_block); other kernels start each output plane as its
/// bias and add one shifted, scaled copy of the input plane per tap. Either way the taps are added
/// in the same order, and the planes stay in cache. oneDNN's convolution reorders in and out of its
/// blocked layout around very little arithmetic here (bench_kernels conv/mobilenet_depthwise_3x3,
/// one thread: 4.56 ms through oneDNN; see benchmarks/README.md for this kernel's). Planes are
/// shared out whole.
inline bool depthwise_conv(const kernel_context& ctx, const window_geometry& g, std::int64_t n, std::int64_t c,
                           std::int64_t m, std::int64_t group, const conv_activation& act) {
  if (group != c || m != c || g.rank != 2 || g.dilation[1] != 1 || g.dilation[2] != 1) return false;
  const float* x = ctx.input(0).as<float>().data();
  const float* w = ctx.input(1).as<float>().data();
  const float* bias = ctx.has_input(2) ? ctx.input(2).as<float>().data() : nullptr;
  float* y = ctx.outputs[0].as<float>().data();
  const std::int64_t ih = g.in[1], iw = g.in[2], oh = g.out[1], ow = g.out[2], kh = g.kernel[1], kw = g.kernel[2];
  const std::int64_t sh = g.stride[1], sw = g.stride[2];
  if (oh <= 0 || ow <= 0) return true;  // no outputs
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, oh * ow * kh * kw));
  // The padded plane holds exactly the rows and columns the outputs read.
  const std::int64_t ph = (oh - 1) * sh + kh, padded_cols = (ow - 1) * sw + kw;
  const std::int64_t pw = sw == 1 ? padded_cols : (padded_cols + 1) / 2;
  const bool register_taps = kh == kw && (kh == 3 || kh == 5 || kh == 7) && (sw == 1 || sw == 2);
  if (register_taps && ow <= depthwise_block_max_width) {
    constexpr std::int64_t L = depthwise_lanes;
    const std::int64_t blocks_per_image = (c + L - 1) / L, cols = (ow - 1) * sw + kw;
    const std::int64_t block_grain = std::max<std::int64_t>(1, grain / L);
    vectorised_blocks(ctx, static_cast<std::size_t>(n * blocks_per_image), static_cast<std::size_t>(block_grain),
                      [&](std::size_t u0, std::size_t u1) {
      auto xt = scratch<float, 5>(static_cast<std::size_t>(ph * cols * L));
      auto yt = scratch<float, 6>(static_cast<std::size_t>(oh * ow * L));
      auto wt = scratch<float, 7>(static_cast<std::size_t>(kh * kw * L + L));
      for (auto u = static_cast<std::int64_t>(u0); u < static_cast<std::int64_t>(u1); ++u) {
        const std::int64_t img = u / blocks_per_image, c0 = (u % blocks_per_image) * L, lanes = std::min(L, c - c0);
        // Lanes past the last channel compute zeros from zero planes and are not stored.
        std::fill(xt.begin(), xt.end(), 0.0f);
        std::fill(wt.begin(), wt.end(), 0.0f);
        float* bt = wt.data() + kh * kw * L;
        for (std::int64_t l = 0; l < lanes; ++l) {
          const std::int64_t ch = c0 + l;
          const float* xp = x + (img * c + ch) * ih * iw;
          for (std::int64_t t = 0; t < kh * kw; ++t) wt[static_cast<std::size_t>(t * L + l)] = w[ch * kh * kw + t];
          bt[l] = bias ? bias[ch] : 0.0f;
          for (std::int64_t r = 0; r < ph; ++r) {
            const std::int64_t xr = r - g.pad_begin[1];
            if (xr < 0 || xr >= ih) continue;
            const std::int64_t col0 = std::max<std::int64_t>(0, g.pad_begin[2]),
                               col1 = std::min(cols, g.pad_begin[2] + iw);
            for (std::int64_t col = col0; col < col1; ++col)
              xt[static_cast<std::size_t>((r * cols + col) * L + l)] = xp[xr * iw + col - g.pad_begin[2]];
          }
        }
        const auto block = [&]<int K>() {
          depthwise_block<K>(xt.data(), cols, wt.data(), bt, yt.data(), oh, ow, sh, sw);
        };
        if (kh == 3) block.template operator()<3>();
        else if (kh == 5) block.template operator()<5>();
        else block.template operator()<7>();
        for (std::int64_t l = 0; l < lanes; ++l) {
          float* yp = y + (img * c + c0 + l) * oh * ow;
          for (std::int64_t i = 0; i < oh * ow; ++i) yp[i] = yt[static_cast<std::size_t>(i * L + l)];
        }
        if (!act.empty())
          apply_conv_activation(act, y, static_cast<std::size_t>((img * c + c0) * oh * ow), static_cast<std::size_t>(lanes * oh * ow));
      }
    });
    return true;
  }
  vectorised_blocks(ctx, static_cast<std::size_t>(n * c), static_cast<std::size_t>(grain), [&](std::size_t p0, std::size_t p1) {
    for (auto p = static_cast<std::int64_t>(p0); p < static_cast<std::int64_t>(p1); ++p) {
      const std::int64_t ch = p % c;
      const float* xp = x + p * ih * iw;
      const float* wp = w + ch * kh * kw;
      float* yp = y + p * oh * ow;
      const float b0 = bias ? bias[ch] : 0.0f;
      if (register_taps) {
        auto padded = scratch<float, 5>(static_cast<std::size_t>(ph * pw * sw));
        auto line = scratch<float, 6>(static_cast<std::size_t>(2 * pw));
        pad_plane(xp, ih, iw, g.pad_begin[1], g.pad_begin[2], sw, padded.data(), ph, pw, padded_cols, line.data());
        const auto plane = [&]<int K>() {
          if (sw == 1) depthwise_plane<K, 1>(padded.data(), ph, pw, wp, b0, yp, oh, ow, sh);
          else depthwise_plane<K, 2>(padded.data(), ph, pw, wp, b0, yp, oh, ow, sh);
        };
        if (kh == 3) plane.template operator()<3>();
        else if (kh == 5) plane.template operator()<5>();
        else plane.template operator()<7>();
        if (!act.empty()) apply_conv_activation(act, y, static_cast<std::size_t>(p * oh * ow), static_cast<std::size_t>(oh * ow));
        continue;
      }
      std::fill(yp, yp + oh * ow, b0);
      for (std::int64_t a = 0; a < kh; ++a) {
        const auto rows = g.valid_range(1, a);
        for (std::int64_t b = 0; b < kw; ++b) {
          const auto cols = g.valid_range(2, b);
          const float wv = wp[a * kw + b];
          const std::int64_t col_base = b - g.pad_begin[2];
          for (std::int64_t o = rows[0]; o < rows[1]; ++o) {
            const float* xr = xp + (o * sh + a - g.pad_begin[1]) * iw + col_base;
            float* yr = yp + o * ow;
            if (sw == 1)
              for (std::int64_t q = cols[0]; q < cols[1]; ++q) yr[q] += wv * xr[q];
            else
              for (std::int64_t q = cols[0]; q < cols[1]; ++q) yr[q] += wv * xr[q * sw];
          }
        }
      }
      if (!act.empty()) apply_conv_activation(act, y, static_cast<std::size_t>(p * oh * ow), static_cast<std::size_t>(oh * ow));
    }
  });
  return true;
}

/// Conv, or FusedConv's convolution followed by `act` (F32 or F16, which fused_conv_kernel checks).
inline void conv_with(const kernel_context& ctx, const conv_activation& act) {
  const auto x = ctx.input(0);
  const auto w = ctx.input(1);
  expect_type(ctx, 1, x.info().type);
  const auto y = output(ctx, 0);
  const shape& sx = x.info().shape;
  const shape& sw = w.info().shape;
  const shape& sy = y.info().shape;
  if (sw.rank() != sx.rank())
    throw ctx.fail("weights " + to_string(sw) + " and input " + to_string(sx) + " differ in rank",
                   "give W as [M, C/group, kernel...]");
  const std::int64_t group = ctx.attr_int("group", 1);
  const std::int64_t n = sx[0], c = sx[1], m = sw[0];
  if (group < 1 || c % group != 0 || m % group != 0 || sw[1] * group != c)
    throw ctx.fail("group " + std::to_string(group) + " does not fit input channels " + std::to_string(c) +
                       ", weights " + to_string(sw),
                   "W must be [M, C/group, ...] with C and M divisible by group");
  const auto g = make_window_geometry(ctx, sx, sy, kernel_shape_of(ctx, sw));
  if (!window_output_matches(g))
    throw ctx.fail("output " + to_string(sy) + " does not match the input, kernel, strides, dilations and pads",
                   "fix the output shape in the model");
  if (sy[0] != n || sy[1] != m) throw ctx.fail("output " + to_string(sy) + " should be [" + std::to_string(n) + ", " + std::to_string(m) + ", ...]", "fix the output shape in the model");
  if (ctx.has_input(2)) {
    expect_type(ctx, 2, x.info().type);
    if (ctx.input(2).info().num_elements() != m)
      throw ctx.fail("bias has " + std::to_string(ctx.input(2).info().num_elements()) + " values for " +
                         std::to_string(m) + " output channels",
                     "give one bias per output channel");
  }
  if (sy.num_elements() == 0) return;
  if (x.info().type == data_type::F32 &&
      (pointwise_conv(ctx, g, n, c, m, group, act) || depthwise_conv(ctx, g, n, c, m, group, act) ||
       dnnl_conv(ctx, g, n, c, m, group, act)))
    return;
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    const widened<T> wx(x.as<T>()), ww(w.as<T>());
    std::vector<compute_t<T>> bias;
    if (ctx.has_input(2))
      for (const T v : ctx.input(2).as<T>()) bias.push_back(widen(v));
    widened_output<T> out(y.as<T>());
    conv_compute(ctx, wx.data(), ww.data(), bias.empty() ? nullptr : bias.data(), out.data(), n, c, m, group, g);
    if constexpr (std::is_same_v<compute_t<T>, float>) {
      // F16 applies the activation before its one rounding, on the widened Z (which act does not
      // hold: a Z with no activation leaves act empty).
      if (!act.empty() || ctx.has_input(3)) {
        conv_activation a = act;
        std::vector<float> z;
        if (ctx.has_input(3) && !a.z) {
          for (const T v : ctx.input(3).as<T>()) z.push_back(widen(v));
          a.z = z.data();
        }
        apply_conv_activation(a, out.data(), 0, static_cast<std::size_t>(sy.num_elements()));
      }
    }
    out.finish();
  });
}

inline void conv_kernel(const kernel_context& ctx) { conv_with(ctx, {}); }

/// com.microsoft FusedConv(X, W, B, Z): activation(Conv(X, W, B) + Z); F32 as in ONNX Runtime,
/// and F16, which a model compiled at half precision makes of it.
inline void fused_conv_kernel(const kernel_context& ctx) {
  const auto t = ctx.input(0).info().type;
  if (t != data_type::F32 && t != data_type::F16)
    throw ctx.fail("FusedConv takes F32 or F16, not " + std::string(to_string(t)),
                   "use Conv and the activation op for other types");
  conv_with(ctx, conv_activation_of(ctx));
}

// --- ConvTranspose ---------------------------------------------------------------------------------
/// ConvTranspose in the compute type: per (batch, group) one GEMM W_g^T x X_g into columns, then
/// col2im scatters the columns into the output.
template <class C>
void conv_transpose_compute(const kernel_context& ctx, const C* x, const C* w, const C* bias, C* y, std::int64_t batch,
                            std::int64_t in_channels, std::int64_t out_channels, std::int64_t group,
                            const window_geometry& g) {
  // Here g.in is the ConvTranspose input and g.out its output; taps map input i to output
  // i * stride + k * dilation - pad_begin.
  const std::int64_t cg = in_channels / group, mg = out_channels / group;
  const std::int64_t s_in = g.in_size(), s_out = g.out_size(), ks = g.kernel_size();
  const std::int64_t rows = mg * ks;
  const double unit_flops = 2.0 * static_cast<double>(rows * cg * s_in);
  const auto grain = static_cast<std::size_t>(std::max(1.0, 2.0e6 / std::max(unit_flops, 1.0)));
  parallel_blocks(ctx, static_cast<std::size_t>(batch * group), grain, [&](std::size_t u0, std::size_t u1) {
    auto col = scratch<C, 2>(static_cast<std::size_t>(rows * s_in));
    for (auto u = static_cast<std::int64_t>(u0); u < static_cast<std::int64_t>(u1); ++u) {
      const std::int64_t n = u / group, gi = u % group;
      const C* xg = x + (n * in_channels + gi * cg) * s_in;
      const C* wg = w + gi * cg * rows;  // [cg, mg * ks] row-major
      gemm<C>(true, false, rows, s_in, cg, C{1}, wg, rows, xg, s_in, C{0}, col.data(), s_in);
      C* yg = y + (n * out_channels + gi * mg) * s_out;
      for (std::int64_t mo = 0; mo < mg; ++mo) std::fill(yg + mo * s_out, yg + (mo + 1) * s_out, bias ? bias[gi * mg + mo] : C{0});
      const C* cr = col.data();
      for (std::int64_t mo = 0; mo < mg; ++mo)
        for (std::int64_t kd = 0; kd < g.kernel[0]; ++kd)
          for (std::int64_t kh = 0; kh < g.kernel[1]; ++kh)
            for (std::int64_t kw = 0; kw < g.kernel[2]; ++kw, cr += s_in) {
              C* ym = yg + mo * s_out;
              for (std::int64_t id = 0; id < g.in[0]; ++id) {
                const std::int64_t od = id * g.stride[0] + kd * g.dilation[0] - g.pad_begin[0];
                if (od < 0 || od >= g.out[0]) continue;
                for (std::int64_t ih = 0; ih < g.in[1]; ++ih) {
                  const std::int64_t oh = ih * g.stride[1] + kh * g.dilation[1] - g.pad_begin[1];
                  if (oh < 0 || oh >= g.out[1]) continue;
                  const C* src = cr + (id * g.in[1] + ih) * g.in[2];
                  C* dst = ym + (od * g.out[1] + oh) * g.out[2];
                  const std::int64_t base = kw * g.dilation[2] - g.pad_begin[2];
                  // input iw lands on ow = iw * stride + base; keep 0 <= ow < out
                  const std::int64_t lo = std::max<std::int64_t>(0, ceil_div(-base, g.stride[2]));
                  const std::int64_t hi = std::min<std::int64_t>(g.in[2], floor_div(g.out[2] - 1 - base, g.stride[2]) + 1);
                  for (std::int64_t iw = lo; iw < hi; ++iw) dst[iw * g.stride[2] + base] += src[iw];
                }
              }
            }
    }
  });
}

inline void conv_transpose_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto w = ctx.input(1);
  expect_type(ctx, 1, x.info().type);
  const auto y = output(ctx, 0);
  const shape& sx = x.info().shape;
  const shape& sw = w.info().shape;
  const shape& sy = y.info().shape;
  if (sx.rank() < 3 || sx.rank() > 5 || sw.rank() != sx.rank())
    throw ctx.fail("input " + to_string(sx) + " / weights " + to_string(sw) + ": expected [N, C, 1 to 3 spatial dims]",
                   "give X as [N, C, ...] and W as [C, M/group, kernel...]");
  const std::int64_t group = ctx.attr_int("group", 1);
  const std::int64_t n = sx[0], c = sx[1];
  if (group < 1 || c % group != 0 || sw[0] != c)
    throw ctx.fail("group " + std::to_string(group) + " does not fit input channels " + std::to_string(c) +
                       ", weights " + to_string(sw),
                   "W must be [C, M/group, kernel...] with C divisible by group");
  const std::int64_t m = sw[1] * group;
  const std::size_t r = sx.rank() - 2;
  const auto kernel = kernel_shape_of(ctx, sw);
  auto list = [&](std::string_view name, std::int64_t fallback, std::size_t count) {
    auto v = ctx.attr_ints(name, std::vector<std::int64_t>(count, fallback));
    if (v.size() != count)
      throw ctx.fail("attribute " + std::string(name) + " has " + std::to_string(v.size()) + " values, not " +
                         std::to_string(count),
                     "give one value per spatial dimension (pads: begins then ends)");
    return v;
  };
  const auto strides = list("strides", 1, r);
  const auto dilations = list("dilations", 1, r);
  const auto out_pad = list("output_padding", 0, r);
  const auto pads = list("pads", 0, 2 * r);
  const auto auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  const auto output_shape = ctx.attr_ints("output_shape");
  if (!output_shape.empty() && output_shape.size() != r && output_shape.size() != r + 2)
    throw ctx.fail("output_shape has " + std::to_string(output_shape.size()) + " values",
                   "give output_shape one value per spatial dimension");
  window_geometry g;
  g.rank = r;
  const std::size_t off = window_geometry::max_rank - r;
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t d = off + i;
    g.in[d] = sx[2 + i];
    g.kernel[d] = kernel[i];
    g.stride[d] = strides[i];
    g.dilation[d] = dilations[i];
    check_window_values(ctx, kernel[i], strides[i], dilations[i]);
    std::int64_t full = 0;
    if (out_pad[i] < 0 || out_pad[i] > shape::max_elements || __builtin_mul_overflow(g.stride[d], g.in[d] - 1, &full) ||
        __builtin_add_overflow(full, out_pad[i] + g.extent(d), &full) || full > shape::max_elements)
      throw ctx.fail("stride " + std::to_string(g.stride[d]) + ", output_padding " + std::to_string(out_pad[i]) +
                         " and kernel extent " + std::to_string(g.extent(d)) + " on input " + to_string(sx) +
                         " give more than 2^59 elements, or output_padding is negative",
                     "fix the op's strides, output_padding and kernel");
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if (!output_shape.empty() || same) {
      const std::int64_t target = !output_shape.empty() ? output_shape[output_shape.size() - r + i] : g.in[d] * g.stride[d];
      if (target < 0 || target > shape::max_elements)
        throw ctx.fail("output size " + std::to_string(target) + " is not in [0, 2^59]",
                       "fix the op's output_shape");
      const std::int64_t total = full - target;
      // Floor division: a negative total (a larger requested output) pads the end with zeros.
      if (auto_pad == "SAME_UPPER") {
        g.pad_begin[d] = floor_div(total, 2);
        g.pad_end[d] = total - g.pad_begin[d];
      } else {
        g.pad_end[d] = floor_div(total, 2);
        g.pad_begin[d] = total - g.pad_end[d];
      }
    } else if (auto_pad == "VALID" || auto_pad == "NOTSET" || auto_pad.empty()) {
      g.pad_begin[d] = auto_pad == "VALID" ? 0 : pads[i];
      g.pad_end[d] = auto_pad == "VALID" ? 0 : pads[r + i];
      if (std::min(g.pad_begin[d], g.pad_end[d]) < 0 || std::max(g.pad_begin[d], g.pad_end[d]) > shape::max_elements)
        throw ctx.fail("pads " + std::to_string(g.pad_begin[d]) + " and " + std::to_string(g.pad_end[d]) +
                           " are not in [0, 2^59]",
                       "give non-negative pads no larger than the output");
    } else {
      throw ctx.fail("auto_pad is '" + auto_pad + "'", "use NOTSET, SAME_UPPER, SAME_LOWER or VALID");
    }
    g.out[d] = full - g.pad_begin[d] - g.pad_end[d];
  }
  std::vector<std::int64_t> expect{n, m};
  for (std::size_t i = 0; i < r; ++i) expect.push_back(g.out[off + i]);
  if (sy != shape(expect))
    throw ctx.fail("output " + to_string(sy) + " is not the expected " + to_string(shape(expect)),
                   "fix the output shape in the model");
  if (ctx.has_input(2)) {
    expect_type(ctx, 2, x.info().type);
    if (ctx.input(2).info().num_elements() != m)
      throw ctx.fail("bias has " + std::to_string(ctx.input(2).info().num_elements()) + " values for " +
                         std::to_string(m) + " output channels",
                     "give one bias per output channel");
  }
  if (sy.num_elements() == 0) return;
  dnnl_conv_shape ds;
  // Not for a few output channels (an image's gradient through a stem): measured 0.56x the GEMM +
  // col2im kernel for 3 channels, where it is 2.6-3.2x faster on ResNet-18's other layers.
  if (x.info().type == data_type::F32 && !(group == 1 && m < 8) && dnnl_conv_shape_of(g, ds)) {
    // ConvTranspose X -> Y is the data gradient of the Conv Y -> X: oneDNN's src is Y.
    std::swap(ds.ih, ds.oh);
    std::swap(ds.iw, ds.ow);
    ds.kind = dnnl_conv_kind::backward_data;
    ds.n = n;
    ds.ic = m;
    ds.oc = c;
    ds.group = group;
    if (dnnl_conv_run(ctx, ds, x.as<float>().data(), w.as<float>().data(),
                      ctx.has_input(2) ? ctx.input(2).as<float>().data() : nullptr, y.as<float>().data(),
                      ctx.input_is_constant(1)))
      return;
  }
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    const widened<T> wx(x.as<T>()), ww(w.as<T>());
    std::vector<compute_t<T>> bias;
    if (ctx.has_input(2))
      for (const T v : ctx.input(2).as<T>()) bias.push_back(widen(v));
    widened_output<T> out(y.as<T>());
    conv_transpose_compute(ctx, wx.data(), ww.data(), bias.empty() ? nullptr : bias.data(), out.data(), n, c, m,
                           group, g);
    out.finish();
  });
}

// --- ipu::ConvWeightsGrad --------------------------------------------------------------------------
/// The weight gradient in the compute type C: per group, dW_g [M/g, C/g * k] = sum over the batch
/// of dY_g [M/g, out] by im2col(X_g)^T [out, C/g * k]; parallel over groups.
template <class C>
void conv_weights_grad_compute(const kernel_context& ctx, const C* dy, const C* x, C* dw, std::int64_t batch,
                               std::int64_t in_channels, std::int64_t out_channels, std::int64_t group,
                               const window_geometry& g) {
  const std::int64_t cg = in_channels / group, mg = out_channels / group, kg = cg * g.kernel_size();
  const std::int64_t s_out = g.out_size(), s_in = g.in_size();
  ctx.parallel_for(static_cast<std::size_t>(group), [&](std::size_t g0, std::size_t g1) {
    auto col = scratch<C, 1>(static_cast<std::size_t>(kg * s_out));
    for (auto gi = static_cast<std::int64_t>(g0); gi < static_cast<std::int64_t>(g1); ++gi) {
      C* dwg = dw + gi * mg * kg;
      for (std::int64_t n = 0; n < batch; ++n) {
        im2col(x + (n * in_channels + gi * cg) * s_in, cg, g, 0, s_out, col.data());
        gemm<C>(false, true, mg, kg, s_out, C{1}, dy + (n * out_channels + gi * mg) * s_out, s_out, col.data(), s_out,
                n == 0 ? C{0} : C{1}, dwg, kg);
      }
    }
  });
}

/// ipu::ConvWeightsGrad(dY, X), attributes kernel_shape, strides, dilations, pads and group of a
/// Conv from X to Y: dW [M, C/group, kernel...], the gradient of that Conv's weights. F32 1-D and
/// 2-D runs on oneDNN's convolution_backward_weights straight from X and dY; the rest (and what
/// oneDNN refuses) runs im2col + GEMM, the reference the tests compare with.
inline void conv_weights_grad_kernel(const kernel_context& ctx) {
  const auto dy = ctx.input(0);
  const auto x = ctx.input(1);
  expect_type(ctx, 0, x.info().type);
  const auto dw = output(ctx, 0);
  const shape& sx = x.info().shape;
  const shape& sy = dy.info().shape;
  const shape& sw = dw.info().shape;
  if (sy.rank() != sx.rank() || sw.rank() != sx.rank() || sx.rank() < 3)
    throw ctx.fail("dY " + to_string(sy) + ", X " + to_string(sx) + " and dW " + to_string(sw) + " differ in rank",
                   "give [N, M, out...], [N, C, in...] and [M, C/group, kernel...]");
  const std::int64_t group = ctx.attr_int("group", 1);
  const std::int64_t n = sx[0], c = sx[1], m = sy[1];
  if (group < 1 || c % group != 0 || m % group != 0 || sw[0] != m || sw[1] * group != c || sy[0] != n)
    throw ctx.fail("dY " + to_string(sy) + ", X " + to_string(sx) + " and dW " + to_string(sw) +
                       " do not fit a Conv of group " + std::to_string(group),
                   "dY is [N, M, ...], X [N, C, ...], dW [M, C/group, ...], C and M divisible by group");
  const auto g = make_window_geometry(ctx, sx, sy, kernel_shape_of(ctx, sw));
  if (!window_output_matches(g))
    throw ctx.fail("dY " + to_string(sy) + " is not the output of a Conv of X " + to_string(sx) +
                       " with these kernel, strides, dilations and pads",
                   "give the forward Conv's attributes");
  if (sw.num_elements() == 0) return;
  if (x.info().type == data_type::F32) {
    dnnl_conv_shape s;
    if (dnnl_conv_shape_of(g, s)) {
      s.kind = dnnl_conv_kind::backward_weights;
      s.n = n;
      s.ic = c;
      s.oc = m;
      s.group = group;
      if (dnnl_conv_weights_run(ctx, s, x.as<float>().data(), dy.as<float>().data(), dw.as<float>().data())) return;
    }
  }
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    const widened<T> wdy(dy.as<T>()), wx(x.as<T>());
    widened_output<T> out(dw.as<T>());
    conv_weights_grad_compute(ctx, wdy.data(), wx.data(), out.data(), n, c, m, group, g);
    out.finish();
  });
}

inline void register_conv_kernels(op_registry& r) {
  r.add({"", "Conv", &conv_kernel, true});
  r.add({"com.microsoft", "FusedConv", &fused_conv_kernel, true});
  r.add({"", "ConvTranspose", &conv_transpose_kernel, true});
  r.add({"ipu", "ConvWeightsGrad", &conv_weights_grad_kernel, true});
}

}  // namespace ipu::detail::math_ops
