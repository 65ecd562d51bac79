#include "ipu/ops/kernels/slice_ops.hpp"

#include <doctest/doctest.h>

#include <limits>

#include "tensor_kernel_harness.hpp"

namespace test_slice_ops {

using namespace tk;

namespace {
constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max();
}

TEST_CASE("slice ops: Concat along inner and outer axes, with an empty input") {
  auto a = f32({2, 2}, {1, 2, 3, 4});
  auto b = f32({2, 1}, {5, 6});
  auto empty = f32({2, 0}, {});
  auto y = run1("Concat", {a, empty, b}, f32_info({2, 3}), {attr("axis", -1)});
  CHECK(values<float>(y) == std::vector<float>{1, 2, 5, 3, 4, 6});
  auto z = run1("Concat", {a, f32({1, 2}, {7, 8})}, f32_info({3, 2}), {attr("axis", 0)});
  CHECK(values<float>(z) == std::vector<float>{1, 2, 3, 4, 7, 8});
  // A mismatch outside the axis is an error.
  CHECK_THROWS_AS(run1("Concat", {a, f32({1, 3}, {0, 0, 0})}, f32_info({3, 2}), {attr("axis", 0)}), ipu::error);
}

TEST_CASE("slice ops: Split by the outputs' sizes, checked against the split input") {
  auto x = i32({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto parts = run("Split", {x, i64({2}, {2, 3})}, {info(data_type::S32, {2, 2}), info(data_type::S32, {2, 3})},
                   {attr("axis", 1)});
  CHECK(values<std::int32_t>(parts[0]) == std::vector<std::int32_t>{0, 1, 5, 6});
  CHECK(values<std::int32_t>(parts[1]) == std::vector<std::int32_t>{2, 3, 4, 7, 8, 9});
  // Without the split input the output shapes decide.
  parts = run("Split", {x}, {info(data_type::S32, {1, 5}), info(data_type::S32, {1, 5})});
  CHECK(values<std::int32_t>(parts[1]) == std::vector<std::int32_t>{5, 6, 7, 8, 9});
  CHECK_THROWS_AS(run("Split", {x, i64({2}, {1, 4})}, {info(data_type::S32, {2, 2}), info(data_type::S32, {2, 3})},
                      {attr("axis", 1)}),
                  ipu::error);
}

TEST_CASE("slice ops: Slice with negative steps, clamping, default axes and empty results") {
  auto x = iota_f32({4, 5});
  // x[3:0:-2, ::-1]
  auto y = run1("Slice", {x, i64({2}, {3, -1}), i64({2}, {0, -big}), i64({2}, {0, 1}), i64({2}, {-2, -1})},
                f32_info({2, 5}));
  CHECK(values<float>(y) == std::vector<float>{19, 18, 17, 16, 15, 9, 8, 7, 6, 5});
  // x[-100:100, 1:-1] with axes and steps omitted (INT32 indices work too)
  auto z = run1("Slice", {x, i32({2}, {-100, 1}), i32({2}, {100, -1})}, f32_info({4, 3}));
  CHECK(values<float>(z) == std::vector<float>{1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18});
  // x[:, 10:] is empty
  auto e = run1("Slice", {x, i64({1}, {10}), i64({1}, {big}), i64({1}, {1})}, f32_info({4, 0}));
  CHECK(e.info().num_elements() == 0);
  // The IR's output shape must agree with the slice.
  CHECK_THROWS_AS(run1("Slice", {x, i64({1}, {1}), i64({1}, {3})}, f32_info({3, 5})), ipu::error);
  CHECK_THROWS_AS(run1("Slice", {x, i64({1}, {0}), i64({1}, {3}), i64({1}, {0}), i64({1}, {0})}, f32_info({3, 5})),
                  ipu::error);
}

TEST_CASE("slice ops: Pad in constant, reflect, edge and wrap modes - negative pads crop") {
  auto y = i64({2, 3}, {0, 1, 2, 3, 4, 5});
  auto pads = i64({4}, {1, 2, 0, 1});
  auto s64 = [](shape s) { return info(data_type::S64, std::move(s)); };
  CHECK(values<std::int64_t>(run1("Pad", {y, pads}, s64({3, 6}), {attr("mode", "reflect")})) ==
        std::vector<std::int64_t>{5, 4, 3, 4, 5, 4, 2, 1, 0, 1, 2, 1, 5, 4, 3, 4, 5, 4});
  CHECK(values<std::int64_t>(run1("Pad", {y, pads}, s64({3, 6}), {attr("mode", "edge")})) ==
        std::vector<std::int64_t>{0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 2, 2, 3, 3, 3, 4, 5, 5});
  CHECK(values<std::int64_t>(run1("Pad", {y, pads}, s64({3, 6}), {attr("mode", "wrap")})) ==
        std::vector<std::int64_t>{4, 5, 3, 4, 5, 3, 1, 2, 0, 1, 2, 0, 4, 5, 3, 4, 5, 3});
  CHECK(values<std::int64_t>(run1("Pad", {y, i64({4}, {0, 1, 1, 0}), i64({}, {9})}, s64({3, 4}))) ==
        std::vector<std::int64_t>{9, 0, 1, 2, 9, 3, 4, 5, 9, 9, 9, 9});
  // Reflecting further than the axis is long bounces back and forth.
  CHECK(values<std::int64_t>(run1("Pad", {i64({3}, {0, 1, 2}), i64({2}, {5, 4})}, s64({12}), {attr("mode", "reflect")})) ==
        std::vector<std::int64_t>{1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2});
  // Negative pads remove elements; without a value constant mode pads with zeros.
  CHECK(values<std::int64_t>(run1("Pad", {y, i64({4}, {0, -1, 1, 1})}, s64({3, 3}))) ==
        std::vector<std::int64_t>{1, 2, 0, 4, 5, 0, 0, 0, 0});
  // opset-18 axes input: pad only axis 1.
  auto f = run1("Pad", {f32({1, 2}, {1, 2}), i64({2}, {1, 1}), f32({}, {-1}), i64({1}, {-1})}, f32_info({1, 4}));
  CHECK(values<float>(f) == std::vector<float>{-1, 1, 2, -1});
  // Pads are data from strangers (the ONNX fuzzer's find): pads whose sum overflows, or that
  // disagree with the planned output, are errors before any table is sized from them.
  CHECK_THROWS_WITH_AS(run1("Pad", {y, i64({4}, {0, big, 0, big})}, s64({2, 3})), doctest::Contains("overflow"), ipu::error);
  CHECK_THROWS_WITH_AS(run1("Pad", {y, i64({4}, {0, 1 << 30, 0, 0})}, s64({2, 3})),
                       doctest::Contains("the input values give [2,1073741827]"), ipu::error);
}

TEST_CASE("slice ops: Expand broadcasts like numpy (including to a larger rank)") {
  auto x = f32({2, 1}, {1, 2});
  auto y = run1("Expand", {x, i64({3}, {2, 1, 3})}, f32_info({2, 2, 3}));
  CHECK(values<float>(y) == std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  // A requested shape smaller than the input keeps the input's dims.
  auto z = run1("Expand", {f32({3}, {1, 2, 3}), i64({1}, {1})}, f32_info({3}));
  CHECK(values<float>(z) == std::vector<float>{1, 2, 3});
  CHECK_THROWS_AS(run1("Expand", {f32({3}, {1, 2, 3}), i64({1}, {2})}, f32_info({3})), ipu::error);
}

TEST_CASE("slice ops: Expand of one value fills every element, at any size") {
  // 1, 7 (the doubling copy's last block partial), 1000 elements; a one-element [1, 1] input too.
  for (std::int64_t n : {1, 7, 1000}) {
    CAPTURE(n);
    auto y = run1("Expand", {f32({}, {2.5f}), i64({2}, {n, 1})}, f32_info({n, 1}));
    CHECK(values<float>(y) == std::vector<float>(static_cast<std::size_t>(n), 2.5f));
    auto z = run1("Expand", {i64({1, 1}, {-3}), i64({3}, {2, 1, n})}, info(data_type::S64, {2, 1, n}));
    CHECK(values<std::int64_t>(z) == std::vector<std::int64_t>(static_cast<std::size_t>(2 * n), -3));
  }
  auto e = run1("Expand", {f32({}, {1}), i64({2}, {0, 3})}, f32_info({0, 3}));
  CHECK(e.info().shape.num_elements() == 0);
}

TEST_CASE("slice ops: Tile repeats every axis") {
  auto x = make<half>({2, 3}, {half(0.f), half(1.f), half(2.f), half(3.f), half(4.f), half(5.f)});
  auto y = run1("Tile", {x, i64({2}, {2, 2})}, info(data_type::F16, {4, 6}));
  std::vector<float> got;
  for (auto h : values<half>(y)) got.push_back(static_cast<float>(h));
  CHECK(got == std::vector<float>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
  auto none = run1("Tile", {x, i64({2}, {0, 1})}, info(data_type::F16, {0, 3}));
  CHECK(none.info().num_elements() == 0);
  // Repeats are data: an overflowing count, or one the planned output does not have, is an error
  // before any table is sized from it.
  CHECK_THROWS_WITH_AS(run1("Tile", {x, i64({2}, {big, 1})}, info(data_type::F16, {4, 6})), doctest::Contains("overflows"),
                       ipu::error);
  CHECK_THROWS_WITH_AS(run1("Tile", {x, i64({2}, {1 << 30, 1})}, info(data_type::F16, {4, 6})),
                       doctest::Contains("the input values give [2147483648,3]"), ipu::error);
}

}  // namespace test_slice_ops
