#include "ipu/graph/captures.hpp"

#include <doctest/doctest.h>

#include <span>
#include <string>
#include <vector>

namespace test_captures {

namespace {

ipu::tensor_info f32(std::int64_t n) { return {ipu::data_type::F32, ipu::shape{n}}; }

// out = If(cond) { then: outer_a + outer_b (both from the enclosing graph) } else { local constant }
ipu::graph model_with_if() {
  ipu::graph g("captures");
  const auto cond = g.add_tensor("cond", {ipu::data_type::BOOL, ipu::shape{}}, ipu::tensor_kind::input);
  const auto a = g.add_tensor("outer_a", f32(2), ipu::tensor_kind::input);
  const auto b = g.add_tensor("outer_b", f32(2), ipu::tensor_kind::input);
  const auto unused = g.add_tensor("unused", f32(2), ipu::tensor_kind::input);
  (void)a;
  (void)b;
  (void)unused;

  ipu::graph then_branch("then");
  const auto ta = then_branch.add_tensor("outer_a", f32(2));  // producer-less: read from outside
  const auto tb = then_branch.add_tensor("outer_b", f32(2));
  const auto sum = then_branch.add_tensor("sum", f32(2));
  then_branch.add_op(ipu::op_node{"Add", "", 17, "add", {ta, tb}, {sum}, {}, {}});
  then_branch.mark_output(sum);

  ipu::graph else_branch("else");
  const std::vector<float> values{1, 2};
  const auto c = else_branch.add_tensor("c", f32(2), ipu::tensor_kind::constant,
                                        ipu::byte_buffer::from_values(std::span<const float>(values)));
  const auto copy = else_branch.add_tensor("copy", f32(2));
  else_branch.add_op(ipu::op_node{"Identity", "", 17, "id", {c}, {copy}, {}, {}});
  else_branch.mark_output(copy);

  const auto out = g.add_tensor("out", f32(2));
  std::vector<ipu::attribute> attrs;
  attrs.push_back({"then_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(then_branch)}});
  attrs.push_back({"else_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(else_branch)}});
  g.add_op(ipu::op_node{"If", "", 17, "if", {cond}, {out}, attrs, {}});
  g.mark_output(out);
  return g;
}

}  // namespace

TEST_CASE("an If reads from the enclosing graph exactly the tensors its branches use") {
  const auto g = model_with_if();
  const auto got = ipu::implicit_inputs(g, g.op(0));
  std::vector<std::string> names;
  for (auto t : got) names.push_back(g.tensor(t).name);
  CHECK(names == std::vector<std::string>{"outer_a", "outer_b"});  // not `unused`, not the else branch's constant
}

TEST_CASE("for_each_subgraph visits every body of an op, and none of an op without any") {
  const auto g = model_with_if();
  std::vector<std::string> seen;
  ipu::for_each_subgraph(g.op(0), [&](const ipu::graph& body) { seen.push_back(body.name()); });
  CHECK(seen == std::vector<std::string>{"then", "else"});
  const ipu::op_node plain{"Relu", "", 17, "r", {}, {}, {}, {}};
  int calls = 0;
  ipu::for_each_subgraph(plain, [&](const ipu::graph&) { ++calls; });
  CHECK(calls == 0);
}

}  // namespace test_captures
