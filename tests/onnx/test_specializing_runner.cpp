// A model whose structure depends on input values, run again and again: one import per distinct
// values of the inputs it fixes, the plans kept up to a bound, outputs worked out by hand.
#include "ipu/onnx/specializing_runner.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "onnx_test_util.hpp"

namespace test_specializing_runner {

using namespace ipu;
using test_onnx::attr;
using test_onnx::model;
using test_onnx::node;

namespace {

/// rows = SplitToSequence(X [3, 2]); Y = SequenceAt(rows, p) + X[0]: the position is an input.
model row_picker() {
  model m(13);
  m.input("X", {3, 2}).input("p", {}, ::onnx::TensorProto_DataType_INT64).output("Y", {2});
  m.add(node("SplitToSequence", {"X"}, {"rows"}, {attr("keepdims", 0)}));
  m.add(node("SequenceAt", {"rows", "p"}, {"row"}));
  m.add(node("Constant", {}, {"zero"}, {attr("value", test_onnx::int64_tensor("", {}, {0}))}));
  m.add(node("Gather", {"X", "zero"}, {"first"}, {attr("axis", 0)}));
  m.add(node("Add", {"row", "first"}, {"Y"}));
  return m;
}

ipu::onnx::specializing_runner::named_values inputs(std::vector<float> x, std::int64_t p) {
  ipu::onnx::specializing_runner::named_values v;
  v.emplace("X", host_tensor::from<float>(shape{3, 2}, std::span<const float>(x)));
  v.emplace("p", host_tensor::from<std::int64_t>(shape{}, {p}));
  return v;
}

std::vector<float> values(const std::vector<host_tensor>& out) {
  REQUIRE(out.size() == 1);
  const auto s = out[0].as<float>();
  return {s.begin(), s.end()};
}

}  // namespace

TEST_CASE("a plan per distinct value of the fixed inputs, reused while the values repeat") {
  ipu::onnx::specializing_runner runner(row_picker().proto, {}, {.threads = 1}, 2);
  const std::vector<float> x{1, 2, 3, 4, 5, 6};
  CHECK(values(runner.run(inputs(x, 1))) == std::vector<float>{4, 6});
  CHECK(runner.imports() == 1);
  // Other data, the same position: the same plan.
  CHECK(values(runner.run(inputs({0, 0, 10, 20, 0, 0}, 1))) == std::vector<float>{10, 20});
  CHECK(runner.imports() == 1);
  CHECK(values(runner.run(inputs(x, 2))) == std::vector<float>{6, 8});
  CHECK(values(runner.run(inputs(x, -3))) == std::vector<float>{2, 4});  // p = 1 is dropped: at most 2 plans
  CHECK(runner.imports() == 3);
  CHECK(runner.plans() == 2);
  CHECK(values(runner.run(inputs(x, 2))) == std::vector<float>{6, 8});  // still kept
  CHECK(runner.imports() == 3);
  CHECK(values(runner.run(inputs(x, 1))) == std::vector<float>{4, 6});  // made again
  CHECK(runner.imports() == 4);
}

TEST_CASE("a model depending on no value is imported once; bad runs and options are refused") {
  model m(13);
  m.input("a", {2}).output("b", {2});
  m.add(node("Neg", {"a"}, {"b"}));
  ipu::onnx::specializing_runner runner(m.proto, {}, {.threads = 1});
  ipu::onnx::specializing_runner::named_values in;
  in.emplace("a", host_tensor::from<float>(shape{2}, {1, -2}));
  CHECK(values(runner.run(in)) == std::vector<float>{-1, 2});
  in.at("a") = host_tensor::from<float>(shape{2}, {3, 4});
  CHECK(values(runner.run(in)) == std::vector<float>{-3, -4});
  CHECK(runner.imports() == 1);

  ipu::onnx::specializing_runner picker(row_picker().proto, {}, {.threads = 1});
  auto no_position = inputs({1, 2, 3, 4, 5, 6}, 0);
  no_position.erase("p");
  CHECK_THROWS_WITH_AS(picker.run(no_position), doctest::Contains("from the value of input 'p'"),
                       ipu::onnx::value_dependent_error);
  CHECK_THROWS_WITH_AS(picker.run(inputs({1, 2, 3, 4, 5, 6}, 3)), doctest::Contains("position 3 is outside [-3, 2]"),
                       ipu::error);
  CHECK(picker.plans() == 0);
  CHECK_THROWS_WITH_AS(ipu::onnx::specializing_runner(m.proto, {}, {}, 0), doctest::Contains("max_plans is 0"), ipu::error);
}

}  // namespace test_specializing_runner
