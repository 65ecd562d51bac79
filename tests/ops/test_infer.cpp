#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ipu/graph/graph.hpp"
#include "ipu/ops/infer.hpp"

namespace test_infer {

namespace {

using ipu::data_type;
using ints = std::vector<std::int64_t>;

// --- one op, its inputs and attributes ------------------------------------------------------------
struct input_spec {
  bool omitted = false;
  ipu::tensor_info info{};
  std::optional<ints> values{};  // S64 contents, for shape-like inputs
};

input_spec in(data_type t, ipu::shape s) { return {false, {t, std::move(s)}, std::nullopt}; }
input_spec f32(ipu::shape s) { return in(data_type::F32, std::move(s)); }
input_spec values(const ints& v) {  // a 1-D int64 constant
  return {false, {data_type::S64, ipu::shape{static_cast<std::int64_t>(v.size())}}, v};
}
input_spec scalar_value(std::int64_t v) { return {false, {data_type::S64, ipu::shape{}}, ints{v}}; }
input_spec none() { return {true, {}, std::nullopt}; }

ipu::attribute attr(std::string name, std::int64_t v) { return {std::move(name), v}; }
ipu::attribute attr(std::string name, float v) { return {std::move(name), v}; }
ipu::attribute attr(std::string name, ints v) { return {std::move(name), std::move(v)}; }
ipu::attribute attr(std::string name, const char* v) { return {std::move(name), std::string(v)}; }

struct infer_case {
  std::string op{};
  std::int64_t opset = 13;
  std::vector<input_spec> inputs{};
  std::vector<ipu::attribute> attrs{};
  std::size_t num_outputs = 1;
  bool torch_reference = false;  // PyTorch's pooling instead of ONNX's shape inference
};

/// Runs our inference on a case; holds the buffers the infer_inputs point at.
std::vector<ipu::tensor_info> ours(const infer_case& c, std::string_view name = "case") {
  ipu::op_node op{c.op, "", c.opset, std::string(name), {}, {}, c.attrs, {}};
  std::vector<ipu::byte_buffer> data(c.inputs.size());
  std::vector<ipu::infer_input> in;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    const auto& s = c.inputs[i];
    if (s.omitted) {
      in.push_back({});
      continue;
    }
    if (s.values) data[i] = ipu::byte_buffer::from_values<std::int64_t>(*s.values);
    in.push_back({&s.info, s.values ? &data[i] : nullptr});
  }
  return ipu::infer_outputs(op, in, c.num_outputs);
}

// --- ONNX / PyTorch reference ---------------------------------------------------------------------
// ONNX TensorProto element type codes (onnx.proto), written out independently of the library's.
int onnx_code(data_type t) {
  switch (t) {
    case data_type::F32: return 1;
    case data_type::U8: return 2;
    case data_type::S8: return 3;
    case data_type::S32: return 6;
    case data_type::S64: return 7;
    case data_type::BOOL: return 9;
    case data_type::F16: return 10;
    case data_type::F64: return 11;
    default: FAIL("no ONNX code in this test for " << ipu::to_string(t)); return 0;
  }
}

nlohmann::json to_json(const infer_case& c) {
  nlohmann::json j;
  j["op"] = c.op;
  j["opset"] = c.opset;
  j["num_outputs"] = c.num_outputs;
  j["reference"] = c.torch_reference ? "torch" : "onnx";
  j["inputs"] = nlohmann::json::array();
  for (const auto& s : c.inputs) {
    if (s.omitted) {
      j["inputs"].push_back(nullptr);
      continue;
    }
    nlohmann::json e{{"type", onnx_code(s.info.type)}, {"shape", s.info.shape.dims()}};
    if (s.values) e["values"] = *s.values;
    j["inputs"].push_back(e);
  }
  j["attrs"] = nlohmann::json::array();
  for (const auto& a : c.attrs) {
    nlohmann::json e{{"name", a.name}};
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::int64_t>) e["kind"] = "i", e["value"] = v;
          else if constexpr (std::is_same_v<V, float>) e["kind"] = "f", e["value"] = v;
          else if constexpr (std::is_same_v<V, std::string>) e["kind"] = "s", e["value"] = v;
          else if constexpr (std::is_same_v<V, ints>) e["kind"] = "ints", e["value"] = v;
          else if constexpr (std::is_same_v<V, ipu::constant_tensor>) {
            REQUIRE(v.info.type == data_type::F32);
            std::vector<float> vals;
            for (std::int64_t k = 0; k < v.info.num_elements(); ++k) vals.push_back(v.data.template load<float>(k));
            e["kind"] = "t";
            e["value"] = {{"type", 1}, {"shape", v.info.shape.dims()}, {"values", vals}};
          } else FAIL("attribute kind not used in these tests");
        },
        a.value);
    j["attrs"].push_back(e);
  }
  return j;
}

