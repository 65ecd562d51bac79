// QDQ Conv and MatMul (as PyTorch exports quantized models) run on the integers as QLinearConv and
// QLinearMatMul: what matches, what must not, and the fused graph's outputs against integer
// arithmetic done here by hand.
#include "ipu/passes/fuse_qdq.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/passes/optimize.hpp"

namespace test_fuse_qdq {

namespace {

using ipu::data_type;
using ipu::make_constant;
using ipu::shape;
using ipu::tensor_id;

constexpr float sx = 0.05f, sy = 0.1f;
constexpr std::uint8_t zx = 128;
const std::vector<float> sw{0.01f, 0.02f, 0.015f, 0.03f};

/// How the conv pattern is spelt; each field but `relu` breaks one condition of a match.
struct qdq_conv {
  bool relu = true;
  std::uint8_t zy = 0;           // nonzero: Relu cannot be dropped
  float bias_scale_factor = 1;   // != 1: the bias is not scaled by sx * sw
  bool conv_output = false;      // the Conv's output is also a graph output
  bool weights_input = false;    // weights come from a graph input, not known
  bool dead_sigmoid = false;     // a Sigmoid of x nothing reads: not the pass's to remove
};

std::vector<std::int8_t> weights() {
  std::vector<std::int8_t> w(4 * 3 * 3 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::int8_t>(static_cast<int>(i * 37 % 255) - 127);
  return w;
}
const std::vector<std::int32_t> bias{300, -2000, 0, 45};

/// x [1, 3, 6, 6] -> Q -> Cast -> DQ -> Conv (per-channel int8 weights, int32 bias, pads 1)
/// -> [Relu] -> Q -> Cast -> DQ -> y, as torch.onnx writes a quantized ConvReLU2d.
ipu::graph conv_model(const qdq_conv& s = {}) {
  ipu::builder b("qconv", 13);
  const auto x = b.add_input_tensor({data_type::F32, {1, 3, 6, 6}}, "x");
  auto f32 = [&](std::vector<float> v) {
    return b.add_constant(make_constant<float>(v.size() == 1 ? shape{} : shape{static_cast<std::int64_t>(v.size())}, v));
  };
  const auto sx_t = f32({sx});
  const auto zx_t = b.add_constant(make_constant<std::uint8_t>(shape{}, {zx}));
  const auto xq = b.op("QuantizeLinear", {x, sx_t, zx_t})[0];
  const auto xd = b.op("DequantizeLinear", {b.cast(xq, data_type::U8), sx_t, zx_t})[0];
  const auto wv = weights();
  const auto wq = s.weights_input ? b.add_input_tensor({data_type::S8, {4, 3, 3, 3}}, "wq")
                                  : b.add_constant(make_constant<std::int8_t>(shape{4, 3, 3, 3}, wv));
  const auto wd = b.op("DequantizeLinear", {wq, f32(sw), b.add_constant(make_constant<std::int8_t>(shape{4}, {0, 0, 0, 0}))},
                       {{"axis", std::int64_t{0}}})[0];
  std::vector<float> sb;
  for (auto v : sw) sb.push_back(sx * v * s.bias_scale_factor);
  const auto bd = b.op("DequantizeLinear", {b.add_constant(make_constant<std::int32_t>(shape{4}, bias)), f32(sb),
                                             b.add_constant(make_constant<std::int32_t>(shape{4}, {0, 0, 0, 0}))},
                       {{"axis", std::int64_t{0}}})[0];
  const auto c = b.conv(xd, wd, bd, {.pads = {1, 1, 1, 1}}, "conv/Conv");
  const auto r = s.relu ? b.relu(c, "conv/Relu") : c;
  const auto zy_t = b.add_constant(make_constant<std::uint8_t>(shape{}, {s.zy}));
  const auto yq = b.op("QuantizeLinear", {r, f32({sy}), zy_t})[0];
  b.add_output(b.op("DequantizeLinear", {b.cast(yq, data_type::U8), f32({sy}), zy_t})[0]);
  if (s.conv_output) b.add_output(c);
  if (s.dead_sigmoid) b.sigmoid(x, "unread/Sigmoid");
  return std::move(b).build();
}

std::size_t count(const ipu::graph& g, std::string_view type) {
  return static_cast<std::size_t>(std::count_if(g.ops().begin(), g.ops().end(), [&](const auto& op) { return op.type == type; }));
}

std::vector<float> input_x() {
  std::vector<float> v(3 * 6 * 6);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)) * 5.0);
  return v;
}

