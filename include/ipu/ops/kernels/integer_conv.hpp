#pragma once
// Integer convolution (ConvInteger, QLinearConv) fast and exact, in one of two ways; both give the
// reference loop's result (quantization.hpp's integer_conv) bit for bit.
//
// - oneDNN's int8 convolution (u8 or s8 x, s8 weights with zero point 0, int32 result, x's zero
//   point subtracted by the primitive), where the CPU has VNNI dot products: they accumulate u8 x s8
//   products in int32 exactly. Without VNNI oneDNN sums pairs of products in int16 with saturation
//   (vpmaddubsw), which can differ from the exact sum, so it is not used there.
// - The float GEMM otherwise. After the zero points are subtracted, 8-bit operands are integers of
//   magnitude at most 255, so each product is an integer below 2^16 and a sum of up to 2^24 /
//   (largest product) of them is an integer a float holds exactly, whatever order the GEMM adds
//   them in and whether it fuses the multiply-adds. The reduction (input channels times window) is
//   cut into chunks of that length (whole input channels, laid out by conv.hpp's im2col), each
//   chunk one float GEMM, and the chunks are summed in 32-bit integers, wrapping as the reference
//   loop does.
//
// One or two spatial dimensions; the reference loop takes the rest. Constant weights are converted
// once and kept in the op's cache, a slot per path (integer_conv_cache).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "ipu/ops/kernels/blas.hpp"
#include "ipu/ops/kernels/conv.hpp"
#include "ipu/ops/kernels/conv_dnnl.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/kernels/window.hpp"

