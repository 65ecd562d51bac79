// Expected values come from the ONNX reference implementation
// (onnx/backend/test/case/node/resize.py, interpolate_nd) for the same inputs.
#include "ipu/ops/kernels/resize.hpp"

#include <doctest/doctest.h>

#include <limits>

#include "tensor_kernel_harness.hpp"

namespace test_resize {

using namespace tk;

namespace {
std::vector<attribute> modes(const char* mode, const char* coord, std::vector<attribute> more = {}) {
  more.push_back(attr("mode", mode));
  more.push_back(attr("coordinate_transformation_mode", coord));
  return more;
}
}  // namespace

TEST_CASE("resize: nearest upsampling by scales (half_pixel, round_prefer_floor)") {
  auto x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  auto y = run1("Resize", {x, std::nullopt, f32({4}, {1, 1, 2, 3})}, f32_info({1, 1, 4, 6}));
  CHECK(values<float>(y) == std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  // Nearest moves bytes, so integer types resize exactly.
  auto yi = run1("Resize", {i64({1, 1, 2, 2}, {1, 2, 3, 4}), std::nullopt, f32({4}, {1, 1, 2, 3})},
                 info(data_type::S64, {1, 1, 4, 6}));
  CHECK(values<std::int64_t>(yi)[5] == 2);
  // By sizes, downsampling.
  auto d = run1("Resize", {f32({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), std::nullopt, std::nullopt, i64({4}, {1, 1, 1, 3})},
                f32_info({1, 1, 1, 3}));
  CHECK(values<float>(d) == std::vector<float>{1, 2, 4});
  // Scales are data from strangers: infinite or huge ones are errors, not out-of-range conversions.
  for (const float huge : {std::numeric_limits<float>::infinity(), 1e30f})
    CHECK_THROWS_WITH_AS(run1("Resize", {x, std::nullopt, f32({4}, {1, 1, 2, huge})}, f32_info({1, 1, 4, 6})),
                         doctest::Contains("more elements than a tensor can hold"), ipu::error);
}

TEST_CASE("resize: nearest rounding modes") {
  auto x = f32({5}, {1, 2, 3, 4, 5});
  CHECK(values<float>(run1("Resize", {x, std::nullopt, f32({1}, {0.6f})}, f32_info({3}),
                           modes("nearest", "asymmetric", {attr("nearest_mode", "ceil")}))) == std::vector<float>{1, 3, 5});
  CHECK(values<float>(run1("Resize", {x, std::nullopt, std::nullopt, i64({1}, {8})}, f32_info({8}),
                           modes("nearest", "asymmetric", {attr("nearest_mode", "round_prefer_ceil")}))) ==
        std::vector<float>{1, 2, 2, 3, 4, 4, 5, 5});
  CHECK(values<float>(run1("Resize", {x, std::nullopt, std::nullopt, i64({1}, {8})}, f32_info({8}),
                           modes("nearest", "pytorch_half_pixel", {attr("nearest_mode", "floor")}))) ==
        std::vector<float>{1, 1, 2, 2, 3, 3, 4, 5});
}

TEST_CASE("resize: linear, half_pixel downsampling and align_corners upsampling") {
  auto x = f32({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto y = run1("Resize", {x, std::nullopt, f32({4}, {1, 1, 0.6f, 0.6f})}, f32_info({1, 1, 1, 2}),
                modes("linear", "half_pixel"));
  check_close(values<float>(y), {2.6666665f, 4.3333331f});
  auto a = run1("Resize", {f32({1, 1, 2, 2}, {1, 2, 3, 4}), std::nullopt, f32({4}, {1, 1, 2, 2})}, f32_info({1, 1, 4, 4}),
                modes("linear", "align_corners"));
  check_close(values<float>(a), {1, 1.3333333f, 1.6666666f, 2, 1.6666666f, 2, 2.3333333f, 2.6666667f, 2.3333333f,
                                 2.6666667f, 3, 3.3333333f, 3, 3.3333333f, 3.6666667f, 4});
}

TEST_CASE("resize: cubic, with and without exclude_outside") {
  auto ramp = iota_f32({8});
  auto y = run1("Resize", {ramp, std::nullopt, f32({1}, {2})}, f32_info({16}), modes("cubic", "half_pixel"));
  check_close(values<float>(y), {-0.10546875f, 0.19140625f, 0.66796875f, 1.296875f, 1.703125f, 2.296875f, 2.703125f,
                                 3.296875f, 3.703125f, 4.296875f, 4.703125f, 5.296875f, 5.703125f, 6.33203125f,
                                 6.80859375f, 7.10546875f});
  auto e = run1("Resize", {iota_f32({4}), std::nullopt, f32({1}, {0.8f})}, f32_info({3}),
                modes("cubic", "half_pixel", {attr("exclude_outside", 1)}));
  check_close(values<float>(e), {0.08792710706f, 1.404296875f, 2.73471183458f});
}

TEST_CASE("resize: tf_crop_and_resize with a region of interest and extrapolation") {
  auto x = f32({1, 1, 4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  auto sizes = i64({4}, {1, 1, 3, 3});
  auto y = run1("Resize", {x, f32({8}, {0, 0, 0.4f, 0.6f, 1, 1, 0.6f, 0.8f}), std::nullopt, sizes}, f32_info({1, 1, 3, 3}),
                modes("linear", "tf_crop_and_resize"));
  check_close(values<float>(y), {7.6f, 7.9f, 8.2f, 8.8f, 9.1f, 9.4f, 10.0f, 10.3f, 10.6f});
  auto z = run1("Resize", {x, f32({8}, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f}), std::nullopt, sizes}, f32_info({1, 1, 3, 3}),
                modes("linear", "tf_crop_and_resize", {attr("extrapolation_value", 10.0f)}));
  check_close(values<float>(z), {7.6f, 10, 10, 12.4f, 10, 10, 10, 10, 10});
}

TEST_CASE("resize: the IR's output shape must match the scales or sizes") {
  auto x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  CHECK_THROWS_AS(run1("Resize", {x, std::nullopt, f32({4}, {1, 1, 2, 2})}, f32_info({1, 1, 4, 3})), ipu::error);
  CHECK_THROWS_AS(run1("Resize", {x}, f32_info({1, 1, 2, 2})), ipu::error);  // neither scales nor sizes
  CHECK_THROWS_AS(run1("Resize", {x, std::nullopt, f32({4}, {1, 1, 2, 2})}, f32_info({1, 1, 4, 4}),
                       modes("bilinear", "half_pixel")),
                  ipu::error);
}

}  // namespace test_resize
