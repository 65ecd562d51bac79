#pragma once
// Kernels that make new values rather than move them: Constant, ConstantOfShape, Range, EyeLike,
// OneHot, Trilu, and the element type conversions Cast and CastLike.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/kernels/text.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

inline void write_bytes(const kernel_context& ctx, std::span<const std::byte> bytes, const tensor_info& info) {
  const auto& out = ctx.outputs[0];
  if (out.info() != info)
    throw ctx.fail("the constant is " + to_string(info) + " but the output is " + to_string(out.info()),
                   "fix the output type or shape in the IR");
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
}

template <class T>
void write_values(const kernel_context& ctx, const std::vector<T>& v, shape s) {
  write_bytes(ctx, std::as_bytes(std::span<const T>(v)), tensor_info{data_type_of_v<T>, std::move(s)});
}

/// Constant: value (a tensor), value_float(s) or value_int(s).
inline void constant_kernel(const kernel_context& ctx) {
  if (const attribute* a = ctx.op.find_attribute("value")) {
    const auto* t = std::get_if<constant_tensor>(&a->value);
    if (!t) throw ctx.fail("attribute 'value' is not a tensor", "give Constant a tensor value");
    if (t->data.size() != t->info.num_bytes())
      throw ctx.fail("the value holds " + std::to_string(t->data.size()) + " bytes for " + to_string(t->info),
                     "re-export the model");
    write_bytes(ctx, t->data.bytes(), t->info);
  } else if (ctx.has_attr("value_float")) {
    write_values(ctx, std::vector<float>{ctx.attr_float("value_float", 0)}, shape{});
  } else if (ctx.has_attr("value_floats")) {
    const auto v = ctx.attr_floats("value_floats");
    write_values(ctx, v, shape{static_cast<std::int64_t>(v.size())});
  } else if (ctx.has_attr("value_int")) {
    write_values(ctx, std::vector<std::int64_t>{ctx.attr_int("value_int", 0)}, shape{});
  } else if (ctx.has_attr("value_ints")) {
    const auto v = ctx.attr_ints("value_ints");
    write_values(ctx, v, shape{static_cast<std::int64_t>(v.size())});
  } else {
    throw ctx.fail("Constant has no supported value attribute (string and sparse values are not supported)",
                   "give value, value_float(s) or value_int(s)");
  }
}

/// Fills `out` with copies of the `esize`-byte `value`.
inline void fill_output(const tensor_view& out, const std::byte* value) {
  const std::size_t esize = size_of(out.info().type);
  const auto n = static_cast<std::size_t>(out.info().num_elements());
  for (std::size_t i = 0; i < n; ++i) std::memcpy(out.data() + i * esize, value, esize);
}

inline void constant_of_shape_kernel(const kernel_context& ctx) {
  const auto dims = read_ints(ctx, ctx.input(0), "shape");
  const auto& out = ctx.outputs[0];
  check_output_shape(ctx, 0, shape(dims));
  if (const attribute* a = ctx.op.find_attribute("value")) {
    const auto* t = std::get_if<constant_tensor>(&a->value);
    if (!t || t->info.num_elements() != 1 || t->data.size() != size_of(t->info.type))
      throw ctx.fail("attribute 'value' must be a one-element tensor", "give a one-element tensor");
    if (t->info.type != out.info().type)
      throw ctx.fail("value is " + std::string(to_string(t->info.type)) + " but the output is " +
                         std::string(to_string(out.info().type)),
                     "fix the output type in the IR");
    fill_output(out, t->data.data());
  } else {
    if (out.info().type != data_type::F32)
      throw ctx.fail("without a value the output must be F32", "fix the output type in the IR");
    const float zero = 0;
    fill_output(out, reinterpret_cast<const std::byte*>(&zero));
  }
}

