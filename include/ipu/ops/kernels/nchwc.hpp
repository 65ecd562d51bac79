#pragma once
// Channel-blocked data between convolutions: ipu::ToNchwc, ipu::FromNchwc and ipu::NchwcConv,
// which the nchwc-layout pass puts around chains of F32 2-D convolutions. A blocked tensor
// [N, Cp, H, W] holds its C channels in blocks of `block` (8 or 16) innermost, oneDNN's
// nChw8c / nChw16c: element (n, c, h, w) sits at ((n * Cp / block + c / block) * H + h) * W + w)
// * block + c % block, and Cp is C rounded up to the block. oneDNN's convolutions read and write
// that layout directly, so a chain of them reorders its data once at each end instead of in and
// out of every op (MobileNetV2, one thread: per-op reorders cost as much as the arithmetic).
//
// The unused channels of the last block are zero in every blocked tensor these kernels write:
// ToNchwc writes zeros there and NchwcConv zeroes them after its activation (Sigmoid would make
// them 0.5), so no value left in a reused buffer reaches the next convolution.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ipu/ops/kernels/conv.hpp"
#include "ipu/ops/kernels/conv_dnnl.hpp"
#include "ipu/ops/kernels/gemm.hpp"
#include "ipu/ops/nchwc_blocks.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

inline std::int64_t nchwc_block_of(const kernel_context& ctx) {
  const auto b = ctx.attr_int("block", 8);
  if (!is_nchwc_block(b)) throw ctx.fail("block " + std::to_string(b) + " is not 8 or 16", "give block 8 or 16");
  return b;
}

/// X, checked: 4-D F32 or F16.
inline void expect_nchwc_data(const kernel_context& ctx, const tensor_info& info) {
  if ((info.type != data_type::F32 && info.type != data_type::F16) || info.shape.rank() != 4)
    throw ctx.fail("X " + to_string(info) + " is not 4-D F32 or F16 data", "block 4-D F32 or F16 data only");
}

/// Images [n0, n1) of plain [n, c, plane] data into blocks, the unused channels zero.
template <class T>
void nchwc_block_images(const T* plain, T* blocked, std::int64_t n0, std::int64_t n1, std::int64_t c,
                        std::int64_t plane, std::int64_t block) {
  const std::int64_t blocks = nchwc_padded_channels(c, block) / block;
  for (std::int64_t n = n0; n < n1; ++n)
    for (std::int64_t cb = 0; cb < blocks; ++cb) {
      T* out = blocked + (n * blocks + cb) * plane * block;
      for (std::int64_t lane = 0; lane < block; ++lane) {
        const std::int64_t ch = cb * block + lane;
        if (ch >= c) {
          for (std::int64_t p = 0; p < plane; ++p) out[p * block + lane] = T{};
          continue;
        }
        const T* in = plain + (n * c + ch) * plane;
        for (std::int64_t p = 0; p < plane; ++p) out[p * block + lane] = in[p];
      }
    }
}

/// Images [n0, n1) of blocked data back to plain [n, c, plane].
template <class T>
void nchwc_unblock_images(const T* blocked, T* plain, std::int64_t n0, std::int64_t n1, std::int64_t c,
                          std::int64_t plane, std::int64_t block) {
  const std::int64_t blocks = nchwc_padded_channels(c, block) / block;
  for (std::int64_t n = n0; n < n1; ++n)
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const T* in = blocked + ((n * blocks + ch / block) * plane) * block + ch % block;
      T* out = plain + (n * c + ch) * plane;
      for (std::int64_t p = 0; p < plane; ++p) out[p] = in[p * block];
    }
}

/// A pixel's `block` channels as one vector: floats, their 32-bit masks, doubles. The blocked
/// kernels write their lane loops with these rather than leave them to the vectorizer, which
/// unrolled the 8-lane loop of a max with NaN into scalar compares and branches (GoogLeNet's
/// first MaxPool: 21 ms, not 2).
template <std::int64_t B>
struct nchwc_lanes;
template <>
struct nchwc_lanes<8> {
  typedef float f __attribute__((vector_size(32)));
  typedef std::int32_t i __attribute__((vector_size(32)));
  typedef double d __attribute__((vector_size(64)));
};
template <>
struct nchwc_lanes<16> {
  typedef float f __attribute__((vector_size(64)));
  typedef std::int32_t i __attribute__((vector_size(64)));
  typedef double d __attribute__((vector_size(128)));
};