/// Asks tests/ops/infer_reference.py for every case's outputs (one Python run for all).
nlohmann::json reference(const std::vector<infer_case>& cases) {
  const auto dir = std::filesystem::temp_directory_path() / ("ipu_infer_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  const auto in_path = dir / "cases.json", out_path = dir / "results.json";
  {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& c : cases) all.push_back(to_json(c));
    std::ofstream(in_path) << all.dump();
  }
  const std::string cmd = std::string(IPU_PYTHON) + " " + IPU_SOURCE_DIR + "/tests/ops/infer_reference.py " +
                          in_path.string() + " " + out_path.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  nlohmann::json results;
  std::ifstream(out_path) >> results;
  std::filesystem::remove_all(dir);
  REQUIRE(results.size() == cases.size());
  return results;
}

std::string describe(const infer_case& c) {
  std::string s = c.op + " opset " + std::to_string(c.opset) + " (";
  for (const auto& i : c.inputs) s += (i.omitted ? std::string("none") : ipu::to_string(i.info)) + " ";
  return s + ")";
}

void check_against_reference(const std::vector<infer_case>& cases) {
  const auto ref = reference(cases);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    INFO("case #" << i << ": " << describe(c) << " reference " << ref[i].dump());
    if (ref[i].contains("error")) {
      CHECK_THROWS_AS(ours(c), ipu::error);
      continue;
    }
    std::vector<ipu::tensor_info> got;
    REQUIRE_NOTHROW(got = ours(c));
    const auto& want = ref[i]["outputs"];
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      CHECK(onnx_code(got[k].type) == want[k]["type"].get<int>());
      CHECK(ipu::to_string(got[k].shape) == ipu::to_string(ipu::shape(want[k]["shape"].get<ints>())));
    }
  }
}

constexpr auto big = std::numeric_limits<std::int64_t>::max();

}  // namespace

TEST_CASE("element-wise ops broadcast like numpy, against ONNX shape inference") {
  check_against_reference({
      {"Add", 13, {f32({2, 3, 4}), f32({4})}},
      {"Mul", 13, {f32({2, 1, 4}), f32({3, 1})}},
      {"Sub", 13, {f32({}), f32({5})}},
      {"Div", 13, {f32({2, 1}), f32({0})}},
      {"Add", 13, {f32({2, 3}), f32({4})}},  // incompatible
      {"Equal", 13, {in(data_type::S64, {2, 3}), in(data_type::S64, {3})}},
      {"Less", 13, {f32({4, 1}), f32({1, 5})}},
      {"And", 13, {in(data_type::BOOL, {3}), in(data_type::BOOL, {2, 1})}},
      {"Where", 13, {in(data_type::BOOL, {2, 1}), f32({3}), f32({2, 3})}},
      {"Pow", 13, {f32({2, 3}), in(data_type::S64, {})}},
      {"Sum", 13, {f32({3, 1}), f32({1, 4}), f32({4})}},
      {"Max", 13, {f32({5}), f32({5, 1}), f32({1})}},
      {"PRelu", 13, {f32({2, 3, 4, 4}), f32({3, 1, 1})}},
      {"Relu", 13, {f32({2, 3})}},
      {"Tanh", 13, {in(data_type::F16, {7})}},
      {"LeakyRelu", 13, {f32({1, 2, 3})}, {attr("alpha", 0.1f)}},
      {"Softmax", 13, {f32({2, 3, 4})}, {attr("axis", std::int64_t{1})}},
      {"LogSoftmax", 13, {f32({2, 3})}},
      {"Cast", 13, {f32({2, 3})}, {attr("to", std::int64_t{10})}},
      {"CastLike", 15, {f32({2, 3}), in(data_type::S32, {})}},
      {"Clip", 13, {f32({4, 4}), f32({}), f32({})}},
      {"Clip", 13, {f32({4, 4}), none(), f32({})}},
      {"Dropout", 13, {f32({2, 5})}, {}, 2},
      {"Identity", 13, {in(data_type::S8, {3, 0})}},
      {"Not", 13, {in(data_type::BOOL, {2})}},
      {"IsNaN", 13, {f32({2, 2})}},
      {"CumSum", 13, {f32({3, 4}), scalar_value(1)}},
  });
}

TEST_CASE("MatMul and Gemm, against ONNX shape inference") {
  check_against_reference({
      {"MatMul", 13, {f32({2, 3}), f32({3, 4})}},
      {"MatMul", 13, {f32({3}), f32({3, 4})}},
      {"MatMul", 13, {f32({2, 3}), f32({3})}},
      {"MatMul", 13, {f32({3}), f32({3})}},
      {"MatMul", 13, {f32({5, 1, 2, 3}), f32({4, 3, 6})}},
      {"MatMul", 13, {f32({2, 3, 4}), f32({4})}},
      {"MatMul", 13, {f32({7}), f32({2, 7, 3})}},
      {"MatMul", 13, {f32({2, 3}), f32({4, 5})}},        // inner mismatch
      {"MatMul", 13, {f32({2, 2, 3}), f32({3, 3, 4})}},  // batch mismatch
      {"Gemm", 13, {f32({3, 4}), f32({5, 4}), f32({5})}, {attr("transB", std::int64_t{1})}},
      {"Gemm", 13, {f32({4, 3}), f32({4, 5}), f32({1, 5})}, {attr("transA", std::int64_t{1})}},
      {"Gemm", 13, {f32({2, 3}), f32({3, 4})}},
      {"Gemm", 13, {f32({4, 3}), f32({5, 4})}, {attr("transA", std::int64_t{1}), attr("transB", std::int64_t{1})}},
  });
}

