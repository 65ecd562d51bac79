#pragma once
// Kernels of the quantization family (ops/families/quantization.hpp), with ONNX's integer
// semantics: x / scale is computed in float and rounded half to even, the zero point is added and
// the result saturates at the output type's range; integer products accumulate exactly in int32
// after subtracting the zero points.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "ipu/ops/kernels/integer_conv.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

/// saturate_quantized's rounding: values are clamped to +-2^22 and rounded by adding and
/// subtracting 1.5 * 2^23 in the default rounding mode (half to even, which the library never
/// changes).
inline constexpr float quantize_clamp = 4194304.0f, quantize_round_shift = 12582912.0f;

/// `v` rounded half to even, plus `zero_point` (an 8-bit value), saturated at Q's range (NaN maps
/// to the zero point). Written as selects without branches, so that loops over it vectorise: the
/// rounding adds and subtracts 1.5 * 2^23, which for |v| <= 2^22 puts the sum where floats are the
/// integers, so the add rounds v half to even as nearbyint does (a library call on baseline
/// x86-64). Beyond 2^22 every float is an integer far outside Q's range, so clamping there first
/// changes nothing.
template <class Q>
Q saturate_quantized(float v, float zero_point) noexcept {
  constexpr auto lo = static_cast<float>(std::numeric_limits<Q>::min());
  constexpr auto hi = static_cast<float>(std::numeric_limits<Q>::max());
  v = v == v ? v : 0.0f;  // NaN
  v = v < -quantize_clamp ? -quantize_clamp : v;
  v = v > quantize_clamp ? quantize_clamp : v;
  float r = ((v + quantize_round_shift) - quantize_round_shift) + zero_point;
  r = r < lo ? lo : r;
  r = r > hi ? hi : r;
  return static_cast<Q>(r);
}

#if defined(__SSE2__)
// saturate_quantized four lanes at a time. GCC will not vectorise its selects while floating-point
// traps are assumed possible (-ftrapping-math, the default), so on SSE2 the same operations are
// written out; each lane does the same IEEE operations and gives the scalar function's bits.

/// saturate_quantized<Q> of each lane of `v`, as int32 lanes in Q's range.
template <class Q>
__m128i saturate_quantized4(__m128 v, __m128 zero_point) noexcept {
  v = _mm_and_ps(v, _mm_cmpord_ps(v, v));  // NaN -> 0
  v = _mm_min_ps(_mm_max_ps(v, _mm_set1_ps(-quantize_clamp)), _mm_set1_ps(quantize_clamp));
  const __m128 shift = _mm_set1_ps(quantize_round_shift);
  v = _mm_add_ps(_mm_sub_ps(_mm_add_ps(v, shift), shift), zero_point);
  v = _mm_max_ps(v, _mm_set1_ps(static_cast<float>(std::numeric_limits<Q>::min())));
  return _mm_cvttps_epi32(_mm_min_ps(v, _mm_set1_ps(static_cast<float>(std::numeric_limits<Q>::max()))));
}

/// Stores eight int32 lanes already in Q's range as Q (the packs never saturate).
template <class Q>
void store_quantized8(__m128i first, __m128i second, Q* y) noexcept {
  const __m128i words = _mm_packs_epi32(first, second);
  const __m128i bytes = std::is_signed_v<Q> ? _mm_packs_epi16(words, words) : _mm_packus_epi16(words, words);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(y), bytes);
}
#endif

/// y[i] = saturate_quantized<Q>(float(acc[i] + bias) * multiplier, zero_point) for i < n, the sums
/// wrapping in 32 bits: a requantized row of QLinearConv.
template <class Q>
void requantize_row(const std::int32_t* acc, std::uint32_t bias, float multiplier, float zero_point, Q* y,
                    std::size_t n) noexcept {
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128i b = _mm_set1_epi32(static_cast<int>(bias));
  const __m128 m = _mm_set1_ps(multiplier), zp = _mm_set1_ps(zero_point);
  auto four = [&](std::size_t at) {
    const __m128i sum = _mm_add_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + at)), b);
    return saturate_quantized4<Q>(_mm_mul_ps(_mm_cvtepi32_ps(sum), m), zp);
  };
  for (; i + 8 <= n; i += 8) store_quantized8(four(i), four(i + 4), y + i);
