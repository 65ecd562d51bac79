#pragma once
// Random kernels: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike, Bernoulli
// (opset 15) and Multinomial, as the ONNX operator specifications define their distributions.
//
// Every draw comes from Philox4x32-10 (ops/kernels/philox.hpp), counter-based, so element i's
// value does not depend on how the work is split over threads, and the same on every standard
// library (std::normal_distribution's is not). The key is a hash of the seed (the op's `seed`
// attribute when given, else the run's: kernel_context::random) and of the op's identity (type,
// name, and its output tensors' ids when it has no name, so a pass that renumbers tensors may
// change an unnamed op's draws: name random ops whose draws must survive rewriting); the counter
// is the element's block and the op's call number (random_source::draw). So:
//  - the same seed gives bit-identical outputs on the same call of the same op, another seed
//    different ones, and two ops of one graph draw independently;
//  - each run of a device draws afresh (the call number advances), also with a `seed` attribute;
//  - a kernel run without a source (a test, one-off evaluation) always draws call 0.
// ONNX's own test data for these ops comes from numpy's generator, which this does not reproduce.
//
// A uniform in [0, 1) takes two 32-bit words (53 bits); element i takes words 2 (i % 2) and
// 2 (i % 2) + 1 of block i / 2. A normal pair (Box-Muller) takes a whole block for elements
// 2k and 2k + 1.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "ipu/ops/families/random.hpp"
#include "ipu/ops/kernels/philox.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

constexpr std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15u;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}

constexpr std::uint64_t hash_text(std::uint64_t h, std::string_view s) {
  for (char ch : s) h = splitmix64(h ^ static_cast<unsigned char>(ch));
  return splitmix64(h ^ s.size());
}

/// The Philox key and call number of this call of `ctx`'s op (see above).
struct random_stream {
  std::array<std::uint32_t, 2> key{};
  std::uint64_t call = 0;

  explicit random_stream(const kernel_context& ctx) {
    std::uint64_t seed = random_source::default_seed;
    if (ctx.random) std::tie(seed, call) = ctx.random->draw(ctx.op);
    // A seed attribute (a float in ONNX) is hashed by its bits; its keys are odd and the run's even,
    // so neither can stand for the other.
    if (ctx.has_attr("seed"))
      seed = splitmix64(0x5EED'A77Bu ^ std::bit_cast<std::uint32_t>(ctx.attr_float("seed", 0.0f))) | 1u;
    else
      seed = splitmix64(seed) & ~std::uint64_t{1};
    std::uint64_t id = hash_text(hash_text(0, ctx.op.type), ctx.op.name);
    if (ctx.op.name.empty())  // unnamed ops would otherwise share a stream
      for (auto t : ctx.op.outputs) id = splitmix64(id ^ t);
    const auto k = splitmix64(seed ^ splitmix64(id));
    key = {static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k >> 32)};
  }
  [[nodiscard]] std::array<std::uint32_t, 4> block(std::uint64_t b) const {
    return philox4x32_10({static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(b >> 32),
                          static_cast<std::uint32_t>(call), static_cast<std::uint32_t>(call >> 32)},
                         key);
  }
  /// Element i's uniform in [0, 1), 53 bits.
  [[nodiscard]] double uniform(std::uint64_t i) const {
    const auto w = block(i / 2);
    const auto j = 2 * (i % 2);
    const std::uint64_t bits = (std::uint64_t{w[j]} << 21) ^ (w[j + 1] >> 11);
    return static_cast<double>(bits) * 0x1p-53;
  }
  /// Elements 2k and 2k + 1's standard normals (Box-Muller).
  [[nodiscard]] std::array<double, 2> normal_pair(std::uint64_t k) const {
    const auto w = block(k);
    const std::uint64_t a = (std::uint64_t{w[0]} << 21) ^ (w[1] >> 11), b = (std::uint64_t{w[2]} << 21) ^ (w[3] >> 11);
    const double u1 = static_cast<double>(a + 1) * 0x1p-53;  // (0, 1]: log stays finite
    const double u2 = static_cast<double>(b) * 0x1p-53;
    const double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * std::numbers::pi * u2;
    return {r * std::cos(t), r * std::sin(t)};
  }
};

