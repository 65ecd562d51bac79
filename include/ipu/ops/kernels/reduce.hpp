#pragma once
// Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceLogSum, ReduceLogSumExp, ReduceSumSquare, plus ArgMax, ArgMin and CumSum.
//
// Sums accumulate in a wider type (F16 in F32, F32 in F64, integers in 64 bits) and are rounded
// once at the end. Reducing an empty set gives the identity (0 for sums, 1 for products, -inf /
// lowest for max, +inf / max for min, NaN for a float mean).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

enum class reduce_kind { sum, mean, max, min, prod, l1, l2, log_sum, log_sum_exp, sum_square };

/// Where each output's inputs are: output o reads x[base[o] + r + j * inner_stride] for every r in
/// `outer` and j < inner_count.
struct reduce_plan {
  std::vector<std::int64_t> base;
  std::vector<std::int64_t> outer{0};
  std::int64_t inner_count = 1, inner_stride = 0;
  [[nodiscard]] std::int64_t count() const { return static_cast<std::int64_t>(outer.size()) * inner_count; }
};

/// Walks all multi-indices of `dims` and lists sum_k idx_k * strides_k.
inline std::vector<std::int64_t> offsets_of(const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& strides) {
  std::vector<std::int64_t> out{0};
  for (std::size_t k = 0; k < dims.size(); ++k) {
    std::vector<std::int64_t> next;
    next.reserve(out.size() * static_cast<std::size_t>(dims[k]));
    for (auto o : out)
      for (std::int64_t i = 0; i < dims[k]; ++i) next.push_back(o + i * strides[k]);
    out = std::move(next);
  }
  return out;
}

inline reduce_plan plan_reduce(const shape& s, const std::vector<bool>& reduced) {
  reduce_plan p;
  if (s.num_elements() == 0) {
    // An empty input: outputs exist only over non-empty kept axes. Nothing is computed from its
    // dimensions beyond that count: an empty shape's other dimensions may be huge (the fuzzer's find).
    std::int64_t n = 1;
    for (std::size_t k = 0; k < s.rank(); ++k)
      if (!reduced[k] && s[k] == 0) n = 0;
    for (std::size_t k = 0; k < s.rank() && n != 0; ++k)
      if (!reduced[k]) n *= s[k];  // the output's own count: its shape is checked before this runs
    p.base.assign(static_cast<std::size_t>(n), 0);
    p.outer.clear();  // nothing to reduce: every output is the reduction's identity
    return p;
  }
  // Merge neighbouring axes that are both kept or both reduced; size-1 axes drop out.
  struct group {
    std::int64_t dim, stride;
    bool reduced;
  };
  std::vector<group> groups;
  const auto st = s.strides();
  for (std::size_t k = 0; k < s.rank(); ++k) {
    if (s[k] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[k] && groups.back().stride == s[k] * st[k]) {
      groups.back().dim *= s[k];
      groups.back().stride = st[k];
    } else {
      groups.push_back({s[k], st[k], reduced[k]});
    }
  }
  std::vector<std::int64_t> kd, ks, rd, rs;
  for (const auto& g : groups) {
    (g.reduced ? rd : kd).push_back(g.dim);
    (g.reduced ? rs : ks).push_back(g.stride);
  }
  p.base = offsets_of(kd, ks);
  if (!rd.empty()) {
    p.inner_count = rd.back();
    p.inner_stride = rs.back();
    rd.pop_back();
    rs.pop_back();
    p.outer = offsets_of(rd, rs);
  }
  return p;
}

