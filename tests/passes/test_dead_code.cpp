// Dead-code elimination: what no graph output needs goes, what acts beyond its outputs stays.
#include "ipu/passes/dead_code.hpp"

#include <doctest/doctest.h>

#include <string_view>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/graph/validate.hpp"

namespace test_dead_code {

namespace {

using ipu::data_type;

/// x -> Relu -> y (the output); x -> Sigmoid -> Tanh, read by nothing; optionally a PrintTensor
/// of x that nothing reads.
constexpr ipu::graph with_dead_branch(bool print = false) {
  ipu::builder b("dce", 17);
  const auto x = b.add_input_tensor({data_type::F32, {4}}, "x");
  const auto unused_weight = b.add_initialized_input(ipu::make_constant<float>({4}, {1, 2, 3, 4}), "w");
  b.add_output(b.relu(x, "keep"));
  (void)b.op("Tanh", {b.op("Sigmoid", {b.op("Add", {x, unused_weight})[0]})[0]});
  if (print) (void)b.print_tensor(x, "x");
  return std::move(b).build();
}

std::vector<float> values(const ipu::host_tensor& t) {
  const auto v = t.as<float>();
  return {v.begin(), v.end()};
}

constexpr std::size_t count(const ipu::graph& g, std::string_view type) {
  std::size_t n = 0;
  for (const auto& op : g.ops()) n += op.type == type ? 1 : 0;
  return n;
}

}  // namespace

static_assert(
    [] {
      const auto g = with_dead_branch();  // a named graph: GCC 12 cannot read a temporary's short name here
      return ipu::passes::eliminate_dead_code(g).num_ops() == 1;
    }(),
    "ipu: dead-code elimination runs in a constant expression");

TEST_CASE("ops no output depends on are dropped, with the weights only they read") {
  const auto before = with_dead_branch();
  const auto after = ipu::passes::eliminate_dead_code(before);
  CHECK_NOTHROW(ipu::validate(after));
  REQUIRE(after.num_ops() == 1);
  CHECK(after.op(0).type == "Relu");
  CHECK_FALSE(after.find_tensor("w"));  // a weight only the dead branch read
  CHECK(after.num_tensors() == 2);
  const auto x = ipu::host_tensor::from<float>({4}, {-1, 2, -3, 4});
  CHECK(values(ipu::cpu::device(after).run({x})[0]) == values(ipu::cpu::device(before).run({x})[0]));
}

TEST_CASE("a graph with nothing dead comes back unchanged; a PrintTensor nothing reads is kept") {
  const auto live = ipu::passes::eliminate_dead_code(with_dead_branch());
  CHECK(ipu::passes::eliminate_dead_code(live) == live);
  const auto printed = ipu::passes::eliminate_dead_code(with_dead_branch(true));
  CHECK(count(printed, "PrintTensor") == 1);
  CHECK(count(printed, "Sigmoid") == 0);
  CHECK(printed.num_ops() == 2);
}

}  // namespace test_dead_code
