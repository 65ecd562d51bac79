#pragma once
// Gemm and MatMul. F32 / F64 go to OpenBLAS; F16 is widened to F32, multiplied with F32
// accumulation and rounded once; integer types use a wrapping loop.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ipu/ops/kernels/blas.hpp"
#include "ipu/ops/kernels/broadcast.hpp"
#include "ipu/ops/kernels/numeric.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

inline constexpr auto matmul_types = float_types + type_list<std::int32_t, std::int64_t, std::uint32_t, std::uint64_t>{};

/// The elements of `v` in the compute type: the data itself, or a widened copy for F16.
template <class T>
class widened {
 public:
  explicit widened(std::span<const T> v) {
    if constexpr (std::is_same_v<T, compute_t<T>>) {
      data_ = v.data();
    } else {
      copy_.resize(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) copy_[i] = widen(v[i]);
      data_ = copy_.data();
    }
  }
  [[nodiscard]] const compute_t<T>* data() const noexcept { return data_; }

 private:
  std::vector<compute_t<T>> copy_;
  const compute_t<T>* data_ = nullptr;
};

/// An output in the compute type: written in place, or staged in F32 and rounded on finish().
template <class T>
class widened_output {
 public:
  explicit widened_output(std::span<T> v) : out_(v) {
    if constexpr (std::is_same_v<T, compute_t<T>>)
      data_ = v.data();
    else {
      stage_.resize(v.size());
      data_ = stage_.data();
    }
  }
  [[nodiscard]] compute_t<T>* data() const noexcept { return data_; }
  void finish() {
    if constexpr (!std::is_same_v<T, compute_t<T>>)
      for (std::size_t i = 0; i < out_.size(); ++i) out_[i] = narrow<T>(stage_[i]);
  }

 private:
  std::span<T> out_;
  std::vector<compute_t<T>> stage_;
  compute_t<T>* data_ = nullptr;
};

inline void gemm_kernel(const kernel_context& ctx) {
  const auto a = ctx.input(0);
  const auto b = ctx.input(1);
  expect_type(ctx, 1, a.info().type);
  const auto y = output(ctx, 0);
  const bool ta = ctx.attr_int("transA", 0) != 0;
  const bool tb = ctx.attr_int("transB", 0) != 0;
  const double alpha = ctx.attr_float("alpha", 1.0f);
  const double beta = ctx.attr_float("beta", 1.0f);
  const shape& sa = a.info().shape;
  const shape& sb = b.info().shape;
  if (sa.rank() != 2 || sb.rank() != 2)
    throw ctx.fail("A is " + to_string(sa) + " and B is " + to_string(sb) + "; Gemm takes matrices",
                   "use MatMul for other ranks");
  const std::int64_t m = ta ? sa[1] : sa[0];
  const std::int64_t k = ta ? sa[0] : sa[1];
  const std::int64_t kb = tb ? sb[1] : sb[0];
  const std::int64_t n = tb ? sb[0] : sb[1];
  if (k != kb)
    throw ctx.fail("inner dimensions differ: op(A) is [" + std::to_string(m) + "," + std::to_string(k) +
                       "], op(B) is [" + std::to_string(kb) + "," + std::to_string(n) + "]",
                   "check transA / transB and the input shapes");
  const shape out_shape{m, n};
  if (y.info().shape != out_shape)
    throw ctx.fail("output shape " + to_string(y.info().shape) + " is not " + to_string(out_shape),
                   "fix the output shape in the model");
  const bool with_c = ctx.has_input(2) && beta != 0.0;
  if (with_c) expect_type(ctx, 2, a.info().type);
  visit(matmul_types, a.info().type, ctx, [&]<class T>() {
    using C = compute_t<T>;
    if constexpr (std::is_integral_v<T>) {
      T* out = y.as<T>().data();
      parallel_gemm<T>(ctx, ta, tb, m, n, k, T{1}, a.as<T>().data(), sa[1], b.as<T>().data(), sb[1], T{0}, out, n);
      std::vector<T> c;
      if (with_c) {
        c.resize(static_cast<std::size_t>(m * n));
        broadcast_copy(ctx, ctx.input(2).as<T>().data(), ctx.input(2).info().shape, c.data(), out_shape);
      }
      const auto count = static_cast<std::size_t>(m * n);
      if (alpha == 1.0 && (beta == 1.0 || !with_c)) {
        if (with_c)
          for (std::size_t i = 0; i < count; ++i) out[i] = add(out[i], c[i]);
      } else {
        for (std::size_t i = 0; i < count; ++i)
          out[i] = from_double<T>(alpha * static_cast<double>(out[i]) +
                                  (with_c ? beta * static_cast<double>(c[i]) : 0.0));
      }
    } else {
      const widened<T> wa(a.as<T>()), wb(b.as<T>());
      widened_output<T> out(y.as<T>());
      if (with_c) {
        const auto cv = ctx.input(2);
        const widened<T> wc(cv.as<T>());
        broadcast_copy(ctx, wc.data(), cv.info().shape, out.data(), out_shape);
      }
      parallel_gemm<C>(ctx, ta, tb, m, n, k, static_cast<C>(alpha), wa.data(), sa[1], wb.data(), sb[1],
                       with_c ? static_cast<C>(beta) : C{0}, out.data(), n);
      out.finish();
    }
  });
}

