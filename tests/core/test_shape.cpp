#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/shape.hpp"
#include "ipu/tensor_info.hpp"

namespace test_shape {

TEST_CASE("shape: rank, elements, dims") {
  const ipu::shape s{4, 3, 224, 224};
  CHECK(s.rank() == 4);
  CHECK(s.num_elements() == 4 * 3 * 224 * 224);
  CHECK(s[1] == 3);
  CHECK(s.dims() == std::vector<std::int64_t>{4, 3, 224, 224});
  CHECK(ipu::to_string(s) == "[4,3,224,224]");

  const ipu::shape scalar;
  CHECK(scalar.rank() == 0);
  CHECK(scalar.num_elements() == 1);  // a scalar holds one element
  CHECK(ipu::to_string(scalar) == "[]");

  const ipu::shape empty{2, 0, 5};
  CHECK(empty.num_elements() == 0);
}

TEST_CASE("shape: negative axes count from the back, out-of-range axes throw") {
  const ipu::shape s{2, 3, 5};
  CHECK(s.dim(-1) == 5);
  CHECK(s.dim(-3) == 2);
  CHECK(s.dim(0) == 2);
  CHECK(s.normalize_axis(-2) == 1);
  CHECK_THROWS_AS((void)s.normalize_axis(3), ipu::error);
  CHECK_THROWS_AS((void)s.dim(-4), ipu::error);
  try {
    (void)s.normalize_axis(7);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::shape);
    CHECK(e.message().find("axis 7") != std::string::npos);
    CHECK(e.message().find("rank 3") != std::string::npos);
    CHECK_FALSE(e.hint().empty());
  }
  CHECK_THROWS_AS((void)ipu::shape{}.normalize_axis(0), ipu::error);  // a scalar has no axes
}

TEST_CASE("shape: row-major strides") {
  CHECK(ipu::shape{2, 3, 4}.strides() == std::vector<std::int64_t>{12, 4, 1});
  CHECK(ipu::shape{7}.strides() == std::vector<std::int64_t>{1});
  CHECK(ipu::shape{}.strides().empty());
  CHECK(ipu::shape{3, 0, 2}.strides() == std::vector<std::int64_t>{0, 2, 1});
}

TEST_CASE("shape: an empty shape's non-zero dimensions are bounded like a full one's (the ONNX fuzzer's find)") {
  constexpr std::int64_t huge = std::int64_t{1} << 62;
  // 30 * 2^62 overflowed in kernels that multiply an empty input's leading or trailing dimensions.
  CHECK_THROWS_AS(ipu::shape({0, huge, 30}), ipu::error);
  CHECK_THROWS_AS(ipu::shape({huge, 33, 0}), ipu::error);
  try {
    ipu::shape bad{3, 0, std::int64_t{1} << 58, 4};
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::shape);
    CHECK(e.message().find("[3,0,288230376151711744,4]") != std::string::npos);
  }
  // At the bound itself, an empty shape is fine and everything computed from it is exact.
  constexpr std::int64_t top = std::int64_t{1} << 59;
  const ipu::shape edge{0, top};
  CHECK(edge.num_elements() == 0);
  CHECK(edge.strides() == std::vector<std::int64_t>{top, 1});
  CHECK(ipu::tensor_info{ipu::data_type::F32, ipu::shape{top / 4, 4, 0}}.num_bytes() == 0);
  static_assert(ipu::shape{0, std::int64_t{1} << 59}.num_elements() == 0);
}

TEST_CASE("shape: negative dimensions are rejected by every constructor") {
  CHECK_THROWS_AS(ipu::shape({2, -1}), ipu::error);
  CHECK_THROWS_AS(ipu::shape(std::vector<std::int64_t>{-3}), ipu::error);
  const std::int64_t dims[] = {4, -2};
  CHECK_THROWS_AS(ipu::shape(std::span<const std::int64_t>(dims)), ipu::error);
  try {
    ipu::shape bad{1, -5};
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::shape);
    CHECK(e.message().find("-5") != std::string::npos);
  }
}

TEST_CASE("shape and tensor_info: equality and use in constant expressions") {
  CHECK(ipu::shape{1, 2} == ipu::shape(std::vector<std::int64_t>{1, 2}));
  CHECK(ipu::shape{1, 2} != ipu::shape{2, 1});
  static_assert(ipu::shape{2, 3, 4}.num_elements() == 24);
  static_assert(ipu::shape{2, 3, 4}.dim(-1) == 4);
  static_assert(ipu::shape{2, 3, 4}.strides()[0] == 12);
  static_assert(ipu::tensor_info{ipu::data_type::F16, {8, 8}}.num_bytes() == 128);
  const ipu::tensor_info info{ipu::data_type::S64, {3}};
  CHECK(info.num_elements() == 3);
  CHECK(info.num_bytes() == 24);
  CHECK(ipu::to_string(info) == "S64[3]");
  CHECK(info == ipu::tensor_info{ipu::data_type::S64, {3}});
  CHECK(info != ipu::tensor_info{ipu::data_type::U64, {3}});
}

}  // namespace test_shape
