#pragma once
// Kernels that only rearrange bytes: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout
// (inference), Transpose, DepthToSpace, SpaceToDepth, plus Shape and Size which read only shapes.
// All of them work for every element type. Beside Dropout, the library's own ipu::DropoutMask: the
// seeded mask a training step's Dropout uses (ipu/train/training_graph.hpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "ipu/ops/kernels/philox.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

/// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the output shape comes from the IR, the bytes
/// are unchanged.
inline void copy_kernel(const kernel_context& ctx) { copy_whole(ctx, 0, 0); }

/// Dropout: identity in inference; in training mode (input 2 true) zeroes each element with
/// probability `ratio` and scales the rest by 1/(1-ratio). The mask output says which were kept.
inline void dropout_kernel(const kernel_context& ctx) {
  const bool training = ctx.has_input(2) && *data_as<bool>(ctx.inputs[2]);
  double ratio = 0.5;
  if (ctx.has_input(1)) ratio = read_doubles(ctx, ctx.inputs[1]).at(0);
  const auto& y = ctx.outputs[0];
  const bool want_mask = has_output(ctx, 1);
  bool* mask = want_mask ? data_as<bool>(ctx.outputs[1]) : nullptr;
  const auto n = static_cast<std::size_t>(y.info().num_elements());
  if (!training || ratio == 0.0) {
    copy_whole(ctx, 0, 0);
    if (mask) std::fill(mask, mask + n, true);
    return;
  }
  if (ratio < 0.0 || ratio >= 1.0)
    throw ctx.fail("dropout ratio " + std::to_string(ratio) + " is outside [0, 1)", "use a ratio in [0, 1)");
  // The mask draws are numpy's legacy RandomState(seed).uniform(0, 1): MT19937 seeded like
  // std::mt19937, two 32-bit words per 53-bit double; an element is kept when its draw >= ratio.
  // With a seed the result is reproducible (and equals ONNX's reference implementation).
  std::mt19937 rng(ctx.has_attr("seed") ? static_cast<std::uint32_t>(ctx.attr_int("seed", 0)) : std::random_device{}());
  auto uniform = [&rng] {
    const std::uint32_t a = static_cast<std::uint32_t>(rng()) >> 5, b = static_cast<std::uint32_t>(rng()) >> 6;
    return (static_cast<double>(a) * 67108864.0 + static_cast<double>(b)) / 9007199254740992.0;
  };
  const double scale = 1.0 / (1.0 - ratio);
  visit_float(y.info().type, ctx, [&]<class T>() {
    const T* x = data_as<T>(ctx.input(0));
    T* out = data_as<T>(y);
    for (std::size_t i = 0; i < n; ++i) {
      const bool k = uniform() >= ratio;
      if (mask) mask[i] = k;
      out[i] = k ? convert<T>(static_cast<double>(convert<double>(x[i])) * scale) : T{};
    }
  });
}

/// ipu::DropoutMask(data, ratio, seed), attribute `stream`: the BOOL mask of a training-mode Dropout
/// of `data` (its shape only is read), each element false with probability `ratio`. `seed` is U64
/// [3]: the session's seed, the step and the micro-batch; `stream` tells the step's Dropouts apart.
/// Element i takes word i % 4 of Philox4x32-10 with key = seed and counter = (i / 4, stream,
/// micro-batch, step mod 2^32), and is kept when that word is at least ratio * 2^32: the same
/// (seed, step, micro-batch, stream) gives the same mask, any other a fresh one.
inline void dropout_mask_kernel(const kernel_context& ctx) {
  const double ratio = read_doubles(ctx, ctx.input(1)).at(0);
  if (!(ratio >= 0.0 && ratio < 1.0))
    throw ctx.fail("dropout ratio " + std::to_string(ratio) + " is outside [0, 1)", "use a ratio in [0, 1)");
  const auto seed = ctx.input(2);
  if (seed.info() != tensor_info{data_type::U64, shape{3}})
    throw ctx.fail("the seed is " + to_string(seed.info()) + ", not U64[3] (seed, step, micro-batch)",
                   "feed the step's seed as the training session does");
  const auto* s = data_as<std::uint64_t>(seed);
  const std::int64_t stream = ctx.attr_int("stream", 0);
  if (stream < 0 || stream > 0xFFFFFFFF)
    throw ctx.fail("stream " + std::to_string(stream) + " is outside [0, 2^32)", "number the Dropouts of a step from 0");
  const auto n = static_cast<std::size_t>(ctx.outputs[0].info().num_elements());
  if (n / 4 > 0xFFFFFFFFu)
    throw ctx.fail("a mask of " + std::to_string(n) + " elements exceeds the generator's 2^34", "split the tensor");
  check_output_shape(ctx, 0, ctx.input(0).info().shape);
  // ratio * 2^32 is exact in double for an F32 or F64 ratio; a word below its ceiling is dropped.
  const double threshold = std::ceil(ratio * 4294967296.0);
  const std::array<std::uint32_t, 2> key{static_cast<std::uint32_t>(s[0]), static_cast<std::uint32_t>(s[0] >> 32)};
  const auto micro = static_cast<std::uint32_t>(s[2]), step = static_cast<std::uint32_t>(s[1]);
  bool* mask = data_as<bool>(ctx.outputs[0]);
  ctx.parallel_for((n + 3) / 4, [&](std::size_t begin, std::size_t end) {
    for (std::size_t b = begin; b < end; ++b) {
      const auto words = philox4x32_10({static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(stream), micro, step}, key);
      for (std::size_t w = 0; w < 4 && b * 4 + w < n; ++w) mask[b * 4 + w] = static_cast<double>(words[w]) >= threshold;
    }
  });
}

