// Inference batch normalisation folded into the Conv or Gemm before it: the folded graph's outputs
// stay within rounding of the unfolded one's, and every case that is not exactly the pattern stays.
#include "ipu/passes/fold_batch_normalization.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/graph/validate.hpp"

namespace test_fold_batch_normalization {

namespace {

using ipu::data_type;
using ipu::tensor_id;

std::size_t count(const ipu::graph& g, std::string_view type) {
  std::size_t n = 0;
  for (const auto& op : g.ops()) n += op.type == type ? 1 : 0;
  return n;
}

std::vector<float> values(std::size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(1.3f * static_cast<float>(i) + offset) + offset;
  return v;
}

/// BN's four per-channel inputs, known unless `mean_input`.
std::vector<tensor_id> statistics(ipu::builder& b, std::int64_t c, bool mean_input = false) {
  const auto var = values(static_cast<std::size_t>(c), 0.5f, 1.0f);  // in [0.5, 1.5]: positive
  return {b.add_initialized_input(ipu::make_constant<float>({c}, values(static_cast<std::size_t>(c), 0.3f, 1.0f)), "bn.scale"),
          b.add_initialized_input(ipu::make_constant<float>({c}, values(static_cast<std::size_t>(c), 0.2f, 0.1f)), "bn.bias"),
          mean_input ? b.add_input_tensor({data_type::F32, {c}}, "bn.mean")
                     : b.add_initialized_input(ipu::make_constant<float>({c}, values(static_cast<std::size_t>(c), 0.4f, 0.0f)), "bn.mean"),
          b.add_initialized_input(ipu::make_constant<float>({c}, var), "bn.var")};
}

/// Runs `g` on deterministic inputs of its input shapes.
std::vector<ipu::host_tensor> run(const ipu::graph& g) {
  std::vector<ipu::host_tensor> in;
  for (auto t : g.inputs()) {
    const auto& info = g.tensor(t).info;
    in.push_back(ipu::host_tensor::from<float>(info.shape, values(static_cast<std::size_t>(info.shape.num_elements()), 1.0f, 0.2f)));
  }
  return ipu::cpu::device(g).run(in);
}

void check_close(const ipu::graph& before, const ipu::graph& after) {
  const auto want = run(before), got = run(after);
  REQUIRE(want.size() == got.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    const auto w = want[k].as<float>(), o = got[k].as<float>();
    REQUIRE(w.size() == o.size());
    float largest = 0;
    for (auto v : w) largest = std::max(largest, std::abs(v));
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(std::abs(o[i] - w[i]) <= 1e-5f * largest);
  }
}

/// x [2, 3, 5, 5] -> Conv (4 output channels, 3x3, pad 1; with or without B) -> BN -> Relu.
ipu::graph conv_bn(bool conv_bias, bool also_read = false, bool training = false, bool mean_input = false) {
  ipu::builder b("conv_bn", 17);
  const auto x = b.add_input_tensor({data_type::F32, {2, 3, 5, 5}}, "x");
  std::vector<tensor_id> in{x, b.add_initialized_input(ipu::make_constant<float>({4, 3, 3, 3}, values(108, 0.3f, 0.0f)), "conv.w")};
  if (conv_bias) in.push_back(b.add_initialized_input(ipu::make_constant<float>({4}, {0.1f, -0.2f, 0.3f, 0.05f}), "conv.b"));
  const auto y = b.op("Conv", in, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}})[0];
  auto bn_in = statistics(b, 4, mean_input);
  bn_in.insert(bn_in.begin(), y);
  std::vector<ipu::attribute> attrs{{"epsilon", 1e-3f}};
  if (training) attrs.push_back({"training_mode", std::int64_t{1}});
  b.add_output(b.relu(b.op("BatchNormalization", bn_in, attrs)[0]));
  if (also_read) b.add_output(b.op("Sigmoid", {y})[0]);
  return std::move(b).build();
}