TEST_CASE("Conv and ConvTranspose: pads, strides, dilations, groups, auto_pad") {
  check_against_reference({
      {"Conv", 13, {f32({1, 3, 32, 32}), f32({8, 3, 3, 3})}, {attr("pads", ints{1, 1, 1, 1}), attr("strides", ints{2, 2})}},
      {"Conv", 13, {f32({2, 4, 10, 10}), f32({6, 2, 3, 3})}, {attr("group", std::int64_t{2}), attr("dilations", ints{2, 2})}},
      {"Conv", 13, {f32({1, 1, 7, 7}), f32({1, 1, 3, 3})}, {attr("auto_pad", "SAME_UPPER"), attr("strides", ints{2, 2})}},
      {"Conv", 13, {f32({1, 1, 7, 7}), f32({1, 1, 4, 4})}, {attr("auto_pad", "SAME_LOWER")}},
      {"Conv", 13, {f32({1, 1, 7, 8}), f32({2, 1, 3, 3})}, {attr("auto_pad", "VALID"), attr("strides", ints{2, 2})}},
      {"Conv", 13, {f32({1, 2, 10}), f32({4, 2, 3})}, {attr("strides", ints{3}), attr("pads", ints{1, 0})}},
      {"Conv", 13, {f32({1, 1, 4, 5, 6}), f32({2, 1, 2, 2, 2})}},
      {"Conv", 13, {f32({1, 4, 5, 5}), f32({4, 1, 3, 3}), f32({4})},
       {attr("group", std::int64_t{4}), attr("pads", ints{1, 1, 1, 1}), attr("kernel_shape", ints{3, 3})}},
      {"Conv", 13, {f32({1, 3, 9, 11}), f32({5, 3, 2, 4})}, {attr("pads", ints{0, 1, 2, 3}), attr("strides", ints{3, 2})}},
      {"ConvTranspose", 13, {f32({1, 2, 4, 4}), f32({2, 3, 3, 3})}, {attr("strides", ints{2, 2})}},
      {"ConvTranspose", 13, {f32({1, 2, 4, 4}), f32({2, 3, 3, 3})},
       {attr("strides", ints{2, 2}), attr("pads", ints{1, 1, 1, 1}), attr("output_padding", ints{1, 1})}},
      {"ConvTranspose", 13, {f32({1, 4, 5}), f32({4, 1, 3})}, {attr("group", std::int64_t{2}), attr("dilations", ints{2})}},
  });
}