/// dst[a * dst_a + b] = src[a + b * src_b] for a < rows, b < cols, in 16 x 16 tiles so both sides
/// are read and written a cache line at a time. 4-byte elements move as 4 x 4 blocks through SSE
/// registers (a load and a store per four elements, where one at a time took ~1.4 ns each).
template <std::size_t N>
void transpose_tiles(const std::byte* src, std::byte* dst, std::int64_t rows, std::int64_t cols, std::int64_t src_b,
                     std::int64_t dst_a) {
  constexpr std::int64_t tile = 16;
#if defined(__SSE2__)
  if constexpr (N == 4) {
    auto at = [](const std::byte* base, std::int64_t i) { return reinterpret_cast<const float*>(base) + i; };
    float* out = reinterpret_cast<float*>(dst);
    const std::int64_t rows4 = rows / 4 * 4, cols4 = cols / 4 * 4;
    constexpr std::int64_t sse_tile = 8;  // measured best of 8, 16, 32, 64 on [512, 2048] and attention shapes
    for (std::int64_t a0 = 0; a0 < rows4; a0 += sse_tile)
      for (std::int64_t b0 = 0; b0 < cols4; b0 += sse_tile) {
        const std::int64_t a1 = std::min(rows4, a0 + sse_tile), b1 = std::min(cols4, b0 + sse_tile);
        for (std::int64_t b = b0; b < b1; b += 4)
          for (std::int64_t a = a0; a < a1; a += 4) {
            __m128 r0 = _mm_loadu_ps(at(src, a + b * src_b)), r1 = _mm_loadu_ps(at(src, a + (b + 1) * src_b));
            __m128 r2 = _mm_loadu_ps(at(src, a + (b + 2) * src_b)), r3 = _mm_loadu_ps(at(src, a + (b + 3) * src_b));
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _mm_storeu_ps(out + a * dst_a + b, r0);
            _mm_storeu_ps(out + (a + 1) * dst_a + b, r1);
            _mm_storeu_ps(out + (a + 2) * dst_a + b, r2);
            _mm_storeu_ps(out + (a + 3) * dst_a + b, r3);
          }
      }
    // The edges: rows past rows4 for every column, columns past cols4 for the first rows4 rows.
    auto one = [&](std::int64_t a, std::int64_t b) {
      std::memcpy(dst + static_cast<std::size_t>(a * dst_a + b) * N, src + static_cast<std::size_t>(a + b * src_b) * N, N);
    };
    for (std::int64_t a = rows4; a < rows; ++a)
      for (std::int64_t b = 0; b < cols; ++b) one(a, b);
    for (std::int64_t a = 0; a < rows4; ++a)
      for (std::int64_t b = cols4; b < cols; ++b) one(a, b);
    return;
  }
#endif
  for (std::int64_t a0 = 0; a0 < rows; a0 += tile)
    for (std::int64_t b0 = 0; b0 < cols; b0 += tile) {
      const std::int64_t a1 = std::min(rows, a0 + tile), b1 = std::min(cols, b0 + tile);
      for (std::int64_t a = a0; a < a1; ++a)
        for (std::int64_t b = b0; b < b1; ++b)
          std::memcpy(dst + static_cast<std::size_t>(a * dst_a + b) * N, src + static_cast<std::size_t>(a + b * src_b) * N, N);
    }
}