#endif
  for (; i < n; ++i)
    y[i] = saturate_quantized<Q>(static_cast<float>(static_cast<std::int32_t>(static_cast<std::uint32_t>(acc[i]) + bias)) *
                                     multiplier,
                                 zero_point);
}

/// y[i] = saturate_quantized<Q>(x[i] / scale, zero_point) for i < n: QuantizeLinear per tensor.
template <class Q>
void quantize_row(const float* x, float scale, float zero_point, Q* y, std::size_t n) noexcept {
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128 s = _mm_set1_ps(scale), zp = _mm_set1_ps(zero_point);
  auto four = [&](std::size_t at) { return saturate_quantized4<Q>(_mm_div_ps(_mm_loadu_ps(x + at), s), zp); };
  for (; i + 8 <= n; i += 8) store_quantized8(four(i), four(i + 4), y + i);
#endif
  for (; i < n; ++i) y[i] = saturate_quantized<Q>(x[i] / scale, zero_point);
}

/// A scale or zero point: one value, or one per element of the quantized axis.
struct axis_params {
  std::vector<double> values;  // empty: the default (scale 1, zero point 0)
  std::int64_t inner = 1;      // elements between consecutive indices of the axis
  std::int64_t n = 1;          // length of the axis
  [[nodiscard]] double at(std::int64_t i, double fallback) const {
    if (values.empty()) return fallback;
    if (values.size() == 1) return values[0];
    return values[static_cast<std::size_t>((i / inner) % n)];
  }
};

inline axis_params read_axis_params(const kernel_context& ctx, std::size_t input, const shape& x, std::string_view what) {
  axis_params p;
  if (!ctx.has_input(input)) return p;
  p.values = read_doubles(ctx, ctx.inputs[input]);
  if (p.values.size() <= 1) return p;
  const auto axis = normalize_axis(ctx, ctx.attr_int("axis", 1), x.rank());
  p.n = x[axis];
  p.inner = product(std::span<const std::int64_t>(x.dims()).subspan(axis + 1));
  if (static_cast<std::int64_t>(p.values.size()) != p.n)
    throw ctx.fail(std::string(what) + " holds " + std::to_string(p.values.size()) + " values but axis " +
                       std::to_string(axis) + " of x has " + std::to_string(p.n),
                   "give one value per element of the quantized axis");
  return p;
}

inline void quantize_linear_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& s = x.info().shape;
  const auto scale = read_axis_params(ctx, 1, s, "y_scale");
  const auto zero = read_axis_params(ctx, 2, s, "y_zero_point");
  const auto n = x.info().num_elements();
  auto run = [&]<class Q>() {
    Q* y = data_as<Q>(ctx.outputs[0]);
    if (x.info().type == data_type::F32 && scale.values.size() <= 1 && zero.values.size() <= 1) {
      // Per tensor from float (a QDQ model's every activation): one straight pass, the same values.
      const float* in = data_as<float>(x);
      const auto sc = static_cast<float>(scale.at(0, 1.0));
      const auto zp = static_cast<float>(zero.at(0, 0.0));
      if (n > 0 && sc == 0.0f) throw ctx.fail("y_scale is zero", "give a non-zero scale");
      quantize_row(in, sc, zp, y, static_cast<std::size_t>(n));
      return;
    }
    const auto xs = read_doubles(ctx, x);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto sc = static_cast<float>(scale.at(i, 1.0));
      if (sc == 0.0f) throw ctx.fail("y_scale is zero", "give a non-zero scale");
      y[i] = saturate_quantized<Q>(static_cast<float>(xs[static_cast<std::size_t>(i)]) / sc,
                                   static_cast<float>(zero.at(i, 0.0)));
    }
  };
  if (ctx.outputs[0].info().type == data_type::S8)
    run.template operator()<std::int8_t>();
  else
    run.template operator()<std::uint8_t>();
}

