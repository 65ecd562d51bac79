// Each opset difference the importer normalises: small models built at old opsets with ONNX's
// protobuf classes, imported, and checked for the canonical (opset-17) form and static shapes.
#include "ipu/onnx/normalize.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ipu/onnx/import.hpp"
#include "onnx_test_util.hpp"

namespace test_normalize {

using namespace ipu;
using test_onnx::attr;
using test_onnx::model;
using test_onnx::node;
using test_onnx::op_types;

namespace {

constexpr int f32 = ::onnx::TensorProto_DataType_FLOAT;
constexpr int f64 = ::onnx::TensorProto_DataType_DOUBLE;
constexpr int i64 = ::onnx::TensorProto_DataType_INT64;
constexpr int boolean = ::onnx::TensorProto_DataType_BOOL;

graph import(const model& m) {
  ipu::onnx::import_options o;
  o.check_supported = false;  // structure only; kernels are not needed here
  return ipu::onnx::load_model_from_bytes(m.bytes(), o);
}

const op_node& only_op(const graph& g, const std::string& type) {
  const op_node* found = nullptr;
  for (const auto& op : g.ops())
    if (op.type == type) {
      REQUIRE_MESSAGE(found == nullptr, "more than one ", type);
      found = &op;
    }
  REQUIRE_MESSAGE(found != nullptr, "no ", type, " op");
  return *found;
}

template <class T>
std::vector<T> constant_values(const graph& g, tensor_id t) {
  const auto& n = g.tensor(t);
  REQUIRE(n.kind == tensor_kind::constant);
  REQUIRE(n.info.type == data_type_of_v<T>);
  std::vector<T> v;
  for (std::size_t i = 0; i < static_cast<std::size_t>(n.info.num_elements()); ++i) v.push_back(n.data.load<T>(i));
  return v;
}

const shape& shape_of(const graph& g, std::string_view name) { return g.tensor(g.tensor_id_of(name)).info.shape; }

std::string error_of(const model& m) {
  try {
    (void)import(m);
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <class T>
T attr_value(const op_node& op, std::string_view name) {
  const auto* a = op.find_attribute(name);
  REQUIRE_MESSAGE(a != nullptr, "no attribute ", std::string(name));
  REQUIRE(std::holds_alternative<T>(a->value));
  return std::get<T>(a->value);
}

}  // namespace

TEST_CASE("every imported ai.onnx op is recorded at opset 17") {
  model m(9);
  m.input("x", {2, 3}).output("y", {2, 3}).add(node("Relu", {"x"}, {"r"})).add(node("Abs", {"r"}, {"y"}));
  auto g = import(m);
  for (const auto& op : g.ops()) CHECK(op.opset == 17);
  CHECK(g.opset_version() == 17);
}

TEST_CASE("Clip min/max attributes become inputs of the input's type") {
  model m(10);
  m.input("x", {2, 3}).output("y", {2, 3});
  m.add(node("Clip", {"x"}, {"y"}, {attr("min", -1.0f), attr("max", 2.0f)}, "clip"));
  auto g = import(m);
  const auto& clip = only_op(g, "Clip");
  REQUIRE(clip.inputs.size() == 3);
  CHECK(constant_values<float>(g, clip.inputs[1]) == std::vector<float>{-1.0f});
  CHECK(constant_values<float>(g, clip.inputs[2]) == std::vector<float>{2.0f});
  CHECK(g.tensor(clip.inputs[1]).info.shape.rank() == 0);
  CHECK(clip.attributes.empty());
  CHECK(shape_of(g, "y") == shape{2, 3});

  model d(10);
  d.input("x", {4}, f64).output("y", {4}, f64);
  d.add(node("Clip", {"x"}, {"y"}, {attr("max", 0.5f)}));
  auto gd = import(d);
  const auto& clip_d = only_op(gd, "Clip");
  REQUIRE(clip_d.inputs.size() == 3);
  CHECK(clip_d.inputs[1] == no_tensor);  // min omitted
  CHECK(constant_values<double>(gd, clip_d.inputs[2]) == std::vector<double>{0.5});
}

TEST_CASE("Split, Squeeze, Unsqueeze and ReduceSum axes become constant inputs") {
  model m(11);
  m.input("x", {2, 3}).output("a", {2, 1}).output("b", {2, 2}).output("s", {2, 3}).output("r", {2});
  m.add(node("Split", {"x"}, {"a", "b"}, {attr("axis", 1), attr("split", {1, 2})}));
  m.add(node("Unsqueeze", {"x"}, {"u"}, {attr("axes", {0, 3})}));
  m.add(node("Squeeze", {"u"}, {"s"}, {attr("axes", {-1, 0})}));
  m.add(node("ReduceSum", {"x"}, {"r"}, {attr("axes", {1}), attr("keepdims", 0)}));
  auto g = import(m);
  CHECK(constant_values<std::int64_t>(g, only_op(g, "Split").inputs.at(1)) == std::vector<std::int64_t>{1, 2});
  CHECK(constant_values<std::int64_t>(g, only_op(g, "Unsqueeze").inputs.at(1)) == std::vector<std::int64_t>{0, 3});
  CHECK(constant_values<std::int64_t>(g, only_op(g, "Squeeze").inputs.at(1)) == std::vector<std::int64_t>{-1, 0});
  CHECK(constant_values<std::int64_t>(g, only_op(g, "ReduceSum").inputs.at(1)) == std::vector<std::int64_t>{1});
  CHECK(only_op(g, "Split").find_attribute("split") == nullptr);
  CHECK(only_op(g, "ReduceSum").find_attribute("axes") == nullptr);
  CHECK(attr_value<std::int64_t>(only_op(g, "ReduceSum"), "keepdims") == 0);
  CHECK(shape_of(g, "a") == shape{2, 1});
  CHECK(shape_of(g, "b") == shape{2, 2});
  CHECK(shape_of(g, "u") == shape{1, 2, 3, 1});
  CHECK(shape_of(g, "s") == shape{2, 3});
  CHECK(shape_of(g, "r") == shape{2});
}

TEST_CASE("pre-13 Softmax, LogSoftmax and Hardmax get opset-13 semantics") {
  SUBCASE("an inner axis is coerced to 2-D by Flatten and Reshape") {
    model m(11);
    m.input("x", {2, 3, 4}).output("y", {2, 3, 4});
    m.add(node("Softmax", {"x"}, {"y"}, {attr("axis", 1)}, "sm"));
    auto g = import(m);
    CHECK(op_types(g) == std::vector<std::string>{"Flatten", "Softmax", "Reshape"});
    const auto& flatten = only_op(g, "Flatten");
    CHECK(attr_value<std::int64_t>(flatten, "axis") == 1);
    CHECK(g.tensor(flatten.outputs[0]).info.shape == shape{2, 12});
    const auto& sm = only_op(g, "Softmax");
    CHECK(attr_value<std::int64_t>(sm, "axis") == -1);
    CHECK(sm.name == "sm");
    const auto& reshape = only_op(g, "Reshape");
    CHECK(constant_values<std::int64_t>(g, reshape.inputs[1]) == std::vector<std::int64_t>{2, 3, 4});
    CHECK(g.tensor(reshape.outputs[0]).name == "y");  // the model's own name stays on the result
    CHECK(shape_of(g, "y") == shape{2, 3, 4});
    REQUIRE(g.outputs().size() == 1);
    CHECK(g.tensor(g.outputs()[0]).name == "y");
  }
  SUBCASE("the default axis 1 on a 2-D input is already the last axis") {
    model m(9);
    m.input("x", {2, 5}).output("y", {2, 5});
    m.add(node("LogSoftmax", {"x"}, {"y"}));
    auto g = import(m);
    CHECK(op_types(g) == std::vector<std::string>{"LogSoftmax"});
    CHECK(attr_value<std::int64_t>(only_op(g, "LogSoftmax"), "axis") == -1);
  }
  SUBCASE("axis 0 flattens everything into one row") {
    model m(12);
    m.input("x", {3, 2}).output("y", {3, 2});
    m.add(node("Hardmax", {"x"}, {"y"}, {attr("axis", 0)}));
    auto g = import(m);
    CHECK(op_types(g) == std::vector<std::string>{"Flatten", "Hardmax", "Reshape"});
    CHECK(g.tensor(only_op(g, "Flatten").outputs[0]).info.shape == shape{1, 6});
    CHECK(shape_of(g, "y") == shape{3, 2});
  }
  SUBCASE("opset 13 Softmax is left alone") {
    model m(13);
    m.input("x", {2, 3, 4}).output("y", {2, 3, 4});
    m.add(node("Softmax", {"x"}, {"y"}, {attr("axis", 1)}));
    auto g = import(m);
    CHECK(op_types(g) == std::vector<std::string>{"Softmax"});
    CHECK(attr_value<std::int64_t>(only_op(g, "Softmax"), "axis") == 1);
  }
}

TEST_CASE("Pad pads/value attributes become inputs") {
  model m(10);
  m.input("x", {2, 3}).output("y", {2, 6}).output("z", {4, 3});
  m.add(node("Pad", {"x"}, {"y"}, {attr("pads", {0, 1, 0, 2}), attr("value", 1.5f)}));
  m.add(node("Pad", {"x"}, {"z"}, {attr("pads", {1, 0, 1, 0}), attr("mode", "reflect")}));
  auto g = import(m);
  const auto& pad = g.op(0);
  REQUIRE(pad.inputs.size() == 3);
  CHECK(constant_values<std::int64_t>(g, pad.inputs[1]) == std::vector<std::int64_t>{0, 1, 0, 2});
  CHECK(constant_values<float>(g, pad.inputs[2]) == std::vector<float>{1.5f});
  CHECK(shape_of(g, "y") == shape{2, 6});
  const auto& reflect = g.op(1);
  CHECK(reflect.inputs.size() == 2);
  CHECK(attr_value<std::string>(reflect, "mode") == "reflect");
  CHECK(shape_of(g, "z") == shape{4, 3});
}

TEST_CASE("Slice starts/ends/axes attributes become inputs") {
  model m(9);
  m.input("x", {3, 4}).output("y", {2, 4});
  m.add(node("Slice", {"x"}, {"y"}, {attr("starts", {1, 0}), attr("ends", {3, 10}), attr("axes", {0, 1})}));
  auto g = import(m);
  const auto& slice = only_op(g, "Slice");
  REQUIRE(slice.inputs.size() == 4);
  CHECK(constant_values<std::int64_t>(g, slice.inputs[1]) == std::vector<std::int64_t>{1, 0});
  CHECK(constant_values<std::int64_t>(g, slice.inputs[2]) == std::vector<std::int64_t>{3, 10});
  CHECK(constant_values<std::int64_t>(g, slice.inputs[3]) == std::vector<std::int64_t>{0, 1});
  CHECK(shape_of(g, "y") == shape{2, 4});
}

TEST_CASE("TopK k attribute becomes a one-element input") {
  model m(9);
  m.input("x", {3, 5}).output("v", {3, 2}).output("i", {3, 2}, i64);
  m.add(node("TopK", {"x"}, {"v", "i"}, {attr("k", 2)}));
  auto g = import(m);
  const auto& topk = only_op(g, "TopK");
  CHECK(constant_values<std::int64_t>(g, topk.inputs.at(1)) == std::vector<std::int64_t>{2});
  CHECK(g.tensor(topk.inputs[1]).info.shape == shape{1});
  CHECK(shape_of(g, "v") == shape{3, 2});
  CHECK(g.tensor(g.tensor_id_of("i")).info == tensor_info{data_type::S64, shape{3, 2}});
}

TEST_CASE("Dropout ratio becomes an input - a legacy mask output is dropped when unused") {
  model m(9);
  m.input("x", {4}).output("y", {4});
  m.add(node("Dropout", {"x"}, {"y", "mask"}, {attr("ratio", 0.25f)}));
  auto g = import(m);
  const auto& d = only_op(g, "Dropout");
  REQUIRE(d.inputs.size() == 2);
  CHECK(constant_values<float>(g, d.inputs[1]) == std::vector<float>{0.25f});
  CHECK(d.outputs.size() == 1);
  CHECK_FALSE(g.find_tensor("mask"));

  model used(9);
  used.input("x", {4}).output("y", {4}).output("mask", {4});
  used.add(node("Dropout", {"x"}, {"y", "mask"}));
  CHECK(contains(error_of(used), "mask output of an opset < 10 Dropout is used"));

  model v11(11);  // the opset-10 mask is BOOL and stays
  v11.input("x", {4}).output("y", {4}).output("mask", {4}, boolean);
  v11.add(node("Dropout", {"x"}, {"y", "mask"}, {attr("ratio", 0.5f)}));
  auto g11 = import(v11);
  CHECK(only_op(g11, "Dropout").outputs.size() == 2);
  CHECK(g11.tensor(g11.tensor_id_of("mask")).info == tensor_info{data_type::BOOL, shape{4}});
}

TEST_CASE("legacy BatchNormalization drops spatial and unused training outputs") {
  auto build = [](std::int64_t spatial, bool extra_outputs, bool use_mean) {
    model m(7);
    m.input("x", {1, 2, 3, 3}).output("y", {1, 2, 3, 3});
    for (const char* n : {"scale", "bias", "mean", "var"}) m.initializer(test_onnx::float_tensor(n, {2}, {1.0f, 2.0f}));
    if (extra_outputs)
      m.add(node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "m", "v", "sm", "sv"},
                 {attr("spatial", spatial), attr("epsilon", 1e-3f)}));
    else
      m.add(node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"},
                 {attr("spatial", spatial), attr("epsilon", 1e-3f)}));
    if (use_mean) m.output("m", {2});
    return m;
  };
  auto g = import(build(1, true, false));
  const auto& bn = only_op(g, "BatchNormalization");
  CHECK(bn.find_attribute("spatial") == nullptr);
  CHECK(attr_value<float>(bn, "epsilon") == 1e-3f);
  CHECK(bn.outputs.size() == 1);
  CHECK(shape_of(g, "y") == shape{1, 2, 3, 3});
  CHECK(contains(error_of(build(0, false, false)), "spatial=0"));
  CHECK(contains(error_of(build(1, true, true)), "training-mode output 'm'"));
}

