// Sequences and optionals lowered at import: small models built with ONNX's protobuf classes, run
// on the CPU device and checked against values worked out by hand; and the refusals of what
// depends on run-time values.
#include "ipu/onnx/sequences.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/onnx/import.hpp"
#include "onnx_run_util.hpp"
#include "onnx_test_util.hpp"

namespace test_sequences {

using namespace ipu;
using test_onnx::attr;
using test_onnx::model;
using test_onnx::node;

namespace {

constexpr int f32 = ::onnx::TensorProto_DataType_FLOAT;
constexpr int i64 = ::onnx::TensorProto_DataType_INT64;
constexpr int boolean = ::onnx::TensorProto_DataType_BOOL;

host_tensor f32s(shape s, std::vector<float> v) { return host_tensor::from<float>(std::move(s), std::span<const float>(v)); }

std::vector<float> values(const host_tensor& t) {
  auto s = t.as<float>();
  return {s.begin(), s.end()};
}

/// A sequence of `elem` tensors (shapes not declared, as exporters write them).
::onnx::ValueInfoProto sequence_value(const std::string& name, int elem) {
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  v.mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(elem);
  return v;
}

::onnx::ValueInfoProto optional_tensor(const std::string& name, int elem, std::vector<std::int64_t> dims) {
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  for (auto d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  return v;
}

std::string import_error(const model& m, const ipu::onnx::import_options& o) {
  try {
    (void)ipu::onnx::load_model_from_bytes(m.bytes(), o);
  } catch (const ipu::error& e) {
    return e.what();
  }
  return "no error";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<host_tensor> run(const model& m, const ipu::onnx::import_options& o, const std::vector<host_tensor>& inputs) {
  cpu::device dev(ipu::onnx::load_model_from_bytes(m.bytes(), o), {.threads = 1});
  return dev.run(inputs);
}

}  // namespace

TEST_CASE("SplitToSequence, SequenceErase and ConcatFromSequence become Split, Squeeze and Concat") {
  // X = [[1,2],[3,4],[5,6]] split into its rows (keepdims 0: three [2] tensors); the middle row
  // erased (position -2); the two left stacked along a new axis 1: [[1,5],[2,6]].
  model m(13);
  m.input("X", {3, 2}).output("Y", {2, 2});
  m.initializer(test_onnx::int64_tensor("pos", {}, {-2}));
  m.add(node("SplitToSequence", {"X"}, {"rows"}, {attr("axis", 0), attr("keepdims", 0)}));
  m.add(node("SequenceErase", {"rows", "pos"}, {"two"}));
  m.add(node("ConcatFromSequence", {"two"}, {"Y"}, {attr("axis", 1), attr("new_axis", 1)}));
  const auto out = test_onnx::run(m, {f32s({3, 2}, {1, 2, 3, 4, 5, 6})});
  REQUIRE(out.size() == 1);
  CHECK(out[0].info().shape == shape{2, 2});
  CHECK(values(out[0]) == std::vector<float>{1, 5, 2, 6});
  // Only tensor ops are left.
  const auto g = ipu::onnx::load_model_from_bytes(m.bytes());
  for (const auto& op : g.ops()) CHECK_FALSE(ipu::onnx::is_lowered_sequence_op(op.type));
}

TEST_CASE("a sequence input is its elements, and a sequence output one output per element") {
  // ys = SequenceInsert(xs, c, 0): c first, then xs's elements (of different shapes).
  model m(13);
  *m.graph().add_input() = sequence_value("xs", f32);
  m.input("c", {1});
  *m.graph().add_output() = sequence_value("ys", f32);
  m.initializer(test_onnx::int64_tensor("front", {}, {0}));
  m.add(node("SequenceInsert", {"xs", "c", "front"}, {"ys"}));
  ipu::onnx::import_options o;
  o.sequence_inputs["xs"] = {{2}, {3}};
  const auto g = ipu::onnx::load_model_from_bytes(m.bytes(), o);
  REQUIRE(g.inputs().size() == 3);
  CHECK(g.tensor(g.inputs()[0]).name == "xs[0]");
  CHECK(g.tensor(g.inputs()[1]).name == "xs[1]");
  CHECK(g.tensor(g.inputs()[1]).info.shape == shape{3});
  REQUIRE(g.outputs().size() == 3);
  CHECK(g.tensor(g.outputs()[0]).name == "ys[0]");
  CHECK(g.tensor(g.outputs()[2]).name == "ys[2]");
  const auto out = run(m, o, {f32s({2}, {1, 2}), f32s({3}, {3, 4, 5}), f32s({1}, {9})});
  REQUIRE(out.size() == 3);
  CHECK(values(out[0]) == std::vector<float>{9});
  CHECK(values(out[1]) == std::vector<float>{1, 2});
  CHECK(values(out[2]) == std::vector<float>{3, 4, 5});
}

TEST_CASE("a Loop carrying a sequence is unrolled when its trip count is a constant") {
  // for i in 0..2: seq.append(x * i); out = ConcatFromSequence(seq, axis 0), plus a scan output of i.
  model m(13);
  m.input("x", {2}).output("out", {6}).output("is", {3}, i64);
  m.initializer(test_onnx::int64_tensor("trips", {}, {3}));
  ::onnx::GraphProto body;
  body.set_name("body");
  *body.add_input() = test_onnx::value("i", i64, {});
  *body.add_input() = test_onnx::value("c_in", boolean, {});
  *body.add_input() = sequence_value("seq_in", f32);
  *body.add_output() = test_onnx::value("c_out", boolean, {});
  *body.add_output() = sequence_value("seq_out", f32);
  *body.add_output() = test_onnx::value("i_out", i64, {});
  *body.add_node() = node("Identity", {"c_in"}, {"c_out"});
  *body.add_node() = node("Cast", {"i"}, {"fi"}, {attr("to", f32)});
  *body.add_node() = node("Mul", {"x", "fi"}, {"scaled"});
  *body.add_node() = node("SequenceInsert", {"seq_in", "scaled"}, {"seq_out"});
  *body.add_node() = node("Identity", {"i"}, {"i_out"});
  m.add(node("SequenceEmpty", {}, {"empty"}, {attr("dtype", f32)}));
  m.add(node("Loop", {"trips", "", "empty"}, {"seq", "is"}, {attr("body", body)}));
  m.add(node("ConcatFromSequence", {"seq"}, {"out"}, {attr("axis", 0)}));
  const auto out = test_onnx::run(m, {f32s({2}, {1.5f, -2})});
  REQUIRE(out.size() == 2);
  CHECK(values(out[0]) == std::vector<float>{0, 0, 1.5f, -2, 3, -4});
  const auto is = out[1].as<std::int64_t>();
  CHECK(std::vector<std::int64_t>(is.begin(), is.end()) == std::vector<std::int64_t>{0, 1, 2});
}

TEST_CASE("SequenceMap runs its body once per element; SequenceLength is a constant") {
  // lengths = SequenceLength(SplitToSequence(X, [1, 2])) = 2; sums = SequenceMap(ReduceSum) per piece.
  model m(17);
  m.input("X", {3}).output("n", {}, i64);
  *m.graph().add_output() = sequence_value("sums", f32);
  m.initializer(test_onnx::int64_tensor("sizes", {2}, {1, 2}));
  ::onnx::GraphProto body;
  body.set_name("sum");
  *body.add_input() = test_onnx::value("piece", f32, {"k"});
  *body.add_output() = test_onnx::value("total", f32, {1});
  *body.add_node() = node("ReduceSum", {"piece"}, {"total"}, {attr("keepdims", 1)});
  m.add(node("SplitToSequence", {"X", "sizes"}, {"pieces"}));
  m.add(node("SequenceLength", {"pieces"}, {"n"}));
  m.add(node("SequenceMap", {"pieces"}, {"sums"}, {attr("body", body)}));
  const auto out = test_onnx::run(m, {f32s({3}, {1, 2, 4})});
  REQUIRE(out.size() == 3);
  CHECK(out[0].as<std::int64_t>()[0] == 2);
  CHECK(values(out[1]) == std::vector<float>{1});
  CHECK(values(out[2]) == std::vector<float>{6});
}

TEST_CASE("optional inputs: present is the tensor, absent is no input") {
  model m(15);
  *m.graph().add_input() = optional_tensor("opt", f32, {2});
  m.output("has", {}, boolean);
  m.add(node("OptionalHasElement", {"opt"}, {"has"}));
  SUBCASE("present") {
    const auto g = ipu::onnx::load_model_from_bytes(m.bytes());
    REQUIRE(g.inputs().size() == 1);
    CHECK(g.tensor(g.inputs()[0]).name == "opt");
    CHECK(*test_onnx::run(m, {f32s({2}, {1, 2})})[0].as<bool>().data());
  }
  SUBCASE("absent") {
    ipu::onnx::import_options o;
    o.absent_inputs.insert("opt");
    const auto g = ipu::onnx::load_model_from_bytes(m.bytes(), o);
    CHECK(g.inputs().empty());
    CHECK_FALSE(*run(m, o, {})[0].as<bool>().data());
  }
  SUBCASE("the value of an absent optional is an error") {
    model get(15);
    *get.graph().add_input() = optional_tensor("opt", f32, {2});
    get.output("v", {2});
    get.add(node("OptionalGetElement", {"opt"}, {"v"}));
    ipu::onnx::import_options o;
    o.absent_inputs.insert("opt");
    CHECK(contains(import_error(get, o), "empty optional"));
    CHECK(values(test_onnx::run(get, {f32s({2}, {3, 4})})[0]) == std::vector<float>{3, 4});
  }
}

TEST_CASE("what depends on run-time values, and bad bindings, are refused with the reason") {
  SUBCASE("a position from a graph input") {
    model m(13);
    m.input("X", {2, 2}).input("p", {}, i64).output("row", {2});
    m.add(node("SplitToSequence", {"X"}, {"rows"}, {attr("keepdims", 0)}));
    m.add(node("SequenceAt", {"rows", "p"}, {"row"}));
    const auto e = import_error(m, {});
    CHECK(contains(e, "the position of node SequenceAt"));
    CHECK(contains(e, "computed at run time"));
  }
  SUBCASE("a position out of range") {
    model m(13);
    m.input("X", {2, 2}).output("row", {2});
    m.initializer(test_onnx::int64_tensor("p", {}, {2}));
    m.add(node("SplitToSequence", {"X"}, {"rows"}, {attr("keepdims", 0)}));
    m.add(node("SequenceAt", {"rows", "p"}, {"row"}));
    CHECK(contains(import_error(m, {}), "position 2 is outside [-2, 1] for a sequence of 2 elements"));
  }
  SUBCASE("a sequence input without its element shapes, or with the wrong rank") {
    model m(13);
    *m.graph().add_input() = sequence_value("xs", f32);
    m.output("n", {}, i64);
    m.add(node("SequenceLength", {"xs"}, {"n"}));
    CHECK(contains(import_error(m, {}), "import_options::sequence_inputs"));
    ipu::onnx::import_options o;
    o.sequence_inputs["xs"] = {{2}, {1, 2}};
    CHECK(ipu::onnx::load_model_from_bytes(m.bytes(), o).inputs().size() == 2);
    // With declared element shapes, the given ones are checked against them.
    model ranked(13);
    ::onnx::ValueInfoProto xs = sequence_value("xs", f32);
    xs.mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
    *ranked.graph().add_input() = xs;
    ranked.output("n", {}, i64);
    ranked.add(node("SequenceLength", {"xs"}, {"n"}));
    CHECK(contains(import_error(ranked, o), "element 1"));
    CHECK(contains(import_error(ranked, o), "has rank 2 but the model declares rank 1"));
  }
  SUBCASE("options naming inputs that are no sequence or optional") {
    model m(13);
    m.input("X", {2}).output("Y", {2});
    m.add(node("Identity", {"X"}, {"Y"}));
    ipu::onnx::import_options o;
    o.sequence_inputs["X"] = {{2}};
    CHECK(contains(import_error(m, o), "sequence_inputs names 'X', which is not a sequence input of the model"));
    ipu::onnx::import_options a;
    a.absent_inputs.insert("nope");
    CHECK(contains(import_error(m, a), "absent_inputs names 'nope', which is not an optional input"));
  }
  SUBCASE("a Loop carrying a sequence with a run-time trip count") {
    model m(13);
    m.input("x", {2}).input("trips", {}, i64).output("n", {}, i64);
    ::onnx::GraphProto body;
    body.set_name("body");
    *body.add_input() = test_onnx::value("i", i64, {});
    *body.add_input() = test_onnx::value("c_in", boolean, {});
    *body.add_input() = sequence_value("seq_in", f32);
    *body.add_output() = test_onnx::value("c_out", boolean, {});
    *body.add_output() = sequence_value("seq_out", f32);
    *body.add_node() = node("Identity", {"c_in"}, {"c_out"});
    *body.add_node() = node("SequenceInsert", {"seq_in", "x"}, {"seq_out"});
    m.add(node("SequenceEmpty", {}, {"empty"}, {attr("dtype", f32)}));
    m.add(node("Loop", {"trips", "", "empty"}, {"seq"}, {attr("body", body)}));
    m.add(node("SequenceLength", {"seq"}, {"n"}));
    CHECK(contains(import_error(m, {}), "the trip count of node Loop ('trips') is computed at run time"));
  }
}

}  // namespace test_sequences
