// PopART's ai.graphcore helper ops in ONNX files: typed by the op table so the standard ops after
// them infer, run with hand-computed results, and bad attributes refused at import naming the node.
#include "ipu/onnx/graphcore_ops.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "ipu/log.hpp"
#include "ipu/ops/custom_ops.hpp"
#include "ipu/ops/gradient_rules.hpp"
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
/// A Constant node `out` holding INT64 `v` (a scalar when `scalar`).
::onnx::NodeProto i64_constant(const std::string& out, std::vector<std::int64_t> v, bool scalar = false) {
  auto t = test_onnx::int64_tensor(out, scalar ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{static_cast<std::int64_t>(v.size())}, v);
  return node("Constant", {}, {out}, {attr("value", t)});
}
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

TEST_CASE("MultiConv (an omitted bias) and CtcBeamSearchDecoder from an ONNX file") {
  auto m = popart_model();
  constexpr int u32_type = ::onnx::TensorProto_DataType_UINT32;
  m.input("x", {1, 1, 3, 3}).input("lp", {2, 1, 2}).input("len", {1}, s32_type);
  m.output("y0", {1, 1, 2, 2}).output("y1", {1, 1, 3, 3}).output("p", {1, 1}).output("n", {1, 1}, u32_type);
  m.output("labels", {1, 1, 2}, u32_type);
  m.initializer(test_onnx::float_tensor("w0", {1, 1, 2, 2}, {1, 1, 1, 1}));
  m.initializer(test_onnx::float_tensor("w1", {1, 1, 1, 1}, {-2}));
  m.initializer(test_onnx::float_tensor("b1", {1}, {1}));
  m.add(node("MultiConv", {"x", "w0", "", "x", "w1", "b1"}, {"c0", "c1"}, {attr("planType", "serial")}, "mc", gc));
  m.add(node("Identity", {"c0"}, {"y0"}));
  m.add(node("Relu", {"c1"}, {"y1"}));  // typed by the op table, so ONNX infers Relu's output
  m.add(node("CtcBeamSearchDecoder", {"lp", "len"}, {"p", "n", "labels"}, {attr("beam_width", 4)}, "ctc", gc));
  const float l6 = std::log(0.6f), l4 = std::log(0.4f);
  auto len = host_tensor::from<std::int32_t>(shape{1}, std::span<const std::int32_t>(std::vector<std::int32_t>{2}));
  const auto out = run(m, {f32({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8}), f32({2, 1, 2}, {l6, l4, l6, l4}), len});
  CHECK(std::vector<float>(out[0].as<float>().begin(), out[0].as<float>().end()) == std::vector<float>{8, 12, 20, 24});
  CHECK(std::vector<float>(out[1].as<float>().begin(), out[1].as<float>().end()) ==
        std::vector<float>{1, 0, 0, 0, 0, 0, 0, 0, 0});  // relu(1 - 2x)
  CHECK(out[2].as<float>()[0] == doctest::Approx(std::log(0.64)).epsilon(1e-6));  // "1": three of four paths
  CHECK(out[3].as<std::uint32_t>()[0] == 1u);
  CHECK(out[4].as<std::uint32_t>()[0] == 1u);
}