TEST_CASE("pooling, against ONNX and (for ceil_mode) PyTorch") {
  auto pool = [](const char* op, ipu::shape x, ints k, ints s, ints p, bool ceil, bool torch) {
    infer_case c{op, 13, {f32(std::move(x))}, {attr("kernel_shape", std::move(k))}};
    if (!s.empty()) c.attrs.push_back(attr("strides", std::move(s)));
    if (!p.empty()) c.attrs.push_back(attr("pads", std::move(p)));
    if (ceil) c.attrs.push_back(attr("ceil_mode", std::int64_t{1}));
    c.torch_reference = torch;
    return c;
  };
  std::vector<infer_case> cases{
      pool("MaxPool", {1, 3, 9, 9}, {3, 3}, {2, 2}, {}, false, false),
      pool("AveragePool", {1, 3, 7, 7}, {2, 2}, {2, 2}, {1, 1, 1, 1}, false, false),
      pool("MaxPool", {2, 4, 11}, {3}, {2}, {1, 0}, false, false),
      pool("MaxPool", {1, 1, 8, 8}, {3, 3}, {2, 2}, {0, 0, 1, 1}, true, false),
      // ceil_mode windows that would start in the trailing padding are dropped (PyTorch, ORT).
      pool("MaxPool", {1, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1, 1, 1}, true, true),
      pool("MaxPool", {1, 1, 6, 6}, {3, 3}, {2, 2}, {}, true, true),
      pool("AveragePool", {1, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1, 1, 1}, true, true),
      pool("AveragePool", {1, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, true, true),
      pool("MaxPool", {1, 1, 10, 13}, {3, 3}, {3, 3}, {1, 1, 1, 1}, true, true),
      pool("AveragePool", {2, 3, 112, 112}, {3, 3}, {2, 2}, {}, true, true),
      {"MaxPool", 13, {f32({1, 1, 10, 10})}, {attr("kernel_shape", ints{3, 3}), attr("dilations", ints{2, 2})}},
      {"MaxPool", 13, {f32({1, 1, 4, 4})}, {attr("kernel_shape", ints{2, 2}), attr("strides", ints{2, 2})}, 2},
      {"MaxPool", 13, {f32({1, 1, 7, 7})}, {attr("kernel_shape", ints{2, 2}), attr("auto_pad", "SAME_UPPER"),
                                            attr("strides", ints{2, 2})}},
      {"GlobalAveragePool", 13, {f32({2, 3, 7, 5})}},
      {"GlobalMaxPool", 13, {f32({2, 3, 4})}},
  };
  check_against_reference(cases);
}

TEST_CASE("normalisation ops, against ONNX shape inference") {
  check_against_reference({
      {"BatchNormalization", 13, {f32({2, 3, 4, 4}), f32({3}), f32({3}), f32({3}), f32({3})}},
      {"BatchNormalization", 15, {f32({2, 3}), f32({3}), f32({3}), f32({3}), f32({3})},
       {attr("training_mode", std::int64_t{1})}, 3},
      {"LayerNormalization", 17, {f32({2, 5, 8}), f32({8}), f32({8})}, {}, 3},
      {"LayerNormalization", 17, {f32({2, 5, 8}), f32({5, 8})}, {attr("axis", std::int64_t{1})}, 3},
      {"InstanceNormalization", 13, {f32({2, 3, 4}), f32({3}), f32({3})}},
  });
}

TEST_CASE("shape and data-movement ops, against ONNX shape inference") {
  check_against_reference({
      {"Reshape", 13, {f32({2, 3, 4}), values({0, -1})}},
      {"Reshape", 13, {f32({2, 3, 4}), values({4, -1, 2})}},
      {"Reshape", 13, {f32({2, 3, 4}), values({24})}},
      {"Reshape", 14, {f32({0, 3}), values({3, 0})}, {attr("allowzero", std::int64_t{1})}},
      {"Reshape", 13, {f32({2, 3}), values({4, -1})}},  // 6 elements do not divide into 4
      {"Transpose", 13, {f32({2, 3, 4})}},
      {"Transpose", 13, {f32({2, 3, 4})}, {attr("perm", ints{1, 0, 2})}},
      {"Flatten", 13, {f32({2, 3, 4})}, {attr("axis", std::int64_t{0})}},
      {"Flatten", 13, {f32({2, 3, 4})}, {attr("axis", std::int64_t{-1})}},
      {"Flatten", 13, {f32({2, 3, 4})}, {attr("axis", std::int64_t{3})}},
      {"Flatten", 13, {f32({2, 3, 4, 5})}},
      {"Concat", 13, {f32({2, 3}), f32({2, 5})}, {attr("axis", std::int64_t{1})}},
      {"Concat", 13, {f32({2, 3}), f32({4, 3}), f32({1, 3})}, {attr("axis", std::int64_t{-2})}},
      {"Concat", 13, {f32({2, 3}), f32({3, 3})}, {attr("axis", std::int64_t{1})}},  // mismatch
      {"Split", 13, {f32({4, 5}), values({2, 3})}, {attr("axis", std::int64_t{1})}, 2},
      {"Split", 13, {f32({6, 2})}, {}, 3},
      {"Split", 11, {f32({6, 2})}, {attr("split", ints{1, 5})}, 2},
      {"Squeeze", 13, {f32({3, 1, 4, 1}), values({1, -1})}},
      {"Squeeze", 13, {f32({1, 3, 1})}},
      {"Squeeze", 11, {f32({1, 3, 1})}, {attr("axes", ints{0})}},
      {"Unsqueeze", 13, {f32({2, 3}), values({0, 3})}},
      {"Unsqueeze", 13, {f32({2, 3}), values({-1})}},
      {"Unsqueeze", 11, {f32({2, 3})}, {attr("axes", ints{1})}},
      {"Gather", 13, {f32({3, 4, 5}), in(data_type::S64, {2, 6})}, {attr("axis", std::int64_t{1})}},
      {"Gather", 13, {f32({3, 4}), in(data_type::S32, {})}},
      {"Shape", 13, {f32({2, 3, 4})}},
      {"Shape", 15, {f32({2, 3, 4})}, {attr("start", std::int64_t{1})}},
      {"Shape", 15, {f32({2, 3, 4})}, {attr("start", std::int64_t{-2}), attr("end", std::int64_t{-1})}},
      {"Size", 13, {f32({2, 3, 4})}},
      {"ConstantOfShape", 13, {values({2, 3})}},
      {"Expand", 13, {f32({3, 1}), values({2, 1, 4})}},
      {"Expand", 13, {f32({3, 2}), values({4})}},  // incompatible
      {"Tile", 13, {f32({2, 3}), values({2, 2})}},
      {"Slice", 13, {f32({10, 20}), values({1, -5}), values({100, -1}), values({0, 1}), values({3, 1})}},
      {"Slice", 13, {f32({10, 20}), values({-1}), values({-1000}), values({0}), values({-2})}},
      {"Slice", 13, {f32({10, 20}), values({0}), values({big}), values({1})}},
      {"Slice", 13, {f32({10, 20}), values({5}), values({2})}},  // empty
      {"Pad", 13, {f32({2, 3}), values({1, 2, 0, 3})}},
      {"Pad", 13, {f32({2, 3}), values({-1, 0, 0, 1})}},
  });
}

TEST_CASE("reductions, against ONNX shape inference") {
  check_against_reference({
      {"ReduceMean", 13, {f32({2, 3, 4})}, {attr("axes", ints{1}), attr("keepdims", std::int64_t{0})}},
      {"ReduceSum", 13, {f32({2, 3, 4}), values({0, 2})}},
      {"ReduceSum", 13, {f32({2, 3, 4}), values({-1})}, {attr("keepdims", std::int64_t{0})}},
      {"ReduceMax", 13, {f32({2, 3, 4})}},
      {"ReduceL2", 13, {f32({2, 3, 4})}, {attr("keepdims", std::int64_t{0})}},
      {"ArgMax", 13, {f32({2, 3, 4})}, {attr("axis", std::int64_t{1}), attr("keepdims", std::int64_t{0})}},
      {"ArgMin", 13, {f32({2, 3, 4})}, {attr("axis", std::int64_t{-1})}},
      {"TopK", 13, {f32({3, 5}), values({2})}, {}, 2},
  });
}

TEST_CASE("Constant ops, against ONNX shape inference") {
  ipu::constant_tensor v{{data_type::F32, {2, 2}}, ipu::byte_buffer::from_values<float>(std::vector<float>{1, 2, 3, 4})};
  check_against_reference({
      {"Constant", 13, {}, {{"value", v}}},
      {"Constant", 13, {}, {attr("value_ints", ints{1, 2, 3})}},
      {"Constant", 13, {}, {attr("value_float", 1.5f)}},
  });
}

// --- hand-checked behaviour --------------------------------------------------------------------

// STFT only with onesided = 0 given: ONNX 1.12 reads onesided's default as 0 and counts frames from
// the onesided bin count (the importer corrects it: tests/onnx/test_import.cpp).
TEST_CASE("signal ops with constant lengths, against ONNX shape inference") {
  check_against_reference({
      {"DFT", 17, {f32({1, 10, 10, 1})}, {attr("axis", std::int64_t{2})}},
      {"DFT", 17, {f32({2, 6, 3, 1}), scalar_value(8)}, {attr("onesided", std::int64_t{1})}},
      {"DFT", 17, {f32({2, 6, 3, 2}), scalar_value(4)}, {attr("inverse", std::int64_t{1})}},
      {"DFT", 17, {f32({2, 6, 1})}, {attr("inverse", std::int64_t{1}), attr("onesided", std::int64_t{1})}},  // both
      {"STFT", 17, {f32({2, 100, 2}), scalar_value(10), f32({20})}, {attr("onesided", std::int64_t{0})}},
      {"HannWindow", 17, {scalar_value(10)}},
      {"BlackmanWindow", 17, {scalar_value(7)}, {attr("output_datatype", std::int64_t{11}), attr("periodic", std::int64_t{0})}},
      {"HammingWindow", 17, {scalar_value(0)}},  // empty
      {"MelWeightMatrix", 17, {scalar_value(8), scalar_value(16), scalar_value(8192), f32({}), f32({})}},
  });
}

TEST_CASE("errors name the op and the shapes") {
  auto message = [](const infer_case& c) {
    try {
      (void)ours(c, "layer3");
    } catch (const ipu::error& e) {
      CHECK(e.category() == ipu::error_category::shape);
      return std::string(e.what());
    }
    FAIL("no error");
    return std::string();
  };
  const auto mm = message({"MatMul", 13, {f32({2, 3}), f32({4, 5})}});
  CHECK(mm.find("op MatMul 'layer3'") != std::string::npos);
  CHECK(mm.find("F32[2,3], F32[4,5]") != std::string::npos);
  CHECK(mm.find("inner dimensions 3 and 4 differ") != std::string::npos);

  const auto conv = message({"Conv", 13, {f32({1, 3, 8, 8}), f32({4, 2, 3, 3})}});
  CHECK(conv.find("X has 3 channels but W F32[4,2,3,3] with group 1 expects 2") != std::string::npos);

  const auto small = message({"Conv", 13, {f32({1, 1, 2, 2}), f32({1, 1, 3, 3})}});
  CHECK(small.find("spans 3 elements but spatial dimension 0") != std::string::npos);

  const auto bn = message({"BatchNormalization", 13, {f32({2, 3, 4}), f32({4}), f32({3}), f32({3}), f32({3})}});
  CHECK(bn.find("scale F32[4] must be [3]") != std::string::npos);

  // ONNX 1.12's own inference lets these two through.
  const auto gemm = message({"Gemm", 13, {f32({2, 3}), f32({2, 4})}});
  CHECK(gemm.find("inner dimensions 3 and 2 differ") != std::string::npos);
  const auto count = message({"Reshape", 13, {f32({2, 3}), values({5})}});
  CHECK(count.find("cannot reshape F32[2,3] (6 elements) to [5] (5 elements)") != std::string::npos);

  const auto types = message({"Add", 13, {f32({2}), in(data_type::F16, {2})}});
  CHECK(types.find("different element types (F32[2], F16[2])") != std::string::npos);

  const auto reshape = message({"Reshape", 13, {f32({2, 3}), f32({2})}});
  CHECK(reshape.find("must be a constant or initializer") != std::string::npos);

  const auto axis = message({"Softmax", 13, {f32({2, 3})}, {attr("axis", std::int64_t{2})}});
  CHECK(axis.find("axis 2 is out of range for rank 2") != std::string::npos);

  const auto perm = message({"Transpose", 13, {f32({2, 3})}, {attr("perm", ints{0, 0})}});
  CHECK(perm.find("perm [0,0] is not a permutation") != std::string::npos);

  const auto missing = message({"Gemm", 13, {f32({2, 3})}});
  CHECK(missing.find("required input #1 is missing") != std::string::npos);

  const auto squeeze = message({"Squeeze", 13, {f32({2, 3}), values({0})}});
  CHECK(squeeze.find("cannot squeeze axis 0 of F32[2,3]: its size is 2") != std::string::npos);
}

TEST_CASE("window sizes a stranger could choose to overflow int64 are refused by name") {
  auto message = [](const infer_case& c) {
    try {
      (void)ours(c);
    } catch (const ipu::error& e) {
      return std::string(e.what());
    }
    FAIL("no error");
    return std::string();
  };
  constexpr std::int64_t big = std::int64_t{1} << 62;
  auto pool = [](ints k, std::vector<ipu::attribute> more = {}) {
    infer_case c{"MaxPool", 13, {f32({1, 1, 4, 4})}, {attr("kernel_shape", std::move(k))}};
    for (auto& a : more) c.attrs.push_back(std::move(a));
    return c;
  };
  CHECK(message(pool({big, 1})).find("kernel_shape [" + std::to_string(big) + ",1] must be >= 1 and <= 2^59") !=
        std::string::npos);
  CHECK(message(pool({2, 2}, {attr("pads", ints{big, 0, big, 0})})).find("must be >= 0 and <= 2^59") !=
        std::string::npos);
  CHECK(message(pool({2, 2}, {attr("strides", ints{1, big})})).find("strides") != std::string::npos);
  // Each value is in bounds, but the extent (k - 1) * d + 1 or the tap count is not.
  constexpr std::int64_t k40 = std::int64_t{1} << 40;
  CHECK(message(pool({k40, 1}, {attr("dilations", ints{k40, 1})})).find("spans more than 2^59 elements") !=
        std::string::npos);
  CHECK(message(pool({k40, k40}, {attr("pads", ints{k40, k40, k40, k40})})).find("has more than 2^59 taps") !=
        std::string::npos);
  // In bounds, the same huge window gives the sizes ONNX's formula does.
  auto fits = pool({k40, 1}, {attr("pads", ints{k40, 0, k40, 0}), attr("strides", ints{k40, 1})});
  CHECK(ours(fits)[0].shape == ipu::shape{1, 1, 2, 4});
  // ConvTranspose: the stride times the input is checked as well.
  const auto ct = message({"ConvTranspose", 13, {f32({1, 1, 4}), f32({1, 1, 3})},
                           {attr("strides", ints{std::int64_t{1} << 58})}});
  CHECK(ct.find("give spatial dimension 0 more than 2^59 elements") != std::string::npos);
  CHECK(message({"ConvTranspose", 13, {f32({1, 1, 4}), f32({1, 1, 3})}, {attr("output_padding", ints{-1})}})
            .find("output_padding [-1] must be >= 0") != std::string::npos);
}

TEST_CASE("check_shape_rules refuses a graph whose declared infos its ops' rules refute") {
  using ipu::tensor_kind;
  const auto build = [](ipu::shape declared, ipu::shape weights) {
    ipu::graph g("g");
    const auto x = g.add_tensor("x", {data_type::U8, {1, 1, 3, 3}}, tensor_kind::input);
    const auto w = g.add_tensor("w", {data_type::U8, std::move(weights)}, tensor_kind::input);
    const auto y = g.add_tensor("y", {data_type::S32, std::move(declared)});
    g.add_op(ipu::op_node{"ConvInteger", "", 10, "conv", {x, w}, {y}, {}, {}});
    g.mark_output(y);
    return g;
  };
  CHECK_NOTHROW(ipu::check_shape_rules(build({1, 1, 2, 2}, {1, 1, 2, 2}), "model"));
  // A declared output shape the op does not compute.
  CHECK_THROWS_WITH_AS(ipu::check_shape_rules(build({1, 1, 3, 3}, {1, 1, 2, 2}), "model"),
                       doctest::Contains("output 'y' of op ConvInteger 'conv' is declared S32[1,1,3,3] but the op "
                                         "computes S32[1,1,2,2]"),
                       ipu::error);
  // Weights for two input channels on a one-channel input (ONNX's inference lets this through; the
  // fuzzer's find read past x).
  CHECK_THROWS_WITH_AS(ipu::check_shape_rules(build({1, 1, 2, 2}, {1, 2, 2, 2}), "model"),
                       doctest::Contains("op ConvInteger 'conv' cannot run on the inputs it is given: X has 1 channels"),
                       ipu::error);
  // A rule that needs an input's contents computed at run time cannot check its op: skipped.
  ipu::graph r("r");
  const auto a = r.add_tensor("a", {data_type::F32, {2, 3}}, tensor_kind::input);
  const auto s = r.add_tensor("s", {data_type::S64, {1}}, tensor_kind::input);
  const auto b = r.add_tensor("b", {data_type::F32, {6}});
  r.add_op(ipu::op_node{"Reshape", "", 13, "reshape", {a, s}, {b}, {}, {}});
  r.mark_output(b);
  CHECK_NOTHROW(ipu::check_shape_rules(r, "model"));
}

TEST_CASE("attributes of the wrong kind and unknown ops are graph errors") {
  infer_case c{"Flatten", 13, {f32({2, 3})}, {attr("axis", 1.0f)}};
  CHECK_THROWS_WITH_AS(ours(c), doctest::Contains("attribute 'axis' is FLOAT"), ipu::error);
  CHECK_THROWS_WITH_AS(ours({"FancyOp", 13, {f32({2})}}), doctest::Contains("no shape inference for op type 'FancyOp'"),
                       ipu::error);
  CHECK_THROWS_WITH_AS(ours({"Relu", 13, {f32({2})}, {}, 2}), doctest::Contains("2 outputs requested"), ipu::error);
}

TEST_CASE("Gelu (opset 20 and the Graphcore / Microsoft domains) keeps its input's info") {
  CHECK(ipu::has_shape_inference("", "Gelu"));
  CHECK(ipu::has_shape_inference("ai.onnx", "Gelu"));
  CHECK(ipu::has_shape_inference("ai.graphcore", "Gelu"));
  CHECK(ipu::has_shape_inference("com.microsoft", "Gelu"));
  CHECK_FALSE(ipu::has_shape_inference("ai.graphcore", "MatMul"));
  CHECK(ours({"Gelu", 20, {in(data_type::F16, {3, 7})}}) == std::vector<ipu::tensor_info>{{data_type::F16, {3, 7}}});
  CHECK_THROWS_AS(ours({"Gelu", 20, {in(data_type::S32, {3})}}), ipu::error);
}

TEST_CASE("Einsum: explicit and implicit outputs, ellipsis broadcasting, diagonals, as NumPy's einsum gives them") {
  // ONNX 1.12's inference gives Einsum's rank only; the shapes here are numpy.einsum's.
  auto einsum = [](const char* eq, std::vector<ipu::shape> shapes) {
    infer_case c{"Einsum", 12};
    for (auto& sh : shapes) c.inputs.push_back(f32(std::move(sh)));
    c.attrs.push_back(attr("equation", eq));
    return ours(c).at(0);
  };
  CHECK(einsum("ij,jk->ik", {{2, 3}, {3, 4}}) == ipu::tensor_info{data_type::F32, {2, 4}});
  CHECK(einsum("ij,jk", {{2, 3}, {3, 4}}).shape == ipu::shape{2, 4});
  CHECK(einsum("bij,bjk", {{2, 3, 4}, {2, 4, 5}}).shape == ipu::shape{3, 5});  // b is summed: it occurs twice
  CHECK(einsum("...ij,...jk->...ik", {{5, 2, 3}, {3, 4}}).shape == ipu::shape{5, 2, 4});
  CHECK(einsum("...ij, ...jk", {{5, 1, 2, 3}, {7, 3, 4}}).shape == ipu::shape{5, 7, 2, 4});  // broadcast, implicit
  CHECK(einsum("ii->i", {{3, 3}}).shape == ipu::shape{3});
  CHECK(einsum("Ba,aB", {{2, 3}, {3, 2}}).shape == ipu::shape{});
  CHECK(einsum("ba,c", {{2, 3}, {4}}).shape == ipu::shape{3, 2, 4});  // implicit: letters in character order
  CHECK(einsum("ab,cd", {{2, 3}, {4, 5}}).shape == ipu::shape{2, 3, 4, 5});
  CHECK(einsum("i,i->", {{4}, {4}}).shape == ipu::shape{});
  CHECK_THROWS_WITH_AS(einsum("ij,jk->ik", {{2, 3}, {4, 5}}), doctest::Contains("einsum dimension mismatch: 3 vs 4"),
                       ipu::error);
  CHECK_THROWS_WITH_AS(einsum("ij->ik", {{2, 3}}), doctest::Contains("output label 'k' does not appear"), ipu::error);
  CHECK_THROWS_WITH_AS(einsum("ij,jk->ik", {{2, 3}}), doctest::Contains("2 terms for 1 inputs"), ipu::error);
  CHECK_THROWS_WITH_AS(einsum("ijk->i", {{2, 3}}), doctest::Contains("3 labels for a rank-2 input"), ipu::error);
  CHECK_THROWS_WITH_AS(einsum("i1->i", {{2, 3}}), doctest::Contains("invalid character '1'"), ipu::error);
}

TEST_CASE("Split into uneven parts from opset 18") {
  // ONNX 18: the last chunk is smaller; before 18 this is an error.
  const auto parts = ours({"Split", 18, {f32({7, 2})}, {attr("num_outputs", std::int64_t{3})}, 3});
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].shape == ipu::shape{3, 2});
  CHECK(parts[1].shape == ipu::shape{3, 2});
  CHECK(parts[2].shape == ipu::shape{1, 2});
  CHECK_THROWS_WITH_AS(ours({"Split", 13, {f32({7, 2})}, {}, 3}), doctest::Contains("does not split evenly"),
                       ipu::error);
}

