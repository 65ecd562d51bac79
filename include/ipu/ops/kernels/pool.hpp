#pragma once
// Pooling: MaxPool (with dilations, ceil_mode, the Indices output and storage_order),
// AveragePool (count_include_pad), LpPool and the global pools, over 1-D to 3-D spatial data;
// MaxUnpool, which puts MaxPool's values back where its Indices say.
// Windows are clipped to the input; the output shape comes from the IR and is checked against
// the attributes (floor or ceil rounding).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ipu/ops/kernels/numeric.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/kernels/vector_isa.hpp"
#include "ipu/ops/kernels/window.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

enum class pool_kind { max, average, lp };

/// Checks the IR's output size against the window: floor rounding, or with ceil_mode ceil
/// rounding (also the PyTorch variant that drops a last window starting in the end padding).
inline void check_pool_output(const kernel_context& ctx, const window_geometry& g, bool ceil_mode, const shape& y) {
  for (std::size_t d = 0; d < window_geometry::max_rank; ++d) {
    const std::int64_t span = g.in[d] + g.pad_begin[d] + g.pad_end[d] - g.extent(d);
    if (span < 0)
      throw ctx.fail("the pooling window is larger than the padded input " + std::to_string(g.in[d]),
                     "use a smaller kernel or more padding");
    const std::int64_t fl = span / g.stride[d] + 1;
    const std::int64_t ce = ceil_div(span, g.stride[d]) + 1;
    const bool ok = g.out[d] == fl || (ceil_mode && (g.out[d] == ce || g.out[d] == ce - 1));
    if (!ok)
      throw ctx.fail("output " + to_string(y) + " does not match the input, kernel_shape, strides, pads and ceil_mode",
                     "fix the output shape in the model");
  }
}

/// Taps t in [lo, hi) of the window at output `o` along `d` that read inside the input; also the
/// count of taps inside the padded input (for count_include_pad).
struct tap_range {
  std::int64_t lo, hi, padded;
};
inline tap_range taps(const window_geometry& g, std::size_t d, std::int64_t o) noexcept {
  const std::int64_t start = o * g.stride[d] - g.pad_begin[d];
  const std::int64_t lo = std::max<std::int64_t>(0, ceil_div(-start, g.dilation[d]));
  const std::int64_t hi = std::min<std::int64_t>(g.kernel[d], floor_div(g.in[d] - 1 - start, g.dilation[d]) + 1);
  const std::int64_t plo = std::max<std::int64_t>(0, ceil_div(-g.pad_begin[d] - start, g.dilation[d]));
  const std::int64_t phi =
      std::min<std::int64_t>(g.kernel[d], floor_div(g.in[d] + g.pad_end[d] - 1 - start, g.dilation[d]) + 1);
  return {lo, std::max(lo, hi), std::max<std::int64_t>(0, phi - plo)};
}

/// MaxPool with the Indices output: one window at a time, remembering where the maximum was.
template <class T>
void max_pool_with_indices(const kernel_context& ctx, const T* x, T* y, std::int64_t* indices, std::int64_t planes,
                           const window_geometry& g, const std::array<std::vector<tap_range>, 3>& tab,
                           bool column_major) {
  using C = compute_t<T>;
  const std::int64_t s_in = g.in_size(), s_out = g.out_size();
  parallel_blocks(ctx, static_cast<std::size_t>(planes),
                  std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(1, s_out) / g.kernel_size()),
                  [&](std::size_t p0, std::size_t p1) {
    for (auto pl = static_cast<std::int64_t>(p0); pl < static_cast<std::int64_t>(p1); ++pl) {
      const T* xp = x + pl * s_in;
      for (std::int64_t od = 0; od < g.out[0]; ++od) {
        const auto td = tab[0][static_cast<std::size_t>(od)];
        const std::int64_t sd = od * g.stride[0] - g.pad_begin[0];
        for (std::int64_t oh = 0; oh < g.out[1]; ++oh) {
          const auto th = tab[1][static_cast<std::size_t>(oh)];
          const std::int64_t sh = oh * g.stride[1] - g.pad_begin[1];
          for (std::int64_t ow = 0; ow < g.out[2]; ++ow) {
            const auto tw = tab[2][static_cast<std::size_t>(ow)];
            const std::int64_t sw = ow * g.stride[2] - g.pad_begin[2];
            const std::int64_t o = pl * s_out + (od * g.out[1] + oh) * g.out[2] + ow;
            C best = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                         : std::numeric_limits<C>::lowest();
            std::int64_t arg = -1;
            for (std::int64_t a = td.lo; a < td.hi; ++a) {
              const std::int64_t id = sd + a * g.dilation[0];
              for (std::int64_t b = th.lo; b < th.hi; ++b) {
                const std::int64_t ih = sh + b * g.dilation[1];
                const T* row = xp + (id * g.in[1] + ih) * g.in[2];
                for (std::int64_t c = tw.lo; c < tw.hi; ++c) {
                  const std::int64_t iw = sw + c * g.dilation[2];
                  const C v = widen(row[iw]);
                  // NaN propagates (like PyTorch): once taken, nothing compares greater.
                  if (arg < 0 || v > best || (v != v && best == best)) {
                    best = v;
                    arg = column_major ? id + g.in[0] * (ih + g.in[1] * iw) : (id * g.in[1] + ih) * g.in[2] + iw;
                  }
                }
              }
            }
            y[o] = narrow<T>(best);
            indices[o] = arg < 0 ? -1 : pl * s_in + arg;
          }
        }
      }
    }
  });
}

