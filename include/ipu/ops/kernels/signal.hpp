#pragma once
// Signal kernels: DFT, STFT, HannWindow / HammingWindow / BlackmanWindow and MelWeightMatrix.
// Transforms are computed in double and rounded once to the output type: a radix-2 FFT for
// power-of-two lengths, Bluestein's chirp-z algorithm (a convolution done with radix-2 FFTs)
// for every other length, so each line costs O(n log n) whatever n is.
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "ipu/ops/families/signal.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::signal_ops {

using namespace detail::tensor_ops;
using cd = std::complex<double>;

inline auto fail_of(const kernel_context& ctx) {
  return [&ctx](const std::string& what, const std::string& fix) { return ctx.fail(what, fix); };
}

/// A transform of one length, reusable across lines (read-only once made, so lines may run in
/// parallel, each with its own scratch).
class fft_plan {
 public:
  explicit fft_plan(std::size_t n) : n_(n) {
    m_ = 1;
    while (m_ < n) m_ *= 2;
    if (m_ != n) {  // Bluestein: a linear convolution of length 2n - 1 without wrap-around
      m_ = 1;
      while (m_ < 2 * n - 1) m_ *= 2;
    }
    roots_.resize(m_ / 2);
    for (std::size_t k = 0; k < roots_.size(); ++k)
      roots_[k] = std::polar(1.0, -2 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(m_));
    if (m_ == n) return;
    // chirp_k = exp(-i pi k^2 / n); k^2 is taken mod 2n (the period) so the angle stays exact.
    chirp_.resize(n);
    std::uint64_t sq = 0;
    const std::uint64_t period = 2 * static_cast<std::uint64_t>(n);
    for (std::size_t k = 0; k < n; ++k) {
      chirp_[k] = std::polar(1.0, -std::numbers::pi * static_cast<double>(sq) / static_cast<double>(n));
      sq = (sq + 2 * k + 1) % period;
    }
    kernel_.assign(m_, cd{});
    kernel_[0] = std::conj(chirp_[0]);
    for (std::size_t k = 1; k < n; ++k) kernel_[k] = kernel_[m_ - k] = std::conj(chirp_[k]);
    radix2(kernel_, false);
  }

  /// Transforms `a` (n values) in place: sum_j a_j exp(-+2 pi i jk / n), unscaled; `scratch` is
  /// the caller's, so that lines can share the plan.
  void run(std::vector<cd>& a, std::vector<cd>& scratch, bool inverse) const {
    if (m_ == n_) return radix2(a, inverse);
    // The inverse is the conjugate of the forward transform of the conjugate.
    scratch.assign(m_, cd{});
    for (std::size_t k = 0; k < n_; ++k) scratch[k] = (inverse ? std::conj(a[k]) : a[k]) * chirp_[k];
    radix2(scratch, false);
    for (std::size_t k = 0; k < m_; ++k) scratch[k] *= kernel_[k];
    radix2(scratch, true);
    const double scale = 1.0 / static_cast<double>(m_);
    for (std::size_t k = 0; k < n_; ++k) {
      const cd v = scratch[k] * scale * chirp_[k];
      a[k] = inverse ? std::conj(v) : v;
    }
  }

 private:
  /// Iterative radix-2 FFT of m_ values (unscaled; inverse flips the exponent's sign).
  void radix2(std::vector<cd>& a, bool inverse) const {
    for (std::size_t i = 1, j = 0; i < m_; ++i) {
      std::size_t bit = m_ >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (std::size_t len = 2; len <= m_; len *= 2) {
      const std::size_t step = m_ / len, half = len / 2;
      for (std::size_t start = 0; start < m_; start += len)
        for (std::size_t k = 0; k < half; ++k) {
          const cd w = inverse ? std::conj(roots_[k * step]) : roots_[k * step];
          const cd u = a[start + k], v = a[start + k + half] * w;
          a[start + k] = u + v;
          a[start + k + half] = u - v;
        }
    }
  }

  std::size_t n_, m_;
  std::vector<cd> roots_, chirp_, kernel_;
};

/// The one value of scalar integer input `i`.
inline std::int64_t scalar_input(const kernel_context& ctx, std::size_t i, std::string_view what) {
  const auto v = read_ints(ctx, ctx.input(i), what);
  if (v.size() != 1)
    throw ctx.fail(std::string(what) + " must be a scalar, got " + to_string(ctx.inputs[i].info()), "give one value");
  return v[0];
}

inline void dft_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  std::optional<std::int64_t> length;
  if (ctx.has_input(1)) length = scalar_input(ctx, 1, "dft_length");
  const bool inverse = ctx.attr_int("inverse", 0) != 0;
  const auto g = signal::dft_shape(x.info().shape, ctx.attr_int("axis", 1), length, ctx.attr_int("onesided", 0) != 0,
                                   inverse, fail_of(ctx));
  check_output_shape(ctx, 0, g.out);
  if (ctx.outputs[0].info().type != x.info().type) throw ctx.fail("the output's type differs from the input's");
  const auto& s = x.info().shape;
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < g.axis; ++d) outer *= s[d];
  for (std::size_t d = g.axis + 1; d + 1 < s.rank(); ++d) inner *= s[d];
  const std::int64_t in_len = s[g.axis], channels = s[s.rank() - 1], n = g.n, out_n = g.out_n;
  const std::int64_t used = std::min(in_len, n);  // past it the signal is zero-padded
  const auto lines = static_cast<std::size_t>(outer * inner);
  if (lines == 0) return;
  const fft_plan plan(static_cast<std::size_t>(n));
  const double scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  visit_float(x.info().type, ctx, [&]<class T>() {
    const T* in = data_as<T>(x);
    T* out = data_as<T>(ctx.outputs[0]);
    ctx.parallel_for(lines, [&](std::size_t begin, std::size_t end) {
      std::vector<cd> a, scratch;
      for (std::size_t line = begin; line < end; ++line) {
        const auto o = static_cast<std::int64_t>(line) / inner, i = static_cast<std::int64_t>(line) % inner;
        a.assign(static_cast<std::size_t>(n), cd{});
        for (std::int64_t j = 0; j < used; ++j) {
          const T* p = in + ((o * in_len + j) * inner + i) * channels;
          a[static_cast<std::size_t>(j)] = {convert<double>(p[0]), channels == 2 ? convert<double>(p[1]) : 0.0};
        }
        plan.run(a, scratch, inverse);
        for (std::int64_t k = 0; k < out_n; ++k) {
          T* q = out + ((o * out_n + k) * inner + i) * 2;
          q[0] = convert<T>(a[static_cast<std::size_t>(k)].real() * scale);
          q[1] = convert<T>(a[static_cast<std::size_t>(k)].imag() * scale);
        }
      }
    });
  });
}

