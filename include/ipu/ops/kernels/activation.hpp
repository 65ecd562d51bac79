#pragma once
// Activation kernels: the ReLU family, Clip, sigmoid-like and exponential activations, PRelu.
// F16 is computed in F32; attribute defaults follow the ONNX operator specification.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "ipu/ops/kernels/broadcast.hpp"
#include "ipu/ops/kernels/elementwise.hpp"
#include "ipu/ops/kernels/fast_math.hpp"
#include "ipu/ops/kernels/numeric.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

/// y = f(x) in the compute type; `f` is generic over float / double (and the integer types that
/// `types` lets through).
template <class... Ts, class F>
void activation_map(const kernel_context& ctx, type_list<Ts...> types, F f) {
  const auto x = ctx.input(0);
  const auto y = output(ctx, 0);
  visit(types, x.info().type, ctx, [&]<class T>() {
    unary_map(ctx, x.as<T>().data(), y.as<T>().data(), x.as<T>().size(),
              [&](T v) { return narrow<T>(f(widen(v))); });
  });
}

template <class C>
C sigmoid(C x) noexcept {
  if constexpr (std::is_same_v<C, float>) return sigmoid_vectorisable(x);
  // Two forms so exp never overflows.
  if (x >= C{0}) return C{1} / (C{1} + std::exp(-x));
  const C e = std::exp(x);
  return e / (C{1} + e);
}

template <class C>
C tanh_of(C x) noexcept {
  if constexpr (std::is_same_v<C, float>) return tanh_vectorisable(x);
  return std::tanh(x);
}

template <class C>
C softplus(C x) noexcept {
  return x > C{0} ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

inline void relu_kernel(const kernel_context& ctx) {
  activation_map(ctx, signed_types, [](auto x) { return x < decltype(x){0} ? decltype(x){0} : x; });
}

inline void leaky_relu_kernel(const kernel_context& ctx) {
  const double alpha = ctx.attr_float("alpha", 0.01f);
  activation_map(ctx, float_types, [alpha](auto x) {
    using C = decltype(x);
    return x < C{0} ? static_cast<C>(alpha) * x : x;
  });
}

inline void thresholded_relu_kernel(const kernel_context& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0f);
  activation_map(ctx, float_types, [alpha](auto x) {
    using C = decltype(x);
    return x > static_cast<C>(alpha) ? x : C{0};
  });
}

inline void elu_kernel(const kernel_context& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0f);
  activation_map(ctx, float_types, [alpha](auto x) {
    using C = decltype(x);
    return x < C{0} ? static_cast<C>(alpha) * std::expm1(x) : x;
  });
}

inline void selu_kernel(const kernel_context& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.67326319217681884765625f);
  const double gamma = ctx.attr_float("gamma", 1.05070102214813232421875f);
  activation_map(ctx, float_types, [alpha, gamma](auto x) {
    using C = decltype(x);
    return x <= C{0} ? static_cast<C>(gamma) * (static_cast<C>(alpha) * std::exp(x) - static_cast<C>(alpha))
                     : static_cast<C>(gamma) * x;
  });
}

inline void celu_kernel(const kernel_context& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0f);
  if (alpha == 0.0) throw ctx.fail("attribute alpha is 0", "use a non-zero alpha");
  activation_map(ctx, float_types, [alpha](auto x) {
    using C = decltype(x);
    const C a = static_cast<C>(alpha);
    return std::max(C{0}, x) + std::min(C{0}, a * std::expm1(x / a));
  });
}

inline void sigmoid_kernel(const kernel_context& ctx) {
  activation_map(ctx, float_types, [](auto x) { return sigmoid(x); });
}

/// ai.graphcore Swish, x * sigmoid(x), with the sigmoid rounded to the element type as the
/// Sigmoid op's output is: the fused op gives the bits that Sigmoid then Mul give.
inline void swish_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto y = output(ctx, 0);
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    unary_map(ctx, x.as<T>().data(), y.as<T>().data(), x.as<T>().size(),
              [](T v) { return narrow<T>(widen(v) * widen(narrow<T>(sigmoid(widen(v))))); });
  });
}

inline void hard_sigmoid_kernel(const kernel_context& ctx) {
  const double alpha = ctx.attr_float("alpha", 0.2f);
  const double beta = ctx.attr_float("beta", 0.5f);
  activation_map(ctx, float_types, [alpha, beta](auto x) {
    using C = decltype(x);
    return std::clamp(static_cast<C>(alpha) * x + static_cast<C>(beta), C{0}, C{1});
  });
}

inline void hard_swish_kernel(const kernel_context& ctx) {
  activation_map(ctx, float_types, [](auto x) {
    using C = decltype(x);
    return x * std::clamp(x / C{6} + C{0.5}, C{0}, C{1});
  });
}

inline void tanh_kernel(const kernel_context& ctx) {
  activation_map(ctx, float_types, [](auto x) { return tanh_of(x); });
}

inline void erf_kernel(const kernel_context& ctx) {
  activation_map(ctx, float_types, [](auto x) { return std::erf(x); });
}

inline void softplus_kernel(const kernel_context& ctx) {
  activation_map(ctx, float_types, [](auto x) { return softplus(x); });
}

inline void softsign_kernel(const kernel_context& ctx) {
  activation_map(ctx, float_types, [](auto x) { return x / (decltype(x){1} + std::fabs(x)); });
}