inline void range_kernel(const kernel_context& ctx) {
  const auto& out = ctx.outputs[0];
  visit_numeric(out.info().type, ctx, [&]<class T>() {
    for (std::size_t i = 0; i < 3; ++i)
      if (ctx.input(i).info().type != out.info().type || ctx.inputs[i].info().num_elements() != 1)
        throw ctx.fail("start, limit and delta must be scalars of the output type", "fix the inputs");
    const T start = *data_as<T>(ctx.inputs[0]), limit = *data_as<T>(ctx.inputs[1]), delta = *data_as<T>(ctx.inputs[2]);
    std::int64_t n = 0;
    if constexpr (is_float_v<T>) {
      const double s = convert<double>(start), l = convert<double>(limit), d = convert<double>(delta);
      if (d == 0) throw ctx.fail("Range delta is 0", "use a non-zero delta");
      const double count = std::ceil((l - s) / d);
      // An infinite or NaN bound, or a count past what a tensor can hold, is an error, not an
      // empty or wrapped-around output.
      if (!(count < static_cast<double>(shape::max_elements)))
        throw ctx.fail("Range(" + std::to_string(s) + ", " + std::to_string(l) + ", " + std::to_string(d) +
                           ") does not have a finite number of elements that a tensor can hold",
                       "give finite start, limit and delta");
      n = count > 0 ? static_cast<std::int64_t>(count) : 0;
      check_output_shape(ctx, 0, shape{n});
      T* o = data_as<T>(out);
      for (std::int64_t i = 0; i < n; ++i) o[i] = convert<T>(s + static_cast<double>(i) * d);
    } else {
      if (delta == 0) throw ctx.fail("Range delta is 0", "use a non-zero delta");
      const auto s = static_cast<std::int64_t>(start), l = static_cast<std::int64_t>(limit),
                 d = static_cast<std::int64_t>(delta);
      // The span and the count in unsigned arithmetic: l - s and the rounding overflow int64 for
      // bounds far apart.
      std::uint64_t span = 0, step = 0;
      if (d > 0 && l > s) span = static_cast<std::uint64_t>(l) - static_cast<std::uint64_t>(s), step = static_cast<std::uint64_t>(d);
      if (d < 0 && l < s) span = static_cast<std::uint64_t>(s) - static_cast<std::uint64_t>(l), step = 0 - static_cast<std::uint64_t>(d);
      const std::uint64_t count = step ? span / step + (span % step != 0 ? 1 : 0) : 0;
      if (count > static_cast<std::uint64_t>(shape::max_elements))
        throw ctx.fail("Range(" + std::to_string(s) + ", " + std::to_string(l) + ", " + std::to_string(d) + ") has " +
                           std::to_string(count) + " elements, more than a tensor can hold",
                       "give bounds closer together, or a larger delta");
      n = static_cast<std::int64_t>(count);
      check_output_shape(ctx, 0, shape{n});
      T* o = data_as<T>(out);
      // Wrapping arithmetic is exact here: every value lies between start and limit.
      for (std::int64_t i = 0; i < n; ++i)
        o[i] = static_cast<T>(static_cast<std::int64_t>(static_cast<std::uint64_t>(s) + static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(d)));
    }
  });
}

inline void eye_like_kernel(const kernel_context& ctx) {
  const auto& out = ctx.outputs[0];
  const auto& s = out.info().shape;
  if (s.rank() != 2 || s != ctx.input(0).info().shape)
    throw ctx.fail("EyeLike needs a 2-D input and an output of the same shape", "fix the shapes");
  const std::int64_t k = ctx.attr_int("k", 0);
  visit_type(out.info().type, ctx, [&]<class T>() {
    T* o = data_as<T>(out);
    std::fill(o, o + s.num_elements(), T{});
    // Only the rows the diagonal crosses: an empty [2^32, 0] input has no ones and must not visit its
    // 2^32 rows (the fuzzer's timeout), and i + k must not overflow for k near the int64 limits.
    if (k >= s[1] || k <= -s[0]) return;
    const std::int64_t first = std::max<std::int64_t>(0, -k), last = std::min(s[0], s[1] - k);
    for (std::int64_t i = first; i < last; ++i) o[i * s[1] + i + k] = convert<T>(1);
  });
}

