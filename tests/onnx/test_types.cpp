#include <doctest/doctest.h>

#include "ipu/onnx/types.hpp"

namespace test_types {

using namespace ipu;

TEST_CASE("every ipu data type maps to an ONNX type and back") {
  for (auto t : all_data_types) {
    const auto code = ipu::onnx::to_onnx_type(t);
    CHECK(code != ::onnx::TensorProto_DataType_UNDEFINED);
    REQUIRE(ipu::onnx::to_data_type(code).has_value());
    CHECK(*ipu::onnx::to_data_type(code) == t);
  }
}

TEST_CASE("ONNX codes follow onnx.proto") {
  // Values fixed by onnx.proto (and ONNX 1.14 for the float8 formats).
  CHECK(ipu::onnx::to_onnx_type(data_type::F32) == 1);
  CHECK(ipu::onnx::to_onnx_type(data_type::U8) == 2);
  CHECK(ipu::onnx::to_onnx_type(data_type::S8) == 3);
  CHECK(ipu::onnx::to_onnx_type(data_type::U16) == 4);
  CHECK(ipu::onnx::to_onnx_type(data_type::S16) == 5);
  CHECK(ipu::onnx::to_onnx_type(data_type::S32) == 6);
  CHECK(ipu::onnx::to_onnx_type(data_type::S64) == 7);
  CHECK(ipu::onnx::to_onnx_type(data_type::BOOL) == 9);
  CHECK(ipu::onnx::to_onnx_type(data_type::F16) == 10);
  CHECK(ipu::onnx::to_onnx_type(data_type::F64) == 11);
  CHECK(ipu::onnx::to_onnx_type(data_type::U32) == 12);
  CHECK(ipu::onnx::to_onnx_type(data_type::U64) == 13);
  CHECK(ipu::onnx::to_onnx_type(data_type::F8143) == 18);  // FLOAT8E4M3FNUZ
  CHECK(ipu::onnx::to_onnx_type(data_type::F8152) == 20);  // FLOAT8E5M2FNUZ
  CHECK(ipu::onnx::to_onnx_type(data_type::BF16) == 16);    // BFLOAT16
  CHECK(ipu::onnx::to_data_type(16) == data_type::BF16);
  CHECK(ipu::onnx::to_onnx_type(data_type::BF16) == ::onnx::TensorProto_DataType_BFLOAT16);
}

TEST_CASE("ONNX types without an ipu equivalent are refused by name") {
  CHECK_FALSE(ipu::onnx::to_data_type(::onnx::TensorProto_DataType_COMPLEX64));
  CHECK_FALSE(ipu::onnx::to_data_type(::onnx::TensorProto_DataType_COMPLEX128));
  CHECK_FALSE(ipu::onnx::to_data_type(0));
  CHECK_FALSE(ipu::onnx::to_data_type(99));
  CHECK(ipu::onnx::onnx_type_name(::onnx::TensorProto_DataType_BFLOAT16) == "BFLOAT16");
  CHECK(ipu::onnx::onnx_type_name(99) == "99?");
  try {
    (void)ipu::onnx::data_type_from_onnx(::onnx::TensorProto_DataType_COMPLEX64, "tensor 'waves'");
    FAIL("expected an error");
  } catch (const error& e) {
    CHECK(e.category() == error_category::onnx);
    CHECK(std::string(e.what()).find("tensor 'waves' has element type COMPLEX64") != std::string::npos);
  }
}

}  // namespace test_types