TEST_CASE("ai.graphcore ops inside If branches and a Loop body (nested in a branch) import and run") {
  constexpr int f32_type = ::onnx::TensorProto_DataType_FLOAT;
  constexpr int i64_type = ::onnx::TensorProto_DataType_INT64;
  constexpr int bool_type = ::onnx::TensorProto_DataType_BOOL;
  auto m = popart_model();
  m.input("cond", {}, bool_type).input("x", {2, 3}).input("off", {1}, s32_type).output("y", {2, 2});
  // then: Neg(DynamicSlice(x, off)), the slice's output typed only by the op table
  ::onnx::GraphProto then_g;
  then_g.set_name("then");
  *then_g.add_output() = test_onnx::value("t_out", f32_type, {2, 2});
  *then_g.add_node() = node("DynamicSlice", {"x", "off"}, {"s"}, {attr("axes", {1}), attr("sizes", {2})}, "t_slice", gc);
  *then_g.add_node() = node("Neg", {"s"}, {"t_out"});
  // else: a Loop run twice of acc = Nop(acc) * 2 over the first two columns (Slice)
  ::onnx::GraphProto body;
  body.set_name("body");
  *body.add_input() = test_onnx::value("i", i64_type, {});
  *body.add_input() = test_onnx::value("c_in", bool_type, {});
  *body.add_input() = test_onnx::value("acc", f32_type, {2, 2});
  *body.add_output() = test_onnx::value("c_out", bool_type, {});
  *body.add_output() = test_onnx::value("acc_out", f32_type, {2, 2});
  *body.add_node() = node("Identity", {"c_in"}, {"c_out"});
  *body.add_node() = node("Nop", {"acc"}, {"kept"}, {}, "b_nop", gc);
  *body.add_node() = node("Add", {"kept", "kept"}, {"acc_out"});
  ::onnx::GraphProto else_g;
  else_g.set_name("else");
  *else_g.add_output() = test_onnx::value("e_out", f32_type, {2, 2});
  *else_g.add_node() = i64_constant("starts", {0});
  *else_g.add_node() = i64_constant("ends", {2});
  *else_g.add_node() = i64_constant("axes", {1});
  *else_g.add_node() = i64_constant("trips", {2}, true);
  *else_g.add_node() = node("Slice", {"x", "starts", "ends", "axes"}, {"first"});
  *else_g.add_node() = node("Loop", {"trips", "", "first"}, {"e_out"}, {attr("body", body)}, "loop");
  m.add(node("If", {"cond"}, {"y"}, {attr("then_branch", then_g), attr("else_branch", else_g)}, "branch"));

  const auto g = ipu::onnx::load_model_from_bytes(m.bytes());
  REQUIRE(g.ops().size() == 1);
  const std::vector<float> x{0, 1, 2, 3, 4, 5};
  const std::vector<std::int32_t> off{1};
  auto args = [&](bool c) {
    return std::vector<host_tensor>{host_tensor::from<bool>({}, {c}), f32({2, 3}, x),
                                    host_tensor::from<std::int32_t>({1}, off)};
  };
  auto y = run(m, args(true));
  CHECK(std::vector<float>(y[0].as<float>().begin(), y[0].as<float>().end()) == std::vector<float>{-1, -2, -4, -5});
  y = run(m, args(false));
  CHECK(std::vector<float>(y[0].as<float>().begin(), y[0].as<float>().end()) == std::vector<float>{0, 4, 12, 16});

  // A bad attribute inside a body names the op and the body it sits in.
  auto bad = m;
  auto* bad_then = bad.graph().mutable_node(0)->mutable_attribute(0)->mutable_g();
  bad_then->mutable_node(0)->mutable_attribute(1)->set_ints(0, 9);
  const auto e = import_error(bad);
  CHECK(e.find("size 9 of axis 1 is outside [1, 3]") != std::string::npos);
  CHECK(e.find("t_slice") != std::string::npos);
  CHECK(e.find("subgraph 'then'") != std::string::npos);
}