inline void dequantize_linear_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& s = x.info().shape;
  const auto scale = read_axis_params(ctx, 1, s, "x_scale");
  const auto zero = read_axis_params(ctx, 2, s, "x_zero_point");
  const auto out_type = ctx.outputs[0].info().type;
  if (out_type == data_type::F32 && scale.values.size() <= 1 && zero.values.size() <= 1 &&
      (x.info().type == data_type::U8 || x.info().type == data_type::S8)) {
    // Per tensor to float (a QDQ model's every activation): one straight pass, the same values.
    const auto sc = static_cast<float>(scale.at(0, 1.0));
    const auto zp = static_cast<std::int64_t>(zero.at(0, 0.0));
    float* y = data_as<float>(ctx.outputs[0]);
    const auto n = static_cast<std::size_t>(x.info().num_elements());
    auto pass = [&](const auto* q) {
      for (std::size_t i = 0; i < n; ++i) y[i] = static_cast<float>(std::int64_t{q[i]} - zp) * sc;
    };
    if (x.info().type == data_type::U8) pass(data_as<std::uint8_t>(x));
    else pass(data_as<std::int8_t>(x));
    return;
  }
  const auto xs = read_ints(ctx, x, "x");
  visit_float(out_type, ctx, [&]<class T>() {
    T* y = data_as<T>(ctx.outputs[0]);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const auto k = static_cast<std::int64_t>(i);
      const auto q = xs[i] - static_cast<std::int64_t>(zero.at(k, 0.0));
      y[i] = convert<T>(static_cast<float>(q) * static_cast<float>(scale.at(k, 1.0)));
    }
  });
}

inline void dynamic_quantize_linear_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const float* in = data_as<float>(x);
  const auto n = static_cast<std::size_t>(x.info().num_elements());
  // The range always holds 0, so that 0 is exactly representable.
  float lo = 0.0f, hi = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(in[i])) throw ctx.fail("x holds NaN", "DynamicQuantizeLinear needs finite inputs");
    lo = std::min(lo, in[i]);
    hi = std::max(hi, in[i]);
  }
  const float scale = (hi - lo) / 255.0f;
  const auto zero = scale == 0.0f ? std::uint8_t{0} : saturate_quantized<std::uint8_t>(-lo / scale, 0.0f);
  std::uint8_t* y = data_as<std::uint8_t>(ctx.outputs[0]);
  for (std::size_t i = 0; i < n; ++i) y[i] = scale == 0.0f ? zero : saturate_quantized<std::uint8_t>(in[i] / scale, static_cast<float>(zero));
  if (has_output(ctx, 1)) *data_as<float>(ctx.outputs[1]) = scale;
  if (has_output(ctx, 2)) *data_as<std::uint8_t>(ctx.outputs[2]) = zero;
}

/// Values of integer input `i` (8-bit operand), as int32.
inline std::vector<std::int32_t> read_int32s(const kernel_context& ctx, std::size_t i, std::string_view what) {
  const auto v = read_ints(ctx, ctx.input(i), what);
  return {v.begin(), v.end()};
}

/// One value per index `k` of a length-`n` dimension: a scalar is repeated; absent is `fallback`.
inline std::vector<double> per_index(const kernel_context& ctx, std::size_t i, std::int64_t n, double fallback,
                                     std::string_view what) {
  std::vector<double> v = ctx.has_input(i) ? read_doubles(ctx, ctx.inputs[i]) : std::vector<double>{fallback};
  if (v.size() == 1) return std::vector<double>(static_cast<std::size_t>(n), v[0]);
  if (static_cast<std::int64_t>(v.size()) != n)
    throw ctx.fail(std::string(what) + " holds " + std::to_string(v.size()) + " values; expected 1 or " + std::to_string(n));
  return v;
}