template <class T, reduce_kind K>
T reduce_one(const T* x, const reduce_plan& p, std::int64_t base) {
  using A = acc_t<T>;
  using F = std::conditional_t<is_float_v<T>, A, double>;  // for logs and roots
  using C = compute_t<T>;
  auto each = [&](auto&& f) {
    for (auto r : p.outer)
      for (std::int64_t j = 0; j < p.inner_count; ++j) f(x[base + r + j * p.inner_stride]);
  };
  if constexpr (K == reduce_kind::max || K == reduce_kind::min) {
    C m = K == reduce_kind::max ? (is_float_v<T> ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::lowest())
                                : (is_float_v<T> ? std::numeric_limits<C>::infinity() : std::numeric_limits<C>::max());
    each([&](T v) {
      const auto c = static_cast<C>(v);
      bool take = K == reduce_kind::max ? c > m : c < m;
      if constexpr (is_float_v<T>) take = take || std::isnan(c);  // NaN propagates, like numpy
      if (take) m = c;
    });
    return convert<T>(m);
  } else if constexpr (K == reduce_kind::log_sum_exp) {
    F m = -std::numeric_limits<F>::infinity();
    each([&](T v) {
      const F c = convert<F>(v);
      if (c > m || std::isnan(c)) m = c;
    });
    if (!std::isfinite(m)) return convert<T>(m);
    F s = 0;
    each([&](T v) { s += std::exp(convert<F>(v) - m); });
    return convert<T>(m + std::log(s));
  } else if constexpr ((K == reduce_kind::sum || K == reduce_kind::mean) && is_float_v<T>) {
    // Contiguous runs (BatchNorm's per-channel sums) go through four accumulators: one serial
    // chain of additions is bound by the adder's latency. The order is fixed, so the result does
    // not depend on threads.
    A s = A{0};
    for (auto r : p.outer) {
      const T* row = x + base + r;
      if (p.inner_stride == 1) {
        A s4[4] = {A{0}, A{0}, A{0}, A{0}};
        std::int64_t j = 0;
        for (; j + 4 <= p.inner_count; j += 4)
          for (int k = 0; k < 4; ++k) s4[k] = acc_add(s4[k], static_cast<A>(row[j + k]));
        for (; j < p.inner_count; ++j) s4[0] = acc_add(s4[0], static_cast<A>(row[j]));
        s = acc_add(s, acc_add(acc_add(s4[0], s4[1]), acc_add(s4[2], s4[3])));
      } else {
        for (std::int64_t j = 0; j < p.inner_count; ++j) s = acc_add(s, static_cast<A>(row[j * p.inner_stride]));
      }
    }
    if constexpr (K == reduce_kind::mean) return convert<T>(s / static_cast<A>(p.count()));
    else return convert<T>(s);
  } else {
    A s = K == reduce_kind::prod ? A{1} : A{0};
    each([&](T v) {
      A a = static_cast<A>(v);
      if constexpr (K == reduce_kind::prod) {
        s = acc_mul(s, a);
      } else if constexpr (K == reduce_kind::sum_square || K == reduce_kind::l2) {
        s = acc_add(s, acc_mul(a, a));
      } else if constexpr (K == reduce_kind::l1) {
        if constexpr (std::is_signed_v<A>) {
          if (a < 0) a = acc_mul(a, A{-1});
        }
        s = acc_add(s, a);
      } else {
        s = acc_add(s, a);
      }
    });
    if constexpr (K == reduce_kind::mean) {
      const std::int64_t n = p.count();
      if constexpr (is_float_v<T>) return convert<T>(s / static_cast<A>(n));
      else return n ? convert<T>(s / static_cast<A>(n)) : T{0};
    } else if constexpr (K == reduce_kind::l2) {
      return convert<T>(std::sqrt(static_cast<F>(s)));
    } else if constexpr (K == reduce_kind::log_sum) {
      return convert<T>(std::log(static_cast<F>(s)));
    } else {
      return convert<T>(s);
    }
  }
}

template <reduce_kind K>
void reduce_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& s = x.info().shape;
  const auto& out = ctx.outputs[0];
  // Axes: an input (ReduceSum-13 and every Reduce-18) or an attribute (the other Reduce-17 ops).
  std::vector<std::int64_t> axes = ctx.has_input(1) ? read_ints(ctx, ctx.inputs[1], "axes") : ctx.attr_ints("axes");
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  if (axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) != 0) {
    copy_whole(ctx, 0, 0);
    return;
  }
  std::vector<bool> reduced(s.rank(), axes.empty());
  for (auto a : axes) reduced[normalize_axis(ctx, a, s.rank())] = true;
  std::vector<std::int64_t> dims;
  for (std::size_t k = 0; k < s.rank(); ++k)
    if (!reduced[k]) dims.push_back(s[k]);
    else if (keepdims) dims.push_back(1);
  check_output_shape(ctx, 0, shape(dims));
  if (out.info().type != x.info().type)
    throw ctx.fail("output type differs from the input's", "fix the output type in the IR");
  const auto plan = plan_reduce(s, reduced);
  // Kept innermost axes contiguous (a bias's gradient: [rows, features] summed over rows): sum whole
  // rows into a vector of outputs. Each output still adds its inputs in the same order.
  std::int64_t run = 1;
  if (s.num_elements() != 0)  // an empty input's dimensions may be huge; it has no rows anyway
    for (std::size_t k = s.rank(); k-- > 0 && !reduced[k];) run *= s[k];
  [[maybe_unused]] const bool by_rows = (K == reduce_kind::sum || K == reduce_kind::mean) && run >= 16 &&
                                        run < s.num_elements() && plan.base.size() % static_cast<std::size_t>(run) == 0;
  visit_numeric(x.info().type, ctx, [&]<class T>() {
    const T* in = data_as<T>(x);
    T* o = data_as<T>(out);
    if constexpr (K == reduce_kind::sum || K == reduce_kind::mean) {
      if (by_rows) {
        using A = acc_t<T>;
        const auto runs = plan.base.size() / static_cast<std::size_t>(run);
        ctx.parallel_for(runs, [&](std::size_t b, std::size_t e) {
          std::vector<A> acc_v(static_cast<std::size_t>(run));
          A* acc = acc_v.data();
          [[maybe_unused]] const A count = static_cast<A>(plan.count());
          for (std::size_t i = b; i < e; ++i) {
            const std::int64_t first = plan.base[i * static_cast<std::size_t>(run)];
            std::fill(acc, acc + run, A{0});
            for (auto r : plan.outer)
              for (std::int64_t j = 0; j < plan.inner_count; ++j) {
                const T* row = in + first + r + j * plan.inner_stride;
                for (std::int64_t l = 0; l < run; ++l) acc[l] = acc_add(acc[l], static_cast<A>(row[l]));
              }
            T* dst = o + i * static_cast<std::size_t>(run);
            for (std::int64_t l = 0; l < run; ++l) {
              if constexpr (K == reduce_kind::mean) {
                if constexpr (is_float_v<T>) dst[l] = convert<T>(acc[l] / count);
                else dst[l] = plan.count() ? convert<T>(acc[l] / count) : T{0};
              } else {
                dst[l] = convert<T>(acc[l]);
              }
            }
          }
        });
        return;
      }
    }
    ctx.parallel_for(plan.base.size(), [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) o[i] = reduce_one<T, K>(in, plan, plan.base[i]);
    });
  });
}

