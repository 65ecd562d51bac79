// Chains of convolutions on channel-blocked data: which convolutions the pass blocks, where it
// puts ToNchwc and FromNchwc, that the blocked graph computes what the plain one does (channel
// counts that leave part of a block unused included), and the ops' refusals.
#include "ipu/passes/nchwc_layout.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/passes/fuse_conv_activation.hpp"

namespace test_nchwc_layout {

namespace {

using ipu::data_type;
using ipu::tensor_id;

std::vector<float> wave(std::size_t n, double phase, double scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + phase) * scale);
  return v;
}

tensor_id weights(ipu::builder& b, std::vector<std::int64_t> dims, double phase, const std::string& name) {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return b.add_constant(ipu::make_constant<float>(ipu::shape(dims), wave(static_cast<std::size_t>(n), phase, 0.4)), name);
}

/// An inverted residual block as MobileNetV2 writes it, channel counts that are not multiples of
/// the block: x [2, 12, 9, 9] -> 1x1 to 20 -> Relu -> depthwise 3x3 -> Clip -> 1x1 to 12 -> + x.
/// `side_reader`: the depthwise output is also read by a Neg, a graph output of its own.
ipu::graph inverted_residual(bool side_reader) {
  ipu::builder b("block", 17);
  const auto x = b.add_input_tensor({data_type::F32, {2, 12, 9, 9}}, "x");
  auto y = b.conv(x, weights(b, {20, 12, 1, 1}, 0.1, "w1"), weights(b, {20}, 0.2, "b1"), {}, "expand/conv");
  y = b.relu(y, "expand/relu");
  y = b.conv(y, weights(b, {20, 1, 3, 3}, 0.3, "w2"), weights(b, {20}, 0.4, "b2"), {{}, {1, 1, 1, 1}, {}, 20},
             "depthwise/conv");
  y = b.clip(y, 0.0, 0.6, "depthwise/clip");
  if (side_reader) b.add_output(b.neg(y, "side/neg"));
  y = b.conv(y, weights(b, {12, 20, 1, 1}, 0.5, "w3"), weights(b, {12}, 0.6, "b3"), {}, "project/conv");
  b.add_output(b.add(y, x, "project/add"));
  return std::move(b).build();
}

std::size_t count(const ipu::graph& g, std::string_view type) {
  std::size_t n = 0;
  for (const auto& op : g.ops()) n += op.type == type ? 1 : 0;
  return n;
}

std::vector<ipu::host_tensor> run(const ipu::graph& g, std::size_t threads) {
  std::vector<ipu::host_tensor> in;
  for (std::size_t i = 0; i < g.inputs().size(); ++i) {
    const auto& info = g.tensor(g.inputs()[i]).info;
    ipu::host_tensor t(info);
    const auto v = wave(static_cast<std::size_t>(info.shape.num_elements()), 0.7 * static_cast<double>(i + 1), 2.0);
    std::copy(v.begin(), v.end(), t.as<float>().begin());
    in.push_back(std::move(t));
  }
  ipu::cpu::device dev(g, {.threads = threads});
  return dev.run(in);
}

