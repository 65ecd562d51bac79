// A Relu, Clip or LeakyRelu after a Conv fused into com.microsoft FusedConv: what matches, what
// must not, that the fused graph computes the same bits through every convolution algorithm, and
// FusedConv as ONNX Runtime writes it (Z, the other activations) against the ops it stands for.
#include "ipu/passes/fuse_conv_activation.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/graph/validate.hpp"

namespace test_fuse_conv_activation {

namespace {

using ipu::data_type;
using ipu::tensor_id;

std::vector<float> wave(std::size_t n, double phase, double scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + phase) * scale);
  return v;
}

/// One convolution's shape: which of the kernel's algorithms runs it.
struct conv_shape {
  std::vector<std::int64_t> x;       // [N, C, spatial...]
  std::vector<std::int64_t> w;       // [M, C / group, kernel...]
  ipu::conv_options options{};
  const char* path = "";
};

const conv_shape shapes[] = {
    {{2, 8, 5, 5}, {16, 8, 1, 1}, {}, "pointwise GEMM"},
    {{2, 8, 6, 6}, {8, 1, 3, 3}, {{}, {1, 1, 1, 1}, {}, 8}, "depthwise, 8 channels interleaved"},
    {{2, 4, 20, 20}, {4, 1, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, 4}, "depthwise, row by row"},
    {{2, 4, 9, 9}, {4, 1, 2, 2}, {{}, {}, {}, 4}, "depthwise, tap by tap"},
    {{2, 3, 7, 7}, {5, 3, 3, 3}, {{2, 2}, {1, 1, 1, 1}}, "oneDNN"},
    {{1, 2, 4, 4, 4}, {3, 2, 2, 2, 2}, {}, "3-D, im2col"},
};

enum class act { relu, clip, leaky_relu };

/// x -> Conv(W, B) -> activation -> output.
ipu::graph conv_then(const conv_shape& s, act a, data_type type = data_type::F32) {
  ipu::builder b("conv_act", 17);
  const auto x = b.add_input_tensor({type, ipu::shape(s.x)}, "x");
  std::int64_t wn = 1;
  for (auto d : s.w) wn *= d;
  const auto wv = wave(static_cast<std::size_t>(wn), 0.3, 0.5);
  const auto bv = wave(static_cast<std::size_t>(s.w[0]), 1.1, 0.4);
  tensor_id w, bias;
  if (type == data_type::F32) {
    w = b.add_constant(ipu::make_constant<float>(ipu::shape(s.w), wv), "w");
    bias = b.add_constant(ipu::make_constant<float>({s.w[0]}, bv), "b");
  } else {
    std::vector<double> wd(wv.begin(), wv.end()), bd(bv.begin(), bv.end());
    w = b.add_constant(ipu::make_constant<double>(ipu::shape(s.w), wd), "w");
    bias = b.add_constant(ipu::make_constant<double>({s.w[0]}, bd), "b");
  }
  const auto y = b.conv(x, w, bias, s.options, "block/conv");
  tensor_id z = ipu::no_tensor;
  if (a == act::relu) z = b.relu(y, "block/relu");
  if (a == act::clip) z = b.clip(y, -0.25, 0.5, "block/clip");
  if (a == act::leaky_relu) z = b.leaky_relu(y, 0.125f, "block/leaky");
  b.add_output(z);
  return std::move(b).build();
}

std::size_t count(const ipu::graph& g, std::string_view type) {
  std::size_t n = 0;
  for (const auto& op : g.ops()) n += op.type == type ? 1 : 0;
  return n;
}

ipu::host_tensor input_for(const ipu::graph& g, std::size_t i = 0) {
  const auto& info = g.tensor(g.inputs()[i]).info;
  ipu::host_tensor t(info);
  const auto v = wave(static_cast<std::size_t>(info.shape.num_elements()), 0.7 * static_cast<double>(i), 2.0);
  for (std::size_t k = 0; k < v.size(); ++k) {
    if (info.type == data_type::F32) t.as<float>()[k] = v[k];
    else t.as<double>()[k] = v[k];
  }
  return t;
}

