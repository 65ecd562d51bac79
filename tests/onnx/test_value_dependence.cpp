// Structure that depends on input values: which inputs a value is computed from, the error that
// names them, and importing for given values (import_options::input_values,
// import_model_given_inputs), checked on small models against values worked out by hand.
#include "ipu/onnx/value_dependence.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/onnx/import.hpp"
#include "onnx_test_util.hpp"

namespace test_value_dependence {

using namespace ipu;
using test_onnx::attr;
using test_onnx::model;
using test_onnx::node;

namespace {

constexpr int f32 = ::onnx::TensorProto_DataType_FLOAT;
constexpr int i64 = ::onnx::TensorProto_DataType_INT64;
constexpr int boolean = ::onnx::TensorProto_DataType_BOOL;

using values_by_name = std::map<std::string, host_tensor, std::less<>>;

host_tensor i64_scalar(std::int64_t v) { return host_tensor::from<std::int64_t>(shape{}, {v}); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// The value_dependent_error importing `m` throws; fails the test when it throws none.
ipu::onnx::value_dependent_error dependence_of(const model& m, const ipu::onnx::import_options& o = {}) {
  try {
    (void)ipu::onnx::load_model_from_bytes(m.bytes(), o);
  } catch (const ipu::onnx::value_dependent_error& e) {
    return e;
  }
  FAIL("no value_dependent_error");
  return {{}, {}, error_category::internal, {}};
}

std::string import_error(const model& m, const ipu::onnx::import_options& o) {
  try {
    (void)ipu::onnx::load_model_from_bytes(m.bytes(), o);
  } catch (const error& e) {
    return e.what();
  }
  return "no error";
}

/// rows = SplitToSequence(X [3, 2]); Y = SequenceAt(rows, p) * s: the position is an input.
model row_picker() {
  model m(13);
  m.input("X", {3, 2}).input("p", {}, i64).input("s", {}, f32).output("Y", {2});
  m.add(node("SplitToSequence", {"X"}, {"rows"}, {attr("keepdims", 0)}));
  m.add(node("SequenceAt", {"rows", "p"}, {"row"}));
  m.add(node("Mul", {"row", "s"}, {"Y"}));
  return m;
}

}  // namespace

TEST_CASE("inputs_computing follows producers, and subgraphs through the node owning them") {
  model m(13);
  m.input("a", {2}).input("b", {2}).input("w", {2}).input("c", {}, boolean).output("y", {2});
  m.initializer(test_onnx::float_tensor("w", {2}, {1, 2}));  // an input with a default: a weight
  m.add(node("Add", {"a", "w"}, {"aw"}));
  m.add(node("Neg", {"b"}, {"nb"}));
  ::onnx::GraphProto then_branch, else_branch;
  then_branch.set_name("then");
  *then_branch.add_node() = node("Neg", {"nb"}, {"inside"});
  *then_branch.add_output() = test_onnx::value("inside", f32, {2});
  else_branch.set_name("else");
  *else_branch.add_node() = node("Identity", {"aw"}, {"other"});
  *else_branch.add_output() = test_onnx::value("other", f32, {2});
  m.add(node("If", {"c"}, {"y"}, {attr("then_branch", then_branch), attr("else_branch", else_branch)}));
  const auto& g = m.proto.graph();
  using names = std::vector<std::string>;
  CHECK(ipu::onnx::inputs_computing(g, "aw") == names{"a"});  // not the weight
  CHECK(ipu::onnx::inputs_computing(g, "nb") == names{"b"});
  CHECK(ipu::onnx::inputs_computing(g, "b") == names{"b"});
  CHECK(ipu::onnx::inputs_computing(g, "y") == names{"a", "b", "c"});
  // Defined inside a branch: whatever the If reads.
  CHECK(ipu::onnx::inputs_computing(g, "inside") == names{"a", "b", "c"});
  CHECK(ipu::onnx::inputs_computing(g, "nowhere").empty());
}

TEST_CASE("the importer names the inputs a sequence position or a shape is computed from") {
  SUBCASE("a sequence position") {
    const auto e = dependence_of(row_picker());
    CHECK(e.tensor() == "p");
    CHECK(e.inputs() == std::vector<std::string>{"p"});
    CHECK(contains(e.what(), "the position of node SequenceAt ('p') is computed at run time, from the value of input 'p'"));
    CHECK(contains(e.what(), "import_options::input_values"));
  }
  SUBCASE("a shape, through integer ops") {
    model m(13);
    m.input("n", {}, i64).input("k", {}, i64).output("r", {"len"}, i64);
    m.initializer(test_onnx::int64_tensor("zero", {}, {0}));
    m.initializer(test_onnx::int64_tensor("one", {}, {1}));
    m.add(node("Add", {"n", "k"}, {"limit"}));
    m.add(node("Range", {"zero", "limit", "one"}, {"r"}));
    const auto e = dependence_of(m);
    CHECK(e.category() == error_category::shape);
    CHECK(e.inputs() == std::vector<std::string>{"n", "k"});
    CHECK(contains(e.what(), "from the values of inputs 'n', 'k'"));
  }
  SUBCASE("a float input is not offered: folding does not compute floats") {
    model m(13);
    m.input("f", {}, f32).output("r", {"len"}, f32);
    m.initializer(test_onnx::float_tensor("zero", {}, {0}));
    m.initializer(test_onnx::float_tensor("one", {}, {1}));
    m.add(node("Range", {"zero", "f", "one"}, {"r"}));
    CHECK(dependence_of(m).inputs().empty());
    CHECK_FALSE(contains(import_error(m, {}), "from the value"));
  }
  SUBCASE("an input's own dynamic dimension is a shape to give, not a value") {
    model m(13);
    m.input("x", {"batch"}, i64).output("y", {"batch"}, i64);
    m.add(node("Neg", {"x"}, {"y"}));
    bool dependent = false;
    std::string what;
    try {
      (void)ipu::onnx::load_model_from_bytes(m.bytes(), {});
    } catch (const ipu::onnx::value_dependent_error&) {
      dependent = true;
    } catch (const error& e) {
      what = e.what();
    }
    CHECK_FALSE(dependent);
    CHECK(contains(what, "import_options::input_shapes"));
  }
}

TEST_CASE("input_values fixes inputs at import: they become constants and leave the graph's inputs") {
  model m(13);
  m.input("n", {}, i64).output("r", {"len"}, i64);
  m.initializer(test_onnx::int64_tensor("zero", {}, {0}));
  m.initializer(test_onnx::int64_tensor("two", {}, {2}));
  m.add(node("Range", {"zero", "n", "two"}, {"r"}));
  ipu::onnx::import_options o;
  o.input_values.emplace("n", i64_scalar(7));
  auto g = ipu::onnx::load_model_from_bytes(m.bytes(), o);
  CHECK(g.inputs().empty());
  cpu::device dev(std::move(g), {.threads = 1});
  const auto out = dev.run(std::vector<host_tensor>{});
  REQUIRE(out.size() == 1);
  const auto r = out[0].as<std::int64_t>();
  CHECK(std::vector<std::int64_t>(r.begin(), r.end()) == std::vector<std::int64_t>{0, 2, 4, 6});
}

TEST_CASE("input_values refuses what is not a tensor input of the declared type and shape") {
  auto refusal = [](const std::string& name, host_tensor v, bool with_shape = false) {
    ipu::onnx::import_options o;
    o.input_values.emplace(name, std::move(v));
    if (with_shape) o.input_shapes[name] = {};
    return import_error(row_picker(), o);
  };
  CHECK(contains(refusal("q", i64_scalar(0)), "'q' is not an input of the model"));
  CHECK(contains(refusal("q", i64_scalar(0)), "the model's inputs are 'X', 'p', 's'"));
  CHECK(contains(refusal("p", host_tensor::from<float>(shape{}, {1.0f})),
                 "the value is F32[] but the model declares the element type INT64"));
  CHECK(contains(refusal("p", host_tensor::from<std::int64_t>(shape{2}, {0, 1})), "the value is S64[2] but the model declares []"));
  CHECK(contains(refusal("p", i64_scalar(0), true), "input 'p' is given both a shape and a value"));

  model seq(13);
  ::onnx::ValueInfoProto xs;
  xs.set_name("xs");
  xs.mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(f32);
  *seq.graph().add_input() = xs;
  seq.output("n", {}, i64);
  seq.add(node("SequenceLength", {"xs"}, {"n"}));
  ipu::onnx::import_options o;
  o.input_values.emplace("xs", i64_scalar(0));
  CHECK(contains(import_error(seq, o), "input 'xs' is a sequence or an optional, not a tensor"));
}

TEST_CASE("import_model_given_inputs fixes only the inputs the structure needs") {
  const auto m = row_picker();
  values_by_name given;
  given.emplace("X", host_tensor::from<float>(shape{3, 2}, {1, 2, 3, 4, 5, 6}));
  given.emplace("p", i64_scalar(-1));
  given.emplace("s", host_tensor::from<float>(shape{}, {10}));
  std::vector<std::string> fixed;
  auto g = ipu::onnx::import_model_given_inputs(m.proto, {}, given, &fixed);
  CHECK(fixed == std::vector<std::string>{"p"});
  REQUIRE(g.inputs().size() == 2);  // X and s stay inputs
  cpu::device dev(std::move(g), {.threads = 1});
  const auto out = dev.run(cpu::named_tensors{{"X", given.at("X").view()}, {"s", given.at("s").view()}});
  REQUIRE(out.size() == 1);
  const auto y = out[0].as<float>();
  CHECK(std::vector<float>(y.begin(), y.end()) == std::vector<float>{50, 60});  // the last row, times 10

  // Without the value it needs, the importer's error stands.
  given.erase("p");
  CHECK_THROWS_WITH_AS(ipu::onnx::import_model_given_inputs(m.proto, {}, given),
                       doctest::Contains("from the value of input 'p'"), ipu::onnx::value_dependent_error);
}

TEST_CASE("a Loop and an If deciding sequences are imported for given trip counts and conditions") {
  // seq = []; for i in 0..trips-1: seq.append(x[0 : i + 1]); out = seq if c else [x]
  model m(13);
  m.input("x", {4}).input("trips", {}, i64).input("c", {}, boolean).output("out", {"n"});
  ::onnx::GraphProto body;
  body.set_name("body");
  *body.add_input() = test_onnx::value("i", i64, {});
  *body.add_input() = test_onnx::value("c_in", boolean, {});
  ::onnx::ValueInfoProto seq_in;
  seq_in.set_name("seq_in");
  seq_in.mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(f32);
  *body.add_input() = seq_in;
  *body.add_output() = test_onnx::value("c_out", boolean, {});
  auto seq_out = seq_in;
  seq_out.set_name("seq_out");
  *body.add_output() = seq_out;
  *body.add_node() = node("Identity", {"c_in"}, {"c_out"});
  *body.add_node() = node("Constant", {}, {"one"}, {attr("value", test_onnx::int64_tensor("one", {1}, {1}))});
  *body.add_node() = node("Constant", {}, {"zero"}, {attr("value", test_onnx::int64_tensor("zero", {1}, {0}))});
  *body.add_node() = node("Add", {"i", "one"}, {"end"});  // [1] after broadcasting
  *body.add_node() = node("Slice", {"x", "zero", "end"}, {"part"});
  *body.add_node() = node("SequenceInsert", {"seq_in", "part"}, {"seq_out"});
  ::onnx::GraphProto then_branch, else_branch;
  then_branch.set_name("then");
  *then_branch.add_node() = node("Identity", {"grown"}, {"then_seq"});
  *then_branch.add_output() = seq_out;
  then_branch.mutable_output(0)->set_name("then_seq");
  else_branch.set_name("else");
  *else_branch.add_node() = node("SequenceConstruct", {"x"}, {"else_seq"});
  *else_branch.add_output() = seq_out;
  else_branch.mutable_output(0)->set_name("else_seq");
  m.add(node("SequenceEmpty", {}, {"empty"}, {attr("dtype", f32)}));
  m.add(node("Loop", {"trips", "", "empty"}, {"grown"}, {attr("body", body)}));
  m.add(node("If", {"c"}, {"chosen"}, {attr("then_branch", then_branch), attr("else_branch", else_branch)}));
  m.add(node("ConcatFromSequence", {"chosen"}, {"out"}, {attr("axis", 0)}));

  const auto x = host_tensor::from<float>(shape{4}, {1, 2, 3, 4});
  auto run = [&](std::int64_t trips, bool c) {
    values_by_name given;
    given.emplace("x", x);
    given.emplace("trips", i64_scalar(trips));
    given.emplace("c", host_tensor::from<bool>(shape{}, {c}));
    std::vector<std::string> fixed;
    cpu::device dev(ipu::onnx::import_model_given_inputs(m.proto, {}, given, &fixed), {.threads = 1});
    CHECK(fixed == std::vector<std::string>{"c", "trips"});
    const auto out = dev.run(cpu::named_tensors{{"x", x.view()}});
    const auto v = out.at(0).as<float>();
    return std::vector<float>(v.begin(), v.end());
  };
  CHECK(run(3, true) == std::vector<float>{1, 1, 2, 1, 2, 3});
  CHECK(run(2, true) == std::vector<float>{1, 1, 2});
  CHECK(run(3, false) == std::vector<float>{1, 2, 3, 4});
}

}  // namespace test_value_dependence