/// max |a - b| / max |b| over the outputs, which must agree in type and shape.
double relative_difference(const std::vector<ipu::host_tensor>& a, const std::vector<ipu::host_tensor>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].info() == b[i].info());
    const auto x = a[i].as<float>(), y = b[i].as<float>();
    double diff = 0, scale = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
      diff = std::max(diff, std::abs(static_cast<double>(x[k]) - y[k]));
      scale = std::max(scale, std::abs(static_cast<double>(y[k])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

/// Runs `g` at 1 and 2 threads: its `outputs` outputs are pairs, a plain op's and its blocked
/// counterpart's, which must hold the same bytes.
void check_pairs_bitwise_equal(const ipu::graph& g, const std::vector<ipu::host_tensor>& in, std::size_t outputs) {
  for (const std::size_t threads : {1u, 2u}) {
    CAPTURE(threads);
    ipu::cpu::device dev(g, {.threads = threads});
    const auto out = dev.run(in);
    REQUIRE(out.size() == outputs);
    for (std::size_t k = 0; k < outputs; k += 2) {
      CAPTURE(k);
      REQUIRE(out[k].info() == out[k + 1].info());
      const auto a = out[k].bytes(), c = out[k + 1].bytes();
      CHECK(std::equal(a.begin(), a.end(), c.begin(), c.end()));
    }
  }
}

}  // namespace

TEST_CASE("an inverted residual block runs blocked: one ToNchwc for x, FromNchwc where NCHW is read, same results") {
  for (const bool side_reader : {false, true})
  for (const std::int64_t block : {std::int64_t{8}, std::int64_t{16}}) {
    CAPTURE(side_reader);
    CAPTURE(block);
    const auto g = inverted_residual(side_reader);
    const auto fused = ipu::passes::fuse_conv_activation(g);
    REQUIRE(count(fused, "FusedConv") == 3);  // the projection's Add is its Z
    const auto blocked = ipu::passes::nchwc_layout(fused, block);
    CHECK_NOTHROW(ipu::validate(blocked));
    CHECK(count(blocked, "FusedConv") == 0);
    CHECK(count(blocked, "NchwcConv") == 3);
    // x is read by the expansion (X) and the projection (Z): blocked once.
    CHECK(count(blocked, "ToNchwc") == 1);
    // The graph outputs: the block's, and the Neg's, which runs on the blocked depthwise output.
    CHECK(count(blocked, "FromNchwc") == (side_reader ? 2u : 1u));
    if (side_reader) {
      const auto neg = std::ranges::find_if(blocked.ops(), [](const auto& op) { return op.type == "Neg"; });
      REQUIRE(neg != blocked.ops().end());
      CHECK(blocked.tensor(neg->inputs[0]).info.shape == ipu::shape{2, block == 8 ? 24 : 32, 9, 9});
    }
    for (const auto& op : blocked.ops()) {
      if (op.type != "NchwcConv" && op.type != "ToNchwc" && op.type != "FromNchwc") continue;
      CHECK(op.domain == "ipu");
      const auto* block_attr = op.find_attribute("block");
      REQUIRE(block_attr != nullptr);
      CHECK(std::get<std::int64_t>(block_attr->value) == block);
      for (const auto t : op.outputs) {
        const auto& s = blocked.tensor(t).info.shape;
        if (op.type != "FromNchwc") CHECK(s[1] % block == 0);
      }
    }
    // The names users see stay: outputs keep theirs, blocked convolutions their Conv's.
    CHECK(blocked.tensor(blocked.outputs().back()).name == g.tensor(g.outputs().back()).name);
    CHECK(std::ranges::any_of(blocked.ops(), [](const auto& op) { return op.name == "depthwise/FusedConv"; }));
    for (const std::size_t threads : {1u, 2u}) {
      CAPTURE(threads);
      const auto want = run(g, threads), got = run(blocked, threads);
      CHECK(relative_difference(got, want) < 1e-5);
      // The blocked graph gives the same bits on every run at a thread count.
      const auto again = run(blocked, threads);
      CHECK(relative_difference(again, got) == 0);
    }
  }
}

TEST_CASE("the block is the host's by default, 8 or 16; other blocks are refused") {
  const auto host = ipu::passes::nchwc_host_block();
  CHECK((host == 8 || host == 16));
  const auto g = ipu::passes::fuse_conv_activation(inverted_residual(false));
  CHECK(ipu::passes::nchwc_layout(g) == ipu::passes::nchwc_layout(g, host));
  CHECK(ipu::passes::nchwc_layout(g, 8) != ipu::passes::nchwc_layout(g, 16));
  CHECK_THROWS_WITH_AS(ipu::passes::nchwc_layout(g, 12), doctest::Contains("block channels by 8 or 16"), ipu::error);
}

TEST_CASE("elementwise ops between convolutions join their group; a group with one convolution stays NCHW") {
  // Unfused: Conv -> Relu -> depthwise Conv is a group of two convolutions, Relu on blocked data;
  // Clip (not zero-preserving for every bound) ends it; the projection and its Add are a group
  // of one convolution.
  const auto g = inverted_residual(false);
  const auto blocked = ipu::passes::nchwc_layout(g, 8);
  CHECK_NOTHROW(ipu::validate(blocked));
  CHECK(count(blocked, "NchwcConv") == 2);
  CHECK(count(blocked, "Conv") == 1);
  CHECK(count(blocked, "ToNchwc") == 1);
  CHECK(count(blocked, "FromNchwc") == 1);  // the depthwise output, for Clip
  const auto relu = std::ranges::find_if(blocked.ops(), [](const auto& op) { return op.type == "Relu"; });
  REQUIRE(relu != blocked.ops().end());
  CHECK(blocked.tensor(relu->outputs[0]).info.shape == ipu::shape{2, 24, 9, 9});
  for (const std::size_t threads : {1u, 2u}) CHECK(relative_difference(run(blocked, threads), run(g, threads)) < 1e-5);
}

TEST_CASE("a stem of fewer channels than a block reads NCHW and writes blocks: no ToNchwc") {
  ipu::builder b("stem", 17);
  const auto x = b.add_input_tensor({data_type::F32, {2, 3, 10, 10}}, "x");
  auto y = b.conv(x, weights(b, {16, 3, 3, 3}, 0.1, "w1"), weights(b, {16}, 0.2, "b1"), {{2, 2}, {1, 1, 1, 1}}, "stem/conv");
  y = b.relu(y, "stem/relu");
  y = b.conv(y, weights(b, {16, 1, 3, 3}, 0.3, "w2"), ipu::no_tensor, {{}, {1, 1, 1, 1}, {}, 16}, "depthwise/conv");
  b.add_output(y);
  const auto g = std::move(b).build();
  const auto blocked = ipu::passes::nchwc_layout(g, 8);
  CHECK_NOTHROW(ipu::validate(blocked));
  CHECK(count(blocked, "NchwcConv") == 2);
  CHECK(count(blocked, "ToNchwc") == 0);
  CHECK(count(blocked, "FromNchwc") == 1);
  CHECK(blocked.tensor(blocked.op(0).inputs[0]).name == "x");
  for (const std::size_t threads : {1u, 2u}) CHECK(relative_difference(run(blocked, threads), run(g, threads)) < 1e-5);
}

TEST_CASE("Concat along channels of whole blocks joins the group, as SqueezeNet's fire modules need; other Concats do not") {
  for (const std::int64_t expand : {16, 12}) {
    CAPTURE(expand);
    ipu::builder b("fire", 17);
    const auto x = b.add_input_tensor({data_type::F32, {2, 16, 7, 7}}, "x");
    const auto s = b.relu(b.conv(x, weights(b, {8, 16, 1, 1}, 0.1, "ws"), weights(b, {8}, 0.2, "bs"), {}, "squeeze"));
    const auto e1 = b.relu(b.conv(s, weights(b, {expand, 8, 1, 1}, 0.3, "w1"), weights(b, {expand}, 0.4, "b1"), {}, "expand1x1"));
    const auto e3 = b.relu(b.conv(s, weights(b, {expand, 8, 3, 3}, 0.5, "w3"), weights(b, {expand}, 0.6, "b3"),
                                  {{}, {1, 1, 1, 1}}, "expand3x3"));
    b.add_output(b.op("Concat", {e1, e3}, {{"axis", std::int64_t{1}}})[0]);
    const auto g = ipu::passes::fuse_conv_activation(std::move(b).build());
    const auto blocked = ipu::passes::nchwc_layout(g, 8);
    CHECK_NOTHROW(ipu::validate(blocked));
    CHECK(count(blocked, "NchwcConv") == 3);
    CHECK(count(blocked, "ToNchwc") == 1);
    // Blocked, the Concat's output is the graph output's FromNchwc; else each expansion's.
    CHECK(count(blocked, "FromNchwc") == (expand == 16 ? 1u : 2u));
    const auto concat = std::ranges::find_if(blocked.ops(), [](const auto& op) { return op.type == "Concat"; });
    REQUIRE(concat != blocked.ops().end());
    CHECK(blocked.tensor(concat->inputs[0]).name.ends_with("/nchwc") == (expand == 16));
    for (const std::size_t threads : {1u, 2u}) CHECK(relative_difference(run(blocked, threads), run(g, threads)) < 1e-5);
  }
}

TEST_CASE("pools between convolutions join the group: MaxPool, AveragePool and the global pools run blocked") {
  // A stem, a ceil_mode MaxPool, a padded 3x3 MaxPool, AveragePools with and without the padding
  // counted, the global pools: 12 and 20 channels, so blocks have unused channels.
  ipu::builder b("pools", 17);
  const auto x = b.add_input_tensor({data_type::F32, {2, 3, 19, 19}}, "x");
  auto y = b.relu(b.conv(x, weights(b, {12, 3, 3, 3}, 0.1, "w1"), weights(b, {12}, 0.2, "b1"), {{2, 2}, {1, 1, 1, 1}}));
  y = b.max_pool(y, {{3, 3}, {2, 2}, {}, true}, "stem/pool");
  CHECK(b.info(y).shape == ipu::shape{2, 12, 5, 5});
  y = b.relu(b.conv(y, weights(b, {20, 12, 1, 1}, 0.3, "w2"), weights(b, {20}, 0.4, "b2")));
  y = b.max_pool(y, {{3, 3}, {1, 1}, {1, 1, 1, 1}});
  y = b.conv(y, weights(b, {12, 20, 3, 3}, 0.5, "w3"), weights(b, {12}, 0.6, "b3"), {{}, {1, 1, 1, 1}});
  const ipu::pool_options window{{3, 3}, {2, 2}, {1, 1, 1, 1}};
  b.add_output(b.average_pool(y, window));
  auto counted = window;
  counted.count_include_pad = true;
  const auto a = b.average_pool(y, counted);
  b.add_output(b.global_average_pool(a));
  b.add_output(b.global_max_pool(a));
  const auto g = std::move(b).build();
  const auto blocked = ipu::passes::nchwc_layout(g, 8);
  CHECK_NOTHROW(ipu::validate(blocked));
  CHECK(count(blocked, "NchwcConv") == 3);
  CHECK(count(blocked, "NchwcMaxPool") == 3);
  CHECK(count(blocked, "NchwcAveragePool") == 3);
  CHECK(count(blocked, "MaxPool") + count(blocked, "AveragePool") + count(blocked, "GlobalAveragePool") +
            count(blocked, "GlobalMaxPool") ==
        0);
  CHECK(count(blocked, "ToNchwc") == 0);    // the stem reads x as it is
  CHECK(count(blocked, "FromNchwc") == 3);  // the graph outputs only
  for (const auto& op : blocked.ops())
    if (op.type == "NchwcMaxPool" || op.type == "NchwcAveragePool") {
      const auto* channels = op.find_attribute("channels");
      REQUIRE(channels != nullptr);
      const auto c = std::get<std::int64_t>(channels->value);
      CHECK((c == 12 || c == 20));
      CHECK(blocked.tensor(op.inputs[0]).info.shape[1] == (c == 12 ? 16 : 24));
    }
  for (const std::size_t threads : {1u, 2u}) {
    CAPTURE(threads);
    const auto got = run(blocked, threads);
    CHECK(relative_difference(got, run(g, threads)) < 1e-5);
    CHECK(relative_difference(run(blocked, threads), got) == 0);
  }
}

TEST_CASE("NchwcMaxPool and NchwcAveragePool give MaxPool's and AveragePool's values, NaN included, F32 and F16") {
  for (const auto type : {data_type::F32, data_type::F16}) {
    CAPTURE(type);
    ipu::builder b("direct", 17);
    const auto x = b.add_input_tensor({type, {2, 5, 7, 8}}, "x");
    const ipu::op_options ipu_op{1, 1, {}, "ipu"};
    const std::vector<ipu::attribute> max_window{{"kernel_shape", std::vector<std::int64_t>{3, 2}},
                                                 {"strides", std::vector<std::int64_t>{2, 3}},
                                                 {"pads", std::vector<std::int64_t>{1, 0, 1, 1}},
                                                 {"dilations", std::vector<std::int64_t>{1, 2}},
                                                 {"ceil_mode", std::int64_t{1}}};
    b.add_output(b.op("MaxPool", {x}, max_window)[0]);
    auto blocked_window = max_window;
    blocked_window.push_back({"channels", std::int64_t{5}});
    const auto xb = b.op("ToNchwc", {x}, {}, ipu_op)[0];
    const auto from = [&](tensor_id t) {
      return b.op("FromNchwc", {t}, {{"channels", std::int64_t{5}}}, ipu_op)[0];
    };
    b.add_output(from(b.op("NchwcMaxPool", {xb}, blocked_window, ipu_op)[0]));
    for (const std::int64_t include_pad : {0, 1}) {
      const std::vector<ipu::attribute> window{{"kernel_shape", std::vector<std::int64_t>{3, 3}},
                                               {"strides", std::vector<std::int64_t>{2, 2}},
                                               {"pads", std::vector<std::int64_t>{1, 1, 1, 1}},
                                               {"count_include_pad", include_pad}};
      b.add_output(b.op("AveragePool", {x}, window)[0]);
      auto blocked_average = window;
      blocked_average.push_back({"channels", std::int64_t{5}});
      b.add_output(from(b.op("NchwcAveragePool", {xb}, blocked_average, ipu_op)[0]));
    }
    const auto g = std::move(b).build();
    ipu::host_tensor in(g.tensor(g.inputs()[0]).info);
    const auto v = wave(static_cast<std::size_t>(in.info().shape.num_elements()), 0.3, 2.0);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float e = i == 75 ? std::numeric_limits<float>::quiet_NaN() : v[i];
      if (type == data_type::F32) in.as<float>()[i] = e;
      else in.as<ipu::half>()[i] = ipu::half(e);
    }
    // The same windows in the same order: the same bits, NaN where the plain pool has NaN.
    check_pairs_bitwise_equal(g, {in}, 6);
  }
}

