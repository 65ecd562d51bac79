// Export: import -> export -> import gives an equal graph, and what is written is valid ONNX by
// Python's onnx checker.
#include "ipu/onnx/export.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ipu/onnx/import.hpp"
#include "onnx_test_util.hpp"

namespace test_export {

using namespace ipu;
using test_onnx::attr;
using test_onnx::model;
using test_onnx::node;
using test_onnx::scratch_dir;

namespace {

ipu::onnx::import_options unchecked() {
  ipu::onnx::import_options o;
  o.check_supported = false;
  return o;
}

graph round_trip(const graph& g) {
  return ipu::onnx::load_model_from_bytes(ipu::onnx::save_model_to_bytes(g), unchecked());
}

/// Runs Python's onnx checker with full_check (which includes strict shape inference).
void python_check(const std::filesystem::path& path) {
  CHECK(test_onnx::python("import onnx\nm = onnx.load('" + path.string() +
                          "')\nonnx.checker.check_model(m, full_check=True)\nprint('ok')\n") == "ok\n");
}

}  // namespace

TEST_CASE("the fixture models survive import -> export -> import unchanged") {
  for (const char* name : {"alexnet", "mobilenet_v2", "transformer_encoder"}) {
    CAPTURE(name);
    auto g = ipu::onnx::load_model(test_onnx::test_model(name), unchecked());
    auto back = round_trip(g);
    CHECK(back == g);
  }
}

TEST_CASE("an exported model is valid ONNX at opset 17 for Python's checker") {
  scratch_dir dir("export_check");
  auto g = ipu::onnx::load_model(test_onnx::test_model("transformer_encoder"), unchecked());
  ipu::onnx::save_model(g, dir.path / "t.onnx");
  python_check(dir.path / "t.onnx");
  auto proto = ipu::onnx::to_model_proto(g);
  CHECK(proto.opset_import(0).domain().empty());
  CHECK(proto.opset_import(0).version() == 17);
  CHECK(proto.producer_name() == "ipu");
  CHECK(proto.graph().initializer_size() == 11);
  CHECK(ipu::onnx::load_model(dir.path / "t.onnx", unchecked()) == g);
}

TEST_CASE("normalised old-opset models round-trip in their canonical form") {
  model m(9);
  m.input("x", {2, 3, 4}).output("y", {2, 3, 4}).output("s", {2, 2, 4});
  m.add(node("Softmax", {"x"}, {"y"}, {attr("axis", 1)}));
  m.add(node("Slice", {"x"}, {"s"}, {attr("starts", {1}), attr("ends", {3}), attr("axes", {1})}));
  auto g = ipu::onnx::load_model_from_bytes(m.bytes(), unchecked());
  CHECK(round_trip(g) == g);
}

TEST_CASE("subgraphs, captures and annotations round-trip") {
  auto g = ipu::onnx::load_model_from_bytes(test_onnx::control_flow_model().bytes(), unchecked());
  auto proto = ipu::onnx::to_model_proto(g);
  // The captures are the model's lexical references again, not inputs.
  const auto& if_node = proto.graph().node(0);
  CHECK(if_node.op_type() == "If");
  CHECK(if_node.input_size() == 1);
  for (const auto& a : if_node.attribute()) {
    CHECK(a.name() != "__captures");
    if (a.has_g()) CHECK(a.g().input_size() == 0);
  }
  CHECK(round_trip(g) == g);
  scratch_dir dir("export_cf");
  ipu::onnx::save_model(g, dir.path / "cf.onnx");
  python_check(dir.path / "cf.onnx");

  model a(13);
  a.input("x", {2}).output("y", {2});
  a.add(node("Relu", {"x"}, {"r"}, {attr("__ipu_number", 1), attr("__pipeline_stage", 1)}));
  a.add(node("Neg", {"r"}, {"y"}, {attr("__ipu_number", 0), attr("__pipeline_stage", 0)}));
  auto ga = ipu::onnx::load_model_from_bytes(a.bytes(), unchecked());
  ga.op(0).where.block = "encoder";
  ga.op(1).where.block = "head";
  ga.op(0).where.checkpoint = true;
  auto back = round_trip(ga);
  CHECK(back == ga);
  CHECK(back.op(0).where.block == "encoder");
  CHECK(back.op(0).where.checkpoint);  // written as PopART's __recompute_output_in_backward_pass = 1
  ga.op(0).where.checkpoint = false;
  ga.op(1).where.recompute = true;
  const auto marked = ipu::onnx::to_model_proto(ga);
  std::int64_t written = -1;
  for (const auto& at : marked.graph().node(1).attribute())
    if (at.name() == "__recompute_output_in_backward_pass") written = at.i();
  CHECK(written == 2);  // RecomputeType::Recompute, as Builder::recomputeOutputInBackwardPass writes it
  back = round_trip(ga);
  CHECK(back == ga);
  CHECK(back.op(1).where.recompute);
  CHECK_FALSE(back.op(0).where.recompute);
}

TEST_CASE("a graph built by hand exports in dependency order") {
  // Tensors and ops added out of order: the consumer's output id comes first.
  graph g("hand");
  auto x = g.add_tensor("x", {data_type::F32, shape{2, 2}}, tensor_kind::input);
  auto y = g.add_tensor("y", {data_type::F32, shape{2, 2}});
  auto r = g.add_tensor("r", {data_type::F32, shape{2, 2}});
  const float two[] = {2, 2, 2, 2};
  auto c = g.add_tensor("two", {data_type::F32, shape{2, 2}}, tensor_kind::constant,
                        byte_buffer::from_values(std::span<const float>(two)));
  g.add_op(op_node{"Mul", "", 17, "mul", {r, c}, {y}, {}, {}});
  g.add_op(op_node{"Relu", "", 17, "relu", {x}, {r}, {}, {}});
  g.mark_output(y);
  validate(g);

  scratch_dir dir("hand");
  ipu::onnx::save_model(g, dir.path / "hand.onnx");
  python_check(dir.path / "hand.onnx");
  auto back = ipu::onnx::load_model(dir.path / "hand.onnx", unchecked());
  CHECK(test_onnx::op_types(back) == std::vector<std::string>{"Relu", "Mul"});
  CHECK(back.tensor(back.tensor_id_of("y")).info == tensor_info{data_type::F32, shape{2, 2}});
  CHECK(back.tensor(back.tensor_id_of("two")).kind == tensor_kind::constant);
  CHECK(back.opset_version() == 17);
  // Once in import order, it is stable.
  CHECK(round_trip(back) == back);
}

}  // namespace test_export
