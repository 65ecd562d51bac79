#pragma once
// The op table's random family: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike,
// Bernoulli and Multinomial. A row holds what the library knows about an op: shape rule, cost
// rule, flags and the slot for its gradient rule; the host kernels sit beside it, in
// ipu/ops/kernels/random.hpp, with the rule saying what each draw is.
//
// The rows carry the `random` flag (ops/flags.hpp): their outputs are draws, not functions of
// their inputs, so no pass folds them into constants. The attributes are checked in one place, by
// the shape rule at import and by the kernel at run time. No gradient rules: a draw has none with
// respect to its parameters here (a reparameterised sample would be written out as ops).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ipu/ops/op_def.hpp"

namespace ipu {
namespace detail::random {

inline std::string num(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s;
}

/// The element type the attribute `dtype` names (ONNX TensorProto codes), checked against what
/// the op may write; `fallback` when absent.
template <class Ctx>
data_type dtype(const Ctx& c, data_type fallback, bool any_numeric) {
  if (!c.has_attr("dtype")) {
    if (!any_numeric && !is_floating_point(fallback))
      throw c.fail("the output type defaults to the input's, " + std::string(to_string(fallback)) +
                       ", which is not a floating-point type",
                   "give dtype: 1 (FLOAT), 10 (FLOAT16) or 11 (DOUBLE)");
    return fallback;
  }
  const auto code = c.attr_int("dtype", 0);
  const auto t = data_type_from_onnx_code(code);
  const bool fp = t && (*t == data_type::F16 || *t == data_type::F32 || *t == data_type::F64);
  if (!t || (!fp && !any_numeric) || *t == data_type::F8143 || *t == data_type::F8152 ||
      *t == data_type::BF16)
    throw c.fail("dtype " + std::to_string(code) + " is not a type this op can write",
                 any_numeric ? "use a numeric or BOOL type code, e.g. 1 (FLOAT) or 9 (BOOL)"
                             : "use 1 (FLOAT), 10 (FLOAT16) or 11 (DOUBLE)");
  return *t;
}

/// RandomNormal's mean and scale, checked: finite, scale not negative.
template <class Ctx>
std::pair<double, double> normal_params(const Ctx& c) {
  const double mean = c.attr_float("mean", 0.0f), scale = c.attr_float("scale", 1.0f);
  if (!std::isfinite(mean) || !std::isfinite(scale) || scale < 0)
    throw c.fail("mean " + num(mean) + " and scale " + num(scale) + " must be finite and the scale at least 0",
                 "give the normal distribution's mean and standard deviation");
  return {mean, scale};
}

/// RandomUniform's low and high, checked: finite, low < high.
template <class Ctx>
std::pair<double, double> uniform_params(const Ctx& c) {
  const double low = c.attr_float("low", 0.0f), high = c.attr_float("high", 1.0f);
  if (!std::isfinite(low) || !std::isfinite(high) || !(low < high) || !std::isfinite(high - low))
    throw c.fail("low " + num(low) + " and high " + num(high) + " do not bound a finite interval [low, high)",
                 "give finite bounds with low < high");
  return {low, high};
}

/// RandomNormal / RandomUniform's `shape` attribute.
template <class Ctx>
shape shape_attr(const Ctx& c) {
  if (!c.has_attr("shape")) throw c.fail("the required attribute shape is missing", "give the output's shape");
  const auto dims = c.attr_ints("shape");
  for (auto d : dims)
    if (d < 0)
      throw c.fail("shape holds " + std::to_string(d) + "; dimensions must be at least 0", "give the output's shape");
  return shape(std::vector<shape::dim_type>(dims.begin(), dims.end()));
}

/// Multinomial's sample_size (at least 1).
template <class Ctx>
std::int64_t sample_size(const Ctx& c) {
  const auto n = c.attr_int("sample_size", 1);
  if (n < 1) throw c.fail("sample_size is " + std::to_string(n) + "; it must be at least 1", "draw at least one sample");
  return n;
}

}  // namespace detail::random

namespace detail::infer {

inline std::vector<tensor_info> random_normal(const infer_context& c) {
  (void)random::normal_params(c);
  return {tensor_info{random::dtype(c, data_type::F32, false), random::shape_attr(c)}};
}
inline std::vector<tensor_info> random_uniform(const infer_context& c) {
  (void)random::uniform_params(c);
  return {tensor_info{random::dtype(c, data_type::F32, false), random::shape_attr(c)}};
}
inline std::vector<tensor_info> random_normal_like(const infer_context& c) {
  (void)random::normal_params(c);
  return {tensor_info{random::dtype(c, c.in_type(0), false), c.in_shape(0)}};
}
inline std::vector<tensor_info> random_uniform_like(const infer_context& c) {
  (void)random::uniform_params(c);
  return {tensor_info{random::dtype(c, c.in_type(0), false), c.in_shape(0)}};
}

/// Bernoulli: probabilities of a float type -> draws of dtype (the input's type when absent).
inline std::vector<tensor_info> bernoulli(const infer_context& c) {
  need_float(c, 0);
  return {tensor_info{random::dtype(c, c.in_type(0), true), c.in_shape(0)}};
}

/// Multinomial: unnormalised log-probabilities [batch, classes] -> class indices [batch, sample_size].
inline std::vector<tensor_info> multinomial(const infer_context& c) {
  need_float(c, 0);
  const auto& x = c.in_shape(0);
  if (x.rank() != 2)
    throw c.fail("input " + to_string(c.input(0)) + " must be [batch_size, class_size]",
                 "give one row of log-probabilities per batch");
  const auto t = c.has_attr("dtype") ? data_type_from_onnx_code(c.attr_int("dtype", 0)) : data_type::S32;
  if (t != data_type::S32 && t != data_type::S64)
    throw c.fail("dtype " + std::to_string(c.attr_int("dtype", 0)) + " is not INT32 (6) or INT64 (7)",
                 "give dtype 6 or 7 for the class indices");
  return {tensor_info{*t, shape{x[0], random::sample_size(c)}}};
}

}  // namespace detail::infer

namespace detail::cost_rules {

/// The random ops draw from a counter-based generator (Philox, ten rounds of multiplies per four
/// 32-bit words) at the scalar rate. A uniform takes two words and a multiply-add; a normal takes
/// four words for two values and a logarithm, a square root and a sine or cosine (Box-Muller).
constexpr op_cost random_uniform(const op_cost_context& c) {
  return vector_pass(c, c.type(c.output()), c.output_elements(), 0, scalar_rate_ops(c, c.type(c.output())) * 3 + 2);
}
constexpr op_cost random_normal(const op_cost_context& c) {
  return vector_pass(c, c.type(c.output()), c.output_elements(), 0, scalar_rate_ops(c, c.type(c.output())) * 6 + 2);
}
/// Bernoulli: a uniform draw and a compare with the element's probability.
constexpr op_cost bernoulli(const op_cost_context& c) {
  return vector_pass(c, c.type(c.input(0)), c.output_elements(), 1, scalar_rate_ops(c, c.type(c.input(0))) * 3 + 1);
}
/// Multinomial: per row, a softmax of the classes (an exponential each, a running sum) held on one
/// tile, then per sample a uniform draw and a binary search of the cumulative sums.
constexpr op_cost multinomial(const op_cost_context& c) {
  const auto& x = c.input(0);
  const auto classes = dim(x, 1);
  const auto t = c.type(x);
  op_cost r = vector_pass(c, t, c.input_elements(0), 1, scalar_rate_ops(c, t) + 2,
                          ceil_div(costed_bytes(x, c.options), c.tiles()));
  const auto search = static_cast<std::uint32_t>(std::bit_width(classes) + 1);
  r += vector_pass(c, t, c.output_elements(), 0, scalar_rate_ops(c, t) * (3 + search));
  return r;
}

}  // namespace detail::cost_rules

namespace op_families {

inline constexpr op_flags random_op{false, false, false, true};

inline constexpr op_def random[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "RandomNormal", detail::infer::random_normal, detail::cost_rules::random_normal, random_op},
    {"", "RandomUniform", detail::infer::random_uniform, detail::cost_rules::random_uniform, random_op},
    {"", "RandomNormalLike", detail::infer::random_normal_like, detail::cost_rules::random_normal, random_op},
    {"", "RandomUniformLike", detail::infer::random_uniform_like, detail::cost_rules::random_uniform, random_op},
    {"", "Bernoulli", detail::infer::bernoulli, detail::cost_rules::bernoulli, random_op},
    {"", "Multinomial", detail::infer::multinomial, detail::cost_rules::multinomial, random_op},
};

}  // namespace op_families

}  // namespace ipu
