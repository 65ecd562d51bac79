// PopART's ai.graphcore helper ops in ONNX files: typed by the op table so the standard ops after
// them infer, run with hand-computed results, and bad attributes refused at import naming the node.
#include "ipu/onnx/graphcore_ops.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ipu/log.hpp"
#include "onnx_run_util.hpp"
#include "../captured_log.hpp"

namespace test_graphcore_ops {

using namespace ipu;
using test_onnx::attr;
using test_onnx::import_error;
using test_onnx::model;
using test_onnx::node;
using test_onnx::run;

namespace {
constexpr const char* gc = "ai.graphcore";
constexpr int s32_type = ::onnx::TensorProto_DataType_INT32;

model popart_model() {
  model m(11);
  m.import_domain(gc, 1);
  return m;
}
host_tensor f32(shape s, std::vector<float> v) { return host_tensor::from<float>(std::move(s), std::span<const float>(v)); }
}  // namespace

TEST_CASE("Nop, DynamicSlice and DynamicUpdate from an ONNX file feed standard ops; offsets clamp at run time") {
  auto m = popart_model();
  m.input("x", {3, 4}).input("off", {1}, s32_type).output("y", {3, 2}).output("u", {3, 4});
  m.add(node("Nop", {"x"}, {"kept"}, {}, "nop", gc));
  m.add(node("DynamicSlice", {"kept", "off"}, {"s"}, {attr("axes", {1}), attr("sizes", {2}), attr("noOverlap", 1)}, "slice", gc));
  m.add(node("Neg", {"s"}, {"y"}));
  m.add(node("DynamicUpdate", {"x", "off", "y"}, {"u"}, {attr("axes", {1}), attr("sizes", {2})}, "update", gc));
  const auto g = ipu::onnx::load_model_from_bytes(m.bytes());
  REQUIRE(g.ops().size() == 4);
  CHECK(g.ops()[0].domain == gc);
  CHECK(g.ops()[0].type == "Nop");  // kept: it is not a view the planners elide
  std::vector<float> x(12);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  for (const auto& [offset, col] : std::vector<std::pair<std::int32_t, int>>{{1, 1}, {7, 2}, {-5, 0}}) {
    CAPTURE(offset);
    const std::vector<std::int32_t> off{offset};
    auto out = run(m, {f32({3, 4}, x), host_tensor::from<std::int32_t>({1}, off)});
    std::vector<float> want_y, want_u = x;
    for (int r = 0; r < 3; ++r)
      for (int c = col; c < col + 2; ++c) {
        want_y.push_back(-x[static_cast<std::size_t>(r * 4 + c)]);
        want_u[static_cast<std::size_t>(r * 4 + c)] = -x[static_cast<std::size_t>(r * 4 + c)];
      }
    CHECK(std::vector<float>(out[0].as<float>().begin(), out[0].as<float>().end()) == want_y);
    CHECK(std::vector<float>(out[1].as<float>().begin(), out[1].as<float>().end()) == want_u);
  }
}

TEST_CASE("GroupNormalization and PrintTensor from an ONNX file") {
  auto m = popart_model();
  m.input("x", {1, 4, 2}).output("y", {1, 4, 2}).output("mean", {2}).output("inv", {2});
  m.initializer(test_onnx::float_tensor("scale", {4}, {1, 2, 1, 1}));
  m.initializer(test_onnx::float_tensor("bias", {4}, {0, 0, 1, 0}));
  m.add(node("PrintTensor", {"x"}, {"xp"}, {attr("title", "x")}, "print", gc));
  m.add(node("GroupNormalization", {"xp", "scale", "bias"}, {"y", "mean", "inv"},
             {attr("num_groups", 2), attr("epsilon", 0.0f)}, "gn", gc));
  std::vector<std::string> printed;
  auto out = [&] {
    const ipu_test::captured_log log(ipu::log::get_level());
    auto r = run(m, {f32({1, 4, 2}, {0, 1, 2, 3, 4, 5, 6, 7})});
    printed = log.messages();
    return r;
  }();
  CHECK(printed == std::vector<std::string>{"x: [[[0, 1],\n  [2, 3],\n  [4, 5],\n  [6, 7]]]"});
  const float s = 0.894427191f;  // each group's variance is 1.25
  const std::vector<float> want{-1.5f * s, -0.5f * s, 1.0f * s, 3.0f * s, 1 - 1.5f * s, 1 - 0.5f * s, 0.5f * s, 1.5f * s};
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(out[0].as<float>()[i] == doctest::Approx(want[i]).epsilon(1e-6));
  CHECK(out[1].as<float>()[0] == doctest::Approx(1.5));
  CHECK(out[1].as<float>()[1] == doctest::Approx(5.5));
  CHECK(out[2].as<float>()[1] == doctest::Approx(s).epsilon(1e-6));
}

TEST_CASE("ai.graphcore ops with bad attributes, unknown types or another opset are refused at import") {
  auto bad = popart_model();
  bad.input("x", {3, 4}).input("off", {1}, s32_type).output("y", {3, 2});
  bad.add(node("DynamicSlice", {"x", "off"}, {"y"}, {attr("axes", {1}), attr("sizes", {9})}, "slice", gc));
  auto e = import_error(bad);
  CHECK(e.find("size 9 of axis 1 is outside [1, 4]") != std::string::npos);
  CHECK(e.find("slice") != std::string::npos);

  auto gn = popart_model();
  gn.input("x", {1, 6, 2}).input("c", {6}).output("y", {1, 6, 2});
  gn.add(node("GroupNormalization", {"x", "c", "c"}, {"y", "m", "v"}, {attr("num_groups", 4)}, "gn", gc));
  CHECK(import_error(gn).find("num_groups 4 does not divide the 6 channels") != std::string::npos);

  auto declared = popart_model();  // outputs declared in the model are checked against the shape rule
  declared.input("x", {3, 4}).input("off", {1}, s32_type).output("y", {3, 3});
  declared.add(node("DynamicSlice", {"x", "off"}, {"y"}, {attr("axes", {1}), attr("sizes", {2})}, "slice", gc));
  CHECK(import_error(declared).find("output 'y' is declared F32[3,3] but the op computes F32[3,2]") != std::string::npos);

  auto unknown = popart_model();
  unknown.input("x", {2}).output("y", {2});
  unknown.add(node("Scale", {"x"}, {"y"}, {attr("scale", 2.0f)}, "scale", gc));
  CHECK(import_error(unknown).find("Scale") != std::string::npos);

  model v2(11);
  v2.import_domain(gc, 2);
  v2.input("x", {2}).output("y", {2});
  v2.add(node("Nop", {"x"}, {"y"}, {}, "nop", gc));
  CHECK(import_error(v2).find("ai.graphcore opset 2") != std::string::npos);
}

}  // namespace test_graphcore_ops
