// Importing real models (PyTorch exports from the IPU_TEST_MODELS fixture) and models with
// problems: dynamic dimensions, bad bytes, checker failures, subgraphs, annotations, external data.
#include "ipu/onnx/import.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "ipu/onnx/export.hpp"
#include "onnx_test_util.hpp"

namespace test_import {

using namespace ipu;
using test_onnx::attr;
using test_onnx::model;
using test_onnx::node;
using test_onnx::scratch_dir;

namespace {

constexpr int f32 = ::onnx::TensorProto_DataType_FLOAT;
constexpr int i64 = ::onnx::TensorProto_DataType_INT64;
constexpr int boolean = ::onnx::TensorProto_DataType_BOOL;

ipu::onnx::import_options unchecked() {
  ipu::onnx::import_options o;
  o.check_supported = false;  // the kernel registry is filled by other components
  return o;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <class F>
error error_of(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e;
  }
  FAIL("expected an ipu::error");
  return error(error_category::internal, "unreachable");
}

/// Independent facts about a model file, computed by Python's onnx: node histogram, parameters,
/// which nodes are constant shape arithmetic (Shape of a static tensor, or integer ops on
/// constants), and every static shape ONNX's shape inference finds.
nlohmann::json python_facts(const std::filesystem::path& path) {
  const auto out = test_onnx::python(R"(
import json, sys, collections
import numpy as np, onnx
from onnx import shape_inference, numpy_helper
m = onnx.load(")" + path.string() + R"(")
inf = shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
types = {}
for v in list(inf.graph.input) + list(inf.graph.value_info) + list(inf.graph.output):
    t = v.type.tensor_type
    dims = [d.dim_value if d.HasField('dim_value') else None for d in t.shape.dim] if t.HasField('shape') else None
    types[v.name] = (t.elem_type, dims)
inits = {t.name: t for t in m.graph.initializer}
ints = {onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.BOOL}
known = set()
for n in m.graph.node:
    if n.op_type == 'Constant':
        known.add(n.output[0]); continue
foldable = set()
for n in m.graph.node:
    if n.op_type == 'Constant': continue
    out_t = types.get(n.output[0], (0, None))[0]
    if n.op_type == 'Shape':
        dims = types.get(n.input[0], (0, None))[1]
        ok = dims is not None and all(d is not None for d in dims)
    else:
        ok = out_t in ints and all(i in known for i in n.input if i)
    if ok:
        foldable.add(n.name); known.add(n.output[0])
hist = collections.Counter(n.op_type for n in m.graph.node if n.op_type != 'Constant' and n.name not in foldable)
params = sum(int(np.prod(t.dims)) for t in m.graph.initializer)
nbytes = sum(numpy_helper.to_array(t).nbytes for t in m.graph.initializer)
static = {k: v[1] for k, v in types.items() if v[1] is not None and all(d is not None for d in v[1]) and k not in known}
print(json.dumps({
  'ops': hist, 'constants': sum(n.op_type == 'Constant' for n in m.graph.node) + len(foldable),
  'folded': len(foldable), 'initializers': len(m.graph.initializer), 'params': params, 'param_bytes': nbytes,
  'tensors': len([i for i in m.graph.input if i.name not in inits]) + len(inits) +
             sum(len(n.output) for n in m.graph.node),
  'static': static,
  'inputs': [[i.name, types[i.name][1]] for i in m.graph.input if i.name not in inits],
  'outputs': [[o.name, types[o.name][1]] for o in m.graph.output]}))
)");
  return nlohmann::json::parse(out);
}

std::map<std::string, std::int64_t> histogram(const graph& g) {
  std::map<std::string, std::int64_t> h;
  for (const auto& op : g.ops()) ++h[op.type];
  return h;
}

void check_against_python(const graph& g, const nlohmann::json& facts) {
  CHECK(histogram(g) == facts["ops"].get<std::map<std::string, std::int64_t>>());
  std::int64_t params = 0, variables = 0, constants = 0;
  std::size_t bytes = 0;
  for (const auto& t : g.tensors()) {
    if (t.kind == tensor_kind::variable) {
      ++variables;
      params += t.info.num_elements();
      bytes += t.data.size();
      CHECK_MESSAGE(t.data.is_shared(), "weight '", t.name, "' was copied");
    }
    if (t.kind == tensor_kind::constant) ++constants;
  }
  CHECK(variables == facts["initializers"].get<std::int64_t>());
  CHECK(params == facts["params"].get<std::int64_t>());
  CHECK(bytes == facts["param_bytes"].get<std::size_t>());
  CHECK(constants == facts["constants"].get<std::int64_t>());
  CHECK(g.num_tensors() == facts["tensors"].get<std::size_t>());
  // Every shape ONNX infers statically agrees with the IR's.
  for (const auto& [name, dims] : facts["static"].items()) {
    auto id = g.find_tensor(name);
    REQUIRE_MESSAGE(id, "no tensor ", name);
    CHECK_MESSAGE(g.tensor(*id).info.shape == shape(dims.get<std::vector<std::int64_t>>()), name);
  }
  REQUIRE(g.inputs().size() == facts["inputs"].size());
  for (std::size_t i = 0; i < g.inputs().size(); ++i) {
    CHECK(g.tensor(g.inputs()[i]).name == facts["inputs"][i][0].get<std::string>());
    CHECK(g.tensor(g.inputs()[i]).info.shape == shape(facts["inputs"][i][1].get<std::vector<std::int64_t>>()));
  }
  REQUIRE(g.outputs().size() == facts["outputs"].size());
  for (std::size_t i = 0; i < g.outputs().size(); ++i)
    CHECK(g.tensor(g.outputs()[i]).name == facts["outputs"][i][0].get<std::string>());
  CHECK_NOTHROW(validate(g));
}

}  // namespace

TEST_CASE("torchvision AlexNet imports with every shape known and 61,100,840 parameters") {
  const auto path = test_onnx::test_model("alexnet");
  auto g = ipu::onnx::load_model(path, unchecked());
  check_against_python(g, python_facts(path));
  std::int64_t params = 0;
  for (const auto& t : g.tensors())
    if (t.kind == tensor_kind::variable) params += t.info.num_elements();
  CHECK(params == 61'100'840);  // torchvision's documented count
  CHECK(g.tensor(g.inputs()[0]).info == tensor_info{data_type::F32, shape{4, 3, 224, 224}});
  CHECK(g.tensor(g.outputs()[0]).info == tensor_info{data_type::F32, shape{4, 1000}});
  CHECK(histogram(g).at("Conv") == 5);
  CHECK(histogram(g).at("Gemm") == 3);
}

TEST_CASE("torchvision MobileNetV2 imports with every shape known") {
  const auto path = test_onnx::test_model("mobilenet_v2");
  auto g = ipu::onnx::load_model(path, unchecked());
  check_against_python(g, python_facts(path));
  CHECK(g.tensor(g.outputs()[0]).info.shape == shape{4, 1000});
  // ReLU6 is exported as Clip with min/max inputs (opset 13): both constants.
  for (const auto& op : g.ops())
    if (op.type == "Clip") {
      REQUIRE(op.inputs.size() == 3);
      CHECK(g.tensor(op.inputs[1]).kind == tensor_kind::constant);
      CHECK(g.tensor(op.inputs[2]).kind == tensor_kind::constant);
    }
}

TEST_CASE("the transformer encoder imports with its shape arithmetic folded away") {
  const auto path = test_onnx::test_model("transformer_encoder");
  auto g = ipu::onnx::load_model(path, unchecked());
  const auto facts = python_facts(path);
  CHECK(facts["folded"].get<int>() > 0);
  check_against_python(g, facts);
  CHECK(g.tensor(g.outputs()[0]).info.shape == shape{4, 16, 10});
  for (const auto& op : g.ops()) {
    CHECK(op.type != "Shape");
    CHECK(op.type != "Gather");
    for (auto t : op.outputs) CHECK(g.tensor(t).info.num_elements() > 0);
  }
  // The attention heads' Q/K/V slices of the packed projection: 64 features each.
  for (const auto& op : g.ops())
    if (op.type == "Slice") CHECK(g.tensor(op.outputs[0]).info.shape == shape{16, 4, 64});
}

TEST_CASE("the input-shape map fixes dynamic dimensions") {
  model m(13);
  m.input("x", {"batch", 3}).input("y", {"batch", 3}).output("z", {"batch", 3});
  m.add(node("Add", {"x", "y"}, {"z"}));

  auto e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), unchecked()); });
  CHECK(e.category() == error_category::shape);
  CHECK(contains(e.what(), "input 'x' has dynamic dimension 0 in [batch,3]"));
  CHECK(contains(e.what(), "input_shapes"));

  auto o = unchecked();
  o.input_shapes["x"] = {5, 3};  // fixes "batch", so y is fixed too
  auto g = ipu::onnx::load_model_from_bytes(m.bytes(), o);
  CHECK(g.tensor(g.tensor_id_of("x")).info.shape == shape{5, 3});
  CHECK(g.tensor(g.tensor_id_of("y")).info.shape == shape{5, 3});
  CHECK(g.tensor(g.tensor_id_of("z")).info.shape == shape{5, 3});

  SUBCASE("mistakes in the map are named") {
    auto bad = unchecked();
    bad.input_shapes["nope"] = {1, 3};
    auto unknown = error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), bad); });
    CHECK(contains(unknown.what(), "'nope', which is not an input"));
    CHECK(contains(unknown.what(), "'x', 'y'"));

    bad.input_shapes = {{"x", {5, 4}}};
    CHECK(contains(error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), bad); }).what(),
                   "dimension 1 = 4 but the model fixes it to 3"));
    bad.input_shapes = {{"x", {5}}};
    CHECK(contains(error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), bad); }).what(), "rank 1"));
    bad.input_shapes = {{"x", {5, 3}}, {"y", {6, 3}}};
    CHECK(contains(error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), bad); }).what(),
                   "sets dimension 'batch' to both 5 and 6"));
    bad.input_shapes = {{"x", {-1, 3}}};
    CHECK(contains(error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), bad); }).what(), "negative"));
  }
}

