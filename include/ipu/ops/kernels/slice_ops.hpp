#pragma once
// Kernels that cut, join, pad or repeat tensors: Concat, Split, Slice, Pad, Expand, Tile. All move
// bytes only, so they work for every element type.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

inline void concat_kernel(const kernel_context& ctx) {
  const auto& out = ctx.outputs[0];
  const auto& os = out.info().shape;
  const std::size_t r = os.rank();
  const std::size_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), r);
  const std::size_t esize = size_of(out.info().type);
  std::int64_t outer = 1, inner = 1, total = 0;
  for (std::size_t k = 0; k < axis; ++k) outer *= os[k];
  for (std::size_t k = axis + 1; k < r; ++k) inner *= os[k];
  std::vector<std::size_t> chunk;  // bytes each input contributes per outer step
  for (std::size_t i = 0; i < ctx.inputs.size(); ++i) {
    const auto& is = ctx.inputs[i].info().shape;
    bool ok = is.rank() == r && ctx.inputs[i].info().type == out.info().type;
    for (std::size_t k = 0; ok && k < r; ++k) ok = k == axis || is[k] == os[k];
    if (!ok)
      throw ctx.fail("input #" + std::to_string(i) + " " + to_string(ctx.inputs[i].info()) +
                         " does not match output " + to_string(out.info()) + " outside axis " + std::to_string(axis),
                     "concatenated tensors must agree on type and on every other dimension");
    total += is[axis];
    chunk.push_back(static_cast<std::size_t>(is[axis] * inner) * esize);
  }
  if (total != os[axis])
    throw ctx.fail("inputs add up to " + std::to_string(total) + " along axis " + std::to_string(axis) +
                       " but the output has " + std::to_string(os[axis]),
                   "fix the output shape in the IR");
  std::byte* dst = out.data();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      if (!chunk[i]) continue;
      std::memcpy(dst, ctx.inputs[i].data() + static_cast<std::size_t>(o) * chunk[i], chunk[i]);
      dst += chunk[i];
    }
}

/// Split: the part sizes are the outputs' sizes along the axis (the `split` input, when given,
/// must agree with them).
inline void split_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& is = x.info().shape;
  const std::size_t r = is.rank();
  const std::size_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), r);
  const std::size_t esize = size_of(x.info().type);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < axis; ++k) outer *= is[k];
  for (std::size_t k = axis + 1; k < r; ++k) inner *= is[k];
  const auto split = optional_ints(ctx, 1, "split");
  if (!split.empty() && split.size() != ctx.outputs.size())
    throw ctx.fail("split has " + std::to_string(split.size()) + " entries for " + std::to_string(ctx.outputs.size()) +
                       " outputs",
                   "give one size per output");
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < ctx.outputs.size(); ++i) {
    const auto& out = ctx.outputs[i];
    const auto& os = out.info().shape;
    bool ok = os.rank() == r && out.info().type == x.info().type;
    for (std::size_t k = 0; ok && k < r; ++k) ok = k == axis || is[k] == os[k];
    if (ok && !split.empty()) ok = split[i] == os[axis];
    if (!ok)
      throw ctx.fail("output #" + std::to_string(i) + " " + to_string(out.info()) + " does not fit input " +
                         to_string(x.info()) + (split.empty() ? "" : " split as given"),
                     "fix the split sizes or the output shapes in the IR");
    const auto part = static_cast<std::size_t>(os[axis] * inner) * esize;
    const auto row = static_cast<std::size_t>(is[axis] * inner) * esize;
    for (std::int64_t o = 0; o < outer && part; ++o)
      std::memcpy(out.data() + static_cast<std::size_t>(o) * part,
                  x.data() + static_cast<std::size_t>(o) * row + static_cast<std::size_t>(offset * inner) * esize, part);
    offset += os[axis];
  }
  if (offset != is[axis])
    throw ctx.fail("outputs cover " + std::to_string(offset) + " of " + std::to_string(is[axis]) + " along axis " +
                       std::to_string(axis),
                   "the split sizes must add up to the input dimension");
}

/// One axis of a Slice after ONNX's clamping rules.
struct slice_range {
  std::int64_t start = 0, step = 1, count = 0;
};