TEST_CASE("the blocked pools refuse attributes they do not have and channel counts that do not fit") {
  ipu::builder b("bad pools", 17);
  const auto x = b.add_input_tensor({data_type::F32, {1, 3, 4, 4}}, "x");
  const ipu::op_options ipu_op{1, 1, {}, "ipu"};
  const auto xb = b.op("ToNchwc", {x}, {}, ipu_op)[0];
  const ipu::attribute kernel{"kernel_shape", std::vector<std::int64_t>{2, 2}};
  CHECK(b.info(b.op("NchwcMaxPool", {xb}, {kernel, {"channels", std::int64_t{3}}}, ipu_op)[0]).shape ==
        ipu::shape{1, 8, 3, 3});
  // Indices are NCHW's: a blocked MaxPool has none to order.
  CHECK_THROWS_WITH_AS(
      (void)b.op("NchwcMaxPool", {xb}, {kernel, {"channels", std::int64_t{3}}, {"storage_order", std::int64_t{1}}}, ipu_op),
      doctest::Contains("attribute 'storage_order' is not one of NchwcMaxPool's"), ipu::error);
  CHECK_THROWS_WITH_AS((void)b.op("NchwcAveragePool", {xb}, {kernel, {"channels", std::int64_t{9}}}, ipu_op),
                       doctest::Contains("channels 9 do not fill blocked X"), ipu::error);
  CHECK_THROWS_WITH_AS((void)b.op("NchwcAveragePool", {xb}, {kernel}, ipu_op),
                       doctest::Contains("channels 0 do not fill blocked X"), ipu::error);
  CHECK_THROWS_WITH_AS((void)b.op("NchwcMaxPool", {xb}, {{"channels", std::int64_t{3}}}, ipu_op),
                       doctest::Contains("kernel_shape is required"), ipu::error);
}