/// Integer matmul with numpy broadcasting: out[.., m, n] = sum_k (a - a_zp[m]) * (b - b_zp[n]).
inline std::vector<std::int32_t> integer_matmul(const kernel_context& ctx, std::size_t ia, std::size_t ia_zp,
                                                std::size_t ib, std::size_t ib_zp) {
  auto sa = ctx.input(ia).info().shape.dims(), sb = ctx.input(ib).info().shape.dims();
  // 1-D operands as matrices, assigned whole: GCC 12 warns (falsely) on an insert into these.
  if (sa.size() == 1) sa = {1, sa[0]};
  if (sb.size() == 1) sb = {sb[0], 1};
  const auto m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const auto a = read_int32s(ctx, ia, "A"), b = read_int32s(ctx, ib, "B");
  const auto azp = per_index(ctx, ia_zp, m, 0.0, "a_zero_point"), bzp = per_index(ctx, ib_zp, n, 0.0, "b_zero_point");
  // Batch dims, right-aligned and broadcast.
  const auto rank = std::max(sa.size(), sb.size()) - 2;
  std::vector<std::int64_t> batch(rank), a_stride(rank, 0), b_stride(rank, 0);
  std::int64_t as = m * k, bs = k * n;
  for (std::size_t d = rank; d-- > 0;) {
    const auto off = rank - d;
    const auto da = off + 2 <= sa.size() ? sa[sa.size() - 2 - off] : 1;
    const auto db = off + 2 <= sb.size() ? sb[sb.size() - 2 - off] : 1;
    batch[d] = std::max(da, db);
    if (da != 1) a_stride[d] = as;
    if (db != 1) b_stride[d] = bs;
    as *= da;
    bs *= db;
  }
  const auto batches = product(batch);
  std::vector<std::int32_t> out(static_cast<std::size_t>(batches * m * n));
  for (std::int64_t bi = 0; bi < batches; ++bi) {
    std::int64_t ao = 0, bo = 0, rest = bi;
    for (std::size_t d = rank; d-- > 0;) {
      const auto idx = rest % batch[d];
      rest /= batch[d];
      ao += idx * a_stride[d];
      bo += idx * b_stride[d];
    }
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        std::int64_t acc = 0;  // int32 wrap-around below, never signed overflow
        const auto za = static_cast<std::int32_t>(azp[static_cast<std::size_t>(i)]);
        const auto zb = static_cast<std::int32_t>(bzp[static_cast<std::size_t>(j)]);
        for (std::int64_t p = 0; p < k; ++p)
          acc += std::int64_t{a[static_cast<std::size_t>(ao + i * k + p)] - za} * (b[static_cast<std::size_t>(bo + p * n + j)] - zb);
        out[static_cast<std::size_t>((bi * m + i) * n + j)] = static_cast<std::int32_t>(acc);
      }
  }
  return out;
}