TEST_CASE("a tensor whose shape stays dynamic is an error naming it") {
  model m(13);
  m.input("x", {4}).output("nz", {1, "n"}, i64);
  m.add(node("NonZero", {"x"}, {"nz"}, {}, "where_nonzero"));
  auto e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), unchecked()); });
  CHECK(e.category() == error_category::shape);
  CHECK(contains(e.what(), "tensor 'nz' (output 0 of node NonZero 'where_nonzero')"));
  CHECK(contains(e.what(), "dynamic"));
}

TEST_CASE("empty, truncated, corrupt and oversized models give one clear error") {
  model m(13);
  m.input("x", {2}).output("y", {2});
  m.add(node("Relu", {"x"}, {"y"}));
  m.initializer(test_onnx::float_tensor("w", {256}, std::vector<float>(256, 1.0f)));
  const auto bytes = m.bytes();
  auto one_line = [](const error& e) {
    CHECK(e.category() == error_category::onnx);
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
    return std::string(e.what());
  };
  auto load = [&](std::string_view b) { (void)ipu::onnx::load_model_from_bytes(b, unchecked()); };

  CHECK(contains(one_line(error_of([&] { load(""); })), "empty"));
  CHECK(contains(one_line(error_of([&] { load(std::string_view(bytes).substr(0, bytes.size() / 2)); })),
                 "truncated or corrupt"));
  std::string garbage;
  for (int i = 0; i < 1000; ++i) garbage += static_cast<char>((i * 7919 + 13) % 256);
  const auto g = one_line(error_of([&] { load(garbage); }));
  CHECK((contains(g, "truncated or corrupt") || contains(g, "holds no ONNX model")));
  // Valid protobuf, but not a model.
  const auto tensor_bytes = test_onnx::float_tensor("t", {2}, {1, 2}).SerializeAsString();
  CHECK(contains(one_line(error_of([&] { load(tensor_bytes); })), "ONNX model"));

  scratch_dir dir("big");
  SUBCASE("a file over 2 GB is refused before reading it") {
    const auto big = dir.path / "big.onnx";
    { std::ofstream(big).put('x'); }
    std::filesystem::resize_file(big, (std::uint64_t{1} << 31) + 10);  // sparse: no disk used
    const auto msg = one_line(error_of([&] { (void)ipu::onnx::load_model(big, unchecked()); }));
    CHECK(contains(msg, "over protobuf's 2 GB limit"));
    CHECK(contains(msg, "external data"));
    // The same bytes in memory (mapped, never touched) are refused too.
    ipu::onnx::mapped_file mapped(big);
    auto span = mapped.bytes();
    CHECK(contains(one_line(error_of([&] {
                     load(std::string_view(reinterpret_cast<const char*>(span.data()), span.size()));
                   })),
                   "2 GB"));
  }
  SUBCASE("files") {
    CHECK(error_of([&] { (void)ipu::onnx::load_model(dir.path / "missing.onnx"); }).category() == error_category::io);
    std::ofstream(dir.path / "empty.onnx").close();
    CHECK(contains(one_line(error_of([&] { (void)ipu::onnx::load_model(dir.path / "empty.onnx"); })), "empty"));
    std::ofstream(dir.path / "half.onnx", std::ios::binary) << bytes.substr(0, bytes.size() - 100);
    const auto half_msg = one_line(error_of([&] { (void)ipu::onnx::load_model(dir.path / "half.onnx"); }));
    CHECK(contains(half_msg, "truncated"));
    CHECK(contains(half_msg, "half.onnx"));
  }
}