TEST_CASE("broadcast helpers") {
  CHECK(ipu::broadcast_shapes({2, 1, 4}, {3, 1}) == ipu::shape{2, 3, 4});
  CHECK(ipu::broadcast_shapes({}, {}) == ipu::shape{});
  CHECK_FALSE(ipu::broadcast_shapes({2}, {3}));
  CHECK(ipu::broadcasts_to({3, 1}, {2, 3, 5}));
  CHECK_FALSE(ipu::broadcasts_to({2, 3, 5}, {3, 5}));
  CHECK_FALSE(ipu::broadcasts_to({4}, {2, 3}));
}

namespace {
// Inference in a constant expression: a conv net's shapes, layer by layer.
constexpr ipu::shape conv_stack() {
  ipu::graph g("net");
  auto x = g.add_tensor("x", {data_type::F32, {8, 3, 224, 224}}, ipu::tensor_kind::input);
  auto w = g.add_tensor("w", {data_type::F32, {64, 3, 11, 11}}, ipu::tensor_kind::input);
  auto c = g.add_tensor("c", {});
  auto p = g.add_tensor("p", {});
  ipu::op_node conv{"Conv", "", 13, "conv1", {x, w}, {c}, {}, {}};
  conv.attributes.push_back({"strides", ints{4, 4}});
  conv.attributes.push_back({"pads", ints{2, 2, 2, 2}});
  g.add_op(std::move(conv));
  ipu::op_node pool{"MaxPool", "", 13, "pool1", {c}, {p}, {}, {}};
  pool.attributes.push_back({"kernel_shape", ints{3, 3}});
  pool.attributes.push_back({"strides", ints{2, 2}});
  g.add_op(std::move(pool));
  if (ipu::infer_shapes(g) != 2 || g.tensor(c).info.shape != ipu::shape{8, 64, 55, 55}) return {};
  return g.tensor(p).info.shape;
}

constexpr bool direct_inputs() {
  ipu::tensor_info a{data_type::F16, {5, 1, 3}}, b{data_type::F16, {4, 1}};
  ipu::infer_input in[] = {{&a, nullptr}, {&b, nullptr}};
  ipu::op_node add{"Add", "", 13, "", {}, {}, {}, {}};
  auto out = ipu::infer_outputs(add, in, 1);
  return out.size() == 1 && out[0] == ipu::tensor_info{data_type::F16, {5, 4, 3}};
}
}  // namespace
static_assert(direct_inputs());
static_assert(conv_stack() == ipu::shape{8, 64, 27, 27}, "AlexNet's first conv + pool, inferred at compile time");

