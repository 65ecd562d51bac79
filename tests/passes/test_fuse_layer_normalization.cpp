// Layer normalisation written out as ONNX ops (PyTorch's export below opset 17) fused into one
// LayerNormalization: what matches, what must not, and that the outputs stay those of the ops.
#include "ipu/passes/fuse_layer_normalization.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/graph/validate.hpp"

namespace test_fuse_layer_normalization {

namespace {

using ipu::data_type;
using ipu::tensor_id;

/// How the pattern is spelt; each field breaks one condition of a match.
struct layer_norm_spelling {
  std::vector<std::int64_t> axes{-1};  // of both ReduceMeans
  ipu::shape scale_shape{8};
  bool bias = true;
  float exponent = 2.0f;
  bool eps_known = true;      // false: epsilon is a graph input
  bool centred_output = false;  // the centred X is also a graph output
  bool axes_as_input = false;   // opset 18's ReduceMean
};

/// x [2, 3, 8] -> written-out layer norm -> Relu; inputs x (and eps when not known), weights scale, bias.
constexpr ipu::graph written_out(const layer_norm_spelling& s = {}) {
  ipu::builder b("ln", s.axes_as_input ? 18 : 13);
  const auto x = b.add_input_tensor({data_type::F32, {2, 3, 8}}, "x");
  std::vector<float> sv, bv;
  for (std::int64_t i = 0; i < s.scale_shape.num_elements(); ++i) {
    sv.push_back(0.5f + 0.125f * static_cast<float>(i % 8));
    bv.push_back(0.25f * static_cast<float>(i % 5) - 0.5f);
  }
  const auto scale = b.add_initialized_input(ipu::make_constant<float>(s.scale_shape, sv), "scale");
  const auto bias = b.add_initialized_input(ipu::make_constant<float>(s.scale_shape, bv), "bias");
  auto mean_of = [&](tensor_id t) {
    if (!s.axes_as_input) return b.op("ReduceMean", {t}, {{"axes", s.axes}})[0];
    return b.op("ReduceMean", {t, b.add_constant(ipu::make_constant<std::int64_t>(
                                      ipu::shape{static_cast<std::int64_t>(s.axes.size())}, s.axes))})[0];
  };
  const auto mean = mean_of(x);
  const auto d = b.sub(x, mean, "norm/Sub");
  const auto var = mean_of(b.pow(d, b.add_constant(ipu::make_scalar(s.exponent))));
  const auto eps = s.eps_known ? b.add_constant(ipu::make_scalar(1e-5f)) : b.add_input_tensor({data_type::F32, {}}, "eps");
  const auto n = b.div(d, b.sqrt(b.add(var, eps)));
  auto y = b.mul(n, scale, "norm/Mul");
  if (s.bias) y = b.add(y, bias, "norm/Add");
  b.add_output(b.relu(y));
  if (s.centred_output) b.add_output(d);
  return std::move(b).build();
}

constexpr std::size_t count(const ipu::graph& g, std::string_view type) {
  std::size_t n = 0;
  for (const auto& op : g.ops()) n += op.type == type ? 1 : 0;
  return n;
}

std::vector<ipu::host_tensor> run(const ipu::graph& g, bool eps_input = false) {
  std::vector<float> xv;
  for (int i = 0; i < 48; ++i) xv.push_back(static_cast<float>(std::sin(0.7 * i) * 2 + (i % 4)));
  std::vector<ipu::host_tensor> in{ipu::host_tensor::from<float>({2, 3, 8}, xv)};
  if (eps_input) in.push_back(ipu::host_tensor::from<float>(ipu::shape{}, {1e-5f}));
  ipu::cpu::device dev(g);
  return dev.run(in);
}

void check_same_outputs(const ipu::graph& before, const ipu::graph& after) {
  const auto want = run(before), got = run(after);
  REQUIRE(want.size() == got.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    const auto w = want[k].as<float>(), o = got[k].as<float>();
    REQUIRE(w.size() == o.size());
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(o[i] == doctest::Approx(w[i]).epsilon(1e-5).scale(1e-5));
  }
}

}  // namespace

static_assert(
    [] {
      const auto g = ipu::passes::fuse_layer_normalization(written_out());
      return g.num_ops() == 2 && count(g, "LayerNormalization") == 1 && count(g, "Relu") == 1 &&
             count(g, "Constant") == 0 && g.num_tensors() == 5;  // x, scale, bias, the norm, Relu's output
    }(),
    "ipu: a written-out layer norm fuses into one op in a constant expression");

TEST_CASE("PyTorch's written-out LayerNorm becomes one LayerNormalization with the same outputs") {
  const auto before = written_out();
  const auto after = ipu::passes::fuse_layer_normalization(before);
  CHECK_NOTHROW(ipu::validate(after));
  REQUIRE(count(after, "LayerNormalization") == 1);
  CHECK(after.num_ops() == 2);
  for (const auto& op : after.ops()) {
    if (op.type != "LayerNormalization") continue;
    CHECK(op.opset == 17);
    CHECK(op.name == "norm/LayerNormalization");
    CHECK(op.inputs.size() == 3);
    CHECK(op.outputs.size() == 1);
    CHECK(after.tensor(op.outputs[0]).name == "norm/Add");  // the pattern's last value keeps its tensor
    CHECK(std::get<std::int64_t>(op.find_attribute("axis")->value) == 2);
    CHECK(std::get<float>(op.find_attribute("epsilon")->value) == 1e-5f);
  }
  check_same_outputs(before, after);
}

TEST_CASE("variants that still match: two trailing axes, no bias, axes as an input, statistics asked for") {
  for (const auto& s : {layer_norm_spelling{.axes = {-2, -1}, .scale_shape = {3, 8}},
                        layer_norm_spelling{.axes = {2, 1}, .scale_shape = {1, 8}},  // any order; Scale broadcasts
                        layer_norm_spelling{.bias = false}, layer_norm_spelling{.axes_as_input = true}}) {
    const auto before = written_out(s);
    const auto after = ipu::passes::fuse_layer_normalization(before);
    CAPTURE(s.axes.size());
    CHECK(count(after, "LayerNormalization") == 1);
    CHECK(count(after, "ReduceMean") == 0);
    for (const auto& op : after.ops())
      if (op.type == "LayerNormalization") {
        CHECK(std::get<std::int64_t>(op.find_attribute("axis")->value) == 3 - static_cast<std::int64_t>(s.axes.size()));
        CHECK(op.inputs.size() == (s.bias ? 3u : 2u));
      }
    check_same_outputs(before, after);
  }
  const auto with_stats = ipu::passes::fuse_layer_normalization(written_out(), {.statistics = true});
  for (const auto& op : with_stats.ops())
    if (op.type == "LayerNormalization") {
      REQUIRE(op.outputs.size() == 3);
      CHECK(with_stats.tensor(op.outputs[1]).name == "norm/Add:mean");
      CHECK(with_stats.tensor(op.outputs[2]).info == ipu::tensor_info{data_type::F32, {2, 3, 1}});
    }
  CHECK_NOTHROW(ipu::validate(with_stats));
  check_same_outputs(written_out(), with_stats);
}

TEST_CASE("what must not fuse is left as it is") {
  for (const auto& s : {layer_norm_spelling{.exponent = 3.0f},          // not a variance
                        layer_norm_spelling{.eps_known = false},        // epsilon only known at run time
                        layer_norm_spelling{.centred_output = true},    // an inner value is a graph output
                        layer_norm_spelling{.axes = {1}, .scale_shape = {3, 1}},  // not trailing
                        layer_norm_spelling{.scale_shape = {3, 8}, .bias = false}}) {  // Scale spans the axis 1 too
    const auto before = written_out(s);
    CHECK(ipu::passes::fuse_layer_normalization(before) == before);
  }
  // A checkpoint inside the norm, or recomputation marks that differ, keep it apart.
  auto checkpointed = written_out();
  for (ipu::op_id id = 0; id < checkpointed.num_ops(); ++id)
    if (checkpointed.op(id).type == "Sqrt") checkpointed.op(id).where.checkpoint = true;
  CHECK(ipu::passes::fuse_layer_normalization(checkpointed) == checkpointed);
  auto recomputed = written_out();
  for (ipu::op_id id = 0; id < recomputed.num_ops(); ++id)
    if (recomputed.op(id).type == "Div") recomputed.op(id).where.recompute = true;
  CHECK(ipu::passes::fuse_layer_normalization(recomputed) == recomputed);
}

TEST_CASE("a norm split across stages fuses onto its last op's place, as an unplaced one would compute") {
  auto placed = written_out();
  for (ipu::op_id id = 0; id < placed.num_ops(); ++id) {
    const bool late = placed.op(id).type == "Sqrt" || placed.op(id).type == "Div" || placed.op(id).type == "Mul" ||
                      placed.op(id).name == "norm/Add" || placed.op(id).type == "Relu";
    placed.op(id).where.ipu = late ? 1 : 0;
    placed.op(id).where.stage = late ? 1 : 0;
  }
  const auto fused = ipu::passes::fuse_layer_normalization(placed);
  REQUIRE(count(fused, "LayerNormalization") == 1);
  for (const auto& op : fused.ops())
    if (op.type == "LayerNormalization") {
      CHECK(op.where.ipu == 1);
      CHECK(op.where.stage == 1);
    }
  check_same_outputs(placed, fused);
}

}  // namespace test_fuse_layer_normalization
