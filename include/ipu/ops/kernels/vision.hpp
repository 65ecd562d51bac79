#pragma once
// Detection and sampling kernels, as the ONNX operator specifications (and their reference
// implementation) define them:
//  - NonMaxSuppression (opset 10/11): greedy selection per batch and class, both box formats;
//  - RoiAlign (opset 10/16): avg and max pooling of bilinear samples, both coordinate modes;
//  - GridSample (opset 16/20): nearest, (bi)linear and (bi)cubic sampling over one to three
//    spatial axes (as the specification's reference; more would cost 4^r taps a point), zeros /
//    border / reflection padding, align_corners.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

// --- NonMaxSuppression ----------------------------------------------------------------------------
struct nms_box {
  float x_min, x_max, y_min, y_max;
};

/// Box `b` (4 floats) as extents. Corner boxes may list their corners in either order; centre
/// boxes are [x_center, y_center, width, height].
inline nms_box nms_extents(const float* b, bool center) {
  if (center)
    return {b[0] - b[2] / 2, b[0] + b[2] / 2, b[1] - b[3] / 2, b[1] + b[3] / 2};
  return {std::min(b[1], b[3]), std::max(b[1], b[3]), std::min(b[0], b[2]), std::max(b[0], b[2])};
}

/// Whether two boxes overlap by more than `threshold` (intersection over union). Computed in
/// float as the specification's reference does, so borderline cases decide alike; empty boxes
/// never suppress.
inline bool nms_suppresses(const nms_box& a, const nms_box& b, float threshold) {
  const float ix = std::min(a.x_max, b.x_max) - std::max(a.x_min, b.x_min);
  const float iy = std::min(a.y_max, b.y_max) - std::max(a.y_min, b.y_min);
  if (!(ix > 0) || !(iy > 0)) return false;
  const float inter = ix * iy;
  const float area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const float area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const float uni = area_a + area_b - inter;
  if (!(inter > 0) || !(area_a > 0) || !(area_b > 0) || !(uni > 0)) return false;
  return inter / uni > threshold;
}

/// An optional scalar input (shape [] or [1]); `fallback` when omitted or empty.
inline double optional_scalar(const kernel_context& ctx, std::size_t i, const char* what, double fallback) {
  if (!ctx.has_input(i) || ctx.inputs[i].info().num_elements() == 0) return fallback;
  if (ctx.inputs[i].info().num_elements() != 1)
    throw ctx.fail(std::string(what) + " must hold one value, got " + to_string(ctx.inputs[i].info()),
                   "give it as a scalar or a 1-element tensor");
  return read_doubles(ctx, ctx.inputs[i])[0];
}

