#pragma once
// Linear-algebra kernels: Det, by LU factorisation with partial pivoting in double precision
// whatever the element type (one rounding, at the end).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "ipu/ops/kernels/numeric.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

/// The determinant of the m x m row-major matrix `a` (overwritten by its LU factors).
inline double lu_determinant(double* a, std::size_t m) {
  double det = 1;
  for (std::size_t k = 0; k < m; ++k) {
    std::size_t pivot = k;  // the largest magnitude in the column keeps the factors stable
    for (std::size_t i = k; i < m; ++i) {
      // A NaN never compares larger, so the search would pass it over (and a [0, NaN] column
      // would read as singular): NaN in, NaN out, as numpy's.
      if (std::isnan(a[i * m + k])) return std::numeric_limits<double>::quiet_NaN();
      if (std::fabs(a[i * m + k]) > std::fabs(a[pivot * m + k])) pivot = i;
    }
    if (a[pivot * m + k] == 0) return 0;  // singular
    if (pivot != k) {
      for (std::size_t j = 0; j < m; ++j) std::swap(a[k * m + j], a[pivot * m + j]);
      det = -det;
    }
    const double p = a[k * m + k];
    det *= p;
    for (std::size_t i = k + 1; i < m; ++i) {
      const double f = a[i * m + k] / p;
      if (f == 0) continue;
      for (std::size_t j = k + 1; j < m; ++j) a[i * m + j] -= f * a[k * m + j];
    }
  }
  return det;
}

inline void det_kernel(const kernel_context& ctx) {
  tensor_ops::only_attributes(ctx, {});
  const auto x = ctx.input(0);
  const auto& xs = x.info().shape;
  if (xs.rank() < 2 || xs[xs.rank() - 1] != xs[xs.rank() - 2])
    throw ctx.fail("X " + to_string(x.info()) + " is not a batch of square matrices", "give X as [*, M, M]");
  const shape batch(std::vector<std::int64_t>(xs.begin(), xs.end() - 2));
  if (ctx.outputs[0].info() != tensor_info{x.info().type, batch})
    throw ctx.fail("Y is " + to_string(ctx.outputs[0].info()) + " in the IR, but X gives " +
                       to_string(tensor_info{x.info().type, batch}),
                   "declare Y as X's type and batch shape");
  const auto m = static_cast<std::size_t>(xs[xs.rank() - 1]);
  const auto count = static_cast<std::size_t>(batch.num_elements());
  visit(float_types, x.info().type, ctx, [&]<class T>() {
    const T* in = reinterpret_cast<const T*>(x.data());
    T* out = reinterpret_cast<T*>(ctx.outputs[0].data());
    parallel_blocks(ctx, count, 1, [&](std::size_t begin, std::size_t end) {
      std::vector<double> a(m * m);
      for (std::size_t b = begin; b < end; ++b) {
        for (std::size_t i = 0; i < m * m; ++i) a[i] = static_cast<double>(widen(in[b * m * m + i]));
        out[b] = from_double<T>(lu_determinant(a.data(), m));
      }
    });
  });
}

inline void register_linalg_kernels(op_registry& r) { r.add({"", "Det", det_kernel}); }

}  // namespace ipu::detail::math_ops
