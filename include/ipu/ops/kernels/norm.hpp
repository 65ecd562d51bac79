#pragma once
// Normalisation kernels: BatchNormalization (inference, and training mode with running
// statistics), InstanceNormalization and LayerNormalization, and the library's training-mode batch
// normalisation, forward and backward (ipu::BatchNormalizationTraining and its Grad). Statistics
// accumulate in double.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/ops/kernels/broadcast.hpp"
#include "ipu/ops/kernels/numeric.hpp"
#include "ipu/ops/kernels/vector_isa.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

/// Per-channel parameter input `i` as doubles, checked to hold `channels` values.
inline std::vector<double> channel_param(const kernel_context& ctx, std::size_t i, std::int64_t channels,
                                         const char* what) {
  const auto v = ctx.input(i);
  if (v.info().num_elements() != channels)
    throw ctx.fail(std::string(what) + " has " + std::to_string(v.info().num_elements()) + " values for " +
                       std::to_string(channels) + " channels",
                   "give one value per channel");
  return read_doubles(v, ctx);
}

/// Writes doubles into a float tensor of any floating type.
inline void write_doubles(const kernel_context& ctx, const tensor_view& out, const std::vector<double>& v) {
  visit(float_types, out.info().type, ctx, [&]<class T>() {
    auto s = out.as<T>();
    for (std::size_t i = 0; i < s.size() && i < v.size(); ++i) s[i] = from_double<T>(v[i]);
  });
}

/// y = x * a[c] + b[c] over [N, C, spatial] planes.
template <class T>
void channel_affine(const kernel_context& ctx, const T* x, T* y, std::int64_t n, std::int64_t c, std::int64_t spatial,
                    const std::vector<double>& a, const std::vector<double>& b) {
  using C = compute_t<T>;
  vectorised_blocks(ctx, static_cast<std::size_t>(n * c), std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(spatial, 1)),
                  [&](std::size_t p0, std::size_t p1) {
                    for (std::size_t p = p0; p < p1; ++p) {
                      const auto ch = static_cast<std::size_t>(static_cast<std::int64_t>(p) % c);
                      const C av = static_cast<C>(a[ch]), bv = static_cast<C>(b[ch]);
                      const T* xp = x + static_cast<std::int64_t>(p) * spatial;
                      T* yp = y + static_cast<std::int64_t>(p) * spatial;
                      for (std::int64_t i = 0; i < spatial; ++i) yp[i] = narrow<T>(widen(xp[i]) * av + bv);
                    }
                  });
}

inline void batch_norm_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto y = output(ctx, 0);
  const shape& s = x.info().shape;
  if (s.rank() < 2) throw ctx.fail("input " + to_string(s) + " has no channel dimension", "give [N, C, ...]");
  const std::int64_t n = s[0], c = s[1];
  const std::int64_t spatial = n * c == 0 ? 0 : s.num_elements() / (n * c);
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const double momentum = ctx.attr_float("momentum", 0.9f);
  const bool training = ctx.attr_int("training_mode", 0) != 0;
  const auto scale = channel_param(ctx, 1, c, "scale");
  const auto bias = channel_param(ctx, 2, c, "B");
  auto mean = channel_param(ctx, 3, c, "input_mean");
  auto var = channel_param(ctx, 4, c, "input_var");
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    const T* in = x.as<T>().data();
    if (training) {
      // Batch statistics (biased variance) normalise; the running statistics are blended.
      std::vector<double> bm(static_cast<std::size_t>(c), 0.0), bv(static_cast<std::size_t>(c), 0.0);
      const auto count = static_cast<double>(n * spatial);
      for (std::int64_t ch = 0; ch < c; ++ch) {
        double sum = 0.0, sq = 0.0;
        for (std::int64_t b = 0; b < n; ++b) {
          const T* p = in + (b * c + ch) * spatial;
          for (std::int64_t i = 0; i < spatial; ++i) sum += static_cast<double>(widen(p[i]));
        }
        const double mu = count > 0 ? sum / count : 0.0;
        for (std::int64_t b = 0; b < n; ++b) {
          const T* p = in + (b * c + ch) * spatial;
          for (std::int64_t i = 0; i < spatial; ++i) {
            const double d = static_cast<double>(widen(p[i])) - mu;
            sq += d * d;
          }
        }
        bm[static_cast<std::size_t>(ch)] = mu;
        bv[static_cast<std::size_t>(ch)] = count > 0 ? sq / count : 0.0;
      }
      std::vector<double> running_mean(bm.size()), running_var(bv.size());
      for (std::size_t i = 0; i < bm.size(); ++i) {
        running_mean[i] = mean[i] * momentum + bm[i] * (1.0 - momentum);
        running_var[i] = var[i] * momentum + bv[i] * (1.0 - momentum);
      }
      if (has_output(ctx, 1)) write_doubles(ctx, ctx.outputs[1], running_mean);
      if (has_output(ctx, 2)) write_doubles(ctx, ctx.outputs[2], running_var);
      mean = std::move(bm);
      var = std::move(bv);
    }
    std::vector<double> a(static_cast<std::size_t>(c)), b(static_cast<std::size_t>(c));
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = scale[i] / std::sqrt(var[i] + eps);
      b[i] = bias[i] - mean[i] * a[i];
    }
    channel_affine(ctx, in, y.as<T>().data(), n, c, spatial, a, b);
  });
}

