// Ops the library lacks are reported all at once, before any import work.
#include "ipu/onnx/unsupported.hpp"

#include <doctest/doctest.h>

#include <string>

#include "ipu/onnx/import.hpp"
#include "onnx_test_util.hpp"

namespace test_unsupported {

using namespace ipu;
using test_onnx::attr;
using test_onnx::model;
using test_onnx::node;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Relu, two Frobnicate nodes, a Gizmo and an unnamed Frobnicate inside an If branch.
model offenders() {
  model m(13);
  m.import_domain("com.example", 2);
  m.input("x", {2}).input("c", {}, ::onnx::TensorProto_DataType_BOOL).output("y", {2});
  m.add(node("Relu", {"x"}, {"r"}, {}, "relu"));
  m.add(node("Frobnicate", {"r"}, {"f1"}, {}, "frob_a", "com.example"));
  m.add(node("Frobnicate", {"f1"}, {"f2"}, {}, "frob_b", "com.example"));
  m.add(node("Gizmo", {"f2"}, {"g"}, {}, "", "com.example"));
  ::onnx::GraphProto branch;
  branch.set_name("inner");
  *branch.add_output() = test_onnx::value("b", ::onnx::TensorProto_DataType_FLOAT, {2});
  *branch.add_node() = node("Frobnicate", {"g"}, {"b"}, {}, "", "com.example");
  m.add(node("If", {"c"}, {"y"}, {attr("then_branch", branch), attr("else_branch", branch)}, "if"));
  return m;
}

}  // namespace

TEST_CASE("every unsupported node is found, subgraphs included") {
  op_registry r;
  r.add({"", "Relu", nullptr});
  r.add({"", "If", nullptr});
  const auto ops = ipu::onnx::find_unsupported_ops(offenders().proto, r);
  REQUIRE(ops.size() == 5);
  CHECK(ops[0] == ipu::onnx::unsupported_op{"com.example", "Frobnicate", "frob_a", "g", 2});
  CHECK(ops[1].node == "frob_b");
  CHECK(ops[2] == ipu::onnx::unsupported_op{"com.example", "Gizmo", "#3", "g", 2});
  CHECK(ops[3] == ipu::onnx::unsupported_op{"com.example", "Frobnicate", "#0", "inner", 2});

  const auto text = ipu::onnx::describe_unsupported(ops, "g");
  CHECK(text ==
        "5 nodes use 2 ops the library does not implement: Frobnicate (domain com.example, opset 2, nodes 'frob_a', "
        "'frob_b', '#0' in 'inner', '#0' in 'inner'); Gizmo (domain com.example, opset 2, node '#3')");
}

TEST_CASE("import refuses a model with unsupported ops, listing all of them, before any other check") {
  op_registry r;
  r.add({"", "Relu", nullptr});
  ipu::onnx::import_options o;
  o.registry = &r;
  auto m = offenders();
  m.graph().mutable_node(0)->add_input("not-defined-anywhere");  // would fail the checker later
  try {
    (void)ipu::onnx::load_model_from_bytes(m.bytes(), o);
    FAIL("expected an error");
  } catch (const error& e) {
    CHECK(e.category() == error_category::onnx);
    const std::string what = e.what();
    CHECK(contains(what, "Frobnicate (domain com.example, opset 2, nodes 'frob_a', 'frob_b'"));
    CHECK(contains(what, "Gizmo"));
    CHECK(contains(what, "If (domain ai.onnx, opset 13, node 'if')"));
    CHECK_FALSE(contains(what, "Relu"));
    CHECK(contains(what, "check_supported"));
    CHECK(what.find('\n') == std::string::npos);
  }
}

TEST_CASE("the check uses the default registry unless told otherwise, and can be switched off") {
  model m(13);
  m.import_domain("com.example", 1);
  m.input("x", {2}).output("y", {2});
  m.add(node("Frobnicate", {"x"}, {"y"}, {}, "frob", "com.example"));
  CHECK_THROWS_WITH_AS((void)ipu::onnx::load_model_from_bytes(m.bytes()),
                       doctest::Contains("Frobnicate (domain com.example, opset 1, node 'frob')"), error);
  ipu::onnx::import_options o;
  o.check_supported = false;
  auto g = ipu::onnx::load_model_from_bytes(m.bytes(), o);  // y's type comes from the graph output
  CHECK(g.op(0).type == "Frobnicate");
}

TEST_CASE("deprecated ops are checked under the name the importer gives them") {
  CHECK(ipu::onnx::canonical_op_type("", "Upsample") == "Resize");
  CHECK(ipu::onnx::canonical_op_type("ai.onnx", "Scatter") == "ScatterElements");
  CHECK(ipu::onnx::canonical_op_type("", "Constant").empty());
  CHECK(ipu::onnx::canonical_op_type("com.example", "Upsample") == "Upsample");
  model m(9);
  m.input("x", {1, 1, 2, 2}).output("y", {1, 1, 4, 4});
  m.initializer(test_onnx::float_tensor("s", {4}, {1, 1, 2, 2}));
  m.add(node("Upsample", {"x", "s"}, {"y"}));
  op_registry r;
  CHECK(ipu::onnx::find_unsupported_ops(m.proto, r).at(0).type == "Upsample");
  r.add({"", "Resize", nullptr});
  CHECK(ipu::onnx::find_unsupported_ops(m.proto, r).empty());
}

}  // namespace test_unsupported