std::vector<ipu::host_tensor> run(const ipu::graph& g, std::size_t threads) {
  std::vector<ipu::host_tensor> in;
  for (std::size_t i = 0; i < g.inputs().size(); ++i) in.push_back(input_for(g, i));
  ipu::cpu::device dev(g, {.threads = threads});
  return dev.run(in);
}

bool same_bits(const ipu::host_tensor& a, const ipu::host_tensor& b) {
  return a.info() == b.info() && std::memcmp(a.data(), b.data(), a.info().num_bytes()) == 0;
}

}  // namespace

TEST_CASE("Conv then Relu, Clip or LeakyRelu becomes one FusedConv with the same bits, on every algorithm") {
  for (const auto& s : shapes)
    for (const act a : {act::relu, act::clip, act::leaky_relu}) {
      CAPTURE(std::string(s.path));
      CAPTURE(static_cast<int>(a));
      const auto g = conv_then(s, a);
      const auto fused = ipu::passes::fuse_conv_activation(g);
      CHECK_NOTHROW(ipu::validate(fused));
      REQUIRE(fused.num_ops() == 1);
      const auto& op = fused.op(0);
      CHECK(op.domain == "com.microsoft");
      CHECK(op.type == "FusedConv");
      CHECK(op.name == "block/FusedConv");
      CHECK(op.inputs == g.op(0).inputs);
      REQUIRE(op.outputs.size() == 1);
      CHECK(fused.tensor(op.outputs[0]).name == g.tensor(g.op(1).outputs[0]).name);
      const auto* activation = op.find_attribute("activation");
      REQUIRE(activation != nullptr);
      const auto* params = op.find_attribute("activation_params");
      if (a == act::relu) {
        CHECK(std::get<std::string>(activation->value) == "Relu");
        CHECK(params == nullptr);
      } else if (a == act::clip) {
        CHECK(std::get<std::string>(activation->value) == "Clip");
        REQUIRE(params != nullptr);
        CHECK(std::get<std::vector<float>>(params->value) == std::vector<float>{-0.25f, 0.5f});
      } else {
        CHECK(std::get<std::string>(activation->value) == "LeakyRelu");
        REQUIRE(params != nullptr);
        CHECK(std::get<std::vector<float>>(params->value) == std::vector<float>{0.125f});
      }
      for (std::size_t threads : {1u, 2u}) {
        const auto want = run(g, threads), got = run(fused, threads);
        REQUIRE(got.size() == 1);
        CHECK(same_bits(got[0], want[0]));
      }
    }
}

