#include "ipu/exec/step_io.hpp"

#include <doctest/doctest.h>

#include <string>

namespace test_step_io {

namespace {
// x: F32[2,2] input, t: S32[3] input, y = Relu(x) anchored.
ipu::graph model() {
  ipu::graph g("m");
  auto x = g.add_tensor("x", {ipu::data_type::F32, {2, 2}}, ipu::tensor_kind::input);
  g.add_tensor("t", {ipu::data_type::S32, {3}}, ipu::tensor_kind::input);
  auto y = g.add_tensor("y", {ipu::data_type::F32, {2, 2}});
  ipu::op_node relu;
  relu.type = "Relu";
  relu.inputs = {x};
  relu.outputs = {y};
  g.add_op(relu);
  g.mark_output(y);
  return g;
}

std::string message_of(auto&& fn) {
  try {
    fn();
  } catch (const ipu::error& e) {
    return e.what();
  }
  return "no error";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct fixture {
  ipu::graph g = model();
  ipu::data_flow flow{4, {{"y", ipu::anchor_return_type::all()}}};
  ipu::step_layout layout = ipu::step_layout::of(g, flow, {4, 1, 2});  // 4 batches, 2 replicas
  ipu::host_tensor x{layout.input_info("x")};
  ipu::host_tensor t{layout.input_info("t")};
  std::map<std::string, ipu::host_tensor> anchors = layout.make_anchor_arrays();
  ipu::step_io io() {
    ipu::step_io s;
    s.set_input("x", x.view()).set_input("t", t.view());
    for (auto& [name, a] : anchors) s.set_output(name, a.view());
    return s;
  }
};
}  // namespace

TEST_CASE("step io: arrays are shaped batches x replicas x tensor, anchors by return type") {
  fixture f;
  CHECK(f.x.info() == ipu::tensor_info{ipu::data_type::F32, {4, 2, 2, 2}});
  CHECK(f.t.info() == ipu::tensor_info{ipu::data_type::S32, {4, 2, 3}});
  REQUIRE(f.anchors.size() == 1);
  CHECK(f.anchors.at("y").info() == ipu::tensor_info{ipu::data_type::F32, {4, 2, 2, 2}});
  CHECK_NOTHROW(f.layout.check(f.io()));
  // Only the element count matters (PopART): a flat array of the right size is accepted.
  ipu::host_tensor flat({ipu::data_type::F32, {32}});
  auto io = f.io();
  io.set_input("x", flat.view());
  CHECK_NOTHROW(f.layout.check(io));

  const auto final_layout = ipu::step_layout::of(f.g, ipu::data_flow(4, {{"y", ipu::anchor_return_type::final()}}), {4, 1, 2});
  CHECK(final_layout.anchor_info("y") == ipu::tensor_info{ipu::data_type::F32, {2, 2, 2}});
  const auto every = ipu::step_layout::of(f.g, ipu::data_flow(4, {{"y", ipu::anchor_return_type::every_n(2)}}), {4, 1, 1});
  CHECK(every.anchor_info("y") == ipu::tensor_info{ipu::data_type::F32, {2, 2, 2}});
}

TEST_CASE("step io: a wrong element count names the tensor, the expected and the received count") {
  fixture f;
  auto io = f.io();
  ipu::host_tensor one_batch({ipu::data_type::F32, {2, 2}});  // one micro-batch instead of 4 x 2
  io.set_input("x", one_batch.view());
  const auto msg = message_of([&] { f.layout.check(io); });
  CHECK(contains(msg, "tensor 'x'"));
  CHECK(contains(msg, "expected 32 but received 4"));
  CHECK(contains(msg, "4 batches x 1 accumulation x 2 replicas x 4 elements of F32[2,2]"));
  try {
    f.layout.check(io);
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::shape);
  }

  auto io2 = f.io();
  ipu::host_tensor short_anchor({ipu::data_type::F32, {4, 2, 2}});
  io2.set_output("y", short_anchor.view());
  const auto out_msg = message_of([&] { f.layout.check(io2); });
  CHECK(contains(out_msg, "anchor"));
  CHECK(contains(out_msg, "tensor 'y': expected 32 but received 16"));
}

TEST_CASE("step io: missing, unknown and mistyped arrays are errors naming the tensor") {
  fixture f;
  ipu::step_io missing;
  missing.set_input("x", f.x.view());
  CHECK(contains(message_of([&] { f.layout.check(missing); }), "no array for input 't'"));

  auto unknown = f.io();
  unknown.set_input("z", f.x.view());
  const auto msg = message_of([&] { f.layout.check(unknown); });
  CHECK(contains(msg, "'z', which is not a graph input"));
  CHECK(contains(msg, "the graph inputs are: x, t"));

  auto mistyped = f.io();
  ipu::host_tensor ints({ipu::data_type::S32, {4, 2, 2, 2}});
  mistyped.set_input("x", ints.view());
  CHECK(contains(message_of([&] { f.layout.check(mistyped); }), "input 'x' is given S32 elements but the tensor holds F32"));

  ipu::step_io no_anchor;
  no_anchor.set_input("x", f.x.view()).set_input("t", f.t.view());
  CHECK(contains(message_of([&] { f.layout.check(no_anchor); }), "no array for anchor 'y'"));

  auto extra = f.io();
  ipu::host_tensor other({ipu::data_type::F32, {1}});
  extra.set_output("x", other.view());
  CHECK(contains(message_of([&] { f.layout.check(extra); }), "'x', which is not an anchor"));

  auto empty = f.io();
  empty.set_input("x", ipu::const_tensor_view(f.x.info(), nullptr));
  CHECK(contains(message_of([&] { f.layout.check(empty); }), "input 'x' is an empty view"));
}

TEST_CASE("step io: setting an array twice replaces it - layouts check their inputs") {
  fixture f;
  ipu::step_io io;
  io.set_input("x", f.x.view());
  ipu::host_tensor other(f.x.info());
  io.set_input("x", other.view());
  REQUIRE(io.inputs().size() == 1);
  CHECK(io.input("x")->data() == other.data());
  CHECK(io.input("nope") == nullptr);

  CHECK(contains(message_of([&] { (void)ipu::step_layout::of(f.g, ipu::data_flow(2, {{"nope", {}}}), {2, 1, 1}); }),
                 "anchor 'nope' is not a tensor of the model"));
  CHECK(contains(message_of([&] { (void)ipu::step_layout::of(f.g, f.flow, {2, 1, 1}); }),
                 "runs 4 batches per step but 2 were planned"));
  CHECK(contains(message_of([&] { (void)f.layout.input_info("y"); }), "no graph input named 'y'"));
  // Accumulation multiplies both the input micro-batches and All's fetches.
  const auto acc = ipu::step_layout::of(f.g, f.flow, {4, 3, 1});
  CHECK(acc.input_info("x") == ipu::tensor_info{ipu::data_type::F32, {4, 3, 2, 2}});
  CHECK(acc.anchor_info("y") == ipu::tensor_info{ipu::data_type::F32, {4, 3, 2, 2}});
}

}  // namespace test_step_io