TEST_CASE("Upsample becomes Resize with the asymmetric / floor semantics it had") {
  SUBCASE("opset 7: scales attribute") {
    model m(7);
    m.input("x", {1, 1, 2, 3}).output("y", {1, 1, 4, 9});
    m.add(node("Upsample", {"x"}, {"y"}, {test_onnx::attr_floats("scales", {1, 1, 2, 3})}, "up"));
    auto g = import(m);
    const auto& r = only_op(g, "Resize");
    CHECK(r.name == "up");
    REQUIRE(r.inputs.size() == 3);
    CHECK(r.inputs[1] == no_tensor);
    CHECK(constant_values<float>(g, r.inputs[2]) == std::vector<float>{1, 1, 2, 3});
    CHECK(attr_value<std::string>(r, "mode") == "nearest");
    CHECK(attr_value<std::string>(r, "coordinate_transformation_mode") == "asymmetric");
    CHECK(attr_value<std::string>(r, "nearest_mode") == "floor");
    CHECK(shape_of(g, "y") == shape{1, 1, 4, 9});
  }
  SUBCASE("opset 9: scales input") {
    model m(9);
    m.input("x", {1, 2, 2, 2}).output("y", {1, 2, 4, 4});
    m.initializer(test_onnx::float_tensor("scales", {4}, {1, 1, 2, 2}));
    m.add(node("Upsample", {"x", "scales"}, {"y"}, {attr("mode", "linear")}));
    auto g = import(m);
    const auto& r = only_op(g, "Resize");
    CHECK(g.tensor(r.inputs.at(2)).name == "scales");
    CHECK(attr_value<std::string>(r, "mode") == "linear");
    CHECK(attr_value<std::string>(r, "coordinate_transformation_mode") == "asymmetric");
    CHECK(r.find_attribute("nearest_mode") == nullptr);
    CHECK(shape_of(g, "y") == shape{1, 2, 4, 4});
  }
}

