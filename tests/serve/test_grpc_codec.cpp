// The gRPC messages <-> infer_request / infer_response codec on its own (no server, no model).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ipu/serve/grpc_codec.hpp"

namespace test_grpc_codec {

using ipu::serve::decode_infer_request;
using ipu::serve::request_error;

inference::ModelInferRequest typed_request() {
  inference::ModelInferRequest m;
  m.set_id("r1");
  auto* a = m.add_inputs();
  a->set_name("a");
  a->set_datatype("INT16");
  a->add_shape(2);
  a->mutable_contents()->add_int_contents(-300);
  a->mutable_contents()->add_int_contents(7);
  auto* b = m.add_inputs();
  b->set_name("b");
  b->set_datatype("BOOL");
  b->add_shape(1);
  b->mutable_contents()->add_bool_contents(true);
  return m;
}

std::string refusal(const inference::ModelInferRequest& m) {
  try {
    (void)decode_infer_request(m);
  } catch (const request_error& e) {
    CHECK(e.status() == 400);
    return e.what();
  }
  return "(decoded)";
}

TEST_CASE("serve grpc codec: typed contents decode to row-major bytes of the datatype") {
  const auto r = decode_infer_request(typed_request());
  CHECK(r.id == "r1");
  CHECK_FALSE(r.binary_outputs);
  REQUIRE(r.inputs.size() == 2);
  CHECK(r.inputs[0].type == ipu::data_type::S16);
  REQUIRE(r.inputs[0].data.size() == 4);
  std::int16_t a[2];
  std::memcpy(a, r.inputs[0].data.data(), sizeof a);
  CHECK(a[0] == -300);
  CHECK(a[1] == 7);
  CHECK(r.inputs[1].data == std::vector<std::byte>{std::byte{1}});
}

TEST_CASE("serve grpc codec: raw contents are taken whole, BOOL bytes become 0 or 1, outputs answer raw") {
  inference::ModelInferRequest m;
  auto* b = m.add_inputs();
  b->set_name("b");
  b->set_datatype("BOOL");
  b->add_shape(3);
  m.add_raw_input_contents(std::string("\x00\x07\xff", 3));
  m.add_outputs()->set_name("y");
  const auto r = decode_infer_request(m);
  CHECK(r.inputs[0].data == std::vector<std::byte>{std::byte{0}, std::byte{1}, std::byte{1}});
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0] == std::pair<std::string, bool>{"y", true});

  ipu::serve::infer_response resp{"m", "1", "r", {}};
  resp.outputs.push_back({"y", ipu::data_type::F32, {1}, std::vector<std::byte>(4, std::byte{0}), false});
  resp.outputs.push_back({"h", ipu::data_type::F16, {1}, {std::byte{0x00}, std::byte{0x3c}}, false});
  inference::ModelInferResponse out;
  ipu::serve::encode_infer_response(std::move(resp), out);
  // FP16 has no typed field: every output travels raw.
  REQUIRE(out.raw_output_contents_size() == 2);
  CHECK(out.raw_output_contents(1) == std::string("\x00\x3c", 2));
  CHECK(out.outputs(1).datatype() == "FP16");
}

TEST_CASE("serve grpc codec: mismatched requests are refused before anything is allocated from them") {
  auto m = typed_request();
  m.mutable_inputs(0)->set_shape(0, std::int64_t{1} << 62);
  CHECK(refusal(m).find("more than 2^40 elements") != std::string::npos);
  m = typed_request();
  m.mutable_inputs(0)->set_shape(0, -1);
  CHECK(refusal(m).find("negative dimension") != std::string::npos);
  m = typed_request();
  m.mutable_inputs(0)->mutable_contents()->add_int_contents(70000);
  CHECK(refusal(m).find("contents hold 3 elements") != std::string::npos);
  m = typed_request();
  m.mutable_inputs(0)->mutable_contents()->set_int_contents(0, 70000);
  CHECK(refusal(m).find("value 70000 is not an integer the datatype holds") != std::string::npos);
  m = typed_request();
  m.mutable_inputs(1)->mutable_contents()->add_fp32_contents(1.f);  // a second field besides bool_contents
  CHECK(refusal(m).find("contents hold 2 elements (1 in bool_contents)") != std::string::npos);
  m = typed_request();
  m.add_raw_input_contents("xx");
  CHECK(refusal(m).find("1 raw_input_contents for 2 inputs") != std::string::npos);
  m = typed_request();
  (*m.mutable_parameters())["sequence_id"].set_int64_param(1);
  CHECK(refusal(m).find("parameter 'sequence_id' is not supported") != std::string::npos);
  m = typed_request();
  m.mutable_inputs(1)->set_name("a");
  CHECK(refusal(m).find("the input is given twice") != std::string::npos);
}

}  // namespace test_grpc_codec