TEST_CASE("what must not fuse: a shared or output Conv result, unknown Clip bounds, F64, split placements") {
  const auto& s = shapes[0];
  {  // the Conv's output is also a graph output
    auto b = ipu::builder("g", 17);
    const auto x = b.add_input_tensor({data_type::F32, {1, 2, 3, 3}}, "x");
    const auto w = b.add_constant(ipu::make_constant<float>({2, 2, 1, 1}, std::vector<float>{1, 2, 3, 4}));
    const auto y = b.conv(x, w);
    b.add_output(b.relu(y));
    b.add_output(y);
    const auto g = std::move(b).build();
    CHECK(ipu::passes::fuse_conv_activation(g) == g);
  }
  {  // read by two ops
    auto b = ipu::builder("g", 17);
    const auto x = b.add_input_tensor({data_type::F32, {1, 2, 3, 3}}, "x");
    const auto w = b.add_constant(ipu::make_constant<float>({2, 2, 1, 1}, std::vector<float>{1, 2, 3, 4}));
    const auto y = b.conv(x, w);
    b.add_output(b.relu(y));
    b.add_output(b.neg(y));
    const auto g = std::move(b).build();
    CHECK(ipu::passes::fuse_conv_activation(g) == g);
  }
  {  // Clip's upper bound is an input, unknown before running
    auto b = ipu::builder("g", 17);
    const auto x = b.add_input_tensor({data_type::F32, {1, 2, 3, 3}}, "x");
    const auto hi = b.add_input_tensor({data_type::F32, {}}, "hi");
    const auto w = b.add_constant(ipu::make_constant<float>({2, 2, 1, 1}, std::vector<float>{1, 2, 3, 4}));
    const auto lo = b.add_constant(ipu::make_scalar(0.0f));
    b.add_output(b.op("Clip", {b.conv(x, w), lo, hi})[0]);
    const auto g = std::move(b).build();
    CHECK(ipu::passes::fuse_conv_activation(g) == g);
  }
  {  // F64: FusedConv is F32
    const auto g = conv_then(s, act::relu, data_type::F64);
    CHECK(ipu::passes::fuse_conv_activation(g) == g);
  }
  {  // the two ops placed on different IPUs, or the Conv's output a recomputation checkpoint
    const auto split = conv_then(s, act::relu);
    for (int variant = 0; variant < 2; ++variant) {
      ipu::graph g = split;
      if (variant == 0) g.op(0).where.ipu = 1;
      else g.op(0).where.checkpoint = true;
      CHECK(ipu::passes::fuse_conv_activation(g) == g);
    }
  }
  CHECK(count(ipu::passes::fuse_conv_activation(conv_then(s, act::clip)), "Clip") == 0);
}

namespace {

enum class residual_form { y_plus_r, r_plus_y, then_neg, broadcast };

/// x -> Conv -> Add with r (the second input) -> Relu (or Neg) -> output, as a ResNet block ends.
ipu::graph residual_block(const conv_shape& s, residual_form form) {
  ipu::builder b("residual", 17);
  const auto x = b.add_input_tensor({data_type::F32, ipu::shape(s.x)}, "x");
  std::int64_t wn = 1;
  for (auto d : s.w) wn *= d;
  const auto w = b.add_constant(ipu::make_constant<float>(ipu::shape(s.w), wave(static_cast<std::size_t>(wn), 0.3, 0.5)), "w");
  const auto bias = b.add_constant(ipu::make_constant<float>({s.w[0]}, wave(static_cast<std::size_t>(s.w[0]), 1.1, 0.4)), "b");
  const auto y = b.conv(x, w, bias, s.options, "block/conv");
  auto r_shape = b.info(y).shape;
  if (form == residual_form::broadcast) r_shape = ipu::shape{1, s.w[0], 1, 1};
  const auto r = b.add_input_tensor({data_type::F32, r_shape}, "r");
  const auto sum = form == residual_form::r_plus_y ? b.add(r, y, "block/add") : b.add(y, r, "block/add");
  b.add_output(form == residual_form::then_neg ? b.neg(sum, "block/neg") : b.relu(sum, "block/relu"));
  return std::move(b).build();
}

}  // namespace

TEST_CASE("a residual Add after the Conv becomes FusedConv's Z, with the activation after it or none") {
  for (const auto& s : shapes) {
    if (s.x.size() != 4) continue;
    for (const auto form : {residual_form::y_plus_r, residual_form::r_plus_y, residual_form::then_neg}) {
      CAPTURE(std::string(s.path));
      CAPTURE(static_cast<int>(form));
      const auto g = residual_block(s, form);
      const auto fused = ipu::passes::fuse_conv_activation(g);
      CHECK_NOTHROW(ipu::validate(fused));
      REQUIRE(count(fused, "FusedConv") == 1);
      CHECK(count(fused, "Add") == 0);
      CHECK(count(fused, "Relu") == 0);
      CHECK(fused.num_ops() == (form == residual_form::then_neg ? 2u : 1u));
      const auto& op = fused.op(0);
      REQUIRE(op.inputs.size() == 4);
      CHECK(fused.tensor(op.inputs[3]).name == "r");
      CHECK((op.find_attribute("activation") == nullptr) == (form == residual_form::then_neg));
      for (std::size_t threads : {1u, 2u}) {
        const auto want = run(g, threads), got = run(fused, threads);
        CHECK(same_bits(got[0], want[0]));
      }
    }
  }
  // A residual that broadcasts is not Z: only the Relu after the Add could fuse, and it follows an Add.
  const auto g = residual_block(shapes[0], residual_form::broadcast);
  CHECK(ipu::passes::fuse_conv_activation(g) == g);
}

