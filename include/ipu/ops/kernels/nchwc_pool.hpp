#pragma once
// Pooling on channel-blocked data: ipu::NchwcMaxPool and ipu::NchwcAveragePool, MaxPool's and
// AveragePool's 2-D windows over the nChw8c / nChw16c data of ops/kernels/nchwc.hpp, so a pool
// between convolutions (GoogLeNet's and SqueezeNet's MaxPools, a ResNet stem's) no longer ends
// their blocked group with a reorder on each side. Each tap of a window is one contiguous vector
// of `block` channels, so the plain kernel's row loop becomes a loop over whole vectors (GoogLeNet,
// one thread: its 13 MaxPools took 37 of 182 ms on NCHW).
//
// The windows are the plain kernels' (auto_pad, pads, strides, dilations, ceil_mode, taps clipped
// to the input), and the values too, to the bit: max in float with NaN kept, averages summed in
// double over the window in the same order and divided once. The unused channels of the
// last block are left zero, as every blocked tensor has them.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ipu/ops/kernels/nchwc.hpp"
#include "ipu/ops/kernels/pool.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/kernels/vector_isa.hpp"
#include "ipu/ops/kernels/window.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

/// Blocks [u0, u1) of (image, channel block) of blocked X into Y: each output is a vector of B
/// channels, reduced over its window's taps in window order (rows, then columns), as the plain
/// kernel does.
template <pool_kind Kind, std::int64_t B, class T>
void nchwc_pool_blocks(const T* x, T* y, std::size_t u0, std::size_t u1, const window_geometry& g,
                       const std::array<std::vector<tap_range>, 3>& tab, bool count_include_pad) {
  using F = typename nchwc_lanes<B>::f;
  using I = typename nchwc_lanes<B>::i;
  using D = typename nchwc_lanes<B>::d;
  static_assert(std::is_same_v<compute_t<T>, float>, "ipu: blocked pools compute in float lanes");
  const std::int64_t s_in = g.in_size() * B, s_out = g.out_size() * B;
  for (auto u = static_cast<std::int64_t>(u0); u < static_cast<std::int64_t>(u1); ++u) {
    const T* xu = x + u * s_in;
    T* yu = y + u * s_out;
    for (std::int64_t oh = 0; oh < g.out[1]; ++oh) {
      const auto th = tab[1][static_cast<std::size_t>(oh)];
      const std::int64_t sh = oh * g.stride[1] - g.pad_begin[1];
      for (std::int64_t ow = 0; ow < g.out[2]; ++ow) {
        const auto tw = tab[2][static_cast<std::size_t>(ow)];
        const std::int64_t sw = ow * g.stride[2] - g.pad_begin[2];
        // f(e) for each tap's vector e of the window, in window order (rows, then columns).
        auto each_tap = [&](auto&& f) {
          for (std::int64_t a = th.lo; a < th.hi; ++a) {
            const T* row = xu + (sh + a * g.dilation[1]) * g.in[2] * B;
            for (std::int64_t c = tw.lo; c < tw.hi; ++c) {
              const T* v = row + (sw + c * g.dilation[2]) * B;
              F e;
              if constexpr (std::is_same_v<T, float>) std::memcpy(&e, v, sizeof e);
              else
                for (std::int64_t l = 0; l < B; ++l) e[l] = widen(v[l]);
              f(e);
            }
          }
        };
        F result;
        if constexpr (Kind == pool_kind::max) {
          F best{};  // every lane set below; {} spares GCC 12's -O1 a false maybe-uninitialized
          for (std::int64_t l = 0; l < B; ++l) best[l] = -std::numeric_limits<float>::infinity();
          // e > best ? e : best is one vmaxps, and keeps the first of equal values as the plain
          // kernel does; it would drop a NaN, so a window holding one is taken again below.
          I nan{};
          each_tap([&](const F& e) {
            best = e > best ? e : best;
            nan |= e != e;
          });
          bool has_nan = false;
          for (std::int64_t l = 0; l < B; ++l) has_nan = has_nan || nan[l] != 0;
          if (has_nan) {
            // NaN propagates (like PyTorch and the plain kernel): once taken, nothing compares greater.
            for (std::int64_t l = 0; l < B; ++l) best[l] = -std::numeric_limits<float>::infinity();
            each_tap([&](const F& e) {
              const I take = (e > best) | ((e != e) & (best == best));
              best = reinterpret_cast<F>((reinterpret_cast<I>(e) & take) | (reinterpret_cast<I>(best) & ~take));
            });
          }
          result = best;
        } else {
          D sum{};
          each_tap([&](const F& e) { sum += __builtin_convertvector(e, D); });
          const std::int64_t count = count_include_pad ? th.padded * tw.padded : (th.hi - th.lo) * (tw.hi - tw.lo);
          result = count > 0 ? __builtin_convertvector(sum / static_cast<double>(count), F) : F{};
        }
        T* out = yu + (oh * g.out[2] + ow) * B;
        if constexpr (std::is_same_v<T, float>) std::memcpy(out, &result, sizeof result);
        else
          for (std::int64_t l = 0; l < B; ++l) out[l] = narrow<T>(result[l]);
      }
    }
  }
}

