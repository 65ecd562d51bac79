#pragma once
// Softmax, LogSoftmax and Hardmax along one axis (opset-13 semantics: the axis alone is
// normalised). Each slice is widened to the compute type, so F16 sums in F32.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "ipu/ops/kernels/fast_math.hpp"
#include "ipu/ops/kernels/numeric.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

enum class softmax_kind { softmax, log_softmax, hardmax };

template <class C>
C exp_of(C x) noexcept {
  if constexpr (std::is_same_v<C, float>) return exp_vectorisable(x);
  else return std::exp(x);
}

/// Softmax of each contiguous row of `n` values (the last axis, as attention normalises): the
/// exponentials in a loop of their own so it vectorises; the sum in eight partial sums.
template <class C>
void softmax_rows(C* v, std::size_t rows, std::size_t n) {
  for (std::size_t o = 0; o < rows; ++o, v += n) {
    C m = -std::numeric_limits<C>::infinity();
    for (std::size_t k = 0; k < n; ++k) m = v[k] > m ? v[k] : m;
    for (std::size_t k = 0; k < n; ++k) v[k] = exp_of(v[k] - m);
    C part[8] = {};
    std::size_t k = 0;
    for (; k + 8 <= n; k += 8)
      for (std::size_t l = 0; l < 8; ++l) part[l] += v[k + l];
    C sum = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    for (; k < n; ++k) sum += v[k];
    const C inv = C{1} / sum;
    for (std::size_t j = 0; j < n; ++j) v[j] *= inv;
  }
}

/// Normalises one slice of `n` rows by `inner` columns in place (rows along the axis).
template <class C>
void softmax_slice(C* v, std::size_t n, std::size_t inner, softmax_kind kind, std::vector<C>& mx, std::vector<C>& sum) {
  mx.assign(inner, -std::numeric_limits<C>::infinity());
  std::vector<std::size_t> arg;
  if (kind == softmax_kind::hardmax) arg.assign(inner, 0);
  for (std::size_t k = 0; k < n; ++k)
    for (std::size_t j = 0; j < inner; ++j)
      if (v[k * inner + j] > mx[j]) {
        mx[j] = v[k * inner + j];
        if (kind == softmax_kind::hardmax) arg[j] = k;
      }
  if (kind == softmax_kind::hardmax) {
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t j = 0; j < inner; ++j) v[k * inner + j] = arg[j] == k ? C{1} : C{0};
    return;
  }
  // A slice of -inf only (or all-NaN) would make max - max NaN; numpy gives NaN there too.
  sum.assign(inner, C{0});
  if (kind == softmax_kind::softmax) {
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t j = 0; j < inner; ++j) {
        C& x = v[k * inner + j];
        x = exp_of(x - mx[j]);
        sum[j] += x;
      }
    for (std::size_t j = 0; j < inner; ++j) sum[j] = C{1} / sum[j];
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t j = 0; j < inner; ++j) v[k * inner + j] *= sum[j];
  } else {
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t j = 0; j < inner; ++j) {
        C& x = v[k * inner + j];
        x -= mx[j];
        sum[j] += exp_of(x);
      }
    for (std::size_t j = 0; j < inner; ++j) sum[j] = std::log(sum[j]);
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t j = 0; j < inner; ++j) v[k * inner + j] -= sum[j];
  }
}

template <softmax_kind Kind>
void softmax_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto y = output(ctx, 0);
  const shape& s = x.info().shape;
  if (s.rank() == 0) throw ctx.fail("input is a scalar", "give a tensor of rank >= 1");
  const std::size_t axis = s.normalize_axis(ctx.attr_int("axis", -1));
  std::size_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < axis; ++i) outer *= static_cast<std::size_t>(s[i]);
  for (std::size_t i = axis + 1; i < s.rank(); ++i) inner *= static_cast<std::size_t>(s[i]);
  const auto n = static_cast<std::size_t>(s[axis]);
  const std::size_t slice = n * inner;
  if (slice == 0) return;
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    using C = compute_t<T>;
    const T* in = x.as<T>().data();
    T* out = y.as<T>().data();
    parallel_blocks(ctx, outer, std::max<std::size_t>(1, 8192 / slice), [&](std::size_t b, std::size_t e) {
      std::vector<C> buf(slice), mx, sum;
      for (std::size_t o = b; o < e; ++o) {
        const T* src = in + o * slice;
        for (std::size_t i = 0; i < slice; ++i) buf[i] = widen(src[i]);
        if (Kind == softmax_kind::softmax && inner == 1) softmax_rows(buf.data(), 1, n);
        else softmax_slice(buf.data(), n, inner, Kind, mx, sum);
        T* dst = out + o * slice;
        for (std::size_t i = 0; i < slice; ++i) dst[i] = narrow<T>(buf[i]);
      }
    });
  });
}

inline void register_softmax_kernels(op_registry& r) {
  r.add({"", "Softmax", &softmax_kernel<softmax_kind::softmax>});
  r.add({"", "LogSoftmax", &softmax_kernel<softmax_kind::log_softmax>});
  r.add({"", "Hardmax", &softmax_kernel<softmax_kind::hardmax>});
}

}  // namespace ipu::detail::math_ops