/// a [3, 5] -> Gemm (B [5, 4] or, transB, [4, 5]; C as given) -> BN over the 4 columns.
ipu::graph gemm_bn(bool trans_b, std::optional<ipu::shape> c_shape, float beta) {
  ipu::builder b("gemm_bn", 17);
  const auto a = b.add_input_tensor({data_type::F32, {3, 5}}, "a");
  const auto w = b.add_initialized_input(ipu::make_constant<float>(trans_b ? ipu::shape{4, 5} : ipu::shape{5, 4}, values(20, 0.5f, 0.0f)), "fc.w");
  std::vector<tensor_id> in{a, w};
  if (c_shape)
    in.push_back(b.add_initialized_input(
        ipu::make_constant<float>(*c_shape, values(static_cast<std::size_t>(c_shape->num_elements()), 0.3f, 0.2f)), "fc.c"));
  const auto y = b.op("Gemm", in, {{"transB", std::int64_t{trans_b}}, {"beta", beta}, {"alpha", 0.75f}})[0];
  auto bn_in = statistics(b, 4);
  bn_in.insert(bn_in.begin(), y);
  b.add_output(b.op("BatchNormalization", bn_in)[0]);
  return std::move(b).build();
}

}  // namespace

TEST_CASE("Conv then BatchNormalization becomes one Conv, with and without Conv's bias") {
  for (bool bias : {true, false}) {
    CAPTURE(bias);
    const auto before = conv_bn(bias);
    const auto after = ipu::passes::fold_batch_normalization(before);
    CHECK_NOTHROW(ipu::validate(after));
    CHECK(count(after, "BatchNormalization") == 0);
    CHECK(count(after, "Conv") == 1);
    CHECK(after.num_ops() == 2);
    CHECK_FALSE(after.find_tensor("conv.w"));  // replaced by the folded constant, which has a name of its own
    REQUIRE(after.find_tensor("conv.w:bn_folded"));
    CHECK(after.tensor(*after.find_tensor("conv.w:bn_folded")).kind == ipu::tensor_kind::constant);
    check_close(before, after);
  }
}

TEST_CASE("Gemm then BatchNormalization: transB or not, C per column, a scalar C or none, any beta") {
  struct spelling {
    bool trans_b;
    std::optional<ipu::shape> c;  // none: no C
    float beta;
  };
  for (const auto& s : {spelling{false, ipu::shape{4}, 1.0f}, spelling{true, ipu::shape{4}, 0.5f},
                        spelling{true, ipu::shape{1, 4}, 2.0f}, spelling{false, ipu::shape{}, 1.5f},
                        spelling{true, std::nullopt, 1.0f}}) {
    CAPTURE(s.trans_b);
    CAPTURE(s.beta);
    const auto before = gemm_bn(s.trans_b, s.c, s.beta);
    const auto after = ipu::passes::fold_batch_normalization(before);
    CHECK_NOTHROW(ipu::validate(after));
    CHECK(count(after, "BatchNormalization") == 0);
    REQUIRE(after.num_ops() == 1);
    CHECK_FALSE(after.op(0).find_attribute("beta"));
    check_close(before, after);
  }
}

TEST_CASE("not folded: the Conv's output read elsewhere, training mode, statistics known only at run time, C per row") {
  CHECK(count(ipu::passes::fold_batch_normalization(conv_bn(true, true)), "BatchNormalization") == 1);
  CHECK(count(ipu::passes::fold_batch_normalization(conv_bn(true, false, true)), "BatchNormalization") == 1);
  CHECK(count(ipu::passes::fold_batch_normalization(conv_bn(true, false, false, true)), "BatchNormalization") == 1);
  CHECK(count(ipu::passes::fold_batch_normalization(gemm_bn(false, ipu::shape{3, 1}, 1.0f)), "BatchNormalization") == 1);
}

}  // namespace test_fold_batch_normalization