/// The largest value of floating-point type T below `x` (finite, not the lowest).
template <class T>
T value_below(T x) {
  if constexpr (std::is_same_v<T, half>) {
    // IEEE binary16 by its bits: one step toward -infinity.
    auto bits = std::bit_cast<std::uint16_t>(x);
    if ((bits & 0x7FFFu) == 0) bits = 0x8001u;
    else if (bits & 0x8000u) ++bits;
    else --bits;
    return std::bit_cast<half>(bits);
  } else {
    return std::nextafter(x, -std::numeric_limits<T>::infinity());
  }
}

inline std::size_t elements_of(const kernel_context& ctx) {
  return static_cast<std::size_t>(ctx.outputs[0].info().num_elements());
}

/// Writes `draw(i)` (a double) into every element of output 0, of a floating-point type.
template <class Draw>
void fill_float(const kernel_context& ctx, std::size_t n, const Draw& draw) {
  visit_float(ctx.outputs[0].info().type, ctx, [&]<class T>() {
    T* out = data_as<T>(ctx.outputs[0]);
    ctx.parallel_for(n, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) out[i] = draw.template operator()<T>(i);
    });
  });
}

inline void check_random_output(const kernel_context& ctx, const tensor_info& want) {
  if (ctx.outputs[0].info() != want)
    throw ctx.fail("the output is " + to_string(ctx.outputs[0].info()) + " but the attributes and inputs make it " +
                       to_string(want),
                   "declare the output as the ONNX specification says");
}

template <bool Like>
void random_uniform_kernel(const kernel_context& ctx) {
  only_attributes(ctx, Like ? std::initializer_list<std::string_view>{"low", "high", "seed", "dtype"}
                            : std::initializer_list<std::string_view>{"low", "high", "seed", "dtype", "shape"});
  // Not a structured binding: clang 14 cannot capture one in the lambda below.
  const auto bounds = random::uniform_params(ctx);
  const double low = bounds.first, high = bounds.second;
  if constexpr (Like)
    check_random_output(ctx, {random::dtype(ctx, ctx.input(0).info().type, false), ctx.input(0).info().shape});
  else
    check_random_output(ctx, {random::dtype(ctx, data_type::F32, false), random::shape_attr(ctx)});
  const random_stream s(ctx);
  fill_float(ctx, elements_of(ctx), [&]<class T>(std::size_t i) {
    const T v = convert<T>(low + (high - low) * s.uniform(i));
    // Rounding to T may reach high itself; the interval is half-open.
    return convert<double>(v) < high ? v : value_below(convert<T>(high));
  });
}

template <bool Like>
void random_normal_kernel(const kernel_context& ctx) {
  only_attributes(ctx, Like ? std::initializer_list<std::string_view>{"mean", "scale", "seed", "dtype"}
                            : std::initializer_list<std::string_view>{"mean", "scale", "seed", "dtype", "shape"});
  const auto moments = random::normal_params(ctx);  // not a structured binding: clang 14 cannot capture one
  const double mean = moments.first, scale = moments.second;
  if constexpr (Like)
    check_random_output(ctx, {random::dtype(ctx, ctx.input(0).info().type, false), ctx.input(0).info().shape});
  else
    check_random_output(ctx, {random::dtype(ctx, data_type::F32, false), random::shape_attr(ctx)});
  const random_stream s(ctx);
  const auto n = elements_of(ctx);
  visit_float(ctx.outputs[0].info().type, ctx, [&]<class T>() {
    T* out = data_as<T>(ctx.outputs[0]);
    ctx.parallel_for((n + 1) / 2, [&](std::size_t begin, std::size_t end) {
      for (std::size_t k = begin; k < end; ++k) {
        const auto z = s.normal_pair(k);
        out[2 * k] = convert<T>(mean + scale * z[0]);
        if (2 * k + 1 < n) out[2 * k + 1] = convert<T>(mean + scale * z[1]);
      }
    });
  });
}

/// Bernoulli: element i is 1 when its uniform is below its probability (so p = 0 never, p = 1
/// always); probabilities outside [0, 1] (or NaN) are an error.
inline void bernoulli_kernel(const kernel_context& ctx) {
  only_attributes(ctx, {"seed", "dtype"});
  const auto p = ctx.input(0);
  check_random_output(ctx, {random::dtype(ctx, p.info().type, true), p.info().shape});
  const auto probs = read_doubles(ctx, p);
  for (double q : probs)
    if (!(q >= 0.0 && q <= 1.0))
      throw ctx.fail("a probability is " + random::num(q) + ", outside [0, 1]", "give probabilities in [0, 1]");
  const random_stream s(ctx);
  visit_type(ctx.outputs[0].info().type, ctx, [&]<class T>() {
    T* out = data_as<T>(ctx.outputs[0]);
    ctx.parallel_for(probs.size(), [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) out[i] = convert<T>(s.uniform(i) < probs[i] ? 1.0 : 0.0);
    });
  });
}