TEST_CASE("ONNX checker and shape inference failures are one-line onnx errors") {
  model undefined(13);
  undefined.input("x", {2}).output("y", {2});
  undefined.add(node("Add", {"x", "ghost"}, {"y"}));
  auto e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(undefined.bytes(), unchecked()); });
  CHECK(e.category() == error_category::onnx);
  CHECK(contains(e.what(), "ONNX checker"));
  CHECK(contains(e.what(), "ghost"));
  CHECK(std::string(e.what()).find('\n') == std::string::npos);

  model mismatch(13);
  mismatch.input("a", {2, 3}).input("b", {4, 5}).output("y", {2, 5});
  mismatch.add(node("MatMul", {"a", "b"}, {"y"}));
  auto s = error_of([&] { (void)ipu::onnx::load_model_from_bytes(mismatch.bytes(), unchecked()); });
  CHECK(s.category() == error_category::shape);
  CHECK(contains(s.what(), "shape inference failed"));
  CHECK(std::string(s.what()).find('\n') == std::string::npos);

  model newer(18);
  newer.input("x", {2}).output("y", {2});
  newer.add(node("Relu", {"x"}, {"y"}));
  CHECK(contains(error_of([&] { (void)ipu::onnx::load_model_from_bytes(newer.bytes(), unchecked()); }).what(),
                 "opset 18; opsets 1 to 17"));
}

TEST_CASE("weights share the parsed model's bytes and Constant nodes become constants") {
  model m(13);
  m.input("x", {2, 2}).output("y", {2, 2});
  m.initializer(test_onnx::float_tensor("w", {2, 2}, {1, 2, 3, 4}));
  m.add(node("Constant", {}, {"c"}, {attr("value", test_onnx::float_tensor("", {2, 2}, {5, 6, 7, 8}))}));
  m.add(node("Add", {"x", "w"}, {"s"}));
  m.add(node("Mul", {"s", "c"}, {"y"}));
  auto g = ipu::onnx::load_model_from_bytes(m.bytes(), unchecked());
  const auto& w = g.tensor(g.tensor_id_of("w"));
  CHECK(w.kind == tensor_kind::variable);
  CHECK(w.data.is_shared());
  CHECK(w.data.load<float>(3) == 4.0f);
  const auto& c = g.tensor(g.tensor_id_of("c"));
  CHECK(c.kind == tensor_kind::constant);
  CHECK(c.data.load<float>(0) == 5.0f);
  CHECK(test_onnx::op_types(g) == std::vector<std::string>{"Add", "Mul"});
  // The weights outlive everything but the graph.
  graph copy = g;
  g = graph();
  CHECK(copy.tensor(copy.tensor_id_of("w")).data.load<float>(2) == 3.0f);
}

TEST_CASE("Constant value_float(s) / value_int(s) forms become typed constants") {
  model m(13);
  m.input("x", {2}).output("a", {}).output("b", {2}).output("c", {}, i64).output("d", {3}, i64).output("y", {2});
  m.add(node("Constant", {}, {"a"}, {attr("value_float", 1.5f)}));
  auto floats = test_onnx::attr_floats("value_floats", {1.0f, 2.0f});
  m.add(node("Constant", {}, {"b"}, {floats}));
  m.add(node("Constant", {}, {"c"}, {attr("value_int", 7)}));
  m.add(node("Constant", {}, {"d"}, {attr("value_ints", {1, 2, 3})}));
  m.add(node("Add", {"x", "b"}, {"y"}));
  auto g = ipu::onnx::load_model_from_bytes(m.bytes(), unchecked());
  CHECK(g.tensor(g.tensor_id_of("a")).info == tensor_info{data_type::F32, {}});
  CHECK(g.tensor(g.tensor_id_of("b")).info == tensor_info{data_type::F32, shape{2}});
  CHECK(g.tensor(g.tensor_id_of("c")).data.load<std::int64_t>(0) == 7);
  CHECK(g.tensor(g.tensor_id_of("d")).data.load<std::int64_t>(2) == 3);
}

TEST_CASE("If branches and Loop bodies import recursively with their captures as inputs") {
  const model m = test_onnx::control_flow_model();
  auto g = ipu::onnx::load_model_from_bytes(m.bytes(), unchecked());
  const auto& if_op = g.op(0);
  CHECK(if_op.type == "If");
  // If's own input, then the values its branches read: x (both) and w (then), in first-use order.
  REQUIRE(if_op.inputs.size() == 3);
  CHECK(g.tensor(if_op.inputs[1]).name == "x");
  CHECK(g.tensor(if_op.inputs[2]).name == "w");
  CHECK(std::get<std::int64_t>(if_op.find_attribute("__captures")->value) == 2);
  const auto& then_body = *std::get<subgraph>(if_op.find_attribute("then_branch")->value).body;
  const auto& else_body = *std::get<subgraph>(if_op.find_attribute("else_branch")->value).body;
  REQUIRE(then_body.inputs().size() == 2);  // no formal inputs, two captures
  CHECK(then_body.tensor(then_body.inputs()[0]).name == "x");
  CHECK(then_body.tensor(then_body.inputs()[1]).info == tensor_info{data_type::F32, shape{3}});
  CHECK(else_body.inputs().size() == 2);  // same captures, unused ones included
  CHECK(else_body.num_ops() == 1);
  CHECK(else_body.op(0).type == "Neg");
  CHECK(else_body.op(0).opset == 17);

  const auto& loop = g.op(1);
  CHECK(loop.type == "Loop");
  REQUIRE(loop.inputs.size() == 4);  // M, cond (omitted), acc, then the captured y
  CHECK(loop.inputs[1] == no_tensor);
  CHECK(g.tensor(loop.inputs[3]).name == "y");
  const auto& loop_body = *std::get<subgraph>(loop.find_attribute("body")->value).body;
  REQUIRE(loop_body.inputs().size() == 4);  // i, c_in, acc, y
  CHECK(loop_body.tensor(loop_body.inputs()[3]).name == "y");
  CHECK(loop_body.tensor(loop_body.tensor_id_of("acc_out")).info.shape == shape{3});
  CHECK(g.tensor(g.tensor_id_of("final")).info.shape == shape{3});
  CHECK_NOTHROW(validate(g));
}