/// Per-channel parameters of a batch normalisation over `c` channels, the variances positive.
std::vector<tensor_id> batch_norm_parameters(ipu::builder& b, std::int64_t c, double phase) {
  std::vector<tensor_id> p;
  for (int k = 0; k < 4; ++k) {
    auto v = wave(static_cast<std::size_t>(c), phase + k, 0.5);
    if (k == 3)
      for (auto& e : v) e = 0.2f + e * e;
    p.push_back(b.add_constant(ipu::make_constant<float>({c}, v), "bn" + std::to_string(phase) + "/" + std::to_string(k)));
  }
  return p;
}

TEST_CASE("a dense block runs blocked: its pre-activation BatchNormalizations join the group") {
  // DenseNet's pattern: Concat -> BatchNormalization -> Relu -> Conv 1x1 -> Relu -> Conv 3x3 ->
  // Concat, then a transition: BatchNormalization -> Relu -> Conv 1x1 -> AveragePool.
  ipu::builder b("dense", 17);
  const auto x = b.add_input_tensor({data_type::F32, {2, 16, 6, 6}}, "x");
  auto layer = [&](tensor_id in, std::int64_t c, double phase) {
    const auto p = batch_norm_parameters(b, c, phase);
    auto y = b.relu(b.batch_normalization(in, p[0], p[1], p[2], p[3]));
    y = b.relu(b.conv(y, weights(b, {16, c, 1, 1}, phase, "w1/" + std::to_string(phase))));
    return b.conv(y, weights(b, {8, 16, 3, 3}, phase + 0.5, "w3/" + std::to_string(phase)), ipu::no_tensor,
                  {{}, {1, 1, 1, 1}});
  };
  auto y = b.concat({x, layer(x, 16, 0.1)}, 1);
  y = b.concat({y, layer(y, 24, 0.2)}, 1);
  const auto p = batch_norm_parameters(b, 32, 0.3);
  y = b.relu(b.batch_normalization(y, p[0], p[1], p[2], p[3]));
  y = b.conv(y, weights(b, {12, 32, 1, 1}, 0.4, "transition"));
  b.add_output(b.average_pool(y, {{2, 2}, {2, 2}}));
  const auto g = std::move(b).build();
  const auto blocked = ipu::passes::nchwc_layout(g, 8);
  CHECK_NOTHROW(ipu::validate(blocked));
  CHECK(count(blocked, "NchwcConv") == 5);
  CHECK(count(blocked, "NchwcBatchNormalization") == 3);
  CHECK(count(blocked, "BatchNormalization") == 0);
  CHECK(count(blocked, "ToNchwc") == 1);    // x
  CHECK(count(blocked, "FromNchwc") == 1);  // the output
  for (const std::size_t threads : {1u, 2u}) {
    CAPTURE(threads);
    const auto got = run(blocked, threads);
    CHECK(relative_difference(got, run(g, threads)) < 1e-5);
    CHECK(relative_difference(run(blocked, threads), got) == 0);
  }
}