namespace {

/// x -> FusedConv(W, B, Z) as ONNX Runtime writes it, and the same written out as Conv, Add and
/// the activation op.
std::pair<ipu::graph, ipu::graph> fused_and_written_out(const std::string& activation, const std::vector<float>& params,
                                                        bool with_z) {
  const auto& s = shapes[4];  // oneDNN's path
  ipu::graph both[2];
  for (int written_out = 0; written_out < 2; ++written_out) {
    ipu::builder b("fused", 17);
    const auto x = b.add_input_tensor({data_type::F32, ipu::shape(s.x)}, "x");
    const auto z = with_z ? b.add_input_tensor({data_type::F32, {2, 5, 4, 4}}, "z") : ipu::no_tensor;
    const auto w = b.add_constant(ipu::make_constant<float>(ipu::shape(s.w), wave(5 * 3 * 9, 0.3, 0.5)), "w");
    const auto bias = b.add_constant(ipu::make_constant<float>({5}, wave(5, 1.1, 0.4)), "b");
    if (written_out == 0) {
      std::vector<ipu::attribute> at{{"strides", std::vector<std::int64_t>{2, 2}},
                                     {"pads", std::vector<std::int64_t>{1, 1, 1, 1}},
                                     {"activation", activation}};
      if (!params.empty()) at.push_back({"activation_params", params});
      std::vector<tensor_id> in{x, w, bias};
      if (with_z) in.push_back(z);
      b.add_output(b.op("FusedConv", in, at, ipu::op_options{1, 1, "f", "com.microsoft"})[0]);
    } else {
      auto y = b.conv(x, w, bias, s.options);
      if (with_z) y = b.add(y, z);
      std::vector<ipu::attribute> at;
      if (activation == "LeakyRelu") at.push_back({"alpha", params[0]});
      if (activation == "HardSigmoid") at = {{"alpha", params[0]}, {"beta", params[1]}};
      if (activation == "Clip") y = b.clip(y, params[0], params[1]);
      else y = b.op(activation, {y}, at)[0];
      b.add_output(y);
    }
    both[written_out] = std::move(b).build();
  }
  return {both[0], both[1]};
}

}  // namespace

TEST_CASE("FusedConv as ONNX Runtime writes it: Z and every activation, against the ops it stands for") {
  struct activation_case {
    const char* name;
    std::vector<float> params;
  };
  const activation_case cases[] = {{"Relu", {}},   {"Clip", {-0.5f, 0.25f}}, {"LeakyRelu", {0.2f}},
                                   {"HardSigmoid", {0.3f, 0.4f}}, {"Sigmoid", {}}, {"Tanh", {}}};
  for (const auto& c : cases)
    for (const bool with_z : {false, true}) {
      CAPTURE(c.name);
      CAPTURE(with_z);
      const auto [fused, written_out] = fused_and_written_out(c.name, c.params, with_z);
      const auto got = run(fused, 1), want = run(written_out, 1);
      CHECK(same_bits(got[0], want[0]));
    }
}

