// The graph codec: a graph with every attribute kind, nested subgraphs, omitted inputs and
// annotations comes back equal, ids included, after a trip through serialized bytes; weights are
// bound by name and never written; damaged messages are refused with a popef error naming the fault.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>

#include "ipu/popef/graph_codec.hpp"
#include "ipu/popef/metadata.hpp"

namespace test_graph_codec {

using namespace ipu;

namespace {

byte_buffer floats(std::initializer_list<float> v) { return byte_buffer::from_values(std::span<const float>(v.begin(), v.size())); }

/// A body for If/Loop-like attributes: y = Neg(x), with a constant and a nested weight of its own.
graph body(const std::string& name) {
  graph b(name);
  const auto x = b.add_tensor(name + "_x", {data_type::F32, shape{2}}, tensor_kind::input);
  const auto c = b.add_tensor(name + "_c", {data_type::F32, shape{2}}, tensor_kind::constant, floats({1.5f, -2.5f}));
  const auto s = b.add_tensor(name + "_s", {data_type::F32, shape{2}});
  const auto y = b.add_tensor(name + "_y", {data_type::F32, shape{2}});
  b.add_op(op_node{"Add", "", 17, "", {x, c}, {s}, {}, {}});
  b.add_op(op_node{"Neg", "", 17, "", {s}, {y}, {}, {}});
  b.mark_output(y);
  b.set_opset_imports({{"", 17}});
  return b;
}

/// Tensors deliberately interleaved (an intermediate before an input, a weight between ops) so
/// ids that follow the file's order are not the numbering an importer would choose.
graph sample() {
  graph g("sample");
  g.set_opset_imports({{"", 17}, {"ai.graphcore", 1}});
  const auto h = g.add_tensor("h", {data_type::F32, shape{2, 2}});
  const auto x = g.add_tensor("x", {data_type::F32, shape{2, 2}}, tensor_kind::input);
  const auto w = g.add_tensor("w", {data_type::F32, shape{2, 2}}, tensor_kind::variable, floats({1, 2, 3, 4}));
  const auto k = g.add_tensor("k", {data_type::S64, shape{1}}, tensor_kind::constant,
                              byte_buffer::from_values(std::span<const std::int64_t>(std::vector<std::int64_t>{-7})));
  const auto x2 = g.add_tensor("x2", {data_type::F16, shape{}}, tensor_kind::input);
  const auto y = g.add_tensor("y", {data_type::F32, shape{2, 2}});
  const auto z = g.add_tensor("z", {data_type::F32, shape{2, 2}});
  const auto e = g.add_tensor("empty", {data_type::F32, shape{0, 3}}, tensor_kind::constant);

  op_node mm{"MatMul", "", 17, "mm", {x, w}, {h}, {}, {}};
  mm.where = annotation{1, 2, 0, "block-a"};
  g.add_op(mm);

  op_node custom{"Custom", "ai.graphcore", 1, "", {h, no_tensor, k, no_tensor}, {y}, {}, {}};
  custom.attributes = {
      {"f", -0.0f},
      {"i", std::int64_t{-9000000000}},
      {"s", std::string("text\0with nul", 13)},
      {"t", constant_tensor{{data_type::U8, shape{3}}, byte_buffer::from_values(std::span<const std::uint8_t>(std::vector<std::uint8_t>{1, 2, 255}))}},
      {"g", subgraph{detail::box<graph>(body("then"))}},
      {"floats", std::vector<float>{1.25f, std::numeric_limits<float>::infinity()}},
      {"ints", std::vector<std::int64_t>{}},
      {"strings", std::vector<std::string>{"a", "", "c"}},
      {"tensors", std::vector<constant_tensor>{{{data_type::F32, shape{1}}, floats({3.0f})}, {{data_type::BOOL, shape{0}}, {}}}},
      {"graphs", std::vector<graph>{body("b0"), body("b1")}},
  };
  custom.where = annotation{0, 2, 5, "", true};  // a recomputation checkpoint
  g.add_op(custom);
  op_node add{"Add", "", 17, "add", {y, h}, {z}, {}, {}};
  add.where = annotation{0, 3, 1, ""};
  g.add_op(add);
  g.mark_output(z);
  g.mark_output(h);
  g.mark_output(z);  // outputs keep their order, repeats included
  (void)x2;
  (void)e;
  return g;
}

/// Serializes and parses back, as a file does.
popef::pb::Graph through_bytes(const popef::pb::Graph& p) {
  const auto bytes = popef::detail::serialize_message(p, "graph");
  popef::pb::Graph out;
  popef::detail::parse_message(out, std::as_bytes(std::span(bytes.data(), bytes.size())), "graph", "test");
  return out;
}

/// Weights from a map, counting the calls.
struct weight_map {
  std::map<std::string, byte_buffer> data;
  int calls = 0;
  popef::weight_source source() {
    return [this](const std::string& name, const tensor_info&) -> byte_buffer {
      ++calls;
      return data.at(name);
    };
  }
};

weight_map weights_of(const graph& g) {
  weight_map m;
  for (const auto& t : g.tensors())
    if (t.kind == tensor_kind::variable) m.data.emplace(t.name, t.data);
  return m;
}

error decode_error(const popef::pb::Graph& p, const graph& like) {
  auto w = weights_of(like);
  try {
    (void)popef::graph_from_proto(p, w.source(), "file 'x.popef'");
  } catch (const error& e) {
    return e;
  }
  FAIL("the damaged graph was accepted");
  return error(error_category::internal, "unreachable");
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a graph with every attribute kind round-trips exactly, ids included") {
  const auto g = sample();
  const auto p = through_bytes(popef::graph_to_proto(g));
  auto w = weights_of(g);
  const auto back = popef::graph_from_proto(p, w.source(), "test");
  CHECK(back == g);
  CHECK(w.calls == 1);
  CHECK(back.tensor(0).name == "h");
  CHECK(back.tensor(1).name == "x");
  CHECK(back.inputs() == std::vector<tensor_id>{1, 4});
  CHECK(back.outputs() == std::vector<tensor_id>{6, 0, 6});
  CHECK(back.op(1).inputs == std::vector<tensor_id>{0, no_tensor, 3, no_tensor});
  CHECK(back.op(0).where == annotation{1, 2, 0, "block-a"});
  const auto& then = *std::get<subgraph>(back.op(1).find_attribute("g")->value).body;
  CHECK(then.op(0).where == annotation{});  // unset stays unset, not 0
  CHECK(back.op(1).where.checkpoint);
  CHECK_FALSE(back.op(0).where.checkpoint);
  // -0.0f and the NUL inside the string survive bit for bit.
  const auto& f = std::get<float>(back.op(1).find_attribute("f")->value);
  CHECK(std::signbit(f));
  CHECK(std::get<std::string>(back.op(1).find_attribute("s")->value).size() == 13);
  CHECK(std::get<subgraph>(back.op(1).find_attribute("g")->value).body->tensor(1).data == floats({1.5f, -2.5f}));
  CHECK(back.op(1).find_attribute("ints")->kind() == attribute_kind::ints);
}

TEST_CASE("a recomputation checkpoint is field 5 of the annotation; files written before it load unmarked") {
  const auto g = sample();
  auto p = popef::graph_to_proto(g);
  // The field number is part of the file format: the checkpoint alone is tag (5 << 3 | varint) = 0x28.
  popef::pb::Annotation only;
  only.set_checkpoint(true);
  CHECK(only.SerializeAsString() == std::string("\x28\x01", 2));
  // Op 1's annotation as the writer before the field wrote it: ipu 0, stage 2, phase 5, empty block.
  const std::string old_bytes("\x08\x00\x10\x02\x18\x05\x22\x00", 8);
  REQUIRE(p.mutable_ops(1)->mutable_where()->ParseFromString(old_bytes));
  auto w = weights_of(g);
  const auto back = popef::graph_from_proto(through_bytes(p), w.source(), "test");
  CHECK(back.op(1).where == annotation{0, 2, 5, "", false});
  CHECK(back.op(0).where == g.op(0).where);
  CHECK(back.op(2).where == g.op(2).where);
}

TEST_CASE("a recompute mark is field 6 of the annotation; files written before it load unmarked; both marks are refused") {
  auto g = sample();
  g.op(2).where.recompute = true;
  popef::pb::Annotation only;
  only.set_recompute(true);
  CHECK(only.SerializeAsString() == std::string("\x30\x01", 2));  // tag (6 << 3 | varint)
  auto w = weights_of(g);
  auto p = popef::graph_to_proto(g);
  const auto back = popef::graph_from_proto(through_bytes(p), w.source(), "test");
  CHECK(back.op(2).where.recompute);
  CHECK_FALSE(back.op(1).where.recompute);
  CHECK(back == g);
  // The checkpoint-era file: op 1 a checkpoint, no field 6 anywhere.
  const auto old = popef::graph_from_proto(through_bytes(popef::graph_to_proto(sample())), w.source(), "test");
  for (const auto& op : old.ops()) CHECK_FALSE(op.where.recompute);
  // A file marking one op both ways (PopART's RecomputeType holds one value) is refused.
  p.mutable_ops(1)->mutable_where()->set_recompute(true);
  CHECK_THROWS_WITH_AS((void)popef::graph_from_proto(through_bytes(p), w.source(), "test"),
                       doctest::Contains("is both a recomputation checkpoint and recomputed"), ipu::error);
}

TEST_CASE("the top-level weights are not written; nested graphs carry their bytes") {
  const auto g = sample();
  const auto p = popef::graph_to_proto(g);
  REQUIRE(p.tensors(2).kind() == popef::pb::TENSOR_VARIABLE);
  CHECK(p.tensors(2).data().empty());
  CHECK(p.tensors(3).data().size() == 8);  // the constant
  // A weight is bound from the source, not the file.
  auto w = weights_of(g);
  w.data["w"] = floats({9, 8, 7, 6});
  const auto back = popef::graph_from_proto(p, w.source(), "test");
  CHECK(back.tensor(2).data == floats({9, 8, 7, 6}));
}

TEST_CASE("damaged graphs are refused with a popef error saying what and where") {
  const auto g = sample();
  const auto good = popef::graph_to_proto(g);
  auto check = [&](const popef::pb::Graph& p, const std::string& part) {
    const auto e = decode_error(through_bytes(p), g);
    CHECK(e.category() == error_category::popef);
    CHECK_MESSAGE(contains(e.what(), part), e.what());
    CHECK(contains(e.what(), "x.popef"));
  };
  SUBCASE("an op input beyond the tensors") {
    auto p = good;
    p.mutable_ops(2)->set_inputs(0, 8);
    check(p, "op 2 Add 'add' input 0 is tensor id 8 but the graph has 8 tensors");
  }
  SUBCASE("an omitted op output") {
    auto p = good;
    p.mutable_ops(0)->set_outputs(0, no_tensor);
    check(p, "op 0 MatMul 'mm' output 0 is tensor id 4294967295 (none)");
  }
  SUBCASE("a graph output beyond the tensors") {
    auto p = good;
    p.set_outputs(1, 1000);
    check(p, "graph output 1 is tensor id 1000");
  }
  SUBCASE("an op writing an input") {
    auto p = good;
    p.mutable_ops(2)->set_outputs(0, 1);
    check(p, "writes input tensor 1");
  }
  SUBCASE("two ops writing one tensor") {
    auto p = good;
    p.mutable_ops(2)->set_outputs(0, 5);
    check(p, "which another op already writes");
  }
  SUBCASE("the input list disagrees with the input tensors") {
    auto p = good;
    p.set_inputs(0, 4);
    p.set_inputs(1, 1);
    check(p, "input list does not match its 2 input tensors");
  }
  SUBCASE("a constant whose data is truncated") {
    auto p = good;
    p.mutable_tensors(3)->mutable_data()->resize(7);
    check(p, "tensor 3 'k' S64[1] needs 8 bytes of data but holds 7");
  }
  SUBCASE("a constant with too much data") {
    auto p = good;
    p.mutable_tensors(3)->mutable_data()->append("x");
    check(p, "needs 8 bytes of data but holds 9");
  }
  SUBCASE("a tensor attribute with the wrong data length") {
    auto p = good;
    p.mutable_ops(1)->mutable_attributes(3)->mutable_t()->mutable_data()->resize(2);
    check(p, "op 1 Custom attribute 't' U8[3] needs 3 bytes");
  }
  SUBCASE("data on an intermediate tensor") {
    auto p = good;
    p.mutable_tensors(5)->set_data("abcd");
    check(p, "intermediate tensor 5 'y' holds data");
  }
  SUBCASE("a top-level weight with data inline") {
    auto p = good;
    p.mutable_tensors(2)->set_data(std::string(16, 'x'));
    check(p, "weight tensor 2 'w' holds data inside the executable");
  }
  SUBCASE("an unknown tensor kind") {
    auto p = good;
    p.mutable_tensors(0)->set_kind(static_cast<popef::pb::TensorKind>(9));
    check(p, "tensor 0 'h' has unknown kind 9");
  }
  SUBCASE("no tensor kind") {
    auto p = good;
    p.mutable_tensors(0)->set_kind(popef::pb::TENSOR_KIND_UNSPECIFIED);
    check(p, "tensor 0 'h' has no kind");
  }
  SUBCASE("an unknown data type") {
    auto p = good;
    p.mutable_tensors(1)->mutable_info()->set_data_type(static_cast<popef::pb::DataType>(77));
    check(p, "tensor 1 'x' has unknown data type 77");
  }
  SUBCASE("a negative dimension") {
    auto p = good;
    p.mutable_tensors(1)->mutable_info()->set_shape(0, -2);
    check(p, "negative dimension -2");
  }
  SUBCASE("an impossibly large constant") {
    auto p = good;
    p.mutable_tensors(3)->mutable_info()->add_shape(std::int64_t{1} << 40);
    p.mutable_tensors(3)->mutable_info()->add_shape(std::int64_t{1} << 40);
    check(p, "impossibly large");
  }
  SUBCASE("an attribute without a value") {
    auto p = good;
    p.mutable_ops(1)->mutable_attributes(0)->clear_f();
    check(p, "op 1 Custom attribute 'f' has no value");
  }
  SUBCASE("a bad id inside a subgraph") {
    auto p = good;
    p.mutable_ops(1)->mutable_attributes(9)->mutable_graphs()->mutable_values(1)->mutable_ops(0)->set_inputs(1, 40);
    const auto e = decode_error(through_bytes(p), g);
    CHECK(contains(e.what(), "op 0 Add input 1 is tensor id 40 but the graph has 4 tensors"));
    CHECK(contains(e.what(), "attribute 'graphs' graph 1"));
  }
  SUBCASE("a nested weight with the wrong data length") {
    auto p = good;
    auto* t = p.mutable_ops(1)->mutable_attributes(4)->mutable_g()->mutable_tensors(1);
    t->set_kind(popef::pb::TENSOR_VARIABLE);
    t->mutable_data()->resize(4);
    check(p, "needs 8 bytes of data but holds 4");
  }
  SUBCASE("subgraphs nested without end") {
    popef::pb::Graph p = good;
    popef::pb::Graph* inner = p.mutable_ops(1)->mutable_attributes(4)->mutable_g();
    for (int i = 0; i < popef::max_graph_depth + 1; ++i) {
      auto* a = inner->mutable_ops(0)->add_attributes();
      a->set_name("deeper");
      inner = a->mutable_g();
      *inner = good.ops(1).attributes(4).g();
    }
    // Serialized nesting this deep is beyond protobuf's parser; decode the message directly.
    auto w = weights_of(g);
    CHECK_THROWS_WITH_AS(popef::graph_from_proto(p, w.source(), "file 'x.popef'"),
                         doctest::Contains("nested more than 32 deep"), error);
  }
  SUBCASE("a structural fault only validate() sees: duplicate tensor names") {
    auto p = good;
    p.mutable_tensors(6)->set_name("y");
    check(p, "the executable's graph is not valid");
  }
  SUBCASE("an op output declared unlike what its shape rule computes") {
    auto p = good;
    p.mutable_tensors(6)->mutable_info()->set_shape(1, 3);  // z = Add(y, h) of two F32[2,2]
    check(p, "output 'z' of op Add 'add' is declared F32[2,3] but the op computes F32[2,2]");
  }
  SUBCASE("a weight the source gives the wrong size") {
    auto w = weights_of(g);
    w.data["w"] = floats({1});
    CHECK_THROWS_WITH_AS(popef::graph_from_proto(good, w.source(), "file 'x.popef'"),
                         doctest::Contains("weight tensor 2 'w' F32[2,2] needs 16 bytes but 4 were given"), error);
  }
}

TEST_CASE("an executable without a graph is refused") {
  popef::pb::Executable e;
  weight_map w;
  CHECK_THROWS_WITH_AS(popef::graph_from_executable(e, w.source(), "file 'x.popef'"),
                       doctest::Contains("the executable holds no graph"), error);
}

}  // namespace test_graph_codec