TEST_CASE("PopART annotation attributes become op annotations") {
  model m(13);
  m.input("x", {2}).output("y", {2});
  m.add(node("Relu", {"x"}, {"r"}, {attr("__ipu_number", 1), attr("__pipeline_stage", 2), attr("__execution_phase", 3)}));
  m.add(node("Neg", {"r"}, {"y"}, {attr("__ipu_number", 0), attr("__pipeline_stage", 0), attr("__execution_phase", 0)}));
  auto g = ipu::onnx::load_model_from_bytes(m.bytes(), unchecked());
  CHECK(g.op(0).where.ipu == 1);
  CHECK(g.op(0).where.stage == 2);
  CHECK(g.op(0).where.phase == 3);
  CHECK(g.op(0).attributes.empty());
}

TEST_CASE("PopART's __recompute_output_in_backward_pass: 1 (Checkpoint) and 2 (Recompute) mark the op; 3 (Recomputed) is refused") {
  // PopART's RecomputeType: 0 Undefined, 1 Checkpoint (Builder::checkpointOutput), 2 Recompute, 3 Recomputed.
  auto with = [](std::int64_t value) {
    model m(13);
    m.input("x", {2}).output("y", {2});
    m.add(node("Relu", {"x"}, {"r"}, {attr("__recompute_output_in_backward_pass", value)}, "relu"));
    m.add(node("Neg", {"r"}, {"y"}));
    return m;
  };
  const auto marked = ipu::onnx::load_model_from_bytes(with(1).bytes(), unchecked());
  CHECK(marked.op(0).where.checkpoint);
  CHECK(marked.op(0).attributes.empty());  // an annotation, not an op attribute
  CHECK_FALSE(marked.op(1).where.checkpoint);
  CHECK_FALSE(marked.op(0).where.recompute);
  const auto undefined = ipu::onnx::load_model_from_bytes(with(0).bytes(), unchecked());
  CHECK_FALSE(undefined.op(0).where.checkpoint);
  CHECK_FALSE(undefined.op(0).where.recompute);
  // Builder::recomputeOutputInBackwardPass: recomputed in the backward pass, not a checkpoint.
  const auto recompute = ipu::onnx::load_model_from_bytes(with(2).bytes(), unchecked());
  CHECK(recompute.op(0).where.recompute);
  CHECK_FALSE(recompute.op(0).where.checkpoint);
  CHECK(recompute.op(0).attributes.empty());
  CHECK_FALSE(recompute.op(1).where.recompute);
  // Recomputed marks the copy PopART's own backward pass makes: not an op of a forward model.
  const auto recomputed = error_of([&] { (void)ipu::onnx::load_model_from_bytes(with(3).bytes(), unchecked()); });
  CHECK_MESSAGE(contains(recomputed.what(), "3 (RecomputeType::Recomputed) marks a copy PopART made"), recomputed.what());
  CHECK(contains(recomputed.what(), "relu"));
  CHECK(contains(recomputed.what(), "mark the original op with 2 (Recompute)"));
  CHECK(contains(error_of([&] { (void)ipu::onnx::load_model_from_bytes(with(7).bytes(), unchecked()); }).what(),
                 "has the value 7, which is no RecomputeType"));
  model text(13);
  text.input("x", {2}).output("y", {2});
  text.add(node("Relu", {"x"}, {"y"}, {attr("__recompute_output_in_backward_pass", "1")}));
  CHECK(contains(error_of([&] { (void)ipu::onnx::load_model_from_bytes(text.bytes(), unchecked()); }).what(), "is not an INT"));
}

TEST_CASE("custom-domain ops import when their output types are given") {
  model m(13);
  m.import_domain("com.example", 1);
  m.input("x", {2, 2}).output("y", {2, 2});
  m.add(node("Frobnicate", {"x"}, {"f"}, {attr("strength", 3)}, "frob", "com.example"));
  m.add(node("Relu", {"f"}, {"y"}));
  *m.graph().add_value_info() = test_onnx::value("f", f32, {2, 2});
  auto g = ipu::onnx::load_model_from_bytes(m.bytes(), unchecked());
  CHECK(g.op(0).domain == "com.example");
  CHECK(g.op(0).opset == 1);
  CHECK(g.tensor(g.tensor_id_of("f")).info.shape == shape{2, 2});

  // Without the type, the error says how to fix it.
  m.graph().clear_value_info();
  CHECK(contains(error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), unchecked()); }).what(),
                 "give them in the model's value_info"));
}

TEST_CASE("external data is mapped, shared and found next to the model file") {
  scratch_dir dir("external_model");
  model m(13);
  m.input("x", {1024}).output("y", {1024});
  std::vector<float> w(1024);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5f;
  m.initializer(test_onnx::float_tensor("w", {1024}, w));
  m.add(node("Add", {"x", "w"}, {"y"}));
  auto g = ipu::onnx::load_model_from_bytes(m.bytes(), unchecked());

  ipu::onnx::save_options so;
  so.external_data = "weights.bin";
  ipu::onnx::save_model(g, dir.path / "model.onnx", so);
  CHECK(std::filesystem::file_size(dir.path / "weights.bin") == 4096);
  CHECK(std::filesystem::file_size(dir.path / "model.onnx") < 4096);

  auto back = ipu::onnx::load_model(dir.path / "model.onnx", unchecked());
  const auto& t = back.tensor(back.tensor_id_of("w"));
  CHECK(t.data.is_shared());
  CHECK(t.data.load<float>(1023) == 511.5f);
  CHECK(back == g);

  // Python's onnx reads what we wrote.
  const auto py = test_onnx::python("import onnx, numpy\nfrom onnx import numpy_helper\nm = onnx.load('" +
                                    (dir.path / "model.onnx").string() +
                                    "')\nprint(float(numpy_helper.to_array(m.graph.initializer[0]).sum()))\n");
  CHECK(std::stod(py) == doctest::Approx(0.5 * 1023 * 1024 / 2));

  // Loaded from bytes, the model needs to be told where its data lives.
  std::ifstream f(dir.path / "model.onnx", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(contains(error_of([&] { (void)ipu::onnx::load_model_from_bytes(bytes, unchecked()); }).what(), "base_dir"));
  auto o = unchecked();
  o.base_dir = dir.path;
  CHECK(ipu::onnx::load_model_from_bytes(bytes, o) == g);

  // A data file that went missing is named.
  std::filesystem::remove(dir.path / "weights.bin");
  CHECK(contains(error_of([&] { (void)ipu::onnx::load_model(dir.path / "model.onnx", unchecked()); }).what(),
                 "weights.bin"));
}

TEST_CASE("a declared shape that disagrees with what the ops compute is an error naming the tensor and both shapes") {
  // value_info: t = Relu(x) is [2,3], declared [4,5] (kernels must never size a buffer from it).
  model m(13);
  m.input("x", {2, 3}).output("y", {2, 3});
  m.add(node("Relu", {"x"}, {"t"}));
  m.add(node("Neg", {"t"}, {"y"}));
  *m.graph().add_value_info() = test_onnx::value("t", f32, {4, 5});
  auto e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), unchecked()); });
  CHECK(contains(e.what(), "tensor 't' is declared [4,5] in the model's value_info but its producer computes [2,3]"));
  CHECK(contains(e.what(), "correct it or delete it"));
  // A graph output declared with another shape.
  model o(13);
  o.input("x", {2, 3}).output("y", {7});
  o.add(node("Relu", {"x"}, {"y"}));
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(o.bytes(), unchecked()); });
  CHECK(contains(e.what(), "tensor 'y' is declared [7] in the model's graph outputs but its producer computes [2,3]"));
}