/// Per kernel column of a window: the outputs of a row it reaches, [lo, hi), and its input offset
/// (the row-at-a-time pooling loops walk these).
inline std::vector<std::array<std::int64_t, 3>> row_columns(const window_geometry& g) {
  std::vector<std::array<std::int64_t, 3>> columns;
  for (std::int64_t c = 0; c < g.kernel[2]; ++c) {
    const auto [lo, hi] = g.valid_range(2, c);
    columns.push_back({lo, hi, c * g.dilation[2] - g.pad_begin[2]});
  }
  return columns;
}

/// MaxPool with row-major Indices, one output row at a time like pool_rows: every tap updates the
/// row's best values and which tap they came from. Each output still sees its taps in window order
/// (depth, row, column), so ties and NaNs pick the same element as the window-at-a-time loop.
/// Each input row is first split by column modulo the stride (widened to the compute type), so a
/// tap reads a contiguous run and the update loop is branch-free and vectorisable; the winning tap
/// is a 32-bit number turned into the flat index once per output.
template <class T>
void max_pool_rows_with_indices(const kernel_context& ctx, const T* x, T* y, std::int64_t* indices,
                                std::int64_t planes, const window_geometry& g,
                                const std::array<std::vector<tap_range>, 3>& tab) {
  using C = compute_t<T>;
  const std::int64_t s_in = g.in_size(), s_out = g.out_size(), ow_n = g.out[2], in_w = g.in[2];
  const std::int64_t sw = g.stride[2];
  // Phase p of a row holds its columns p, p + sw, p + 2 sw, ...: `len` each.
  const std::int64_t len = ceil_div(in_w, sw);
  struct column {
    std::int64_t lo, hi, at;  // the outputs it reaches and where output o's value sits: phases[at + o]
    std::int64_t offset;      // output o's input column: o * sw + offset
  };
  std::vector<column> columns;
  for (const auto& [lo, hi, base] : row_columns(g)) {
    const std::int64_t q = floor_div(base, sw);
    columns.push_back({lo, hi, (base - q * sw) * len + q, base});
  }
  const C lowest = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                        : std::numeric_limits<C>::lowest();
  parallel_blocks(ctx, static_cast<std::size_t>(planes),
                  std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(1, s_out) / g.kernel_size()),
                  [&](std::size_t p0, std::size_t p1) {
    std::vector<C> best(static_cast<std::size_t>(ow_n)), phases(static_cast<std::size_t>(sw * len));
    std::vector<std::int32_t> arg(static_cast<std::size_t>(ow_n));
    std::vector<std::int64_t> tap_offset;  // per tap of the current output row: its row start + column offset
    for (auto pl = static_cast<std::int64_t>(p0); pl < static_cast<std::int64_t>(p1); ++pl) {
      const T* xp = x + pl * s_in;
      for (std::int64_t od = 0; od < g.out[0]; ++od) {
        const auto td = tab[0][static_cast<std::size_t>(od)];
        const std::int64_t sd = od * g.stride[0] - g.pad_begin[0];
        for (std::int64_t oh = 0; oh < g.out[1]; ++oh) {
          const auto th = tab[1][static_cast<std::size_t>(oh)];
          const std::int64_t sh = oh * g.stride[1] - g.pad_begin[1];
          C* r = best.data();
          std::int32_t* ar = arg.data();
          C* ph = phases.data();
          std::fill(ar, ar + ow_n, std::int32_t{-1});
          std::fill(r, r + ow_n, lowest);
          tap_offset.clear();
          for (std::int64_t a = td.lo; a < td.hi; ++a) {
            const std::int64_t id = sd + a * g.dilation[0];
            for (std::int64_t b = th.lo; b < th.hi; ++b) {
              const std::int64_t row_start = (id * g.in[1] + sh + b * g.dilation[1]) * in_w;
              const T* row = xp + row_start;
              for (std::int64_t p = 0; p < sw; ++p)
                for (std::int64_t j = 0, w = p; w < in_w; ++j, w += sw) ph[p * len + j] = widen(row[w]);
              for (const auto& col : columns) {
                const auto k = static_cast<std::int32_t>(tap_offset.size());
                tap_offset.push_back(row_start + col.offset);
                // Indexed from ph itself: col.at is negative for a padded first column.
                const std::int64_t at = col.at;
                for (std::int64_t o = col.lo; o < col.hi; ++o) {
                  const C v = ph[at + o];
                  // NaN propagates (like PyTorch): once taken, nothing compares greater. Bitwise
                  // ors: no branches, so the loop vectorises.
                  const bool take = (ar[o] < 0) | (v > r[o]) | ((v != v) & (r[o] == r[o]));
                  r[o] = take ? v : r[o];
                  ar[o] = take ? k : ar[o];
                }
              }
            }
          }
          const std::int64_t o0 = pl * s_out + (od * g.out[1] + oh) * ow_n;
          for (std::int64_t o = 0; o < ow_n; ++o) {
            y[o0 + o] = narrow<T>(r[o]);
            indices[o0 + o] = ar[o] < 0 ? -1 : pl * s_in + tap_offset[static_cast<std::size_t>(ar[o])] + o * sw;
          }
        }
      }
    }
  });
}

