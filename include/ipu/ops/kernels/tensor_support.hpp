#pragma once
// Shared machinery for the data-movement, indexing, reduction and other tensor kernels: element
// type dispatch, exact conversions between element types, reading index tensors, and one general
// byte-moving primitive (`gather_axes`) that Transpose, Slice, Pad, Tile, Expand, Gather and
// DepthToSpace are all expressed with.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ipu/bfloat16.hpp"
#include "ipu/float8.hpp"
#include "ipu/half.hpp"
#include "ipu/ops/kernel.hpp"

namespace ipu::detail::tensor_ops {

// --- element types -------------------------------------------------------------------------------
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, half>;

/// The type arithmetic is done in: half widens to float; everything else stays itself.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, half>, float, T>;

/// The accumulator for sums and products: F16 -> F32, F32/F64 -> F64, integers -> 64-bit
/// (unsigned arithmetic for signed types so overflow wraps like numpy instead of being UB).
template <class T>
using acc_t = std::conditional_t<
    is_float_v<T>, std::conditional_t<std::is_same_v<T, half>, float, double>,
    std::conditional_t<std::is_same_v<T, bool>, std::uint64_t,
                       std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>>>;

template <class A>
constexpr A acc_add(A a, A b) noexcept {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>)
    return static_cast<A>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
  else
    return a + b;
}
template <class A>
constexpr A acc_mul(A a, A b) noexcept {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>)
    return static_cast<A>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
  else
    return a * b;
}

/// double -> float rounding to odd: an inexact result is truncated toward zero and gets its last
/// bit set (a sticky bit: the value is strictly between two floats). A second rounding to nearest
/// even into a format at least two bits narrower (half, bfloat16) then gives the same result as one
/// rounding from the double: the sticky bit keeps it off a spurious tie.
inline float double_to_float_odd(double d) noexcept {
  float f = static_cast<float>(d);
  if (std::isnan(f) || std::isinf(f) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 1u);
}

/// A 64-bit integer -> float rounding to odd, like double_to_float_odd (it cannot go through a
/// double, which holds integers exactly only up to 2^53): the top 24 significant bits, the last one
/// or-ed with every bit below.
template <class I>
float int64_to_float_odd(I v) noexcept {
  bool negative = false;
  if constexpr (std::is_signed_v<I>) negative = v < 0;
  std::uint64_t m = negative ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  int shift = 0;
  if (const auto width = static_cast<int>(std::bit_width(m)); width > 24) {
    shift = width - 24;
    const bool inexact = (m & ((std::uint64_t{1} << shift) - 1)) != 0;
    m = (m >> shift) | (inexact ? 1u : 0u);
  }
  const float f = std::ldexp(static_cast<float>(m), shift);  // m < 2^24: exact
  return negative ? -f : f;
}

/// double -> half with a single rounding.
inline half double_to_half(double d) noexcept { return half(double_to_float_odd(d)); }

/// double -> bfloat16 with a single rounding.
inline bfloat16 double_to_bfloat16(double d) noexcept { return bfloat16(double_to_float_odd(d)); }

template <class T>
inline constexpr bool is_float8_v = std::is_same_v<T, float8_143> || std::is_same_v<T, float8_152>;