/// Integer convolution (N-D, groups, strides, dilations, pads or auto_pad) of x (input `ix`) and w
/// (input `iw`) with zero points; out is [N, M, out spatial...] as the IR's output 0. One and two
/// spatial dimensions run on oneDNN's int8 convolution or the float GEMM, exactly (integer_conv.hpp);
/// the loop below is the reference they are tested against, and runs the rest.
inline std::vector<std::int32_t> integer_conv(const kernel_context& ctx, std::size_t ix, std::size_t ix_zp,
                                              std::size_t iw, std::size_t iw_zp) {
  const shape xs = ctx.input(ix).info().shape;
  const shape ws = ctx.input(iw).info().shape;
  const auto& ys = ctx.outputs[0].info().shape;
  const std::size_t sp = xs.rank() - 2;
  const auto batch = xs[0], cin = xs[1], m = ws[0], cg = ws[1];
  const auto group = ctx.attr_int("group", 1);
  const auto xzp = static_cast<std::int32_t>(per_index(ctx, ix_zp, 1, 0.0, "x_zero_point")[0]);
  const auto wzp = per_index(ctx, iw_zp, m, 0.0, "w_zero_point");
  const auto strides = ctx.attr_ints("strides", std::vector<std::int64_t>(sp, 1));
  const auto dil = ctx.attr_ints("dilations", std::vector<std::int64_t>(sp, 1));
  auto pads = ctx.attr_ints("pads", std::vector<std::int64_t>(2 * sp, 0));
  const auto auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  for (std::size_t d = 0; d < sp; ++d) {
    if (auto_pad == "VALID") pads[d] = pads[d + sp] = 0;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const auto need = (ys[d + 2] - 1) * strides[d] + (ws[d + 2] - 1) * dil[d] + 1 - xs[d + 2];
      const auto total = std::max<std::int64_t>(need, 0);
      pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    }
  }
  std::vector<std::int32_t> out;
  if (sp == 1 || sp == 2) {
    const std::vector<std::int64_t> kernel(ws.dims().begin() + 2, ws.dims().end());
    const auto g = math_ops::make_window_geometry(ctx, xs, ys, kernel);
    if (integer_conv_on_dnnl(ctx, g, ix, iw, xzp, wzp, group, out)) return out;
    if (integer_conv_by_gemm(ctx, g, ix, iw, xzp, wzp, group, out)) return out;
  }
  const auto x = read_int32s(ctx, ix, "x"), w = read_int32s(ctx, iw, "w");
  std::int64_t out_sp = 1, in_sp = 1, k_sp = 1;
  for (std::size_t d = 0; d < sp; ++d) {
    out_sp *= ys[d + 2];
    in_sp *= xs[d + 2];
    k_sp *= ws[d + 2];
  }
  out.assign(static_cast<std::size_t>(batch * m * out_sp), 0);
  std::vector<std::int64_t> o(sp), kk(sp);
  const auto m_per_group = m / group;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oc = 0; oc < m; ++oc) {
      const auto g = oc / m_per_group;
      const auto zw = static_cast<std::int32_t>(wzp[static_cast<std::size_t>(oc)]);
      for (std::int64_t op = 0; op < out_sp; ++op) {
        for (std::int64_t r = op, d = static_cast<std::int64_t>(sp) - 1; d >= 0; --d) {
          o[static_cast<std::size_t>(d)] = r % ys[static_cast<std::size_t>(d) + 2];
          r /= ys[static_cast<std::size_t>(d) + 2];
        }
        std::int64_t acc = 0;  // int32 wrap-around below, never signed overflow
        for (std::int64_t c = 0; c < cg; ++c) {
          const auto ic = g * cg + c;
          for (std::int64_t kp = 0; kp < k_sp; ++kp) {
            std::int64_t xoff = 0;
            bool inside = true;
            for (std::int64_t r = kp, d = static_cast<std::int64_t>(sp) - 1; d >= 0; --d) {
              const auto du = static_cast<std::size_t>(d);
              kk[du] = r % ws[du + 2];
              r /= ws[du + 2];
            }
            for (std::size_t d = 0; d < sp; ++d) {
              const auto at = o[d] * strides[d] - pads[d] + kk[d] * dil[d];
              if (at < 0 || at >= xs[d + 2]) inside = false;
              xoff = xoff * xs[d + 2] + at;
            }
            // Padding holds the zero point, so it contributes nothing.
            if (!inside) continue;
            const auto xv = x[static_cast<std::size_t>((b * cin + ic) * in_sp + xoff)] - xzp;
            const auto wv = w[static_cast<std::size_t>((oc * cg + c) * k_sp + kp)] - zw;
            acc += std::int64_t{xv} * wv;
          }
        }
        out[static_cast<std::size_t>((b * m + oc) * out_sp + op)] = static_cast<std::int32_t>(acc);
      }
    }
  return out;
}

inline void matmul_integer_kernel(const kernel_context& ctx) {
  const auto r = integer_matmul(ctx, 0, 2, 1, 3);
  std::copy(r.begin(), r.end(), data_as<std::int32_t>(ctx.outputs[0]));
}

inline void conv_integer_kernel(const kernel_context& ctx) {
  const auto r = integer_conv(ctx, 0, 2, 1, 3);
  std::copy(r.begin(), r.end(), data_as<std::int32_t>(ctx.outputs[0]));
}