/// Pooling without indices, one output row at a time: every tap of the window updates the whole
/// row (a contiguous, branch-free loop), the way the depthwise convolution accumulates.
template <pool_kind Kind, class T>
void pool_rows(const kernel_context& ctx, const T* x, T* y, std::int64_t planes, const window_geometry& g,
               const std::array<std::vector<tap_range>, 3>& tab, bool count_include_pad, double p) {
  using C = compute_t<T>;
  // Max runs in the compute type (exact); sums accumulate in double.
  using A = std::conditional_t<Kind == pool_kind::max, C, double>;
  const std::int64_t s_in = g.in_size(), s_out = g.out_size(), ow_n = g.out[2];
  const auto columns = row_columns(g);
  const std::int64_t sw = g.stride[2];
  const A init = Kind == pool_kind::max ? (std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity()
                                                                                : std::numeric_limits<A>::lowest())
                                        : A{0};
  parallel_blocks(ctx, static_cast<std::size_t>(planes),
                  std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(1, s_out) / g.kernel_size()),
                  [&](std::size_t p0, std::size_t p1) {
    std::vector<A> acc(static_cast<std::size_t>(ow_n));
    for (auto pl = static_cast<std::int64_t>(p0); pl < static_cast<std::int64_t>(p1); ++pl) {
      const T* xp = x + pl * s_in;
      for (std::int64_t od = 0; od < g.out[0]; ++od) {
        const auto td = tab[0][static_cast<std::size_t>(od)];
        const std::int64_t sd = od * g.stride[0] - g.pad_begin[0];
        for (std::int64_t oh = 0; oh < g.out[1]; ++oh) {
          const auto th = tab[1][static_cast<std::size_t>(oh)];
          const std::int64_t sh = oh * g.stride[1] - g.pad_begin[1];
          A* r = acc.data();
          std::fill(r, r + ow_n, init);
          for (std::int64_t a = td.lo; a < td.hi; ++a) {
            const std::int64_t id = sd + a * g.dilation[0];
            for (std::int64_t b = th.lo; b < th.hi; ++b) {
              const T* row = xp + (id * g.in[1] + sh + b * g.dilation[1]) * g.in[2];
              for (const auto& [lo, hi, base] : columns) {
                const T* src = row + base;
                for (std::int64_t o = lo; o < hi; ++o) {
                  const A v = static_cast<A>(widen(src[o * sw]));
                  if constexpr (Kind == pool_kind::max)
                    r[o] = (v > r[o] || v != v) ? v : r[o];  // NaN wins, and nothing replaces it
                  else if constexpr (Kind == pool_kind::average)
                    r[o] += v;
                  else
                    r[o] += p == 2.0 ? v * v : p == 1.0 ? std::fabs(v) : std::pow(std::fabs(v), p);
                }
              }
            }
          }
          T* out = y + pl * s_out + (od * g.out[1] + oh) * ow_n;
          for (std::int64_t o = 0; o < ow_n; ++o) {
            if constexpr (Kind == pool_kind::max) {
              out[o] = narrow<T>(r[o]);
            } else if constexpr (Kind == pool_kind::average) {
              const auto tw = tab[2][static_cast<std::size_t>(o)];
              const std::int64_t count = count_include_pad ? td.padded * th.padded * tw.padded
                                                           : (td.hi - td.lo) * (th.hi - th.lo) * (tw.hi - tw.lo);
              out[o] = narrow<T>(static_cast<C>(count > 0 ? r[o] / static_cast<double>(count) : 0.0));
            } else {
              out[o] = narrow<T>(static_cast<C>(p == 2.0 ? std::sqrt(r[o]) : p == 1.0 ? r[o] : std::pow(r[o], 1.0 / p)));
            }
          }
        }
      }
    }
  });
}

