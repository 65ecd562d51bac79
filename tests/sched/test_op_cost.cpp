// The per-op cost hook: each estimate is the device model's figure for the op's shape, so these tests
// compare against the device model's own functions (plan_matmul, plan_conv, elementwise_cost,
// sync_cycles) called with hand-derived shapes, and against hand-computed arithmetic.
#include <doctest/doctest.h>

#include <optional>
#include <vector>

#include "ipu/device/cost.hpp"
#include "ipu/builder/builder.hpp"
#include "ipu/sched/op_cost.hpp"

namespace {

using ipu::data_type;

const auto mk2 = ipu::ipu_model<ipu::mk2, 1>::description();

ipu::op_cost amp_cost(const ipu::amp_plan& p) {
  ipu::op_cost c;
  c.compute_cycles = p.parts.serial_passes * (p.compute.compute_cycles + p.reduction.compute_cycles);
  c.exchange_cycles = p.parts.serial_passes * (p.compute.exchange_cycles + p.reduction.exchange_cycles);
  c.sync_cycles = p.parts.serial_passes * (p.compute.sync_cycles + p.reduction.sync_cycles);
  return c;
}

constexpr ipu::graph matmul_graph(std::int64_t m, std::int64_t k, std::int64_t n, data_type t) {
  ipu::builder b("mm");
  auto x = b.add_input_tensor({t, {m, k}}, "x");
  auto y = b.add_input_tensor({t, {k, n}}, "y");
  b.add_output(b.matmul(x, y, "mm"));
  return std::move(b).build();
}

}  // namespace

TEST_CASE("MatMul costs what the device model's matmul planner says for its shape") {
  const auto g = matmul_graph(512, 256, 128, data_type::F32);
  const auto c = ipu::estimate_op_cost(g, 0, mk2);
  const auto p = ipu::plan_matmul(mk2, {1, 512, 256, 128}, ipu::precision::fp32);
  const auto want = amp_cost(p);
  CHECK(c.compute_cycles == want.compute_cycles);
  CHECK(c.exchange_cycles == want.exchange_cycles);
  CHECK(c.sync_cycles == want.sync_cycles);
  CHECK(c.macs == 512u * 256u * 128u);
  CHECK(c.tiles == p.tiles_used);
  CHECK(c.temporary_bytes_per_tile == p.temporary_bytes_per_tile);
  // Never faster than the AMP at peak on every tile: MACs / (16 x 1472).
  CHECK(c.cycles() >= 512u * 256u * 128u / (16u * 1472u));
}

TEST_CASE("a rank-2 weight folds the leading dimensions of the left operand into rows") {
  ipu::builder b("bmm");
  auto x = b.add_input_tensor({data_type::F32, {4, 16, 64}}, "x");
  auto w = b.add_input_tensor({data_type::F32, {64, 32}}, "w");
  auto y = b.add_input_tensor({data_type::F32, {4, 64, 32}}, "y");
  b.add_output(b.matmul(x, w, "folded"));
  b.add_output(b.matmul(x, y, "batched"));
  const auto g = std::move(b).build();
  CHECK(ipu::estimate_op_cost(g, 0, mk2).cycles() == amp_cost(ipu::plan_matmul(mk2, {1, 64, 64, 32}, ipu::precision::fp32)).cycles());
  CHECK(ipu::estimate_op_cost(g, 1, mk2).cycles() == amp_cost(ipu::plan_matmul(mk2, {4, 16, 64, 32}, ipu::precision::fp32)).cycles());
}

TEST_CASE("precision: F16 tensors use the FP16 AMP modes, and the override converts F32 ones") {
  const auto f32 = matmul_graph(1024, 1024, 1024, data_type::F32);
  const auto f16 = matmul_graph(1024, 1024, 1024, data_type::F16);
  const auto c16 = ipu::estimate_op_cost(f16, 0, mk2);  // partials F32 by default: FP16.32
  CHECK(c16.cycles() == amp_cost(ipu::plan_matmul(mk2, {1, 1024, 1024, 1024}, ipu::precision::fp16_32)).cycles());
  ipu::op_cost_options half;
  half.float_type = data_type::F16;
  CHECK(ipu::estimate_op_cost(f32, 0, mk2, half).cycles() == c16.cycles());
  half.partials_type = data_type::F16;
  CHECK(ipu::estimate_op_cost(f32, 0, mk2, half).cycles() ==
        amp_cost(ipu::plan_matmul(mk2, {1, 1024, 1024, 1024}, ipu::precision::fp16_16)).cycles());
  // FP16.16 runs 4x the FP32 MAC rate on Mk2: the big matmul must get much faster.
  CHECK(ipu::estimate_op_cost(f32, 0, mk2, half).cycles() * 2 < ipu::estimate_op_cost(f32, 0, mk2).cycles());
  CHECK(ipu::costed_bytes({data_type::F32, {10, 10}}, half) == 200);
  CHECK(ipu::costed_bytes({data_type::S32, {10, 10}}, half) == 400);  // only floats convert
}