TEST_CASE("STFT with constant frame sizes imports with the spec's shape, not ONNX 1.12's") {
  // ONNX 1.12 reads onesided's default as 0 and counts frames from the bin count: [1,15,16,2] here
  // (and [1,16,9,2] with onesided = 1 given); the importer corrects it.
  for (const bool explicit_onesided : {false, true}) {
    model m(17);
    m.input("signal", {1, 128, 1}).output("y", {1, 15, 9, 2});
    m.initializer(test_onnx::int64_tensor("step", {}, {8}));
    m.initializer(test_onnx::int64_tensor("length", {}, {16}));
    if (explicit_onesided) m.add(node("STFT", {"signal", "step", "", "length"}, {"y"}, {attr("onesided", 1)}));
    else m.add(node("STFT", {"signal", "step", "", "length"}, {"y"}));
    const auto g = ipu::onnx::load_model_from_bytes(m.bytes());
    CHECK(g.tensor(*g.find_tensor("y")).info == tensor_info{data_type::F32, {1, 15, 9, 2}});
  }
  // A two-sided spectrum of a windowed complex signal; a window that disagrees with frame_length is refused.
  model m(17);
  m.input("signal", {2, 100, 2}).input("window", {20}).output("y", {2, 9, 20, 2});
  m.initializer(test_onnx::int64_tensor("step", {}, {10}));
  m.add(node("STFT", {"signal", "step", "window"}, {"y"}, {attr("onesided", 0)}));
  const auto g = ipu::onnx::load_model_from_bytes(m.bytes());
  CHECK(g.tensor(*g.find_tensor("y")).info == tensor_info{data_type::F32, {2, 9, 20, 2}});
  model bad(17);
  bad.input("signal", {1, 128, 1}).input("window", {20}).output("y", {1, 15, 9, 2});
  bad.initializer(test_onnx::int64_tensor("step", {}, {8}));
  bad.initializer(test_onnx::int64_tensor("length", {}, {16}));
  bad.add(node("STFT", {"signal", "step", "window", "length"}, {"y"}));
  CHECK_THROWS_AS((void)ipu::onnx::load_model_from_bytes(bad.bytes()), ipu::error);
}

TEST_CASE("a tensor declared twice must be declared alike, and the declaration ONNX checks is the one imported") {
  // The fuzzer's find: t is a graph output declared [2,3] (what Relu computes) and a value_info
  // declared [4,5]. ONNX's inference checks only the output's declaration; the importer sized t
  // from the value_info, and Neg wrote 20 floats into y's buffer of 6.
  model m(17);
  m.input("x", {2, 3}).output("t", {2, 3});
  m.add(node("Relu", {"x"}, {"t"}));
  m.add(node("Neg", {"t"}, {"y"}));
  *m.graph().add_value_info() = test_onnx::value("t", f32, {4, 5});
  auto e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), unchecked()); });
  CHECK(contains(e.what(), "tensor 't' is declared as FLOAT [2,3] in the model's graph outputs but as FLOAT [4,5] in its value_info"));
  CHECK(contains(e.what(), "declare each tensor alike"));
  // Element types count too.
  model typed(17);
  typed.input("x", {2, 3}).output("t", {2, 3});
  typed.add(node("Relu", {"x"}, {"t"}));
  *typed.graph().add_value_info() = test_onnx::value("t", ::onnx::TensorProto_DataType_INT64, {2, 3});
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(typed.bytes(), unchecked()); });
  CHECK(contains(e.what(), "as FLOAT [2,3] in the model's graph outputs but as INT64 [2,3] in its value_info"));
  // An output declared with symbolic sizes does not contradict the value_info, but ONNX completes the
  // output from the op ([2,3]) without reading the value_info: the next check finds the contradiction.
  model loose(17);
  loose.input("x", {2, 3}).output("t", {"n", "m"});
  loose.add(node("Relu", {"x"}, {"t"}));
  *loose.graph().add_value_info() = test_onnx::value("t", f32, {4, 5});
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(loose.bytes(), unchecked()); });
  CHECK(contains(e.what(), "tensor 't' is declared as FLOAT [2,3] in the model's graph outputs but as FLOAT [4,5] in its value_info"));
  // Without the value_info, the completed output is what the IR holds.
  loose.graph().clear_value_info();
  const auto g = ipu::onnx::load_model_from_bytes(loose.bytes(), unchecked());
  CHECK(g.tensor(g.outputs().front()).info.shape == ipu::shape{2, 3});
}