/// Converts one element the way ONNX Cast does. Float -> integer truncates toward zero and
/// saturates at the target's range (NaN becomes 0) so every input has a defined result.
template <class To, class From>
To convert(From v) noexcept {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_float8_v<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (is_float8_v<To>) {  // via float: rounding twice is harmless, float has > 2x the precision
    return To(convert<float>(v));
  } else if constexpr (std::is_same_v<From, half> || std::is_same_v<From, bfloat16>) {  // exact in float
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bfloat16>) {
    // Values a float may not hold (double, 32- and 64-bit integers) round once, to odd, into a
    // float and then to bfloat16: via a plain static_cast<float> they would round twice.
    if constexpr (std::is_same_v<From, bool>)
      return bfloat16(v ? 1.0f : 0.0f);
    else if constexpr (std::is_same_v<From, double> || (std::is_integral_v<From> && sizeof(From) == 4))
      return double_to_bfloat16(static_cast<double>(v));
    else if constexpr (std::is_integral_v<From> && sizeof(From) == 8)
      return bfloat16(int64_to_float_odd(v));
    else
      return bfloat16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From{0};
  } else if constexpr (std::is_same_v<To, half>) {
    if constexpr (std::is_same_v<From, double>)
      return double_to_half(v);
    else if constexpr (std::is_same_v<From, bool>)
      return half(v ? 1.0f : 0.0f);
    else if constexpr (std::is_integral_v<From> && sizeof(From) > 2)
      return double_to_half(static_cast<double>(v));
    else
      return half(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);
  } else if constexpr (std::is_floating_point_v<From>) {  // float -> integer
    if (std::isnan(v)) return To{0};
    const From t = std::trunc(v);
    constexpr auto lo = static_cast<long double>(std::numeric_limits<To>::lowest());
    constexpr auto hi = static_cast<long double>(std::numeric_limits<To>::max());
    if (static_cast<long double>(t) <= lo) return std::numeric_limits<To>::lowest();
    if (static_cast<long double>(t) >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(t);
  } else {  // integer or bool -> integer: modular, like numpy's astype
    return static_cast<To>(v);
  }
}

/// Calls `f.template operator()<T>()` with T the C++ element type of `t`.
template <class F>
decltype(auto) visit_type(data_type t, const kernel_context& ctx, F&& f) {
  switch (t) {
    case data_type::BOOL: return f.template operator()<bool>();
    case data_type::U8: return f.template operator()<std::uint8_t>();
    case data_type::S8: return f.template operator()<std::int8_t>();
    case data_type::U16: return f.template operator()<std::uint16_t>();
    case data_type::S16: return f.template operator()<std::int16_t>();
    case data_type::S32: return f.template operator()<std::int32_t>();
    case data_type::U32: return f.template operator()<std::uint32_t>();
    case data_type::S64: return f.template operator()<std::int64_t>();
    case data_type::U64: return f.template operator()<std::uint64_t>();
    case data_type::F16: return f.template operator()<half>();
    case data_type::F32: return f.template operator()<float>();
    case data_type::F64: return f.template operator()<double>();
    case data_type::F8143:
    case data_type::F8152:
    case data_type::BF16: break;
    case data_type::STRING:
      throw ctx.fail("STRING tensors are not supported by this host kernel",
                     "only Cast, CastLike, StringNormalizer, TfIdfVectorizer and ops that move elements take strings");
  }
  throw ctx.fail("element type " + std::string(to_string(t)) + " is not supported by this host kernel",
                 "cast the tensor to F16 or F32 first");
}

/// Like visit_type, plus the storage-only types, Graphcore's float8 and bfloat16 (for Cast, which
/// only converts; arithmetic on them is done after a Cast to F16 or F32).
template <class F>
decltype(auto) visit_castable_type(data_type t, const kernel_context& ctx, F&& f) {
  if (t == data_type::F8143) return f.template operator()<float8_143>();
  if (t == data_type::F8152) return f.template operator()<float8_152>();
  if (t == data_type::BF16) return f.template operator()<bfloat16>();
  return visit_type(t, ctx, f);
}

/// Like visit_type, but BOOL is rejected (for arithmetic kernels).
template <class F>
decltype(auto) visit_numeric(data_type t, const kernel_context& ctx, F&& f) {
  if (t == data_type::BOOL)
    throw ctx.fail("BOOL tensors are not supported by this op", "cast to an integer or float type first");
  return visit_type(t, ctx, [&]<class T>() -> decltype(auto) {
    if constexpr (std::is_same_v<T, bool>)
      return f.template operator()<std::uint8_t>();  // unreachable: keeps the return type uniform
    else
      return f.template operator()<T>();
  });
}

/// Like visit_type, for the floating-point types only.
template <class F>
decltype(auto) visit_float(data_type t, const kernel_context& ctx, F&& f) {
  switch (t) {
    case data_type::F16: return f.template operator()<half>();
    case data_type::F32: return f.template operator()<float>();
    case data_type::F64: return f.template operator()<double>();
    default: break;
  }
  throw ctx.fail("element type " + std::string(to_string(t)) + " is not supported (F16, F32 or F64 expected)",
                 "cast the tensor to a floating-point type first");
}

template <class T>
T* data_as(const tensor_view& v) {
  return reinterpret_cast<T*>(v.data());
}
template <class T>
const T* data_as(const const_tensor_view& v) {
  return reinterpret_cast<const T*>(v.data());
}

// --- reading small integer inputs -----------------------------------------------------------------
/// The values of an integer tensor (any integer type) as int64.
inline std::vector<std::int64_t> read_ints(const kernel_context& ctx, const const_tensor_view& v,
                                           std::string_view what) {
  const auto n = static_cast<std::size_t>(v.info().num_elements());
  std::vector<std::int64_t> out(n);
  if (n == 0) return out;
  const bool ok = visit_type(v.info().type, ctx, [&]<class T>() {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T* p = data_as<T>(v);
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::int64_t>(p[i]);
      return true;
    } else {
      return false;
    }
  });
  if (!ok)
    throw ctx.fail(std::string(what) + " must be an integer tensor, got " + std::string(to_string(v.info().type)),
                   "give " + std::string(what) + " as INT64 (or INT32)");
  return out;
}