/// The sum of f(i) over i in [0, n), in double, as eight running partial sums: independent sums
/// vectorise, where one sum would be a chain of dependent adds.
template <class F>
double sum_of(std::int64_t n, F&& f) {
  std::array<double, 8> acc{};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) acc[j] += f(i + static_cast<std::int64_t>(j));
  double tail = 0.0;
  for (; i < n; ++i) tail += f(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

/// [N, C, spatial] of a batch normalisation's X.
struct channel_layout {
  std::int64_t n = 0, c = 0, spatial = 0;
};
inline channel_layout channel_layout_of(const kernel_context& ctx, const shape& s) {
  if (s.rank() < 2) throw ctx.fail("input " + to_string(s) + " has no channel dimension", "give [N, C, ...]");
  const std::int64_t n = s[0], c = s[1];
  return {n, c, n * c == 0 ? 0 : s.num_elements() / (n * c)};
}

/// ipu::BatchNormalizationTraining(X, scale, B), attribute epsilon: BatchNormalization as PyTorch's
/// train() mode runs it, in two passes over X: the batch's mean and biased variance per channel
/// (outputs 1 and 2), then Y = (X - mean) / sqrt(var + epsilon) * scale + B.
inline void batch_norm_training_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto layout = channel_layout_of(ctx, x.info().shape);
  const std::int64_t n = layout.n, c = layout.c, spatial = layout.spatial;  // not bound: lambdas capture them
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const auto scale = channel_param(ctx, 1, c, "scale");
  const auto bias = channel_param(ctx, 2, c, "B");
  std::vector<double> mean(static_cast<std::size_t>(c)), var(static_cast<std::size_t>(c));
  const auto count = static_cast<double>(n * spatial);
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    const T* in = x.as<T>().data();
    ctx.parallel_for(static_cast<std::size_t>(c), [&](std::size_t c0, std::size_t c1) {
      for (auto ch = static_cast<std::int64_t>(c0); ch < static_cast<std::int64_t>(c1); ++ch) {
        double sum = 0.0, sq = 0.0;
        for (std::int64_t b = 0; b < n; ++b) {
          const T* p = in + (b * c + ch) * spatial;
          sum += sum_of(spatial, [p](std::int64_t i) { return static_cast<double>(widen(p[i])); });
        }
        const double mu = count > 0 ? sum / count : 0.0;
        for (std::int64_t b = 0; b < n; ++b) {
          const T* p = in + (b * c + ch) * spatial;
          sq += sum_of(spatial, [p, mu](std::int64_t i) {
            const double d = static_cast<double>(widen(p[i])) - mu;
            return d * d;
          });
        }
        mean[static_cast<std::size_t>(ch)] = mu;
        var[static_cast<std::size_t>(ch)] = count > 0 ? sq / count : 0.0;
      }
    });
    std::vector<double> a(static_cast<std::size_t>(c)), b(static_cast<std::size_t>(c));
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = scale[i] / std::sqrt(var[i] + eps);
      b[i] = bias[i] - mean[i] * a[i];
    }
    channel_affine(ctx, in, output(ctx, 0).as<T>().data(), n, c, spatial, a, b);
  });
  if (has_output(ctx, 1)) write_doubles(ctx, ctx.outputs[1], mean);
  if (has_output(ctx, 2)) write_doubles(ctx, ctx.outputs[2], var);
}