inline slice_range clamp_slice(std::int64_t start, std::int64_t end, std::int64_t step, std::int64_t dim) {
  slice_range s;
  s.step = step;
  if (dim == 0) return s;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<std::int64_t>(start, 0, dim);
    end = std::clamp<std::int64_t>(end, 0, dim);
    s.count = end > start ? (end - start + step - 1) / step : 0;
  } else {
    start = std::clamp<std::int64_t>(start, 0, dim - 1);
    end = std::clamp<std::int64_t>(end, -1, dim - 1);
    s.count = start > end ? (start - end - step - 1) / -step : 0;
  }
  s.start = start;
  return s;
}

inline void slice_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& is = x.info().shape;
  const std::size_t r = is.rank();
  const auto starts = read_ints(ctx, ctx.input(1), "starts");
  const auto ends = read_ints(ctx, ctx.input(2), "ends");
  auto axes = optional_ints(ctx, 3, "axes");
  auto steps = optional_ints(ctx, 4, "steps");
  if (axes.empty())
    for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    throw ctx.fail("starts, ends, axes and steps have different lengths", "give one entry per sliced axis");
  std::vector<slice_range> ranges(r);
  for (std::size_t k = 0; k < r; ++k) ranges[k] = {0, 1, is[k]};
  std::vector<bool> seen(r, false);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const auto a = normalize_axis(ctx, axes[i], r);
    if (seen[a]) throw ctx.fail("axis " + std::to_string(a) + " is sliced twice", "list each axis once");
    seen[a] = true;
    if (steps[i] == 0) throw ctx.fail("slice step is 0", "use a non-zero step");
    ranges[a] = clamp_slice(starts[i], ends[i], steps[i], is[a]);
  }
  axis_tables t;
  const auto st = is.strides();
  for (std::size_t k = 0; k < r; ++k) {
    t.dims.push_back(ranges[k].count);
    t.offsets.push_back(linear_table(ranges[k].count, ranges[k].start, ranges[k].step, st[k]));
  }
  check_output_shape(ctx, 0, shape(t.dims));
  gather_axes(ctx, t, x.data(), ctx.outputs[0].data(), size_of(x.info().type));
}

/// Pad: constant (with an optional value), edge, reflect or wrap; negative pads crop.
inline void pad_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& is = x.info().shape;
  const std::size_t r = is.rank();
  const auto pads = read_ints(ctx, ctx.input(1), "pads");
  auto axes = optional_ints(ctx, 3, "axes");
  if (axes.empty())
    for (std::size_t k = 0; k < r; ++k) axes.push_back(static_cast<std::int64_t>(k));
  if (pads.size() != 2 * axes.size())
    throw ctx.fail("pads has " + std::to_string(pads.size()) + " entries for " + std::to_string(axes.size()) + " axes",
                   "give a begin and an end pad per axis: [b_1, ..., b_n, e_1, ..., e_n]");
  std::vector<std::int64_t> begin(r, 0), end(r, 0);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto a = normalize_axis(ctx, axes[i], r);
    begin[a] = pads[i];
    end[a] = pads[i + axes.size()];
  }
  const std::string mode = ctx.attr_string("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
    throw ctx.fail("unknown Pad mode '" + mode + "'", "use constant, edge, reflect or wrap");
  // Pads are data: the padded shape is checked (overflow, then against the planned output) before
  // any table is sized from it.
  std::vector<std::int64_t> padded(r);
  for (std::size_t k = 0; k < r; ++k) {
    std::int64_t out = 0;
    if (__builtin_add_overflow(is[k], begin[k], &out) || __builtin_add_overflow(out, end[k], &out))
      throw ctx.fail("pads " + std::to_string(begin[k]) + " and " + std::to_string(end[k]) + " of axis " +
                         std::to_string(k) + " overflow its length", "give pads that fit the tensor");
    if (out < 0) throw ctx.fail("pads remove more than axis " + std::to_string(k) + " holds", "reduce the negative pads");
    padded[k] = out;
  }
  check_output_shape(ctx, 0, shape(padded));
  axis_tables t;
  const auto st = is.strides();
  for (std::size_t k = 0; k < r; ++k) {
    const std::int64_t n = is[k];
    const std::int64_t out = padded[k];
    if (mode != "constant" && n == 0 && out > 0)
      throw ctx.fail("cannot " + mode + "-pad the empty axis " + std::to_string(k), "use constant mode");
    std::vector<std::int64_t> tab(static_cast<std::size_t>(out));
    for (std::int64_t o = 0; o < out; ++o) {
      std::int64_t i = o - begin[k];
      if (i < 0 || i >= n) {
        if (mode == "constant") {
          i = outside;
        } else if (mode == "edge") {
          i = std::clamp<std::int64_t>(i, 0, n - 1);
        } else if (mode == "wrap") {
          i = ((i % n) + n) % n;
        } else if (n == 1) {
          i = 0;
        } else {  // reflect about the edge elements (which are not repeated)
          const std::int64_t period = 2 * (n - 1);
          i = ((i % period) + period) % period;
          if (i >= n) i = period - i;
        }
      }
      tab[static_cast<std::size_t>(o)] = i == outside ? outside : i * st[k];
    }
    t.dims.push_back(out);
    t.offsets.push_back(std::move(tab));
  }
  const std::size_t esize = size_of(x.info().type);
  std::vector<std::byte> value(esize, std::byte{0});
  if (ctx.has_input(2) && ctx.inputs[2].info().num_elements() > 0) {
    if (ctx.inputs[2].info().type != x.info().type)
      throw ctx.fail("constant_value is " + std::string(to_string(ctx.inputs[2].info().type)) + ", data is " +
                         std::string(to_string(x.info().type)),
                     "give constant_value the data's element type");
    std::memcpy(value.data(), ctx.inputs[2].data(), esize);
  }
  gather_axes(ctx, t, x.data(), ctx.outputs[0].data(), esize, value.data());
}