/// ipu::NchwcMaxPool(X) / ipu::NchwcAveragePool(X): MaxPool (no Indices) / AveragePool of
/// blocked X [N, Cp, H, W] holding `channels` channels in blocks of `block`; Y blocked alike.
template <pool_kind Kind>
void nchwc_pool_kernel(const kernel_context& ctx) {
  if constexpr (Kind == pool_kind::max)
    tensor_ops::only_attributes(ctx, {"block", "channels", "kernel_shape", "auto_pad", "pads", "strides", "dilations",
                                      "ceil_mode"});
  else
    tensor_ops::only_attributes(ctx, {"block", "channels", "kernel_shape", "auto_pad", "pads", "strides", "dilations",
                                      "ceil_mode", "count_include_pad"});
  const auto b = nchwc_block_of(ctx);
  const auto xv = ctx.input(0);
  const auto xi = xv.info();
  expect_nchwc_data(ctx, xi);
  const auto y = output(ctx, 0);
  const shape& sx = xi.shape;
  const shape& sy = y.info().shape;
  const auto channels = ctx.attr_int("channels", 0);
  if (channels < 1 || nchwc_padded_channels(channels, b) != sx[1])
    throw ctx.fail("channels " + std::to_string(channels) + " do not fill blocked X " + to_string(xi) +
                       " in blocks of " + std::to_string(b),
                   "give the channel count X had before ToNchwc");
  if (y.info().type != xi.type || sy.rank() != 4 || sy[0] != sx[0] || sy[1] != sx[1])
    throw ctx.fail("output " + to_string(y.info()) + " is not blocked like X " + to_string(xi),
                   "fix the output shape in the model");
  if (!ctx.has_attr("kernel_shape")) throw ctx.fail("attribute kernel_shape is missing", "give the pooling window size");
  const auto g = make_window_geometry(ctx, sx, sy, ctx.attr_ints("kernel_shape"));
  check_pool_output(ctx, g, ctx.attr_int("ceil_mode", 0) != 0, sy);
  const bool count_include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  if (sy.num_elements() == 0) return;
  std::array<std::vector<tap_range>, window_geometry::max_rank> tab;
  for (std::size_t d = 0; d < window_geometry::max_rank; ++d)
    for (std::int64_t o = 0; o < g.out[d]; ++o) tab[d].push_back(taps(g, d, o));
  const std::int64_t units = sx[0] * (sx[1] / b);
  // About 64 K lane-taps a chunk, by divisions: a product of the sizes could overflow.
  const auto grain = static_cast<std::size_t>(std::max<std::int64_t>(
      1, 65536 / b / std::max<std::int64_t>(1, g.out_size()) / std::max<std::int64_t>(1, g.kernel_size())));
  visit(nchwc_types, xi.type, ctx, [&]<class T>() {
    const T* in = xv.as<T>().data();
    T* out = y.as<T>().data();
    vectorised_blocks(ctx, static_cast<std::size_t>(units), grain, [&](std::size_t u0, std::size_t u1) {
      if (b == 8) nchwc_pool_blocks<Kind, 8>(in, out, u0, u1, g, tab, count_include_pad);
      else nchwc_pool_blocks<Kind, 16>(in, out, u0, u1, g, tab, count_include_pad);
    });
    // A window with no tap inside X (possible with ceil_mode) leaves -inf in every lane of a max:
    // the unused channels are set back to zero.
    if (channels % b == 0) return;
    const std::int64_t blocks = sx[1] / b, plane = sy[2] * sy[3];
    for (std::int64_t n = 0; n < sx[0]; ++n) {
      T* last = out + (n * blocks + blocks - 1) * plane * b;
      for (std::int64_t p = 0; p < plane; ++p) std::fill(last + p * b + channels % b, last + (p + 1) * b, T{});
    }
  });
}

inline void register_nchwc_pool_kernels(op_registry& r) {
  r.add({"ipu", "NchwcMaxPool", &nchwc_pool_kernel<pool_kind::max>, true});
  r.add({"ipu", "NchwcAveragePool", &nchwc_pool_kernel<pool_kind::average>, true});
}

}  // namespace ipu::detail::math_ops
