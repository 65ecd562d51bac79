#pragma once
// Resize (opset 11-18 semantics without antialiasing): nearest (four rounding modes), linear and
// cubic interpolation over any number of axes, every coordinate transformation mode, cubic
// exclude_outside, and tf_crop_and_resize extrapolation. Follows the ONNX reference
// implementation: interpolation is separable, applied one axis at a time from the last axis.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

struct resize_options {
  std::string mode, coord, nearest;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

/// For one output coordinate: the input taps and weights, or `extrapolate`.
struct resize_taps {
  bool extrapolate = false;
  std::vector<std::int64_t> index;
  std::vector<double> weight;
};

inline std::vector<resize_taps> resize_axis(const kernel_context& ctx, const resize_options& opt, std::int64_t in,
                                            std::int64_t out, double scale, double roi_start, double roi_end) {
  std::vector<resize_taps> taps(static_cast<std::size_t>(out));
  const double in_w = static_cast<double>(in);
  const double out_w = scale * in_w;  // the reference uses scale * length, not the integer size
  for (std::int64_t xi = 0; xi < out; ++xi) {
    const double x = static_cast<double>(xi);
    double xo = 0;
    const auto& m = opt.coord;
    if (m == "half_pixel") {
      xo = (x + 0.5) / scale - 0.5;
    } else if (m == "pytorch_half_pixel") {
      xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    } else if (m == "align_corners") {
      xo = out_w == 1 ? 0.0 : x * (in_w - 1) / (out_w - 1);
    } else if (m == "asymmetric") {
      xo = x / scale;
    } else if (m == "tf_half_pixel_for_nn") {
      xo = (x + 0.5) / scale;
    } else if (m == "tf_crop_and_resize") {
      xo = out_w == 1 ? (roi_end - roi_start) * (in_w - 1) / 2 : x * (roi_end - roi_start) * (in_w - 1) / (out_w - 1);
      xo += roi_start * (in_w - 1);
    } else {
      throw ctx.fail("unknown coordinate_transformation_mode '" + m + "'",
                     "use half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn or "
                     "tf_crop_and_resize");
    }
    auto& t = taps[static_cast<std::size_t>(xi)];
    if (m == "tf_crop_and_resize" && (xo < 0 || xo > in_w - 1)) {
      t.extrapolate = true;
      continue;
    }
    // ratio in (0, 1]: an integral coordinate counts as the right end of the cell to its left.
    const double fl = std::floor(xo);
    const bool integral = xo == fl;
    const auto left = static_cast<std::int64_t>(fl) - (integral ? 1 : 0);
    const double ratio = integral ? 1.0 : xo - fl;
    std::vector<double> c;
    if (opt.mode == "nearest") {
      bool right = true;
      if (!integral) {
        if (opt.nearest == "round_prefer_floor") right = ratio > 0.5;
        else if (opt.nearest == "round_prefer_ceil") right = ratio >= 0.5;
        else if (opt.nearest == "floor") right = false;
        else if (opt.nearest == "ceil") right = true;
        else throw ctx.fail("unknown nearest_mode '" + opt.nearest + "'", "use round_prefer_floor, round_prefer_ceil, floor or ceil");
      }
      c = {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
    } else if (opt.mode == "linear") {
      c = {1 - ratio, ratio};
    } else if (opt.mode == "cubic") {
      const double a = opt.cubic_a, r = ratio, s = 1 - ratio;
      c = {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a, ((a + 2) * r - (a + 3)) * r * r + 1,
           ((a + 2) * s - (a + 3)) * s * s + 1, ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
    } else {
      throw ctx.fail("unknown Resize mode '" + opt.mode + "'", "use nearest, linear or cubic");
    }
    const auto n = static_cast<std::int64_t>(c.size());
    const std::int64_t first = left - (n / 2 - 1);
    if (opt.exclude_outside) {
      double sum = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        const auto i = first + j;
        if (i < 0 || i >= in) c[static_cast<std::size_t>(j)] = 0;
        sum += c[static_cast<std::size_t>(j)];
      }
      for (auto& w : c) w /= sum;
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const double w = c[static_cast<std::size_t>(j)];
      if (w == 0) continue;
      t.index.push_back(std::clamp<std::int64_t>(first + j, 0, in - 1));  // edge padding
      t.weight.push_back(w);
    }
  }
  return taps;
}

inline bool is_identity(const std::vector<resize_taps>& taps, std::int64_t in) {
  if (static_cast<std::int64_t>(taps.size()) != in) return false;
  for (std::size_t x = 0; x < taps.size(); ++x)
    if (taps[x].extrapolate || taps[x].index.size() != 1 || taps[x].index[0] != static_cast<std::int64_t>(x) ||
        taps[x].weight[0] != 1.0)
      return false;
  return true;
}

inline void resize_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& is = x.info().shape;
  const auto& os = ctx.outputs[0].info().shape;
  const std::size_t r = is.rank();
  if (os.rank() != r || ctx.outputs[0].info().type != x.info().type)
    throw ctx.fail("output " + to_string(ctx.outputs[0].info()) + " does not match input " + to_string(x.info()),
                   "fix the output in the IR");
  if (ctx.attr_int("antialias", 0) != 0)
    throw ctx.fail("antialiased Resize is not supported", "resize without antialias");
  resize_options opt;
  opt.mode = ctx.attr_string("mode", "nearest");
  opt.coord = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  opt.nearest = ctx.attr_string("nearest_mode", "round_prefer_floor");
  opt.cubic_a = ctx.attr_float("cubic_coeff_a", -0.75f);
  opt.exclude_outside = ctx.attr_int("exclude_outside", 0) != 0;
  opt.extrapolation = ctx.attr_float("extrapolation_value", 0.0f);
  std::vector<std::int64_t> axes = ctx.attr_ints("axes");
  if (axes.empty())
    for (std::size_t k = 0; k < r; ++k) axes.push_back(static_cast<std::int64_t>(k));
  for (auto& a : axes) a = static_cast<std::int64_t>(normalize_axis(ctx, a, r));
  if (ctx.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch")
    throw ctx.fail("keep_aspect_ratio_policy other than stretch is not supported", "resize with explicit sizes");

  // Per-axis scales: given, or output / input.
  std::vector<double> scale(r, 1.0);
  const auto scales = ctx.has_input(2) ? read_doubles(ctx, ctx.inputs[2]) : std::vector<double>{};
  const auto sizes = optional_ints(ctx, 3, "sizes");
  std::vector<std::int64_t> expect = is.dims();
  if (!scales.empty()) {
    if (scales.size() != axes.size()) throw ctx.fail("scales has the wrong length", "give one scale per resized axis");
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const auto a = static_cast<std::size_t>(axes[i]);
      if (!(scales[i] > 0)) throw ctx.fail("scales must be positive", "fix the scales");
      scale[a] = scales[i];
      // Scales are data: an infinite or huge one is an error, not an out-of-range conversion.
      const double length = std::floor(static_cast<double>(is[a]) * scales[i]);
      if (!(length < static_cast<double>(shape::max_elements)))
        throw ctx.fail("scale " + std::to_string(scales[i]) + " gives axis " + std::to_string(a) +
                           " more elements than a tensor can hold", "give finite scales that fit the output");
      expect[a] = static_cast<std::int64_t>(length);
    }
  } else if (!sizes.empty()) {
    if (sizes.size() != axes.size()) throw ctx.fail("sizes has the wrong length", "give one size per resized axis");
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const auto a = static_cast<std::size_t>(axes[i]);
      expect[a] = sizes[i];
      scale[a] = static_cast<double>(sizes[i]) / static_cast<double>(is[a]);
    }
  } else {
    throw ctx.fail("Resize needs scales or sizes", "give one of them");
  }
  check_output_shape(ctx, 0, shape(expect));
  std::vector<double> roi(2 * r, 0.0);
  for (std::size_t k = 0; k < r; ++k) roi[r + k] = 1.0;
  if (opt.coord == "tf_crop_and_resize") {
    const auto given = ctx.has_input(1) ? read_doubles(ctx, ctx.inputs[1]) : std::vector<double>{};
    if (given.size() != 2 * axes.size())
      throw ctx.fail("tf_crop_and_resize needs roi with a start and an end per resized axis", "give roi");
    for (std::size_t i = 0; i < axes.size(); ++i) {
      roi[static_cast<std::size_t>(axes[i])] = given[i];
      roi[r + static_cast<std::size_t>(axes[i])] = given[axes.size() + i];
    }
  }
  std::vector<std::vector<resize_taps>> taps(r);
  for (std::size_t k = 0; k < r; ++k)
    taps[k] = resize_axis(ctx, opt, is[k], os[k], scale[k], roi[k], roi[r + k]);