/// Expand: numpy broadcasting of the input to the output shape.
inline void expand_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& is = x.info().shape;
  const auto& os = ctx.outputs[0].info().shape;
  const auto requested = read_ints(ctx, ctx.input(1), "shape");
  // The result shape is broadcast(input, requested); check it against the IR.
  const std::size_t r = std::max(is.rank(), requested.size());
  std::vector<std::int64_t> dims(r);
  for (std::size_t k = 0; k < r; ++k) {
    const std::int64_t a = k + is.rank() >= r ? is[k + is.rank() - r] : 1;
    const std::int64_t b = k + requested.size() >= r ? requested[k + requested.size() - r] : 1;
    if (a != b && a != 1 && b != 1)
      throw ctx.fail("cannot broadcast input " + to_string(is) + " to the requested shape", "dimensions must match or be 1");
    dims[k] = a == 1 ? b : a;
  }
  check_output_shape(ctx, 0, shape(dims));
  if (is.num_elements() == 1) {
    // One value everywhere (the zeros a gradient scatters into): copied in doubling blocks rather than
    // element by element through the axis tables.
    const auto n = ctx.outputs[0].info().num_bytes();
    const auto e = size_of(x.info().type);
    std::byte* o = ctx.outputs[0].data();
    if (n == 0) return;
    std::memcpy(o, x.data(), e);
    for (std::size_t done = e; done < n;) {
      const auto c = std::min(done, n - done);
      std::memcpy(o + done, o, c);
      done += c;
    }
    return;
  }
  const auto st = is.strides();
  axis_tables t;
  for (std::size_t k = 0; k < r; ++k) {
    t.dims.push_back(os[k]);
    if (k + is.rank() < r) {
      t.offsets.emplace_back(static_cast<std::size_t>(os[k]), 0);
    } else {
      const std::size_t j = k + is.rank() - r;
      t.offsets.push_back(linear_table(os[k], 0, is[j] == 1 ? 0 : 1, st[j]));
    }
  }
  gather_axes(ctx, t, x.data(), ctx.outputs[0].data(), size_of(x.info().type));
}

