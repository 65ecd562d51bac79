#pragma once
// Shared machinery for the numeric kernels: element-type dispatch over type lists, the F16 -> F32
// compute type, wrapping integer arithmetic, safe float -> integer conversion, per-channel
// parameter reads and deterministic blocked parallel loops.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ipu/half.hpp"
#include "ipu/ops/kernel.hpp"

namespace ipu::detail::math_ops {

// --- element type lists and dispatch --------------------------------------------------------------
template <class... Ts>
struct type_list {};

template <class... A, class... B>
constexpr type_list<A..., B...> operator+(type_list<A...>, type_list<B...>) {
  return {};
}

inline constexpr type_list<float, double, half> float_types{};
inline constexpr type_list<std::int8_t, std::int16_t, std::int32_t, std::int64_t> signed_int_types{};
inline constexpr type_list<std::uint8_t, std::uint16_t, std::uint32_t, std::uint64_t> unsigned_int_types{};
inline constexpr auto int_types = signed_int_types + unsigned_int_types;
inline constexpr auto signed_types = float_types + signed_int_types;
inline constexpr auto numeric_types = float_types + int_types;
inline constexpr auto all_types = numeric_types + type_list<bool>{};

inline std::string type_names(std::initializer_list<data_type> types) {
  std::string s;
  for (auto t : types) {
    if (!s.empty()) s += ", ";
    s += to_string(t);
  }
  return s;
}

/// Calls `f.template operator()<T>()` for the T of `types` whose data type is `t`; any other
/// element type is an error naming the op and the types it accepts.
template <class... Ts, class F>
void visit(type_list<Ts...>, data_type t, const kernel_context& ctx, F&& f) {
  const bool found = ((t == data_type_of_v<Ts> ? (f.template operator()<Ts>(), true) : false) || ...);
  if (!found)
    throw ctx.fail("element type " + std::string(to_string(t)) + " is not supported (supported: " +
                       type_names({data_type_of_v<Ts>...}) + ")",
                   "cast the input to a supported type");
}

// --- compute types ---------------------------------------------------------------------------------
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, half>;

/// The type arithmetic runs in: F16 widens to F32 (the IPU's F16 units accumulate in F32).
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, half>, float, T>;

template <class T>
constexpr compute_t<T> widen(T v) noexcept {
  return static_cast<compute_t<T>>(v);
}
template <class T>
constexpr T narrow(compute_t<T> v) noexcept {
  return static_cast<T>(v);
}

/// Integer arithmetic that wraps like numpy instead of overflowing into undefined behaviour.
template <class T>
using wrap_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T>
constexpr T add(T a, T b) noexcept {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return static_cast<T>(static_cast<wrap_t<T>>(a) + static_cast<wrap_t<T>>(b));
  else
    return narrow<T>(widen(a) + widen(b));
}
template <class T>
constexpr T sub(T a, T b) noexcept {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<wrap_t<T>>(a) - static_cast<wrap_t<T>>(b));
  else
    return narrow<T>(widen(a) - widen(b));
}
template <class T>
constexpr T mul(T a, T b) noexcept {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<wrap_t<T>>(a) * static_cast<wrap_t<T>>(b));
  else
    return narrow<T>(widen(a) * widen(b));
}
template <class T>
constexpr T negate(T a) noexcept {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(wrap_t<T>{0} - static_cast<wrap_t<T>>(a));
  else
    return narrow<T>(-widen(a));
}

/// Floating -> integer that truncates toward zero and saturates (NaN -> 0): defined for every
/// input, where a plain cast of an out-of-range value is undefined behaviour.
template <class To, class From>
inline To float_to_int(From v) noexcept {
  const double d = static_cast<double>(v);
  if (std::isnan(d)) return To{0};
  const double t = std::trunc(d);
  if (t <= static_cast<double>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
  // max() may round up in double (2^63 for int64): compare with >= so the cast stays in range.
  if (t >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
  return static_cast<To>(t);
}

/// Converts a double result back to element type T (integers: truncate and saturate).
template <class T>
inline T from_double(double d) noexcept {
  if constexpr (std::is_integral_v<T>)
    return float_to_int<T>(d);
  else
    return static_cast<T>(static_cast<compute_t<T>>(d));
}

/// Reads any numeric tensor's elements as doubles (for small per-channel parameters of any type).
inline std::vector<double> read_doubles(const const_tensor_view& v, const kernel_context& ctx) {
  std::vector<double> r(static_cast<std::size_t>(v.info().num_elements()));
  visit(numeric_types, v.info().type, ctx, [&]<class T>() {
    auto s = v.as<T>();
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<double>(widen(s[i]));
  });
  return r;
}

/// Reads any floating tensor as F32 (converting F16 / F64).
template <class T>
void to_float(std::span<const T> in, float* out) noexcept {
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = static_cast<float>(in[i]);
}
template <class T>
void from_float(const float* in, std::span<T> out) noexcept {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(in[i]);
}

// --- outputs ---------------------------------------------------------------------------------------
[[nodiscard]] inline bool has_output(const kernel_context& ctx, std::size_t i) noexcept {
  return i < ctx.outputs.size() && ctx.outputs[i].data() != nullptr;
}

inline tensor_view output(const kernel_context& ctx, std::size_t i) {
  if (!has_output(ctx, i))
    throw ctx.fail("output #" + std::to_string(i) + " has no buffer", "allocate every required output");
  return ctx.outputs[i];
}

/// Requires input `i` to have element type `t` (ONNX ties many inputs to one type variable).
inline void expect_type(const kernel_context& ctx, std::size_t i, data_type t) {
  const auto got = ctx.input(i).info().type;
  if (got != t)
    throw ctx.fail("input #" + std::to_string(i) + " is " + std::string(to_string(got)) + " but must be " +
                       std::string(to_string(t)) + " like input #0",
                   "cast the inputs to one element type");
}

// --- parallel loops --------------------------------------------------------------------------------
/// Runs body(begin, end) over [0, n) in blocks of at least `grain` items through the context's
/// parallel_for. Small loops run inline: a thread hand-off costs more than they do. Block
/// boundaries depend only on n and grain, so results are deterministic per thread count.
template <class F>
void parallel_blocks(const kernel_context& ctx, std::size_t n, std::size_t grain, F&& body) {
  if (n == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  if (n <= grain) {
    body(std::size_t{0}, n);
    return;
  }
  const std::size_t blocks = (n + grain - 1) / grain;
  ctx.parallel_for(blocks, [&](std::size_t b, std::size_t e) { body(b * grain, std::min(n, e * grain)); });
}

/// Elements per parallel block for cheap element-wise loops.
inline constexpr std::size_t elementwise_grain = 16384;

/// A per-thread scratch buffer reused across kernel calls (im2col columns, F16 staging).
template <class T, int Slot = 0>
std::span<T> scratch(std::size_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return {buffer.data(), n};
}

}  // namespace ipu::detail::math_ops
