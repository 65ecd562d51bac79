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
//   cut into chunks of that length, each chunk one float GEMM (vectorised, on oneDNN), and the
//   chunks are summed in 32-bit integers, wrapping as the reference loop does.
//
// One or two spatial dimensions; the reference loop takes the rest. Constant weights are converted
// once and kept in the op's cache, a slot per path (integer_conv_cache).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "ipu/ops/kernels/blas.hpp"
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
/// every zero point 0) with x's zero point `xzp` subtracted, on oneDNN's int8 convolution; false
/// when this path does not apply (see the header) or oneDNN does not take the shape.
inline bool integer_conv_on_dnnl(const kernel_context& ctx, std::size_t ix, std::size_t iw, std::int64_t xzp,
                                 const std::vector<double>& wzp, std::int64_t group, std::vector<std::int32_t>& out) {
  const auto x = ctx.input(ix);
  const auto w = ctx.input(iw);
  const auto xt = x.info().type;
  if (!dnnl_int8_is_exact() || w.info().type != data_type::S8 || (xt != data_type::U8 && xt != data_type::S8)) return false;
  for (const auto z : wzp)
    if (z != 0.0) return false;
  const shape xs = x.info().shape;
  const shape ws = w.info().shape;
  const shape ys = ctx.outputs[0].info().shape;
  if (xs.rank() < 3 || xs.rank() > 4 || ws.rank() != xs.rank()) return false;
  const std::vector<std::int64_t> kernel(ws.dims().begin() + 2, ws.dims().end());
  math_ops::dnnl_conv_shape s;
  if (!math_ops::dnnl_conv_shape_of(math_ops::make_window_geometry(ctx, xs, ys, kernel), s)) return false;
  s.n = xs[0];
  s.ic = xs[1];
  s.oc = ws[0];
  s.group = group;
  using dt = dnnl::memory::data_type;
  s.src_type = xt == data_type::U8 ? dt::u8 : dt::s8;
  s.weights_type = dt::s8;
  s.dst_type = dt::s32;
  out.assign(static_cast<std::size_t>(ys.num_elements()), 0);
  auto* held = integer_conv_cache_of(ctx);
  kernel_context own_slot = ctx;  // oneDNN's path keeps its weights in its own slot
  own_slot.cache = held ? &held->dnnl : nullptr;
  return math_ops::dnnl_conv_run(own_slot, s, x.data(), w.data(), nullptr, out.data(), ctx.input_is_constant(iw),
                                 static_cast<std::int32_t>(xzp));
}

/// The 2-D window of an integer convolution (1-D as height 1).
struct integer_window {
  std::int64_t ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw;
};