TEST_CASE("Conv: the shape comes from the attributes (strides, pads, groups), bias is an element-wise add") {
  ipu::builder b("conv");
  auto x = b.add_input_tensor({data_type::F32, {2, 3, 224, 224}}, "x");
  auto w = b.add_input_tensor({data_type::F32, {64, 3, 11, 11}}, "w");
  auto bias = b.add_input_tensor({data_type::F32, {64}}, "bias");
  ipu::conv_options o;
  o.strides = {4, 4};
  o.pads = {2, 2, 2, 2};
  auto y = b.conv(x, w, bias, o, "conv1");
  b.add_output(y);
  const auto g = std::move(b).build();
  // AlexNet's first layer: (224 + 4 - 11) / 4 + 1 = 55.
  CHECK(g.tensor(y).info.shape == ipu::shape{2, 64, 55, 55});
  ipu::conv_shape s;
  s.batch = 2;
  s.in_channels = 3;
  s.out_channels = 64;
  s.input = {224, 224};
  s.kernel = {11, 11};
  s.strides = {4, 4};
  s.pads_begin = {2, 2};
  s.pads_end = {2, 2};
  const auto conv = amp_cost(ipu::plan_conv(mk2, s, ipu::precision::fp32));
  const auto c = ipu::estimate_op_cost(g, 0, mk2);
  const std::uint64_t out = 2 * 64 * 55 * 55;
  const auto add = ipu::elementwise_cost(mk2.arch, data_type::F32, out, 2).cycles;
  const auto share = (out + 1471) / 1472;
  // Bias: each tile fetches the part of the 64 channels its output share needs (all of them here).
  const auto bias_exchange = ipu::exchange_cycles(mk2.arch, std::min<std::uint64_t>(64, share) * 4);
  CHECK(c.cycles() == conv.cycles() + add + ipu::sync_cycles(mk2) + bias_exchange);
  CHECK(c.macs == s.macs());
}

TEST_CASE("element-wise ops, views and transcendentals") {
  ipu::builder b("ew");
  auto x = b.add_input_tensor({data_type::F32, {64, 1000}}, "x");
  auto y = b.add_input_tensor({data_type::F32, {64, 1000}}, "y");
  auto sum = b.add(x, y, "add");
  auto r = b.reshape(sum, {64000}, "view");
  auto e = b.exp(r, "exp");
  b.add_output(e);
  const auto g = std::move(b).build();
  const auto sync = ipu::sync_cycles(mk2);
  CHECK(ipu::estimate_op_cost(g, 0, mk2).cycles() == ipu::elementwise_cost(mk2.arch, data_type::F32, 64000, 2).cycles + sync);
  CHECK(ipu::estimate_op_cost(g, 1, mk2).cycles() == 0);  // Reshape: a view
  // Exp at the scalar rate: one instruction per F32 element, 2 per 64-bit result vector.
  CHECK(ipu::estimate_op_cost(g, 2, mk2).cycles() == ipu::elementwise_cost(mk2.arch, data_type::F32, 64000, 1, 2).cycles + sync);
}

TEST_CASE("data movement costs the exchange of the output, spread over the tiles") {
  ipu::builder b("t");
  auto x = b.add_input_tensor({data_type::F32, {512, 256}}, "x");
  b.add_output(b.transpose(x, {}, "t"));
  const auto g = std::move(b).build();
  const std::uint64_t bytes = 512 * 256 * 4;
  CHECK(ipu::estimate_op_cost(g, 0, mk2).cycles() ==
        ipu::exchange_cycles(mk2.arch, (bytes + 1471) / 1472) + ipu::sync_cycles(mk2));
}

namespace {
std::optional<ipu::op_cost> fixed_relu(const ipu::op_cost_context& c) {
  if (c.op->type != "Relu") return std::nullopt;
  ipu::op_cost r;
  r.compute_cycles = 1234;
  return r;
}
}  // namespace

TEST_CASE("a cost hook overrides the table and falls back to it") {
  ipu::builder b("h");
  auto x = b.add_input_tensor({data_type::F32, {8, 8}}, "x");
  b.add_output(b.relu(b.neg(x, "neg"), "relu"));
  const auto g = std::move(b).build();
  CHECK(ipu::estimate_op_cost(g, 1, mk2, {}, fixed_relu).cycles() == 1234);
  CHECK(ipu::estimate_op_cost(g, 0, mk2, {}, fixed_relu) == ipu::estimate_op_cost(g, 0, mk2));
}

TEST_CASE("ops of unknown type cost one element-wise pass - the host device has no cost figures") {
  ipu::builder b("u");
  auto x = b.add_input_tensor({data_type::F32, {100}}, "x");
  b.add_output(b.custom_op("com.example", "Mystery", 1, {x}, {{data_type::F32, {100}}}, {}, "m").front());
  const auto g = std::move(b).build();
  CHECK((ipu::find_op_cost("com.example", "Mystery") == nullptr));
  CHECK(ipu::estimate_op_cost(g, 0, mk2).cycles() == ipu::elementwise_cost(mk2.arch, data_type::F32, 100, 1).cycles + ipu::sync_cycles(mk2));
  CHECK_THROWS_AS((void)ipu::estimate_op_cost(g, 0, ipu::cpu_device_description()), ipu::error);
  CHECK((ipu::find_op_cost("ai.onnx", "MatMul") == ipu::find_op_cost("", "MatMul")));
}

// The table is usable in constant expressions: a matmul's cost inside a static_assert.
static_assert([] {
  const auto g = matmul_graph(64, 64, 64, ipu::data_type::F32);
  const auto c = ipu::estimate_op_cost(g, 0, ipu::ipu_model<ipu::mk2, 1>::description());
  return c.macs == 64 * 64 * 64 && c.cycles() > 64u * 64u * 64u / (16u * 1472u);
}());
