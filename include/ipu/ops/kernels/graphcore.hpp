#pragma once
// Kernels of the graphcore family (ops/families/graphcore.hpp): PopART's ai.graphcore helper ops.
// The dynamic ops clamp each offset to [0, dim - size] and check the window against the tensors
// they are given, so no offset or attribute reaches memory outside them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "ipu/log.hpp"
#include "ipu/ops/kernels/ctc_decoder.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

inline void nop_kernel(const kernel_context& ctx) { copy_whole(ctx, 0, 0); }

/// numpy-like nesting: "[[1, 2], [3, 4]]"; floats with 6 significant digits.
inline std::string format_tensor(const kernel_context& ctx, const const_tensor_view& v) {
  const auto& s = v.info().shape;
  const auto n = v.info().num_elements();
  std::ostringstream os;
  visit_type(v.info().type, ctx, [&]<class T>() {
    const T* p = data_as<T>(v);
    auto put = [&](std::int64_t i) {
      if constexpr (std::is_same_v<T, bool>) os << (p[i] ? "true" : "false");
      else if constexpr (std::is_same_v<T, half>) os << static_cast<float>(p[i]);
      else if constexpr (sizeof(T) == 1) os << static_cast<int>(p[i]);
      else os << p[i];
    };
    if (s.rank() == 0) {
      put(0);
      return;
    }
    // Axis a's brackets open and close every block[a] elements (its stride times its length).
    auto block = s.strides();
    for (std::size_t a = 0; a < s.rank(); ++a) block[a] *= s[a];
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::size_t a = 0; a < s.rank(); ++a)
        if (i % block[a] == 0) os << '[';
      put(i);
      std::size_t closed = 0;
      for (std::size_t a = s.rank(); a-- > 0;) {
        if ((i + 1) % block[a] != 0) break;
        os << ']';
        ++closed;
      }
      if (i + 1 < n) os << (closed == 0 ? ", " : ",\n" + std::string(s.rank() - closed, ' '));
    }
    if (n == 0) os << std::string(s.rank(), '[') << std::string(s.rank(), ']');
  });
  return os.str();
}

/// Copies x through and prints "title: values".
inline void print_tensor_kernel(const kernel_context& ctx) {
  copy_whole(ctx, 0, 0);
  log::print(ctx.attr_string("title") + ": " + format_tensor(ctx, ctx.input(0)));
}

/// The window of a dynamic op on tensor `t`: its start (offsets clamped) and extent on every axis.
struct dynamic_region {
  std::vector<std::int64_t> start, extent;
};
inline dynamic_region dynamic_region_of(const kernel_context& ctx, const shape& t) {
  const auto axes = ctx.attr_ints("axes"), sizes = ctx.attr_ints("sizes");
  auto offsets = read_ints(ctx, ctx.input(1), "offset");
  if (ctx.input(1).info().type == data_type::U64) {
    // read_ints wraps UINT64 values above INT64_MAX to negatives; they are too large, not negative.
    const auto* raw = data_as<std::uint64_t>(ctx.input(1));
    for (std::size_t i = 0; i < offsets.size(); ++i)
      if (raw[i] > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        offsets[i] = std::numeric_limits<std::int64_t>::max();
  }
  if (axes.empty() || axes.size() != sizes.size() || offsets.size() != axes.size())
    throw ctx.fail(std::to_string(axes.size()) + " axes, " + std::to_string(sizes.size()) + " sizes and " +
                       std::to_string(offsets.size()) + " offsets",
                   "give one size and one offset per axis");
  dynamic_region r{std::vector<std::int64_t>(t.rank(), 0), t.dims()};
  std::vector<bool> seen(t.rank(), false);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto a = normalize_axis(ctx, axes[i], t.rank());
    if (seen[a] || sizes[i] < 1 || sizes[i] > t[a])
      throw ctx.fail("axis " + std::to_string(a) + " is repeated or its size " + std::to_string(sizes[i]) +
                         " is outside [1, " + std::to_string(t[a]) + "]",
                     "name each axis once with a size between 1 and its length");
    seen[a] = true;
    r.extent[a] = sizes[i];
    r.start[a] = std::clamp<std::int64_t>(offsets[i], 0, t[a] - sizes[i]);  // out-of-range offsets clamp
  }
  return r;
}