/// Calls `store.template operator()<Q>(y, y_zero_point)` with output 0 as Q, its 8-bit type.
template <class F>
void with_quantized_output(const kernel_context& ctx, F&& store) {
  const auto yzp = static_cast<float>(per_index(ctx, 7, 1, 0.0, "y_zero_point")[0]);
  if (ctx.outputs[0].info().type == data_type::S8)
    store.template operator()<std::int8_t>(data_as<std::int8_t>(ctx.outputs[0]), yzp);
  else
    store.template operator()<std::uint8_t>(data_as<std::uint8_t>(ctx.outputs[0]), yzp);
}

inline void qlinear_matmul_kernel(const kernel_context& ctx) {
  const auto acc = integer_matmul(ctx, 0, 2, 3, 5);
  auto sa = ctx.input(0).info().shape.dims(), sb = ctx.input(3).info().shape.dims();
  const auto m = sa.size() >= 2 ? sa[sa.size() - 2] : 1, n = sb.size() >= 2 ? sb.back() : 1;
  const auto as = per_index(ctx, 1, m, 1.0, "a_scale"), bs = per_index(ctx, 4, n, 1.0, "b_scale");
  const auto ys = static_cast<float>(per_index(ctx, 6, 1, 1.0, "y_scale")[0]);
  if (ys == 0.0f) throw ctx.fail("y_scale is zero", "give a non-zero scale");
  with_quantized_output(ctx, [&]<class Q>(Q* y, float yzp) {
    for (std::size_t i = 0; i < acc.size(); ++i) {
      const auto row = static_cast<std::size_t>((static_cast<std::int64_t>(i) / n) % m);
      const auto col = static_cast<std::size_t>(static_cast<std::int64_t>(i) % n);
      const float multiplier = static_cast<float>(as[row]) * static_cast<float>(bs[col]) / ys;
      y[i] = saturate_quantized<Q>(static_cast<float>(acc[i]) * multiplier, yzp);
    }
  });
}

/// The int32 sum plus the bias (wrapping), times x_scale * w_scale / y_scale in float, rounded
/// half to even, plus y's zero point, saturated: one multiplier per output channel.
inline void qlinear_conv_kernel(const kernel_context& ctx) {
  const auto acc = integer_conv(ctx, 0, 2, 3, 5);
  const auto& ys = ctx.outputs[0].info().shape;
  const auto m = ys[1];
  const auto planes = ys[0] * m;
  const auto out_sp = ys.num_elements() / std::max<std::int64_t>(planes, 1);
  const auto bias = ctx.has_input(8) ? read_int32s(ctx, 8, "B") : std::vector<std::int32_t>(static_cast<std::size_t>(m), 0);
  const auto xs = static_cast<float>(per_index(ctx, 1, 1, 1.0, "x_scale")[0]);
  const auto ws = per_index(ctx, 4, m, 1.0, "w_scale");
  const auto yscale = static_cast<float>(per_index(ctx, 6, 1, 1.0, "y_scale")[0]);
  if (yscale == 0.0f) throw ctx.fail("y_scale is zero", "give a non-zero scale");
  with_quantized_output(ctx, [&]<class Q>(Q* y, float yzp) {
    for (std::int64_t plane = 0; plane < planes; ++plane) {
      const auto c = static_cast<std::size_t>(plane % m);
      const float multiplier = xs * static_cast<float>(ws[c]) / yscale;
      const auto first = static_cast<std::size_t>(plane * out_sp);
      requantize_row(acc.data() + first, static_cast<std::uint32_t>(bias[c]), multiplier, yzp, y + first,
                     static_cast<std::size_t>(out_sp));
    }
  });
}

inline void register_quantization(op_registry& r) {
  r.add({"", "QuantizeLinear", quantize_linear_kernel});
  r.add({"", "DequantizeLinear", dequantize_linear_kernel});
  r.add({"", "DynamicQuantizeLinear", dynamic_quantize_linear_kernel});
  r.add({"", "MatMulInteger", matmul_integer_kernel});
  r.add({"", "QLinearMatMul", qlinear_matmul_kernel});
  r.add({"", "ConvInteger", conv_integer_kernel});
  r.add({"", "QLinearConv", qlinear_conv_kernel});
}

}  // namespace ipu::detail::tensor_ops