inline void stft_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto step = scalar_input(ctx, 1, "frame_step");
  std::optional<std::int64_t> frame_length;
  if (ctx.has_input(3)) frame_length = scalar_input(ctx, 3, "frame_length");
  const bool windowed = ctx.has_input(2);
  const auto g = signal::stft_shape(x.info().shape, step, windowed ? &ctx.inputs[2].info().shape : nullptr,
                                    frame_length, ctx.attr_int("onesided", 1) != 0, fail_of(ctx));
  check_output_shape(ctx, 0, g.out);
  if (ctx.outputs[0].info().type != x.info().type) throw ctx.fail("the output's type differs from the signal's");
  if (windowed && ctx.inputs[2].info().type != x.info().type)
    throw ctx.fail("the window's type differs from the signal's", "give both one type");
  const auto lines = static_cast<std::size_t>(g.batch * g.frames);
  if (lines == 0) return;
  const auto n = g.frame_length, channels = x.info().shape[2];
  const fft_plan plan(static_cast<std::size_t>(n));
  visit_float(x.info().type, ctx, [&]<class T>() {
    const T* in = data_as<T>(x);
    const T* window = windowed ? data_as<T>(ctx.inputs[2]) : nullptr;
    T* out = data_as<T>(ctx.outputs[0]);
    ctx.parallel_for(lines, [&](std::size_t begin, std::size_t end) {
      std::vector<cd> a, scratch;
      for (std::size_t line = begin; line < end; ++line) {
        const auto b = static_cast<std::int64_t>(line) / g.frames, f = static_cast<std::int64_t>(line) % g.frames;
        a.assign(static_cast<std::size_t>(n), cd{});
        for (std::int64_t j = 0; j < n; ++j) {
          const T* p = in + (b * g.length + f * g.step + j) * channels;
          const double w = window ? convert<double>(window[j]) : 1.0;
          a[static_cast<std::size_t>(j)] = {convert<double>(p[0]) * w, channels == 2 ? convert<double>(p[1]) * w : 0.0};
        }
        plan.run(a, scratch, false);
        T* q = out + static_cast<std::int64_t>(line) * g.bins * 2;
        for (std::int64_t k = 0; k < g.bins; ++k) {
          q[2 * k] = convert<T>(a[static_cast<std::size_t>(k)].real());
          q[2 * k + 1] = convert<T>(a[static_cast<std::size_t>(k)].imag());
        }
      }
    });
  });
}

/// Writes `value(i)` (a double) to every element of output 0, converted to its numeric type.
template <class F>
void fill_numeric(const kernel_context& ctx, F&& value) {
  const auto t = ctx.outputs[0].info().type;
  (void)signal::output_datatype(onnx_code_of(t), fail_of(ctx));  // no BOOL or float8
  const auto n = static_cast<std::size_t>(ctx.outputs[0].info().num_elements());
  visit_type(t, ctx, [&]<class T>() {
    T* out = data_as<T>(ctx.outputs[0]);
    for (std::size_t i = 0; i < n; ++i) out[i] = convert<T>(value(i));
  });
}