/// Calls f(offset in t, offset in the window, run length) for each innermost run of the window
/// (elements, not bytes).
template <class F>
void for_each_run(const shape& t, const dynamic_region& r, F&& f) {
  const auto rank = t.rank();
  if (rank == 0) return f(std::int64_t{0}, std::int64_t{0}, std::int64_t{1});
  for (auto e : r.extent)
    if (e == 0) return;
  const auto ts = t.strides();
  const auto run = r.extent[rank - 1];
  std::vector<std::int64_t> at(rank, 0);
  std::int64_t w = 0;
  for (;;) {
    std::int64_t off = 0;
    for (std::size_t a = 0; a < rank; ++a) off += (r.start[a] + at[a]) * ts[a];
    f(off, w, run);
    w += run;
    std::size_t a = rank - 1;
    for (;;) {
      if (a == 0) return;
      --a;
      if (++at[a] < r.extent[a]) break;
      at[a] = 0;
    }
  }
}

inline void check_window(const kernel_context& ctx, const tensor_info& window, const tensor_info& t,
                         const dynamic_region& r) {
  if (window.type != t.type || window.shape != shape(r.extent))
    throw ctx.fail("the slice is " + to_string(window) + " but the window of " + to_string(t) + " is " +
                       to_string(shape(r.extent)),
                   "give a slice with the sizes on `axes` and t's dimensions elsewhere");
}

inline void dynamic_slice_kernel(const kernel_context& ctx) {
  const auto t = ctx.input(0);
  const auto r = dynamic_region_of(ctx, t.info().shape);
  const auto& y = ctx.outputs[0];
  check_window(ctx, y.info(), t.info(), r);
  const auto es = static_cast<std::int64_t>(size_of(t.info().type));
  for_each_run(t.info().shape, r, [&](std::int64_t from, std::int64_t to, std::int64_t n) {
    std::memcpy(y.data() + to * es, t.data() + from * es, static_cast<std::size_t>(n * es));
  });
}

/// DynamicUpdate (add false) and DynamicAdd (add true): t copied to the output, then the slice
/// written or added into the window.
template <bool add>
void dynamic_update_kernel(const kernel_context& ctx) {
  const auto t = ctx.input(0), s = ctx.input(2);
  const auto r = dynamic_region_of(ctx, t.info().shape);
  check_window(ctx, s.info(), t.info(), r);
  copy_whole(ctx, 0, 0);
  const auto& y = ctx.outputs[0];
  if constexpr (add) {
    visit_numeric(t.info().type, ctx, [&]<class T>() {
      T* out = data_as<T>(y);
      const T* in = data_as<T>(s);
      for_each_run(t.info().shape, r, [&](std::int64_t at, std::int64_t from, std::int64_t n) {
        for (std::int64_t k = 0; k < n; ++k) {
          if constexpr (std::is_same_v<T, half>)
            out[at + k] = half(static_cast<float>(out[at + k]) + static_cast<float>(in[from + k]));
          else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)  // wraps like numpy, no UB
            out[at + k] = static_cast<T>(static_cast<std::make_unsigned_t<T>>(out[at + k]) +
                                         static_cast<std::make_unsigned_t<T>>(in[from + k]));
          else
            out[at + k] = static_cast<T>(out[at + k] + in[from + k]);
        }
      });
    });
  } else {
    const auto es = static_cast<std::int64_t>(size_of(t.info().type));
    for_each_run(t.info().shape, r, [&](std::int64_t at, std::int64_t from, std::int64_t n) {
      std::memcpy(y.data() + at * es, s.data() + from * es, static_cast<std::size_t>(n * es));
    });
  }
}