TEST_CASE("convolution ranks and attribute lengths are checked before ONNX's shape inference reads them") {
  // The fuzzer's find: ONNX 1.13's Conv inference takes the kernel's rank from the weights and reads
  // the input's dimensions past its rank (a crash inside libonnx).
  const std::vector<float> ones(9, 1.0f);
  model rank(17);
  rank.input("i", {1, 4, 4}).output("c", {1, 1, 2, 2});
  rank.initializer(test_onnx::float_tensor("k", {1, 1, 3, 3}, ones));
  rank.add(node("Conv", {"i", "k"}, {"c"}, {}, "conv"));
  auto e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(rank.bytes(), unchecked()); });
  CHECK(contains(e.what(), "Conv node 'conv': its input has rank 3 but its weights rank 4"));
  // pads with one value per spatial dimension instead of two.
  model pads(17);
  pads.input("i", {1, 1, 4, 4}).output("c", {1, 1, 4, 4});
  pads.initializer(test_onnx::float_tensor("k", {1, 1, 3, 3}, ones));
  pads.add(node("Conv", {"i", "k"}, {"c"}, {attr("pads", {1, 1})}, "conv"));
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(pads.bytes(), unchecked()); });
  CHECK(contains(e.what(), "attribute 'pads' has 2 values; the input has 2 spatial dimensions, so it needs 4"));
  // A stride of 0 and a pooling input without spatial dimensions.
  model stride(17);
  stride.input("i", {1, 1, 4, 4}).output("y", {1, 1, 4, 4});
  stride.add(node("MaxPool", {"i"}, {"y"}, {attr("kernel_shape", {2, 2}), attr("strides", {0, 1})}, "pool"));
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(stride.bytes(), unchecked()); });
  CHECK(contains(e.what(), "MaxPool node 'pool': attribute 'strides' holds 0, out of range"));
  model flat(17);
  flat.input("i", {1, 4}).output("y", {1, 4});
  flat.add(node("MaxPool", {"i"}, {"y"}, {attr("kernel_shape", {2})}, "pool"));
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(flat.bytes(), unchecked()); });
  CHECK(contains(e.what(), "its input has rank 2"));
  // The same Conv with its pads right imports.
  model good(17);
  good.input("i", {1, 1, 4, 4}).output("c", {1, 1, 4, 4});
  good.initializer(test_onnx::float_tensor("k", {1, 1, 3, 3}, ones));
  good.add(node("Conv", {"i", "k"}, {"c"}, {attr("pads", {1, 1, 1, 1})}, "conv"));
  CHECK_NOTHROW((void)ipu::onnx::load_model_from_bytes(good.bytes(), unchecked()));
  // The input's rank known only once inference has run: a Conv reading a Reshape to rank 3 while its
  // weights have rank 4 (the same read past the end inside libonnx, one node later).
  model late(17);
  late.input("i", {16}).output("c", {1, 1, 2, 2});
  late.initializer(test_onnx::int64_tensor("shape", {3}, {1, 4, 4}));
  late.initializer(test_onnx::float_tensor("k", {1, 1, 3, 3}, ones));
  late.add(node("Reshape", {"i", "shape"}, {"r"}, {}, "reshape"));
  late.add(node("Conv", {"r", "k"}, {"c"}, {}, "conv"));
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(late.bytes(), unchecked()); });
  CHECK(contains(e.what(), "Conv node: its input has rank 3 but its weights rank 4"));
  // And a pooling of a Reshape's rank-2 output.
  model late_pool(17);
  late_pool.input("i", {16}).output("y", {4, 4});
  late_pool.initializer(test_onnx::int64_tensor("shape", {2}, {4, 4}));
  late_pool.add(node("Reshape", {"i", "shape"}, {"r"}, {}, "reshape"));
  late_pool.add(node("MaxPool", {"r"}, {"y"}, {attr("kernel_shape", {2})}, "pool"));
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(late_pool.bytes(), unchecked()); });
  CHECK(contains(e.what(), "MaxPool node: its input has rank 2"));
}

TEST_CASE("a declared dimension below 0 is refused before ONNX's shape inference indexes with it") {
  // The fuzzer's find: GatherND's inference took indices' last dimension, -7, as a count and read
  // data's dimension -6 (a crash inside libonnx).
  model m(13);
  m.input("data", {2, 4, 3}, i64).input("indices", {1, -7}, i64).output("y", {2}, i64);
  m.add(node("GatherND", {"data", "indices"}, {"y"}, {attr("batch_dims", 1)}, "gather"));
  const auto e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), unchecked()); });
  CHECK(contains(e.what(), "'indices' is declared with the dimension -7"));
  // The next find: batch_dims -1 made it copy data's dimension -1.
  model negative(13);
  negative.input("data", {2, 2, 2}, i64).input("indices", {2, 0}, i64).output("y", {2, 2}, i64);
  negative.add(node("GatherND", {"data", "indices"}, {"y"}, {attr("batch_dims", -1)}, "gather"));
  const auto b = error_of([&] { (void)ipu::onnx::load_model_from_bytes(negative.bytes(), unchecked()); });
  CHECK(contains(b.what(), "GatherND node: batch_dims -1 is negative"));
}

TEST_CASE("stored tensors whose data disagrees with their dims are refused before ONNX's shape inference reads them") {
  // The fuzzer's second find: Range's inference reads its scalar bounds with ONNX's ParseData, which
  // copies 8 bytes from a raw_data of 3 (a crash inside libonnx).
  const auto range = [](::onnx::TensorProto limit) {
    model m(17);
    m.output("y", {5}, i64);
    m.initializer(test_onnx::int64_tensor("start", {}, {0}));
    m.initializer(std::move(limit));
    m.initializer(test_onnx::int64_tensor("delta", {}, {1}));
    m.add(node("Range", {"start", "limit", "delta"}, {"y"}, {}, "range"));
    return m;
  };
  auto short_raw = test_onnx::int64_tensor("limit", {}, {5});
  short_raw.clear_int64_data();
  short_raw.set_raw_data(std::string(3, '\0'));
  auto e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(range(short_raw).bytes(), unchecked()); });
  CHECK(contains(e.what(), "initializer 'limit' has 3 bytes of raw_data but its dims and type need 8"));
  // The same in a typed field: two values for a scalar.
  e = error_of([&] {
    (void)ipu::onnx::load_model_from_bytes(range(test_onnx::int64_tensor("limit", {}, {5, 6})).bytes(), unchecked());
  });
  CHECK(contains(e.what(), "initializer 'limit' has 2 int64_data values but its dims and type need 1"));
  // A Constant node's value inside an If branch is checked as well.
  auto value = test_onnx::float_tensor("v", {2, 2}, {1, 2, 3, 4});
  value.clear_raw_data();
  value.add_float_data(1);
  ::onnx::GraphProto branch;
  branch.set_name("then");
  *branch.add_node() = node("Constant", {}, {"c"}, {}, "const");
  auto* a = branch.mutable_node(0)->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  *a->mutable_t() = value;
  auto* out = branch.add_output();
  out->set_name("c");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
  model nested(17);
  nested.input("cond", {}, ::onnx::TensorProto::BOOL).output("y", {2, 2});
  auto iff = node("If", {"cond"}, {"y"}, {}, "if");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* g = iff.add_attribute();
    g->set_name(name);
    g->set_type(::onnx::AttributeProto::GRAPH);
    *g->mutable_g() = branch;
  }
  nested.add(iff);
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(nested.bytes(), unchecked()); });
  CHECK(contains(e.what(), "attribute 'value' of Constant node 'const', tensor 'v' has 1 float_data values but its dims "
                           "and type need 4"));
  // Correct data imports.
  CHECK_NOTHROW((void)ipu::onnx::load_model_from_bytes(range(test_onnx::int64_tensor("limit", {}, {5})).bytes(), unchecked()));
}