template <pool_kind Kind, class T>
void pool_planes(const kernel_context& ctx, const T* x, T* y, std::int64_t* indices, std::int64_t planes,
                 const window_geometry& g, bool count_include_pad, bool column_major, double p) {
  // Tap ranges per output index and dimension, computed once (they cost divisions).
  std::array<std::vector<tap_range>, window_geometry::max_rank> tab;
  for (std::size_t d = 0; d < window_geometry::max_rank; ++d)
    for (std::int64_t o = 0; o < g.out[d]; ++o) tab[d].push_back(taps(g, d, o));
  // The row loop numbers a row's taps in 32 bits and splits an input row into `stride` phases:
  // a huge window or a stride wider than the row takes the window-at-a-time loop.
  const bool rows = g.kernel_size() <= std::numeric_limits<std::int32_t>::max() && g.stride[2] <= g.in[2];
  if (Kind == pool_kind::max && indices && !column_major && rows)
    max_pool_rows_with_indices(ctx, x, y, indices, planes, g, tab);
  else if (Kind == pool_kind::max && indices)
    max_pool_with_indices(ctx, x, y, indices, planes, g, tab, column_major);
  else
    pool_rows<Kind>(ctx, x, y, planes, g, tab, count_include_pad, p);
}

template <pool_kind Kind>
void pool_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto y = output(ctx, 0);
  const shape& sx = x.info().shape;
  const shape& sy = y.info().shape;
  if (!ctx.has_attr("kernel_shape")) throw ctx.fail("attribute kernel_shape is missing", "give the pooling window size");
  const auto g = make_window_geometry(ctx, sx, sy, ctx.attr_ints("kernel_shape"));
  const bool ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
  check_pool_output(ctx, g, ceil_mode, sy);
  if (sy[0] != sx[0] || sy[1] != sx[1])
    throw ctx.fail("output " + to_string(sy) + " and input " + to_string(sx) + " differ in batch or channels",
                   "fix the output shape in the model");
  const bool count_include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  const bool column_major = ctx.attr_int("storage_order", 0) != 0;
  const double p = static_cast<double>(ctx.attr_int("p", 2));
  if (Kind == pool_kind::lp && p <= 0) throw ctx.fail("attribute p is not positive", "use p >= 1");
  std::int64_t* indices = nullptr;
  if (Kind == pool_kind::max && has_output(ctx, 1)) {
    const auto iv = ctx.outputs[1];
    if (iv.info().type != data_type::S64 || iv.info().shape != sy)
      throw ctx.fail("Indices output is " + to_string(iv.info()) + ", expected S64" + to_string(sy),
                     "fix the Indices output in the model");
    indices = iv.as<std::int64_t>().data();
  }
  if (sy.num_elements() == 0) return;
  const std::int64_t planes = sx[0] * sx[1];
  constexpr auto types = [] {
    if constexpr (Kind == pool_kind::max)
      return float_types + type_list<std::int8_t, std::uint8_t>{};  // inside: clang 14 will not capture a local
    else
      return float_types;
  }();
  visit(types, x.info().type, ctx, [&]<class T>() {
    pool_planes<Kind, T>(ctx, x.as<T>().data(), y.as<T>().data(), indices, planes, g, count_include_pad,
                         column_major, p);
  });
}

