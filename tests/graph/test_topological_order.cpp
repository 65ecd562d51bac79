#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "ipu/graph/topological_order.hpp"

namespace test_topological_order {

namespace {

using ipu::data_type;
using ipu::tensor_kind;
const ipu::tensor_info f1{data_type::F32, {1}};

/// Every op comes after the producers of all its inputs, and each op appears once.
bool is_topological(const ipu::graph& g, const std::vector<ipu::op_id>& order) {
  if (order.size() != g.num_ops()) return false;
  std::vector<std::size_t> position(g.num_ops(), g.num_ops());
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (position[order[i]] != g.num_ops()) return false;
    position[order[i]] = i;
  }
  for (ipu::op_id o = 0; o < g.num_ops(); ++o)
    for (auto t : g.op(o).inputs)
      if (t != ipu::no_tensor && g.tensor(t).producer != ipu::no_op && position[g.tensor(t).producer] >= position[o])
        return false;
  return true;
}

ipu::op_node op(const char* type, std::vector<ipu::tensor_id> in, std::vector<ipu::tensor_id> out) {
  return ipu::op_node{type, "", 13, "", std::move(in), std::move(out), {}, {}};
}

}  // namespace

TEST_CASE("ops added out of dependency order are sorted - ties keep insertion order") {
  // Ops are added consumer-first: d = c(b(a(x))) added as c, b, a; plus an independent e.
  ipu::graph g("rev");
  auto x = g.add_tensor("x", f1, tensor_kind::input);
  auto ta = g.add_tensor("ta", f1), tb = g.add_tensor("tb", f1), tc = g.add_tensor("tc", f1);
  auto te = g.add_tensor("te", f1);
  g.add_op(op("C", {tb}, {tc}));  // 0
  g.add_op(op("B", {ta}, {tb}));  // 1
  g.add_op(op("E", {x}, {te}));   // 2
  g.add_op(op("A", {x}, {ta}));   // 3
  const auto order = ipu::topological_order(g);
  CHECK(order == std::vector<ipu::op_id>{2, 3, 1, 0});
}

TEST_CASE("an op reading the same tensor twice, and omitted optional inputs") {
  ipu::graph g("dup");
  auto x = g.add_tensor("x", f1, tensor_kind::input);
  auto t = g.add_tensor("t", f1), u = g.add_tensor("u", f1), v = g.add_tensor("v", f1);
  g.add_op(op("Mul", {t, t}, {u}));               // 0: square of t
  g.add_op(op("Relu", {x}, {t}));                 // 1
  g.add_op(op("Clip", {u, ipu::no_tensor, t}, {v}));  // 2
  const auto order = ipu::topological_order(g);
  CHECK(order == std::vector<ipu::op_id>{1, 0, 2});
}

TEST_CASE("random DAGs added in shuffled order come out topological") {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 20; ++trial) {
    // Op i reads 1-3 tensors from graph inputs or outputs of ops j < i (in a hidden order),
    // then the ops are inserted in a random permutation of that order.
    const std::size_t n = 5 + rng() % 40;
    std::vector<std::size_t> perm(n);
    for (std::size_t i = 0; i < n; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    ipu::graph g("random");
    std::vector<ipu::tensor_id> outs;
    auto in = g.add_tensor("in", f1, tensor_kind::input);
    for (std::size_t i = 0; i < n; ++i) outs.push_back(g.add_tensor("t" + std::to_string(i), f1));
    std::vector<std::vector<ipu::tensor_id>> inputs(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto k = 1 + rng() % 3;
      for (std::size_t j = 0; j < k; ++j) inputs[i].push_back(i == 0 || rng() % 4 == 0 ? in : outs[rng() % i]);
    }
    for (auto i : perm) g.add_op(op("Sum", inputs[i], {outs[i]}));
    CAPTURE(trial);
    CHECK(is_topological(g, ipu::topological_order(g)));
  }
}

TEST_CASE("a cycle is reported, naming an op on it") {
  ipu::graph g("cyc");
  auto a = g.add_tensor("a", f1), b = g.add_tensor("b", f1);
  g.add_op(ipu::op_node{"Neg", "", 13, "n1", {b}, {a}, {}, {}});
  g.add_op(ipu::op_node{"Neg", "", 13, "n2", {a}, {b}, {}, {}});
  CHECK_THROWS_WITH_AS((void)ipu::topological_order(g), doctest::Contains("cycle through op Neg 'n1'"), ipu::error);
}

TEST_CASE("topological order is computed in constant expressions") {
  static_assert([] {
    ipu::graph g("c");
    auto x = g.add_tensor("x", {data_type::F32, {1}}, tensor_kind::input);
    auto t = g.add_tensor("t", {data_type::F32, {1}});
    auto u = g.add_tensor("u", {data_type::F32, {1}});
    g.add_op(ipu::op_node{"Relu", "", 13, "", {t}, {u}, {}, {}});
    g.add_op(ipu::op_node{"Relu", "", 13, "", {x}, {t}, {}, {}});
    const auto order = ipu::topological_order(g);
    return order.size() == 2 && order[0] == 1 && order[1] == 0;
  }());
}

}  // namespace test_topological_order