/// Tile: output axis k of size repeats*n is viewed as two axes (repeat, n), the first broadcast.
inline void tile_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& is = x.info().shape;
  const auto repeats = read_ints(ctx, ctx.input(1), "repeats");
  if (repeats.size() != is.rank())
    throw ctx.fail("repeats has " + std::to_string(repeats.size()) + " entries for a rank-" + std::to_string(is.rank()) +
                       " input",
                   "give one repeat count per axis");
  // Repeats are data: the tiled shape is checked (overflow, then against the planned output)
  // before any table is sized from it.
  std::vector<std::int64_t> dims(is.rank());
  for (std::size_t k = 0; k < is.rank(); ++k) {
    if (repeats[k] < 0) throw ctx.fail("negative repeat count", "repeats must be >= 0");
    if (__builtin_mul_overflow(is[k], repeats[k], &dims[k]))
      throw ctx.fail("repeating axis " + std::to_string(k) + " " + std::to_string(repeats[k]) + " times overflows",
                     "give repeat counts that fit the tensor");
  }
  check_output_shape(ctx, 0, shape(dims));
  axis_tables t;
  const auto st = is.strides();
  for (std::size_t k = 0; k < is.rank(); ++k) {
    t.dims.push_back(repeats[k]);
    t.offsets.emplace_back(static_cast<std::size_t>(repeats[k]), 0);
    t.dims.push_back(is[k]);
    t.offsets.push_back(linear_table(is[k], 0, 1, st[k]));
  }
  gather_axes(ctx, t, x.data(), ctx.outputs[0].data(), size_of(x.info().type));
}

/// ReverseSequence: reverses the first sequence_lens[b] steps along the time axis of batch entry b.
inline void reverse_sequence_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& s = x.info().shape;
  check_output_shape(ctx, 0, s);
  const auto lens = read_ints(ctx, ctx.input(1), "sequence_lens");
  if (s.rank() < 2) throw ctx.fail("ReverseSequence needs an input of rank >= 2", "fix the input");
  const std::size_t time = normalize_axis(ctx, ctx.attr_int("time_axis", 0), s.rank());
  const std::size_t batch = normalize_axis(ctx, ctx.attr_int("batch_axis", 1), s.rank());
  if (time == batch || (time > 1 || batch > 1))
    throw ctx.fail("time_axis and batch_axis must be 0 and 1 in some order", "use time_axis/batch_axis 0 and 1");
  if (static_cast<std::int64_t>(lens.size()) != s[batch])
    throw ctx.fail("sequence_lens has " + std::to_string(lens.size()) + " entries for a batch of " + std::to_string(s[batch]),
                   "give one length per batch entry");
  for (auto l : lens)
    if (l < 0 || l > s[time]) throw ctx.fail("sequence length " + std::to_string(l) + " is out of range", "use [0, T]");
  // The two leading axes pick a row of `inner` contiguous elements; only the time index moves.
  const std::size_t esize = size_of(x.info().type);
  const std::int64_t inner = s.num_elements() / std::max<std::int64_t>(1, s[0] * s[1]);
  const auto row = static_cast<std::size_t>(inner) * esize;
  for (std::int64_t a = 0; a < s[0]; ++a)
    for (std::int64_t b = 0; b < s[1]; ++b) {
      const std::int64_t t = time == 0 ? a : b, n = time == 0 ? b : a;
      const std::int64_t len = lens[static_cast<std::size_t>(n)];
      const std::int64_t from_t = t < len ? len - 1 - t : t;
      const std::int64_t src = time == 0 ? from_t * s[1] + b : a * s[1] + from_t;
      if (row) std::memcpy(ctx.outputs[0].data() + static_cast<std::size_t>(a * s[1] + b) * row,
                           x.data() + static_cast<std::size_t>(src) * row, row);
    }
}

inline void register_slice_ops(op_registry& r) {
  r.add({"", "ReverseSequence", reverse_sequence_kernel});
  r.add({"", "Concat", concat_kernel});
  r.add({"", "Split", split_kernel});
  r.add({"", "Slice", slice_kernel});
  r.add({"", "Pad", pad_kernel});
  r.add({"", "Expand", expand_kernel, true});
  r.add({"", "Tile", tile_kernel});
}

}  // namespace ipu::detail::tensor_ops