namespace {
// custom.ops::LeakyRelu6 (ops/custom_ops.hpp): y = min(x >= 0 ? x : alpha * x, 6); the kernel also
// records the attributes it saw, one string per attribute, for the attribute test.
std::vector<std::string> seen_attributes;
std::vector<ipu::tensor_info> same_as_input(const ipu::infer_context& c) {
  if (c.in_type(0) != ipu::data_type::F32) throw c.fail("LeakyRelu6 takes F32");
  return {c.input(0)};
}
void leaky_relu6(const ipu::kernel_context& c) {
  const auto x = c.input(0).as<float>();
  const float alpha = c.attr_float("alpha", 0.01f);
  for (std::size_t i = 0; i < x.size(); ++i) c.outputs[0].as<float>()[i] = std::min(x[i] >= 0 ? x[i] : alpha * x[i], 6.0f);
  seen_attributes.clear();
  for (const auto& a : c.op.attributes) {
    std::string v = a.name + "=";
    std::visit(
        [&](const auto& value) {
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::int64_t>) v += std::to_string(value);
          else if constexpr (std::is_same_v<T, std::string>) v += value;
          else if constexpr (std::is_same_v<T, std::vector<float>> || std::is_same_v<T, std::vector<std::int64_t>>)
            for (auto e : value) v += std::to_string(e) + ";";
          else if constexpr (std::is_same_v<T, std::vector<std::string>>)
            for (const auto& e : value) v += e + ";";
          else v += "?";
        },
        a.value);
    seen_attributes.push_back(std::move(v));
  }
}
/// dx = dy where 0 <= x < 6, alpha dy below 0, 0 from 6 on.
void leaky_relu6_grad(ipu::gradient_context& c) {
  const auto x = c.input(0), dy = c.required_output_grad();
  const auto zero = c.scalar(0, x);
  const auto scaled = c.add("Where", {c.add("GreaterOrEqual", {x, zero}), dy,
                                      c.add("Mul", {dy, c.scalar(c.attr_float("alpha", 0.01f), x)})});
  c.set_input_grad(0, c.add("Where", {c.add("Less", {x, c.scalar(6, x)}), scaled, zero}));
}
void register_leaky_relu6() {
  static std::once_flag once;
  std::call_once(once, [] {
    ipu::ops::register_custom_op({.domain = "custom.ops", .type = "LeakyRelu6", .version = 1, .shape = same_as_input,
                                  .kernel = leaky_relu6, .gradient = leaky_relu6_grad});
  });
}
model custom_model() {
  model m(13);
  m.import_domain("custom.ops", 1);
  return m;
}
::onnx::AttributeProto strings_attr(const std::string& name, std::initializer_list<std::string> v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_STRINGS);
  for (const auto& x : v) a.add_strings(x);
  return a;
}
}  // namespace

TEST_CASE("a registered custom op in an ONNX file is typed by its shape rule (in an If branch too) and runs") {
  register_leaky_relu6();
  constexpr int bool_type = ::onnx::TensorProto_DataType_BOOL;
  auto m = custom_model();
  m.input("cond", {}, bool_type).input("x", {4}).output("y", {4}).output("z", {4});
  m.add(node("LeakyRelu6", {"x"}, {"l"}, {attr("alpha", 0.5f)}, "leaky", "custom.ops"));
  m.add(node("Neg", {"l"}, {"y"}));  // typed only once the custom op's output is
  ::onnx::GraphProto then_g;
  then_g.set_name("then");
  *then_g.add_output() = test_onnx::value("t_out", ::onnx::TensorProto_DataType_FLOAT, {4});
  *then_g.add_node() = node("LeakyRelu6", {"y"}, {"t"}, {}, "inner", "custom.ops");
  *then_g.add_node() = node("Identity", {"t"}, {"t_out"});
  ::onnx::GraphProto else_g;
  else_g.set_name("else");
  *else_g.add_output() = test_onnx::value("e_out", ::onnx::TensorProto_DataType_FLOAT, {4});
  *else_g.add_node() = node("Identity", {"x"}, {"e_out"});
  m.add(node("If", {"cond"}, {"z"}, {attr("then_branch", then_g), attr("else_branch", else_g)}, "branch"));
  const auto g = ipu::onnx::load_model_from_bytes(m.bytes());
  CHECK(g.ops()[0].domain == "custom.ops");
  CHECK(g.ops()[0].opset == 1);
  const std::vector<float> x{-8, -1, 2, 20};
  auto out = run(m, {host_tensor::from<bool>({}, {true}), f32({4}, x)});
  // l = {-4, -0.5, 2, 6}; y = {4, 0.5, -2, -6}; z = LeakyRelu6(y), alpha 0.01 = {4, 0.5, -0.02, -0.06}
  CHECK(std::vector<float>(out[0].as<float>().begin(), out[0].as<float>().end()) == std::vector<float>{4, 0.5f, -2, -6});
  const std::vector<float> want_z{4, 0.5f, -0.02f, -0.06f};
  for (std::size_t i = 0; i < 4; ++i) CHECK(out[1].as<float>()[i] == doctest::Approx(want_z[i]));

  // The model must import the op's domain at the version it was registered at.
  auto v2 = m;
  v2.proto.mutable_opset_import(1)->set_version(2);
  const auto e = import_error(v2);
  CHECK(e.find("custom op custom.ops::LeakyRelu6 is registered at version 1 but the model imports domain "
               "custom.ops at version 2") != std::string::npos);
}

