// ConvInteger / QLinearConv's fast products (ipu/ops/kernels/integer_conv.hpp: oneDNN's int8
// convolution where the CPU has VNNI, the float GEMM otherwise) against an integer loop written
// here: groups, strides, dilations, padding, zero points, both 8-bit types, several images, and
// reductions long enough to need several exact chunks.
#include "ipu/ops/kernels/integer_conv.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tensor_kernel_harness.hpp"

namespace test_integer_conv {

using namespace tk;

host_tensor u8(shape s, std::vector<std::uint8_t> v) { return make<std::uint8_t>(std::move(s), std::move(v)); }
host_tensor s8(shape s, std::vector<std::int8_t> v) { return make<std::int8_t>(std::move(s), std::move(v)); }

/// An independent 2-D integer convolution: x [N, C, H, W] and w [M, C/group, KH, KW] as int64,
/// zero points subtracted, begin pads only (the output size is given).
std::vector<std::int32_t> naive_conv2d(const std::vector<std::int64_t>& x, const std::vector<std::int64_t>& w,
                                       std::vector<std::int64_t> xs, std::vector<std::int64_t> ws, std::int64_t oh,
                                       std::int64_t ow, std::int64_t group, std::int64_t s, std::int64_t d, std::int64_t p,
                                       std::int64_t xzp, const std::vector<std::int64_t>& wzp) {
  const auto N = xs[0], C = xs[1], H = xs[2], W = xs[3], M = ws[0], CG = ws[1], KH = ws[2], KW = ws[3];
  std::vector<std::int32_t> out;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t y = 0; y < oh; ++y)
        for (std::int64_t xx = 0; xx < ow; ++xx) {
          std::int64_t acc = 0;
          for (std::int64_t c = 0; c < CG; ++c)
            for (std::int64_t i = 0; i < KH; ++i)
              for (std::int64_t j = 0; j < KW; ++j) {
                const auto iy = y * s - p + i * d, ix = xx * s - p + j * d;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                const auto ic = m / (M / group) * CG + c;
                acc += (x[static_cast<std::size_t>(((n * C + ic) * H + iy) * W + ix)] - xzp) *
                       (w[static_cast<std::size_t>(((m * CG + c) * KH + i) * KW + j)] - wzp[static_cast<std::size_t>(m)]);
              }
          out.push_back(static_cast<std::int32_t>(acc));
        }
  return out;
}

TEST_CASE("ConvInteger on oneDNN int8 and on the float GEMM equals an integer loop: groups, strides, dilations, pads, long reductions") {
  std::mt19937 rng(7);
  struct conv_case {
    std::int64_t n, c, h, w, m, k, group, stride, dilation, pad;
    bool x_signed, w_signed, extremes;
  };
  // The last two reduce over 600 and 1152 products of up to 255 * 255 (255 * 128): more than a
  // float sums exactly in one go, so they take several chunks.
  for (const auto& cc : {conv_case{1, 3, 7, 6, 4, 3, 1, 1, 1, 1, false, true, false},
                         conv_case{2, 4, 9, 9, 6, 3, 2, 2, 1, 0, true, true, false},
                         conv_case{1, 8, 6, 5, 8, 3, 8, 1, 2, 2, false, true, false},  // depthwise, dilated
                         conv_case{1, 5, 4, 4, 3, 1, 1, 1, 1, 0, false, false, false},  // 1x1
                         conv_case{3, 2, 16, 16, 3, 1, 1, 1, 1, 0, true, false, false},  // three images
                         conv_case{1, 3, 5, 7, 2, 3, 1, 3, 2, 3, false, true, false},  // rows of padding only
                         // One channel's 17x17 window of 255 * 255 products is longer than an exact
                         // chunk (258): neither fast path takes it, the reference loop does.
                         conv_case{1, 1, 17, 17, 1, 17, 1, 1, 1, 0, false, false, true},
                         conv_case{1, 24, 5, 5, 2, 5, 1, 1, 1, 2, false, false, true},
                         conv_case{1, 128, 3, 3, 2, 3, 1, 1, 1, 1, false, true, true}}) {
    CAPTURE(cc.c);
    CAPTURE(cc.group);
    const auto oh = (cc.h + 2 * cc.pad - cc.dilation * (cc.k - 1) - 1) / cc.stride + 1;
    const auto ow = (cc.w + 2 * cc.pad - cc.dilation * (cc.k - 1) - 1) / cc.stride + 1;
    const std::vector<std::int64_t> xs{cc.n, cc.c, cc.h, cc.w}, ws{cc.m, cc.c / cc.group, cc.k, cc.k};
    auto draw = [&](bool is_signed, std::int64_t count) {
      std::vector<std::int64_t> v(static_cast<std::size_t>(count));
      std::uniform_int_distribution<int> d(is_signed ? -128 : 0, is_signed ? 127 : 255);
      for (auto& e : v) e = cc.extremes ? (is_signed ? -128 : 255) : d(rng);
      return v;
    };
    const auto xv = draw(cc.x_signed, cc.n * cc.c * cc.h * cc.w);
    const auto wv = draw(cc.w_signed, cc.m * (cc.c / cc.group) * cc.k * cc.k);
    const std::int64_t xzp = cc.extremes ? (cc.x_signed ? 127 : 0) : (cc.x_signed ? -3 : 131);
    // Weight zero points all 0 (int8 weights then take oneDNN's int8 path where the CPU has VNNI),
    // and varied (always the float GEMM).
    for (const bool zero_w : {true, false}) {
      CAPTURE(zero_w);
      std::vector<std::int64_t> wzp(static_cast<std::size_t>(cc.m));
      for (std::size_t i = 0; i < wzp.size(); ++i)
        wzp[i] = cc.extremes || zero_w ? 0 : static_cast<std::int64_t>(i % 3) - 1 + (cc.w_signed ? 0 : 128);
      auto tensor = [](bool is_signed, std::vector<std::int64_t> s, const std::vector<std::int64_t>& v) {
        if (is_signed) return s8(shape(std::move(s)), std::vector<std::int8_t>(v.begin(), v.end()));
        return u8(shape(std::move(s)), std::vector<std::uint8_t>(v.begin(), v.end()));
      };
      const auto want = naive_conv2d(xv, wv, xs, ws, oh, ow, cc.group, cc.stride, cc.dilation, cc.pad, xzp, wzp);
      const auto got = run1("ConvInteger",
                            {tensor(cc.x_signed, xs, xv), tensor(cc.w_signed, ws, wv), tensor(cc.x_signed, {}, {xzp}),
                             tensor(cc.w_signed, {cc.m}, wzp)},
                            info(data_type::S32, {cc.n, cc.m, oh, ow}),
                            {attr("group", cc.group), attr("strides", std::vector<std::int64_t>{cc.stride, cc.stride}),
                             attr("dilations", std::vector<std::int64_t>{cc.dilation, cc.dilation}),
                             attr("pads", std::vector<std::int64_t>{cc.pad, cc.pad, cc.pad, cc.pad})});
      CHECK(values<std::int32_t>(got) == want);
    }
  }
  const std::string path = ipu::detail::tensor_ops::dnnl_int8_is_exact() ? "ran the int8-weight cases"
                                                                         : "was not used (no VNNI)";
  MESSAGE("oneDNN's int8 convolution " << path);
}