/// ipu::BatchNormalizationTrainingGrad(dY, X, scale, mean, var), attribute epsilon: the backward of
/// ipu::BatchNormalizationTraining. Per channel, over its m = N * spatial values, with
/// s = 1 / sqrt(var + epsilon) and Xhat = (X - mean) * s:
///   dB = sum(dY), dScale = sum(dY * Xhat), dX = scale * s * (dY - dB / m - Xhat * dScale / m)
/// (outputs dX, dScale, dB): one pass for the sums, one for dX.
inline void batch_norm_training_grad_kernel(const kernel_context& ctx) {
  const auto dy = ctx.input(0), x = ctx.input(1);
  if (dy.info() != x.info())
    throw ctx.fail("dY " + to_string(dy.info()) + " is not like X " + to_string(x.info()), "give the gradient of Y");
  const auto layout = channel_layout_of(ctx, x.info().shape);
  const std::int64_t n = layout.n, c = layout.c, spatial = layout.spatial;
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const auto scale = channel_param(ctx, 2, c, "scale");
  const auto mean = channel_param(ctx, 3, c, "mean");
  const auto var = channel_param(ctx, 4, c, "var");
  std::vector<double> dscale(static_cast<std::size_t>(c)), dbias(static_cast<std::size_t>(c));
  const auto m = static_cast<double>(n * spatial);
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    using C = compute_t<T>;
    const T* g = dy.as<T>().data();
    const T* in = x.as<T>().data();
    T* out = output(ctx, 0).as<T>().data();
    ctx.parallel_for(static_cast<std::size_t>(c), [&](std::size_t c0, std::size_t c1) {
      for (auto ch = static_cast<std::int64_t>(c0); ch < static_cast<std::int64_t>(c1); ++ch) {
        const auto k = static_cast<std::size_t>(ch);
        const double mu = mean[k], s = 1.0 / std::sqrt(var[k] + eps);
        double sum_g = 0.0, sum_gx = 0.0;
        for (std::int64_t b = 0; b < n; ++b) {
          const T* gp = g + (b * c + ch) * spatial;
          const T* xp = in + (b * c + ch) * spatial;
          sum_g += sum_of(spatial, [gp](std::int64_t i) { return static_cast<double>(widen(gp[i])); });
          sum_gx += sum_of(spatial, [gp, xp, mu](std::int64_t i) {
            return static_cast<double>(widen(gp[i])) * (static_cast<double>(widen(xp[i])) - mu);
          });
        }
        dbias[k] = sum_g;
        dscale[k] = sum_gx * s;
        // dX = A dY + B (X - mean) + D, with A = scale s, B = -scale s^3 sum_gx / m, D = -A dB / m.
        const double a = scale[k] * s, bx = m > 0 ? -scale[k] * s * s * s * sum_gx / m : 0.0;
        const double d = m > 0 ? -a * sum_g / m : 0.0;
        const C av = static_cast<C>(a), bv = static_cast<C>(bx), dv = static_cast<C>(d), mv = static_cast<C>(mu);
        for (std::int64_t b = 0; b < n; ++b) {
          const auto at = (b * c + ch) * spatial;
          for (std::int64_t i = 0; i < spatial; ++i)
            out[at + i] = narrow<T>(av * widen(g[at + i]) + bv * (widen(in[at + i]) - mv) + dv);
        }
      }
    });
  });
  if (has_output(ctx, 1)) write_doubles(ctx, ctx.outputs[1], dscale);
  if (has_output(ctx, 2)) write_doubles(ctx, ctx.outputs[2], dbias);
}

