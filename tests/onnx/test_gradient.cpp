// ONNX's Gradient op (ai.onnx.preview.training) expanded at import into ordinary ops by autodiff,
// run on the CPU device against hand-derived derivatives; the forms it cannot expand are refused.
// Also: models importing only the training domain (ONNX's optimizer tests) import and run.
#include "ipu/onnx/gradient.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ipu/onnx/import.hpp"
#include "onnx_run_util.hpp"

namespace test_gradient {

using namespace ipu;
using test_onnx::import_error;
using test_onnx::model;
using test_onnx::node;
using test_onnx::run;

namespace {

constexpr const char* training = "ai.onnx.preview.training";

::onnx::AttributeProto strings(const std::string& name, std::vector<std::string> v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_STRINGS);
  for (const auto& s : v) a.add_strings(s);
  return a;
}

::onnx::NodeProto gradient(std::initializer_list<std::string> inputs, std::initializer_list<std::string> outputs,
                           std::vector<std::string> xs, const char* y, std::vector<std::string> zs = {}) {
  auto n = node("Gradient", inputs, outputs, {strings("xs", std::move(xs)), test_onnx::attr("y", y)}, "grad", training);
  if (!zs.empty()) *n.add_attribute() = strings("zs", std::move(zs));
  return n;
}

host_tensor f32(shape s, std::vector<float> v) { return host_tensor::from<float>(std::move(s), std::span<const float>(v)); }

std::vector<float> values(const host_tensor& t) {
  auto s = t.as<float>();
  return {s.begin(), s.end()};
}


}  // namespace

TEST_CASE("Gradient of a tensor y is the gradient of the sum of y, per x") {
  // d = (a + b) * a element-wise: dd/da = 2a + b, dd/db = a (y's gradient is all ones).
  model m(12);
  m.import_domain(training, 1);
  m.input("a", {3}).input("b", {3}).output("d", {3}).output("da", {3}).output("db", {3});
  m.add(node("Add", {"a", "b"}, {"c"}));
  m.add(node("Mul", {"c", "a"}, {"d"}));
  m.add(gradient({"a", "b"}, {"da", "db"}, {"a", "b"}, "d"));
  auto out = run(m, {f32({3}, {1, -2, 0.5f}), f32({3}, {2, 3, -1})});
  CHECK(values(out[0]) == std::vector<float>{3, -2, -0.25f});
  CHECK(values(out[1]) == std::vector<float>{4, -1, 0});
  CHECK(values(out[2]) == std::vector<float>{1, -2, 0.5f});
  // No Gradient op is left for a kernel; the outputs keep their names.
  auto g = ipu::onnx::load_model_from_bytes(m.bytes());
  for (std::size_t i = 0; i < g.num_ops(); ++i) CHECK(g.op(i).type != "Gradient");
  CHECK(g.tensor(g.outputs()[1]).name == "da");
}

TEST_CASE("Gradient through MatMul, with zs and an x the result does not depend on") {
  // y = x @ w ([2,3] @ [3,2]); d sum(y) / dw[k][j] = sum_i x[i][k]; u is unused: its gradient is 0.
  model m(13);
  m.import_domain(training, 1);
  m.input("x", {2, 3}).input("w", {3, 2}).input("u", {2}).output("dw", {3, 2}).output("du", {2});
  m.add(node("MatMul", {"x", "w"}, {"y"}));
  m.add(gradient({"w", "u", "x"}, {"dw", "du"}, {"w", "u"}, "y", {"x"}));
  auto out = run(m, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {1, 1, 1, 1, 1, 1}), f32({2}, {7, 8})});
  CHECK(values(out[0]) == std::vector<float>{5, 5, 7, 7, 9, 9});
  CHECK(values(out[1]) == std::vector<float>{0, 0});
}

TEST_CASE("Gradient forms that cannot be expanded are refused with the reason") {
  auto base = [] {
    model m(13);
    m.import_domain(training, 1);
    m.input("a", {}).input("b", {}).output("d", {}).output("da", {});
    m.add(node("Add", {"a", "b"}, {"c"}));
    m.add(node("Mul", {"c", "a"}, {"d"}));
    return m;
  };
  {  // evaluated at another value than the graph's own a
    auto m = base();
    m.add(gradient({"b"}, {"da"}, {"a"}, "d"));
    CHECK(import_error(m).find("values other than the graph's own") != std::string::npos);
  }
  {  // c is computed from a: the xs are not independent
    auto m = base();
    m.output("dc", {});
    m.add(gradient({"a", "c"}, {"da", "dc"}, {"a", "c"}, "d"));
    CHECK(import_error(m).find("not independent") != std::string::npos);
  }
  {  // y computed after the Gradient node
    model m(13);
    m.import_domain(training, 1);
    m.input("a", {}).output("da", {}).output("d", {});
    m.add(gradient({"a"}, {"da"}, {"a"}, "d"));
    m.add(node("Neg", {"a"}, {"d"}));
    CHECK(import_error(m).find("not computed before the Gradient node") != std::string::npos);
  }
}

TEST_CASE("add_onnx_gradient: y itself among the xs, and a scalar y needs no sum") {
  graph g("g");
  const auto a = g.add_tensor("a", {data_type::F32, shape{}}, tensor_kind::input);
  const std::vector<tensor_id> xs = {a};
  const auto before = g.num_ops();
  const auto grads = ipu::onnx::add_onnx_gradient(g, a, xs, "test");
  REQUIRE(grads.size() == 1);
  CHECK(g.num_ops() == before);  // d a / d a is the seed, a constant 1
  CHECK(g.tensor(grads[0]).data.load<float>(0) == 1.0f);
}

TEST_CASE("a model importing only the training domain imports and runs (ONNX's optimizer tests)") {
  ::onnx::ModelProto p;
  p.set_ir_version(7);
  auto* o = p.add_opset_import();
  o->set_domain(training);
  o->set_version(1);
  auto& gp = *p.mutable_graph();
  gp.set_name("momentum");
  constexpr int f = ::onnx::TensorProto_DataType_FLOAT, i64 = ::onnx::TensorProto_DataType_INT64;
  *gp.add_input() = test_onnx::value("R", f, {});
  *gp.add_input() = test_onnx::value("T", i64, {});
  for (const char* n : {"X", "G", "V"}) *gp.add_input() = test_onnx::value(n, f, {2});
  for (const char* n : {"X_new", "V_new"}) *gp.add_output() = test_onnx::value(n, f, {2});
  *gp.add_node() = node("Momentum", {"R", "T", "X", "G", "V"}, {"X_new", "V_new"},
                        {test_onnx::attr("alpha", 0.5f), test_onnx::attr("beta", 0.25f),
                         test_onnx::attr("norm_coefficient", 0.0f), test_onnx::attr("mode", "standard")},
                        "m", training);
  cpu::device dev(ipu::onnx::load_model_from_bytes(p.SerializeAsString()), {.threads = 1});
  const std::int64_t t = 1;
  const auto out = dev.run(std::vector<host_tensor>{f32({}, {0.5f}), host_tensor::from<std::int64_t>(shape{}, std::span(&t, 1)),
                                                    f32({2}, {1, 2}), f32({2}, {2, 4}), f32({2}, {4, -4})});
  // V = 0.5 V + 0.25 G; X = X - 0.5 V.
  CHECK(values(out[0]) == std::vector<float>{-0.25f, 2.5f});
  CHECK(values(out[1]) == std::vector<float>{2.5f, -1});
}

}  // namespace test_gradient