std::vector<float> run(const ipu::graph& g, const std::vector<float>& x) {
  ipu::host_tensor t({data_type::F32, {1, 3, 6, 6}});
  std::copy(x.begin(), x.end(), t.as<float>().begin());
  ipu::cpu::device dev(g);
  const auto out = dev.run(std::vector<ipu::host_tensor>{t});
  const auto y = out[0].as<float>();
  return {y.begin(), y.end()};
}

/// The quantized conv by hand: x quantized, the integer sum of (xq - zx) * wq plus the bias,
/// requantized once with sx * sw / sy (float, as ONNX's QLinearConv and PyTorch's fbgemm do),
/// rounded half to even, clamped at [zy, 255] (the Relu), dequantized.
std::vector<float> by_hand(const std::vector<float>& x, std::uint8_t zy) {
  std::vector<std::int64_t> xq(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) xq[i] = std::clamp<std::int64_t>(std::lrint(x[i] / sx) + zx, 0, 255);
  const auto w = weights();
  std::vector<float> y;
  for (int m = 0; m < 4; ++m)
    for (int oy = 0; oy < 6; ++oy)
      for (int ox = 0; ox < 6; ++ox) {
        std::int64_t acc = bias[static_cast<std::size_t>(m)];
        for (int c = 0; c < 3; ++c)
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              const int iy = oy - 1 + i, ix = ox - 1 + j;
              if (iy < 0 || iy >= 6 || ix < 0 || ix >= 6) continue;
              acc += (xq[static_cast<std::size_t>((c * 6 + iy) * 6 + ix)] - zx) *
                     w[static_cast<std::size_t>(((m * 3 + c) * 3 + i) * 3 + j)];
            }
        const float multiplier = sx * sw[static_cast<std::size_t>(m)] / sy;
        const auto q = std::clamp<std::int64_t>(std::lrint(static_cast<float>(acc) * multiplier) + zy, zy, 255);
        y.push_back(static_cast<float>(q - zy) * sy);
      }
  return y;
}

}  // namespace

TEST_CASE("fuse-qdq: Dequantize, Conv, Relu, Quantize become one QLinearConv computing the integer result") {
  const auto g = conv_model();
  const auto fused = ipu::passes::fuse_qdq(g);
  CHECK_NOTHROW(ipu::validate(fused));
  CHECK(count(fused, "QLinearConv") == 1);
  CHECK(count(fused, "Conv") == 0);
  CHECK(count(fused, "Relu") == 0);
  // x's QuantizeLinear and y's DequantizeLinear (and its Cast) stay; the other Casts and
  // DequantizeLinear ops have no reader left.
  CHECK(count(fused, "QuantizeLinear") == 1);
  CHECK(count(fused, "DequantizeLinear") == 1);
  CHECK(count(fused, "Cast") == 1);
  const auto x = input_x();
  const auto want = by_hand(x, 0);
  const auto got = run(fused, x);
  CHECK(got == want);
  // The float graph rounds differently but lands within one quantization step.
  const auto qdq = run(g, x);
  REQUIRE(qdq.size() == got.size());
  std::size_t moved = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(std::abs(qdq[i] - got[i]) <= sy * 1.001f);
    moved += qdq[i] != got[i] ? 1 : 0;
  }
  CHECK(moved < got.size() / 10);
}

TEST_CASE("fuse-qdq removes only what it fused") {
  const auto fused = ipu::passes::fuse_qdq(conv_model({.dead_sigmoid = true}));
  CHECK(count(fused, "QLinearConv") == 1);
  CHECK(count(fused, "Sigmoid") == 1);
  CHECK(count(fused, "DequantizeLinear") == 1);
}

TEST_CASE("fuse-qdq: a Conv without Relu keeps its negative results") {
  const auto fused = ipu::passes::fuse_qdq(conv_model({.relu = false, .zy = 100}));
  CHECK(count(fused, "QLinearConv") == 1);
  const auto got = run(fused, input_x());
  CHECK(*std::min_element(got.begin(), got.end()) < 0.0f);
}

TEST_CASE("fuse-qdq leaves the pattern when fusing would change what it computes beyond requantization") {
  // A Relu before a zero point above 0: Q(Relu(v)) is not Q(v).
  CHECK(count(ipu::passes::fuse_qdq(conv_model({.zy = 5})), "QLinearConv") == 0);
  // A bias not scaled by x_scale * w_scale: QLinearConv would read it wrongly.
  CHECK(count(ipu::passes::fuse_qdq(conv_model({.bias_scale_factor = 1.5f})), "QLinearConv") == 0);
  // The float Conv output is itself returned.
  CHECK(count(ipu::passes::fuse_qdq(conv_model({.conv_output = true})), "QLinearConv") == 0);
  // Weights only known at run time.
  const auto g = conv_model({.weights_input = true});
  const auto same = ipu::passes::fuse_qdq(g);
  CHECK(count(same, "QLinearConv") == 0);
  CHECK(same.num_ops() == g.num_ops());
}