/// The element types blocked data takes: F32, and F16, which a model compiled at half precision
/// makes of it (`ipu compile --precision fp16` converts after the passes).
inline constexpr type_list<float, half> nchwc_types{};

/// ipu::ToNchwc(X): X [N, C, H, W] in blocks.
inline void to_nchwc_kernel(const kernel_context& ctx) {
  const auto b = nchwc_block_of(ctx);
  const auto xv = ctx.input(0);
  const auto& x = xv.info();
  expect_nchwc_data(ctx, x);
  const auto y = output(ctx, 0);
  const shape& s = x.shape;
  if (nchwc_padded_channels(s[1], b) < 0 ||
      y.info() != tensor_info{x.type, shape{s[0], nchwc_padded_channels(s[1], b), s[2], s[3]}})
    throw ctx.fail("output " + to_string(y.info()) + " is not X " + to_string(x) + " in blocks of " + std::to_string(b),
                   "fix the output shape in the model");
  visit(nchwc_types, x.type, ctx, [&]<class T>() {
    const T* in = xv.as<T>().data();
    T* out = y.as<T>().data();
    ctx.parallel_for(static_cast<std::size_t>(s[0]), [&](std::size_t n0, std::size_t n1) {
      nchwc_block_images(in, out, static_cast<std::int64_t>(n0), static_cast<std::int64_t>(n1), s[1], s[2] * s[3], b);
    });
  });
}

/// ipu::FromNchwc(X), attribute `channels`: blocked X back to [N, channels, H, W].
inline void from_nchwc_kernel(const kernel_context& ctx) {
  const auto b = nchwc_block_of(ctx);
  const auto xv = ctx.input(0);
  const auto& x = xv.info();
  expect_nchwc_data(ctx, x);
  const auto y = output(ctx, 0);
  const shape& s = x.shape;
  const auto c = ctx.attr_int("channels", 0);
  if (c < 1 || nchwc_padded_channels(c, b) != s[1] || y.info() != tensor_info{x.type, shape{s[0], c, s[2], s[3]}})
    throw ctx.fail("output " + to_string(y.info()) + " is not blocked X " + to_string(x) + "'s " + std::to_string(c) +
                       " channels",
                   "give the channel count X had before ToNchwc");
  visit(nchwc_types, x.type, ctx, [&]<class T>() {
    const T* in = xv.as<T>().data();
    T* out = y.as<T>().data();
    ctx.parallel_for(static_cast<std::size_t>(s[0]), [&](std::size_t n0, std::size_t n1) {
      nchwc_unblock_images(in, out, static_cast<std::int64_t>(n0), static_cast<std::int64_t>(n1), c, s[2] * s[3], b);
    });
  });
}

