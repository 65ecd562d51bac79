#pragma once
// Numpy (multidirectional) broadcasting for the element-wise kernels. A plan maps every input onto
// the output shape with zero strides on broadcast dimensions, drops size-1 dimensions and merges
// dimensions that stay contiguous, so the common cases (same shapes, a scalar, a per-channel
// vector) run as long inner loops.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ipu/ops/kernels/numeric.hpp"
#include "ipu/ops/kernels/vector_isa.hpp"

namespace ipu::detail::math_ops {

template <std::size_t N>
struct broadcast_plan {
  std::vector<std::int64_t> dims;                    // collapsed output dimensions, at least one
  std::array<std::vector<std::int64_t>, N> strides;  // per input and dimension; 0 where broadcast
  std::int64_t size = 0;                             // output elements

  [[nodiscard]] std::int64_t inner_stride(std::size_t k) const noexcept { return strides[k].back(); }
};

/// The numpy broadcast of `shapes`, or an error naming the clashing dimension.
inline shape broadcast_shapes(const kernel_context& ctx, std::span<const shape> shapes) {
  std::size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.rank());
  std::vector<std::int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    const std::size_t off = rank - s.rank();
    for (std::size_t i = 0; i < s.rank(); ++i) {
      const auto d = s[i];
      auto& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o != 1)
        throw ctx.fail("shapes " + to_string(shapes[0]) + " and " + to_string(s) + " cannot be broadcast (dimension " +
                           std::to_string(off + i) + ": " + std::to_string(o) + " vs " + std::to_string(d) + ")",
                       "make each dimension equal or 1 (numpy broadcasting)");
      o = d;
    }
  }
  return shape(std::move(out));
}

