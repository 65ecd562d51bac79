#include "ipu/ops/kernels/topk.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tensor_kernel_harness.hpp"

namespace test_topk {

using namespace tk;

TEST_CASE("topk: largest and smallest along the last axis, sorted, ties by lower index") {
  auto x = f32({2, 4}, {1, 3, 3, 2, 3, 1, 1, 2});
  auto top = run("TopK", {x, i64({1}, {2})}, {f32_info({2, 2}), info(data_type::S64, {2, 2})});
  CHECK(values<float>(top[0]) == std::vector<float>{3, 3, 3, 2});
  CHECK(values<std::int64_t>(top[1]) == std::vector<std::int64_t>{1, 2, 0, 3});
  auto low = run("TopK", {x, i64({1}, {3})}, {f32_info({2, 3}), info(data_type::S64, {2, 3})}, {attr("largest", 0)});
  CHECK(values<float>(low[0]) == std::vector<float>{1, 2, 3, 1, 1, 2});
  CHECK(values<std::int64_t>(low[1]) == std::vector<std::int64_t>{0, 3, 1, 1, 2, 3});
}

TEST_CASE("topk: along axis 0, integer types, NaN counts as largest, K is checked") {
  auto x = i32({3, 2}, {5, 1, 9, 1, 7, 4});
  auto top = run("TopK", {x, i64({1}, {2})}, {info(data_type::S32, {2, 2}), info(data_type::S64, {2, 2})},
                 {attr("axis", 0)});
  CHECK(values<std::int32_t>(top[0]) == std::vector<std::int32_t>{9, 4, 7, 1});
  CHECK(values<std::int64_t>(top[1]) == std::vector<std::int64_t>{1, 2, 2, 0});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto n = run("TopK", {f32({3}, {1, nan, 2}), i64({1}, {2})}, {f32_info({2}), info(data_type::S64, {2})});
  CHECK(std::isnan(values<float>(n[0])[0]));
  CHECK(values<std::int64_t>(n[1]) == std::vector<std::int64_t>{1, 2});
  CHECK_THROWS_AS(run("TopK", {f32({3}, {1, 2, 3}), i64({1}, {4})}, {f32_info({4}), info(data_type::S64, {4})}),
                  ipu::error);
}

}  // namespace test_topk
