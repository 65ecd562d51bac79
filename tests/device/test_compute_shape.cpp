#include <doctest/doctest.h>

#include <vector>

#include "ipu/device/compute_shape.hpp"

namespace test_compute_shape {

using ipu::amp_problem;
using ipu::conv_shape;

namespace {
// ResNet-50's first convolution: 7x7 stride 2 pad 3, 3 -> 64 channels, 224x224 input.
conv_shape resnet_conv1(std::uint64_t batch) { return conv_shape{batch, 3, 64, 1, {224, 224}, {7, 7}, {2, 2}, {3, 3}, {3, 3}, {}}; }
}  // namespace

TEST_CASE("matmul MACs and its AMP problem") {
  constexpr ipu::matmul_shape s{2, 128, 768, 3072};
  static_assert(s.macs() == 2ull * 128 * 768 * 3072);
  constexpr auto p = ipu::to_amp_problem(s);
  static_assert(p == amp_problem{2, 128, 768, 3072, 1, 128});
  static_assert(p.macs() == s.macs());
}

TEST_CASE("conv output sizes follow floor((in + pads - dilation (k - 1) - 1) / stride) + 1") {
  CHECK(resnet_conv1(1).output() == std::vector<std::uint64_t>{112, 112});
  // 3x3, pad 1, stride 1 keeps the size; stride 2 halves it (rounding down).
  CHECK(conv_shape{1, 8, 8, 1, {57, 56}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {}}.output() ==
        std::vector<std::uint64_t>{29, 28});
  // Dilation 2 turns a 3-tap kernel into a span of 5.
  CHECK(conv_shape{1, 1, 1, 1, {10}, {3}, {}, {}, {}, {2}}.output() == std::vector<std::uint64_t>{6});
  CHECK(conv_shape{1, 1, 1, 1, {8, 8, 8}, {2, 2, 2}, {2, 2, 2}, {}, {}, {}}.output() ==
        std::vector<std::uint64_t>{4, 4, 4});
}

TEST_CASE("conv MACs: batch x out pixels x out channels x in channels / groups x kernel") {
  CHECK(resnet_conv1(1).macs() == 112ull * 112 * 64 * 3 * 49);  // 118 million
  const conv_shape depthwise{4, 32, 32, 32, {14, 14}, {3, 3}, {}, {1, 1}, {1, 1}, {}};
  CHECK(depthwise.macs() == 4ull * 14 * 14 * 32 * 1 * 9);
}

TEST_CASE("a convolution maps onto the AMP as rows of output pixels, contracting input channels") {
  const auto p = ipu::to_amp_problem(resnet_conv1(2));
  // The last four: the kernel's innermost size and the output's (a field row), for the nx1 vertex,
  // the kernel's outermost size, for its weight heights, and the innermost stride, for SLIC.
  CHECK(p == amp_problem{1, 2 * 112 * 112, 3, 64, 49, 2 * 224 * 224, 7, 112, 7, 2});
  CHECK(p.macs() == resnet_conv1(2).macs());
  const auto g = ipu::to_amp_problem(conv_shape{1, 64, 128, 4, {8, 8}, {1, 1}, {}, {}, {}, {}});
  CHECK(g == amp_problem{4, 64, 16, 32, 1, 64, 1, 8, 1, 1});
  // A 1-D kernel has no outer dimension to fold.
  CHECK(ipu::to_amp_problem(conv_shape{1, 8, 8, 1, {20}, {5}, {}, {}, {}, {}}).kernel_height == 1);
}

TEST_CASE("inconsistent convolutions are shape errors") {
  try {
    (void)conv_shape{1, 3, 8, 1, {4, 4}, {7, 7}, {}, {}, {}, {}}.output();
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::shape);
    CHECK(e.message() == "kernel span 7 exceeds padded input 4 in spatial dim 0");
  }
  CHECK_THROWS_AS((void)conv_shape({1, 3, 8, 1, {4, 4}, {3}, {}, {}, {}, {}}).output(), ipu::error);
  CHECK_THROWS_AS((void)conv_shape({1, 3, 8, 1, {4, 4}, {3, 3}, {0, 1}, {}, {}, {}}).output(), ipu::error);
  CHECK_THROWS_AS((void)conv_shape({1, 3, 8, 1, {4, 4}, {3, 3}, {1}, {}, {}, {}}).output(), ipu::error);
  try {
    (void)ipu::to_amp_problem(conv_shape{1, 6, 8, 4, {4, 4}, {1, 1}, {}, {}, {}, {}});
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.message() == "channels 6 -> 8 do not divide into 4 groups");
  }
}

}  // namespace test_compute_shape