/// GlobalAveragePool / GlobalMaxPool / GlobalLpPool: one value per (batch, channel) plane.
template <pool_kind Kind>
void global_pool_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto y = output(ctx, 0);
  const shape& sx = x.info().shape;
  if (sx.rank() < 2) throw ctx.fail("input " + to_string(sx) + " has no channel dimension", "give [N, C, ...]");
  const std::int64_t planes = sx[0] * sx[1];
  const std::int64_t size = planes == 0 ? 0 : sx.num_elements() / planes;
  if (y.info().num_elements() != planes)
    throw ctx.fail("output " + to_string(y.info().shape) + " should hold one value per (batch, channel)",
                   "fix the output shape in the model");
  if (planes == 0) return;
  const double p = static_cast<double>(ctx.attr_int("p", 2));
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    const T* in = x.as<T>().data();
    T* out = y.as<T>().data();
    vectorised_blocks(ctx, static_cast<std::size_t>(planes), std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(size, 1)),
                      [&](std::size_t b, std::size_t e) {
                      for (std::size_t pl = b; pl < e; ++pl) {
                        const T* v = in + static_cast<std::int64_t>(pl) * size;
                        double r = 0.0;
                        if constexpr (Kind == pool_kind::max) {
                          r = -std::numeric_limits<double>::infinity();
                          for (std::int64_t i = 0; i < size; ++i) {
                            const double c = static_cast<double>(widen(v[i]));
                            if (c > r || c != c) r = c;
                            if (r != r) break;
                          }
                        } else if constexpr (Kind == pool_kind::average) {
                          // Eight running sums, not one: a single chain of dependent double adds
                          // took 4 cycles an element (EfficientNet's 17 squeeze-excitation pools
                          // cost 7% of its run); lane-wise sums vectorise without reassociating.
                          double part[8] = {};
                          std::int64_t i = 0;
                          for (; i + 8 <= size; i += 8)
                            for (int l = 0; l < 8; ++l) part[l] += static_cast<double>(widen(v[i + l]));
                          r = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
                          for (; i < size; ++i) r += static_cast<double>(widen(v[i]));
                          r /= static_cast<double>(size);
                        } else {
                          for (std::int64_t i = 0; i < size; ++i) r += std::pow(std::fabs(static_cast<double>(widen(v[i]))), p);
                          r = std::pow(r, 1.0 / p);
                        }
                        out[pl] = narrow<T>(static_cast<compute_t<T>>(r));
                      }
                    });
  });
}