/// Transpose whose innermost output axis is not the input's innermost: after dropping size-1 axes
/// and merging output axes that stay adjacent in the input, output axis j reads the input's
/// contiguous axis and the last output axis reads with a stride. Every (j, last) plane is copied
/// in tiles. Returns false for the other cases (the innermost axis kept: rows are copied whole).
inline bool transpose_tiled(const kernel_context& ctx, const shape& in, const std::vector<std::int64_t>& perm,
                            const std::byte* src, std::byte* dst, std::size_t esize) {
  if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return false;
  const auto strides = in.strides();
  std::vector<std::int64_t> size, in_stride;  // per merged output axis
  for (const auto a : perm) {
    const auto d = in[static_cast<std::size_t>(a)], st = strides[static_cast<std::size_t>(a)];
    if (d == 1) continue;
    if (!size.empty() && in_stride.back() == d * st) {
      size.back() *= d;
      in_stride.back() = st;
    } else {
      size.push_back(d);
      in_stride.push_back(st);
    }
  }
  const std::size_t r = size.size();
  if (r < 2 || in_stride.back() == 1) return false;
  std::size_t j = r;
  for (std::size_t k = 0; k < r; ++k)
    if (in_stride[k] == 1) j = k;
  if (j == r) return false;
  std::vector<std::int64_t> out_stride(r, 1);
  for (std::size_t k = r - 1; k-- > 0;) out_stride[k] = out_stride[k + 1] * size[k + 1];
  // The other axes, outermost first: each plane starts at their combined offsets.
  std::vector<std::size_t> others;
  std::int64_t planes = 1;
  for (std::size_t k = 0; k + 1 < r; ++k)
    if (k != j) {
      others.push_back(k);
      planes *= size[k];
    }
  const std::int64_t rows = size[j], cols = size[r - 1];
  ctx.parallel_for(static_cast<std::size_t>(planes), [&](std::size_t p0, std::size_t p1) {
    for (auto p = static_cast<std::int64_t>(p0); p < static_cast<std::int64_t>(p1); ++p) {
      std::int64_t rem = p, in_off = 0, out_off = 0;
      for (std::size_t i = others.size(); i-- > 0;) {
        const std::size_t k = others[i];
        const std::int64_t idx = rem % size[k];
        rem /= size[k];
        in_off += idx * in_stride[k];
        out_off += idx * out_stride[k];
      }
      const std::byte* s = src + static_cast<std::size_t>(in_off) * esize;
      std::byte* d = dst + static_cast<std::size_t>(out_off) * esize;
      switch (esize) {
        case 1: transpose_tiles<1>(s, d, rows, cols, in_stride[r - 1], out_stride[j]); break;
        case 2: transpose_tiles<2>(s, d, rows, cols, in_stride[r - 1], out_stride[j]); break;
        case 4: transpose_tiles<4>(s, d, rows, cols, in_stride[r - 1], out_stride[j]); break;
        default: transpose_tiles<8>(s, d, rows, cols, in_stride[r - 1], out_stride[j]); break;
      }
    }
  });
  return true;
}

inline void transpose_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& in = x.info().shape;
  const std::size_t r = in.rank();
  std::vector<std::int64_t> perm = ctx.attr_ints("perm");
  if (perm.empty())
    for (std::size_t k = 0; k < r; ++k) perm.push_back(static_cast<std::int64_t>(r - 1 - k));
  if (perm.size() != r)
    throw ctx.fail("perm has " + std::to_string(perm.size()) + " entries for a rank-" + std::to_string(r) + " input",
                   "give one entry per input axis");
  std::vector<bool> seen(r, false);
  axis_tables t;
  std::vector<std::int64_t> out_dims;
  const auto strides = in.strides();
  for (std::size_t k = 0; k < r; ++k) {
    const auto a = normalize_axis(ctx, perm[k], r);
    if (seen[a]) throw ctx.fail("perm repeats axis " + std::to_string(a), "give a permutation of 0..rank-1");
    seen[a] = true;
    t.dims.push_back(in[a]);
    t.offsets.push_back(linear_table(in[a], 0, 1, strides[a]));
  }
  check_output_shape(ctx, 0, shape(t.dims));
  std::vector<std::int64_t> axes;
  for (const auto a : perm) axes.push_back(static_cast<std::int64_t>(normalize_axis(ctx, a, r)));
  if (in.num_elements() > 0 && transpose_tiled(ctx, in, axes, x.data(), ctx.outputs[0].data(), size_of(x.info().type)))
    return;
  gather_axes(ctx, t, x.data(), ctx.outputs[0].data(), size_of(x.info().type));
}