inline void mish_kernel(const kernel_context& ctx) {
  activation_map(ctx, float_types, [](auto x) { return x * std::tanh(softplus(x)); });
}

/// GELU: x * Phi(x), exact (erf) or with the tanh approximation.
template <class C>
C gelu(C x, bool tanh_approximation) noexcept {
  if (tanh_approximation) {
    const C k = static_cast<C>(0.7978845608028654);  // sqrt(2 / pi)
    return C{0.5} * x * (C{1} + tanh_of(k * (x + static_cast<C>(0.044715) * x * x * x)));
  }
  return C{0.5} * x * (C{1} + std::erf(x * static_cast<C>(0.7071067811865476)));
}

/// ONNX Gelu (opset 20): the approximate attribute picks "none" (erf) or "tanh".
inline void gelu_kernel(const kernel_context& ctx) {
  const auto approximate = ctx.attr_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    throw ctx.fail("approximate is '" + approximate + "'", "use \"none\" or \"tanh\"");
  const bool tanh_approx = approximate == "tanh";
  activation_map(ctx, float_types, [tanh_approx](auto x) { return gelu(x, tanh_approx); });
}

/// com.microsoft Gelu is the exact form; PopART's ai.graphcore Gelu is the tanh approximation
/// (what poplibs' GELU non-linearity computes).
inline void gelu_erf_kernel(const kernel_context& ctx) {
  activation_map(ctx, float_types, [](auto x) { return gelu(x, false); });
}
inline void gelu_tanh_kernel(const kernel_context& ctx) {
  activation_map(ctx, float_types, [](auto x) { return gelu(x, true); });
}

/// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
inline void shrink_kernel(const kernel_context& ctx) {
  const double bias = ctx.attr_float("bias", 0.0f);
  const double lambd = ctx.attr_float("lambd", 0.5f);
  activation_map(ctx, numeric_types, [bias, lambd](auto x) {
    using C = decltype(x);
    const double v = static_cast<double>(x);
    if (v < -lambd) return from_double<C>(v + bias);
    if (v > lambd) return from_double<C>(v - bias);
    return C{0};
  });
}

/// Clip(x, min, max): the bounds are optional scalar inputs (opset 11+); NaN passes through.
inline void clip_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto y = output(ctx, 0);
  visit(numeric_types, x.info().type, ctx, [&]<class T>() {
    using C = compute_t<T>;
    auto bound = [&](std::size_t i, C fallback) {
      if (!ctx.has_input(i)) return fallback;
      expect_type(ctx, i, x.info().type);
      const auto v = ctx.input(i).as<T>();
      if (v.size() != 1)
        throw ctx.fail("bound input #" + std::to_string(i) + " has " + std::to_string(v.size()) + " elements",
                       "give min and max as scalars");
      return widen(v[0]);
    };
    const C lo = bound(1, std::numeric_limits<C>::lowest());
    const C hi = bound(2, std::numeric_limits<C>::max());
    unary_map(ctx, x.as<T>().data(), y.as<T>().data(), x.as<T>().size(), [lo, hi](T v) {
      const C c = widen(v);
      return narrow<T>(c < lo ? lo : (c > hi ? hi : c));
    });
  });
}

/// PRelu: the slope broadcasts to x (unidirectionally).
inline void prelu_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto slope = ctx.input(1);
  expect_type(ctx, 1, x.info().type);
  const auto y = output(ctx, 0);
  constexpr auto types = float_types + type_list<std::int32_t, std::int64_t, std::uint32_t, std::uint64_t>{};
  visit(types, x.info().type, ctx, [&]<class T>() {
    broadcast_binary(ctx, x.as<T>().data(), x.info().shape, slope.as<T>().data(), slope.info().shape,
                     y.as<T>().data(), y.info().shape, [](T v, T s) -> T {
                       if constexpr (std::is_unsigned_v<T>)
                         return v;
                       else
                         return widen(v) < compute_t<T>{0} ? mul(v, s) : v;
                     });
  });
}

inline void register_activation_kernels(op_registry& r) {
  r.add({"", "Relu", &relu_kernel, true});
  r.add({"", "LeakyRelu", &leaky_relu_kernel});
  r.add({"", "ThresholdedRelu", &thresholded_relu_kernel});
  r.add({"", "PRelu", &prelu_kernel});
  r.add({"", "Clip", &clip_kernel});
  r.add({"", "Elu", &elu_kernel});
  r.add({"", "Selu", &selu_kernel});
  r.add({"", "Celu", &celu_kernel});
  r.add({"", "Sigmoid", &sigmoid_kernel});
  r.add({"", "HardSigmoid", &hard_sigmoid_kernel});
  r.add({"", "HardSwish", &hard_swish_kernel});
  r.add({"", "Tanh", &tanh_kernel});
  r.add({"", "Erf", &erf_kernel});
  r.add({"", "Softplus", &softplus_kernel});
  r.add({"", "Softsign", &softsign_kernel});
  r.add({"", "Mish", &mish_kernel});
  r.add({"", "Gelu", &gelu_kernel});
  r.add({"com.microsoft", "Gelu", &gelu_erf_kernel});
  r.add({"ai.graphcore", "Gelu", &gelu_tanh_kernel});
  r.add({"ai.graphcore", "Swish", &swish_kernel});
  r.add({"", "Shrink", &shrink_kernel});
}

}  // namespace ipu::detail::math_ops