inline void one_hot_kernel(const kernel_context& ctx) {
  const auto indices = read_doubles(ctx, ctx.input(0));
  const auto depth_v = read_doubles(ctx, ctx.input(1));
  const auto values = ctx.input(2);
  if (depth_v.size() != 1 || values.info().num_elements() != 2)
    throw ctx.fail("depth must be a scalar and values a pair [off, on]", "fix the inputs");
  const auto depth = static_cast<std::int64_t>(depth_v[0]);
  if (depth <= 0) throw ctx.fail("depth must be positive", "fix the depth input");
  const auto& is = ctx.inputs[0].info().shape;
  const std::size_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), is.rank() + 1);
  std::vector<std::int64_t> dims(is.begin(), is.end());
  dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(axis), depth);
  check_output_shape(ctx, 0, shape(dims));
  const auto& out = ctx.outputs[0];
  if (out.info().type != values.info().type)
    throw ctx.fail("output type differs from the values' type", "fix the output type in the IR");
  const std::size_t esize = size_of(values.info().type);
  const std::byte* off = values.data();
  const std::byte* on = values.data() + esize;
  fill_output(out, off);
  std::int64_t inner = 1;
  for (std::size_t k = axis; k < is.rank(); ++k) inner *= is[k];
  for (std::size_t p = 0; p < indices.size(); ++p) {
    auto idx = static_cast<std::int64_t>(indices[p]);
    if (idx < 0) idx += depth;
    if (idx < 0 || idx >= depth) continue;  // out of range: the whole one-hot vector stays `off`
    const auto o = static_cast<std::int64_t>(p) / inner, i = static_cast<std::int64_t>(p) % inner;
    std::memcpy(out.data() + static_cast<std::size_t>((o * depth + idx) * inner + i) * esize, on, esize);
  }
}

/// Trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two axes.
inline void trilu_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& s = x.info().shape;
  if (s.rank() < 2) throw ctx.fail("Trilu needs an input of rank >= 2", "fix the input");
  check_output_shape(ctx, 0, s);
  std::int64_t k = 0;
  if (ctx.has_input(1)) k = read_ints(ctx, ctx.inputs[1], "k").at(0);
  const bool upper = ctx.attr_int("upper", 1) != 0;
  const std::int64_t rows = s[s.rank() - 2], cols = s[s.rank() - 1];
  const std::int64_t mats = rows != 0 && cols != 0 ? s.num_elements() / (rows * cols) : 0;
  const std::size_t esize = size_of(x.info().type);
  std::byte* dst = ctx.outputs[0].data();
  const std::byte* src = x.data();
  for (std::int64_t m = 0; m < mats; ++m)
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        const auto at = static_cast<std::size_t>((m * rows + i) * cols + j) * esize;
        const bool keep = upper ? j - i >= k : j - i <= k;
        if (keep)
          std::memcpy(dst + at, src + at, esize);
        else
          std::memset(dst + at, 0, esize);  // all-zero bytes are 0 / 0.0 / false in every type
      }
}

/// Cast and CastLike: the target type is the output's type in the IR.
inline void cast_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& out = ctx.outputs[0];
  if (x.info().shape != out.info().shape)
    throw ctx.fail("input " + to_string(x.info()) + " and output " + to_string(out.info()) + " differ in shape",
                   "fix the output shape in the IR");
  const auto n = static_cast<std::size_t>(x.info().num_elements());
  if (x.info().type == out.info().type) {
    copy_whole(ctx, 0, 0);
    return;
  }
  if (x.info().type == data_type::STRING || out.info().type == data_type::STRING) {
    cast_strings(ctx);
    return;
  }
  visit_castable_type(x.info().type, ctx, [&]<class From>() {
    visit_castable_type(out.info().type, ctx, [&]<class To>() {
      const From* src = data_as<From>(x);
      To* dst = data_as<To>(out);
      ctx.parallel_for(n, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) dst[i] = convert<To>(src[i]);
      });
    });
  });
}

inline void register_generators(op_registry& r) {
  r.add({"", "Constant", constant_kernel});
  r.add({"", "ConstantOfShape", constant_of_shape_kernel});
  r.add({"", "Range", range_kernel});
  r.add({"", "EyeLike", eye_like_kernel});
  r.add({"", "OneHot", one_hot_kernel});
  r.add({"", "Trilu", trilu_kernel});
  r.add({"", "Cast", cast_kernel});
  r.add({"", "CastLike", cast_kernel});
}

}  // namespace ipu::detail::tensor_ops