/// DepthToSpace (DCR or CRD) and SpaceToDepth are reshape-transpose-reshape: express the output
/// as a 6-D row-major array and read the input through per-axis strides.
inline void depth_to_space_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& s = x.info().shape;
  const std::int64_t b = ctx.attr_int("blocksize", 0);
  if (s.rank() != 4 || b <= 0 || s[1] % (b * b) != 0)
    throw ctx.fail("DepthToSpace needs a 4-D input whose channels divide by blocksize^2 (input " + to_string(s) +
                       ", blocksize " + std::to_string(b) + ")",
                   "fix the blocksize or the input shape");
  const std::int64_t n = s[0], c = s[1] / (b * b), h = s[2], w = s[3];
  const auto st = s.strides();
  const std::string mode = ctx.attr_string("mode", "DCR");
  std::int64_t b1_stride = 0, b2_stride = 0, c_stride = 0;
  if (mode == "DCR") {
    b1_stride = b * c * st[1], b2_stride = c * st[1], c_stride = st[1];
  } else if (mode == "CRD") {
    c_stride = b * b * st[1], b1_stride = b * st[1], b2_stride = st[1];
  } else {
    throw ctx.fail("unknown DepthToSpace mode '" + mode + "'", "use DCR or CRD");
  }
  check_output_shape(ctx, 0, shape{n, c, h * b, w * b});
  axis_tables t;
  t.dims = {n, c, h, b, w, b};
  t.offsets = {linear_table(n, 0, 1, st[0]), linear_table(c, 0, 1, c_stride), linear_table(h, 0, 1, st[2]),
               linear_table(b, 0, 1, b1_stride), linear_table(w, 0, 1, st[3]), linear_table(b, 0, 1, b2_stride)};
  gather_axes(ctx, t, x.data(), ctx.outputs[0].data(), size_of(x.info().type));
}

inline void space_to_depth_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& s = x.info().shape;
  const std::int64_t b = ctx.attr_int("blocksize", 0);
  if (s.rank() != 4 || b <= 0 || s[2] % b != 0 || s[3] % b != 0)
    throw ctx.fail("SpaceToDepth needs a 4-D input whose height and width divide by blocksize (input " + to_string(s) +
                       ", blocksize " + std::to_string(b) + ")",
                   "fix the blocksize or the input shape");
  const std::int64_t n = s[0], c = s[1], h = s[2] / b, w = s[3] / b;
  const auto st = s.strides();
  check_output_shape(ctx, 0, shape{n, c * b * b, h, w});
  axis_tables t;
  t.dims = {n, b, b, c, h, w};
  t.offsets = {linear_table(n, 0, 1, st[0]), linear_table(b, 0, 1, st[2]), linear_table(b, 0, 1, st[3]),
               linear_table(c, 0, 1, st[1]), linear_table(h, 0, 1, b * st[2]), linear_table(w, 0, 1, b * st[3])};
  gather_axes(ctx, t, x.data(), ctx.outputs[0].data(), size_of(x.info().type));
}

/// Shape (with opset-15 start/end, clamped like Python slicing).
inline void shape_kernel(const kernel_context& ctx) {
  const auto dims = ctx.input(0).info().shape.dims();
  const auto r = static_cast<std::int64_t>(dims.size());
  auto clamp_index = [&](std::int64_t i) {
    if (i < 0) i += r;
    return std::clamp<std::int64_t>(i, 0, r);
  };
  const std::int64_t start = clamp_index(ctx.attr_int("start", 0));
  const std::int64_t end = clamp_index(ctx.attr_int("end", r));
  const std::vector<std::int64_t> out(dims.begin() + start, dims.begin() + std::max(start, end));
  check_output_shape(ctx, 0, shape{static_cast<std::int64_t>(out.size())});
  if (!out.empty()) std::memcpy(ctx.outputs[0].data(), out.data(), out.size() * sizeof(std::int64_t));
}

inline void size_kernel(const kernel_context& ctx) {
  *data_as<std::int64_t>(ctx.outputs[0]) = ctx.input(0).info().num_elements();
}

inline void register_shape_ops(op_registry& r) {
  for (const char* type : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) r.add({"", type, copy_kernel});
  r.add({"", "Dropout", dropout_kernel});
  r.add({"ipu", "DropoutMask", dropout_mask_kernel});
  r.add({"", "Transpose", transpose_kernel, true});
  r.add({"", "DepthToSpace", depth_to_space_kernel});
  r.add({"", "SpaceToDepth", space_to_depth_kernel});
  r.add({"", "Shape", shape_kernel});
  r.add({"", "Size", size_kernel});
}

}  // namespace ipu::detail::tensor_ops
