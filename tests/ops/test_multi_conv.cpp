// ai.graphcore MultiConv: its outputs against a hand-computed convolution and, bit for bit, against
// each conv run alone through Conv's kernel; its cost against Conv's plans (serial: their sum;
// parallel: PopLibs' side-by-side plan, bounded by the convs' own plans); what every option changes;
// and what the shape rule refuses.
#include "ipu/ops/families/multi_conv.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/device/cost.hpp"
#include "ipu/ops/kernels/multi_conv.hpp"
#include "ipu/ops/op_cost.hpp"
#include "math_kernel_harness.hpp"

namespace test_multi_conv {

using namespace mk;

namespace {

const auto mk2 = ipu::ipu_model<ipu::mk2, 1>::description();

bool same_bits(const host_tensor& a, const host_tensor& b) {
  return a.info() == b.info() && std::ranges::equal(a.bytes(), b.bytes());
}

/// Two convolutions with different windows: a 2-D one (stride 2, pads, bias, group 2) and a 1-D
/// one (dilation 2, no bias).
struct two_convs {
  host_tensor x0 = f32({2, 4, 7, 6}, random_floats(2 * 4 * 7 * 6, 1));
  host_tensor w0 = f32({6, 2, 3, 3}, random_floats(6 * 2 * 3 * 3, 2));
  host_tensor b0 = f32({6}, random_floats(6, 3));
  host_tensor x1 = f32({3, 5, 11}, random_floats(3 * 5 * 11, 4));
  host_tensor w1 = f32({4, 5, 3}, random_floats(4 * 5 * 3, 5));
  tensor_info y0{data_type::F32, {2, 6, 4, 3}};  // (7 + 1 + 1 - 3) / 2 + 1, (6 + 0 + 1 - 3) / 2 + 1
  tensor_info y1{data_type::F32, {3, 4, 7}};     // 11 - (3 - 1) * 2
  std::vector<attribute> attrs{{"strides", ints{2, 2, 1}},
                               {"pads", ints{1, 0, 1, 1, 0, 0}},
                               {"dilations", ints{1, 1, 2}}};
};

}  // namespace

TEST_CASE("MultiConv: a hand-computed convolution") {
  // X = 0..8 as 3x3, W = ones 2x2: each output sums a 2x2 window; the second conv is 1x1 by 2 plus bias 1.
  const auto x = f32({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  const auto out = run_in("ai.graphcore", "MultiConv",
                          {x, f32({1, 1, 2, 2}, {1, 1, 1, 1}), std::nullopt, x, f32({1, 1, 1, 1}, {2}), f32({1}, {1})},
                          {{data_type::F32, {1, 1, 2, 2}}, {data_type::F32, {1, 1, 3, 3}}});
  CHECK(values<float>(out[0]) == std::vector<float>{8, 12, 20, 24});
  CHECK(values<float>(out[1]) == std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17});
}

TEST_CASE("MultiConv: each output is the bits of Conv on its triple, with its slice of the attributes") {
  const two_convs t;
  for (bool wide : {false, true}) {
    CAPTURE(wide);
    const auto as = [&](const host_tensor& v) {
      if (!wide) return v;
      std::vector<double> d;
      for (float f : values<float>(v)) d.push_back(f);
      return f64(v.info().shape, d);
    };
    auto y0 = t.y0, y1 = t.y1;
    if (wide) y0.type = y1.type = data_type::F64;
    const auto multi = run_in("ai.graphcore", "MultiConv", {as(t.x0), as(t.w0), as(t.b0), as(t.x1), as(t.w1)}, {y0, y1},
                              t.attrs);
    const auto c0 = run1("Conv", {as(t.x0), as(t.w0), as(t.b0)}, y0,
                         {{"strides", ints{2, 2}}, {"pads", ints{1, 0, 1, 1}}, {"group", std::int64_t{2}}});
    const auto c1 = run1("Conv", {as(t.x1), as(t.w1)}, y1, {{"dilations", ints{2}}});
    CHECK(same_bits(multi[0], c0));
    CHECK(same_bits(multi[1], c1));
  }
}

TEST_CASE("MultiConv keeps one cache per conv: constant weights give the same bits run after run") {
  const two_convs t;
  const auto* entry = registry().find("ai.graphcore", "MultiConv");
  REQUIRE(entry);
  ipu::op_node op;
  op.type = "MultiConv";
  op.domain = "ai.graphcore";
  op.attributes = t.attrs;
  const std::vector<ipu::const_tensor_view> in{t.x0.view(), t.w0.view(), t.b0.view(), t.x1.view(), t.w1.view()};
  ipu::op_cache cache;
  std::vector<host_tensor> first;
  for (int run = 0; run < 3; ++run) {
    std::vector<host_tensor> out;
    out.emplace_back(t.y0);
    out.emplace_back(t.y1);
    std::vector<ipu::tensor_view> views{out[0].view(), out[1].view()};
    ipu::kernel_context ctx{op, in, views, chunked_for, nullptr};
    ctx.cache = &cache;
    ctx.constant_inputs = 0b11010;  // both weights and the bias
    entry->kernel(ctx);
    REQUIRE(cache.prepared);
    CHECK(static_cast<ipu::detail::math_ops::multi_conv_caches*>(cache.prepared.get())->convs.size() == 2);
    if (run == 0) first = std::move(out);
    else {
      CHECK(same_bits(out[0], first[0]));
      CHECK(same_bits(out[1], first[1]));
    }
  }
  const auto alone = run_in("ai.graphcore", "MultiConv", {t.x0, t.w0, t.b0, t.x1, t.w1}, {t.y0, t.y1}, t.attrs);
  CHECK(same_bits(alone[0], first[0]));
  CHECK(same_bits(alone[1], first[1]));
}

namespace {

/// A graph of one MultiConv over convs of F32 X [n, c, s, s] by W [m, c, 3, 3] (pads 1), then each
/// conv alone as op 1, 2, ...
struct cost_case {
  std::vector<std::int64_t> batch, in_ch, size, out_ch;
  ipu::multi_conv_options options{};
  data_type type = data_type::F32;
};
std::pair<ipu::op_cost, std::vector<ipu::op_cost>> costs(const cost_case& k, const ipu::op_cost_options& o = {}) {
  ipu::builder b("mc");
  std::vector<ipu::multi_conv_input> convs;
  for (std::size_t i = 0; i < k.batch.size(); ++i) {
    const auto x = b.add_input_tensor({k.type, {k.batch[i], k.in_ch[i], k.size[i], k.size[i]}}, "x" + std::to_string(i));
    const auto w = b.add_input_tensor({k.type, {k.out_ch[i], k.in_ch[i], 3, 3}}, "w" + std::to_string(i));
    convs.push_back({x, w, ipu::no_tensor, {}, {1, 1, 1, 1}, {}});
  }
  for (auto y : b.multi_conv(convs, k.options)) b.add_output(y);
  for (std::size_t i = 0; i < convs.size(); ++i) {
    ipu::conv_options co;
    co.pads = {1, 1, 1, 1};
    auto x = convs[i].x, w = convs[i].w;
    auto y = b.conv(x, w, ipu::no_tensor, co);
    if (!k.options.available_memory_proportions.empty())
      b.set_available_memory_proportion(y, k.options.available_memory_proportions[i]);
    b.add_output(y);
  }
  const auto g = std::move(b).build();
  std::vector<ipu::op_cost> alone;
  for (std::size_t i = 0; i < convs.size(); ++i) alone.push_back(ipu::estimate_op_cost(g, 1 + i, mk2, o));
  return {ipu::estimate_op_cost(g, 0, mk2, o), alone};
}

}  // namespace

TEST_CASE("MultiConv cost: serial is the sum of each conv planned on every tile") {
  cost_case k{{4, 2}, {64, 32}, {28, 14}, {64, 128}};
  k.options.plan_type = "serial";
  const auto [multi, alone] = costs(k);
  CHECK(multi.cycles() == alone[0].cycles() + alone[1].cycles());
  CHECK(multi.macs == alone[0].macs + alone[1].macs);
  CHECK(multi.temporary_bytes_per_tile == std::max(alone[0].temporary_bytes_per_tile, alone[1].temporary_bytes_per_tile));
}

TEST_CASE("MultiConv cost: a parallel plan runs the convs side by side, as slow as its slowest conv") {
  SUBCASE("one conv: at most its own plan's time, on at most as many tiles") {
    // Re-planned on the fewest tiles within its fastest time, which can be a little faster still:
    // the planner's cycles do not fall strictly with tiles.
    const auto [multi, alone] = costs({{4}, {64}, {28}, {64}});
    CHECK(multi.cycles() <= alone[0].cycles());
    CHECK(multi.tiles <= alone[0].tiles);
  }
  SUBCASE("convs too small to fill the IPU, or a large and a small one: side by side beats one after another") {
    for (const auto& k : {cost_case{{1, 1, 1, 1}, {16, 16, 32, 8}, {7, 7, 7, 14}, {16, 16, 16, 8}},
                          cost_case{{4, 1}, {64, 16}, {28, 14}, {64, 16}}}) {
      CAPTURE(k.batch.size());
      auto serial = k;
      serial.options.plan_type = "serial";
      const auto [multi, alone] = costs(k);
      const auto one_by_one = costs(serial).first;
      std::uint64_t macs = 0;
      for (const auto& a : alone) macs += a.macs;
      CHECK(multi.cycles() < one_by_one.cycles());
      CHECK(multi.tiles <= mk2.arch.tiles_per_ipu);
      CHECK(multi.macs == macs);
    }
  }
  SUBCASE("two equal convs: the larger keeps the tiles that hold it within cycleBackOff of its fastest") {
    // With PopLibs' default 0.1 the first conv keeps nearly every tile and the second runs on what
    // is left, so the plan loses to serial, as PopLibs' own would; a larger back-off shares the tiles.
    cost_case k{{4, 4}, {64, 64}, {28, 28}, {64, 64}};
    auto serial = k;
    serial.options.plan_type = "serial";
    const auto one_by_one = costs(serial).first.cycles();
    k.options.cycle_back_off = 0.1f;
    const auto tight = costs(k).first.cycles();
    k.options.cycle_back_off = 0.9f;
    const auto loose = costs(k).first.cycles();
    CHECK(tight > one_by_one);
    CHECK(loose < one_by_one);
    CHECK(loose < tight);
  }
}

TEST_CASE("MultiConv cost: every option changes the plan it names") {
  const cost_case base{{4, 2, 1}, {64, 32, 16}, {28, 14, 56}, {64, 128, 16}};
  const auto plain = costs(base).first;
  auto serial = base;
  serial.options.plan_type = "serial";
  CHECK(costs(serial).first.cycles() != plain.cycles());
  // PopLibs' defaults, given explicitly, are the defaults.
  auto defaults = base;
  defaults.options.per_conv_reserved_tiles = 50;
  defaults.options.cycle_back_off = 0.1f;
  CHECK(costs(defaults).first == plain);
  auto reserved = base;
  reserved.options.per_conv_reserved_tiles = 400;
  CHECK(costs(reserved).first != plain);
  auto back_off = base;
  back_off.options.cycle_back_off = 0.9f;
  CHECK(costs(back_off).first != plain);
  // The available memory proportions reach each conv's plan as the per-op annotation does.
  cost_case big{{4, 8}, {64, 256}, {28, 28}, {64, 256}};
  big.options.plan_type = "serial";
  auto amp = big;
  amp.options.available_memory_proportions = {0.6f, 0.05f};
  const auto [multi, alone] = costs(amp);
  CHECK(multi.cycles() == alone[0].cycles() + alone[1].cycles());
  CHECK(multi.temporary_bytes_per_tile < costs(big).first.temporary_bytes_per_tile);
  // Half partials make an F16 conv's plan faster; an F32 conv refuses them (shape rule test).
  auto f16 = serial;
  f16.type = data_type::F16;
  auto f16_half = f16;
  f16_half.options.partials_types = {"half"};
  CHECK(costs(f16_half).first.cycles() < costs(f16).first.cycles());
}

TEST_CASE("MultiConv shape rule: one output per conv; bad inputs and options refused with what to fix") {
  using doctest::Contains;
  ipu::builder b("mc");
  const auto x = b.add_input_tensor({data_type::F32, {1, 4, 8, 8}}, "x");
  const auto w = b.add_input_tensor({data_type::F32, {2, 4, 3, 3}}, "w");
  const auto wg = b.add_input_tensor({data_type::F32, {6, 2, 1, 1}}, "wg");
  const auto bias = b.add_input_tensor({data_type::F32, {2}}, "bias");
  const auto x1 = b.add_input_tensor({data_type::F32, {2, 4, 9}}, "x1");
  const auto w1 = b.add_input_tensor({data_type::F32, {3, 4, 2}}, "w1");
  const auto ys = b.multi_conv({{x, w, bias, {2, 2}, {1, 1, 1, 1}, {}}, {x, wg}, {x1, w1, ipu::no_tensor, {3}, {}, {}}});
  REQUIRE(ys.size() == 3);
  CHECK(b.info(ys[0]) == tensor_info{data_type::F32, {1, 2, 4, 4}});
  CHECK(b.info(ys[1]) == tensor_info{data_type::F32, {1, 6, 8, 8}});  // group 2 from the shapes
  CHECK(b.info(ys[2]) == tensor_info{data_type::F32, {2, 3, 3}});
  const ipu::op_options gc{.opset = 1, .num_outputs = 1, .domain = "ai.graphcore"};
  const auto refused = [&](std::vector<ipu::tensor_id> in, std::vector<attribute> a, const char* what) {
    CAPTURE(what);
    CHECK_THROWS_WITH_AS(b.op("MultiConv", in, a, gc), Contains(what), ipu::error);
  };
  refused({x, w, bias, x}, {}, "MultiConv has 4 inputs");
  refused({x, w}, {{"strides", ints{1}}}, "strides has 1 values; the convolutions need 2");
  refused({x, w}, {{"pads", ints{1, 1}}}, "pads has 2 values");
  refused({x, w}, {{"inDilations", ints{2, 1}}}, "inDilations holds 2; only 1 is supported");
  refused({x, w}, {{"outPads", ints{0, 0, 1, 0}}}, "outPads holds 1");
  refused({x, w}, {{"partialsTypes", std::vector<std::string>{"half"}}}, "is F32 but its partials type is \"half\"");
  refused({x, w}, {{"partialsTypes", std::vector<std::string>{"double"}}}, "partials type 'double'");
  refused({x, w}, {{"availableMemoryProportions", std::vector<float>{0.0f}}}, "available memory proportion is 0");
  refused({x, w}, {{"availableMemoryProportions", std::vector<float>{0.5f, 0.5f}}}, "has 2 values for 1 convolutions");
  refused({x, w}, {{"planType", std::string("diagonal")}}, "planType 'diagonal'");
  refused({x, w}, {{"perConvReservedTiles", std::int64_t{0}}}, "perConvReservedTiles is below 1");
  refused({x, w}, {{"cycleBackOff", 1.0f}}, "cycleBackOff is 1");
  refused({x, w}, {{"enableConvDithering", ints{1}}}, "enableConvDithering is set");
  refused({x, w}, {{"group", std::int64_t{1}}}, "attribute 'group' is not one of MultiConv's");
  const auto w5 = b.add_input_tensor({data_type::F32, {2, 3, 3, 3}}, "w5");
  refused({x, w5}, {}, "give no group");
  const auto big = b.add_input_tensor({data_type::F32, {2, 4, 9, 9}}, "big");
  refused({x, big}, {}, "kernel");  // Conv's own rule, located at conv #0
  CHECK_THROWS_WITH_AS(b.op("MultiConv", {x, w}, {}, {.opset = 1, .num_outputs = 2, .domain = "ai.graphcore"}),
                       Contains("1 convolutions but 2 outputs"), ipu::error);
}

}  // namespace test_multi_conv