inline void instance_norm_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto y = output(ctx, 0);
  const shape& s = x.info().shape;
  if (s.rank() < 3) throw ctx.fail("input " + to_string(s) + " is not [N, C, spatial...]", "give [N, C, D1, ...]");
  const std::int64_t n = s[0], c = s[1];
  const std::int64_t spatial = n * c == 0 ? 0 : s.num_elements() / (n * c);
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const auto scale = channel_param(ctx, 1, c, "scale");
  const auto bias = channel_param(ctx, 2, c, "B");
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    const T* in = x.as<T>().data();
    T* out = y.as<T>().data();
    parallel_blocks(ctx, static_cast<std::size_t>(n * c), std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(spatial, 1)),
                    [&](std::size_t p0, std::size_t p1) {
                      for (std::size_t p = p0; p < p1; ++p) {
                        const auto ch = static_cast<std::size_t>(static_cast<std::int64_t>(p) % c);
                        const T* xp = in + static_cast<std::int64_t>(p) * spatial;
                        T* yp = out + static_cast<std::int64_t>(p) * spatial;
                        double sum = 0.0, sq = 0.0;
                        for (std::int64_t i = 0; i < spatial; ++i) sum += static_cast<double>(widen(xp[i]));
                        const double mu = sum / static_cast<double>(spatial);
                        for (std::int64_t i = 0; i < spatial; ++i) {
                          const double d = static_cast<double>(widen(xp[i])) - mu;
                          sq += d * d;
                        }
                        const double a = scale[ch] / std::sqrt(sq / static_cast<double>(spatial) + eps);
                        const double b = bias[ch] - mu * a;
                        for (std::int64_t i = 0; i < spatial; ++i)
                          yp[i] = from_double<T>(static_cast<double>(widen(xp[i])) * a + b);
                      }
                    });
  });
}

/// LayerNormalization: normalises over the dimensions from `axis` on; Scale and B broadcast to
/// those dimensions. Optional outputs Mean and InvStdDev keep the leading dimensions.
inline void layer_norm_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto y = output(ctx, 0);
  const shape& s = x.info().shape;
  if (s.rank() == 0) throw ctx.fail("input is a scalar", "give a tensor of rank >= 1");
  const std::size_t axis = s.normalize_axis(ctx.attr_int("axis", -1));
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  std::int64_t outer = 1;
  for (std::size_t i = 0; i < axis; ++i) outer *= s[i];
  const shape inner_shape(std::vector<std::int64_t>(s.begin() + static_cast<std::ptrdiff_t>(axis), s.end()));
  const std::int64_t inner = inner_shape.num_elements();
  // Scale and B expanded to the normalised block.
  auto expand = [&](std::size_t i, double fallback) {
    std::vector<double> v(static_cast<std::size_t>(inner), fallback);
    if (ctx.has_input(i)) {
      const auto p = ctx.input(i);
      const auto vals = read_doubles(p, ctx);
      broadcast_copy(ctx, vals.data(), p.info().shape, v.data(), inner_shape);
    }
    return v;
  };
  const auto scale = expand(1, 1.0);
  const auto bias = expand(2, 0.0);
  std::vector<double> means(static_cast<std::size_t>(outer)), inv_std(static_cast<std::size_t>(outer));
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    using C = compute_t<T>;
    const T* in = x.as<T>().data();
    T* out = y.as<T>().data();
    // Statistics in double; the affine step in the compute type, which vectorises (for F32, 1 ulp
    // from doing it in double).
    const std::vector<C> scale_c(scale.begin(), scale.end()), bias_c(bias.begin(), bias.end());
    parallel_blocks(ctx, static_cast<std::size_t>(outer), std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(inner, 1)),
                    [&](std::size_t r0, std::size_t r1) {
                      for (std::size_t r = r0; r < r1; ++r) {
                        const T* xp = in + static_cast<std::int64_t>(r) * inner;
                        T* yp = out + static_cast<std::int64_t>(r) * inner;
                        const double sum = sum_of(inner, [xp](std::int64_t i) { return static_cast<double>(widen(xp[i])); });
                        const double mu = inner > 0 ? sum / static_cast<double>(inner) : 0.0;
                        const double sq = sum_of(inner, [xp, mu](std::int64_t i) {
                          const double d = static_cast<double>(widen(xp[i])) - mu;
                          return d * d;
                        });
                        const double is = 1.0 / std::sqrt((inner > 0 ? sq / static_cast<double>(inner) : 0.0) + eps);
                        means[r] = mu;
                        inv_std[r] = is;
                        // The mean as a rounded head and the rest: x - head is exact near the
                        // mean, so values close to a large mean keep their digits.
                        const C head = static_cast<C>(mu), rest = static_cast<C>(mu - static_cast<double>(head)),
                                ic = static_cast<C>(is);
                        for (std::int64_t i = 0; i < inner; ++i) {
                          const auto k = static_cast<std::size_t>(i);
                          yp[i] = narrow<T>(((widen(xp[i]) - head) - rest) * ic * scale_c[k] + bias_c[k]);
                        }
                      }
                    });
  });
  if (has_output(ctx, 1)) write_doubles(ctx, ctx.outputs[1], means);
  if (has_output(ctx, 2)) write_doubles(ctx, ctx.outputs[2], inv_std);
}

