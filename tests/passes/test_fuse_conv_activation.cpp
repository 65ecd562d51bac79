// Conv followed by a residual Add and / or an activation fused into ai.graphcore FusedConv: what
// matches, what must not, and that FusedConv's kernel (each of its paths: the pointwise GEMM, the
// depthwise loop, oneDNN's post-ops, the reference conv for F16 and 3-D) computes what the
// unfused ops compute: the same bits for Relu / LeakyRelu / Clip / the residual alone, within 1e-5
// relative for Sigmoid and Swish (oneDNN's exp is not libm's).
#include "ipu/passes/fuse_conv_activation.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/passes/fuse_swish.hpp"

namespace test_fuse_conv_activation {

namespace {

using ipu::data_type;
using ipu::tensor_id;

enum class conv_kind { general, pointwise, depthwise, three_d };

struct spelling {
  data_type type = data_type::F32;
  conv_kind kind = conv_kind::general;
  bool residual = false;
  bool residual_first = false;   // Add(z, y) rather than Add(y, z)
  std::string act;               // "", Relu, LeakyRelu, Clip, Sigmoid, Swish (Sigmoid * x, fused first)
  bool conv_output_read = false; // the Conv's output also feeds a second op
  bool clip_bounds_inputs = false;
  bool residual_broadcasts = false;  // z is [1, C, 1, 1]: a broadcasting Add
};

constexpr std::int64_t batch = 2, channels = 4, side = 5;

ipu::shape input_shape(const spelling& s) {
  return s.kind == conv_kind::three_d ? ipu::shape{batch, channels, 3, side, side} : ipu::shape{batch, channels, side, side};
}
ipu::shape weight_shape(const spelling& s) {
  switch (s.kind) {
    case conv_kind::pointwise: return {channels, channels, 1, 1};
    case conv_kind::depthwise: return {channels, 1, 3, 3};
    case conv_kind::three_d: return {channels, channels, 1, 3, 3};
    case conv_kind::general: break;
  }
  return {channels, channels, 3, 3};
}

/// Inputs x, w, b, z (and lo, hi for Clip with input bounds); Conv (same padding) -> [Add] -> [activation].
ipu::graph written_out(const spelling& s) {
  ipu::builder b("conv_act", 13);
  const auto x = b.add_input_tensor({s.type, input_shape(s)}, "x");
  const auto w = b.add_input_tensor({s.type, weight_shape(s)}, "w");
  const auto bias = b.add_input_tensor({s.type, {channels}}, "b");
  const auto z_shape = s.residual_broadcasts ? ipu::shape{1, channels, 1, 1} : input_shape(s);
  const auto z = b.add_input_tensor({s.type, z_shape}, "z");
  ipu::conv_options o;
  if (s.kind == conv_kind::general || s.kind == conv_kind::depthwise) o.pads = {1, 1, 1, 1};
  if (s.kind == conv_kind::three_d) o.pads = {0, 1, 1, 0, 1, 1};
  if (s.kind == conv_kind::depthwise) o.group = channels;
  auto y = b.conv(x, w, bias, o, "block/Conv");
  if (s.conv_output_read) b.add_output(b.neg(y));
  if (s.residual) y = s.residual_first ? b.add(z, y, "block/Add") : b.add(y, z, "block/Add");
  if (s.act == "Relu") y = b.relu(y, "block/Relu");
  else if (s.act == "LeakyRelu") y = b.leaky_relu(y, 0.1f, "block/LeakyRelu");
  else if (s.act == "Sigmoid") y = b.sigmoid(y, "block/Sigmoid");
  else if (s.act == "Swish") y = b.mul(y, b.sigmoid(y), "block/Mul");
  else if (s.act == "Clip" && !s.clip_bounds_inputs) y = b.clip(y, 0.0, 0.5, "block/Clip");
  else if (s.act == "Clip") {
    const auto lo = b.add_input_tensor({s.type, {}}, "lo"), hi = b.add_input_tensor({s.type, {}}, "hi");
    y = b.op("Clip", {y, lo, hi}).front();
  }
  b.add_output(y);
  if (!s.residual) b.add_output(b.neg(z));  // z stays an input that something reads
  return std::move(b).build();
}

std::size_t count(const ipu::graph& g, std::string_view type) {
  std::size_t n = 0;
  for (const auto& op : g.ops()) n += op.type == type ? 1 : 0;
  return n;
}

ipu::host_tensor filled(const ipu::tensor_info& info, int seed, double scale) {
  ipu::host_tensor t(info);
  const auto n = static_cast<std::size_t>(info.shape.num_elements());
  for (std::size_t i = 0; i < n; ++i) {
    const double v = std::sin(0.7 * static_cast<double>(i) + seed) * scale;
    if (info.type == data_type::F32) t.as<float>()[i] = static_cast<float>(v);
    else t.as<ipu::half>()[i] = ipu::half(static_cast<float>(v));
  }
  return t;
}

std::vector<ipu::host_tensor> run(const ipu::graph& g) {
  std::vector<ipu::host_tensor> in;
  int seed = 0;
  for (auto t : g.inputs()) {
    const auto& info = g.tensor(t).info;
    const auto& name = g.tensor(t).name;
    if (name == "lo" || name == "hi") {
      ipu::host_tensor v(info);
      const float bound = name == "lo" ? 0.0f : 0.5f;
      if (info.type == data_type::F32) v.as<float>()[0] = bound;
      else v.as<ipu::half>()[0] = ipu::half(bound);
      in.push_back(v);
    } else {
      in.push_back(filled(info, ++seed, name == "w" ? 0.4 : 1.0));
    }
  }
  ipu::cpu::device dev(g);
  return dev.run(in);
}

/// Same bits, or (`exact` false) within 1e-5 relative.
void check_close(const ipu::host_tensor& want, const ipu::host_tensor& got, bool exact) {
  REQUIRE(want.info() == got.info());
  if (exact) {
    CHECK(std::memcmp(want.data(), got.data(), want.info().num_bytes()) == 0);
    return;
  }
  const auto n = static_cast<std::size_t>(want.info().shape.num_elements());
  for (std::size_t i = 0; i < n; ++i) {
    const double a = want.info().type == data_type::F32 ? want.as<float>()[i] : static_cast<float>(want.as<ipu::half>()[i]);
    const double b = got.info().type == data_type::F32 ? got.as<float>()[i] : static_cast<float>(got.as<ipu::half>()[i]);
    CHECK(std::abs(a - b) <= 1e-5 * std::max(1.0, std::abs(a)));
  }
}

ipu::graph fused(const ipu::graph& g) { return ipu::passes::fuse_conv_activation(ipu::passes::fuse_swish(g)); }

}  // namespace

TEST_CASE("Conv + residual Add + activation becomes FusedConv that computes what the ops did, on every kernel path") {
  for (const auto type : {data_type::F32, data_type::F16})
    for (const auto kind : {conv_kind::general, conv_kind::pointwise, conv_kind::depthwise, conv_kind::three_d})
      for (const std::string act : {"", "Relu", "LeakyRelu", "Clip", "Sigmoid", "Swish"})
        for (const bool residual : {false, true}) {
          if (act.empty() && !residual) continue;
          const spelling s{.type = type, .kind = kind, .residual = residual, .residual_first = kind == conv_kind::pointwise, .act = act};
          CAPTURE(type);
          CAPTURE(static_cast<int>(kind));
          CAPTURE(act);
          CAPTURE(residual);
          const auto before = written_out(s);
          const auto after = fused(before);
          CHECK_NOTHROW(ipu::validate(after));
          REQUIRE(count(after, "FusedConv") == 1);
          CHECK(count(after, "Conv") == 0);
          CHECK(count(after, "Add") == 0);
          CHECK(count(after, act.empty() ? "Add" : act) == 0);
          for (const auto& op : after.ops())
            if (op.type == "FusedConv") {
              CHECK(op.domain == "ai.graphcore");
              CHECK(op.name == "block/FusedConv");
              CHECK(op.inputs.size() == (residual ? 4u : 3u));
            }
          const auto want = run(before), got = run(after);
          REQUIRE(want.size() == got.size());
          const bool exact = act != "Sigmoid" && act != "Swish";
          for (std::size_t k = 0; k < want.size(); ++k) check_close(want[k], got[k], exact);
        }
}

TEST_CASE("what must not fuse is left as it is") {
  // The Conv's output read twice: neither the Add nor the Relu may take it.
  for (const auto& s : {spelling{.residual = true, .act = "Relu", .conv_output_read = true},
                        spelling{.act = "Clip", .clip_bounds_inputs = true},
                        spelling{.residual = true, .act = "", .residual_broadcasts = true}}) {
    const auto before = written_out(s);
    CHECK(ipu::passes::fuse_conv_activation(before) == before);
  }
  // A broadcasting residual is left, but the activation after it does not follow the Conv either.
  const auto g = written_out({.residual = true, .act = "Relu", .residual_broadcasts = true});
  CHECK(ipu::passes::fuse_conv_activation(g) == g);
  auto recomputed = written_out({.act = "Relu"});
  for (ipu::op_id id = 0; id < recomputed.num_ops(); ++id)
    if (recomputed.op(id).type == "Relu") recomputed.op(id).where.recompute = true;
  CHECK(ipu::passes::fuse_conv_activation(recomputed) == recomputed);
}

TEST_CASE("FusedConv refuses activations and parameters it does not apply") {
  ipu::builder b("bad", 13);
  const auto x = b.add_input_tensor({data_type::F32, {1, 2, 3, 3}}, "x");
  const auto w = b.add_input_tensor({data_type::F32, {2, 2, 1, 1}}, "w");
  const ipu::op_options gc{.opset = 1, .domain = "ai.graphcore"};
  CHECK_THROWS_AS(b.op("FusedConv", {x, w}, {{"activation", std::string("Gelu")}}, gc), ipu::error);
  CHECK_THROWS_AS(b.op("FusedConv", {x, w}, {{"activation", std::string("Clip")}}, gc), ipu::error);
  const auto z = b.add_input_tensor({data_type::F32, {1, 2, 3, 4}}, "z");
  CHECK_THROWS_AS(b.op("FusedConv", {x, w, ipu::no_tensor, z}, {{"activation", std::string("Relu")}}, gc),
                  ipu::error);
  CHECK_NOTHROW(b.op("FusedConv", {x, w}, {{"activation", std::string("Clip")}, {"activation_params", std::vector<float>{0, 6}}},
                     gc));
}

}  // namespace test_fuse_conv_activation