/// MaxUnpool: Y is zeros but for X[e] at flat position I[e]. The indices, as MaxPool computes
/// them, address the tensor MaxPool read ((in - 1) * stride - pads + kernel per axis); with an
/// output_shape at least that large, that tensor sits at Y's origin (the ONNX reference's
/// reading). Any element type: values are moved, not computed.
inline void max_unpool_kernel(const kernel_context& ctx) {
  tensor_ops::only_attributes(ctx, {"kernel_shape", "pads", "strides"});
  const auto x = ctx.input(0);
  const auto idx = ctx.input(1);
  const auto& xs = x.info().shape;
  if (xs.rank() < 3 || idx.info().shape != xs || idx.info().type != data_type::S64)
    throw ctx.fail("X must be [N, C, D1, ...] and I an INT64 tensor of X's shape, got " + to_string(x.info()) +
                       " and " + to_string(idx.info()),
                   "pass MaxPool's output and its Indices");
  const std::size_t spatial = xs.rank() - 2;
  if (!ctx.has_attr("kernel_shape")) throw ctx.fail("attribute kernel_shape is required", "set kernel_shape");
  const auto kernel = ctx.attr_ints("kernel_shape");
  const auto strides = ctx.attr_ints("strides", std::vector<std::int64_t>(spatial, 1));
  const auto pads = ctx.attr_ints("pads", std::vector<std::int64_t>(2 * spatial, 0));
  if (kernel.size() != spatial || strides.size() != spatial || pads.size() != 2 * spatial)
    throw ctx.fail("kernel_shape, strides and pads do not match X's " + std::to_string(spatial) + " spatial axes",
                   "give one kernel size and stride and two pads per spatial axis");
  std::vector<std::int64_t> unpooled{xs[0], xs[1]};
  for (std::size_t i = 0; i < spatial; ++i) {
    std::int64_t d = 0;
    if (kernel[i] < 1 || strides[i] < 1 || pads[i] < 0 || pads[i + spatial] < 0 || xs[i + 2] < 1 ||
        __builtin_mul_overflow(xs[i + 2] - 1, strides[i], &d) || __builtin_add_overflow(d, kernel[i], &d) ||
        __builtin_sub_overflow(d, pads[i], &d) || __builtin_sub_overflow(d, pads[i + spatial], &d) || d < 1)
      throw ctx.fail("kernel_shape, strides and pads give no valid unpooled size for X " + to_string(x.info()),
                     "give positive kernel sizes and strides and non-negative pads");
    unpooled.push_back(d);
  }
  const shape inner(unpooled);  // throws if the sizes overflow
  std::vector<std::int64_t> target = unpooled;
  if (ctx.has_input(2)) {
    const auto given = ctx.inputs[2];
    if (given.info().type != data_type::S64 || given.info().shape.rank() != 1 ||
        given.info().shape[0] != static_cast<std::int64_t>(xs.rank()))
      throw ctx.fail("output_shape must be an INT64 vector of X's rank, got " + to_string(given.info()),
                     "give one size per axis of X");
    target.assign(reinterpret_cast<const std::int64_t*>(given.data()),
                  reinterpret_cast<const std::int64_t*>(given.data()) + xs.rank());
    for (std::size_t k = 0; k < xs.rank(); ++k)
      if (target[k] < unpooled[k] || (k < 2 && target[k] != unpooled[k]))
        throw ctx.fail("output_shape " + to_string(shape(target)) + " is smaller than " + to_string(inner) +
                           ", the tensor the indices address, or changes N or C",
                       "give an output_shape at least (in - 1) * stride - pads + kernel on every spatial axis");
  }
  if (ctx.outputs[0].info().shape != shape(target) || ctx.outputs[0].info().type != x.info().type)
    throw ctx.fail("Y is " + to_string(ctx.outputs[0].info()) + " in the IR, but X, the attributes and output_shape give " +
                       to_string(tensor_info{x.info().type, shape(target)}),
                   "re-run shape inference with these input values");
  const std::size_t esize = size_of(x.info().type);
  std::byte* y = ctx.outputs[0].data();
  if (ctx.outputs[0].info().num_bytes()) std::memset(y, 0, ctx.outputs[0].info().num_bytes());
  const auto total = inner.num_elements();
  const auto in_strides = inner.strides(), out_strides = shape(target).strides();
  const auto* ip = reinterpret_cast<const std::int64_t*>(idx.data());
  for (std::int64_t e = 0; e < xs.num_elements(); ++e) {
    std::int64_t j = ip[e];
    if (j < 0 || j >= total)
      throw ctx.fail("index " + std::to_string(j) + " at element " + std::to_string(e) + " is outside [0, " +
                         std::to_string(total) + ") of the unpooled tensor " + to_string(inner),
                     "pass the Indices of the MaxPool that produced X");
    std::int64_t at = 0;
    for (std::size_t k = 0; k < xs.rank(); ++k) {
      at += j / in_strides[k] * out_strides[k];
      j %= in_strides[k];
    }
    std::memcpy(y + static_cast<std::size_t>(at) * esize, x.data() + static_cast<std::size_t>(e) * esize, esize);
  }
}

inline void register_pool_kernels(op_registry& r) {
  r.add({"", "MaxPool", &pool_kernel<pool_kind::max>});
  r.add({"", "AveragePool", &pool_kernel<pool_kind::average>});
  r.add({"", "LpPool", &pool_kernel<pool_kind::lp>});
  r.add({"", "GlobalMaxPool", &global_pool_kernel<pool_kind::max>});
  r.add({"", "GlobalAveragePool", &global_pool_kernel<pool_kind::average>});
  r.add({"", "GlobalLpPool", &global_pool_kernel<pool_kind::lp>});
  r.add({"", "MaxUnpool", &max_unpool_kernel});
}

}  // namespace ipu::detail::math_ops
