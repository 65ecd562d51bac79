#pragma once
// TopK: the k largest (or smallest) elements along an axis with their indices. Results are always
// sorted; equal values keep the lower index first. NaN counts as larger than every number.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "ipu/ops/kernels/reduce.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

inline void topk_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& s = x.info().shape;
  const auto kv = read_ints(ctx, ctx.input(1), "K");
  if (kv.size() != 1) throw ctx.fail("K must hold one value", "give K as a one-element INT64 tensor");
  const std::size_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), s.rank());
  const std::int64_t k = kv[0];
  if (k < 0 || k > s[axis])
    throw ctx.fail("K = " + std::to_string(k) + " is outside [0, " + std::to_string(s[axis]) + "]",
                   "K may not exceed the axis size");
  const bool largest = ctx.attr_int("largest", 1) != 0;
  std::vector<std::int64_t> dims = s.dims();
  dims[axis] = k;
  check_output_shape(ctx, 0, shape(dims));
  check_output_shape(ctx, 1, shape(dims));
  const auto sp = split_at(s, axis);
  std::int64_t* out_i = data_as<std::int64_t>(ctx.outputs[1]);
  visit_numeric(x.info().type, ctx, [&]<class T>() {
    using C = compute_t<T>;
    const T* in = data_as<T>(x);
    T* out_v = data_as<T>(ctx.outputs[0]);
    auto less = [](C a, C b) {
      if constexpr (is_float_v<T>) {
        if (std::isnan(a)) return false;
        if (std::isnan(b)) return true;
      }
      return a < b;
    };
    ctx.parallel_for(static_cast<std::size_t>(sp.outer * sp.inner), [&](std::size_t b, std::size_t e) {
      std::vector<std::int64_t> order(static_cast<std::size_t>(sp.n));
      std::vector<C> row(static_cast<std::size_t>(sp.n));
      for (std::size_t slice = b; slice < e; ++slice) {
        const auto a = static_cast<std::int64_t>(slice) / sp.inner, c = static_cast<std::int64_t>(slice) % sp.inner;
        for (std::int64_t i = 0; i < sp.n; ++i)
          row[static_cast<std::size_t>(i)] = static_cast<C>(in[(a * sp.n + i) * sp.inner + c]);
        std::iota(order.begin(), order.end(), 0);
        auto before = [&](std::int64_t p, std::int64_t q) {
          const C u = row[static_cast<std::size_t>(p)], v = row[static_cast<std::size_t>(q)];
          if (largest ? less(v, u) : less(u, v)) return true;
          if (largest ? less(u, v) : less(v, u)) return false;
          return p < q;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (std::int64_t j = 0; j < k; ++j) {
          const auto at = (a * k + j) * sp.inner + c;
          const auto src = order[static_cast<std::size_t>(j)];
          out_v[at] = in[(a * sp.n + src) * sp.inner + c];
          out_i[at] = src;
        }
      }
    });
  });
}

inline void register_topk(op_registry& r) { r.add({"", "TopK", topk_kernel}); }

}  // namespace ipu::detail::tensor_ops