TEST_CASE("squeeze-and-excitation runs blocked: Mul by one factor per image and channel is NchwcScale") {
  // x -> Conv -> Relu -+-> GlobalAveragePool -> Conv -> Relu -> Conv -> Sigmoid -+-> Mul -> Conv
  //                    +--------------------------------------------------------+
  for (const bool scale_first : {true, false}) {
    CAPTURE(scale_first);
    ipu::builder b("se", 17);
    const auto x = b.add_input_tensor({data_type::F32, {2, 12, 5, 5}}, "x");
    const auto y = b.relu(b.conv(x, weights(b, {20, 12, 1, 1}, 0.1, "w1")));
    auto s = b.relu(b.conv(b.global_average_pool(y), weights(b, {8, 20, 1, 1}, 0.2, "fc1")));
    s = b.sigmoid(b.conv(s, weights(b, {20, 8, 1, 1}, 0.3, "fc2"), weights(b, {20}, 0.4, "fc2b")));
    const auto scaled = scale_first ? b.mul(s, y) : b.mul(y, s);
    b.add_output(b.conv(scaled, weights(b, {12, 20, 1, 1}, 0.5, "project")));
    const auto g = std::move(b).build();
    const auto blocked = ipu::passes::nchwc_layout(g, 8);
    CHECK_NOTHROW(ipu::validate(blocked));
    CHECK(count(blocked, "NchwcConv") == 4);
    CHECK(count(blocked, "NchwcScale") == 1);
    CHECK(count(blocked, "Mul") == 0);
    CHECK(count(blocked, "ToNchwc") == 1);    // x
    CHECK(count(blocked, "FromNchwc") == 2);  // the factors, for Sigmoid, and the output
    const auto scale = std::ranges::find_if(blocked.ops(), [](const auto& op) { return op.type == "NchwcScale"; });
    REQUIRE(scale != blocked.ops().end());
    CHECK(blocked.tensor(scale->inputs[0]).info.shape == ipu::shape{2, 24, 5, 5});
    CHECK(blocked.tensor(scale->inputs[1]).info.shape == ipu::shape{2, 20, 1, 1});
    for (const std::size_t threads : {1u, 2u}) {
      CAPTURE(threads);
      CHECK(relative_difference(run(blocked, threads), run(g, threads)) < 1e-5);
    }
  }
}

