// The KServe v2 JSON codec on its own (no server, no model): what hostile bodies get, and the
// signature check the model repository runs before a request reaches the batcher.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ipu/serve/tensor_codec.hpp"

namespace test_tensor_codec {

using ipu::serve::decode_infer_request;
using ipu::serve::match_inputs;
using ipu::serve::request_error;
using ipu::serve::tensor_metadata;

std::string nested_object(std::size_t depth) {
  std::string s;
  for (std::size_t k = 0; k < depth; ++k) s += R"({"a":)";
  s += "1";
  s.append(depth, '}');
  return s;
}

std::string what_of(const std::string& body) {
  try {
    (void)decode_infer_request(body, std::nullopt);
  } catch (const request_error& e) {
    CHECK(e.status() == 400);
    return e.what();
  }
  return "(decoded)";
}

TEST_CASE("serve codec: a value nested 50,000 deep is refused by kind, not printed (the dump recursed off the stack)") {
  // 250 KB, far inside the 64 MiB body cap; printing it recursed once per level and overflowed the
  // stack (tests/fuzz/reproducers/infer/http-data-object-nested-50000-deep.json).
  const auto deep = nested_object(50000);
  const auto data = what_of(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[)" + deep + "]}]}");
  CHECK(data.find("value an object is not a number") != std::string::npos);
  const auto shape = what_of(R"({"inputs":[{"name":"x","shape":[2,)" + deep + R"(],"datatype":"FP32","data":[1,2]}]})");
  CHECK(shape.find("shape holds a non-integer: an object") != std::string::npos);
  // Every other message naming a value describes arrays and objects the same way.
  const auto small = nested_object(2);
  CHECK(what_of(R"({"inputs":[{"name":"x","shape":[1],"datatype":"BOOL","data":)" + small + "}]}").find("value an object is not a boolean") !=
        std::string::npos);
  CHECK(what_of(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[)" + small + "]}]}")
            .find("value an object is not an integer") != std::string::npos);
  CHECK(what_of(R"({"inputs":[{"name":"x","shape":[[1]],"datatype":"FP32","data":[1]}]})").find("shape holds a non-integer: an array") !=
        std::string::npos);
  // Scalars are still quoted as sent.
  CHECK(what_of(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":["two"]}]})").find(R"(value "two" is not a number)") !=
        std::string::npos);
}

const std::vector<tensor_metadata> batched{{"x", ipu::data_type::F32, {-1, 3}}, {"m", ipu::data_type::BOOL, {-1}}};

ipu::serve::infer_request two_rows() {
  return decode_infer_request(R"({"inputs":[{"name":"m","shape":[2],"datatype":"BOOL","data":[true,false]},)"
                              R"({"name":"x","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5,6]}]})",
                              std::nullopt);
}

TEST_CASE("serve codec: match_inputs puts inputs in signature order with their rows") {
  const auto r = two_rows();
  const auto m = match_inputs(r, batched, 4, "model 'm'");
  CHECK(m.rows == 2);
  REQUIRE(m.data.size() == 2);
  REQUIRE(m.data[0].size() == 24);  // x: 2 rows of 3 floats
  float x[6];
  std::memcpy(x, m.data[0].data(), sizeof x);
  CHECK(x[0] == 1.f);
  CHECK(x[5] == 6.f);
  CHECK(m.data[1].size() == 2);
  // Without a batch dimension the shapes are the compiled ones and a request is one row.
  const std::vector<tensor_metadata> fixed{{"x", ipu::data_type::F32, {2, 3}}, {"m", ipu::data_type::BOOL, {2}}};
  CHECK(match_inputs(r, fixed, 0, "model 'm'").rows == 1);
}

TEST_CASE("serve codec: match_inputs refuses what does not fit, saying which input") {
  const auto r = two_rows();
  auto refused = [&](const std::vector<tensor_metadata>& sig, std::uint64_t max_batch) {
    try {
      (void)match_inputs(r, sig, max_batch, "model 'm'");
    } catch (const request_error& e) {
      CHECK(e.status() == 400);
      return std::string(e.what());
    }
    return std::string("(matched)");
  };
  CHECK(refused(batched, 1).find("a batch of 2 exceeds max_batch_size 1") != std::string::npos);
  CHECK(refused({{"x", ipu::data_type::F32, {-1, 4}}, {"m", ipu::data_type::BOOL, {-1}}}, 4).find("input 'x' has shape [2,3]") !=
        std::string::npos);
  CHECK(refused({{"x", ipu::data_type::F16, {-1, 3}}, {"m", ipu::data_type::BOOL, {-1}}}, 4).find("input 'x' is FP32") != std::string::npos);
  CHECK(refused({{"x", ipu::data_type::F32, {-1, 3}}}, 4).find("'m' is not an input of the model") != std::string::npos);
  CHECK(refused({{"x", ipu::data_type::F32, {-1, 3}}, {"m", ipu::data_type::BOOL, {-1}}, {"k", ipu::data_type::S32, {-1}}}, 4)
            .find("no tensor for input 'k'") != std::string::npos);
  CHECK(refused({{"x", ipu::data_type::F32, {-1, 3}}, {"m", ipu::data_type::BOOL, {-1, 1}}}, 4).find("input 'm' has shape [2]") !=
        std::string::npos);
  auto disagree = two_rows();
  disagree.inputs[0].shape = {3};
  disagree.inputs[0].data.resize(3);
  try {
    (void)match_inputs(disagree, batched, 4, "model 'm'");
    FAIL("matched inputs of 3 and 2 rows");
  } catch (const request_error& e) {
    CHECK(std::string(e.what()).find("inputs disagree on the batch: 3 and 2 rows") != std::string::npos);
  }
}

}  // namespace test_tensor_codec
