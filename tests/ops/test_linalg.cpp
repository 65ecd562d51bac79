// Det against hand-computed determinants: pivoting, singular matrices, batches and every float type.
#include "ipu/ops/kernels/linalg.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "math_kernel_harness.hpp"

namespace test_linalg {

using namespace mk;

TEST_CASE("Det of 2 x 2 and 3 x 3 matrices, with a row swap and a singular matrix") {
  CHECK(floats(run1("Det", {f32({2, 2}, {1, 2, 3, 4})}, {data_type::F32, {}})) == std::vector<float>{-2});
  // 6 (-14 - 40) - 1 (28 - 10) + 1 (32 + 4) = -306.
  CHECK(floats(run1("Det", {f64({3, 3}, {6, 1, 1, 4, -2, 5, 2, 8, 7})}, {data_type::F64, {}})) == std::vector<float>{-306});
  CHECK(floats(run1("Det", {f32({2, 2}, {0, 1, 1, 0})}, {data_type::F32, {}})) == std::vector<float>{-1});
  CHECK(floats(run1("Det", {f32({3, 3}, {1, 2, 3, 2, 4, 6, 0, 1, 1})}, {data_type::F32, {}})) == std::vector<float>{0});
}

TEST_CASE("Det propagates NaN, even where the pivot search would pass it over") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // A [0, NaN] first column: no larger magnitude than the 0, but the determinant is NaN (numpy's).
  CHECK(std::isnan(floats(run1("Det", {f32({2, 2}, {0, 1, nan, 1})}, {data_type::F32, {}})).at(0)));
  CHECK(std::isnan(floats(run1("Det", {f32({2, 2}, {nan, 1, 0, 1})}, {data_type::F32, {}})).at(0)));
  CHECK(std::isnan(floats(run1("Det", {f32({3, 3}, {1, 0, 0, 0, 0, 1, 0, nan, 0})}, {data_type::F32, {}})).at(0)));
  // A NaN in one matrix of a batch leaves the others alone.
  auto y = floats(run1("Det", {f32({2, 2, 2}, {0, 1, nan, 1, 2, 0, 0, 3})}, {data_type::F32, {2}}));
  CHECK(std::isnan(y.at(0)));
  CHECK(y.at(1) == 6);
}

TEST_CASE("Det over a batch of matrices, in F16, and of empty matrices") {
  auto y = run1("Det", {f16({2, 2, 2, 2}, {1, 2, 3, 4, 2, 0, 0, 3, 0, 1, 1, 0, 5, 0, 0, 5})}, {data_type::F16, {2, 2}});
  CHECK(floats(y) == std::vector<float>{-2, 6, -1, 25});
  CHECK(floats(run1("Det", {f32({0, 0}, {})}, {data_type::F32, {}})) == std::vector<float>{1});
  CHECK_THROWS_AS(run1("Det", {f32({2, 3}, {1, 2, 3, 4, 5, 6})}, {data_type::F32, {}}), ipu::error);
  CHECK_THROWS_AS(run1("Det", {f32({2, 2}, {1, 2, 3, 4})}, {data_type::F32, {1}}), ipu::error);
  CHECK_THROWS_AS(run1("Det", {i32({2, 2}, {1, 2, 3, 4})}, {data_type::S32, {}}), ipu::error);
  CHECK_THROWS_WITH_AS(run1("Det", {f32({2, 2}, {1, 2, 3, 4})}, {data_type::F32, {}}, {{"axis", std::int64_t{0}}}),
                       doctest::Contains("attribute 'axis'"), ipu::error);
}

}  // namespace test_linalg