TEST_CASE("subgraphs nested past protobuf's depth limit are reported as such, not as corrupt bytes") {
  // 40 levels of If, each then-branch the next level; the innermost returns a constant.
  ::onnx::GraphProto g;
  g.set_name("level40");
  auto* c = g.add_node();
  c->set_op_type("Constant");
  c->add_output("c40");
  auto* v = c->add_attribute();
  v->set_name("value_float");
  v->set_type(::onnx::AttributeProto_AttributeType_FLOAT);
  v->set_f(1.0f);
  *g.add_output() = test_onnx::value("c40", f32, {});
  for (int level = 39; level >= 0; --level) {
    ::onnx::GraphProto outer;
    outer.set_name("level" + std::to_string(level));
    auto* n = outer.add_node();
    n->set_op_type("If");
    n->add_input("b");
    n->add_output("c" + std::to_string(level));
    auto* then_a = n->add_attribute();
    then_a->set_name("then_branch");
    then_a->set_type(::onnx::AttributeProto_AttributeType_GRAPH);
    auto* else_a = n->add_attribute();  // shallow (the parse fails before it is checked): a copy of the deep one doubles it
    else_a->set_name("else_branch");
    else_a->set_type(::onnx::AttributeProto_AttributeType_GRAPH);
    else_a->mutable_g()->set_name("shallow" + std::to_string(level));
    *then_a->mutable_g() = std::move(g);
    *outer.add_output() = test_onnx::value("c" + std::to_string(level), f32, {});
    g = std::move(outer);
  }
  model m(13);
  *m.graph().mutable_node() = g.node();
  m.input("b", {}, ::onnx::TensorProto_DataType_BOOL).output("c0", {});
  const auto e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(m.bytes(), unchecked()); });
  CHECK(contains(e.what(), "nests messages deeper than protobuf's limit of 100"));
  CHECK_FALSE(contains(e.what(), "truncated or corrupt"));
}

TEST_CASE("import_options::max_tensor_bytes caps every tensor the model would make, subgraphs included") {
  // A 60-byte model asking for a 16 GiB tensor: refused at import, before any allocation.
  const auto expand = [](std::vector<std::int64_t> to) {
    model m(17);
    m.input("x", {1}).output("y", {to[0], to[1]});
    m.initializer(test_onnx::int64_tensor("to", {2}, to));
    m.add(node("Expand", {"x", "to"}, {"y"}, {}, "expand"));
    return m;
  };
  auto e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(expand({1 << 20, 1 << 12}).bytes(), unchecked()); });
  CHECK(contains(e.what(), "tensor 'y' is F32[1048576,4096], 17179869184 bytes (16384 MiB), more than the 4294967296 bytes (4096 MiB) any one tensor may hold"));
  auto o = unchecked();
  o.max_tensor_bytes = 1000;
  CHECK_NOTHROW((void)ipu::onnx::load_model_from_bytes(expand({10, 25}).bytes(), o));
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(expand({10, 26}).bytes(), o); });
  CHECK(contains(e.what(), "tensor 'y' is F32[10,26], 1040 bytes (0 MiB), more than the 1000 bytes (0 MiB)"));
  // Inside an If branch: the branch expands the outer x and sums it to a scalar.
  ::onnx::GraphProto then_branch, else_branch;
  then_branch.set_name("then");
  *then_branch.add_initializer() = test_onnx::int64_tensor("to", {2}, {10, 26});
  *then_branch.add_node() = node("Expand", {"x", "to"}, {"big"}, {}, "inner_expand");
  *then_branch.add_node() = node("ReduceSum", {"big"}, {"s"}, {attr("keepdims", 0)}, "sum");
  *then_branch.add_output() = test_onnx::value("s", f32, {});
  else_branch.set_name("else");
  *else_branch.add_node() = node("ReduceSum", {"x"}, {"t"}, {attr("keepdims", 0)}, "sum_x");
  *else_branch.add_output() = test_onnx::value("t", f32, {});
  model nested(17);
  nested.input("cond", {}, boolean).input("x", {1}).output("y", {});
  auto iff = node("If", {"cond"}, {"y"}, {}, "if");
  for (auto* branch : {&then_branch, &else_branch}) {
    auto* g = iff.add_attribute();
    g->set_name(branch == &then_branch ? "then_branch" : "else_branch");
    g->set_type(::onnx::AttributeProto::GRAPH);
    *g->mutable_g() = *branch;
  }
  nested.add(iff);
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(nested.bytes(), o); });
  CHECK(contains(e.what(), "tensor 'big' is F32[10,26], 1040 bytes"));
  CHECK(contains(e.what(), "a subgraph of If node 'if'"));
  o.max_tensor_bytes = 1040;
  CHECK_NOTHROW((void)ipu::onnx::load_model_from_bytes(nested.bytes(), o));
  // A declared input over the cap is refused before ONNX's inference builds anything from it (the
  // fuzzer's find: Expand's shape operand declared with 2^32 entries exhausted memory in libonnx).
  const auto expand_by = [](std::int64_t length) {
    model m(17);
    m.input("x", {1}).input("to", {length}, i64).output("y", {1});
    m.add(node("Expand", {"x", "to"}, {"y"}, {}, "expand"));
    return m;
  };
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(expand_by(std::int64_t{1} << 32).bytes(), unchecked()); });
  CHECK(contains(e.what(), "input 'to' is declared [4294967296], 34359738368 bytes (32768 MiB), more than the"));
  // Under the cap, a shape operand still cannot ask for more than 64 dimensions.
  e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(expand_by(100).bytes(), unchecked()); });
  CHECK(contains(e.what(), "Expand node 'expand': its shape operand 'to' has 100 entries"));
  CHECK(contains(e.what(), "at most 64 are supported"));
}