TEST_CASE("opset-10 Resize gets the opset-11 input layout and its asymmetric semantics") {
  model m(10);
  m.input("x", {1, 1, 2, 2}).output("y", {1, 1, 4, 4});
  m.initializer(test_onnx::float_tensor("scales", {4}, {1, 1, 2, 2}));
  m.add(node("Resize", {"x", "scales"}, {"y"}, {attr("mode", "nearest")}));
  auto g = import(m);
  const auto& r = only_op(g, "Resize");
  REQUIRE(r.inputs.size() == 3);
  CHECK(r.inputs[1] == no_tensor);
  CHECK(g.tensor(r.inputs[2]).name == "scales");
  CHECK(attr_value<std::string>(r, "coordinate_transformation_mode") == "asymmetric");
  CHECK(attr_value<std::string>(r, "nearest_mode") == "floor");
  CHECK(shape_of(g, "y") == shape{1, 1, 4, 4});
}

TEST_CASE("Scatter becomes ScatterElements and RoiAlign keeps its pre-16 coordinates") {
  model m(10);
  m.input("data", {3, 3}).input("idx", {1, 2}, i64);
  m.input("upd", {1, 2});
  m.input("rois", {2, 4}).input("batch", {2}, i64);
  m.input("img", {1, 1, 4, 4});
  m.output("s", {3, 3}).output("r", {2, 1, 2, 2});
  m.add(node("Scatter", {"data", "idx", "upd"}, {"s"}, {attr("axis", 1)}));
  m.add(node("RoiAlign", {"img", "rois", "batch"}, {"r"}, {attr("output_height", 2), attr("output_width", 2)}));
  auto g = import(m);
  CHECK(attr_value<std::int64_t>(only_op(g, "ScatterElements"), "axis") == 1);
  CHECK(shape_of(g, "s") == shape{3, 3});
  CHECK(attr_value<std::string>(only_op(g, "RoiAlign"), "coordinate_transformation_mode") == "output_half_pixel");
  CHECK(shape_of(g, "r") == shape{2, 1, 2, 2});
}