  if (opt.mode == "nearest") {  // one tap per coordinate: move bytes, exact for every type
    axis_tables t;
    const auto st = is.strides();
    for (std::size_t k = 0; k < r; ++k) {
      t.dims.push_back(os[k]);
      std::vector<std::int64_t> tab;
      for (const auto& tp : taps[k]) tab.push_back(tp.extrapolate ? outside : tp.index.at(0) * st[k]);
      t.offsets.push_back(std::move(tab));
    }
    visit_type(x.info().type, ctx, [&]<class T>() {
      const T fill = convert<T>(opt.extrapolation);
      gather_axes(ctx, t, x.data(), ctx.outputs[0].data(), sizeof(T), reinterpret_cast<const std::byte*>(&fill));
    });
    return;
  }
  visit_numeric(x.info().type, ctx, [&]<class T>() {
    std::vector<double> cur(static_cast<std::size_t>(is.num_elements()));
    const T* in = data_as<T>(x);
    for (std::size_t i = 0; i < cur.size(); ++i) cur[i] = convert<double>(in[i]);
    std::vector<std::int64_t> dims = is.dims();
    for (std::size_t k = r; k-- > 0;) {
      if (is_identity(taps[k], dims[k])) continue;
      std::int64_t outer = 1, inner = 1;
      for (std::size_t j = 0; j < k; ++j) outer *= dims[j];
      for (std::size_t j = k + 1; j < r; ++j) inner *= dims[j];
      const std::int64_t n_in = dims[k], n_out = os[k];
      std::vector<double> next(static_cast<std::size_t>(outer * n_out * inner), 0.0);
      ctx.parallel_for(static_cast<std::size_t>(outer * n_out), [&](std::size_t b, std::size_t e) {
        for (std::size_t ox = b; ox < e; ++ox) {
          const auto o = static_cast<std::int64_t>(ox) / n_out, xo = static_cast<std::int64_t>(ox) % n_out;
          double* dst = next.data() + ox * static_cast<std::size_t>(inner);
          const auto& tp = taps[k][static_cast<std::size_t>(xo)];
          if (tp.extrapolate) {
            std::fill(dst, dst + inner, opt.extrapolation);
            continue;
          }
          for (std::size_t j = 0; j < tp.index.size(); ++j) {
            const double* src = cur.data() + static_cast<std::size_t>((o * n_in + tp.index[j]) * inner);
            const double w = tp.weight[j];
            for (std::int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
          }
        }
      });
      cur = std::move(next);
      dims[k] = n_out;
    }
    T* o = data_as<T>(ctx.outputs[0]);
    for (std::size_t i = 0; i < cur.size(); ++i) o[i] = convert<T>(cur[i]);
  });
}

inline void register_resize(op_registry& r) { r.add({"", "Resize", resize_kernel}); }

}  // namespace ipu::detail::tensor_ops