TEST_CASE("NchwcBatchNormalization and NchwcScale give BatchNormalization's and Mul's values to the bit, F32 and F16") {
  for (const auto type : {data_type::F32, data_type::F16}) {
    CAPTURE(type);
    ipu::builder b("channelwise", 17);
    const auto x = b.add_input_tensor({type, {2, 5, 4, 3}}, "x");
    const auto s = b.add_input_tensor({type, {2, 5, 1, 1}}, "s");
    const auto s1 = b.add_input_tensor({type, {1, 5, 1, 1}}, "s1");
    const ipu::op_options ipu_op{1, 1, {}, "ipu"};
    const auto p = batch_norm_parameters(b, 5, 0.7);
    const ipu::attribute eps{"epsilon", 0.01f};
    const auto xb = b.op("ToNchwc", {x}, {}, ipu_op)[0];
    const auto from = [&](tensor_id t) { return b.op("FromNchwc", {t}, {{"channels", std::int64_t{5}}}, ipu_op)[0]; };
    b.add_output(b.op("BatchNormalization", {x, p[0], p[1], p[2], p[3]}, {eps})[0]);
    b.add_output(from(b.op("NchwcBatchNormalization", {xb, p[0], p[1], p[2], p[3]}, {eps}, ipu_op)[0]));
    b.add_output(b.mul(s, x));
    b.add_output(from(b.op("NchwcScale", {xb, s}, {}, ipu_op)[0]));
    b.add_output(b.mul(x, s1));
    b.add_output(from(b.op("NchwcScale", {xb, s1}, {}, ipu_op)[0]));
    const auto g = std::move(b).build();
    std::vector<ipu::host_tensor> in;
    for (std::size_t i = 0; i < 3; ++i) {
      ipu::host_tensor t(g.tensor(g.inputs()[i]).info);
      const auto v = wave(static_cast<std::size_t>(t.info().shape.num_elements()), 0.4 * static_cast<double>(i + 1), 3.0);
      for (std::size_t k = 0; k < v.size(); ++k) {
        if (type == data_type::F32) t.as<float>()[k] = v[k];
        else t.as<ipu::half>()[k] = ipu::half(v[k]);
      }
      in.push_back(std::move(t));
    }
    check_pairs_bitwise_equal(g, in, 6);
  }
}

TEST_CASE("the blocked channel ops refuse factors that do not fit X and attributes they do not have") {
  ipu::builder b("bad channel ops", 17);
  const auto x = b.add_input_tensor({data_type::F32, {2, 5, 4, 4}}, "x");
  const ipu::op_options ipu_op{1, 1, {}, "ipu"};
  const auto xb = b.op("ToNchwc", {x}, {}, ipu_op)[0];
  const auto s = b.add_input_tensor({data_type::F32, {2, 5, 2, 1}}, "s");
  CHECK_THROWS_WITH_AS((void)b.op("NchwcScale", {xb, s}, {}, ipu_op), doctest::Contains("is not one factor per image"),
                       ipu::error);
  const auto s9 = b.add_input_tensor({data_type::F32, {1, 9, 1, 1}}, "s9");
  CHECK_THROWS_WITH_AS((void)b.op("NchwcScale", {xb, s9}, {}, ipu_op), doctest::Contains("is not one factor per image"),
                       ipu::error);
  const auto p9 = batch_norm_parameters(b, 9, 0.1);
  CHECK_THROWS_WITH_AS((void)b.op("NchwcBatchNormalization", {xb, p9[0], p9[1], p9[2], p9[3]}, {}, ipu_op),
                       doctest::Contains("does not hold the 9 channels"), ipu::error);
  const auto p5 = batch_norm_parameters(b, 5, 0.2);
  CHECK_THROWS_WITH_AS(
      (void)b.op("NchwcBatchNormalization", {xb, p5[0], p5[1], p9[2], p5[3]}, {}, ipu_op),
      doctest::Contains("input_mean"), ipu::error);
  // Inference only: a momentum would say the op trains.
  CHECK_THROWS_WITH_AS(
      (void)b.op("NchwcBatchNormalization", {xb, p5[0], p5[1], p5[2], p5[3]}, {{"momentum", 0.9f}}, ipu_op),
      doctest::Contains("attribute 'momentum' is not one of NchwcBatchNormalization's"), ipu::error);
}