TEST_CASE("omitted outputs before the last used one get names and shapes") {
  model m(14);
  constexpr std::int64_t hidden = 2;
  m.input("x", {5, 1, 3}).output("c", {1, 1, 2});
  m.initializer(test_onnx::float_tensor("w", {1, 4 * hidden, 3}, std::vector<float>(4 * hidden * 3, 0.1f)));
  m.initializer(test_onnx::float_tensor("r", {1, 4 * hidden, hidden}, std::vector<float>(4 * hidden * hidden, 0.2f)));
  m.add(node("LSTM", {"x", "w", "r"}, {"", "", "c"}, {attr("hidden_size", hidden)}, "lstm"));
  auto g = import(m);
  const auto& lstm = only_op(g, "LSTM");
  REQUIRE(lstm.outputs.size() == 3);
  CHECK(g.tensor(lstm.outputs[0]).info.shape == shape{5, 1, 1, 2});
  CHECK(g.tensor(lstm.outputs[1]).info.shape == shape{1, 1, 2});
  CHECK(g.tensor(lstm.outputs[0]).name != g.tensor(lstm.outputs[1]).name);
  CHECK(shape_of(g, "c") == shape{1, 1, 2});
}

TEST_CASE("opsets 1-6 are upgraded by ONNX's version converter; a failed conversion says so") {
  model old(6);
  old.input("x", {2}).output("y", {2}).add(node("Relu", {"x"}, {"y"}));
  auto g = import(old);
  CHECK(only_op(g, "Relu").opset == 17);
  // Opset 5's Add broadcasts only with broadcast=1; the converter makes it a numpy-broadcasting Add.
  model add(5);
  add.input("a", {2, 3}).input("b", {3}).output("c", {2, 3});
  add.add(node("Add", {"a", "b"}, {"c"}, {attr("broadcast", 1)}));
  auto ga = import(add);
  CHECK(only_op(ga, "Add").attributes.empty());
  CHECK(shape_of(ga, "c") == shape{2, 3});
  // Tile-1 (input, tiles, axis) has no adapter to Tile-6.
  model tile(5);
  tile.input("x", {2}).input("t", {1}).input("ax", {1}).output("y", {4});
  tile.add(node("Tile", {"x", "t", "ax"}, {"y"}));
  const auto e = error_of(tile);
  CHECK(contains(e, "version converter could not upgrade the model from ai.onnx opset 5 to 7"));
  CHECK(contains(e, "Tile"));
  // A graph output that nothing defines passes ONNX's checker but crashed the converter (the
  // ONNX fuzzer's find): it is an error first.
  model undefined(1);
  undefined.input("x", {2}).output("nowhere", {2}).add(node("Relu", {"x"}, {"y"}));
  CHECK(contains(error_of(undefined), "has the output 'nowhere', which nothing in it defines"));
  // Gemm-6 -> 7 reads A's and B's shapes as rank 2 (the fuzzer's next find: B declared [0] crashed
  // the converter, and ONNX's Python converter too): a declared rank other than 2 is an error first.
  model gemm(6);
  gemm.input("a", {3, 6}).input("b", {0}).input("c", {3, 4}).output("y", {3, 4});
  gemm.add(node("Gemm", {"a", "b", "c"}, {"y"}, {}, "gemm"));
  CHECK(contains(error_of(gemm), "Gemm node 'gemm': input B ('b') is declared with rank 1"));
  model good_gemm(6);
  good_gemm.input("a", {3, 6}).input("b", {6, 4}).input("c", {3, 4}).output("y", {3, 4});
  good_gemm.add(node("Gemm", {"a", "b", "c"}, {"y"}, {}, "gemm"));
  CHECK(shape_of(import(good_gemm), "y") == shape{3, 4});
}

