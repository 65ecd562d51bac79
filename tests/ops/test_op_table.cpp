// The op table checked against itself and the registry: the registry is built from it, every row
// has a cost rule and (but for a listed few) a shape rule, the flags (view, element-wise) say one
// thing everywhere, and the shape rules agree with ONNX's own shape inference on ONNX's node tests.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ipu/builder/builder.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/ops/all.hpp"
#include "ipu/ops/infer.hpp"
#include "ipu/ops/op_table.hpp"
#include "ipu/sched/memory_plan.hpp"
#include "ipu/ops/op_cost.hpp"

namespace test_op_table {

namespace {

std::string key(std::string_view domain, std::string_view type) {
  return (domain.empty() ? std::string() : std::string(domain) + ":") + std::string(type);
}

// Kernel ops without a shape rule: their output shapes are values known only at run time (Range's
// bounds, Compress's condition, Resize's scales or sizes, how many boxes NonMaxSuppression keeps,
// Unique's distinct values, NonZero's hits) or come from subgraphs (If, Loop, Scan).
// Adding a rule means removing the op here.
const std::set<std::string> no_shape_rule_yet = {"Range",  "Compress", "Resize",           "If",
                                                   "Loop",   "Scan",     "NonMaxSuppression", "Unique",
                                                   "NonZero", "StringNormalizer"};

}  // namespace

TEST_CASE("the registry is built from the op table: every kernel has a row, every row without a kernel is a view") {
  const auto& registry = ipu::default_op_registry();
  for (const auto& e : registry.entries()) {
    CAPTURE(key(e.domain, e.type));
    CHECK(ipu::find_op_def(e.domain, e.type) != nullptr);
  }
  std::size_t with_kernel = 0;
  for (const auto& row : ipu::op_table()) {
    CAPTURE(key(row.domain, row.type));
    if (registry.find(row.domain, row.type)) ++with_kernel;
    else CHECK(row.flags.view);  // only a view runs nothing
  }
  CHECK(with_kernel == registry.entries().size());
  // The registry keeps the table's order, family by family.
  for (std::size_t i = 1; i < registry.entries().size(); ++i)
    CHECK(ipu::op_def_index(registry.entries()[i - 1].domain, registry.entries()[i - 1].type) <
          ipu::op_def_index(registry.entries()[i].domain, registry.entries()[i].type));
}

TEST_CASE("every row has a cost rule; every op with a kernel a shape rule, but for those whose shapes are values") {
  const auto& registry = ipu::default_op_registry();
  std::set<std::string> missing;
  for (const auto& row : ipu::op_table()) {
    CAPTURE(key(row.domain, row.type));
    CHECK(row.cost);
    CHECK((ipu::find_op_cost(row.domain, row.type) == row.cost.fn));
    if (row.gradient) CHECK(row.shape);  // autodiff shape-checks the backward ops it adds
    if (!row.shape) missing.insert(key(row.domain, row.type));
    else CHECK((ipu::find_shape_inference(row.domain, row.type) == row.shape.fn));
  }
  CHECK(missing == no_shape_rule_yet);
  // The gradient rules so far (tests/train/test_autodiff.cpp checks each against finite differences).
  std::set<std::string> with_gradient;
  for (const auto& row : ipu::op_table())
    if (row.gradient) with_gradient.insert(key(row.domain, row.type));
  CHECK(with_gradient == std::set<std::string>{"Add", "Sub", "Mul", "Div", "Neg", "Identity", "Relu", "Abs", "Sigmoid",
                                               "Tanh", "Exp", "Log", "Sqrt", "Reshape", "Flatten", "Squeeze",
                                               "Unsqueeze", "Transpose", "MatMul", "Gemm", "ReduceSum", "ReduceMean",
                                               "Softmax", "LogSoftmax", "NegativeLogLikelihoodLoss", "Conv", "MaxPool",
                                               "AveragePool", "GlobalAveragePool", "Pad", "Concat", "Split",
                                               "Slice", "Gather", "Expand", "Where", "Cast", "Erf",
                                               "LeakyRelu", "Clip", "Softplus", "Pow",
                                               // normalisation, ConvTranspose, Einsum
                                               "LayerNormalization", "InstanceNormalization", "ConvTranspose",
                                               "Einsum",
                                               // activations and element-wise functions
                                               "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softsign", "Mish",
                                               "Gelu", "com.microsoft:Gelu", "ai.graphcore:Gelu", "ai.graphcore:Swish", "PRelu",
                                               "ThresholdedRelu", "Shrink", "Reciprocal", "Sin", "Cos", "Max", "Min",
                                               "Sum", "Mean",
                                               // reductions, data movement, losses
                                               "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                                               "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "CumSum", "Tile",
                                               "GatherElements", "GlobalMaxPool", "SoftmaxCrossEntropyLoss",
                                               "Dropout",
                                               // PopART's ai.graphcore helper ops
                                               "ai.graphcore:Nop", "ai.graphcore:PrintTensor",
                                               "ai.graphcore:DynamicSlice", "ai.graphcore:DynamicUpdate",
                                               "ai.graphcore:DynamicAdd", "ai.graphcore:GroupNormalization",
                                               "ai.graphcore:MultiConv",
                                  "ipu:BatchNormalizationTraining"});
  for (const auto& e : registry.entries()) CHECK(ipu::find_op_def(e.domain, e.type) != nullptr);
  CHECK(ipu::find_op_def("com.example", "Mystery") == nullptr);
  CHECK(ipu::find_op_def("ai.onnx", "MatMul") == ipu::find_op_def("", "MatMul"));
}

TEST_CASE("no op is registered twice") {
  std::set<std::string> seen;
  for (const auto& e : ipu::default_op_registry().entries()) CHECK(seen.insert(key(e.domain, e.type)).second);
}

TEST_CASE("one notion of view and element-wise: flagged ops have shape rules and matching costs") {
  const auto& registry = ipu::default_op_registry();
  std::size_t views = 0;
  for (const auto& row : ipu::op_table()) {
    if (!row.flags.view && !row.flags.elementwise && !row.flags.in_place) continue;
    CAPTURE(key(row.domain, row.type));
    CHECK(row.shape);
    CHECK(row.flags.view != row.flags.elementwise);  // a view computes nothing
    CHECK(row.flags.in_place);                       // both kinds may take a dying input's bytes
    if (row.flags.elementwise) CHECK(registry.find(row.domain, row.type) != nullptr);
    if (row.flags.view) ++views;
    // A view costs nothing on the IPU; Dropout only in inference (its own rule asks).
    if (row.flags.view && row.type != "Dropout") CHECK((row.cost.fn == ipu::detail::cost_rules::free_op));
    if (row.flags.elementwise) CHECK((row.cost.fn != ipu::detail::cost_rules::free_op));
  }
  CHECK(views == 6);
  CHECK(ipu::flags_of("ai.onnx", "Reshape").view);
  CHECK(ipu::flags_of("", "Add").elementwise);
  CHECK(ipu::flags_of("com.example", "Add") == ipu::op_flags{});
  CHECK(ipu::flags_of("", "MatMul") == ipu::op_flags{});
}

TEST_CASE("the random ops, and only they, are flagged random: drawn afresh, never views or element-wise") {
  std::set<std::string> random;
  for (const auto& row : ipu::op_table()) {
    if (!row.flags.random) continue;
    CAPTURE(key(row.domain, row.type));
    random.insert(key(row.domain, row.type));
    CHECK(row.shape);
    CHECK_FALSE(row.flags.view);
    CHECK_FALSE(row.flags.elementwise);
    CHECK_FALSE(row.flags.in_place);
  }
  CHECK(random == std::set<std::string>{key("", "Bernoulli"), key("", "Multinomial"), key("", "RandomNormal"),
                                        key("", "RandomNormalLike"), key("", "RandomUniform"),
                                        key("", "RandomUniformLike")});
}

TEST_CASE("the ops that take strings are flagged so, and an op that is not refuses one, naming it") {
  std::set<std::string> takes;
  for (const auto& row : ipu::op_table())
    if (row.flags.strings) takes.insert(key(row.domain, row.type));
  CHECK(takes == std::set<std::string>{"Constant", "Cast", "CastLike", "Gather", "Transpose", "Concat", "Split", "Slice",
                                       "StringNormalizer", "TfIdfVectorizer"});
  const ipu::tensor_info text{ipu::data_type::STRING, {2}};
  auto one_op = [&](const char* type, ipu::tensor_info out, std::string domain = {}) {
    ipu::graph g("g");
    const auto x = g.add_tensor("words", text, ipu::tensor_kind::input);
    const auto y = g.add_tensor("y", std::move(out));
    ipu::op_node n;
    n.type = type;
    n.domain = std::move(domain);
    n.inputs = {x};
    n.outputs = {y};
    g.add_op(n);
    ipu::check_string_operands(g, g.op(0), "here");
  };
  CHECK_NOTHROW(one_op("Transpose", text));
  CHECK_NOTHROW(one_op("Reshape", text));  // views move whole elements
  CHECK_NOTHROW(one_op("MyTokenizer", text, "my.domain"));  // custom ops declare their own types
  CHECK_THROWS_WITH_AS(one_op("Relu", text), doctest::Contains("is given STRING tensor 'words', which it does not take"),
                       ipu::error);
  CHECK_THROWS_WITH_AS(one_op("Where", {ipu::data_type::F32, {2}}), doctest::Contains("STRING tensor 'words'"), ipu::error);
}

TEST_CASE("Dropout is a view in inference only, for the IPU's memory plan and its cost alike") {
  const auto mk2 = ipu::ipu_model<ipu::mk2, 1>::description();
  // mode 0: no training_mode; 1: a constant false; 2: a constant true.
  for (int mode = 0; mode < 3; ++mode) {
    CAPTURE(mode);
    ipu::builder b("dropout");
    auto x = b.add_input_tensor({ipu::data_type::F32, {64, 1000}}, "x");
    std::vector<ipu::tensor_id> in{x};
    if (mode > 0) {
      in.push_back(b.add_constant(ipu::make_constant<float>(ipu::shape{}, {0.5f}), "ratio"));
      in.push_back(b.add_constant(ipu::make_constant<bool>(ipu::shape{}, {mode == 2}), "training"));
    }
    auto y = b.op("Dropout", in).front();
    b.add_output(y);
    const auto g = std::move(b).build();
    const auto& op = g.op(g.tensor(y).producer);
    const bool inference = mode < 2;
    CHECK(ipu::is_view(g, op) == inference);
    std::vector<ipu::op_id> order{g.tensor(y).producer};
    const auto roots = ipu::detail::sched::storage_roots(g, order);
    CHECK((roots[y] == x) == inference);
    CHECK((ipu::estimate_op_cost(g, g.tensor(y).producer, mk2).cycles() == 0) == inference);
  }
}

TEST_CASE("shape rules agree with ONNX's shape inference on ONNX's node tests") {
  const auto dir = std::filesystem::temp_directory_path() / ("ipu_op_table_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  const auto json_path = dir / "shapes.json";
  const std::string cmd = std::string(IPU_PYTHON) + " " + IPU_SOURCE_DIR + "/tests/ops/node_test_shapes.py " +
                          (dir / "tests").string() + " " + json_path.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  nlohmann::json ref;
  std::ifstream(json_path) >> ref;
  const std::filesystem::path node_dir = ref["dir"].get<std::string>();
  std::size_t compared = 0;
  std::vector<std::string> mismatches;
  for (const auto& [test, outputs] : ref["tests"].items()) {
    if (outputs.empty()) continue;
    ipu::graph g;
    try {
      ipu::onnx::import_options o;
      o.check_supported = false;
      g = ipu::onnx::load_model(node_dir / test / "model.onnx", o);
    } catch (const ipu::error&) {
      continue;  // a model the importer declines says nothing about the shape rules
    }
    for (const auto& [name, want] : outputs.items()) {
      const auto found = g.find_tensor(name);
      if (!found) continue;
      const auto t = *found;
      const auto producer = g.tensor(t).producer;
      if (producer == ipu::no_op) continue;
      const auto& op = g.op(producer);
      if (!ipu::has_shape_inference(op.domain, op.type)) continue;
      const auto index = static_cast<std::size_t>(std::find(op.outputs.begin(), op.outputs.end(), t) - op.outputs.begin());
      std::string got;
      try {
        const auto infos = ipu::infer_outputs(g, op);
        got = std::to_string(ipu::onnx_code_of(infos.at(index).type)) + " " + ipu::to_string(infos.at(index).shape);
      } catch (const ipu::error& e) {
        got = std::string("error: ") + e.what();
      }
      const auto expected = std::to_string(want["type"].get<int>()) + " " +
                            ipu::to_string(ipu::shape(want["shape"].get<std::vector<std::int64_t>>()));
      ++compared;
      if (got != expected) mismatches.push_back(test + " " + op.type + " " + name + ": ours " + got + ", ONNX " + expected);
    }
  }
  std::filesystem::remove_all(dir);
  std::string all;
  for (const auto& m : mismatches) all += m + "\n";
  INFO(mismatches.size() << " of " << compared << " outputs differ:\n" << all);
  CHECK(compared > 300);
  CHECK(mismatches.empty());
}

}  // namespace test_op_table
