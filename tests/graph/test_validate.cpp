#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ipu/graph/validate.hpp"

namespace test_validate {

namespace {

using ipu::data_type;
using ipu::tensor_kind;

const ipu::tensor_info f3{data_type::F32, {3}};

ipu::op_node relu(std::string name, ipu::tensor_id in, ipu::tensor_id out) {
  return ipu::op_node{"Relu", "", 13, std::move(name), {in}, {out}, {}, {}};
}

// x -> Relu 'a' -> t1 -> Relu 'b' -> t2 (output)
ipu::graph chain() {
  ipu::graph g("chain");
  auto x = g.add_tensor("x", f3, tensor_kind::input);
  auto t1 = g.add_tensor("t1", f3);
  auto t2 = g.add_tensor("t2", f3);
  g.add_op(relu("a", x, t1));
  g.add_op(relu("b", t1, t2));
  g.mark_output(t2);
  return g;
}

/// Checks that validate() throws an ipu::error whose text contains every fragment.
void check_rejects(const ipu::graph& g, const std::vector<std::string>& fragments) {
  try {
    ipu::validate(g);
    FAIL("validate accepted the graph");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::graph);
    for (const auto& f : fragments) CHECK_MESSAGE(std::string(e.what()).find(f) != std::string::npos, e.what());
  }
}

}  // namespace

TEST_CASE("a well-formed graph validates, also in a constant expression") {
  CHECK_NOTHROW(ipu::validate(chain()));
  static_assert([] {
    ipu::graph g("c");
    auto x = g.add_tensor("x", {data_type::F32, {2}}, tensor_kind::input);
    auto y = g.add_tensor("y", {data_type::F32, {2}});
    g.add_op(ipu::op_node{"Relu", "", 13, "r", {x}, {y}, {}, {}});
    g.mark_output(y);
    ipu::validate(g);
    return true;
  }());
}

TEST_CASE("dangling tensor ids are caught when adding and when validating") {
  ipu::graph g("dangling");
  auto x = g.add_tensor("x", f3, tensor_kind::input);
  auto y = g.add_tensor("y", f3);
  CHECK_THROWS_WITH_AS(g.add_op(relu("r", 7, y)), doctest::Contains("op Relu 'r'"), ipu::error);
  CHECK_THROWS_WITH_AS(g.add_op(relu("r", x, 9)), doctest::Contains("tensor id 9 does not exist"), ipu::error);
  CHECK_THROWS_WITH_AS(g.mark_output(42), doctest::Contains("output tensor id 42 does not exist"), ipu::error);
  // A pass that rewires an op to a tensor that does not exist.
  g.add_op(relu("r", x, y));
  g.mark_output(y);
  g.op(0).inputs[0] = 99;
  check_rejects(g, {"input tensor id 99 does not exist", "op Relu 'r'"});
}

TEST_CASE("duplicate and empty tensor names") {
  auto g = chain();
  g.add_tensor("t1", f3, tensor_kind::input);
  check_rejects(g, {"tensor name 't1' is used twice", "graph 'chain'"});
  auto h = chain();
  h.add_tensor("", f3, tensor_kind::input);
  check_rejects(h, {"empty name"});
}

TEST_CASE("cycles name an op on the cycle") {
  ipu::graph g("loop");
  auto x = g.add_tensor("x", f3, tensor_kind::input);
  auto t1 = g.add_tensor("t1", f3);
  auto t2 = g.add_tensor("t2", f3);
  auto t3 = g.add_tensor("t3", f3);
  g.add_op(ipu::op_node{"Add", "", 13, "first", {x, t2}, {t1}, {}, {}});
  g.add_op(relu("second", t1, t2));
  g.add_op(relu("after", t2, t3));
  g.mark_output(t3);
  check_rejects(g, {"cycle through op Add 'first'"});
}

TEST_CASE("an op input that nothing produces") {
  ipu::graph g("orphan");
  auto ghost = g.add_tensor("ghost", f3);  // intermediate, no producer
  auto y = g.add_tensor("y", f3);
  g.add_op(relu("r", ghost, y));
  g.mark_output(y);
  check_rejects(g, {"tensor 'ghost' is used by op Relu 'r' but nothing produces it"});
}

TEST_CASE("weights and constants must hold exactly their byte size") {
  auto g = chain();
  g.add_tensor("w", f3, tensor_kind::variable, ipu::byte_buffer::from_values<float>(std::vector<float>{1, 2}));
  check_rejects(g, {"tensor 'w' holds 8 bytes but F32[3] needs 12"});
  // Inputs and intermediates cannot carry data at all.
  CHECK_THROWS_WITH_AS(g.add_tensor("i", f3, tensor_kind::input, ipu::byte_buffer::from_values<float>(std::vector<float>{1, 2, 3})),
                       doctest::Contains("'i' of kind input cannot hold data"), ipu::error);
}

TEST_CASE("annotations: all or none, non-negative") {
  {
    auto g = chain();
    g.op(0).where.ipu = 0;
    check_rejects(g, {"op Relu 'a' has IPU (virtual graph) set but op Relu 'b' has none"});
  }
  {
    auto g = chain();
    g.op(1).where.phase = 1;
    check_rejects(g, {"op Relu 'b' has execution phase set but op Relu 'a' has none"});
  }
  {
    auto g = chain();
    g.op(0).where.stage = 0;
    g.op(1).where.stage = -1;
    check_rejects(g, {"pipeline stage -1 is negative", "op Relu 'b'"});
  }
  {
    auto g = chain();  // fully annotated: fine
    g.op(0).where = {0, 0, 0, "enc"};
    g.op(1).where = {1, 1, 0, "dec"};
    CHECK_NOTHROW(ipu::validate(g));
  }
}

TEST_CASE("an op is a recomputation checkpoint or recomputed, not both") {
  auto g = chain();
  g.op(1).where.recompute = true;
  CHECK_NOTHROW(ipu::validate(g));
  g.op(1).where.checkpoint = true;
  check_rejects(g, {"op Relu 'b' is both a recomputation checkpoint and recomputed"});
}

TEST_CASE("graph outputs must be produced") {
  {
    auto g = chain();
    g.mark_output(g.add_tensor("unmade", f3));
    check_rejects(g, {"graph output 'unmade' is never produced"});
  }
  {
    auto g = chain();  // an input passed straight through is a valid output
    g.mark_output(*g.find_tensor("x"));
    CHECK_NOTHROW(ipu::validate(g));
  }
}

TEST_CASE("producer and consumer links must agree with ops") {
  auto g = chain();
  g.tensor(*g.find_tensor("t1")).consumers.clear();
  check_rejects(g, {"tensor 't1' does not list op Relu 'b' among its consumers"});
  auto h = chain();
  h.tensor(*h.find_tensor("t2")).producer = 0;
  check_rejects(h, {"tensor 't2' does not name op Relu 'b' as its producer"});
}

TEST_CASE("op outputs: produced once, never a graph input") {
  auto g = chain();
  CHECK_THROWS_WITH_AS(g.add_op(relu("again", *g.find_tensor("x"), *g.find_tensor("t1"))),
                       doctest::Contains("'t1' is already produced by op Relu 'a'"), ipu::error);
  CHECK_THROWS_WITH_AS(g.add_op(relu("into_input", *g.find_tensor("t1"), *g.find_tensor("x"))),
                       doctest::Contains("op output 'x' is a graph input"), ipu::error);
}

}  // namespace test_validate