TEST_CASE("what stays NCHW: a lone convolution, F64, groups that split blocks, 3-D data") {
  {  // a convolution with no convolution next to it
    ipu::builder b("lone", 17);
    const auto x = b.add_input_tensor({data_type::F32, {1, 8, 5, 5}}, "x");
    b.add_output(b.relu(b.conv(x, weights(b, {8, 8, 3, 3}, 0.1, "w"), ipu::no_tensor, {{}, {1, 1, 1, 1}})));
    const auto g = std::move(b).build();
    CHECK(ipu::passes::nchwc_layout(g, 8) == g);
  }
  {  // F64 chains
    ipu::builder b("f64", 17);
    const auto x = b.add_input_tensor({data_type::F64, {1, 4, 5, 5}}, "x");
    const auto w = b.add_constant(ipu::make_constant<double>({4, 4, 1, 1}, std::vector<double>(16, 0.25)), "w");
    b.add_output(b.conv(b.conv(x, w), w));
    const auto g = std::move(b).build();
    CHECK(ipu::passes::nchwc_layout(g, 8) == g);
  }
  {  // two groups of 6 channels: a group would start inside a block
    ipu::builder b("groups", 17);
    const auto x = b.add_input_tensor({data_type::F32, {1, 12, 5, 5}}, "x");
    const auto y = b.conv(x, weights(b, {12, 6, 1, 1}, 0.1, "w1"), ipu::no_tensor, {{}, {}, {}, 2});
    b.add_output(b.conv(y, weights(b, {12, 12, 1, 1}, 0.2, "w2")));
    const auto g = std::move(b).build();
    CHECK(ipu::passes::nchwc_layout(g, 8) == g);  // the grouped one cannot, so the other has no neighbour
  }
  {  // 3-D convolutions
    ipu::builder b("3d", 17);
    const auto x = b.add_input_tensor({data_type::F32, {1, 4, 3, 3, 3}}, "x");
    const auto w = weights(b, {4, 4, 1, 1, 1}, 0.1, "w");
    b.add_output(b.conv(b.conv(x, w), w));
    const auto g = std::move(b).build();
    CHECK(ipu::passes::nchwc_layout(g, 8) == g);
  }
}

TEST_CASE("blocks of 16: convolutions, pools and channel ops compute what blocks of 8 and the plain ops do") {
  // x [2, 20, 7, 7] -> Conv 3x3 (20 -> 24, pads 1) -> MaxPool 3x3 (pads 1) -> BatchNormalization ->
  // NchwcScale -> depthwise Conv -> AveragePool 2x2, by hand in blocks of 8 and of 16 (20 and 24
  // channels: the last block of 16 has 12 and 8 unused channels), against the plain ops.
  ipu::builder b("block16", 17);
  const auto x = b.add_input_tensor({data_type::F32, {2, 20, 7, 7}}, "x");
  const auto s = b.add_input_tensor({data_type::F32, {2, 24, 1, 1}}, "s");
  const auto w = weights(b, {24, 20, 3, 3}, 0.1, "w"), bias = weights(b, {24}, 0.2, "bias");
  const auto wd = weights(b, {24, 1, 3, 3}, 0.3, "wd");
  const auto p = batch_norm_parameters(b, 24, 0.4);
  const ipu::attribute pads{"pads", std::vector<std::int64_t>{1, 1, 1, 1}};
  const ipu::attribute kernel3{"kernel_shape", std::vector<std::int64_t>{3, 3}};
  const ipu::attribute kernel2{"kernel_shape", std::vector<std::int64_t>{2, 2}};
  const ipu::attribute strides2{"strides", std::vector<std::int64_t>{2, 2}};
  {
    auto y = b.op("Conv", {x, w, bias}, {pads})[0];
    y = b.op("MaxPool", {y}, {kernel3, pads})[0];
    y = b.batch_normalization(y, p[0], p[1], p[2], p[3]);
    y = b.mul(y, s);
    y = b.op("Conv", {y, wd}, {pads, {"group", std::int64_t{24}}})[0];
    b.add_output(b.op("AveragePool", {y}, {kernel2, strides2})[0]);
  }
  for (const std::int64_t block : {8, 16}) {
    const ipu::op_options ipu_op{1, 1, {}, "ipu"};
    const ipu::attribute blk{"block", block};
    const ipu::attribute channels{"channels", std::int64_t{24}};
    auto y = b.op("ToNchwc", {x}, {blk}, ipu_op)[0];
    CHECK(b.info(y).shape == ipu::shape{2, block == 8 ? 24 : 32, 7, 7});
    y = b.op("NchwcConv", {y, w, bias}, {pads, blk}, ipu_op)[0];
    y = b.op("NchwcMaxPool", {y}, {kernel3, pads, blk, channels}, ipu_op)[0];
    y = b.op("NchwcBatchNormalization", {y, p[0], p[1], p[2], p[3]}, {blk}, ipu_op)[0];
    y = b.op("NchwcScale", {y, s}, {blk}, ipu_op)[0];
    y = b.op("NchwcConv", {y, wd}, {pads, {"group", std::int64_t{24}}, blk}, ipu_op)[0];
    y = b.op("NchwcAveragePool", {y}, {kernel2, strides2, blk, channels}, ipu_op)[0];
    b.add_output(b.op("FromNchwc", {y}, {blk, channels}, ipu_op)[0]);
  }
  const auto g = std::move(b).build();
  for (const std::size_t threads : {1u, 2u}) {
    CAPTURE(threads);
    const auto out = run(g, threads);
    REQUIRE(out.size() == 3);
    CHECK(relative_difference({out[1]}, {out[0]}) < 1e-5);
    CHECK(relative_difference({out[2]}, {out[0]}) < 1e-5);
  }
}