TEST_CASE("Scan-8 is refused with a clear error") {

  model scan(8);
  ::onnx::GraphProto body;
  body.set_name("body");
  *body.add_input() = test_onnx::value("s_in", f32, {2});
  *body.add_input() = test_onnx::value("x_in", f32, {2});
  *body.add_output() = test_onnx::value("s_out", f32, {2});
  *body.add_node() = node("Add", {"s_in", "x_in"}, {"s_out"});
  scan.input("s0", {1, 2}).input("xs", {1, 3, 2});
  scan.output("s", {1, 2});
  scan.add(node("Scan", {"", "s0", "xs"}, {"s"}, {attr("body", body), attr("num_scan_inputs", 1)}));
  CHECK(contains(error_of(scan), "Scan from opset 8"));
}

TEST_CASE("normalize_model rewrites the proto itself to opset 17") {
  model m(11);
  m.input("x", {2, 3}).output("y", {1, 2, 3});
  m.add(node("Unsqueeze", {"x"}, {"y"}, {attr("axes", {0})}));
  auto proto = m.proto;
  ipu::onnx::normalize_model(proto);
  CHECK(proto.opset_import(0).version() == 17);
  REQUIRE(proto.graph().node_size() == 2);
  CHECK(proto.graph().node(0).op_type() == "Constant");
  CHECK(proto.graph().node(1).op_type() == "Unsqueeze");
  CHECK(proto.graph().node(1).input_size() == 2);
  CHECK(proto.graph().node(1).attribute_size() == 0);
  // The result is valid opset-17 ONNX.
  CHECK_NOTHROW(ipu::onnx::check_model(proto, {}));
}

}  // namespace test_normalize
