// Window geometry: auto_pad resolution and the valid-tap ranges convolution and pooling rely on.
#include "ipu/ops/kernels/window.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "math_kernel_harness.hpp"

namespace test_window {

using namespace ipu::detail::math_ops;

TEST_CASE("floor_div and ceil_div round toward -inf and +inf") {
  CHECK(floor_div(7, 2) == 3);
  CHECK(floor_div(-7, 2) == -4);
  CHECK(floor_div(-6, 2) == -3);
  CHECK(ceil_div(7, 2) == 4);
  CHECK(ceil_div(-7, 2) == -3);
  CHECK(ceil_div(0, 3) == 0);
}

namespace {
window_geometry geometry(std::vector<ipu::attribute> attrs, const ipu::shape& x, const ipu::shape& y,
                         const std::vector<std::int64_t>& kernel) {
  ipu::op_node op;
  op.type = "Pool";
  op.attributes = std::move(attrs);
  const ipu::kernel_context ctx{op, {}, {}};
  return make_window_geometry(ctx, x, y, kernel);
}
}  // namespace

TEST_CASE("make_window_geometry right-aligns spatial dimensions and resolves auto_pad") {
  auto g = geometry({{"strides", mk::ints{2, 1}}, {"pads", mk::ints{1, 0, 2, 0}}}, {1, 1, 9, 8}, {1, 1, 5, 6}, {3, 3});
  CHECK(g.rank == 2);
  CHECK(g.in == std::array<std::int64_t, 3>{1, 9, 8});
  CHECK(g.kernel == std::array<std::int64_t, 3>{1, 3, 3});
  CHECK(g.pad_begin == std::array<std::int64_t, 3>{0, 1, 0});
  CHECK(g.pad_end == std::array<std::int64_t, 3>{0, 2, 0});
  // 7 -> 4 outputs with kernel 4 stride 2: total padding 3.
  auto upper = geometry({{"strides", mk::ints{2}}, {"auto_pad", std::string("SAME_UPPER")}}, {1, 1, 7}, {1, 1, 4}, {4});
  CHECK(upper.pad_begin[2] == 1);
  CHECK(upper.pad_end[2] == 2);
  auto lower = geometry({{"strides", mk::ints{2}}, {"auto_pad", std::string("SAME_LOWER")}}, {1, 1, 7}, {1, 1, 4}, {4});
  CHECK(lower.pad_begin[2] == 2);
  CHECK(lower.pad_end[2] == 1);
  CHECK_THROWS_AS(geometry({{"auto_pad", std::string("SAME")}}, {1, 1, 7}, {1, 1, 7}, {1}), ipu::error);
  CHECK_THROWS_AS(geometry({{"strides", mk::ints{1, 1}}}, {1, 1, 7}, {1, 1, 7}, {1}), ipu::error);
  CHECK_THROWS_AS(geometry({}, {1, 1, 2, 2, 2, 2}, {1, 1, 2, 2, 2, 2}, {1, 1, 1, 1}), ipu::error);
}

TEST_CASE("make_window_geometry refuses windows whose arithmetic would leave int64") {
  constexpr std::int64_t big = std::int64_t{1} << 62, k40 = std::int64_t{1} << 40;
  // Out of [1, 2^59]: a kernel, a stride, a dilation, a pad.
  CHECK_THROWS_WITH_AS(geometry({}, {1, 1, 4}, {1, 1, 1}, {big}), doctest::Contains("must be in [1, 2^59]"), ipu::error);
  CHECK_THROWS_AS(geometry({{"strides", mk::ints{big}}}, {1, 1, 4}, {1, 1, 1}, {2}), ipu::error);
  CHECK_THROWS_AS(geometry({{"dilations", mk::ints{0}}}, {1, 1, 4}, {1, 1, 1}, {2}), ipu::error);
  CHECK_THROWS_WITH_AS(geometry({{"pads", mk::ints{-1, 0}}}, {1, 1, 4}, {1, 1, 4}, {2}),
                       doctest::Contains("pad -1 is not in [0, 2^59]"), ipu::error);
  CHECK_THROWS_AS(geometry({{"pads", mk::ints{0, big}}}, {1, 1, 4}, {1, 1, 4}, {2}), ipu::error);
  // In bounds one by one, but not the extent (k - 1) * d + 1, the tap count, or SAME's out * stride.
  CHECK_THROWS_WITH_AS(geometry({{"dilations", mk::ints{k40}}}, {1, 1, 4}, {1, 1, 1}, {k40}),
                       doctest::Contains("and so must the window's extent"), ipu::error);
  CHECK_THROWS_WITH_AS(geometry({}, {1, 1, 4, 4, 4}, {1, 1, 1, 1, 1}, {k40, k40, 1}),
                       doctest::Contains("more than 2^59 taps"), ipu::error);
  CHECK_THROWS_WITH_AS(geometry({{"strides", mk::ints{k40}}, {"auto_pad", std::string("SAME_UPPER")}}, {1, 1, 4},
                                {1, 1, k40}, {1}),
                       doctest::Contains("spans more than 2^59 elements"), ipu::error);
  // The largest legal values still give a geometry.
  const auto g = geometry({{"pads", mk::ints{k40, k40}}, {"strides", mk::ints{k40}}}, {1, 1, 4}, {1, 1, 2}, {k40});
  CHECK(g.extent(2) == k40);
}

TEST_CASE("valid_range lists the outputs whose tap reads inside the input") {
  // in 5, kernel 3, stride 2, dilation 1, pad 1 -> outputs 0..2 read o*2 - 1 + t.
  window_geometry g;
  g.in = {1, 1, 5};
  g.out = {1, 1, 3};
  g.kernel = {1, 1, 3};
  g.stride = {1, 1, 2};
  g.pad_begin = {0, 0, 1};
  g.pad_end = {0, 0, 1};
  for (std::int64_t t = 0; t < 3; ++t) {
    const auto [lo, hi] = g.valid_range(2, t);
    for (std::int64_t o = 0; o < 3; ++o) {
      const std::int64_t i = o * 2 - 1 + t;
      CHECK(((o >= lo && o < hi) == (i >= 0 && i < 5)));
    }
  }
}

}  // namespace test_window