/// ipu::LayerNormalizationGrad(dY, X, Scale, [Mean], [InvStdDev]), attribute axis: the backward of
/// LayerNormalization with Scale spanning the normalised block. Per row of m normalised values, with
/// s its InvStdDev, Xhat = (X - mean) * s and G = dY * Scale:
///   dX = s * (G - sum(G) / m - Xhat * sum(G * Xhat) / m)
/// and per normalised element, over the rows: dScale = sum(dY * Xhat), dB = sum(dY) (outputs dX,
/// dScale, dB). Rows run in parallel for dX, column blocks for dScale and dB, so the sums do not
/// depend on the thread count. Without Mean and InvStdDev the row statistics are computed again.
inline void layer_norm_grad_kernel(const kernel_context& ctx) {
  const auto dy = ctx.input(0), x = ctx.input(1);
  if (dy.info() != x.info())
    throw ctx.fail("dY " + to_string(dy.info()) + " is not like X " + to_string(x.info()), "give the gradient of Y");
  const shape& s = x.info().shape;
  if (s.rank() == 0) throw ctx.fail("X is a scalar", "give a tensor of rank >= 1");
  const std::size_t axis = s.normalize_axis(ctx.attr_int("axis", -1));
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < s.rank(); ++i) (i < axis ? outer : inner) *= s[i];
  const auto scale = read_doubles(ctx.input(2), ctx);
  if (static_cast<std::int64_t>(scale.size()) != inner)
    throw ctx.fail("Scale has " + std::to_string(scale.size()) + " values for rows of " + std::to_string(inner),
                   "give Scale spanning the normalised dimensions");
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const bool given = ctx.has_input(3) && ctx.has_input(4);
  std::vector<double> mean(static_cast<std::size_t>(outer)), inv_std(static_cast<std::size_t>(outer));
  if (given) {
    mean = read_doubles(ctx.input(3), ctx);
    inv_std = read_doubles(ctx.input(4), ctx);
    if (static_cast<std::int64_t>(mean.size()) != outer || static_cast<std::int64_t>(inv_std.size()) != outer)
      throw ctx.fail("Mean and InvStdDev hold " + std::to_string(mean.size()) + " and " + std::to_string(inv_std.size()) +
                         " values for " + std::to_string(outer) + " rows",
                     "give the forward LayerNormalization's statistics");
  }
  std::vector<double> dscale(static_cast<std::size_t>(inner)), dbias(static_cast<std::size_t>(inner));
  const auto m = static_cast<double>(inner);
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    using C = compute_t<T>;
    const T* g = dy.as<T>().data();
    const T* in = x.as<T>().data();
    T* out = output(ctx, 0).as<T>().data();
    const double* sc = scale.data();
    std::vector<C> scale_c(scale.begin(), scale.end());
    ctx.parallel_for(static_cast<std::size_t>(outer), [&](std::size_t r0, std::size_t r1) {
      for (auto r = static_cast<std::int64_t>(r0); r < static_cast<std::int64_t>(r1); ++r) {
        const auto k = static_cast<std::size_t>(r);
        const T* gp = g + r * inner;
        const T* xp = in + r * inner;
        if (!given) {
          const double mu = sum_of(inner, [xp](std::int64_t i) { return static_cast<double>(widen(xp[i])); }) / m;
          const double sq = sum_of(inner, [xp, mu](std::int64_t i) {
            const double d = static_cast<double>(widen(xp[i])) - mu;
            return d * d;
          });
          mean[k] = mu;
          inv_std[k] = 1.0 / std::sqrt(sq / m + eps);
        }
        const double mu = mean[k], is = inv_std[k];
        const double sum_g = sum_of(inner, [gp, sc](std::int64_t i) { return static_cast<double>(widen(gp[i])) * sc[i]; });
        const double sum_gx = sum_of(inner, [gp, xp, sc, mu](std::int64_t i) {
          return static_cast<double>(widen(gp[i])) * sc[i] * (static_cast<double>(widen(xp[i])) - mu);
        });
        // dX = A G + B (X - mean) + D, with A = s, B = -s^3 sum_gx / m, D = -s sum_g / m.
        const C av = static_cast<C>(is), bv = static_cast<C>(-is * is * is * sum_gx / m),
                dv = static_cast<C>(-is * sum_g / m), mv = static_cast<C>(mu);
        T* op = out + r * inner;
        for (std::int64_t i = 0; i < inner; ++i)
          op[i] = narrow<T>(av * (widen(gp[i]) * scale_c[static_cast<std::size_t>(i)]) + bv * (widen(xp[i]) - mv) + dv);
      }
    });
    constexpr std::int64_t block = 64;
    ctx.parallel_for(static_cast<std::size_t>((inner + block - 1) / block), [&](std::size_t b0, std::size_t b1) {
      for (auto b = static_cast<std::int64_t>(b0); b < static_cast<std::int64_t>(b1); ++b) {
        const std::int64_t j0 = b * block, j1 = std::min(inner, j0 + block);
        std::array<double, block> acc_s{}, acc_b{};
        for (std::int64_t r = 0; r < outer; ++r) {
          const T* gp = g + r * inner;
          const T* xp = in + r * inner;
          const double mu = mean[static_cast<std::size_t>(r)], is = inv_std[static_cast<std::size_t>(r)];
          for (std::int64_t j = j0; j < j1; ++j) {
            const double gv = static_cast<double>(widen(gp[j]));
            acc_s[static_cast<std::size_t>(j - j0)] += gv * (static_cast<double>(widen(xp[j])) - mu) * is;
            acc_b[static_cast<std::size_t>(j - j0)] += gv;
          }
        }
        for (std::int64_t j = j0; j < j1; ++j) {
          dscale[static_cast<std::size_t>(j)] = acc_s[static_cast<std::size_t>(j - j0)];
          dbias[static_cast<std::size_t>(j)] = acc_b[static_cast<std::size_t>(j - j0)];
        }
      }
    });
  });
  if (has_output(ctx, 1)) write_doubles(ctx, ctx.outputs[1], dscale);
  if (has_output(ctx, 2)) write_doubles(ctx, ctx.outputs[2], dbias);
}

