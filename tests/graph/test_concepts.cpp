#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <type_traits>

#include "ipu/builder/builder.hpp"
#include "ipu/graph/concepts.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/graph/validate.hpp"

namespace test_concepts {

namespace user {

/// A user's model description: a list of dense layer widths, each layer on the next IPU.
template <std::size_t N>
struct layer_list {
  using graph_concept = ipu::graph_tag;  // opt in
  std::int64_t batch;
  std::array<std::int64_t, N + 1> widths;

  constexpr ipu::graph to_ipu_graph() const {
    ipu::builder b("layer_list");
    auto x = b.add_input_tensor({ipu::data_type::F32, {batch, widths[0]}}, "x");
    for (std::size_t i = 0; i < N; ++i) {
      auto s = b.scope().ipu(static_cast<std::int64_t>(i));
      const auto in = widths[i], out = widths[i + 1];
      auto w = b.add_initialized_input(
          ipu::make_constant<float>({in, out}, std::vector<float>(static_cast<std::size_t>(in * out), 1.0f)));
      x = b.relu(b.matmul(x, w));
    }
    b.add_output(x);
    return std::move(b).build();
  }
};

/// A type that holds an ipu::graph and lends it out (no copy), via a free function found by ADL
/// and opted in by specialising the trait (it has no member alias).
struct wrapped {
  ipu::graph g;
};
inline const ipu::graph& to_ipu_graph(const wrapped& w) { return w.g; }

/// Looks like a graph but never opted in.
struct impostor {
  ipu::graph to_ipu_graph() const { return {}; }
};

/// Opted in, but gives no way to become a graph.
struct unconvertible {
  using graph_concept = ipu::graph_tag;
};

}  // namespace user

}  // namespace test_concepts

// An explicit specialization belongs to a namespace that encloses the template's.
template <>
inline constexpr bool ipu::enable_dataflow_graph<test_concepts::user::wrapped> = true;

namespace test_concepts {

static_assert(ipu::dataflow_graph<ipu::graph>);
static_assert(ipu::dataflow_graph<const ipu::graph&>);
static_assert(ipu::dataflow_graph<user::layer_list<3>>);
static_assert(ipu::dataflow_graph<user::wrapped>);
static_assert(!ipu::dataflow_graph<user::impostor>, "a type must opt in explicitly");
static_assert(!ipu::dataflow_graph<user::unconvertible>, "an opted-in type must say how to become a graph");
static_assert(!ipu::dataflow_graph<int>);

// as_graph views ours and the lending type without copying, and converts the others by value.
static_assert(std::is_same_v<decltype(ipu::as_graph(std::declval<const ipu::graph&>())), const ipu::graph&>);
static_assert(std::is_same_v<decltype(ipu::as_graph(std::declval<const user::wrapped&>())), const ipu::graph&>);
static_assert(std::is_same_v<decltype(ipu::as_graph(std::declval<const user::layer_list<2>&>())), ipu::graph>);

namespace {

/// A library-style function taking any dataflow graph.
constexpr std::size_t count_matmuls(const ipu::dataflow_graph auto& g) {
  auto&& ir = ipu::as_graph(g);
  std::size_t n = 0;
  for (const auto& op : ir.ops()) n += op.type == "MatMul";
  return n;
}

}  // namespace

// The user's graph plugs in inside constant expressions: converted, validated, queried.
static_assert(count_matmuls(user::layer_list<3>{2, {8, 16, 16, 4}}) == 3);
static_assert([] {
  constexpr user::layer_list<2> model{4, {3, 5, 2}};
  ipu::validate(model);  // the overload for dataflow graphs
  const auto g = ipu::as_graph(model);
  return g.num_ops() == 4 && g.tensor(g.outputs()[0]).info.shape == ipu::shape{4, 2} &&
         ipu::topological_order(model).size() == 4 && g.ops()[3].where.ipu == 1;
}());

TEST_CASE("a user graph type works wherever a dataflow graph is taken") {
  const user::layer_list<4> model{1, {2, 4, 8, 4, 2}};
  CHECK(count_matmuls(model) == 4);
  CHECK_NOTHROW(ipu::validate(model));
  const auto g = ipu::as_graph(model);
  CHECK(g.num_ops() == 8);
  CHECK(g.ops().back().where.ipu == 3);

  user::wrapped w{g};
  CHECK(&ipu::as_graph(w) == &w.g);  // viewed, not copied
  CHECK(count_matmuls(w) == 4);
  CHECK(ipu::topological_order(w) == ipu::topological_order(g));
}

TEST_CASE("validation errors come through the user type's graph") {
  user::wrapped w{ipu::graph("broken")};
  auto t = w.g.add_tensor("t", {ipu::data_type::F32, {1}});
  w.g.mark_output(t);
  CHECK_THROWS_WITH_AS(ipu::validate(w), doctest::Contains("graph output 't' is never produced"), ipu::error);
}

}  // namespace test_concepts