/// The values of a numeric tensor as double (any numeric type).
inline std::vector<double> read_doubles(const kernel_context& ctx, const const_tensor_view& v) {
  const auto n = static_cast<std::size_t>(v.info().num_elements());
  std::vector<double> out(n);
  if (n == 0) return out;
  visit_type(v.info().type, ctx, [&]<class T>() {
    const T* p = data_as<T>(v);
    for (std::size_t i = 0; i < n; ++i) out[i] = convert<double>(p[i]);
  });
  return out;
}

/// Optional integer input: empty when omitted.
inline std::vector<std::int64_t> optional_ints(const kernel_context& ctx, std::size_t i, std::string_view what) {
  return ctx.has_input(i) ? read_ints(ctx, ctx.inputs[i], what) : std::vector<std::int64_t>{};
}

/// True when output `i` exists (an omitted optional output has no storage).
inline bool has_output(const kernel_context& ctx, std::size_t i) {
  return i < ctx.outputs.size() && (ctx.outputs[i].data() != nullptr || ctx.outputs[i].info().num_elements() == 0);
}

/// Refuses attributes other than `known`: a misspelt one would otherwise be silently ignored.
/// Annotations ("__" names) pass.
inline void only_attributes(const kernel_context& ctx, std::initializer_list<std::string_view> known) {
  for (const auto& a : ctx.op.attributes) {
    if (a.name.starts_with("__") || std::find(known.begin(), known.end(), std::string_view(a.name)) != known.end())
      continue;
    std::string names;
    for (auto k : known) names += (names.empty() ? "" : ", ") + std::string(k);
    throw ctx.fail("attribute '" + a.name + "' is not one of " + ctx.op.type + "'s",
                   names.empty() ? std::string("remove it") : "remove it; " + ctx.op.type + " takes " + names);
  }
}

/// Maps a possibly negative axis into [0, rank), or fails naming the op.
inline std::size_t normalize_axis(const kernel_context& ctx, std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r)
    throw ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r),
                   "use an axis in [-rank, rank)");
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

/// Fails unless output `i` has the shape the kernel computed (for shapes that depend on values).
inline void check_output_shape(const kernel_context& ctx, std::size_t i, const shape& expected) {
  if (ctx.outputs[i].info().shape != expected)
    throw ctx.fail("output #" + std::to_string(i) + " has shape " + to_string(ctx.outputs[i].info().shape) +
                       " in the IR, but the input values give " + to_string(expected),
                   "re-run shape inference with these input values");
}

inline std::vector<std::int64_t> strides_of(const shape& s) { return s.strides(); }

