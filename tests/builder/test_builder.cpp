#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"

namespace test_builder {

namespace {

using ipu::data_type;
using ipu::tensor_id;

// A 4-block MLP, one block per IPU and pipeline stage, built and validated by build().
constexpr ipu::graph pipelined_mlp() {
  ipu::builder b("mlp");
  auto x = b.add_input_tensor({data_type::F32, {8, 16}}, "x");
  const std::int64_t widths[] = {16, 32, 32, 16, 4};
  for (std::int64_t i = 0; i < 4; ++i) {
    auto s = b.scope().ipu(i).stage(i).name_scope("layer" + std::string(1, static_cast<char>('0' + i)));
    const auto in = widths[i], out = widths[i + 1];
    auto w = b.add_initialized_input(
        ipu::make_constant<float>({in, out}, std::vector<float>(static_cast<std::size_t>(in * out), 0.25f)), "w");
    auto bias = b.add_initialized_input(
        ipu::make_constant<float>({out}, std::vector<float>(static_cast<std::size_t>(out), 0.0f)), "b");
    x = b.add(b.matmul(x, w), bias);
    if (i != 3) x = b.relu(x);
  }
  x = b.softmax(x, -1, "probs");
  b.add_output(x);
  return std::move(b).build();
}

}  // namespace

// Built outside every scope, the Softmax has no annotation while the rest do: validate() refuses.
TEST_CASE("an op built outside the annotated scopes breaks the all-or-none rule") {
  CHECK_THROWS_WITH_AS((void)pipelined_mlp(), doctest::Contains("Softmax 'probs' has none"), ipu::error);
}

namespace {
constexpr ipu::graph pipelined_mlp_fully_annotated() {
  ipu::builder b("mlp");
  auto x = b.add_input_tensor({data_type::F32, {8, 16}}, "x");
  const std::int64_t widths[] = {16, 32, 32, 16, 4};
  for (std::int64_t i = 0; i < 4; ++i) {
    auto s = b.scope().ipu(i).stage(i).block("block");
    const auto in = widths[i], out = widths[i + 1];
    auto w = b.add_initialized_input(
        ipu::make_constant<float>({in, out}, std::vector<float>(static_cast<std::size_t>(in * out), 0.25f)));
    auto bias = b.add_initialized_input(
        ipu::make_constant<float>({out}, std::vector<float>(static_cast<std::size_t>(out), 0.0f)));
    x = b.add(b.matmul(x, w), bias);
    if (i != 3) x = b.relu(x);
    else x = b.softmax(x);
  }
  b.add_output(x);
  return std::move(b).build();
}
}  // namespace

static_assert(
    [] {
      const auto g = pipelined_mlp_fully_annotated();
      if (g.num_ops() != 12 || g.num_tensors() != 1 + 8 + 12) return false;
      if (g.outputs().size() != 1 || g.tensor(g.outputs()[0]).info != ipu::tensor_info{data_type::F32, {8, 4}})
        return false;
      for (std::size_t i = 0; i < g.num_ops(); ++i) {
        const auto& w = g.ops()[i].where;
        const auto block = static_cast<std::int64_t>(i / 3);
        if (w.ipu != block || w.stage != block || w.phase || w.block != "block") return false;
      }
      return g.opset_version() == 13;
    }(),
    "a 4-block MLP is built and validated in a constant expression");

TEST_CASE("the constexpr MLP has the expected shapes at run time too") {
  const auto g = pipelined_mlp_fully_annotated();
  REQUIRE(g.num_ops() == 12);
  const std::vector<ipu::shape> matmul_out{{8, 32}, {8, 32}, {8, 16}, {8, 4}};
  std::size_t k = 0;
  for (const auto& op : g.ops())
    if (op.type == "MatMul") CHECK(g.tensor(op.outputs[0]).info.shape == matmul_out[k++]);
  CHECK(k == 4);
}

TEST_CASE("names: given names are kept under the name scope, others are generated and unique") {
  ipu::builder b("names");
  auto x = b.add_input_tensor({data_type::F32, {2, 3}}, "x");
  auto y = b.add_input_tensor({data_type::F32, {2, 3}});
  CHECK(b.name_of(y) == "input_0");
  tensor_id s1, s2, r;
  {
    auto sc = b.scope().name_scope("enc");
    s1 = b.add(x, y, "sum");
    {
      auto inner = b.scope().name_scope("ff");
      s2 = b.add(s1, y);
    }
    r = b.relu(s2);
  }
  CHECK(b.name_of(s1) == "enc/sum");
  CHECK(b.name_of(s2) == "enc/ff/Add_1");
  CHECK(b.name_of(r) == "enc/Relu_2");
  // The op carries the same name as its first output.
  CHECK(b.current().ops()[0].name == "enc/sum");
  // A user name colliding with a generated one is refused, naming it.
  CHECK_THROWS_WITH_AS(b.add_input_tensor({data_type::F32, {1}}, "input_0"), doctest::Contains("'input_0'"),
                       ipu::error);
  // A user input named like the next generated name pushes the generator past it.
  (void)b.add_input_tensor({data_type::F32, {1}}, "Relu_3");
  auto r2 = b.relu(x);
  CHECK(b.name_of(r2) == "Relu_4");
  b.add_output(r);
  b.add_output(r2);
  const auto g = b.build();
  std::vector<std::string> names;
  for (const auto& t : g.tensors()) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
}

TEST_CASE("multi-output ops name extra outputs <op>:<i>") {
  ipu::builder b;
  auto x = b.add_input_tensor({data_type::F32, {6, 4}}, "x");
  auto parts = b.split(x, {1, 2, 3}, 0, "parts");
  REQUIRE(parts.size() == 3);
  CHECK(b.name_of(parts[0]) == "parts");
  CHECK(b.name_of(parts[2]) == "parts:2");
  CHECK(b.info(parts[1]).shape == ipu::shape{2, 4});
  CHECK(b.info(parts[2]).shape == ipu::shape{3, 4});
  // Split at opset 13 takes its sizes as a constant input.
  const auto& op = b.current().ops().back();
  REQUIRE(op.inputs.size() == 2);
  CHECK(b.current().tensor(op.inputs[1]).kind == ipu::tensor_kind::constant);
}

TEST_CASE("nested scopes inherit unset fields and restore on exit") {
  ipu::builder b;
  auto x = b.add_input_tensor({data_type::F32, {4}}, "x");
  tensor_id a, c;
  {
    auto outer = b.scope().ipu(1).phase(2);
    a = b.relu(x);
    {
      auto inner = b.block("attn", 3);
      c = b.relu(a);
      CHECK(b.current_annotation().ipu == 3);
      CHECK(b.current_annotation().phase == 2);
      inner.stage(5);  // lvalue setters apply at once
      (void)b.relu(c);
    }
    CHECK(b.current_annotation().ipu == 1);
    CHECK(b.current_annotation().block.empty());
    CHECK_FALSE(b.current_annotation().stage);
  }
  CHECK(b.current_annotation() == ipu::annotation{});
  const auto& g = b.current();
  CHECK(g.ops()[0].where == ipu::annotation{1, std::nullopt, 2, ""});
  CHECK(g.ops()[1].where == ipu::annotation{3, std::nullopt, 2, "attn"});
  CHECK(g.ops()[2].where == ipu::annotation{3, 5, 2, "attn"});
}

TEST_CASE("scopes refuse negative placements") {
  ipu::builder b;
  CHECK_THROWS_WITH_AS((void)b.scope().ipu(-1), doctest::Contains("IPU -1 is negative"), ipu::error);
  CHECK_THROWS_WITH_AS((void)b.scope().stage(-2), doctest::Contains("pipeline stage -2"), ipu::error);
  CHECK(b.current_annotation() == ipu::annotation{});  // the failed scope restored its state
}

TEST_CASE("typed helpers infer shapes and build the ONNX ops") {
  ipu::builder b("cnn");
  auto img = b.add_input_tensor({data_type::F32, {2, 3, 32, 32}}, "image");
  auto w = b.add_initialized_input(ipu::make_constant<float>({8, 3, 3, 3}, std::vector<float>(8 * 27, 0.1f)));
  auto bias = b.add_initialized_input(ipu::make_constant<float>({8}, std::vector<float>(8, 0.0f)));
  auto c = b.conv(img, w, bias, {.strides = {2, 2}, .pads = {1, 1, 1, 1}});
  CHECK(b.info(c).shape == ipu::shape{2, 8, 16, 16});
  auto p = b.max_pool(b.relu(c), {.kernel_shape = {2, 2}, .strides = {2, 2}});
  CHECK(b.info(p).shape == ipu::shape{2, 8, 8, 8});
  auto f = b.flatten(b.global_average_pool(p));
  CHECK(b.info(f).shape == ipu::shape{2, 8});
  auto fc = b.add_initialized_input(ipu::make_constant<float>({10, 8}, std::vector<float>(80, 0.0f)));
  auto logits = b.gemm(f, fc, ipu::no_tensor, {.trans_b = true});
  CHECK(b.info(logits).shape == ipu::shape{2, 10});
  auto r = b.reshape(logits, {0, 5, -1});
  CHECK(b.info(r).shape == ipu::shape{2, 5, 2});
  auto t = b.transpose(r, {2, 0, 1});
  CHECK(b.info(t).shape == ipu::shape{2, 2, 5});
  auto h = b.cast(t, data_type::F16);
  CHECK(b.info(h).type == data_type::F16);
  auto g1 = b.gelu(h);  // decomposed before opset 20, with F16 constants
  CHECK(b.info(g1) == b.info(h));
  b.add_output(g1);
  const auto g = b.build();
  const auto& gemm = g.ops()[5];
  REQUIRE(gemm.type == "Gemm");
  REQUIRE(gemm.find_attribute("transB"));
  CHECK(std::get<std::int64_t>(gemm.find_attribute("transB")->value) == 1);
  CHECK_FALSE(gemm.find_attribute("transA"));  // defaults are left out, as exporters do
  for (const auto& op : g.ops()) CHECK(op.opset == 13);
  CHECK(g.opset_imports() == std::vector<ipu::opset_import>{{"", 13}});
}

TEST_CASE("the opset chooses between an op and its decomposition") {
  for (const std::int64_t opset : {13, 17, 20}) {
    CAPTURE(opset);
    ipu::builder b("ln", opset);
    auto x = b.add_input_tensor({data_type::F32, {2, 4, 8}}, "x");
    auto scale = b.add_initialized_input(ipu::make_constant<float>({8}, std::vector<float>(8, 1.0f)));
    auto bias = b.add_initialized_input(ipu::make_constant<float>({8}, std::vector<float>(8, 0.0f)));
    auto y = b.gelu(b.layer_normalization(x, scale, bias, -1, 1e-5f, "ln"));
    CHECK(b.info(y).shape == ipu::shape{2, 4, 8});
    b.add_output(y);
    const auto g = b.build();
    auto count = [&](std::string_view type) {
      return std::count_if(g.ops().begin(), g.ops().end(), [&](const ipu::op_node& o) { return o.type == type; });
    };
    CHECK(count("LayerNormalization") == (opset >= 17 ? 1 : 0));
    CHECK(count("ReduceMean") == (opset >= 17 ? 0 : 2));
    CHECK(count("Gelu") == (opset >= 20 ? 1 : 0));
    CHECK(count("Erf") == (opset >= 20 ? 0 : 1));
    CHECK(g.opset_version() == opset);
    // The layer norm's output carries the given name whichever form was built.
    CHECK(g.find_tensor("ln"));
  }
}

TEST_CASE("generic op(): inference, opset override and several outputs") {
  ipu::builder b;
  auto x = b.add_input_tensor({data_type::F32, {1, 2, 8, 8}}, "x");
  auto outs = b.op("MaxPool", {x},
                   {{"kernel_shape", std::vector<std::int64_t>{3, 3}},
                    {"strides", std::vector<std::int64_t>{2, 2}},
                    {"ceil_mode", 1}},
                   {.num_outputs = 2, .name = "pool"});
  REQUIRE(outs.size() == 2);
  CHECK(b.info(outs[0]).shape == ipu::shape{1, 2, 4, 4});  // ceil((8 - 3) / 2) + 1
  CHECK(b.info(outs[1]).type == data_type::S64);  // indices
  auto y = b.op("Relu", {outs[0]}, {}, 14);
  CHECK(b.current().ops().back().opset == 14);
  CHECK_THROWS_WITH_AS(b.op("Relu", {x}, {}, {.num_outputs = 2}), doctest::Contains("at most 1"), ipu::error);
  CHECK_THROWS_WITH_AS(b.op("NoSuchOp", {x}), doctest::Contains("no shape inference for op type 'NoSuchOp'"),
                       ipu::error);
  CHECK_THROWS_WITH_AS(b.op("Relu", {tensor_id{99}}), doctest::Contains("tensor id 99 does not exist"), ipu::error);
  b.add_output(y[0]);
}

TEST_CASE("generic op() in another domain uses its inference rule and imports the domain") {
  ipu::builder b;
  auto x = b.add_input_tensor({data_type::F16, {2, 8}}, "x");
  CHECK_THROWS_WITH_AS(b.op("Gelu", {x}, {}, {.domain = "ai.graphcore"}), doctest::Contains("needs its domain version"),
                       ipu::error);
  auto y = b.op("Gelu", {x}, {}, {.opset = 1, .domain = "ai.graphcore"});
  CHECK(b.info(y[0]) == ipu::tensor_info{data_type::F16, {2, 8}});
  b.add_output(y[0]);
  const auto g = b.build();
  CHECK(g.opset_imports() == std::vector<ipu::opset_import>{{"", 13}, {"ai.graphcore", 1}});
}

TEST_CASE("custom ops take explicit output infos and import their domain") {
  ipu::builder b;
  auto x = b.add_input_tensor({data_type::F32, {4, 10}}, "x");
  auto labels = b.add_input_tensor({data_type::S32, {4}}, "labels");
  auto loss = b.custom_op("ai.graphcore", "Nll", 1, {x, labels}, {{data_type::F32, {}}}, {}, "loss");
  REQUIRE(loss.size() == 1);
  CHECK(b.info(loss[0]).shape.rank() == 0);
  b.add_output(loss[0]);
  const auto g = b.build();
  CHECK(g.opset_version("ai.graphcore") == 1);
  CHECK(g.opset_version() == 13);
  CHECK(g.ops()[0].domain == "ai.graphcore");
}

TEST_CASE("shape errors surface at the op that causes them") {
  ipu::builder b;
  auto a = b.add_input_tensor({data_type::F32, {2, 3}}, "a");
  auto c = b.add_input_tensor({data_type::F32, {4, 5}}, "c");
  CHECK_THROWS_WITH_AS(b.matmul(a, c, "mm"), doctest::Contains("op MatMul 'mm'"), ipu::error);
  CHECK_THROWS_WITH_AS(b.matmul(a, c), doctest::Contains("F32[2,3], F32[4,5]"), ipu::error);
  CHECK_THROWS_WITH_AS(b.reshape(a, {4, -1}), doctest::Contains("cannot reshape F32[2,3]"), ipu::error);
  CHECK(b.current().num_ops() == 0);  // no failed op was added
}

TEST_CASE("weights and constants carry their data - wrong sizes are refused") {
  ipu::builder b;
  auto w = b.add_initialized_input(ipu::make_constant<float>({2, 2}, {1.0f, 2.0f, 3.0f, 4.0f}), "w");
  auto k = b.add_constant(ipu::make_scalar(std::int64_t{7}), "k");
  const auto& g = b.current();
  CHECK(g.tensor(w).kind == ipu::tensor_kind::variable);
  CHECK(g.tensor(w).data.load<float>(3) == 4.0f);
  CHECK(g.tensor(k).kind == ipu::tensor_kind::constant);
  CHECK(g.tensor(k).data.load<std::int64_t>(0) == 7);
  CHECK_THROWS_WITH_AS(ipu::make_constant<float>({2, 2}, {1.0f}), doctest::Contains("1 values given for shape [2,2]"),
                       ipu::error);
  ipu::constant_tensor bad{{data_type::F32, {3}}, ipu::byte_buffer::from_values<float>(std::vector<float>{1, 2})};
  CHECK_THROWS_WITH_AS(b.add_constant(bad, "bad"), doctest::Contains("'bad' holds 8 bytes"), ipu::error);
}

TEST_CASE("recompute_output_in_backward_pass marks the op that makes the tensor (PopART's RecomputeType::Recompute)") {
  ipu::builder b("g");
  auto x = b.add_input_tensor({data_type::F32, {3}}, "x");
  auto r = b.relu(x);
  auto c = b.checkpoint_output(r);
  auto y = b.neg(c);
  b.recompute_output_in_backward_pass(r);
  b.add_output(y);
  const auto g = b.build();
  CHECK(g.op(0).where.recompute);  // the Relu
  CHECK_FALSE(g.op(0).where.checkpoint);
  CHECK_FALSE(g.op(2).where.recompute);
  CHECK_THROWS_WITH_AS(b.recompute_output_in_backward_pass(x), doctest::Contains("'x' is not computed by an op"), ipu::error);
  CHECK_THROWS_WITH_AS(b.recompute_output_in_backward_pass(c), doctest::Contains("is a recomputation checkpoint"), ipu::error);
}

TEST_CASE("build() needs outputs, validates, and can be called on a copy or by moving") {
  ipu::builder b("g");
  auto x = b.add_input_tensor({data_type::F32, {3}}, "x");
  auto y = b.relu(x);
  CHECK_THROWS_WITH_AS((void)b.build(), doctest::Contains("no outputs"), ipu::error);
  b.add_output(y);
  const auto copy = b.build();
  CHECK(copy.num_ops() == 1);
  CHECK(b.current().num_ops() == 1);  // still usable
  const auto moved = std::move(b).build();
  CHECK(moved == copy);
}

}  // namespace test_builder