/// ipu::NchwcConv(X, W, B, Z): FusedConv on blocked X, Z and output, W [M, C/group, kh, kw] and B
/// as Conv's (an X of fewer channels than a block, a stem's, in NCHW); F16 computed in F32 and rounded once, as FusedConv's. oneDNN computes F32 on the
/// blocked data; a shape it does not take (not expected: the pass blocks only what it does) runs
/// through the reference convolution on unblocked copies.
inline void nchwc_conv_kernel(const kernel_context& ctx) {
  const auto b = nchwc_block_of(ctx);
  const auto xv = ctx.input(0);
  const auto wv = ctx.input(1);
  const auto& xi = xv.info();
  expect_nchwc_data(ctx, xi);
  expect_type(ctx, 1, xi.type);
  const auto y = output(ctx, 0);
  if (y.info().type != xi.type)
    throw ctx.fail("output " + to_string(y.info()) + " is not of X's type " + std::string(to_string(xi.type)),
                   "fix the output type in the model");
  const shape& sx = xi.shape;
  const shape& sw = wv.info().shape;
  const shape& sy = y.info().shape;
  const std::int64_t group = ctx.attr_int("group", 1);
  if (sw.rank() != 4 || group < 1 || group > sx[1] || sw[1] < 1 || sw[1] > sx[1] / group || sw[0] % group != 0)
    throw ctx.fail("weights " + to_string(sw) + " with group " + std::to_string(group) + " do not fit blocked input " +
                       to_string(sx),
                   "W must be [M, C/group, kh, kw] with M divisible by group");
  const std::int64_t n = sx[0], c = sw[1] * group, m = sw[0];
  // X of fewer channels than a block (a stem) is read in NCHW as it is.
  const bool plain_x = c < b && sx[1] == c;
  if (sy.rank() != 4 || (nchwc_padded_channels(c, b) != sx[1] && !plain_x) || sy[0] != n ||
      sy[1] != nchwc_padded_channels(m, b))
    throw ctx.fail("blocked input " + to_string(sx) + " and output " + to_string(sy) + " do not hold the " +
                       std::to_string(c) + " and " + std::to_string(m) + " channels of W " + to_string(sw),
                   "block the convolution's input and output with the same block");
  const shape px{n, c, sx[2], sx[3]}, py{n, m, sy[2], sy[3]};
  const auto g = make_window_geometry(ctx, px, py, kernel_shape_of(ctx, sw));
  if (!window_output_matches(g))
    throw ctx.fail("output " + to_string(sy) + " does not match the input, kernel, strides, dilations and pads",
                   "fix the output shape in the model");
  if (ctx.has_input(2)) {
    expect_type(ctx, 2, xi.type);
    if (ctx.input(2).info().num_elements() != m)
      throw ctx.fail("bias has " + std::to_string(ctx.input(2).info().num_elements()) + " values for " +
                         std::to_string(m) + " output channels",
                     "give one bias per output channel");
  }
  auto act = conv_activation_of(ctx);  // Z checked against the (blocked) output's shape
  if (sy.num_elements() == 0) return;
  visit(nchwc_types, xi.type, ctx, [&]<class T>() {
    const widened<T> x(xv.as<T>()), w(wv.as<T>());
    std::optional<widened<T>> bias, z;
    if (ctx.has_input(2)) bias.emplace(ctx.input(2).as<T>());
    if (ctx.has_input(3) && !act.z) {
      z.emplace(ctx.input(3).as<T>());
      act.z = z->data();
    }
    widened_output<T> out(y.as<T>());
    const float* b_data = bias ? bias->data() : nullptr;
    float* y_data = out.data();
    const std::int64_t out_plane = sy[2] * sy[3], blocks = sy[1] / b, per_image = sy[1] * out_plane;
    // Z and the activation, then zero in the last block's unused channels, for images [first, first + count).
    auto finish = [&](std::int64_t first, std::int64_t count) {
      run_on(host_vector_isa(), [&] {
        if (!act.empty())
          apply_conv_activation(act, y_data, static_cast<std::size_t>(first * per_image),
                                static_cast<std::size_t>(count * per_image));
      });
      if (m % b == 0) return;
      for (std::int64_t i = first; i < first + count; ++i) {
        float* last = y_data + ((i * blocks + blocks - 1) * out_plane) * b;
        for (std::int64_t p = 0; p < out_plane; ++p) std::fill(last + p * b + m % b, last + (p + 1) * b, 0.0f);
      }
    };
    dnnl_conv_shape s;
    bool done = false;
    if (dnnl_conv_shape_of(g, s)) {
      s.n = n;
      s.ic = c;
      s.oc = m;
      s.group = group;
      s.block = b;
      s.plain_src = plain_x;
      // A widened F16 weight is a copy made for this call, not the graph's constant.
      done = dnnl_conv_run(ctx, s, x.data(), w.data(), b_data, y_data, std::is_same_v<T, float> && ctx.input_is_constant(1),
                           0, finish);
    }
    if (!done) {
      std::vector<float> unblocked_x(static_cast<std::size_t>(px.num_elements())),
          plain_y(static_cast<std::size_t>(py.num_elements()));
      if (plain_x) std::copy(x.data(), x.data() + px.num_elements(), unblocked_x.data());
      else nchwc_unblock_images(x.data(), unblocked_x.data(), 0, n, c, sx[2] * sx[3], b);
      conv_compute(ctx, unblocked_x.data(), w.data(), b_data, plain_y.data(), n, c, m, group, g);
      nchwc_block_images(plain_y.data(), y_data, 0, n, m, out_plane, b);
      finish(0, n);
    }
    out.finish();
  });
}

inline void register_nchwc_kernels(op_registry& r) {
  r.add({"ipu", "ToNchwc", &to_nchwc_kernel, true});
  r.add({"ipu", "FromNchwc", &from_nchwc_kernel, true});
  r.add({"ipu", "NchwcConv", &nchwc_conv_kernel, true});
}

}  // namespace ipu::detail::math_ops
