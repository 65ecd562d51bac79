#pragma once
// The work of a matmul or convolution as the AMP sees it.
//
// Both reduce to `amp_problem`: for each of `groups` independent products and each of
// `kernel_positions` kernel offsets, `rows` output rows (matmul rows, or batch x output pixels) are
// each the product of an `in_channels` input vector with an in_channels x out_channels weight block,
// accumulated over the kernel offsets. The AMP contracts over input channels only (the channels of
// one pixel are contiguous in memory); kernel offsets are an outer loop. This is why a first
// convolution with 3 input channels fills the AMP poorly even with a 7x7 kernel.
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/format.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/error.hpp"

namespace ipu {

/// [batch] x [m, k] x [k, n] -> [batch, m, n]; broadcast batch dimensions multiplied into `batch`.
struct matmul_shape {
  std::uint64_t batch = 1;
  std::uint64_t m = 0;
  std::uint64_t k = 0;
  std::uint64_t n = 0;
  [[nodiscard]] constexpr std::uint64_t macs() const noexcept {
    using ipu::mul_sat;
    return mul_sat(mul_sat(mul_sat(batch, m), k), n);
  }
  friend constexpr bool operator==(const matmul_shape&, const matmul_shape&) = default;
};

/// An N-d convolution (ONNX Conv semantics): input [batch, in_channels, spatial...], weights
/// [out_channels, in_channels / groups, kernel...]. Empty strides / dilations mean 1, empty pads 0.
struct conv_shape {
  std::uint64_t batch = 1;
  std::uint64_t in_channels = 0;
  std::uint64_t out_channels = 0;
  std::uint64_t groups = 1;
  std::vector<std::uint64_t> input;  // spatial sizes
  std::vector<std::uint64_t> kernel;
  std::vector<std::uint64_t> strides;
  std::vector<std::uint64_t> pads_begin;
  std::vector<std::uint64_t> pads_end;
  std::vector<std::uint64_t> dilations;

  /// Output spatial sizes: floor((in + pad_begin + pad_end - dilation * (kernel - 1) - 1) / stride) + 1.
  /// Throws ipu::error (shape) for inconsistent figures.
  [[nodiscard]] constexpr std::vector<std::uint64_t> output() const {
    using ipu::format_uint;
    const auto rank = input.size();
    auto bad = [](const std::string& what) {
      return error(error_category::shape, what, "convolution cost",
                   "describe the convolution with ONNX Conv conventions");
    };
    if (kernel.size() != rank) throw bad("kernel rank " + format_uint(kernel.size()) + " != input rank " + format_uint(rank));
    auto at = [&](const std::vector<std::uint64_t>& v, std::size_t i, std::uint64_t dflt, const char* name) {
      if (v.empty()) return dflt;
      if (v.size() != rank) throw bad(std::string(name) + " has " + format_uint(v.size()) + " entries for rank " + format_uint(rank));
      return v[i];
    };
    std::vector<std::uint64_t> out(rank);
    for (std::size_t i = 0; i < rank; ++i) {
      const auto s = at(strides, i, 1, "strides"), d = at(dilations, i, 1, "dilations");
      const auto padded = input[i] + at(pads_begin, i, 0, "pads_begin") + at(pads_end, i, 0, "pads_end");
      if (s == 0 || d == 0 || kernel[i] == 0) throw bad("a stride, dilation or kernel size is 0");
      const auto span = d * (kernel[i] - 1) + 1;
      if (span > padded)
        throw bad("kernel span " + format_uint(span) + " exceeds padded input " + format_uint(padded) + " in spatial dim " +
                  format_uint(i));
      out[i] = (padded - span) / s + 1;
    }
    return out;
  }

  [[nodiscard]] constexpr std::uint64_t macs() const {
    using ipu::mul_sat;
    std::uint64_t r = mul_sat(batch, out_channels);
    for (auto o : output()) r = mul_sat(r, o);
    for (auto k : kernel) r = mul_sat(r, k);
    return groups == 0 ? 0 : mul_sat(r, in_channels / groups);
  }
};

/// A matmul or convolution mapped onto the AMP (see the file comment).
struct amp_problem {
  std::uint64_t groups = 1;            // independent products: matmul batch, conv groups
  std::uint64_t rows = 0;              // output rows per group: m, or batch x output pixels
  std::uint64_t in_channels = 0;       // contracted per kernel position: k, or in_channels / groups
  std::uint64_t out_channels = 0;      // n, or out_channels / groups
  std::uint64_t kernel_positions = 1;  // kernel elements (1 for a matmul)
  std::uint64_t input_rows = 0;        // rows of the input operand per group: m, or batch x input pixels
  std::uint64_t kernel_width = 0;      // innermost kernel size (0: all positions in one kernel row)
  std::uint64_t row_width = 0;         // rows (output pixels) per field row: innermost output size (0: one run)
  std::uint64_t kernel_height = 0;     // outermost kernel size, which an nx1 weight height > 1 folds
                                       // (0: kernel_positions / kernel_width; 1: nothing to fold)
  std::uint64_t stride_width = 1;      // innermost output stride (the SLIC vertex takes 1 or 2)

  [[nodiscard]] constexpr std::uint64_t macs() const noexcept {
    using ipu::mul_sat;
    return mul_sat(mul_sat(mul_sat(mul_sat(groups, rows), in_channels), out_channels), kernel_positions);
  }
  [[nodiscard]] constexpr bool empty() const noexcept { return macs() == 0; }
  friend constexpr bool operator==(const amp_problem&, const amp_problem&) = default;
};

constexpr amp_problem to_amp_problem(const matmul_shape& s) noexcept {
  return amp_problem{s.batch, s.m, s.k, s.n, 1, s.m};
}

/// Throws ipu::error (shape) when the channels do not split into the groups.
constexpr amp_problem to_amp_problem(const conv_shape& s) {
  using ipu::format_uint;
  using ipu::mul_sat;
  if (s.groups == 0 || s.in_channels % s.groups != 0 || s.out_channels % s.groups != 0)
    throw error(error_category::shape,
                "channels " + format_uint(s.in_channels) + " -> " + format_uint(s.out_channels) +
                    " do not divide into " + format_uint(s.groups) + " groups",
                "convolution cost", "use a group count that divides both channel counts");
  std::uint64_t out_pixels = 1, in_pixels = 1, kernel = 1;
  for (auto o : s.output()) out_pixels = mul_sat(out_pixels, o);
  for (auto i : s.input) in_pixels = mul_sat(in_pixels, i);
  for (auto k : s.kernel) kernel = mul_sat(kernel, k);
  return amp_problem{s.groups,
                     mul_sat(s.batch, out_pixels),
                     s.in_channels / s.groups,
                     s.out_channels / s.groups,
                     kernel,
                     mul_sat(s.batch, in_pixels),
                     s.kernel.empty() ? 1 : s.kernel.back(),
                     s.input.empty() ? 0 : s.output().back(),
                     // PopLibs plans a 1-D convolution as 2-D with a leading kernel size of 1
                     // (ConvPlan.cpp, addExtraDims): no kernel rows to fold.
                     s.kernel.size() >= 2 ? s.kernel.front() : 1,
                     s.strides.empty() ? 1 : s.strides.back()};
}

}  // namespace ipu