TEST_CASE("import_options::max_model_bytes caps the model and its external data before either is read") {
  scratch_dir dir("model_cap");
  model m(13);
  m.input("x", {1024}).output("y", {1024});
  m.initializer(test_onnx::float_tensor("w", {1024}, std::vector<float>(1024, 2.0f)));
  m.add(node("Add", {"x", "w"}, {"y"}));
  const auto bytes = m.bytes();
  auto o = unchecked();
  o.max_model_bytes = bytes.size();
  const auto g = ipu::onnx::load_model_from_bytes(bytes, o);  // exactly at the cap: read
  o.max_model_bytes = bytes.size() - 1;
  auto e = error_of([&] { (void)ipu::onnx::load_model_from_bytes(bytes, o); });
  CHECK(contains(e.what(), "the model holds " + std::to_string(bytes.size()) + " bytes"));
  CHECK(contains(e.what(), "over the cap of " + std::to_string(bytes.size() - 1) + " bytes"));
  CHECK(contains(e.what(), "raise import_options::max_model_bytes"));

  // From a file: refused on its size, before parsing.
  {
    std::ofstream(dir.path / "m.onnx", std::ios::binary) << bytes;
  }
  CHECK(contains(error_of([&] { (void)ipu::onnx::load_model(dir.path / "m.onnx", o); }).what(), "over the cap"));

  // External data counts as its declared size, before the file is opened: here it does not even exist.
  ipu::onnx::save_options so;
  so.external_data = "weights.bin";
  ipu::onnx::save_model(g, dir.path / "ext.onnx", so);
  std::filesystem::remove(dir.path / "weights.bin");
  o.max_model_bytes = 4096;  // the model file is small, its 4096 bytes of data take it over
  e = error_of([&] { (void)ipu::onnx::load_model(dir.path / "ext.onnx", o); });
  CHECK(contains(e.what(), "4096 of external data"));
  CHECK_FALSE(contains(e.what(), "weights.bin"));
  // A declared 2^40-byte external tensor is refused by the default cap.
  ::onnx::ModelProto big;
  REQUIRE(big.ParseFromString(bytes));
  auto* w = big.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->clear_raw_data();
  w->clear_dims();
  w->add_dims(std::int64_t{1} << 38);
  w->set_data_location(::onnx::TensorProto_DataLocation_EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value("huge.bin");
  o = unchecked();
  o.base_dir = dir.path;
  CHECK(contains(error_of([&] { (void)ipu::onnx::load_model_from_bytes(big.SerializeAsString(), o); }).what(),
                 std::to_string(std::uint64_t{1} << 40) + " of external data"));
}

TEST_CASE("external data must be a regular file inside the model's folder, whatever its links say") {
  scratch_dir dir("external_links");
  scratch_dir outside("external_outside");
  model m(13);
  m.input("x", {1024}).output("y", {1024});
  m.initializer(test_onnx::float_tensor("w", {1024}, std::vector<float>(1024, 2.0f)));
  m.add(node("Add", {"x", "w"}, {"y"}));
  const auto g = ipu::onnx::load_model_from_bytes(m.bytes(), unchecked());
  ipu::onnx::save_options so;
  so.external_data = "weights.bin";
  ipu::onnx::save_model(g, dir.path / "model.onnx", so);
  const auto data = dir.path / "weights.bin";
  const auto load = [&] { return error_of([&] { (void)ipu::onnx::load_model(dir.path / "model.onnx", unchecked()); }); };

  // A link to a file inside the folder is followed: it is the model's own data.
  std::filesystem::rename(data, dir.path / "real.bin");
  std::filesystem::create_symlink("real.bin", data);
  CHECK(ipu::onnx::load_model(dir.path / "model.onnx", unchecked()) == g);

  // A link out of the folder reads nothing and tells nothing: a file of the right size, of another
  // size, and no file at all give the same error, which names neither the target nor its size.
  for (const auto& [name, bytes] : {std::pair<std::string, std::size_t>{"same.bin", 4096}, {"other.bin", 10}, {"none.bin", 0}}) {
    if (bytes) std::ofstream(outside.path / name, std::ios::binary) << std::string(bytes, 'x');
    std::filesystem::remove(data);
    std::filesystem::create_symlink(outside.path / name, data);
    const auto e = load();
    INFO(name, ": ", std::string(e.what()));
    CHECK(contains(e.what(), "'weights.bin' does not name a file inside the model's directory"));
    CHECK_FALSE(contains(e.what(), outside.path.string()));
    CHECK_FALSE(contains(e.what(), std::to_string(bytes) + " bytes"));
  }
  // So does a link through a linked directory.
  std::filesystem::remove(data);
  std::filesystem::create_directory_symlink(outside.path, dir.path / "sub");
  so.external_data = "sub/same.bin";
  ipu::onnx::save_model(g, dir.path / "model.onnx", so);  // the data goes through the link, outside
  CHECK(contains(load().what(), "'sub/same.bin' does not name a file inside the model's directory"));

  // A FIFO or a directory inside the folder is refused without blocking on it.
  so.external_data = "weights.bin";
  ipu::onnx::save_model(g, dir.path / "model.onnx", so);
  std::filesystem::remove(data);
  REQUIRE(::mkfifo(data.c_str(), 0600) == 0);
  CHECK(contains(load().what(), "pipe (FIFO), not a regular file"));
  std::filesystem::remove(data);
  std::filesystem::create_directory(data);
  CHECK(contains(load().what(), "directory, not a regular file"));
}

TEST_CASE("PopART's plan annotations import as the op's own, and bad ones are refused naming the op") {
  model m(13);
  m.input("x", {4, 8}).input("w", {8, 6}).output("y", {4, 6});
  m.add(node("MatMul", {"x", "w"}, {"y"},
             {attr("__serialize_matmul_mode", "reducing_dim"), attr("__serialize_matmul_factor", 2),
              attr("__available_memory_proportion", 0.25f)},
             "mm"));
  const auto g = ipu::onnx::load_model_from_bytes(m.bytes());
  const auto s = ipu::op_matmul_serialization(g.op(0));
  CHECK(s.mode == ipu::matmul_serialization_mode::reducing_dim);
  CHECK(s.factor == 2);
  CHECK(ipu::op_available_memory_proportion(g.op(0)) == doctest::Approx(0.25));

  model bad(13);
  bad.input("x", {4, 8}).output("y", {4, 8});
  bad.add(node("Relu", {"x"}, {"y"}, {attr("__available_memory_proportion", 0.5f)}, "relu"));
  try {
    (void)ipu::onnx::load_model_from_bytes(bad.bytes());
    FAIL("a Relu with an available memory proportion was imported");
  } catch (const ipu::error& e) {
    CHECK(std::string(e.what()).find("__available_memory_proportion is set on a Relu") != std::string::npos);
    CHECK(std::string(e.what()).find("'relu'") != std::string::npos);
  }
}

}  // namespace test_import