/// LRN: x / (bias + alpha / size * sum of squares over `size` neighbouring channels)^beta.
inline void lrn_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto y = output(ctx, 0);
  const shape& s = x.info().shape;
  if (s.rank() < 2) throw ctx.fail("input " + to_string(s) + " has no channel dimension", "give [N, C, ...]");
  const std::int64_t size = ctx.attr_int("size", 0);
  if (size < 1) throw ctx.fail("attribute size is missing or not positive", "give the window size in channels");
  const double alpha = ctx.attr_float("alpha", 1e-4f), beta = ctx.attr_float("beta", 0.75f),
               bias = ctx.attr_float("bias", 1.0f);
  const std::int64_t n = s[0], c = s[1];
  const std::int64_t spatial = n * c == 0 ? 0 : s.num_elements() / (n * c);
  const std::int64_t before = (size - 1) / 2, after = size - 1 - before;
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    const T* in = x.as<T>().data();
    T* out = y.as<T>().data();
    parallel_blocks(ctx, static_cast<std::size_t>(n * c), std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(spatial * size, 1)),
                    [&](std::size_t p0, std::size_t p1) {
                      for (auto p = static_cast<std::int64_t>(p0); p < static_cast<std::int64_t>(p1); ++p) {
                        const std::int64_t b = p / c, ch = p % c;
                        const std::int64_t lo = std::max<std::int64_t>(0, ch - before), hi = std::min(c - 1, ch + after);
                        for (std::int64_t i = 0; i < spatial; ++i) {
                          double sq = 0;
                          for (std::int64_t k = lo; k <= hi; ++k) {
                            const double v = static_cast<double>(widen(in[(b * c + k) * spatial + i]));
                            sq += v * v;
                          }
                          const double v = static_cast<double>(widen(in[p * spatial + i]));
                          out[p * spatial + i] = from_double<T>(v / std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
                        }
                      }
                    });
  });
}

