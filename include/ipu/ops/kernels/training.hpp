#pragma once
// ONNX's optimizer ops (domain ai.onnx.preview.training, opset 1): Adagrad, Momentum (standard and
// Nesterov) and Adam. Each takes R (learning rate), T (update count), then the optimized tensors
// X1..Xn, their gradients G1..Gn and the optimizer's state per tensor (Adagrad: H; Momentum: V;
// Adam: V, then H), and returns the new X1..Xn followed by the new state, in the same order.
// Every element is updated in F64 and rounded once to the tensor's type.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

/// The scalar R (index 0) or T (index 1) of an optimizer op.
inline const_tensor_view optimizer_scalar(const kernel_context& ctx, std::size_t i) {
  const auto v = ctx.input(i);
  if (v.info().num_elements() != 1)
    throw ctx.fail(std::string(i == 0 ? "the learning rate R" : "the update count T") + " is " + to_string(v.info()) +
                       ", not a scalar",
                   "give one value");
  return v;
}

/// Runs `step(x, g, state)` on every element of every optimized tensor; `step` updates the
/// `States` state values in place and returns the new x. Inputs: [R, T, X.., G.., state 0..,
/// state 1..]; outputs: [X_new.., state 0 new.., state 1 new..]. An omitted output is not written.
template <std::size_t States, class Step>
void optimizer_update(const kernel_context& ctx, Step step) {
  constexpr std::size_t k = States + 2;
  const std::size_t in = ctx.inputs.size();
  if (in < 2 + k || (in - 2) % k != 0)
    throw ctx.fail(std::to_string(in) + " inputs, but the op takes R, T and " + std::to_string(k) +
                       " tensors per optimized tensor",
                   "see the ONNX operator specification");
  const std::size_t n = (in - 2) / k;
  if (ctx.outputs.size() > n * (k - 1))
    throw ctx.fail(std::to_string(ctx.outputs.size()) + " outputs for " + std::to_string(n) + " optimized tensors",
                   "give one new value per optimized tensor and per state tensor");
  auto out = [&](std::size_t j, std::size_t i) -> const tensor_view* {
    const auto o = j * n + i;
    return o < ctx.outputs.size() && has_output(ctx, o) ? &ctx.outputs[o] : nullptr;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = ctx.input(2 + i);
    const auto& info = x.info();
    for (std::size_t j = 1; j < k; ++j)
      if (ctx.input(2 + j * n + i).info() != info)
        throw ctx.fail("input #" + std::to_string(2 + j * n + i) + " is " + to_string(ctx.input(2 + j * n + i).info()) +
                           ", not " + to_string(info) + " like the tensor it belongs to",
                       "give each gradient and state the optimized tensor's type and shape");
    for (std::size_t j = 0; j + 1 < k; ++j)
      if (const auto* o = out(j, i); o && o->info() != info)
        throw ctx.fail("output #" + std::to_string(j * n + i) + " is " + to_string(o->info()) + ", not " +
                       to_string(info));
    const auto count = static_cast<std::size_t>(info.num_elements());
    visit_float(info.type, ctx, [&]<class T>() {
      const T* xs = data_as<T>(x);
      const T* gs = data_as<T>(ctx.input(2 + n + i));
      std::array<const T*, States> ss{};
      std::array<T*, States> so{};
      for (std::size_t s = 0; s < States; ++s) {
        ss[s] = data_as<T>(ctx.input(2 + (2 + s) * n + i));
        so[s] = out(1 + s, i) ? data_as<T>(*out(1 + s, i)) : nullptr;
      }
      T* xo = out(0, i) ? data_as<T>(*out(0, i)) : nullptr;
      for (std::size_t e = 0; e < count; ++e) {
        std::array<double, States> state{};
        for (std::size_t s = 0; s < States; ++s) state[s] = convert<double>(ss[s][e]);
        const double x_new = step(convert<double>(xs[e]), convert<double>(gs[e]), state);
        if (xo) xo[e] = convert<T>(x_new);
        for (std::size_t s = 0; s < States; ++s)
          if (so[s]) so[s][e] = convert<T>(state[s]);
      }
    });
  }
}

inline void adagrad_kernel(const kernel_context& ctx) {
  const double r = read_doubles(ctx, optimizer_scalar(ctx, 0))[0];
  const auto t = static_cast<double>(read_ints(ctx, optimizer_scalar(ctx, 1), "T")[0]);
  const double epsilon = ctx.attr_float("epsilon", 1e-6f), decay = ctx.attr_float("decay_factor", 0);
  const double norm = ctx.attr_float("norm_coefficient", 0);
  const double rate = r / (1 + t * decay);
  optimizer_update<1>(ctx, [&](double x, double g, std::array<double, 1>& h) {
    const double gr = norm * x + g;
    h[0] += gr * gr;
    return x - rate * gr / (std::sqrt(h[0]) + epsilon);
  });
}

inline void momentum_kernel(const kernel_context& ctx) {
  const double r = read_doubles(ctx, optimizer_scalar(ctx, 0))[0];
  const auto t = read_ints(ctx, optimizer_scalar(ctx, 1), "T")[0];
  for (const char* a : {"alpha", "beta", "norm_coefficient", "mode"})
    if (!ctx.has_attr(a)) throw ctx.fail(std::string("attribute '") + a + "' is missing", "Momentum requires it");
  const double alpha = ctx.attr_float("alpha", 0), norm = ctx.attr_float("norm_coefficient", 0);
  const double beta = t > 0 ? ctx.attr_float("beta", 0) : 1.0;  // the first step takes the whole gradient
  const auto mode = ctx.attr_string("mode");
  if (mode != "standard" && mode != "nesterov")
    throw ctx.fail("mode '" + mode + "' is neither 'standard' nor 'nesterov'");
  const bool nesterov = mode == "nesterov";
  optimizer_update<1>(ctx, [&](double x, double g, std::array<double, 1>& v) {
    const double gr = norm * x + g;
    v[0] = alpha * v[0] + beta * gr;
    return nesterov ? x - r * (gr + alpha * v[0]) : x - r * v[0];
  });
}

inline void adam_kernel(const kernel_context& ctx) {
  const double r = read_doubles(ctx, optimizer_scalar(ctx, 0))[0];
  const auto t = read_ints(ctx, optimizer_scalar(ctx, 1), "T")[0];
  const double alpha = ctx.attr_float("alpha", 0.9f), beta = ctx.attr_float("beta", 0.999f);
  const double norm = ctx.attr_float("norm_coefficient", 0), post = ctx.attr_float("norm_coefficient_post", 0);
  const double epsilon = ctx.attr_float("epsilon", 1e-6f);
  // Bias correction from the second update on (T counts from 0).
  const double td = static_cast<double>(t);
  const double rate = t > 0 ? r * std::sqrt(1 - std::pow(beta, td)) / (1 - std::pow(alpha, td)) : r;
  optimizer_update<2>(ctx, [&](double x, double g, std::array<double, 2>& vh) {
    const double gr = norm * x + g;
    vh[0] = alpha * vh[0] + (1 - alpha) * gr;
    vh[1] = beta * vh[1] + (1 - beta) * gr * gr;
    return (1 - post) * (x - rate * vh[0] / (std::sqrt(vh[1]) + epsilon));
  });
}

inline void register_training(op_registry& r) {
  r.add({"ai.onnx.preview.training", "Adagrad", adagrad_kernel});
  r.add({"ai.onnx.preview.training", "Momentum", momentum_kernel});
  r.add({"ai.onnx.preview.training", "Adam", adam_kernel});
}

}  // namespace ipu::detail::tensor_ops