TEST_CASE("NchwcConv leaves the unused channels of its last block zero, whatever its activation makes of zero") {
  // ToNchwc -> NchwcConv(Sigmoid) with 5 output channels, its blocked output read as it is:
  // Sigmoid(0) is 0.5, and the kernel must leave 0 in channels 5..7.
  ipu::builder b("padding", 17);
  const auto x = b.add_input_tensor({data_type::F32, {2, 3, 4, 4}}, "x");
  const ipu::op_options ipu_op{1, 1, {}, "ipu"};
  const auto xb = b.op("ToNchwc", {x}, {{"block", std::int64_t{8}}}, ipu_op)[0];
  CHECK(b.info(xb).shape == ipu::shape{2, 8, 4, 4});
  const auto y = b.op("NchwcConv", {xb, weights(b, {5, 3, 3, 3}, 0.2, "w"), weights(b, {5}, 0.3, "bias")},
                      {{"block", std::int64_t{8}},
                       {"pads", std::vector<std::int64_t>{1, 1, 1, 1}},
                       {"activation", std::string("Sigmoid")}},
                      ipu_op)[0];
  CHECK(b.info(y).shape == ipu::shape{2, 8, 4, 4});
  b.add_output(y);
  b.add_output(b.op("FromNchwc", {y}, {{"block", std::int64_t{8}}, {"channels", std::int64_t{5}}}, ipu_op)[0]);
  const auto g = std::move(b).build();
  for (const std::size_t threads : {1u, 2u}) {
    const auto out = run(g, threads);
    const auto blocked = out[0].as<float>(), plain = out[1].as<float>();
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t p = 0; p < 16; ++p)
        for (std::int64_t c = 0; c < 8; ++c) {
          const float v = blocked[static_cast<std::size_t>((n * 16 + p) * 8 + c)];
          if (c >= 5) {
            CHECK(v == 0.0f);
          } else {  // FromNchwc reads the same value back at (n, c, p)
            CHECK(v == plain[static_cast<std::size_t>((n * 5 + c) * 16 + p)]);
            CHECK(v > 0.0f);
          }
        }
  }
}

TEST_CASE("the blocked ops refuse a block they do not have, channel counts that do not fit, and other types") {
  ipu::builder b("bad", 17);
  const auto x = b.add_input_tensor({data_type::F32, {1, 3, 4, 4}}, "x");
  const auto x64 = b.add_input_tensor({data_type::F64, {1, 3, 4, 4}}, "x64");
  const ipu::op_options ipu_op{1, 1, {}, "ipu"};
  CHECK_THROWS_WITH_AS((void)b.op("ToNchwc", {x}, {{"block", std::int64_t{4}}}, ipu_op),
                       doctest::Contains("block 4 is not 8 or 16"), ipu::error);
  CHECK_THROWS_WITH_AS((void)b.op("ToNchwc", {x64}, {}, ipu_op), doctest::Contains("blocked layouts hold F32 or F16"),
                       ipu::error);
  const auto xb = b.op("ToNchwc", {x}, {}, ipu_op)[0];
  CHECK_THROWS_WITH_AS((void)b.op("FromNchwc", {xb}, {{"channels", std::int64_t{9}}}, ipu_op),
                       doctest::Contains("channels 9 do not fill X"), ipu::error);
  // A channel count that would overflow when rounded up to a block is refused, not wrapped.
  CHECK_THROWS_WITH_AS(
      (void)b.op("FromNchwc", {xb}, {{"channels", std::numeric_limits<std::int64_t>::max()}}, ipu_op),
      doctest::Contains("do not fill X"), ipu::error);
  // W reads 4 input channels, one block; blocked X holds two blocks. (The shapes cannot tell 3
  // channels in a block of 8 from 4: the unused ones are zero.)
  const auto x12 = b.add_input_tensor({data_type::F32, {1, 12, 4, 4}}, "x12");
  const auto x12b = b.op("ToNchwc", {x12}, {}, ipu_op)[0];
  const auto w4 = weights(b, {2, 4, 1, 1}, 0.1, "w4");
  CHECK_THROWS_WITH_AS((void)b.op("NchwcConv", {x12b, w4}, {}, ipu_op), doctest::Contains("does not hold the 4 channels"),
                       ipu::error);
  // X in NCHW: a stem's 3 channels, fewer than a block, are read as they are; 12 are not.
  const auto w3 = weights(b, {2, 3, 1, 1}, 0.1, "w3");
  CHECK(b.info(b.op("NchwcConv", {x, w3}, {}, ipu_op)[0]).shape == ipu::shape{1, 8, 4, 4});
  const auto w12 = weights(b, {2, 12, 1, 1}, 0.1, "w12");
  CHECK_THROWS_WITH_AS((void)b.op("NchwcConv", {x12, w12}, {}, ipu_op),
                       doctest::Contains("does not hold the 12 channels"), ipu::error);
  // Z must have the blocked output's shape.
  CHECK_THROWS_WITH_AS((void)b.op("NchwcConv", {xb, w3, ipu::no_tensor, x}, {}, ipu_op),
                       doctest::Contains("is not of the blocked output's shape"), ipu::error);
  CHECK_THROWS_WITH_AS((void)b.op("NchwcConv", {xb, w3}, {{"activation", std::string("Swish")}}, ipu_op),
                       doctest::Contains("activation 'Swish' is not one FusedConv applies"), ipu::error);
}

}  // namespace test_nchwc_layout