TEST_CASE("infer_shapes fills a graph's intermediate infos, reading Constant ops and initializers") {
  // x[2,3,4] -> Constant shape [-1, 4] -> Reshape -> MatMul with weight [4, 5] -> Relu
  ipu::graph g("g");
  auto x = g.add_tensor("x", {data_type::F32, {2, 3, 4}}, ipu::tensor_kind::input);
  auto w = g.add_tensor("w", {data_type::F32, {4, 5}}, ipu::tensor_kind::variable,
                        ipu::byte_buffer::from_values<float>(std::vector<float>(20, 0.0f)));
  auto shp = g.add_tensor("shape", {});   // infos left wrong on purpose
  auto r = g.add_tensor("r", {});
  auto m = g.add_tensor("m", {});
  auto y = g.add_tensor("y", {});
  const ipu::constant_tensor target{{data_type::S64, {2}}, ipu::byte_buffer::from_values<std::int64_t>(ints{-1, 4})};
  // Added out of order: inference must follow data dependencies.
  g.add_op(ipu::op_node{"Relu", "", 13, "relu", {m}, {y}, {}, {}});
  g.add_op(ipu::op_node{"MatMul", "", 13, "mm", {r, w}, {m}, {}, {}});
  g.add_op(ipu::op_node{"Reshape", "", 13, "reshape", {x, shp}, {r}, {}, {}});
  g.add_op(ipu::op_node{"Constant", "", 13, "c", {}, {shp}, {{"value", target}}, {}});
  g.add_op(ipu::op_node{"MyOp", "my.domain", 1, "custom", {y}, {g.add_tensor("z", {data_type::S8, {9}})}, {}, {}});
  CHECK(ipu::infer_shapes(g) == 4);
  CHECK(g.tensor(shp).info == ipu::tensor_info{data_type::S64, {2}});
  CHECK(g.tensor(r).info == ipu::tensor_info{data_type::F32, {6, 4}});
  CHECK(g.tensor(m).info == ipu::tensor_info{data_type::F32, {6, 5}});
  CHECK(g.tensor(y).info == ipu::tensor_info{data_type::F32, {6, 5}});
  CHECK(g.tensor(*g.find_tensor("z")).info == ipu::tensor_info{data_type::S8, {9}});  // left alone
}

}  // namespace test_infer