/// out (int32, [N, M, out spatial...]) = the convolution of x and w with zero points subtracted;
/// false when the layout is not one this path takes (then out is untouched). `pads` are the
/// resolved begin pads; `xzp` and `wzp` (one per output channel) are the zero points.
inline bool integer_conv_by_gemm(const kernel_context& ctx, std::size_t ix, std::size_t iw, std::int64_t xzp,
                                 const std::vector<double>& wzp, std::span<const std::int64_t> strides,
                                 std::span<const std::int64_t> dilations, std::span<const std::int64_t> begin_pads,
                                 std::int64_t group, std::vector<std::int32_t>& out) {
  const auto x = ctx.input(ix);
  const auto w = ctx.input(iw);
  const shape xs = x.info().shape;
  const shape ws = w.info().shape;
  const shape ys = ctx.outputs[0].info().shape;
  const auto xt = x.info().type, wt = w.info().type;
  const bool eight_bit = (xt == data_type::U8 || xt == data_type::S8) && (wt == data_type::U8 || wt == data_type::S8);
  const std::size_t sp = xs.rank() < 2 ? 0 : xs.rank() - 2;
  if (!eight_bit || (sp != 1 && sp != 2) || ws.rank() != xs.rank() || ys.rank() != xs.rank()) return false;
  const bool two = sp == 2;
  const integer_window win{two ? xs[2] : 1,          xs[sp + 1],   two ? ys[2] : 1, ys[sp + 1],
                           two ? ws[2] : 1,          ws[sp + 1],   two ? strides[0] : 1,
                           strides[sp - 1],          two ? dilations[0] : 1,       dilations[sp - 1],
                           two ? begin_pads[0] : 0, begin_pads[sp - 1]};
  const auto batch = xs[0], cin = xs[1], m = ws[0], cg = ws[1];
  const auto mg = m / group;
  const auto K = cg * win.kh * win.kw, P = win.oh * win.ow, in_plane = win.ih * win.iw;

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
  const auto chunk = exact_float_chunk(max_offset_from(xt, xzp), kept->bound, K);

  // Per group and block of images: x minus its zero point as floats, laid out as the GEMM's
  // [K][images * P] operand (im2col, padding 0), then [mg][K] x [K][images * P] in exact chunks.
  // Small outputs (late layers) share one GEMM between images, so each call has enough columns.
  const auto per_gemm = std::clamp<std::int64_t>(512 / std::max<std::int64_t>(P, 1), 1, std::max<std::int64_t>(batch, 1));
  const auto ld = per_gemm * P;
  std::vector<float> cols(static_cast<std::size_t>(K * ld));
  std::vector<float> part(static_cast<std::size_t>(mg * ld));
  out.assign(static_cast<std::size_t>(batch * m * P), 0);
  auto gather = [&](const auto* src, std::int64_t b0, std::int64_t images, std::int64_t g) {
    math_ops::parallel_blocks(ctx, static_cast<std::size_t>(K), 8, [&](std::size_t r0, std::size_t r1) {
      for (auto r = static_cast<std::int64_t>(r0); r < static_cast<std::int64_t>(r1); ++r) {
        const auto c = r / (win.kh * win.kw), i = r / win.kw % win.kh, j = r % win.kw;
        // Output column ox reads input column ox * sw + first_x.
        const auto first_x = j * win.dw - win.pw;
        const auto lo = std::min(win.ow, first_x >= 0 ? 0 : (-first_x + win.sw - 1) / win.sw);
        const auto hi = std::max(lo, std::min(win.ow, first_x >= win.iw ? 0 : (win.iw - 1 - first_x) / win.sw + 1));
        for (std::int64_t n = 0; n < images; ++n) {
          const auto* plane = src + ((b0 + n) * cin + g * cg + c) * in_plane;
          float* row = cols.data() + r * ld + n * P;
          for (std::int64_t oy = 0; oy < win.oh; ++oy) {
            const auto y = oy * win.sh - win.ph + i * win.dh;
            float* o = row + oy * win.ow;
            if (y < 0 || y >= win.ih) {
              std::fill(o, o + win.ow, 0.0f);
              continue;
            }
            // Output columns [lo, hi) read inside the row; the others read padding.
            const auto* in = plane + y * win.iw;
            std::fill(o, o + lo, 0.0f);
            for (std::int64_t ox = lo; ox < hi; ++ox)
              o[ox] = static_cast<float>(std::int64_t{in[ox * win.sw + first_x]} - xzp);
            std::fill(o + hi, o + win.ow, 0.0f);
          }
        }
      }
    });
  };
  for (std::int64_t b0 = 0; b0 < batch; b0 += per_gemm)
    for (std::int64_t g = 0; g < group; ++g) {
      const auto images = std::min(per_gemm, batch - b0);
      const auto cols_used = images * P;
      if (xt == data_type::S8) gather(data_as<std::int8_t>(x), b0, images, g);
      else gather(data_as<std::uint8_t>(x), b0, images, g);
      const float* A = wf + g * mg * K;
      for (std::int64_t k0 = 0; k0 < K; k0 += chunk) {
        const auto kn = std::min(chunk, K - k0);
        math_ops::parallel_gemm<float>(ctx, false, false, mg, cols_used, kn, 1.0f, A + k0, K, cols.data() + k0 * ld, ld,
                                       0.0f, part.data(), ld);
        for (std::int64_t n = 0; n < images; ++n)
          for (std::int64_t i = 0; i < mg; ++i) {
            std::int32_t* c = out.data() + ((b0 + n) * m + g * mg + i) * P;
            const float* p = part.data() + i * ld + n * P;
            for (std::int64_t e = 0; e < P; ++e)  // wraps modulo 2^32, as the reference's int32 result does
              c[e] = static_cast<std::int32_t>(static_cast<std::uint32_t>(c[e]) +
                                               static_cast<std::uint32_t>(static_cast<std::int32_t>(p[e])));
          }
      }
    }
  return true;
}

}  // namespace ipu::detail::tensor_ops