/// GroupNormalization over X [N, C, ...]: each sample's C / G consecutive channels (with their
/// spatial elements, contiguous) share a mean and variance (population, eps added), in double.
inline void group_norm_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0), scale = ctx.input(1), bias = ctx.input(2);
  const auto& s = x.info().shape;
  const auto groups = ctx.attr_int("num_groups", 0);
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  // The types are checked too: every buffer is read as X's type (a PopEF graph is not re-inferred).
  const bool fits = s.rank() >= 2 && groups >= 1 && groups <= s[1] && s[1] % groups == 0;
  if (!fits || scale.info() != tensor_info{x.info().type, shape{s[1]}} ||
      bias.info() != tensor_info{x.info().type, shape{s[1]}} || ctx.outputs[0].info() != x.info())
    throw ctx.fail("num_groups " + std::to_string(groups) + " does not fit X " + to_string(x.info()) + ", scale " +
                       to_string(scale.info()) + " and bias " + to_string(bias.info()),
                   "give num_groups dividing the channels and one scale and bias per channel");
  const auto n = s[0], channels = s[1], spatial = s.num_elements() / std::max<std::int64_t>(n * channels, 1);
  const auto per_group = channels / groups * spatial;
  const bool want_mean = has_output(ctx, 1), want_inv = has_output(ctx, 2);
  for (std::size_t o : {std::size_t{1}, std::size_t{2}})
    if (has_output(ctx, o) &&
        (ctx.outputs[o].info().num_elements() != n * groups || ctx.outputs[o].info().type != x.info().type))
      throw ctx.fail("output #" + std::to_string(o) + " is " + to_string(ctx.outputs[o].info()) + ", not [N * num_groups]");
  visit_float(x.info().type, ctx, [&]<class T>() {
    const T* in = data_as<T>(x);
    const T* sc = data_as<T>(scale);
    const T* b = data_as<T>(bias);
    T* y = data_as<T>(ctx.outputs[0]);
    for (std::int64_t g = 0; g < n * groups; ++g) {
      const auto base = g * per_group;
      double sum = 0;
      for (std::int64_t k = 0; k < per_group; ++k) sum += convert<double>(in[base + k]);
      const double mean = per_group ? sum / static_cast<double>(per_group) : 0.0;
      double sq = 0;
      for (std::int64_t k = 0; k < per_group; ++k) {
        const double d = convert<double>(in[base + k]) - mean;
        sq += d * d;
      }
      const double inv = 1.0 / std::sqrt((per_group ? sq / static_cast<double>(per_group) : 0.0) + eps);
      for (std::int64_t k = 0; k < per_group; ++k) {
        const auto c = (g % groups) * (channels / groups) + k / spatial;
        const double v = (convert<double>(in[base + k]) - mean) * inv * convert<double>(sc[c]) +
                         convert<double>(b[c]);
        y[base + k] = convert<T>(v);
      }
      if (want_mean) data_as<T>(ctx.outputs[1])[g] = convert<T>(mean);
      if (want_inv) data_as<T>(ctx.outputs[2])[g] = convert<T>(inv);
    }
  });
}

inline void register_graphcore(op_registry& r) {
  r.add({"ai.graphcore", "Nop", nop_kernel, true});
  r.add({"ai.graphcore", "PrintTensor", print_tensor_kernel, true});
  r.add({"ai.graphcore", "DynamicSlice", dynamic_slice_kernel, true});
  r.add({"ai.graphcore", "DynamicUpdate", dynamic_update_kernel<false>, true});
  r.add({"ai.graphcore", "DynamicAdd", dynamic_update_kernel<true>, true});
  r.add({"ai.graphcore", "GroupNormalization", group_norm_kernel});
  register_ctc_decoder_kernels(r);
}

}  // namespace ipu::detail::tensor_ops