/// MeanVarianceNormalization: (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) over `axes`, as the
/// ONNX function body defines it.
inline void mvn_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto y = output(ctx, 0);
  const shape& s = x.info().shape;
  std::vector<bool> reduced(s.rank(), false);
  for (auto a : ctx.attr_ints("axes", {0, 2, 3})) reduced[s.normalize_axis(a)] = true;
  // Each element's group: its index with the reduced axes dropped.
  const auto strides = s.strides();
  std::vector<std::int64_t> group_stride(s.rank(), 0);
  std::int64_t groups = 1;
  for (std::size_t i = s.rank(); i-- > 0;)
    if (!reduced[i]) {
      group_stride[i] = groups;
      groups *= s[i];
    }
  const auto count = static_cast<std::size_t>(s.num_elements());
  std::vector<std::int64_t> group(count);
  for (std::size_t e = 0; e < count; ++e) {
    std::int64_t g = 0, rem = static_cast<std::int64_t>(e);
    for (std::size_t i = 0; i < s.rank(); ++i) {
      g += (rem / strides[i]) * group_stride[i];
      rem %= strides[i];
    }
    group[e] = g;
  }
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    const auto in = x.as<T>();
    const auto out = y.as<T>();
    std::vector<double> sum(static_cast<std::size_t>(groups), 0.0), sq(sum.size(), 0.0), n(sum.size(), 0.0);
    for (std::size_t e = 0; e < count; ++e) {
      const auto g = static_cast<std::size_t>(group[e]);
      const double v = static_cast<double>(widen(in[e]));
      sum[g] += v;
      sq[g] += v * v;
      n[g] += 1;
    }
    for (std::size_t e = 0; e < count; ++e) {
      const auto g = static_cast<std::size_t>(group[e]);
      const double mean = sum[g] / n[g];
      const double sd = std::sqrt(std::max(0.0, sq[g] / n[g] - mean * mean));
      out[e] = from_double<T>((static_cast<double>(widen(in[e])) - mean) / (sd + 1e-9));
    }
  });
}

inline void register_norm_kernels(op_registry& r) {
  r.add({"", "BatchNormalization", &batch_norm_kernel});
  r.add({"", "InstanceNormalization", &instance_norm_kernel});
  r.add({"", "LayerNormalization", &layer_norm_kernel});
  r.add({"", "LRN", &lrn_kernel});
  r.add({"", "MeanVarianceNormalization", &mvn_kernel});
  r.add({"ipu", "BatchNormalizationTraining", &batch_norm_training_kernel, true});
  r.add({"ipu", "BatchNormalizationTrainingGrad", &batch_norm_training_grad_kernel, true});
  r.add({"ipu", "LayerNormalizationGrad", &layer_norm_grad_kernel, true});
}

}  // namespace ipu::detail::math_ops