namespace ipu::detail::tensor_ops {

/// The largest |v - zero| over the values v of 8-bit type `t` (S8 or U8).
constexpr std::int64_t max_offset_from(data_type t, std::int64_t zero) {
  const std::int64_t lo = t == data_type::S8 ? -128 : 0, hi = t == data_type::S8 ? 127 : 255;
  return std::max(zero - lo < 0 ? lo - zero : zero - lo, hi - zero < 0 ? zero - hi : hi - zero);
}

/// How many products of magnitude at most `bound_a * bound_b` a float sums exactly: every partial
/// sum stays within 2^24. At least 1; `k` when the products are all zero.
constexpr std::int64_t exact_float_chunk(std::int64_t bound_a, std::int64_t bound_b, std::int64_t k) {
  const auto largest = bound_a * bound_b;
  if (largest == 0) return std::max<std::int64_t>(k, 1);
  return std::max<std::int64_t>((std::int64_t{1} << 24) / largest, 1);
}

/// Weights minus their output channel's zero point, as floats, [M][K]; kept in the op's cache.
struct integer_conv_weights {
  const void* source = nullptr;
  std::vector<double> zero_points;  // those subtracted (a zero point may be a run-time input)
  std::vector<float> values;
  std::int64_t bound = 0;  // the largest |w - zero point|
};

/// What an integer convolution keeps in its op's cache, a slot per path: the path can change
/// between runs when a zero point is a run-time input, so neither reads the other's.
struct integer_conv_cache {
  op_cache dnnl;                               // oneDNN's reordered weights (conv_dnnl.hpp)
  std::shared_ptr<integer_conv_weights> gemm;  // the float GEMM's weights
};

/// The op's integer_conv_cache, made on first use; null when the runner keeps nothing.
inline integer_conv_cache* integer_conv_cache_of(const kernel_context& ctx) {
  if (!ctx.cache) return nullptr;
  if (!ctx.cache->prepared) ctx.cache->prepared = std::make_shared<integer_conv_cache>();
  return static_cast<integer_conv_cache*>(ctx.cache->prepared.get());  // only integer convolutions write it
}

/// Whether this CPU runs oneDNN's int8 convolutions on VNNI dot products (AVX-512 VNNI or AVX-VNNI;
/// later ISAs include them), which sum u8 x s8 products in int32 exactly.
inline bool dnnl_int8_is_exact() {
  static const bool exact = [] {
    const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    auto has = [&](dnnl_cpu_isa_t set) { return (isa & static_cast<unsigned>(set)) == static_cast<unsigned>(set); };
    return has(dnnl_cpu_isa_avx512_core_vnni) || has(dnnl_cpu_isa_avx2_vnni);
  }();
  return exact;
}

/// out (int32, [N, M, out spatial...]) = x (input `ix`, u8 or s8) convolved with w (input `iw`, s8,
/// every zero point 0) over window `g` with x's zero point `xzp` subtracted, on oneDNN's int8
/// convolution; false when this path does not apply (see the header) or oneDNN does not take it.
inline bool integer_conv_on_dnnl(const kernel_context& ctx, const math_ops::window_geometry& g, std::size_t ix,
                                 std::size_t iw, std::int64_t xzp, const std::vector<double>& wzp, std::int64_t group,
                                 std::vector<std::int32_t>& out) {
  const auto x = ctx.input(ix);
  const auto w = ctx.input(iw);
  const auto xt = x.info().type;
  if (!dnnl_int8_is_exact() || w.info().type != data_type::S8 || (xt != data_type::U8 && xt != data_type::S8)) return false;
  for (const auto z : wzp)
    if (z != 0.0) return false;
  math_ops::dnnl_conv_shape s;
  if (!math_ops::dnnl_conv_shape_of(g, s)) return false;
  s.n = x.info().shape[0];
  s.ic = x.info().shape[1];
  s.oc = w.info().shape[0];
  s.group = group;
  using dt = dnnl::memory::data_type;
  s.src_type = xt == data_type::U8 ? dt::u8 : dt::s8;
  s.weights_type = dt::s8;
  s.dst_type = dt::s32;
  out.assign(static_cast<std::size_t>(ctx.outputs[0].info().num_elements()), 0);
  auto* held = integer_conv_cache_of(ctx);
  kernel_context own_slot = ctx;  // oneDNN's path keeps its weights in its own slot
  own_slot.cache = held ? &held->dnnl : nullptr;
  return math_ops::dnnl_conv_run(own_slot, s, x.data(), w.data(), nullptr, out.data(), ctx.input_is_constant(iw),
                                 static_cast<std::int32_t>(xzp));
}

/// out (int32, [N, M, out spatial...]) = x (input `ix`) convolved with w (input `iw`) over window
/// `g`, zero points subtracted, on the float GEMM in exact chunks (see the header): per image, group
/// and block of output columns, conv.hpp's im2col of as many whole input channels as a chunk holds,
/// each one GEMM summed into int32. False when this path does not apply: not 8-bit, or one channel's
/// window alone longer than an exact chunk.
inline bool integer_conv_by_gemm(const kernel_context& ctx, const math_ops::window_geometry& g, std::size_t ix,
                                 std::size_t iw, std::int64_t xzp, const std::vector<double>& wzp, std::int64_t group,
                                 std::vector<std::int32_t>& out) {
  const auto x = ctx.input(ix);
  const auto w = ctx.input(iw);
  const auto xt = x.info().type, wt = w.info().type;
  if ((xt != data_type::U8 && xt != data_type::S8) || (wt != data_type::U8 && wt != data_type::S8)) return false;
  const shape xs = x.info().shape;
  const shape ws = w.info().shape;
  const auto batch = xs[0], cin = xs[1], m = ws[0], cg = ws[1], mg = m / group;
  const auto ks = g.kernel_size(), K = cg * ks, s_out = g.out_size(), s_in = g.in_size();

  // Weights, converted once (and kept when they are constant).
  const void* source = w.data();
  auto* held = integer_conv_cache_of(ctx);
  const bool keep = held && ctx.input_is_constant(iw);
  auto* kept = keep ? held->gemm.get() : nullptr;
  std::shared_ptr<integer_conv_weights> made;
  if (!kept || kept->source != source || kept->zero_points != wzp || kept->values.size() != static_cast<std::size_t>(m * K)) {
    made = std::make_shared<integer_conv_weights>();
    made->source = source;
    made->zero_points = wzp;
    made->values.resize(static_cast<std::size_t>(m * K));
    for (std::int64_t oc = 0; oc < m; ++oc) {
      const auto z = static_cast<std::int64_t>(wzp[static_cast<std::size_t>(oc)]);
      made->bound = std::max(made->bound, max_offset_from(wt, z));
      for (std::int64_t k = 0; k < K; ++k) {
        const auto i = static_cast<std::size_t>(oc * K + k);
        const std::int64_t v = wt == data_type::S8 ? std::int64_t{data_as<std::int8_t>(w)[i]} : std::int64_t{data_as<std::uint8_t>(w)[i]};
        made->values[i] = static_cast<float>(v - z);
      }
    }
    kept = made.get();
    if (keep) held->gemm = made;
  }
  const float* wf = kept->values.data();
  const auto channels_per_chunk = exact_float_chunk(max_offset_from(xt, xzp), kept->bound, K) / std::max<std::int64_t>(ks, 1);
  if (channels_per_chunk == 0) return false;

  // x minus its zero point, as floats: what im2col lays out.
  std::vector<float> xf(static_cast<std::size_t>(x.info().num_elements()));
  for (std::size_t i = 0; i < xf.size(); ++i) {
    const std::int64_t v = xt == data_type::S8 ? std::int64_t{data_as<std::int8_t>(x)[i]} : std::int64_t{data_as<std::uint8_t>(x)[i]};
    xf[i] = static_cast<float>(v - xzp);
  }
  out.assign(static_cast<std::size_t>(batch * m * s_out), 0);
  // Column blocks as conv_im2col's: the im2col scratch near 512 KiB, work for the pool to share.
  const auto rows = std::min(K, channels_per_chunk * ks);
  const std::int64_t block =
      std::clamp<std::int64_t>(((std::int64_t{1} << 17) / std::max<std::int64_t>(rows, 1) + 15) / 16 * 16,
                               std::min<std::int64_t>(128, std::max<std::int64_t>(s_out, 1)), std::max<std::int64_t>(s_out, 1));
  const std::int64_t blocks = (s_out + block - 1) / block;
  const double unit_flops = 2.0 * static_cast<double>(mg) * static_cast<double>(K) * static_cast<double>(block);
  const auto grain = static_cast<std::size_t>(std::max(1.0, 2.0e6 / std::max(unit_flops, 1.0)));
  math_ops::parallel_blocks(ctx, static_cast<std::size_t>(batch * group * blocks), grain, [&](std::size_t u0, std::size_t u1) {
    for (auto u = static_cast<std::int64_t>(u0); u < static_cast<std::int64_t>(u1); ++u) {
      const std::int64_t n = u / (group * blocks), gi = (u / blocks) % group, bi = u % blocks;
      const std::int64_t c0 = bi * block, cols = std::min(block, s_out - c0);
      auto col = math_ops::scratch<float, 8>(static_cast<std::size_t>(rows * cols));
      auto part = math_ops::scratch<float, 9>(static_cast<std::size_t>(mg * cols));
      const float* xg = xf.data() + (n * cin + gi * cg) * s_in;
      for (std::int64_t ch0 = 0; ch0 < cg; ch0 += channels_per_chunk) {
        const auto chs = std::min(channels_per_chunk, cg - ch0);
        math_ops::im2col(xg + ch0 * s_in, chs, g, c0, cols, col.data());
        math_ops::gemm<float>(false, false, mg, cols, chs * ks, 1.0f, wf + gi * mg * K + ch0 * ks, K, col.data(), cols,
                              0.0f, part.data(), cols);
        for (std::int64_t i = 0; i < mg; ++i) {
          std::int32_t* o = out.data() + (n * m + gi * mg + i) * s_out + c0;
          const float* p = part.data() + i * cols;
          for (std::int64_t e = 0; e < cols; ++e)  // wraps modulo 2^32, as the reference's int32 result does
            o[e] = static_cast<std::int32_t>(static_cast<std::uint32_t>(o[e]) +
                                             static_cast<std::uint32_t>(static_cast<std::int32_t>(p[e])));
        }
      }
    }
  });
  return true;
}

}  // namespace ipu::detail::tensor_ops
