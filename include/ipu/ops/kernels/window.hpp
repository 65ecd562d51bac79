#pragma once
// Sliding-window geometry shared by convolution and pooling: kernel / stride / dilation / pads for
// up to three spatial dimensions (fewer are padded with leading size-1 dimensions), auto_pad
// resolution, and the range of output positions whose window tap lands inside the input.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/ops/kernels/numeric.hpp"

namespace ipu::detail::math_ops {

/// floor(a / b) for b > 0.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept { return -floor_div(-a, b); }

struct window_geometry {
  static constexpr std::size_t max_rank = 3;
  std::size_t rank = 0;  // spatial dimensions in the model
  std::array<std::int64_t, max_rank> in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1},
      dilation{1, 1, 1}, pad_begin{0, 0, 0}, pad_end{0, 0, 0};

  [[nodiscard]] std::int64_t in_size() const noexcept { return in[0] * in[1] * in[2]; }
  [[nodiscard]] std::int64_t out_size() const noexcept { return out[0] * out[1] * out[2]; }
  [[nodiscard]] std::int64_t kernel_size() const noexcept { return kernel[0] * kernel[1] * kernel[2]; }
  [[nodiscard]] std::int64_t extent(std::size_t d) const noexcept { return (kernel[d] - 1) * dilation[d] + 1; }

  /// Output positions o in [lo, hi) along `d` for which tap `t` reads inside the input.
  [[nodiscard]] std::array<std::int64_t, 2> valid_range(std::size_t d, std::int64_t t) const noexcept {
    const std::int64_t base = t * dilation[d] - pad_begin[d];  // input index = o * stride + base
    const std::int64_t lo = std::max<std::int64_t>(0, ceil_div(-base, stride[d]));
    const std::int64_t hi = std::min<std::int64_t>(out[d], floor_div(in[d] - 1 - base, stride[d]) + 1);
    return {lo, std::max(lo, hi)};
  }
};

/// Refuses a window value that is not positive or above a shape's element bound (2^59), or whose
/// extent (kernel - 1) * dilation + 1 is: with these bounds, the sums and products of window
/// sizes with shapes that the kernels compute stay inside int64.
inline void check_window_values(const kernel_context& ctx, std::int64_t kernel, std::int64_t stride,
                                std::int64_t dilation) {
  const auto bounded = [](std::int64_t v) { return v >= 1 && v <= shape::max_elements; };
  std::int64_t span = 0;
  if (!bounded(kernel) || !bounded(stride) || !bounded(dilation) ||
      __builtin_mul_overflow(kernel - 1, dilation, &span) || span >= shape::max_elements)
    throw ctx.fail("kernel " + std::to_string(kernel) + ", stride " + std::to_string(stride) + " and dilation " +
                       std::to_string(dilation) + ": each must be in [1, 2^59], and so must the window's extent",
                   "fix the op's kernel_shape, strides and dilations");
}

/// Reads the window attributes of a Conv / pool op. `x` and `y` are [N, C, spatial...];
/// `kernel` is the kernel's spatial shape (from W for Conv, the attribute for pools).
inline window_geometry make_window_geometry(const kernel_context& ctx, const shape& x, const shape& y,
                                            const std::vector<std::int64_t>& kernel) {
  if (x.rank() < 3 || x.rank() > 2 + window_geometry::max_rank)
    throw ctx.fail("input " + to_string(x) + " has " + std::to_string(x.rank() < 2 ? 0 : x.rank() - 2) +
                       " spatial dimensions; the host kernel handles 1 to 3",
                   "reshape the input to 1-D, 2-D or 3-D spatial data");
  const std::size_t r = x.rank() - 2;
  if (y.rank() != x.rank())
    throw ctx.fail("output " + to_string(y) + " and input " + to_string(x) + " differ in rank",
                   "fix the output shape in the model");
  auto list = [&](std::string_view name, std::int64_t fallback, std::size_t n) {
    auto v = ctx.attr_ints(name, std::vector<std::int64_t>(n, fallback));
    if (v.size() != n)
      throw ctx.fail("attribute " + std::string(name) + " has " + std::to_string(v.size()) + " values, not " +
                         std::to_string(n),
                     "give one value per spatial dimension (pads: begins then ends)");
    return v;
  };
  if (kernel.size() != r)
    throw ctx.fail("kernel has " + std::to_string(kernel.size()) + " dimensions for " + std::to_string(r) +
                       " spatial dimensions",
                   "give kernel_shape one value per spatial dimension");
  const auto strides = list("strides", 1, r);
  const auto dilations = list("dilations", 1, r);
  const auto pads = list("pads", 0, 2 * r);
  const auto auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  window_geometry g;
  g.rank = r;
  const std::size_t off = window_geometry::max_rank - r;
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t d = off + i;
    g.in[d] = x[2 + i];
    g.out[d] = y[2 + i];
    g.kernel[d] = kernel[i];
    g.stride[d] = strides[i];
    g.dilation[d] = dilations[i];
    check_window_values(ctx, kernel[i], strides[i], dilations[i]);
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // out <= 2^59 and stride <= 2^59: the product is checked, not trusted.
      std::int64_t total = 0;
      if (g.out[d] < 1 || __builtin_mul_overflow(g.out[d] - 1, g.stride[d], &total) || total > shape::max_elements)
        throw ctx.fail("output " + to_string(y) + " with stride " + std::to_string(g.stride[d]) +
                           " spans more than 2^59 elements, or none",
                       "fix the output shape or the strides in the model");
      total = std::max<std::int64_t>(0, total + g.extent(d) - g.in[d]);
      g.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pad_end[d] = total - g.pad_begin[d];
    } else if (auto_pad == "VALID") {
      g.pad_begin[d] = g.pad_end[d] = 0;
    } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
      g.pad_begin[d] = pads[i];
      g.pad_end[d] = pads[r + i];
      for (const auto p : {pads[i], pads[r + i]})
        if (p < 0 || p > shape::max_elements)
          throw ctx.fail("pad " + std::to_string(p) + " is not in [0, 2^59]",
                         "give non-negative pads no larger than the input");
    } else {
      throw ctx.fail("auto_pad is '" + auto_pad + "'", "use NOTSET, SAME_UPPER, SAME_LOWER or VALID");
    }
  }
  if (g.kernel[0] > shape::max_elements / g.kernel[1] / g.kernel[2])
    throw ctx.fail("a kernel of " + std::to_string(g.kernel[0]) + " x " + std::to_string(g.kernel[1]) + " x " +
                       std::to_string(g.kernel[2]) + " has more than 2^59 taps",
                   "use a smaller kernel");
  return g;
}

}  // namespace ipu::detail::math_ops