TEST_CASE("fuse-qdq: MatMul with per-column weight scales becomes QLinearMatMul") {
  ipu::builder b("qmatmul", 13);
  const auto a = b.add_input_tensor({data_type::F32, {2, 4}}, "a");
  const auto sa = b.add_constant(make_constant<float>(shape{}, {0.1f}));
  const auto za = b.add_constant(make_constant<std::int8_t>(shape{}, {-3}));
  const auto ad = b.op("DequantizeLinear", {b.op("QuantizeLinear", {a, sa, za})[0], sa, za})[0];
  const std::vector<std::int8_t> wv{1, -2, 3, 4, -5, 6, 7, 8, -9, 10, 11, -12};
  const std::vector<float> swc{0.5f, 0.25f, 0.125f};
  const auto wd = b.op("DequantizeLinear", {b.add_constant(make_constant<std::int8_t>(shape{4, 3}, wv)),
                                             b.add_constant(make_constant<float>(shape{3}, swc))},
                       {{"axis", std::int64_t{1}}})[0];
  const auto sy_t = b.add_constant(make_constant<float>(shape{}, {0.2f}));
  const auto zy_t = b.add_constant(make_constant<std::int8_t>(shape{}, {7}));
  const auto yq = b.op("QuantizeLinear", {b.matmul(ad, wd, "mm/MatMul"), sy_t, zy_t})[0];
  b.add_output(b.op("DequantizeLinear", {yq, sy_t, zy_t})[0]);
  const auto fused = ipu::passes::fuse_qdq(std::move(b).build());
  CHECK(count(fused, "QLinearMatMul") == 1);
  CHECK(count(fused, "MatMul") == 0);
  const std::vector<float> av{0.31f, -1.0f, 2.26f, 0.04f, -0.5f, 0.75f, 12.0f, -13.0f};
  ipu::host_tensor t({data_type::F32, {2, 4}});
  std::copy(av.begin(), av.end(), t.as<float>().begin());
  ipu::cpu::device dev(fused);
  const auto out = dev.run(std::vector<ipu::host_tensor>{t});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      std::int64_t acc = 0;
      for (int k = 0; k < 4; ++k) {
        const auto q = std::clamp<std::int64_t>(std::lrint(av[static_cast<std::size_t>(i * 4 + k)] / 0.1f) - 3, -128, 127);
        acc += (q + 3) * wv[static_cast<std::size_t>(k * 3 + j)];
      }
      const float multiplier = 0.1f * swc[static_cast<std::size_t>(j)] / 0.2f;
      const auto y = std::clamp<std::int64_t>(std::lrint(static_cast<float>(acc) * multiplier) + 7, -128, 127);
      CHECK(out[0].as<float>()[i * 3 + j] == static_cast<float>(y - 7) * 0.2f);
    }
}

TEST_CASE("fuse-qdq is asked for by name, before fold-constants") {
  const auto defaults = ipu::passes::default_passes();
  CHECK(std::find(defaults.begin(), defaults.end(), "fuse-qdq") == defaults.end());
  auto with = ipu::passes::parse_pass_list("fuse-qdq,default");
  REQUIRE(with.size() == defaults.size() + 1);
  CHECK(with.front() == "fuse-qdq");
  CHECK(std::equal(defaults.begin(), defaults.end(), with.begin() + 1));
  CHECK_THROWS_WITH_AS((void)ipu::passes::parse_pass_list("default,fuse-qdq"),
                       doctest::Contains("pass 'fuse-qdq' comes after 'fold-constants'"), ipu::error);
  CHECK_THROWS_WITH_AS((void)ipu::passes::parse_pass_list("fold-constants,fuse-qdq"),
                       doctest::Contains("name fuse-qdq before fold-constants"), ipu::error);
  // Through optimize(): the default passes after it fold what is left.
  const auto g = ipu::passes::optimize(conv_model(), with);
  CHECK(count(g, "QLinearConv") == 1);
  const auto x = input_x();
  CHECK(run(g, x) == by_hand(x, 0));
}

}  // namespace test_fuse_qdq