TEST_CASE("a custom op's gradient rule serves ONNX's Gradient op") {
  register_leaky_relu6();
  auto m = custom_model();
  m.import_domain("ai.onnx.preview.training", 1);
  m.input("x", {4}).output("dx", {4});
  m.add(node("LeakyRelu6", {"x"}, {"y"}, {attr("alpha", 0.25f)}, "leaky", "custom.ops"));
  ::onnx::AttributeProto xs = strings_attr("xs", {"x"});
  m.add(node("Gradient", {"x"}, {"dx"}, {xs, attr("y", "y")}, "grad", "ai.onnx.preview.training"));
  auto out = run(m, {f32({4}, {-3, 1, 5, 9})});
  CHECK(std::vector<float>(out[0].as<float>().begin(), out[0].as<float>().end()) == std::vector<float>{0.25f, 1, 1, 0});
}

TEST_CASE("seed 4.9.3 through ONNX: attributes of every PopART kind reach the custom op's kernel") {
  register_leaky_relu6();
  auto m = custom_model();
  m.input("x", {2}).output("y", {2});
  m.add(node("LeakyRelu6", {"x"}, {"y"},
             {attr("float_one", 1.0f), attr("float_minus_two", -2.0f), attr("int_zero", 0), attr("int_minus_five", -5),
              test_onnx::attr_floats("floats_one_two_three", {1, 2, 3}),
              test_onnx::attr_floats("floats_minus_one_two_three", {-1, -2, -3}), attr("ints_one_two_three", {1, 2, 3}),
              attr("ints_minus_one_two_three", {-1, -2, -3}),
              attr("a_string", "string with quotes and slash \" ' \\ end"),
              strings_attr("strs", {"abc", "def", "ghi"})},
             "many", "custom.ops"));
  auto out = run(m, {f32({2}, {-1, 7})});
  CHECK(out[0].as<float>()[1] == 6.0f);
  CHECK(seen_attributes == std::vector<std::string>{"float_one=1.000000", "float_minus_two=-2.000000", "int_zero=0",
                                                    "int_minus_five=-5", "floats_one_two_three=1.000000;2.000000;3.000000;",
                                                    "floats_minus_one_two_three=-1.000000;-2.000000;-3.000000;",
                                                    "ints_one_two_three=1;2;3;", "ints_minus_one_two_three=-1;-2;-3;",
                                                    "a_string=string with quotes and slash \" ' \\ end",
                                                    "strs=abc;def;ghi;"});
}

TEST_CASE("an unregistered custom op is refused at import, naming domain, type and version and how to register") {
  auto m = model(13);
  m.import_domain("unknown.ops", 3);
  m.input("x", {2}).output("y", {2});
  m.add(node("Mystery", {"x"}, {"y"}, {}, "m", "unknown.ops"));
  const auto e = import_error(m);
  CAPTURE(e);
  CHECK(e.find("Mystery (domain unknown.ops, opset 3, node 'm')") != std::string::npos);
  CHECK(e.find("ipu::ops::register_custom_op") != std::string::npos);
  CHECK(e.find("--custom-op LIB.so") != std::string::npos);
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
