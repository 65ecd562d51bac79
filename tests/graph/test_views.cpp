#include <doctest/doctest.h>

#include <string>
#include <type_traits>
#include <vector>

#include <range/v3/range/conversion.hpp>
#include <range/v3/view/transform.hpp>

#include "ipu/builder/builder.hpp"
#include "ipu/graph/views.hpp"

namespace test_views {

namespace {

using ipu::data_type;
namespace v = ipu::views;

template <class R>
auto collect(R&& r) {
  return ranges::to<std::vector>(std::forward<R>(r));
}

/// Two phases x two IPUs: ops "p<phase>i<ipu>_<k>"; the second half re-reads the input.
ipu::graph annotated() {
  ipu::builder b("views");
  auto x = b.add_input_tensor({data_type::F32, {4, 4}}, "x");
  auto w = b.add_initialized_input(ipu::make_constant<float>({4, 4}, std::vector<float>(16, 1.0f)), "w");
  auto w2 = b.add_initialized_input(ipu::make_constant<float>({4, 4}, std::vector<float>(16, 2.0f)), "w2");
  ipu::tensor_id h, s;
  {
    auto sc = b.scope().phase(0).ipu(0).stage(0).block("enc");
    h = b.matmul(x, w, "mm0");             // op 0
    h = b.relu(h, "relu0");                // op 1 (and a constant for the reshape below)
  }
  {
    auto sc = b.scope().phase(0).ipu(1).stage(1).block("enc");
    s = b.add(h, h, "double");             // op 2: reads relu0 twice
    s = b.reshape(s, {16}, "flat");        // op 3
  }
  ipu::tensor_id m;
  {
    auto sc = b.scope().phase(1).ipu(0).stage(2).block("dec");
    m = b.matmul(x, w2, "mm1");            // op 4
    m = b.add(m, b.reshape(s, {4, 4}, "unflat"), "join");  // ops 5 (reshape), 6 (add)
  }
  b.add_output(m);
  b.add_output(s);
  return b.build();
}

std::vector<std::string> op_names(const ipu::graph& g, const std::vector<ipu::op_id>& ids) {
  std::vector<std::string> r;
  for (auto i : ids) r.push_back(g.op(i).name);
  return r;
}

}  // namespace

TEST_CASE("ops by IPU, stage, phase, block and type") {
  const auto g = annotated();
  REQUIRE(g.num_ops() == 7);
  CHECK(op_names(g, collect(v::ops_on_ipu(g, 0))) == std::vector<std::string>{"mm0", "relu0", "mm1", "unflat", "join"});
  CHECK(op_names(g, collect(v::ops_on_ipu(g, 1))) == std::vector<std::string>{"double", "flat"});
  CHECK(collect(v::ops_on_ipu(g, 7)).empty());
  CHECK(op_names(g, collect(v::ops_in_stage(g, 2))) == std::vector<std::string>{"mm1", "unflat", "join"});
  CHECK(op_names(g, collect(v::ops_in_phase(g, 0))) == std::vector<std::string>{"mm0", "relu0", "double", "flat"});
  CHECK(op_names(g, collect(v::ops_in_block(g, "dec"))) == std::vector<std::string>{"mm1", "unflat", "join"});
  CHECK(op_names(g, collect(v::ops_of_type(g, "MatMul"))) == std::vector<std::string>{"mm0", "mm1"});
  // Every op is in exactly one phase here.
  CHECK(ranges::distance(v::ops_in_phase(g, 0)) + ranges::distance(v::ops_in_phase(g, 1)) ==
        static_cast<std::ptrdiff_t>(g.num_ops()));
}

TEST_CASE("views compose with range-v3 and the node adaptors") {
  const auto g = annotated();
  auto names = v::ops_in_stage(g, 1) | v::op_nodes(g) | ranges::views::transform(&ipu::op_node::type);
  CHECK(collect(names) == std::vector<std::string>{"Add", "Reshape"});
  auto weight_names = v::weights(g) | v::tensor_nodes(g) | ranges::views::transform(&ipu::tensor_node::name);
  CHECK(collect(weight_names) == std::vector<std::string>{"w", "w2"});
  auto custom = v::ops_where(g, [](const ipu::op_node& op) { return op.inputs.size() == 2; });
  CHECK(op_names(g, collect(custom)) == std::vector<std::string>{"mm0", "double", "flat", "mm1", "unflat", "join"});
}

TEST_CASE("consumers, producers and successors") {
  const auto g = annotated();
  const auto x = *g.find_tensor("x");
  CHECK(op_names(g, collect(v::consumers(g, x))) == std::vector<std::string>{"mm0", "mm1"});
  const auto relu0 = *g.find_tensor("relu0");
  CHECK(op_names(g, collect(v::consumers(g, relu0))) == std::vector<std::string>{"double"});  // once, not twice

  const auto dbl = static_cast<ipu::op_id>(2);
  REQUIRE(g.op(dbl).name == "double");
  CHECK(op_names(g, collect(v::producers(g, dbl))) == std::vector<std::string>{"relu0"});  // deduplicated
  CHECK(collect(v::producers(g, 0)).empty());  // inputs and weights have no producer
  const auto join = static_cast<ipu::op_id>(6);
  REQUIRE(g.op(join).name == "join");
  CHECK(op_names(g, collect(v::producers(g, join))) == std::vector<std::string>{"mm1", "unflat"});

  CHECK(op_names(g, collect(v::successors(g, 3))) == std::vector<std::string>{"unflat"});
  CHECK(op_names(g, collect(v::successors(g, 1))) == std::vector<std::string>{"double"});
  CHECK(collect(v::successors(g, join)).empty());

  CHECK(collect(v::op_inputs(g, dbl)) == std::vector<ipu::tensor_id>{relu0, relu0});
  CHECK(collect(v::op_outputs(g, dbl)) == g.op(dbl).outputs);
}

TEST_CASE("successors are deduplicated across outputs") {
  ipu::builder b;
  auto x = b.add_input_tensor({data_type::F32, {4, 2}}, "x");
  auto parts = b.split(x, {2, 2}, 0, "halves");
  auto y = b.add(parts[0], parts[1], "sum");
  auto z = b.relu(parts[1], "r");
  b.add_output(y);
  b.add_output(z);
  const auto g = b.build();
  const auto split_op = g.tensor(parts[0]).producer;
  CHECK(op_names(g, collect(v::successors(g, split_op))) == std::vector<std::string>{"sum", "r"});
  const auto sum_op = g.tensor(y).producer;
  CHECK(op_names(g, collect(v::producers(g, sum_op))) == std::vector<std::string>{"halves"});
  // Omitted optional inputs are skipped.
  CHECK(collect(v::op_inputs(g, split_op)).size() == 2);
}

TEST_CASE("tensors by kind, inputs and outputs") {
  const auto g = annotated();
  auto names = [&](auto&& ids) {
    std::vector<std::string> r;
    for (auto t : ids) r.push_back(g.tensor(t).name);
    return r;
  };
  CHECK(names(v::inputs(g)) == std::vector<std::string>{"x"});
  CHECK(names(v::weights(g)) == std::vector<std::string>{"w", "w2"});
  CHECK(names(v::outputs(g)) == std::vector<std::string>{"join", "flat"});
  CHECK(ranges::distance(v::constants(g)) == 2);  // the two reshape shapes
  CHECK(ranges::distance(v::intermediates(g)) == static_cast<std::ptrdiff_t>(g.num_ops()));
  // Kinds partition the tensors.
  std::ptrdiff_t total = 0;
  for (auto k : {ipu::tensor_kind::input, ipu::tensor_kind::variable, ipu::tensor_kind::constant,
                 ipu::tensor_kind::intermediate})
    total += ranges::distance(v::tensors_of_kind(g, k));
  CHECK(total == static_cast<std::ptrdiff_t>(g.num_tensors()));
  CHECK(ranges::distance(v::tensor_ids(g)) == static_cast<std::ptrdiff_t>(g.num_tensors()));
}

namespace {
template <class G>
concept can_view = requires(G&& g) { v::ops_on_ipu(std::forward<G>(g), 0); };
}  // namespace
static_assert(can_view<const ipu::graph&>);
static_assert(!can_view<ipu::graph>, "views of a temporary graph must not compile");

}  // namespace test_views