inline void non_max_suppression_kernel(const kernel_context& ctx) {
  only_attributes(ctx, {"center_point_box"});
  const auto boxes = ctx.input(0);
  const auto scores = ctx.input(1);
  const auto& bs = boxes.info().shape;
  const auto& ss = scores.info().shape;
  if (boxes.info().type != data_type::F32 || scores.info().type != data_type::F32)
    throw ctx.fail("boxes and scores must be F32, got " + to_string(boxes.info()) + " and " + to_string(scores.info()),
                   "cast them to float");
  if (bs.rank() != 3 || bs[2] != 4 || ss.rank() != 3 || ss[0] != bs[0] || ss[2] != bs[1])
    throw ctx.fail("boxes must be [batches, boxes, 4] and scores [batches, classes, boxes], got " + to_string(bs) +
                       " and " + to_string(ss),
                   "give one score per batch, class and box");
  const auto center = ctx.attr_int("center_point_box", 0);
  if (center != 0 && center != 1)
    throw ctx.fail("center_point_box is " + std::to_string(center) + ", not 0 or 1",
                   "use 0 for [y1, x1, y2, x2] corners or 1 for [x_center, y_center, width, height]");
  std::int64_t max_out = 0;  // omitted: nothing is selected
  if (ctx.has_input(2) && ctx.inputs[2].info().num_elements() > 0) {
    const auto v = read_ints(ctx, ctx.inputs[2], "max_output_boxes_per_class");
    if (v.size() != 1)
      throw ctx.fail("max_output_boxes_per_class must hold one value, got " + to_string(ctx.inputs[2].info()),
                     "give it as a scalar or a 1-element tensor");
    max_out = std::max<std::int64_t>(v[0], 0);
  }
  const auto iou = static_cast<float>(optional_scalar(ctx, 3, "iou_threshold", 0.0));
  if (!(iou >= 0 && iou <= 1))
    throw ctx.fail("iou_threshold is " + std::to_string(iou) + ", outside [0, 1]", "give a threshold in [0, 1]");
  const bool filter = ctx.has_input(4) && ctx.inputs[4].info().num_elements() > 0;
  const auto score_threshold = static_cast<float>(optional_scalar(ctx, 4, "score_threshold", 0.0));

  const float* bp = data_as<float>(boxes);
  const float* sp = data_as<float>(scores);
  const std::int64_t batches = bs[0], n = bs[1], classes = ss[1];
  std::vector<std::int64_t> selected;  // triples
  std::vector<std::int64_t> order;
  std::vector<nms_box> kept;
  for (std::int64_t b = 0; b < batches; ++b) {
    std::vector<nms_box> ext(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      ext[static_cast<std::size_t>(i)] = nms_extents(bp + static_cast<std::size_t>((b * n + i) * 4), center == 1);
    for (std::int64_t c = 0; c < classes; ++c) {
      const float* s = sp + static_cast<std::size_t>((b * classes + c) * n);
      order.clear();
      // A NaN score ranks nowhere, so it is never selected (it also fails any score threshold).
      for (std::int64_t i = 0; i < n; ++i)
        if (!std::isnan(s[i]) && (!filter || s[i] > score_threshold)) order.push_back(i);
      // Highest score first; equal scores in box order.
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return s[x] > s[y]; });
      kept.clear();
      for (const auto i : order) {
        if (static_cast<std::int64_t>(kept.size()) >= max_out) break;
        const auto& box = ext[static_cast<std::size_t>(i)];
        if (std::any_of(kept.begin(), kept.end(), [&](const nms_box& k) { return nms_suppresses(box, k, iou); }))
          continue;
        kept.push_back(box);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  const auto count = static_cast<std::int64_t>(selected.size() / 3);
  check_output_shape(ctx, 0, shape{count, 3});
  if (ctx.outputs[0].info().type != data_type::S64)
    throw ctx.fail("selected_indices must be INT64, the IR says " + to_string(ctx.outputs[0].info()),
                   "declare the output as INT64");
  if (!selected.empty()) std::memcpy(ctx.outputs[0].data(), selected.data(), selected.size() * sizeof(std::int64_t));
}

// --- RoiAlign ------------------------------------------------------------------------------------
/// One axis of a bilinear sample in a plane of `size` pixels along it: the two neighbouring
/// indices and their weights. A sample beyond a pixel outside the plane contributes nothing
/// (`valid` false); one within it clamps to the edge. A 2-D sample's four taps are the products of
/// its two axes' (the samples of a region form a grid, so each axis is computed once per row or
/// column of samples rather than once per sample).
struct roi_axis_tap {
  std::int64_t lo = 0, hi = 0;
  double w_lo = 0, w_hi = 0;
  bool valid = false;
};

inline roi_axis_tap roi_axis_sample(double y, std::int64_t size) {
  roi_axis_tap t;
  if (y < -1.0 || y > static_cast<double>(size)) return t;
  y = std::max(y, 0.0);
  auto y0 = static_cast<std::int64_t>(y);  // y is in [0, size], so the cast is exact
  std::int64_t y1 = y0 + 1;
  if (y0 >= size - 1) {
    y0 = y1 = size - 1;
    y = static_cast<double>(y0);
  }
  const double ly = y - static_cast<double>(y0);
  t.lo = y0, t.hi = y1, t.w_lo = 1 - ly, t.w_hi = ly, t.valid = true;
  return t;
}

/// Samples per region past which RoiAlign refuses the region: the kernel's work is this times
/// the channels, so a region asking for more is a malformed box or sampling_ratio, not a pooling.
inline constexpr double roi_max_samples = double(1 << 26);

inline void roi_align_kernel(const kernel_context& ctx) {
  only_attributes(ctx, {"coordinate_transformation_mode", "mode", "output_height", "output_width", "sampling_ratio",
                        "spatial_scale"});
  const auto x = ctx.input(0);
  const auto rois_v = ctx.input(1);
  const auto& xs = x.info().shape;
  if (xs.rank() != 4 || rois_v.info().shape.rank() != 2 || rois_v.info().shape[1] != 4)
    throw ctx.fail("X must be [N, C, H, W] and rois [num_rois, 4], got " + to_string(x.info()) + " and " +
                       to_string(rois_v.info()),
                   "fix the inputs");
  const auto batch = read_ints(ctx, ctx.input(2), "batch_indices");
  const auto num_rois = rois_v.info().shape[0];
  if (static_cast<std::int64_t>(batch.size()) != num_rois)
    throw ctx.fail("batch_indices has " + std::to_string(batch.size()) + " entries for " + std::to_string(num_rois) +
                       " rois",
                   "give one batch index per region");
  const auto mode = ctx.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") throw ctx.fail("unknown RoiAlign mode '" + mode + "'", "use avg or max");
  // Opset 10 had no coordinate_transformation_mode and did not shift by half a pixel.
  const auto coord = ctx.attr_string("coordinate_transformation_mode",
                                     ctx.op.opset != 0 && ctx.op.opset < 16 ? "output_half_pixel" : "half_pixel");
  if (coord != "half_pixel" && coord != "output_half_pixel")
    throw ctx.fail("unknown coordinate_transformation_mode '" + coord + "'", "use half_pixel or output_half_pixel");
  const bool half_pixel = coord == "half_pixel", average = mode == "avg";
  const auto oh = ctx.attr_int("output_height", 1), ow = ctx.attr_int("output_width", 1);
  const auto ratio = ctx.attr_int("sampling_ratio", 0);
  if (oh < 1 || ow < 1 || ratio < 0)
    throw ctx.fail("output_height and output_width must be positive and sampling_ratio not negative",
                   "fix the attributes");
  const double scale = ctx.attr_float("spatial_scale", 1.0f);
  const std::int64_t channels = xs[1], h = xs[2], w = xs[3];
  check_output_shape(ctx, 0, shape{num_rois, channels, oh, ow});
  if (num_rois > 0 && (h == 0 || w == 0))
    throw ctx.fail("X " + to_string(x.info()) + " has no pixels to sample", "give a feature map of at least 1 x 1");
  if (ctx.outputs[0].info().type != x.info().type || rois_v.info().type != x.info().type)
    throw ctx.fail("X, rois and Y must share one float type, got " + to_string(x.info()) + ", " +
                       to_string(rois_v.info()) + " and " + to_string(ctx.outputs[0].info()),
                   "cast them to one type");
  if (ctx.outputs[0].info().num_elements() == 0) return;  // no regions or no channels
  const auto rois = read_doubles(ctx, rois_v);
  visit_float(x.info().type, ctx, [&]<class T>() {
    const T* xp = data_as<T>(x);
    T* yp = data_as<T>(ctx.outputs[0]);
    std::vector<roi_axis_tap> ytaps, xtaps;
    for (std::int64_t r = 0; r < num_rois; ++r) {
      const auto b = batch[static_cast<std::size_t>(r)];
      if (b < 0 || b >= xs[0])
        throw ctx.fail("batch index " + std::to_string(b) + " of roi " + std::to_string(r) + " is outside [0, " +
                           std::to_string(xs[0]) + ")",
                       "give batch indices of images in X");
      const double* roi = rois.data() + static_cast<std::size_t>(r) * 4;
      const double offset = half_pixel ? 0.5 : 0.0;
      const double x0 = roi[0] * scale - offset, y0 = roi[1] * scale - offset;
      double rw = roi[2] * scale - offset - x0, rh = roi[3] * scale - offset - y0;
      if (!std::isfinite(rw) || !std::isfinite(rh) || !std::isfinite(x0) || !std::isfinite(y0))
        throw ctx.fail("roi " + std::to_string(r) + " has a coordinate that is not finite", "give finite boxes");
      if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);  // malformed regions count as 1 x 1
      const double bin_h = rh / static_cast<double>(oh), bin_w = rw / static_cast<double>(ow);
      const double gh_d = ratio > 0 ? static_cast<double>(ratio) : std::ceil(bin_h);
      const double gw_d = ratio > 0 ? static_cast<double>(ratio) : std::ceil(bin_w);
      // An empty or inverted region has no samples (either factor below 1, however large the
      // other): its bins are 0, as ONNX Runtime gives. Otherwise both factors are at least 1, so
      // bounding the region's samples bounds each factor before it is cast.
      const bool empty_bin = !(gh_d >= 1) || !(gw_d >= 1);
      if (!empty_bin && gh_d * gw_d * static_cast<double>(oh) * static_cast<double>(ow) > roi_max_samples)
        throw ctx.fail("roi " + std::to_string(r) + " needs " + std::to_string(oh) + " x " + std::to_string(ow) +
                           " bins of a " + std::to_string(gh_d) + " x " + std::to_string(gw_d) +
                           " sampling grid, more than " + std::to_string(static_cast<std::int64_t>(roi_max_samples)) +
                           " samples",
                       "give a smaller sampling_ratio (or output size), or regions of the feature map's size");
      const std::int64_t gh = empty_bin ? 0 : static_cast<std::int64_t>(gh_d);
      const std::int64_t gw = empty_bin ? 0 : static_cast<std::int64_t>(gw_d);
      const double count = static_cast<double>(std::max<std::int64_t>(gh * gw, 1));
      // The taps along one axis: `bins` bins of `bin` pixels from `start`, `grid` samples each.
      const auto axis_taps = [](std::vector<roi_axis_tap>& taps, double start, double bin, std::int64_t bins,
                                std::int64_t grid, std::int64_t size) {
        taps.clear();
        for (std::int64_t p = 0; p < bins; ++p)
          for (std::int64_t i = 0; i < grid; ++i)
            taps.push_back(roi_axis_sample(start + static_cast<double>(p) * bin +
                                               (static_cast<double>(i) + 0.5) * bin / static_cast<double>(grid),
                                           size));
      };
      axis_taps(ytaps, y0, bin_h, oh, gh, h);
      axis_taps(xtaps, x0, bin_w, ow, gw, w);
      for (std::int64_t c = 0; c < channels; ++c) {
        const T* plane = xp + static_cast<std::size_t>((b * channels + c) * h * w);
        T* out = yp + static_cast<std::size_t>(((r * channels + c) * oh) * ow);
        for (std::int64_t ph = 0; ph < oh; ++ph)
          for (std::int64_t pw = 0; pw < ow; ++pw) {
            double v = 0;
            bool first = true;
            for (std::int64_t iy = 0; iy < gh; ++iy) {
              const auto& ty = ytaps[static_cast<std::size_t>(ph * gh + iy)];
              for (std::int64_t ix = 0; ix < gw; ++ix) {
                const auto& tx = xtaps[static_cast<std::size_t>(pw * gw + ix)];
                // A sample outside the plane has zero weights on pixel 0, as the reference's.
                const bool in = ty.valid && tx.valid;
                const std::int64_t pos[4] = {in ? ty.lo * w + tx.lo : 0, in ? ty.lo * w + tx.hi : 0,
                                             in ? ty.hi * w + tx.lo : 0, in ? ty.hi * w + tx.hi : 0};
                const double wt[4] = {in ? ty.w_lo * tx.w_lo : 0.0, in ? ty.w_lo * tx.w_hi : 0.0,
                                      in ? ty.w_hi * tx.w_lo : 0.0, in ? ty.w_hi * tx.w_hi : 0.0};
                double px[4];
                for (int k = 0; k < 4; ++k) px[k] = wt[k] * convert<double>(plane[pos[k]]);
                if (average) {
                  v += px[0] + px[1] + px[2] + px[3];
                } else {  // the largest weighted tap, as the reference defines max pooling
                  const double m = std::max({px[0], px[1], px[2], px[3]});
                  v = first ? m : std::max(v, m);
                }
                first = false;
              }
            }
            out[ph * ow + pw] = convert<T>(average ? v / count : v);
          }
      }
    }
  });
}

// --- GridSample ----------------------------------------------------------------------------------
/// Reflects `x` by the borders [lo, hi] until it lies within them.
inline double grid_reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x >= lo && x <= hi) return x;
  const double d = x < lo ? lo - x : x - hi;
  const double turns = std::floor(d / range);
  const double rest = d - turns * range;
  const bool even = std::fmod(turns, 2.0) == 0;
  if (x < lo) return even ? lo + rest : hi - rest;
  return even ? hi - rest : lo + rest;
}

