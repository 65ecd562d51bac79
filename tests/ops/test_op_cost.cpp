// The per-op cost hook: each estimate is the device model's figure for the op's shape, so these tests
// compare against the device model's own functions (plan_matmul, plan_conv, elementwise_cost,
// sync_cycles) called with hand-derived shapes, and against hand-computed arithmetic.
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "ipu/device/cost.hpp"
#include "ipu/builder/builder.hpp"
#include "ipu/ops/op_cost.hpp"

namespace test_op_cost {

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

TEST_CASE("a grouped Conv of 4 channels a group costs plan_conv's plan, on the SLIC vertex") {
  ipu::builder b("grouped");
  auto x = b.add_input_tensor({data_type::F16, {1, 128, 56, 56}}, "x");
  auto w = b.add_input_tensor({data_type::F16, {128, 4, 3, 3}}, "w");
  auto y = b.op("Conv", {x, w}, {{"group", std::int64_t{32}}, {"pads", std::vector<std::int64_t>{1, 1, 1, 1}}}).front();
  b.add_output(y);
  const auto g = std::move(b).build();
  ipu::conv_shape s;
  s.batch = 1;
  s.in_channels = 128;
  s.out_channels = 128;
  s.groups = 32;
  s.input = {56, 56};
  s.kernel = {3, 3};
  s.pads_begin = {1, 1};
  s.pads_end = {1, 1};
  const auto plan = ipu::plan_conv(mk2, s, ipu::precision::fp16_32);  // F16 with F32 partials
  CHECK(plan.vertex.vertex == ipu::amp_vertex::slic);
  CHECK(ipu::estimate_op_cost(g, 0, mk2).cycles() == amp_cost(plan).cycles());
}

TEST_CASE("NchwcConv costs the convolution of its real channels, not its blocks' padding") {
  // 3 input channels blocked into 8, 5 output channels into 8: the arithmetic is the 3 -> 5 Conv's.
  ipu::builder b("blocked");
  const auto x = b.add_input_tensor({data_type::F32, {2, 3, 6, 6}}, "x");
  const auto w = b.add_input_tensor({data_type::F32, {5, 3, 3, 3}}, "w");
  const std::vector<ipu::attribute> pads{{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}};
  b.add_output(b.conv(x, w, ipu::no_tensor, {{}, {1, 1, 1, 1}}));
  const ipu::op_options ipu_op{1, 1, {}, "ipu"};
  const auto xb = b.op("ToNchwc", {x}, {}, ipu_op)[0];
  auto attrs = pads;
  attrs.push_back({"block", std::int64_t{8}});
  b.add_output(b.op("NchwcConv", {xb, w}, attrs, ipu_op)[0]);
  const auto g = std::move(b).build();
  const auto conv = ipu::estimate_op_cost(g, 0, mk2), blocked = ipu::estimate_op_cost(g, 2, mk2);
  CHECK(conv.macs == 2 * 5 * 3 * 9 * 36);
  CHECK(blocked.macs == conv.macs);
  // ToNchwc: one copy of its output's 2 x 8 x 36 elements, no arithmetic.
  const auto reorder = ipu::estimate_op_cost(g, 1, mk2);
  CHECK(reorder.macs == 0);
  CHECK(reorder.cycles() > 0);
}

TEST_CASE("NchwcMaxPool and NchwcAveragePool cost the pooling of their real channels, not the padding") {
  // 5 channels blocked into 8: the same windows over the 5 channels MaxPool and AveragePool pool.
  ipu::builder b("blocked pools");
  const auto x = b.add_input_tensor({data_type::F32, {2, 5, 9, 9}}, "x");
  const ipu::pool_options window{{3, 3}, {2, 2}, {1, 1, 1, 1}};
  b.add_output(b.max_pool(x, window));
  b.add_output(b.average_pool(x, window));
  const ipu::op_options ipu_op{1, 1, {}, "ipu"};
  const auto xb = b.op("ToNchwc", {x}, {}, ipu_op)[0];
  const std::vector<ipu::attribute> attrs{{"kernel_shape", std::vector<std::int64_t>{3, 3}},
                                          {"strides", std::vector<std::int64_t>{2, 2}},
                                          {"pads", std::vector<std::int64_t>{1, 1, 1, 1}},
                                          {"channels", std::int64_t{5}}};
  b.add_output(b.op("NchwcMaxPool", {xb}, attrs, ipu_op)[0]);
  b.add_output(b.op("NchwcAveragePool", {xb}, attrs, ipu_op)[0]);
  const auto g = std::move(b).build();
  const auto max = ipu::estimate_op_cost(g, 0, mk2), average = ipu::estimate_op_cost(g, 1, mk2);
  CHECK(ipu::estimate_op_cost(g, 3, mk2).cycles() == max.cycles());
  CHECK(ipu::estimate_op_cost(g, 4, mk2).cycles() == average.cycles());
  CHECK(max.cycles() > 0);
}

TEST_CASE("NchwcBatchNormalization costs the batch normalisation of its real channels") {
  ipu::builder b("blocked batch norm");
  const auto x = b.add_input_tensor({data_type::F32, {2, 5, 9, 9}}, "x");
  std::vector<ipu::tensor_id> p;
  for (int k = 0; k < 4; ++k) p.push_back(b.add_input_tensor({data_type::F32, {5}}, "p" + std::to_string(k)));
  b.add_output(b.batch_normalization(x, p[0], p[1], p[2], p[3]));
  const ipu::op_options ipu_op{1, 1, {}, "ipu"};
  const auto xb = b.op("ToNchwc", {x}, {}, ipu_op)[0];
  b.add_output(b.op("NchwcBatchNormalization", {xb, p[0], p[1], p[2], p[3]}, {}, ipu_op)[0]);
  const auto g = std::move(b).build();
  const auto plain = ipu::estimate_op_cost(g, 0, mk2);
  CHECK(plain.cycles() > 0);
  CHECK(ipu::estimate_op_cost(g, 2, mk2).cycles() == plain.cycles());
}

TEST_CASE("ConvTranspose costs the forward convolution it transposes (Y's channels in, X's out)") {
  // X [1, 4, 3, 3], W [4, 3, 3, 3], group 2, stride 2, pads 1: Y = (3 - 1) * 2 + 3 - 2 = 5 with
  // 3 * 2 = 6 channels. MACs: N * C_in * |X| * C_out / group * |k| = 1 * 4 * 9 * 3 * 9 = 972, those of
  // the conv of Y (6 channels, 5 x 5) back to X (4 channels, 3 x 3) with the same kernel and pads.
  ipu::builder b("convT");
  auto x = b.add_input_tensor({data_type::F32, {1, 4, 3, 3}}, "x");
  auto w = b.add_input_tensor({data_type::F32, {4, 3, 3, 3}}, "w");
  auto y = b.op("ConvTranspose", {x, w},
                {{"group", std::int64_t{2}}, {"strides", std::vector<std::int64_t>{2, 2}},
                 {"pads", std::vector<std::int64_t>{1, 1, 1, 1}}})
               .front();
  b.add_output(y);
  const auto g = std::move(b).build();
  REQUIRE(g.tensor(y).info.shape == ipu::shape{1, 6, 5, 5});
  ipu::conv_shape s;
  s.batch = 1;
  s.in_channels = 6;
  s.out_channels = 4;
  s.groups = 2;
  s.input = {5, 5};
  s.kernel = {3, 3};
  s.strides = {2, 2};
  s.dilations = {1, 1};
  s.pads_begin = {1, 1};
  s.pads_end = {1, 1};
  REQUIRE(s.output() == std::vector<std::uint64_t>{3, 3});
  const auto c = ipu::estimate_op_cost(g, 0, mk2);
  CHECK(c.macs == 972);
  CHECK(c.cycles() == amp_cost(ipu::plan_conv(mk2, s, ipu::precision::fp32)).cycles());
  CHECK(c.cycles() > ipu::elementwise_cost(mk2.arch, data_type::F32, 150, 2).cycles);
}

TEST_CASE("ConvWeightsGrad: the cheaper of PopLibs' weight-update convolution and its spatially expanded matmul") {
  // dW of a 3x3, pad-1 Conv over X [N, C, H, W] -> dY [N, M, H, W], one group.
  auto cost_of = [](std::int64_t n, std::int64_t ch, std::int64_t hw, std::int64_t m) {
    ipu::builder b("wu");
    auto dy = b.add_input_tensor({data_type::F16, {n, m, hw, hw}}, "dy");
    auto x = b.add_input_tensor({data_type::F16, {n, ch, hw, hw}}, "x");
    b.add_output(b.custom_op("ipu", "ConvWeightsGrad", 1, {dy, x}, {{data_type::F16, {m, ch, 3, 3}}},
                             {{"kernel_shape", std::vector<std::int64_t>{3, 3}}, {"pads", std::vector<std::int64_t>{1, 1, 1, 1}}})
                     .front());
    const auto g = std::move(b).build();
    ipu::conv_shape s;  // poplin::getWeightUpdateParams' convolution
    s.batch = static_cast<std::uint64_t>(ch);
    s.in_channels = static_cast<std::uint64_t>(n);
    s.out_channels = static_cast<std::uint64_t>(m);
    s.input = {static_cast<std::uint64_t>(hw), static_cast<std::uint64_t>(hw)};
    s.kernel = s.input;
    s.pads_begin = {1, 1};
    s.pads_end = {1, 1};
    const ipu::matmul_shape mm{1, static_cast<std::uint64_t>(ch * 9), static_cast<std::uint64_t>(n * hw * hw),
                               static_cast<std::uint64_t>(m)};
    const auto as_conv = amp_cost(ipu::plan_conv(mk2, s, ipu::precision::fp16_32)).cycles();
    const auto as_matmul = amp_cost(ipu::plan_matmul(mk2, mm, ipu::precision::fp16_32)).cycles();
    const auto c = ipu::estimate_op_cost(g, 0, mk2);
    CHECK(c.cycles() == std::min(as_conv, as_matmul));
    CHECK(c.macs == mm.macs());  // the same arithmetic either way
    return std::pair{as_conv, as_matmul};
  };
  // ResNet's layer-1 shape at micro-batch 8: reducing over 8 images per kernel position and summing
  // the partials of 56 x 56 positions costs several times the expanded matmul.
  const auto [conv, matmul] = cost_of(8, 64, 56, 64);
  CHECK(matmul * 2 < conv);
  (void)cost_of(64, 512, 7, 512);  // a large batch over small planes: whichever is cheaper
}

namespace {
ipu::tensor_id einsum(ipu::builder& b, std::string_view eq, const std::vector<ipu::tensor_id>& in, ipu::shape out) {
  return b.custom_op("", "Einsum", 12, in, {{data_type::F32, std::move(out)}}, {{"equation", std::string(eq)}}).front();
}
}  // namespace

TEST_CASE("Einsum: pairwise contractions as matmuls, summing out labels nothing later wants") {
  ipu::builder b("einsum");
  auto a = b.add_input_tensor({data_type::F32, {2, 3, 4}}, "a");
  auto bb = b.add_input_tensor({data_type::F32, {2, 4, 5}}, "b");
  auto p = b.add_input_tensor({data_type::F32, {8, 16}}, "p");
  auto q = b.add_input_tensor({data_type::F32, {16, 32}}, "q");
  auto r = b.add_input_tensor({data_type::F32, {32, 2}}, "r");
  auto big = b.add_input_tensor({data_type::F32, {64, 1000}}, "big");
  b.add_output(einsum(b, "bij,bjk->bik", {a, bb}, {2, 3, 5}));        // 0: batched matmul
  b.add_output(einsum(b, "ij,jk", {p, q}, {8, 32}));                  // 1: implicit output "ik"
  b.add_output(einsum(b, "ij,jk,kl->il", {p, q, r}, {8, 2}));         // 2: two contractions
  b.add_output(einsum(b, "...ij,...jk->...ik", {a, bb}, {2, 3, 5}));  // 3: ellipsis batch
  b.add_output(einsum(b, "ij->i", {big}, {64}));                      // 4: a row sum
  b.add_output(b.op("ReduceSum", {big}, {{"axes", std::vector<std::int64_t>{1}}, {"keepdims", std::int64_t{0}}}, 13)
                   .front());                                           // 5: the same row sum
  b.add_output(einsum(b, "ij->ji", {big}, {1000, 64}));               // 6: a transposition
  b.add_output(b.transpose(big, {}, "t"));                            // 7: the same transposition
  const auto g = std::move(b).build();
  auto mm = [](std::uint64_t batch, std::uint64_t m, std::uint64_t k, std::uint64_t n) {
    return amp_cost(ipu::plan_matmul(mk2, {batch, m, k, n}, ipu::precision::fp32)).cycles();
  };
  CHECK(ipu::estimate_op_cost(g, 0, mk2).macs == 2 * 3 * 4 * 5);
  CHECK(ipu::estimate_op_cost(g, 0, mk2).cycles() == mm(2, 3, 4, 5));
  CHECK(ipu::estimate_op_cost(g, 1, mk2).macs == 8 * 16 * 32);
  CHECK(ipu::estimate_op_cost(g, 1, mk2).cycles() == mm(1, 8, 16, 32));
  // (8 x 16) (16 x 32) then (8 x 32) (32 x 2): 4096 + 512 MACs.
  CHECK(ipu::estimate_op_cost(g, 2, mk2).macs == 4096 + 512);
  CHECK(ipu::estimate_op_cost(g, 2, mk2).cycles() == mm(1, 8, 16, 32) + mm(1, 8, 32, 2));
  CHECK(ipu::estimate_op_cost(g, 3, mk2) == ipu::estimate_op_cost(g, 0, mk2));
  CHECK(ipu::estimate_op_cost(g, 4, mk2).macs == 0);
  CHECK(ipu::estimate_op_cost(g, 4, mk2) == ipu::estimate_op_cost(g, 5, mk2));
  CHECK(ipu::estimate_op_cost(g, 6, mk2) == ipu::estimate_op_cost(g, 7, mk2));
}

TEST_CASE("LRN: a multiply-add per window channel, the power at the scalar rate, a divide") {
  ipu::builder b("lrn");
  auto x = b.add_input_tensor({data_type::F32, {1, 8, 16, 16}}, "x");
  b.add_output(b.op("LRN", {x}, {{"size", std::int64_t{5}}}).front());
  const auto g = std::move(b).build();
  // 2048 elements: 5 + 2 (pow: one F32 per instruction, 2 per result vector) + 2 = 9 instructions
  // per vector; each tile receives its share of the 8192 input bytes (ceil(8192 / 1472) = 6).
  CHECK(ipu::estimate_op_cost(g, 0, mk2).cycles() == ipu::elementwise_cost(mk2.arch, data_type::F32, 2048, 1, 9).cycles +
                                                         ipu::exchange_cycles(mk2.arch, 6) + ipu::sync_cycles(mk2));
}

TEST_CASE("Det: each tile factors whole matrices, one after another; the matrices are spread over the tiles") {
  auto det_cost = [](std::int64_t batch, std::int64_t m) {
    ipu::builder b("det");
    auto x = b.add_input_tensor({data_type::F32, {batch, m, m}}, "x");
    b.add_output(b.op("Det", {x}, {}).front());
    const auto g = std::move(b).build();
    return ipu::estimate_op_cost(g, 0, mk2);
  };
  // 3 x 3: 27 / 3 + 9 = 18 multiply-adds per LU. Two matrices: one each on two tiles.
  auto two = det_cost(2, 3);
  CHECK(two.tiles == 2);
  CHECK(two.cycles() == ipu::vector_tile_cycles(mk2.arch, data_type::F32, 18, 1, 1) + ipu::sync_cycles(mk2));
  // More matrices than tiles: every tile busy, the fullest factoring ceil(3000 / 1472) = 3 of them.
  auto many = det_cost(3000, 3);
  CHECK(many.tiles == mk2.arch.tiles_per_ipu);
  CHECK(many.cycles() == ipu::vector_tile_cycles(mk2.arch, data_type::F32, 3 * 18, 1, 1) + ipu::sync_cycles(mk2));
  // One large matrix is not spread: it costs its whole LU on one tile.
  auto one = det_cost(1, 64);
  CHECK(one.tiles == 1);
  CHECK(one.cycles() ==
        ipu::vector_tile_cycles(mk2.arch, data_type::F32, 64 * 64 * 64 / 3 + 64 * 64, 1, 1) + ipu::sync_cycles(mk2));
}

TEST_CASE("If costs its costlier branch; a subgraph's ops are costed like the main graph's") {
  auto branch = [](bool exp) {
    ipu::builder b(exp ? "then" : "else");
    auto x = b.add_input_tensor({data_type::F32, {64, 1000}}, "x");
    b.add_output(exp ? b.exp(x, "e") : b.relu(x, "r"));
    return std::move(b).build();
  };
  const auto then_g = branch(true), else_g = branch(false);
  ipu::builder b("if");
  auto cond = b.add_input_tensor({data_type::BOOL, {}}, "cond");
  b.add_output(b.custom_op("", "If", 17, {cond}, {{data_type::F32, {64, 1000}}},
                           {{"then_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(then_g)}},
                            {"else_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(else_g)}}})
                   .front());
  const auto g = std::move(b).build();
  const auto exp_cost = ipu::estimate_op_cost(then_g, 0, mk2);
  CHECK(exp_cost.cycles() > ipu::estimate_op_cost(else_g, 0, mk2).cycles());
  CHECK(ipu::estimate_op_cost(g, 0, mk2) == exp_cost);
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

TEST_CASE("integer products: MatMulInteger on the vector units like an integer MatMul; QLinear adds a requantize pass") {
  ipu::builder b("q");
  auto a = b.add_input_tensor({data_type::U8, {64, 32}}, "a");
  auto w = b.add_input_tensor({data_type::U8, {32, 16}}, "w");
  auto s = b.add_input_tensor({data_type::F32, {}}, "s");
  auto z = b.add_input_tensor({data_type::U8, {}}, "z");
  b.add_output(b.custom_op("", "MatMulInteger", 10, {a, w}, {{data_type::S32, {64, 16}}}, {}, "mmi").front());
  b.add_output(b.custom_op("", "QLinearMatMul", 10, {a, s, z, w, s, z, s, z}, {{data_type::U8, {64, 16}}}, {}, "qmm").front());
  b.add_output(b.custom_op("", "MatMul", 13, {a, w}, {{data_type::U8, {64, 16}}}, {}, "mm").front());
  const auto g = std::move(b).build();
  const auto mmi = ipu::estimate_op_cost(g, 0, mk2), qmm = ipu::estimate_op_cost(g, 1, mk2), mm = ipu::estimate_op_cost(g, 2, mk2);
  CHECK(mmi.macs == 64u * 32u * 16u);
  CHECK(mmi.cycles() == mm.cycles());  // the device model has no 8-bit AMP mode
  CHECK(qmm.macs == mmi.macs);
  CHECK(qmm.cycles() == mmi.cycles() + ipu::elementwise_cost(mk2.arch, data_type::F32, 64 * 16, 2, 3).cycles + ipu::sync_cycles(mk2));
}

// The table is usable in constant expressions: a matmul's cost inside a static_assert.
static_assert([] {
  const auto g = matmul_graph(64, 64, 64, ipu::data_type::F32);
  const auto c = ipu::estimate_op_cost(g, 0, ipu::ipu_model<ipu::mk2, 1>::description());
  return c.macs == 64 * 64 * 64 && c.cycles() > 64u * 64u * 64u / (16u * 1472u);
}());

}  // namespace test_op_cost