/// MatMul with numpy semantics: 1-D operands are promoted (and the added dimension dropped),
/// leading dimensions broadcast.
inline void matmul_kernel(const kernel_context& ctx) {
  const auto a = ctx.input(0);
  const auto b = ctx.input(1);
  expect_type(ctx, 1, a.info().type);
  const auto y = output(ctx, 0);
  const shape& sa = a.info().shape;
  const shape& sb = b.info().shape;
  if (sa.rank() == 0 || sb.rank() == 0)
    throw ctx.fail("MatMul of a scalar (" + to_string(sa) + " x " + to_string(sb) + ")", "use Mul for scalars");
  const bool a_vec = sa.rank() == 1, b_vec = sb.rank() == 1;
  const std::int64_t m = a_vec ? 1 : sa[sa.rank() - 2];
  const std::int64_t k = sa[sa.rank() - 1];
  const std::int64_t kb = b_vec ? sb[0] : sb[sb.rank() - 2];
  const std::int64_t n = b_vec ? 1 : sb[sb.rank() - 1];
  if (k != kb)
    throw ctx.fail("inner dimensions differ: " + to_string(sa) + " x " + to_string(sb),
                   "make A's last dimension equal B's second-to-last");
  const shape batch_a(std::vector<std::int64_t>(sa.begin(), sa.end() - (a_vec ? 1 : 2)));
  const shape batch_b(std::vector<std::int64_t>(sb.begin(), sb.end() - (b_vec ? 1 : 2)));
  const std::array<shape, 2> batches{batch_a, batch_b};
  const shape batch = broadcast_shapes(ctx, batches);
  std::vector<std::int64_t> expect(batch.begin(), batch.end());
  if (!a_vec) expect.push_back(m);
  if (!b_vec) expect.push_back(n);
  if (y.info().shape != shape(expect))
    throw ctx.fail("output shape " + to_string(y.info().shape) + " is not " + to_string(shape(expect)),
                   "fix the output shape in the model");
  const auto count = static_cast<std::size_t>(batch.num_elements());
  if (count == 0 || m == 0 || n == 0) return;

  visit(matmul_types, a.info().type, ctx, [&]<class T>() {
    using C = compute_t<T>;
    const widened<T> wa(a.as<T>()), wb(b.as<T>());
    widened_output<T> out(y.as<T>());
    const C* pa = wa.data();
    const C* pb = wb.data();
    C* py = out.data();
    if (batch_b.num_elements() == 1 && batch_a == batch) {
      // B is shared by every batch and A's batches are contiguous: one GEMM with the batches as rows.
      parallel_gemm<C>(ctx, false, false, static_cast<std::int64_t>(count) * m, n, k, C{1}, pa, k, pb, n, C{0}, py, n);
    } else {
      // Offsets of each batch's A and B (in matrices) through the broadcast plan.
      const auto plan = make_broadcast_plan<2>(ctx, batch, batches);
      std::vector<std::array<std::int64_t, 2>> offsets(count);
      for_each_run(plan, 0, plan.size, [&](std::int64_t o, const std::array<std::int64_t, 2>& in, std::int64_t len) {
        for (std::int64_t i = 0; i < len; ++i)
          offsets[static_cast<std::size_t>(o + i)] = {in[0] + i * plan.inner_stride(0), in[1] + i * plan.inner_stride(1)};
      });
      auto one = [&](std::size_t i, bool split) {
        const C* ab = pa + offsets[i][0] * m * k;
        const C* bb = pb + offsets[i][1] * k * n;
        C* yb = py + static_cast<std::int64_t>(i) * m * n;
        if (split)
          parallel_gemm<C>(ctx, false, false, m, n, k, C{1}, ab, k, bb, n, C{0}, yb, n);
        else
          gemm<C>(false, false, m, n, k, C{1}, ab, k, bb, n, C{0}, yb, n);
      };
      if (count < 4) {
        for (std::size_t i = 0; i < count; ++i) one(i, true);
      } else {
        const double flops = 2.0 * static_cast<double>(m * n * k);
        parallel_blocks(ctx, count, std::max<std::size_t>(1, static_cast<std::size_t>(1.0e6 / std::max(flops, 1.0))),
                        [&](std::size_t bgn, std::size_t end) {
                          for (std::size_t i = bgn; i < end; ++i) one(i, false);
                        });
      }
    }
    out.finish();
  });
}

inline void register_gemm_kernels(op_registry& r) {
  r.add({"", "Gemm", &gemm_kernel, true});
  r.add({"", "MatMul", &matmul_kernel, true});
}

}  // namespace ipu::detail::math_ops