TEST_CASE("ConvInteger keeps its converted weights between runs, and reads a changed run-time zero point") {
  // The weights are a constant; the weight zero point is a run-time input that changes between
  // runs: 0 (oneDNN's path where the CPU has VNNI), then 1 and 2 (the float GEMM), then 0 again.
  const auto entry = registry().find("", "ConvInteger");
  REQUIRE(entry);
  ipu::op_node op;
  op.type = "ConvInteger";
  op.name = "cached";
  const std::vector<std::int64_t> xv{1, 9, 3, 250, 7, 0, 5, 6, 200, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  const std::vector<std::int64_t> wv{1, -2, 3, -4, 5, -6, 7, -128, 127, 0, -1, 2, 30, -40, 50, -60};
  const auto x = u8({1, 2, 3, 3}, std::vector<std::uint8_t>(xv.begin(), xv.end()));
  const auto w = s8({2, 2, 2, 2}, std::vector<std::int8_t>(wv.begin(), wv.end()));
  const auto xzp = u8({}, {3});
  ipu::op_cache cache;
  for (const std::int8_t zw : {0, 1, 2, 0}) {
    CAPTURE(int{zw});
    const auto wzp = s8({2}, {zw, zw});
    const std::vector<ipu::const_tensor_view> in{x.view(), w.view(), xzp.view(), wzp.view()};
    host_tensor y(info(data_type::S32, {1, 2, 2, 2}));
    const std::vector<ipu::tensor_view> out{y.view()};
    ipu::kernel_context ctx{op, in, out, chunked_for};
    ctx.cache = &cache;
    ctx.constant_inputs = 0b10;  // w
    entry->kernel(ctx);
    CHECK(values<std::int32_t>(y) == naive_conv2d(xv, wv, {1, 2, 3, 3}, {2, 2, 2, 2}, 2, 2, 1, 1, 1, 0, 3, {zw, zw}));
  }
}

TEST_CASE("ConvInteger in one dimension, and an exact-chunk length per operand range") {
  // x - 1 = [0, 1, 2, 3], kernel [1, -1] with stride 1: x[i] - x[i+1] = -1 each.
  auto y = run1("ConvInteger", {u8({1, 1, 4}, {1, 2, 3, 4}), s8({1, 1, 2}, {1, -1}), u8({}, {1})},
                info(data_type::S32, {1, 1, 3}));
  CHECK(values<std::int32_t>(y) == std::vector<std::int32_t>{-1, -1, -1});
  using ipu::detail::tensor_ops::exact_float_chunk;
  using ipu::detail::tensor_ops::max_offset_from;
  CHECK(max_offset_from(data_type::U8, 0) == 255);
  CHECK(max_offset_from(data_type::U8, 200) == 200);
  CHECK(max_offset_from(data_type::S8, 0) == 128);
  CHECK(max_offset_from(data_type::S8, -128) == 255);
  // 2^24 / (255 * 255) = 258: 258 products of 65025 sum to 16776450 < 2^24; 259 would not.
  CHECK(exact_float_chunk(255, 255, 1000) == 258);
  CHECK(exact_float_chunk(255, 128, 1000) == 514);
  CHECK(exact_float_chunk(0, 255, 1000) == 1000);
}

}  // namespace test_integer_conv
