#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>

#include "ipu/bfloat16.hpp"
#include "ipu/data_type.hpp"
#include "ipu/float8.hpp"
#include "ipu/half.hpp"
#include "ipu/tensor.hpp"

namespace test_data_type {

using ipu::data_type;

TEST_CASE("data types: PopEF names round-trip and are unique") {
  std::set<std::string> names;
  for (auto t : ipu::all_data_types) {
    const auto name = ipu::to_string(t);
    CHECK(name != "?");
    CHECK(names.insert(std::string(name)).second);
    REQUIRE(ipu::data_type_from_string(name).has_value());
    CHECK(*ipu::data_type_from_string(name) == t);
  }
  CHECK(names.size() == 16);  // the PopEF set and ONNX's STRING
  CHECK_FALSE(ipu::data_type_from_string("f32").has_value());  // PopEF spelling is exact
  CHECK_FALSE(ipu::data_type_from_string("FLOAT").has_value());
  CHECK_FALSE(ipu::data_type_from_string("").has_value());
}

TEST_CASE("data types: sizes match the C++ element types") {
  CHECK(ipu::size_of(data_type::BOOL) == sizeof(bool));
  CHECK(ipu::size_of(data_type::U8) == sizeof(std::uint8_t));
  CHECK(ipu::size_of(data_type::S8) == sizeof(std::int8_t));
  CHECK(ipu::size_of(data_type::U16) == sizeof(std::uint16_t));
  CHECK(ipu::size_of(data_type::S16) == sizeof(std::int16_t));
  CHECK(ipu::size_of(data_type::S32) == sizeof(std::int32_t));
  CHECK(ipu::size_of(data_type::U32) == sizeof(std::uint32_t));
  CHECK(ipu::size_of(data_type::S64) == sizeof(std::int64_t));
  CHECK(ipu::size_of(data_type::U64) == sizeof(std::uint64_t));
  CHECK(ipu::size_of(data_type::F16) == sizeof(ipu::half));
  CHECK(ipu::size_of(data_type::F32) == sizeof(float));
  CHECK(ipu::size_of(data_type::F64) == sizeof(double));
  CHECK(ipu::size_of(data_type::F8143) == sizeof(ipu::float8_143));
  CHECK(ipu::size_of(data_type::F8152) == sizeof(ipu::float8_152));
  CHECK(ipu::size_of(data_type::BF16) == sizeof(ipu::bfloat16));
  static_assert(ipu::size_of(data_type::F16) == 2);
  static_assert(ipu::size_of(data_type::BF16) == 2);
}

TEST_CASE("data types: BF16 is appended, so the codes PopEF files store keep their values") {
  CHECK(static_cast<int>(data_type::F8152) == 13);
  CHECK(static_cast<int>(data_type::BF16) == 14);
  CHECK(ipu::all_data_types[14] == data_type::BF16);
  CHECK(ipu::to_string(data_type::BF16) == "BF16");
  CHECK(ipu::data_type_from_string("BF16") == data_type::BF16);
  CHECK_FALSE(ipu::data_type_from_string("BFLOAT16").has_value());  // that is ONNX's spelling
  // ONNX TensorProto.DataType BFLOAT16 is 16, between UINT64 (13) and FLOAT8E4M3FN (17).
  CHECK(ipu::data_type_from_onnx_code(16) == data_type::BF16);
  CHECK(ipu::onnx_code_of(data_type::BF16) == 16);
  CHECK_FALSE(ipu::data_type_from_onnx_code(17).has_value());
}

TEST_CASE("data types: classification is a partition of the numeric types") {
  int floats = 0, signed_ints = 0, unsigned_ints = 0;
  for (auto t : ipu::all_data_types) {
    const int kinds = int(ipu::is_floating_point(t)) + int(ipu::is_signed_integer(t)) + int(ipu::is_unsigned_integer(t));
    CHECK(kinds == (t == data_type::BOOL || t == data_type::STRING ? 0 : 1));
    CHECK(ipu::is_numeric(t) == (t != data_type::STRING));
    floats += ipu::is_floating_point(t);
    signed_ints += ipu::is_signed_integer(t);
    unsigned_ints += ipu::is_unsigned_integer(t);
  }
  CHECK(floats == 6);
  CHECK(signed_ints == 4);
  CHECK(unsigned_ints == 4);
  CHECK(ipu::is_floating_point(data_type::F8143));
  CHECK(ipu::is_floating_point(data_type::F8152));
  CHECK(ipu::is_floating_point(data_type::BF16));
}

TEST_CASE("data types: STRING is appended after BF16 and is ONNX's code 8") {
  CHECK(static_cast<int>(data_type::STRING) == 15);
  CHECK(ipu::all_data_types[15] == data_type::STRING);
  CHECK(ipu::to_string(data_type::STRING) == "STRING");
  CHECK(ipu::data_type_from_onnx_code(8) == data_type::STRING);
  CHECK(ipu::onnx_code_of(data_type::STRING) == 8);
  static_assert(ipu::size_of(data_type::STRING) == sizeof(ipu::string_ref));
  static_assert(ipu::data_type_of_v<ipu::string_ref> == data_type::STRING);
}

TEST_CASE("data_type_of maps element types, including both float8 formats") {
  static_assert(ipu::data_type_of_v<float> == data_type::F32);
  static_assert(ipu::data_type_of_v<ipu::half> == data_type::F16);
  static_assert(ipu::data_type_of_v<ipu::float8_143> == data_type::F8143);
  static_assert(ipu::data_type_of_v<ipu::float8_152> == data_type::F8152);
  static_assert(ipu::data_type_of_v<ipu::bfloat16> == data_type::BF16);
  static_assert(ipu::data_type_of_v<std::int64_t> == data_type::S64);
  static_assert(ipu::data_type_of_v<bool> == data_type::BOOL);
  for (auto t : ipu::all_data_types) CHECK(ipu::size_of(t) > 0);
}

}  // namespace test_data_type