inline std::int64_t product(std::span<const std::int64_t> dims) {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

/// Copies all of input `in` to output `out` byte for byte (Reshape, Identity, ...).
inline void copy_whole(const kernel_context& ctx, std::size_t in, std::size_t out) {
  const auto src = ctx.input(in);
  const auto& dst = ctx.outputs[out];
  if (src.info().num_bytes() != dst.info().num_bytes() || src.info().type != dst.info().type)
    throw ctx.fail("input " + to_string(src.info()) + " and output " + to_string(dst.info()) +
                       " do not hold the same number of elements of the same type",
                   "fix the output shape in the IR");
  if (dst.info().num_bytes() && dst.data() != src.data()) std::memcpy(dst.data(), src.data(), dst.info().num_bytes());
}

// --- the general byte mover --------------------------------------------------------------------------
/// Where output element (o_0, ..., o_{r-1}) comes from: input element offset sum_k table[k][o_k],
/// or the fill value when any table entry is `outside`. Every shape-moving kernel builds these
/// per-axis tables and lets `gather_axes` do the copy.
inline constexpr std::int64_t outside = -1;

struct axis_tables {
  std::vector<std::int64_t> dims;                  // output dims
  std::vector<std::vector<std::int64_t>> offsets;  // per output axis, per index: input offset or `outside`
};

namespace mover {
template <class E>
void fill_as(std::byte* dst, std::int64_t n, const std::byte* value) {
  E v;
  std::memcpy(&v, value, sizeof(E));
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(dst + static_cast<std::size_t>(i) * sizeof(E), &v, sizeof(E));
}
inline void fill(std::byte* dst, std::int64_t n, const std::byte* value, std::size_t esize) {
  switch (esize) {  // a fixed-size element loads once and the loop vectorises
    case 1: std::memset(dst, static_cast<int>(*value), static_cast<std::size_t>(n)); return;
    case 2: fill_as<std::uint16_t>(dst, n, value); return;
    case 4: fill_as<std::uint32_t>(dst, n, value); return;
    case 8: fill_as<std::uint64_t>(dst, n, value); return;
    default:
      for (std::int64_t i = 0; i < n; ++i) std::memcpy(dst + static_cast<std::size_t>(i) * esize, value, esize);
  }
}

/// Step of a table that is tab[0] + i * step throughout (no `outside`), or nullopt.
inline std::optional<std::int64_t> linear_step(const std::vector<std::int64_t>& tab) {
  if (tab.empty() || tab[0] == outside) return std::nullopt;
  const std::int64_t step = tab.size() > 1 ? tab[1] - tab[0] : 0;
  for (std::size_t i = 1; i < tab.size(); ++i)
    if (tab[i] == outside || tab[i] != tab[0] + static_cast<std::int64_t>(i) * step) return std::nullopt;
  return step;
}

/// Merges neighbouring axes whose tables walk the input as one (outer step = inner step x inner
/// size: a contiguous slice row, the untouched H and W of a Transpose, a broadcast over both), so
/// the innermost runs are as long as possible. The output's row-major order is unchanged. Axis 0
/// stays apart (gather_axes splits it over threads), and a merged table stays small (it is stored).
inline axis_tables coalesce(const axis_tables& t) {
  constexpr std::int64_t max_merged = std::int64_t{1} << 16;
  axis_tables m;
  for (std::size_t k = 0; k < t.dims.size(); ++k) {
    if (m.dims.size() > 1 && m.dims.back() > 0 && t.dims[k] > 0 && m.dims.back() <= max_merged / t.dims[k]) {
      const auto outer = linear_step(m.offsets.back()), inner = linear_step(t.offsets[k]);
      // A one-entry table fits any step.
      const std::optional<std::int64_t> step = !outer || !inner ? std::nullopt
                                               : t.dims[k] == 1 ? outer
                                               : m.dims.back() == 1 || *outer == *inner * t.dims[k]
                                                   ? inner
                                                   : std::nullopt;
      if (step) {
        const std::int64_t n = m.dims.back() * t.dims[k];
        const std::int64_t start = m.offsets.back()[0] + t.offsets[k][0];
        auto& tab = m.offsets.back();
        tab.resize(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) tab[static_cast<std::size_t>(i)] = start + i * *step;
        m.dims.back() = n;
        continue;
      }
    }
    m.dims.push_back(t.dims[k]);
    m.offsets.push_back(t.offsets[k]);
  }
  return m;
}

struct plan {
  const axis_tables* t;
  std::vector<bool> contiguous;  // table k is base + 0, 1, 2, ... (a run can be memcpy'd)
  std::vector<bool> repeated;    // table k is one offset throughout (a broadcast run is a fill)
  const std::byte* src;
  std::size_t esize;
  const std::byte* fill_value;
};

/// The innermost axis, element by element (N: the element size, so each copy is one move).
template <std::size_t N>
void leaf(const plan& p, const std::vector<std::int64_t>& tab, std::int64_t n, std::int64_t base, std::byte* dst) {
  for (std::int64_t i = 0; i < n; ++i) {
    const auto o = tab[static_cast<std::size_t>(i)];
    const std::byte* from = o == outside ? p.fill_value : p.src + static_cast<std::size_t>(base + o) * N;
    std::memcpy(dst + static_cast<std::size_t>(i) * N, from, N);
  }
}

inline void run(const plan& p, std::size_t level, std::int64_t base, std::byte*& dst) {
  const auto& tab = p.t->offsets[level];
  const std::int64_t n = p.t->dims[level];
  if (level + 1 == p.t->dims.size()) {
    if (base == outside) {
      fill(dst, n, p.fill_value, p.esize);
    } else if (p.contiguous[level]) {
      std::memcpy(dst, p.src + static_cast<std::size_t>(base + tab[0]) * p.esize, static_cast<std::size_t>(n) * p.esize);
    } else if (p.repeated[level]) {  // a broadcast row (Expand): one element, n times
      fill(dst, n, p.src + static_cast<std::size_t>(base + tab[0]) * p.esize, p.esize);
    } else {
      switch (p.esize) {
        case 1: leaf<1>(p, tab, n, base, dst); break;
        case 2: leaf<2>(p, tab, n, base, dst); break;
        case 4: leaf<4>(p, tab, n, base, dst); break;
        case 8: leaf<8>(p, tab, n, base, dst); break;
        default:
          for (std::int64_t i = 0; i < n; ++i) {
            const auto o = tab[static_cast<std::size_t>(i)];
            const std::byte* from = o == outside ? p.fill_value : p.src + static_cast<std::size_t>(base + o) * p.esize;
            std::memcpy(dst + static_cast<std::size_t>(i) * p.esize, from, p.esize);
          }
      }
    }
    dst += static_cast<std::size_t>(n) * p.esize;
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const auto o = tab[static_cast<std::size_t>(i)];
    run(p, level + 1, base == outside || o == outside ? outside : base + o, dst);
  }
}
}  // namespace mover

/// Writes the row-major output described by `t` to `dst`, reading `src` elements of `esize` bytes.
/// With `parallel`, large outputs are split over the outermost axis.
inline void gather_axes(const axis_tables& tables, const std::byte* src, std::byte* dst, std::size_t esize,
                        const std::byte* fill_value = nullptr, const parallel_for_fn* parallel = nullptr) {
  if (product(tables.dims) == 0) return;
  if (tables.dims.empty()) {
    std::memcpy(dst, src, esize);
    return;
  }
  const axis_tables t = mover::coalesce(tables);
  mover::plan p{&t, {}, {}, src, esize, fill_value};
  for (std::size_t k = 0; k < t.dims.size(); ++k) {
    const auto step = mover::linear_step(t.offsets[k]);
    p.contiguous.push_back(step && (*step == 1 || t.dims[k] == 1));
    p.repeated.push_back(step && *step == 0);
  }
  // An outside entry needs a fill value; callers that never produce one may pass none.
  std::vector<std::byte> zeros;
  if (!fill_value) {
    zeros.assign(esize, std::byte{0});
    p.fill_value = zeros.data();
  }
  const std::int64_t total = product(t.dims);
  if (parallel && t.dims.size() > 1 && t.dims[0] > 1 && total >= (std::int64_t{1} << 15)) {
    const auto row = static_cast<std::size_t>(total / t.dims[0]) * esize;
    (*parallel)(static_cast<std::size_t>(t.dims[0]), [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        std::byte* d = dst + i * row;
        mover::run(p, 1, t.offsets[0][i], d);
      }
    });
    return;
  }
  mover::run(p, 0, 0, dst);
}

/// gather_axes using the kernel's thread pool.
inline void gather_axes(const kernel_context& ctx, const axis_tables& t, const std::byte* src, std::byte* dst,
                        std::size_t esize, const std::byte* fill_value = nullptr) {
  gather_axes(t, src, dst, esize, fill_value, &ctx.parallel_for);
}

/// Tables for reading an input of shape `in` through a permutation/strided view: output axis k
/// walks input axis `axis[k]` from `start[k]` in steps of `step[k]` (step 0 = broadcast).
inline std::vector<std::int64_t> linear_table(std::int64_t n, std::int64_t start, std::int64_t step,
                                              std::int64_t stride) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = (start + i * step) * stride;
  return t;
}

}  // namespace ipu::detail::tensor_ops
