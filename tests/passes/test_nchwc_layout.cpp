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

}  // namespace

TEST_CASE("an inverted residual block runs blocked: one ToNchwc for x, FromNchwc where NCHW is read, same results") {
  for (const bool side_reader : {false, true}) {
    CAPTURE(side_reader);
    const auto g = inverted_residual(side_reader);
    const auto fused = ipu::passes::fuse_conv_activation(g);
    REQUIRE(count(fused, "FusedConv") == 3);  // the projection's Add is its Z
    const auto blocked = ipu::passes::nchwc_layout(fused);
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
      CHECK(blocked.tensor(neg->inputs[0]).info.shape == ipu::shape{2, 24, 9, 9});
    }
    for (const auto& op : blocked.ops()) {
      if (op.type != "NchwcConv" && op.type != "ToNchwc" && op.type != "FromNchwc") continue;
      CHECK(op.domain == "ipu");
      const auto* block = op.find_attribute("block");
      REQUIRE(block != nullptr);
      CHECK(std::get<std::int64_t>(block->value) == ipu::passes::nchwc_block);
      for (const auto t : op.outputs) {
        const auto& s = blocked.tensor(t).info.shape;
        if (op.type != "FromNchwc") CHECK(s[1] % ipu::passes::nchwc_block == 0);
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

TEST_CASE("elementwise ops between convolutions join their group; a group with one convolution stays NCHW") {
  // Unfused: Conv -> Relu -> depthwise Conv is a group of two convolutions, Relu on blocked data;
  // Clip (not zero-preserving for every bound) ends it; the projection and its Add are a group
  // of one convolution.
  const auto g = inverted_residual(false);
  const auto blocked = ipu::passes::nchwc_layout(g);
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
  const auto blocked = ipu::passes::nchwc_layout(g);
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
    const auto blocked = ipu::passes::nchwc_layout(g);
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

TEST_CASE("what stays NCHW: a lone convolution, F64, groups that split blocks, 3-D data") {
  {  // a convolution with no convolution next to it
    ipu::builder b("lone", 17);
    const auto x = b.add_input_tensor({data_type::F32, {1, 8, 5, 5}}, "x");
    b.add_output(b.relu(b.conv(x, weights(b, {8, 8, 3, 3}, 0.1, "w"), ipu::no_tensor, {{}, {1, 1, 1, 1}})));
    const auto g = std::move(b).build();
    CHECK(ipu::passes::nchwc_layout(g) == g);
  }
  {  // F64 chains
    ipu::builder b("f64", 17);
    const auto x = b.add_input_tensor({data_type::F64, {1, 4, 5, 5}}, "x");
    const auto w = b.add_constant(ipu::make_constant<double>({4, 4, 1, 1}, std::vector<double>(16, 0.25)), "w");
    b.add_output(b.conv(b.conv(x, w), w));
    const auto g = std::move(b).build();
    CHECK(ipu::passes::nchwc_layout(g) == g);
  }
  {  // two groups of 6 channels: a group would start inside a block
    ipu::builder b("groups", 17);
    const auto x = b.add_input_tensor({data_type::F32, {1, 12, 5, 5}}, "x");
    const auto y = b.conv(x, weights(b, {12, 6, 1, 1}, 0.1, "w1"), ipu::no_tensor, {{}, {}, {}, 2});
    b.add_output(b.conv(y, weights(b, {12, 12, 1, 1}, 0.2, "w2")));
    const auto g = std::move(b).build();
    CHECK(ipu::passes::nchwc_layout(g) == g);  // the grouped one cannot, so the other has no neighbour
  }
  {  // 3-D convolutions
    ipu::builder b("3d", 17);
    const auto x = b.add_input_tensor({data_type::F32, {1, 4, 3, 3, 3}}, "x");
    const auto w = weights(b, {4, 4, 1, 1, 1}, 0.1, "w");
    b.add_output(b.conv(b.conv(x, w), w));
    const auto g = std::move(b).build();
    CHECK(ipu::passes::nchwc_layout(g) == g);
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