/// y[k] = a0 - a1 cos(2 pi k / N) + a2 cos(4 pi k / N), N = size (periodic) or size - 1
/// (symmetric). A symmetric window of size 1 divides by zero and is NaN, as ONNX's function body.
template <int A0Num, int A0Den, int A1Num, int A1Den, int A2Num, int A2Den>
void cosine_window_kernel(const kernel_context& ctx) {
  const auto size = scalar_input(ctx, 0, "size");
  const auto t = signal::output_datatype(ctx.attr_int("output_datatype", 1), fail_of(ctx));
  check_output_shape(ctx, 0, signal::window_shape(size, fail_of(ctx)));
  if (ctx.outputs[0].info().type != t) throw ctx.fail("the output's type differs from output_datatype");
  constexpr double a0 = static_cast<double>(A0Num) / A0Den, a1 = static_cast<double>(A1Num) / A1Den,
                   a2 = static_cast<double>(A2Num) / A2Den;
  const double period = static_cast<double>(ctx.attr_int("periodic", 1) != 0 ? size : size - 1);
  fill_numeric(ctx, [&](std::size_t k) {
    const double x = 2 * std::numbers::pi * static_cast<double>(k) / period;
    return a0 - a1 * std::cos(x) + a2 * std::cos(2 * x);
  });
}

/// Triangular filters, peak 1, whose edges are spread evenly on the mel scale (mel(f) = 2595
/// log10(1 + f / 700)) over num_mel_bins + 2 points and mapped to DFT bins as ONNX does:
/// floor((dft_length + 1) * f / sample_rate).
inline void mel_weight_matrix_kernel(const kernel_context& ctx) {
  const auto mel_bins = scalar_input(ctx, 0, "num_mel_bins");
  const auto dft_length = scalar_input(ctx, 1, "dft_length");
  const auto sample_rate = scalar_input(ctx, 2, "sample_rate");
  const auto edges = [&](std::size_t i, std::string_view what) {
    const auto v = read_doubles(ctx, ctx.input(i));
    if (v.size() != 1) throw ctx.fail(std::string(what) + " must be a scalar", "give one value");
    return v[0];
  };
  const double lower = edges(3, "lower_edge_hertz"), upper = edges(4, "upper_edge_hertz");
  const auto t = signal::output_datatype(ctx.attr_int("output_datatype", 1), fail_of(ctx));
  const shape out = signal::mel_shape(mel_bins, dft_length, fail_of(ctx));
  check_output_shape(ctx, 0, out);
  if (ctx.outputs[0].info().type != t) throw ctx.fail("the output's type differs from output_datatype");
  if (sample_rate < 1) throw ctx.fail("sample_rate is " + std::to_string(sample_rate) + "; it must be positive");
  if (!(lower >= 0) || !(upper > lower) || !std::isfinite(upper))
    throw ctx.fail("the band [" + std::to_string(lower) + ", " + std::to_string(upper) + "] Hz is not a valid range",
                   "give 0 <= lower_edge_hertz < upper_edge_hertz");
  const auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double low_mel = mel(lower), step = (mel(upper) - low_mel) / static_cast<double>(mel_bins + 2);
  const std::int64_t rows = out[0];
  std::vector<std::int64_t> bin(static_cast<std::size_t>(mel_bins) + 2);
  for (std::size_t i = 0; i < bin.size(); ++i) {
    const double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * step + low_mel) / 2595) - 1);
    const double b = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    // Every edge but the last is written to (the last only bounds its filter's falling side).
    if (!(b >= 0) || b > static_cast<double>(i + 1 < bin.size() ? rows - 1 : rows))
      throw ctx.fail("the band's edge at " + std::to_string(hz) + " Hz falls in DFT bin " + std::to_string(b) +
                         ", past the " + std::to_string(rows) + " bins of a onesided DFT of length " +
                         std::to_string(dft_length),
                     "keep upper_edge_hertz at or below sample_rate / 2");
    bin[i] = static_cast<std::int64_t>(b);
  }
  std::vector<double> w(static_cast<std::size_t>(rows * mel_bins), 0.0);
  for (std::int64_t m = 0; m < mel_bins; ++m) {
    const auto left = bin[static_cast<std::size_t>(m)], centre = bin[static_cast<std::size_t>(m) + 1],
               right = bin[static_cast<std::size_t>(m) + 2];
    const auto at = [&](std::int64_t row) -> double& { return w[static_cast<std::size_t>(row * mel_bins + m)]; };
    if (centre == left) at(centre) = 1;
    for (std::int64_t j = left; centre > left && j <= centre; ++j)
      at(j) = static_cast<double>(j - left) / static_cast<double>(centre - left);
    for (std::int64_t j = centre; j < right; ++j)
      at(j) = static_cast<double>(right - j) / static_cast<double>(right - centre);
  }
  fill_numeric(ctx, [&](std::size_t i) { return w[i]; });
}

inline void register_signal(op_registry& r) {
  r.add({"", "DFT", dft_kernel, true});
  r.add({"", "STFT", stft_kernel, true});
  r.add({"", "HannWindow", cosine_window_kernel<1, 2, 1, 2, 0, 1>, true});
  r.add({"", "HammingWindow", cosine_window_kernel<25, 46, 21, 46, 0, 1>, true});
  r.add({"", "BlackmanWindow", cosine_window_kernel<42, 100, 1, 2, 8, 100>, true});
  r.add({"", "MelWeightMatrix", mel_weight_matrix_kernel, true});
}

}  // namespace ipu::detail::signal_ops
