#include "ipu/exec/data_flow.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace test_data_flow {

using ipu::anchor_return_type;
using ipu::anchor_return_type_id;
using ipu::data_flow;
using ipu::step_counts;

namespace {
// Values one replica gets per step (PopART: Final/Sum 1, EveryN bps/N x accumulation, All bps x accumulation).
static_assert(anchor_return_type::all().fetches({8, 1, 1}) == 8);
static_assert(anchor_return_type::all().fetches({8, 3, 2}) == 24);
static_assert(anchor_return_type::every_n(4).fetches({8, 1, 1}) == 2);
static_assert(anchor_return_type::every_n(4).fetches({8, 3, 1}) == 6);
static_assert(anchor_return_type::final().fetches({8, 3, 4}) == 1);
static_assert(anchor_return_type::sum().fetches({8, 3, 4}) == 1);
// A data flow is usable in constant expressions. (Built from a vector: GCC 12 rejects an
// initializer_list of anchors during constant evaluation.)
constexpr data_flow constexpr_flow() {
  std::vector<ipu::anchor> anchors;
  anchors.push_back({"y", anchor_return_type::every_n(2)});
  anchors.push_back({"z", anchor_return_type::sum()});
  return data_flow(4, anchors);
}
static_assert(constexpr_flow().fetches("y") == 2);
static_assert(constexpr_flow().fetches("z") == 1);
static_assert(constexpr_flow().fetches("not anchored") == 0);
static_assert([] { return data_flow(8, std::vector<std::string>{"a"}, anchor_return_type::all()).fetches("a", 2); }() == 16);
static_assert(anchor_return_type::parse("EVERYN", 3) == anchor_return_type::every_n(3));

std::string message_of(auto&& fn) {
  try {
    fn();
  } catch (const ipu::error& e) {
    return e.what();
  }
  return "no error";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("data flow: return types parse with PopART's names, case-insensitively") {
  CHECK(anchor_return_type::parse("All").id() == anchor_return_type_id::all);
  CHECK(anchor_return_type::parse("final").id() == anchor_return_type_id::final);
  CHECK(anchor_return_type::parse("SUM").id() == anchor_return_type_id::sum);
  const auto e = anchor_return_type::parse("EveryN", 4);
  CHECK(e.id() == anchor_return_type_id::every_n);
  CHECK(e.period() == 4);
  CHECK(ipu::to_string(e) == "EveryN(4)");
  CHECK(ipu::to_string(anchor_return_type::sum()) == "Sum");

  CHECK(contains(message_of([] { (void)anchor_return_type::parse("EveryN"); }), "needs a return period"));
  CHECK(contains(message_of([] { (void)anchor_return_type::parse("All", 2); }), "only meaningful for EveryN"));
  CHECK(contains(message_of([] { (void)anchor_return_type::parse("Last"); }), "unknown anchor return type 'Last'"));
  CHECK(contains(message_of([] { (void)anchor_return_type::every_n(0); }), "period 0 is not positive"));
  CHECK(contains(message_of([] { (void)anchor_return_type::every_n(-3); }), "period -3 is not positive"));
}

TEST_CASE("data flow: the EveryN period must be at most the batches per step and divide it") {
  CHECK_NOTHROW(data_flow(8, {{"y", anchor_return_type::every_n(8)}}));
  CHECK_NOTHROW(data_flow(8, {{"y", anchor_return_type::every_n(1)}}));
  const auto larger = message_of([] { data_flow(4, {{"y", anchor_return_type::every_n(8)}}); });
  CHECK(contains(larger, "anchor 'y': return period 8 is larger than the 4 batches per step"));
  const auto not_factor = message_of([] { data_flow(6, {{"y", anchor_return_type::every_n(4)}}); });
  CHECK(contains(not_factor, "return period 4 does not divide the 6 batches per step"));
  CHECK(contains(not_factor, "1, 2, 3 or 6"));  // the periods that would do
  try {
    data_flow(6, {{"y", anchor_return_type::every_n(4)}});
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::usage);
  }
}

TEST_CASE("data flow: batches per step and anchor names are checked") {
  CHECK(contains(message_of([] { data_flow(0, {}); }), "batches per step is 0"));
  CHECK(contains(message_of([] { data_flow(2, {{"y", {}}, {"y", anchor_return_type::sum()}}); }), "'y' is anchored twice"));
  CHECK(contains(message_of([] { data_flow(2, {{"", {}}}); }), "empty name"));
  const data_flow f(4, std::vector<std::string>{"a", "b"}, anchor_return_type::final());
  CHECK(f.anchors().size() == 2);
  CHECK(f.return_type("b") == anchor_return_type::final());
  CHECK(f.is_anchored("a"));
  CHECK_FALSE(f.is_anchored("c"));
  CHECK(contains(message_of([&] { (void)f.return_type("c"); }), "'c' is not an anchor"));
  CHECK(data_flow().batches_per_step() == 1);
}

TEST_CASE("data flow: for_outputs anchors every graph output") {
  ipu::graph g("g");
  auto x = g.add_tensor("x", {ipu::data_type::F32, {2}}, ipu::tensor_kind::input);
  auto y = g.add_tensor("y", {ipu::data_type::F32, {2}});
  auto z = g.add_tensor("z", {ipu::data_type::F32, {2}});
  ipu::op_node relu, neg;
  relu.type = "Relu";
  relu.inputs = {x};
  relu.outputs = {y};
  neg.type = "Neg";
  neg.inputs = {y};
  neg.outputs = {z};
  g.add_op(relu);
  g.add_op(neg);
  g.mark_output(z);
  g.mark_output(y);
  const auto f = data_flow::for_outputs(g, 3, anchor_return_type::sum());
  REQUIRE(f.anchors().size() == 2);
  CHECK(f.anchors()[0].name == "z");
  CHECK(f.anchors()[1].name == "y");
  CHECK(f.batches_per_step() == 3);
  CHECK(f.return_type("y") == anchor_return_type::sum());
}

TEST_CASE("data flow: which micro-batches each return type fetches, and where they land") {
  const step_counts c{6, 2, 1};  // 6 batches of 2 accumulated micro-batches: m = batch * 2 + acc
  std::vector<long> all, every3, final_, sum;
  for (std::uint64_t m = 0; m < c.micro_batches(); ++m) {
    auto f = [&](anchor_return_type t) { auto x = t.fetch_of(m, c); return x ? static_cast<long>(*x) : -1L; };
    all.push_back(f(anchor_return_type::all()));
    every3.push_back(f(anchor_return_type::every_n(3)));
    final_.push_back(f(anchor_return_type::final()));
    sum.push_back(f(anchor_return_type::sum()));
  }
  CHECK(all == std::vector<long>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  // Batches 2 and 5 (every third, counting from 1), both accumulation micro-batches of each.
  CHECK(every3 == std::vector<long>{-1, -1, -1, -1, 0, 1, -1, -1, -1, -1, 2, 3});
  CHECK(final_ == std::vector<long>{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0});
  CHECK(sum == std::vector<long>(12, 0));
}

TEST_CASE("data flow: host array shapes put batches, accumulation and replicas first, without 1s") {
  const ipu::shape s{3, 5};
  using ipu::anchor_array_shape;
  using ipu::input_array_shape;
  CHECK(input_array_shape(s, {4, 1, 1}) == ipu::shape{4, 3, 5});
  CHECK(input_array_shape(s, {4, 2, 8}) == ipu::shape{4, 2, 8, 3, 5});
  CHECK(input_array_shape(s, {1, 1, 2}) == ipu::shape{2, 3, 5});
  CHECK(input_array_shape(s, {1, 1, 1}) == s);
  CHECK(anchor_array_shape(s, anchor_return_type::all(), {4, 1, 2}) == ipu::shape{4, 2, 3, 5});
  CHECK(anchor_array_shape(s, anchor_return_type::all(), {1, 1, 1}) == s);
  CHECK(anchor_array_shape(s, anchor_return_type::every_n(2), {8, 1, 1}) == ipu::shape{4, 3, 5});
  CHECK(anchor_array_shape(s, anchor_return_type::every_n(8), {8, 1, 2}) == ipu::shape{2, 3, 5});  // one fetch: dropped
  CHECK(anchor_array_shape(s, anchor_return_type::every_n(2), {8, 3, 1}) == ipu::shape{4, 3, 3, 5});
  CHECK(anchor_array_shape(s, anchor_return_type::final(), {8, 3, 1}) == s);
  CHECK(anchor_array_shape(s, anchor_return_type::sum(), {8, 3, 4}) == ipu::shape{4, 3, 5});
  // A scalar anchor.
  CHECK(anchor_array_shape(ipu::shape{}, anchor_return_type::all(), {5, 1, 1}) == ipu::shape{5});
}

}  // namespace test_data_flow