enum class grid_padding { zeros, border, reflection };

/// The taps along one spatial axis of size `d` for (unnormalized) coordinate x: positions and
/// weights; an empty tap list means every tap fell outside with zero padding.
struct grid_axis_taps {
  std::int64_t pos[4];
  double w[4];
  int n = 0;
};

inline void grid_sample_kernel(const kernel_context& ctx) {
  only_attributes(ctx, {"align_corners", "mode", "padding_mode"});
  const auto x = ctx.input(0);
  const auto grid = ctx.input(1);
  const auto& xs = x.info().shape;
  const auto& gs = grid.info().shape;
  if (xs.rank() < 3 || gs.rank() != xs.rank() || gs[0] != xs[0] ||
      gs[gs.rank() - 1] != static_cast<std::int64_t>(xs.rank() - 2))
    throw ctx.fail("X must be [N, C, D1, ..., Dr] and grid [N, O1, ..., Or, r], got " + to_string(x.info()) + " and " +
                       to_string(grid.info()),
                   "fix the inputs");
  const std::size_t r = xs.rank() - 2;
  if (r > 3)
    throw ctx.fail("X " + to_string(x.info()) + " has " + std::to_string(r) + " spatial axes; GridSample samples 1 to 3",
                   "reshape X to at most 3 spatial axes ([N, C, D, H, W])");
  std::string mode = ctx.attr_string("mode", ctx.op.opset != 0 && ctx.op.opset < 20 ? "bilinear" : "linear");
  if (mode == "bilinear") mode = "linear";  // opset 16's names for opset 20's modes
  if (mode == "bicubic") mode = "cubic";
  if (mode != "linear" && mode != "nearest" && mode != "cubic")
    throw ctx.fail("unknown GridSample mode '" + mode + "'", "use bilinear (linear), nearest or bicubic (cubic)");
  const auto pad_name = ctx.attr_string("padding_mode", "zeros");
  const grid_padding pad = pad_name == "zeros"    ? grid_padding::zeros
                           : pad_name == "border" ? grid_padding::border
                           : pad_name == "reflection"
                               ? grid_padding::reflection
                               : throw ctx.fail("unknown padding_mode '" + pad_name + "'", "use zeros, border or reflection");
  const auto align = ctx.attr_int("align_corners", 0);
  if (align != 0 && align != 1) throw ctx.fail("align_corners must be 0 or 1", "fix the attribute");
  std::vector<std::int64_t> out_dims{xs[0], xs[1]};
  for (std::size_t k = 1; k <= r; ++k) out_dims.push_back(gs[k]);
  check_output_shape(ctx, 0, shape(out_dims));
  if (ctx.outputs[0].info().type != x.info().type)
    throw ctx.fail("Y must have X's type, the IR says " + to_string(ctx.outputs[0].info()), "declare Y like X");
  // Nothing to write (an empty batch, channel or grid axis); X may then have empty axes too.
  if (ctx.outputs[0].info().num_elements() == 0) return;

  const auto g = read_doubles(ctx, grid);
  std::int64_t points = 1;  // sampling points per image
  for (std::size_t k = 1; k <= r; ++k) points *= gs[k];
  const std::int64_t channels = xs[1];
  std::vector<std::int64_t> d(r), stride(r);
  std::int64_t plane = 1;
  for (std::size_t k = r; k-- > 0;) {
    d[k] = xs[k + 2];
    stride[k] = plane;
    plane *= d[k];
  }
  if (plane == 0 && ctx.outputs[0].info().num_elements() > 0)
    throw ctx.fail("X " + to_string(x.info()) + " has no pixels to sample", "give X at least one element per axis");
  // One pixel along axis k at integer index i, after padding: its position, or -1 for a zero.
  auto pixel = [&](std::size_t k, std::int64_t i, double lo, double hi) -> std::int64_t {
    if (i >= 0 && i < d[k]) return i;
    if (pad == grid_padding::zeros) return -1;
    if (pad == grid_padding::border) return std::clamp<std::int64_t>(i, 0, d[k] - 1);
    const auto j = static_cast<std::int64_t>(grid_reflect(static_cast<double>(i), lo, hi));
    return std::clamp<std::int64_t>(j, 0, d[k] - 1);
  };
  visit_float(x.info().type, ctx, [&]<class T>() {
    const T* xp = data_as<T>(x);
    T* yp = data_as<T>(ctx.outputs[0]);
    std::vector<grid_axis_taps> axes(r);
    std::vector<int> digit(r, 0);
    for (std::int64_t n = 0; n < xs[0]; ++n) {
      for (std::int64_t p = 0; p < points; ++p) {
        const double* coords = g.data() + static_cast<std::size_t>((n * points + p) * static_cast<std::int64_t>(r));
        bool is_nan = false, is_zero = false;
        for (std::size_t k = 0; k < r; ++k) {
          // The grid lists coordinates innermost axis first (x, then y, ...).
          const double u = coords[r - 1 - k];
          const auto len = static_cast<double>(d[k]);
          double c = align ? (u + 1) / 2 * (len - 1) : ((u + 1) * len - 1) / 2;
          if (mode == "nearest") c = r == 3 ? std::round(c) : std::nearbyint(c);  // PyTorch's 3-D rounds half away
          const double lo = align ? 0.0 : -0.5, hi = align ? len - 1 : len - 0.5;
          if (c < lo || c > hi) {
            if (pad == grid_padding::border) c = std::clamp(c, 0.0, len - 1);
            else if (pad == grid_padding::reflection) c = grid_reflect(c, lo, hi);
          }
          auto& t = axes[k];
          t.n = 0;
          if (std::isnan(c)) {
            is_nan = true;
            continue;
          }
          if (c < -3 || c > len + 2) {  // every tap outside (only with zero padding, or infinite)
            is_zero = true;
            continue;
          }
          double weights[4];
          std::int64_t first = 0;
          int taps = 0;
          if (mode == "nearest") {
            first = static_cast<std::int64_t>(c), taps = 1, weights[0] = 1;
          } else {
            const double f = std::floor(c), s = c - f;
            if (mode == "linear") {
              first = static_cast<std::int64_t>(f), taps = 2, weights[0] = 1 - s, weights[1] = s;
            } else {  // Keys' cubic convolution, a = -0.75 as PyTorch's bicubic
              constexpr double a = -0.75;
              const double s1 = s + 1, q = 1 - s, q1 = q + 1;
              first = static_cast<std::int64_t>(f) - 1, taps = 4;
              weights[0] = ((a * s1 - 5 * a) * s1 + 8 * a) * s1 - 4 * a;
              weights[1] = ((a + 2) * s - (a + 3)) * s * s + 1;
              weights[2] = ((a + 2) * q - (a + 3)) * q * q + 1;
              weights[3] = ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a;
            }
          }
          for (int j = 0; j < taps; ++j) {
            const auto at = pixel(k, first + j, lo, hi);
            if (at < 0) continue;
            t.pos[t.n] = at * stride[k];
            t.w[t.n] = weights[j];
            ++t.n;
          }
          if (t.n == 0) is_zero = true;
        }
        for (std::int64_t c = 0; c < channels; ++c) {
          T& out = yp[static_cast<std::size_t>((n * channels + c) * points + p)];
          if (is_nan || is_zero) {
            out = convert<T>(is_nan ? std::nan("") : 0.0);
            continue;
          }
          const T* src = xp + static_cast<std::size_t>((n * channels + c) * plane);
          // Sum over every combination of the axes' taps (an odometer over r small lists).
          double sum = 0;
          std::fill(digit.begin(), digit.end(), 0);
          for (;;) {
            double wgt = 1;
            std::int64_t off = 0;
            for (std::size_t k = 0; k < r; ++k) {
              wgt *= axes[k].w[digit[k]];
              off += axes[k].pos[digit[k]];
            }
            sum += wgt * convert<double>(src[off]);
            std::size_t k = r;
            while (k-- > 0 && ++digit[k] == axes[k].n) digit[k] = 0;
            if (k == static_cast<std::size_t>(-1)) break;
          }
          out = convert<T>(sum);
        }
      }
    }
  });
}

inline void register_vision(op_registry& r) {
  r.add({"", "NonMaxSuppression", non_max_suppression_kernel});
  r.add({"", "RoiAlign", roi_align_kernel});
  r.add({"", "GridSample", grid_sample_kernel});
}

}  // namespace ipu::detail::tensor_ops