TEST_CASE("F16 FusedConv adds Z with no activation, as Conv then Add do") {
  // A residual Add with nothing after it (MobileNetV2's and MNASNet's projections) at half precision.
  const std::vector<std::int64_t> xs{2, 4, 5, 5}, ws{4, 4, 3, 3};
  auto halves = [](const std::vector<float>& v) {
    std::vector<ipu::half> h;
    for (const float f : v) h.emplace_back(f);
    return h;
  };
  ipu::graph both[2];
  for (int written_out = 0; written_out < 2; ++written_out) {
    ipu::builder b("f16", 17);
    const auto x = b.add_input_tensor({data_type::F16, ipu::shape(xs)}, "x");
    const auto z = b.add_input_tensor({data_type::F16, ipu::shape(xs)}, "z");
    const auto w = b.add_constant(ipu::make_constant<ipu::half>(ipu::shape(ws), halves(wave(144, 0.3, 0.5))), "w");
    const auto bias = b.add_constant(ipu::make_constant<ipu::half>({4}, halves(wave(4, 1.1, 0.4))), "b");
    const ipu::conv_options pad{{}, {1, 1, 1, 1}};
    if (written_out == 0)
      b.add_output(b.op("FusedConv", {x, w, bias, z}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}},
                        ipu::op_options{1, 1, "f", "com.microsoft"})[0]);
    else
      b.add_output(b.add(b.conv(x, w, bias, pad), z));
    both[written_out] = std::move(b).build();
  }
  std::vector<ipu::host_tensor> in;
  for (std::size_t i = 0; i < 2; ++i) {
    ipu::host_tensor t({data_type::F16, ipu::shape(xs)});
    const auto v = halves(wave(200, 0.7 * static_cast<double>(i + 1), 2.0));
    std::copy(v.begin(), v.end(), t.as<ipu::half>().begin());
    in.push_back(std::move(t));
  }
  const auto fused = ipu::cpu::device(both[0]).run(in), written = ipu::cpu::device(both[1]).run(in);
  // One rounding against two: at most one F16 unit in the last place apart, and Z is in both.
  const auto f = fused[0].as<ipu::half>(), w = written[0].as<ipu::half>();
  REQUIRE(f.size() == w.size());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(f[i])) - static_cast<float>(w[i])));
    scale = std::max(scale, std::abs(static_cast<double>(static_cast<float>(w[i]))));
  }
  CHECK(worst <= scale * 2e-3);
}

TEST_CASE("FusedConv refuses an unknown activation, a wrong parameter count, a misshapen Z and F64") {
  ipu::builder b("bad", 17);
  const auto x = b.add_input_tensor({data_type::F32, {1, 2, 3, 3}}, "x");
  const auto w = b.add_constant(ipu::make_constant<float>({2, 2, 1, 1}, std::vector<float>{1, 2, 3, 4}));
  const auto z = b.add_input_tensor({data_type::F32, {1, 2, 3, 2}}, "z");
  const ipu::op_options ms{1, 1, {}, "com.microsoft"};
  CHECK_THROWS_WITH_AS((void)b.op("FusedConv", {x, w}, {{"activation", std::string("Swish")}}, ms),
                       doctest::Contains("activation 'Swish' is not one FusedConv applies"), ipu::error);
  CHECK_THROWS_WITH_AS((void)b.op("FusedConv", {x, w}, {{"activation", std::string("Clip")}}, ms),
                       doctest::Contains("takes 2 activation_params, not 0"), ipu::error);
  CHECK_THROWS_WITH_AS(
      (void)b.op("FusedConv", {x, w, ipu::no_tensor, z}, {{"activation", std::string("Relu")}}, ms),
      doctest::Contains("is not of the output's shape"), ipu::error);
  const auto x64 = b.add_input_tensor({data_type::F64, {1, 2, 3, 3}}, "x64");
  const auto w64 = b.add_constant(ipu::make_constant<double>({2, 2, 1, 1}, std::vector<double>{1, 2, 3, 4}));
  CHECK_THROWS_WITH_AS((void)b.op("FusedConv", {x64, w64}, {{"activation", std::string("Relu")}}, ms),
                       doctest::Contains("FusedConv takes F32 or F16, not F64"), ipu::error);
}

}  // namespace test_fuse_conv_activation