/// Multinomial: each row of the input is unnormalised log-probabilities; sample j of row b is the
/// first class whose cumulative probability exceeds uniform (b * sample_size + j) times the total.
/// -inf is a class of probability 0; NaN, +inf or a row of only -inf is an error.
inline void multinomial_kernel(const kernel_context& ctx) {
  only_attributes(ctx, {"seed", "dtype", "sample_size"});
  const auto x = ctx.input(0);
  const auto& xs = x.info().shape;
  if (!is_floating_point(x.info().type) || xs.rank() != 2)
    throw ctx.fail("input " + to_string(x.info()) + " must be floating-point [batch_size, class_size]",
                   "give one row of log-probabilities per batch");
  const auto samples = random::sample_size(ctx);
  const auto t = ctx.has_attr("dtype") ? data_type_from_onnx_code(ctx.attr_int("dtype", 0)) : data_type::S32;
  if (t != data_type::S32 && t != data_type::S64)
    throw ctx.fail("dtype " + std::to_string(ctx.attr_int("dtype", 0)) + " is not INT32 (6) or INT64 (7)",
                   "give dtype 6 or 7 for the class indices");
  check_random_output(ctx, {*t, shape{xs[0], samples}});
  const auto logits = read_doubles(ctx, x);
  const auto rows = static_cast<std::size_t>(xs[0]), classes = static_cast<std::size_t>(xs[1]);
  if (rows != 0 && classes == 0)
    throw ctx.fail("class_size is 0: there is nothing to draw", "give at least one class");
  // Checked before the draws: a kernel's threads do not throw.
  std::vector<double> top(rows, -std::numeric_limits<double>::infinity());
  for (std::size_t b = 0; b < rows; ++b) {
    for (std::size_t k = 0; k < classes; ++k) {
      const double v = logits[b * classes + k];
      if (std::isnan(v) || v == std::numeric_limits<double>::infinity())
        throw ctx.fail("row " + std::to_string(b) + " holds " + random::num(v) + " at class " + std::to_string(k),
                       "give finite log-probabilities (-inf for an impossible class)");
      top[b] = std::max(top[b], v);
    }
    if (top[b] == -std::numeric_limits<double>::infinity())
      throw ctx.fail("every class of row " + std::to_string(b) + " has probability 0 (-inf)",
                     "give at least one class a finite log-probability");
  }
  const random_stream s(ctx);
  const auto per_row = static_cast<std::size_t>(samples);
  visit_type(*t, ctx, [&]<class T>() {
    T* out = data_as<T>(ctx.outputs[0]);
    ctx.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
      std::vector<double> cdf(classes);
      for (std::size_t b = begin; b < end; ++b) {
        const double* row = logits.data() + b * classes;
        double total = 0;
        for (std::size_t k = 0; k < classes; ++k) cdf[k] = total += std::exp(row[k] - top[b]);
        for (std::size_t j = 0; j < per_row; ++j) {
          // The first class whose cumulative sum exceeds u (classes of probability 0 add nothing,
          // so are never it). u < total but for rounding; then the last class that can be drawn.
          const double u = s.uniform(b * per_row + j) * total;
          auto k = static_cast<std::size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
          if (k == classes) k = static_cast<std::size_t>(std::lower_bound(cdf.begin(), cdf.end(), total) - cdf.begin());
          out[b * per_row + j] = static_cast<T>(k);
        }
      }
    });
  });
}

inline void register_random(op_registry& r) {
  r.add({"", "RandomNormal", random_normal_kernel<false>, true});
  r.add({"", "RandomUniform", random_uniform_kernel<false>, true});
  r.add({"", "RandomNormalLike", random_normal_kernel<true>, true});
  r.add({"", "RandomUniformLike", random_uniform_kernel<true>, true});
  r.add({"", "Bernoulli", bernoulli_kernel, true});
  r.add({"", "Multinomial", multinomial_kernel, true});
}

}  // namespace ipu::detail::tensor_ops
