#include <doctest/doctest.h>

#include "ipu/device/precision.hpp"

namespace test_precision {

using ipu::data_type;
using ipu::precision;

TEST_CASE("precision names round-trip and parse Graphcore's spellings") {
  for (auto p : ipu::all_precisions) CHECK(ipu::precision_from_string(ipu::to_string(p)) == p);
  CHECK(ipu::to_string(precision::fp16_32) == "FP16.32");
  CHECK(ipu::precision_from_string("fp16") == precision::fp16_16);
  CHECK(ipu::precision_from_string("Fp32") == precision::fp32);
  CHECK_FALSE(ipu::precision_from_string("fp8").has_value());
  CHECK_FALSE(ipu::precision_from_string("").has_value());
}

TEST_CASE("precision element types and sizes") {
  CHECK(ipu::input_bytes(precision::fp32) == 4);
  CHECK(ipu::partials_bytes(precision::fp32) == 4);
  CHECK(ipu::input_bytes(precision::fp16_16) == 2);
  CHECK(ipu::partials_bytes(precision::fp16_16) == 2);
  CHECK(ipu::input_bytes(precision::fp16_32) == 2);
  CHECK(ipu::partials_bytes(precision::fp16_32) == 4);
  static_assert(ipu::partials_type(precision::fp16_32) == data_type::F32);
}

TEST_CASE("precision_for maps input and partials types to an AMP mode, or none") {
  CHECK(ipu::precision_for(data_type::F32, data_type::F32) == precision::fp32);
  CHECK(ipu::precision_for(data_type::F16, data_type::F16) == precision::fp16_16);
  CHECK(ipu::precision_for(data_type::F16, data_type::F32) == precision::fp16_32);
  CHECK_FALSE(ipu::precision_for(data_type::F32, data_type::F16).has_value());
  CHECK_FALSE(ipu::precision_for(data_type::S32, data_type::S32).has_value());
  CHECK_FALSE(ipu::precision_for(data_type::F8143, data_type::F16).has_value());
}

}  // namespace test_precision