/// Plans reading `inputs` (each broadcastable to `out`) in `out`'s row-major order.
template <std::size_t N>
broadcast_plan<N> make_broadcast_plan(const kernel_context& ctx, const shape& out, const std::array<shape, N>& inputs) {
  const std::size_t rank = out.rank();
  std::vector<std::int64_t> dims;
  std::array<std::vector<std::int64_t>, N> strides;
  std::array<std::vector<std::int64_t>, N> full;  // per input, strides aligned to out's dimensions
  for (std::size_t k = 0; k < N; ++k) {
    const shape& s = inputs[k];
    if (s.rank() > rank)
      throw ctx.fail("input #" + std::to_string(k) + " of shape " + to_string(s) + " has more dimensions than the output " +
                         to_string(out),
                     "check the output shape in the model");
    full[k].assign(rank, 0);
    std::int64_t stride = 1;
    for (std::size_t i = s.rank(); i-- > 0;) {
      const std::size_t o = i + rank - s.rank();
      if (s[i] != out[o] && s[i] != 1)
        throw ctx.fail("input #" + std::to_string(k) + " of shape " + to_string(s) + " cannot be broadcast to " +
                           to_string(out),
                       "make each dimension equal to the output's or 1 (numpy broadcasting)");
      full[k][o] = s[i] == 1 ? 0 : stride;
      stride *= s[i];
    }
  }
  for (std::size_t i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;
    bool merge = !dims.empty();
    for (std::size_t k = 0; k < N && merge; ++k) merge = strides[k].back() == full[k][i] * out[i];
    if (merge) {
      dims.back() *= out[i];
      for (std::size_t k = 0; k < N; ++k) strides[k].back() = full[k][i];
    } else {
      dims.push_back(out[i]);
      for (std::size_t k = 0; k < N; ++k) strides[k].push_back(full[k][i]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (auto& s : strides) s.push_back(0);
  }
  return {std::move(dims), std::move(strides), out.num_elements()};
}

/// Calls f(out_offset, in_offsets, length) for each run of output elements in [begin, end) along
/// the innermost dimension; input k advances by plan.inner_stride(k) per element within a run.
template <std::size_t N, class F>
void for_each_run(const broadcast_plan<N>& p, std::int64_t begin, std::int64_t end, F&& f) {
  if (begin >= end) return;
  const std::size_t r = p.dims.size();
  std::vector<std::int64_t> idx(r, 0);
  std::array<std::int64_t, N> off{};
  std::int64_t rem = begin;
  for (std::size_t i = r; i-- > 0;) {
    idx[i] = rem % p.dims[i];
    rem /= p.dims[i];
    for (std::size_t k = 0; k < N; ++k) off[k] += idx[i] * p.strides[k][i];
  }
  std::int64_t pos = begin;
  const std::int64_t inner = p.dims[r - 1];
  while (pos < end) {
    const std::int64_t len = std::min(inner - idx[r - 1], end - pos);
    f(pos, off, len);
    pos += len;
    idx[r - 1] += len;
    for (std::size_t k = 0; k < N; ++k) off[k] += len * p.strides[k][r - 1];
    for (std::size_t i = r - 1; idx[i] == p.dims[i] && i > 0; --i) {
      idx[i] = 0;
      for (std::size_t k = 0; k < N; ++k) off[k] -= p.dims[i] * p.strides[k][i];
      ++idx[i - 1];
      for (std::size_t k = 0; k < N; ++k) off[k] += p.strides[k][i - 1];
    }
  }
}

/// out[i] = op(a[..], b[..]) over the broadcast of a and b, in parallel blocks.
template <class A, class B, class O, class Op>
void broadcast_binary(const kernel_context& ctx, const A* a, const shape& sa, const B* b, const shape& sb, O* out,
                      const shape& so, Op op) {
  const auto plan = make_broadcast_plan<2>(ctx, so, {sa, sb});
  const std::int64_t ia = plan.inner_stride(0), ib = plan.inner_stride(1);
  vectorised_blocks(ctx, static_cast<std::size_t>(plan.size), elementwise_grain, [&](std::size_t begin, std::size_t end) {
    for_each_run(plan, static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end),
                 [&](std::int64_t o, const std::array<std::int64_t, 2>& in, std::int64_t len) {
                   O* y = out + o;
                   const A* x0 = a + in[0];
                   const B* x1 = b + in[1];
                   // Separate loops per stride pattern so each vectorises.
                   if (ia == 1 && ib == 1) {
                     for (std::int64_t i = 0; i < len; ++i) y[i] = op(x0[i], x1[i]);
                   } else if (ia == 0 && ib == 1) {
                     const A v = *x0;
                     for (std::int64_t i = 0; i < len; ++i) y[i] = op(v, x1[i]);
                   } else if (ia == 1 && ib == 0) {
                     const B v = *x1;
                     for (std::int64_t i = 0; i < len; ++i) y[i] = op(x0[i], v);
                   } else {
                     const O v = op(*x0, *x1);
                     for (std::int64_t i = 0; i < len; ++i) y[i] = v;
                   }
                 });
  });
}

/// out[i] = op(a[..], b[..], c[..]) over the broadcast of three inputs (Where).
template <class A, class B, class C, class O, class Op>
void broadcast_ternary(const kernel_context& ctx, const A* a, const shape& sa, const B* b, const shape& sb, const C* c,
                       const shape& sc, O* out, const shape& so, Op op) {
  const auto plan = make_broadcast_plan<3>(ctx, so, {sa, sb, sc});
  const std::int64_t ia = plan.inner_stride(0), ib = plan.inner_stride(1), ic = plan.inner_stride(2);
  vectorised_blocks(ctx, static_cast<std::size_t>(plan.size), elementwise_grain, [&](std::size_t begin, std::size_t end) {
    for_each_run(plan, static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end),
                 [&](std::int64_t o, const std::array<std::int64_t, 3>& in, std::int64_t len) {
                   O* y = out + o;
                   const A* x0 = a + in[0];
                   const B* x1 = b + in[1];
                   const C* x2 = c + in[2];
                   // Unit strides spelled out so the loops vectorize: Where(mask, dY, 0) is ReLU's
                   // and MaxPool's gradient over whole activations.
                   if (ia == 1 && ib == 1 && ic == 1) {
                     for (std::int64_t i = 0; i < len; ++i) y[i] = op(x0[i], x1[i], x2[i]);
                   } else if (ia == 1 && ib == 1 && ic == 0) {
                     const C v = *x2;
                     for (std::int64_t i = 0; i < len; ++i) y[i] = op(x0[i], x1[i], v);
                   } else if (ia == 1 && ib == 0 && ic == 1) {
                     const B v = *x1;
                     for (std::int64_t i = 0; i < len; ++i) y[i] = op(x0[i], v, x2[i]);
                   } else {
                     for (std::int64_t i = 0; i < len; ++i) y[i] = op(x0[i * ia], x1[i * ib], x2[i * ic]);
                   }
                 });
  });
}

/// Copies `in` broadcast to `out`'s shape (the first operand of the variadic ops, a Gemm bias).
template <class T>
void broadcast_copy(const kernel_context& ctx, const T* in, const shape& si, T* out, const shape& so) {
  const auto plan = make_broadcast_plan<1>(ctx, so, {si});
  const std::int64_t is = plan.inner_stride(0);
  parallel_blocks(ctx, static_cast<std::size_t>(plan.size), elementwise_grain, [&](std::size_t begin, std::size_t end) {
    for_each_run(plan, static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end),
                 [&](std::int64_t o, const std::array<std::int64_t, 1>& off, std::int64_t len) {
                   const T* x = in + off[0];
                   if (is == 1)
                     std::copy(x, x + len, out + o);
                   else
                     std::fill(out + o, out + o + len, *x);
                 });
  });
}

}  // namespace ipu::detail::math_ops
