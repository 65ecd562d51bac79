#pragma once
// Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss with none / sum / mean reductions,
// class weights and ignore_index. Computed in F64 (F32 accumulation would also do for F16; F64
// keeps F32 results within one rounding of the exact value).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

/// loss[n, d] = -weight[t] * logp[n, t, d] with t = target[n, d]; reduced as the op asks.
/// `logp` is [N, C, D] flattened; `out` receives either N*D values or one.
inline std::vector<double> nll(const kernel_context& ctx, const std::vector<double>& logp,
                               const std::vector<std::int64_t>& target, const std::vector<double>& weight,
                               std::int64_t n, std::int64_t c, std::int64_t d) {
  const std::string reduction = ctx.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    throw ctx.fail("unknown reduction '" + reduction + "'", "use none, sum or mean");
  const bool has_ignore = ctx.has_attr("ignore_index");
  const std::int64_t ignore = ctx.attr_int("ignore_index", 0);
  if (!weight.empty() && static_cast<std::int64_t>(weight.size()) != c)
    throw ctx.fail("weight has " + std::to_string(weight.size()) + " entries for " + std::to_string(c) + " classes",
                   "give one weight per class");
  std::vector<double> loss(static_cast<std::size_t>(n * d), 0.0);
  double total = 0, weights = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < d; ++j) {
      const std::int64_t t = target[static_cast<std::size_t>(i * d + j)];
      if (has_ignore && t == ignore) continue;
      if (t < 0 || t >= c)
        throw ctx.fail("target " + std::to_string(t) + " is not a class in [0, " + std::to_string(c) + ")",
                       "fix the targets or set ignore_index");
      const double w = weight.empty() ? 1.0 : weight[static_cast<std::size_t>(t)];
      const double l = -w * logp[static_cast<std::size_t>((i * c + t) * d + j)];
      loss[static_cast<std::size_t>(i * d + j)] = l;
      total += l;
      weights += w;
    }
  if (reduction == "none") return loss;
  if (reduction == "sum") return {total};
  return {total / weights};
}

/// Shapes shared by both losses: scores [N, C, d1...], target [N, d1...].
struct loss_shape {
  std::int64_t n = 0, c = 0, d = 1;
};
inline loss_shape check_loss_shapes(const kernel_context& ctx, const shape& scores, const shape& target) {
  if (scores.rank() < 2 || target.rank() + 1 != scores.rank())
    throw ctx.fail("input " + to_string(scores) + " and target " + to_string(target) + " do not fit [N, C, d...] / [N, d...]",
                   "fix the shapes");
  loss_shape s{scores[0], scores[1], 1};
  for (std::size_t k = 2; k < scores.rank(); ++k) {
    if (target[k - 1] != scores[k]) throw ctx.fail("target does not match the input's spatial dims", "fix the shapes");
    s.d *= scores[k];
  }
  if (target[0] != s.n) throw ctx.fail("target and input differ in N", "fix the shapes");
  const std::string reduction = ctx.attr_string("reduction", "mean");
  check_output_shape(ctx, 0, reduction == "none" ? target : shape{});
  return s;
}

inline void write_doubles(const kernel_context& ctx, std::size_t out, const std::vector<double>& v) {
  visit_float(ctx.outputs[out].info().type, ctx, [&]<class T>() {
    T* o = data_as<T>(ctx.outputs[out]);
    for (std::size_t i = 0; i < v.size(); ++i) o[i] = convert<T>(v[i]);
  });
}

inline void nll_loss_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto s = check_loss_shapes(ctx, x.info().shape, ctx.input(1).info().shape);
  const auto weight = ctx.has_input(2) ? read_doubles(ctx, ctx.inputs[2]) : std::vector<double>{};
  const auto target = read_ints(ctx, ctx.inputs[1], "target");
  write_doubles(ctx, 0, nll(ctx, read_doubles(ctx, x), target, weight, s.n, s.c, s.d));
}

inline void softmax_cross_entropy_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto s = check_loss_shapes(ctx, x.info().shape, ctx.input(1).info().shape);
  auto logp = read_doubles(ctx, x);
  // log_softmax over C for each (n, d).
  for (std::int64_t i = 0; i < s.n; ++i)
    for (std::int64_t j = 0; j < s.d; ++j) {
      auto at = [&](std::int64_t k) -> double& { return logp[static_cast<std::size_t>((i * s.c + k) * s.d + j)]; };
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t k = 0; k < s.c; ++k) m = std::max(m, at(k));
      double sum = 0;
      for (std::int64_t k = 0; k < s.c; ++k) sum += std::exp(at(k) - m);
      const double lse = m + std::log(sum);
      for (std::int64_t k = 0; k < s.c; ++k) at(k) -= lse;
    }
  const auto weight = ctx.has_input(2) ? read_doubles(ctx, ctx.inputs[2]) : std::vector<double>{};
  const auto target = read_ints(ctx, ctx.inputs[1], "labels");
  write_doubles(ctx, 0, nll(ctx, logp, target, weight, s.n, s.c, s.d));
  if (has_output(ctx, 1)) {
    check_output_shape(ctx, 1, x.info().shape);
    write_doubles(ctx, 1, logp);
  }
}

inline void register_loss(op_registry& r) {
  r.add({"", "NegativeLogLikelihoodLoss", nll_loss_kernel});
  r.add({"", "SoftmaxCrossEntropyLoss", softmax_cross_entropy_kernel});
}

}  // namespace ipu::detail::tensor_ops