/// Splits a shape around `axis` into (outer, n, inner) for axis-wise kernels.
struct axis_split {
  std::int64_t outer = 1, n = 1, inner = 1;
};
inline axis_split split_at(const shape& s, std::size_t axis) {
  axis_split r;
  for (std::size_t k = 0; k < s.rank(); ++k)
    (k < axis ? r.outer : k == axis ? r.n : r.inner) *= s[k];
  return r;
}

template <bool Max>
void arg_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& s = x.info().shape;
  const std::size_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), s.rank());
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool last = ctx.attr_int("select_last_index", 0) != 0;
  std::vector<std::int64_t> dims = s.dims();
  if (keepdims) dims[axis] = 1;
  else dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(axis));
  check_output_shape(ctx, 0, shape(dims));
  const auto sp = split_at(s, axis);
  if (sp.n == 0 && sp.outer * sp.inner > 0) throw ctx.fail("cannot take the arg-extremum of an empty axis", "fix the input");
  std::int64_t* o = data_as<std::int64_t>(ctx.outputs[0]);
  visit_numeric(x.info().type, ctx, [&]<class T>() {
    using C = compute_t<T>;
    const T* in = data_as<T>(x);
    for (std::int64_t a = 0; a < sp.outer; ++a)
      for (std::int64_t c = 0; c < sp.inner; ++c) {
        const T* row = in + a * sp.n * sp.inner + c;
        std::int64_t best = 0;
        C bv = static_cast<C>(row[0]);
        for (std::int64_t i = 1; i < sp.n; ++i) {
          const C v = static_cast<C>(row[i * sp.inner]);
          bool better = Max ? v > bv : v < bv;
          if constexpr (is_float_v<T>) {
            if (std::isnan(bv)) continue;  // the first NaN wins, like numpy
            better = better || std::isnan(v);
          }
          if (better || (last && v == bv)) best = i, bv = v;
        }
        o[a * sp.inner + c] = best;
      }
  });
}

inline void cumsum_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& s = x.info().shape;
  check_output_shape(ctx, 0, s);
  const auto axis_v = read_ints(ctx, ctx.input(1), "axis");
  if (axis_v.size() != 1) throw ctx.fail("axis must be a scalar", "give a one-element axis tensor");
  const std::size_t axis = normalize_axis(ctx, axis_v[0], s.rank());
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.attr_int("reverse", 0) != 0;
  const auto sp = split_at(s, axis);
  visit_numeric(x.info().type, ctx, [&]<class T>() {
    using A = acc_t<T>;
    const T* in = data_as<T>(x);
    T* o = data_as<T>(ctx.outputs[0]);
    for (std::int64_t a = 0; a < sp.outer; ++a)
      for (std::int64_t c = 0; c < sp.inner; ++c) {
        A sum{0};
        for (std::int64_t step = 0; step < sp.n; ++step) {
          const std::int64_t i = reverse ? sp.n - 1 - step : step;
          const std::int64_t at = (a * sp.n + i) * sp.inner + c;
          const A v = static_cast<A>(in[at]);
          if (!exclusive) sum = acc_add(sum, v);
          o[at] = convert<T>(sum);
          if (exclusive) sum = acc_add(sum, v);
        }
      }
  });
}

inline void register_reduce(op_registry& r) {
  r.add({"", "ReduceSum", reduce_kernel<reduce_kind::sum>});
  r.add({"", "ReduceMean", reduce_kernel<reduce_kind::mean>});
  r.add({"", "ReduceMax", reduce_kernel<reduce_kind::max>});
  r.add({"", "ReduceMin", reduce_kernel<reduce_kind::min>});
  r.add({"", "ReduceProd", reduce_kernel<reduce_kind::prod>});
  r.add({"", "ReduceL1", reduce_kernel<reduce_kind::l1>});
  r.add({"", "ReduceL2", reduce_kernel<reduce_kind::l2>});
  r.add({"", "ReduceLogSum", reduce_kernel<reduce_kind::log_sum>});
  r.add({"", "ReduceLogSumExp", reduce_kernel<reduce_kind::log_sum_exp>});
  r.add({"", "ReduceSumSquare", reduce_kernel<reduce_kind::sum_square>});
  r.add({"", "ArgMax", arg_kernel<true>});
  r.add({"", "ArgMin", arg_kernel<false>});
  r.add({"", "CumSum", cumsum_kernel});
}

}  // namespace ipu::detail::tensor_ops
