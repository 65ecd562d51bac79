#include <doctest/doctest.h>

#include "ipu/device/compute_cost.hpp"

namespace test_compute_cost {

using ipu::amp_partition;
using ipu::amp_problem;
using ipu::data_type;
using ipu::precision;

namespace {
constexpr auto mk2_1 = ipu::ipu_model<ipu::mk2, 1>::description();
constexpr auto mk2 = mk2_1.arch;

// Hand-derived AMP geometry from the memory ports (see compute_cost.hpp):
//   po = 8 / partial bytes, pi = (16 - 8) / input bytes, nb = MACs / pi, c = ceil(nb / po), kb = pi c,
//   w = kb nb input bytes / 8 (PopLibs' default 64-bit weight loads).
struct geometry_case {
  ipu::architecture_description arch;
  precision p;
  ipu::amp_geometry expected;
};
}  // namespace

TEST_CASE("AMP geometry derived from the memory ports sustains the datasheet MAC rate") {
  const auto mk1 = ipu::describe_architecture<ipu::mk1>();
  const geometry_case cases[] = {
      {mk2, precision::fp16_16, {4, 4, 16, 16, 4, 64}},  // w = 16 x 16 x 2 / 8
      {mk2, precision::fp16_32, {4, 2, 16, 8, 4, 32}},
      {mk2, precision::fp32, {2, 2, 8, 8, 4, 32}},       // w = 8 x 8 x 4 / 8
      {mk1, precision::fp32, {2, 2, 4, 4, 2, 8}},
      {mk1, precision::fp16_32, {4, 2, 16, 8, 4, 32}},
      {mk1, precision::fp16_16, {4, 4, 8, 8, 2, 16}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.arch.name);
    CAPTURE(ipu::to_string(c.p));
    const auto g = ipu::amp_geometry_for(c.arch, c.p);
    CHECK(g == c.expected);
    CHECK(g.macs_per_cycle() == c.arch.macs_per_cycle(c.p));
    // 128-bit loads (use128BitConvUnitLoad) take the whole 16-byte read port: half the cycles.
    auto fast = c.expected;
    fast.weight_load_cycles /= 2;
    CHECK(ipu::amp_geometry_for(c.arch, c.p, true) == fast);
  }
  static_assert(ipu::conv_unit_load_bytes_per_cycle(mk2, false) == 8);
  static_assert(ipu::conv_unit_load_bytes_per_cycle(mk2, true) == 16);
  static_assert(ipu::amp_geometry_for(ipu::describe_architecture<ipu::bow>(), precision::fp16_16).macs_per_cycle() == 64);
}

TEST_CASE("AMP tile cycles: one vertex, its loops and PopLibs' fixed costs") {
  // 10 rows, 20 in, 20 out on Mk2 FP16.16: 2 x 2 blocks of 16 x 16, the 1x1 vertex (half inputs,
  // 16 units: the common path, 7 cycles retained). Workers take 2, 2, 1, 2, 2, 1 rows: zeroing
  // 40 + 1 - 7 = 34 and 31 + 1 - 7 = 25 cycles, max(6 x 34, 6 x 25 + 14) = 204; later blocks 35 and
  // 26, 210. Weights: 16 x 16 halves over 64-bit loads, 64 cycles. First input block
  // 11 + 2 x (18 + 7 + 64 + 204), later 15 + 2 x (19 + 6 + 64 + 210), retention 6 x (7 + 3 x 1),
  // group 12 + 1, vertex 50 (vertex_cost.hpp).
  constexpr std::uint64_t first = 11 + 2 * (18 + 7 + 64 + 204), later = 15 + 2 * (19 + 6 + 64 + 210);
  static_assert(ipu::amp_tile_cycles(mk2, precision::fp16_16, amp_problem{1, 10, 20, 20, 1, 10}) ==
                50 + 6 * (7 + 3) + 13 + later + first);
  CHECK(ipu::amp_tile_cycles(mk2, precision::fp16_16, amp_problem{1, 10, 20, 20, 1, 10}) == 1333);
  // 128-bit loads: 32 cycles per block load, 4 loads fewer 32 cycles.
  CHECK(ipu::amp_tile_cycles(mk2, precision::fp16_16, amp_problem{1, 10, 20, 20, 1, 10}, true) == 1333 - 4 * 32);
  // FP32 inputs take the float path, which zeroes in the worker (2 + 4 per row): 6 rows, one per
  // worker, 47 + 6 = 53 cycles each, all equal, so the 14-cycle tag decides: 6 x 53 + 14.
  const auto six = ipu::amp_tile_cycles(mk2, precision::fp32, amp_problem{1, 6, 8, 8, 1, 6});
  CHECK(six == 50 + 13 + 11 + 18 + 7 + 32 + (6 * 53 + 14));
  // 7 rows: the 2-row workers (46 + 10 = 56) are slowest; 12 rows: all take 56, + the tag.
  CHECK(ipu::amp_tile_cycles(mk2, precision::fp32, amp_problem{1, 7, 8, 8, 1, 7}) == six - (6 * 53 + 14) + 6 * 56);
  CHECK(ipu::amp_tile_cycles(mk2, precision::fp32, amp_problem{1, 12, 8, 8, 1, 12}) ==
        six - (6 * 53 + 14) + 6 * 56 + 14);
  CHECK(ipu::amp_tile_cycles(mk2, precision::fp32, amp_problem{1, 0, 8, 8, 1, 0}) == 0);
  // More kernel positions take the nx1 vertex and its zeroing vertex.
  const amp_problem k9{2, 10, 20, 20, 9, 10};
  const auto path = ipu::amp_code_path_for(precision::fp16_16, 16);
  CHECK(ipu::amp_tile_cycles(mk2, precision::fp16_16, k9) ==
        ipu::amp_zero_vertex_cycles(mk2, 2, 2, 10, 16) +
            ipu::amp_nx1_vertex_cycles(mk2, path, 2, 2, 2, {1, 9}, 10, 0, 4, 64));
}

TEST_CASE("AMP fill: 3 input channels waste most of a 16-channel block") {
  const amp_problem three{1, 600, 3, 64, 49, 600};
  const amp_problem sixteen{1, 600, 16, 64, 49, 600};
  const auto c3 = ipu::amp_tile_cycles(mk2, precision::fp16_16, three);
  const auto c16 = ipu::amp_tile_cycles(mk2, precision::fp16_16, sixteen);
  CHECK(c3 == c16);  // same passes: the AMP's 16 inputs are mostly zero padding
  // nx1 over 49 positions, 4 output blocks; each worker one item of 100 rows:
  // 3 + 34 - 12 + 400 - 9 = 416, + 17 + 1 = 434; per position max(6 x 434, 6 x 434 + 9).
  constexpr std::uint64_t inner = 14 + 49 * (12 + 64 + 18) + 49 * (6 * 434 + 9);
  constexpr std::uint64_t nx1 = 109 + 6 * 9 + 6 * 10 + (4 * 17 + 3 * 6 + 1) + 1 + 16 + (14 + 4 * (14 + inner));
  constexpr std::uint64_t zero = 6 * 4 * (800 + 5);  // 600 x 16 / 6 = 1600 per worker, 2 a cycle
  CHECK(c3 == zero + nx1);
  const double useful3 = static_cast<double>(three.macs()) / (static_cast<double>(c3) * 64);
  CHECK(useful3 < 3.0 / 16.0);
  CHECK(useful3 > 0.85 * 3.0 / 16.0);
}

TEST_CASE("nx1 weight heights: 3 input channels of a 3x3 kernel fold 4 kernel rows into a block") {
  // 12 rows, 3 -> 16 channels, 3x3 kernel on Mk2 FP16.16 (kb = nb = 16, c = 4, 64-cycle loads).
  // Each worker: one item of 2 rows, 17 + 1 + (3 + 33 + 1 - 9) = 46; per position max(6 x 46, + 9) = 285.
  // Zeroing vertex 6 x (ceil(12 x 16 / 6 / 2) + 5) = 126; fixed 109 + 6 x 9 + 6 x 10 = 223; the
  // zeroing loop 19; the group / input / output block loops 16 + 14 + 14.
  //   h = 1: 3 kernel rows, per position 12 + 64 + 15 + 3 = 94: 3 (14 + 3 x 94) + 9 x 285 = 3453
  //   h = 2: 8 channels a block, 2 rows, 12 + 64 + 46 + 3 = 125:  2 (14 + 3 x 125) + 6 x 285 = 2488
  //   h = 4: 4 channels a block, 1 row,  12 + 64 + 60 + 3 = 139:  1 (14 + 3 x 139) + 3 x 285 = 1286
  const amp_problem p{1, 12, 3, 16, 9, 12, 3, 0, 3};
  constexpr std::uint64_t fixed = 126 + 223 + 19 + 44;
  const auto v = ipu::choose_amp_vertex(mk2, precision::fp16_16, p);
  CHECK(v == ipu::amp_vertex_choice{ipu::amp_vertex::conv_nx1, 4, {}, fixed + 1286});
  CHECK(v.cycles == 1698);
  CHECK(ipu::amp_tile_cycles(mk2, precision::fp16_16, p) == 1698);
  // 128-bit loads halve heights 1 and 2's loads (3165, 2296) but not height 4's (it shuffles its weights).
  CHECK(ipu::choose_amp_vertex(mk2, precision::fp16_16, p, true) == v);
  // 16 input channels fill a height-1 block; height 4 would need 4 input blocks: h = 1 wins.
  amp_problem full = p;
  full.in_channels = 16;
  CHECK(ipu::choose_amp_vertex(mk2, precision::fp16_16, full) ==
        ipu::amp_vertex_choice{ipu::amp_vertex::conv_nx1, 1, {}, fixed + 3453});
  // A 1-D kernel (kernel_height 1) and a piece without its kernel's shape have nothing to fold.
  amp_problem flat = p;
  flat.kernel_height = 1;
  CHECK(ipu::choose_amp_vertex(mk2, precision::fp16_16, flat).weight_height == 1);
  static_assert(ipu::choose_amp_vertex(mk2, precision::fp32, amp_problem{1, 12, 3, 16, 9, 12}).weight_height == 1);
  // Mk1 FP32 (c = 2, kb = 4) has heights 1 and 2 only: 2 channels fill a height-2 block.
  const auto mk1 = ipu::describe_architecture<ipu::mk1>();
  amp_problem two = p;
  two.in_channels = 2;
  CHECK(ipu::choose_amp_vertex(mk1, precision::fp32, two).weight_height == 2);
  CHECK(ipu::choose_amp_vertex(mk1, precision::fp32, full).weight_height == 1);
  // The planner records the vertex: the ResNet stem's 3 channels take height 4.
  const ipu::conv_shape stem{1, 3, 64, 1, {224, 224}, {7, 7}, {2, 2}, {3, 3}, {3, 3}, {}};
  const auto plan = ipu::plan_conv(mk2_1, stem, precision::fp16_16);
  CHECK(plan.vertex.vertex == ipu::amp_vertex::conv_nx1);
  CHECK(plan.vertex.weight_height == 4);
  CHECK(plan.compute.compute_cycles == ipu::amp_tile_cycles(mk2, precision::fp16_16, plan.tile_work));
}

TEST_CASE("SLIC: groups of at most 4 channels take the SLIC vertex when it is cheaper") {
  // 12 rows, 4 -> 4 channels, 3x3 kernel at stride 1. Mk2 FP16.16: SLIC with 1 group of 4 channels
  // on 4 chains, 1029 cycles (vertex_cost tests), beats 2 chains (1373) and nx1 at height 4 (1698).
  const amp_problem p{1, 12, 4, 4, 9, 12, 3, 0, 3, 1};
  const ipu::amp_vertex_choice slic16{ipu::amp_vertex::slic, 1, {1, 4, 4}, 1029};
  CHECK(ipu::choose_amp_vertex(mk2, precision::fp16_16, p) == slic16);
  // FP16.32: 8 float-partial units, 2 chains, 1365; nx1 at height 4: zeroing 6 x (8 + 5), fixed
  // 109 + 6 x 9 + 6 x 9, loops 19 + 44, per position 12 + 32 + 60 + 3 and max(6 x 45, + 9).
  CHECK(ipu::choose_amp_vertex(mk2, precision::fp16_32, p) ==
        ipu::amp_vertex_choice{ipu::amp_vertex::slic, 1, {1, 4, 2}, 1365});
  CHECK(1365 < 78 + 217 + 19 + 44 + (14 + 3 * 107 + 3 * 279));
  // Not for FP32 inputs, 5 channels, stride 3, a matmul (no kernel: fully connected), or Mk1.
  CHECK(ipu::choose_amp_vertex(mk2, precision::fp32, p).vertex == ipu::amp_vertex::conv_nx1);
  amp_problem five = p;
  five.in_channels = 5;
  CHECK(ipu::choose_amp_vertex(mk2, precision::fp16_16, five).vertex == ipu::amp_vertex::conv_nx1);
  amp_problem strided = p;
  strided.stride_width = 3;
  CHECK(ipu::choose_amp_vertex(mk2, precision::fp16_16, strided).vertex == ipu::amp_vertex::conv_nx1);
  CHECK(ipu::choose_amp_vertex(mk2, precision::fp16_16, amp_problem{1, 12, 4, 4, 1, 12}).vertex ==
        ipu::amp_vertex::conv_1x1);
  CHECK(ipu::choose_amp_vertex(ipu::describe_architecture<ipu::mk1>(), precision::fp16_32, p).vertex ==
        ipu::amp_vertex::conv_nx1);
  // A plan on one tile records the vertex and adds its output buffer to the temporaries: operands
  // 12 x 4 x 2 + 9 x 4 x 4 x 2 bytes, partials 12 x 4 x 2 / 1 group block + 200.
  const auto one = ipu::evaluate_amp_partition(mk2_1, p, precision::fp16_16, {});
  CHECK(one.vertex == slic16);
  CHECK(one.compute.compute_cycles == 1029);
  CHECK(one.temporary_bytes_per_tile == 96 + 288 + 96 + 200);
  // The ResNeXt layer of `ipu model` (32 groups of 4 channels) is planned on SLIC.
  const ipu::conv_shape resnext{1, 128, 128, 32, {56, 56}, {3, 3}, {}, {1, 1}, {1, 1}, {}};
  for (auto prec : {precision::fp16_16, precision::fp16_32}) {
    const auto plan = ipu::plan_conv(mk2_1, resnext, prec);
    CHECK(plan.vertex.vertex == ipu::amp_vertex::slic);
    CHECK(plan.compute.compute_cycles == ipu::amp_tile_cycles(mk2, prec, plan.tile_work));
  }
}

TEST_CASE("vector ops: one 64-bit result per cycle, limited by reads and instructions") {
  CHECK(ipu::vector_width(mk2, data_type::F32) == 2);
  CHECK(ipu::vector_width(mk2, data_type::F16) == 4);
  CHECK(ipu::vector_width(mk2, data_type::S8) == 8);
  // 100 F32 adds: 50 vectors, 1 cycle each, 6 workers: 6 + 6 x 9 = 60.
  CHECK(ipu::vector_tile_cycles(mk2, data_type::F32, 100, 2) == 60);
  // 3 F16 inputs: 24 bytes per vector at 16 B/cycle: 2 cycles per vector; 25 vectors -> 6 + 6 x 5 x 2.
  CHECK(ipu::vector_tile_cycles(mk2, data_type::F16, 100, 3) == 66);
  // An op needing 5 instructions per vector (a transcendental, say).
  CHECK(ipu::vector_tile_cycles(mk2, data_type::F32, 100, 1, 5) == 6 + 6 * 9 * 5);
  CHECK(ipu::vector_tile_cycles(mk2, data_type::F32, 0, 2) == 0);
}

TEST_CASE("element-wise ops spread over all tiles in whole vectors") {
  const auto c = ipu::elementwise_cost(mk2, data_type::F16, 1 << 20, 2);
  CHECK(c.mapping.tiles_used == 1465);              // 262144 vectors, 179 per tile
  CHECK(c.mapping.max_elements_per_tile() == 716);
  CHECK(c.cycles == 6 + 6 * 30 * 1);                // 179 vectors over 6 workers: 30 rounds
  const auto few = ipu::elementwise_cost(mk2, data_type::F16, 1 << 20, 2, 1, 64);
  CHECK(few.mapping.tiles_used == 64);
  CHECK(few.cycles > c.cycles);
}

TEST_CASE("one tile, no split: nothing to exchange, one sync") {
  const amp_problem p{1, 16, 16, 16, 1, 16};
  const auto plan = ipu::evaluate_amp_partition(mk2_1, p, precision::fp16_16, {});
  CHECK(plan.tiles_used == 1);
  CHECK(plan.operand_bytes_per_tile == 0);  // it holds both operands already
  // 16 rows: workers take 3, 3, 2, 3, 3, 2; PopLibs' 2-row case (34) is slower than 3 rows (30).
  CHECK(plan.compute == ipu::superstep{50 + 6 * 7 + 13 + 11 + 18 + 7 + 64 + 6 * 34, 40, 0});
  CHECK(plan.reduction == ipu::superstep{});
  CHECK(plan.reduction_stages == 0);
  CHECK(plan.total_cycles() == 409 + 40);
  // use_128bit_conv_unit_load reaches the vertex: 32 weight-load cycles instead of 64.
  ipu::amp_plan_options fast;
  fast.use_128bit_conv_unit_load = true;
  CHECK(ipu::evaluate_amp_partition(mk2_1, p, precision::fp16_16, {}, fast).total_cycles() == 377 + 40);
  CHECK(plan.temporary_bytes_per_tile == 1024);
  CHECK(plan.ideal_cycles == 1);
}

TEST_CASE("splitting input channels adds a partial-sum exchange and reduction") {
  const amp_problem p{1, 16, 16, 16, 1, 16};
  const auto plan = ipu::evaluate_amp_partition(mk2_1, p, precision::fp16_16, amp_partition{1, 1, 1, 2});
  CHECK(plan.tiles_used == 2);
  CHECK(plan.tile_work == amp_problem{1, 16, 8, 16, 1, 16});
  CHECK(plan.compute.compute_cycles == 409);  // one input block either way
  // 256 partials per tile, each tile reduces 128 of them, receiving 1 x 128 x 2 bytes.
  CHECK(plan.reduction_bytes_per_tile == 256);
  CHECK(plan.reduction.exchange_cycles == 64 + 6);
  // One stage. 128 outputs fill 16 loops of 8 and 256 bytes are far under 1/16 of the tile: the
  // single-input vertex, 3 loops per worker of 2 cycles x 1 received partial + 9.
  CHECK(plan.reduction_stages == 1);
  CHECK(plan.reduction.compute_cycles == 6 * (20 + 3 * (2 * 1 + 9)) + 33);
  CHECK(plan.reduction.sync_cycles == 40);
  CHECK(plan.total_cycles() == 409 + 40 + 351 + 40 + 70);
  CHECK(plan.temporary_bytes_per_tile == 512 + 512 + 256);
}

TEST_CASE("a 64-way input-channel split reduces in two stages of depth 8") {
  const amp_problem p{1, 64, 64, 16, 1, 64};
  const auto plan = ipu::evaluate_amp_partition(mk2_1, p, precision::fp16_32, amp_partition{1, 1, 1, 64});
  // 1024 F32 partials per tile, 16 kept. Stage 1: 128 outputs of depth 8 (7 x 128 x 4 bytes
  // received), F32 out; stage 2: 16 outputs of depth 8 (7 x 16 x 4), F16 out. Both single-input.
  CHECK(plan.reduction_stages == 2);
  CHECK(plan.reduction_bytes_per_tile == 3584 + 448);
  CHECK(plan.reduction.exchange_cycles == (896 + 6) + (112 + 6));
  CHECK(plan.reduction.sync_cycles == 2 * 40);
  CHECK(plan.reduction.compute_cycles == (6 * (20 + 6 * (2 * 7 + 8)) + 33) + (6 * (20 + 1 * (2 * 7 + 7)) + 33));
}

TEST_CASE("supertiles: neighbours receiving the same block halve its exchange") {
  const amp_problem p{1, 64, 16, 16, 1, 64};
  const auto shared = ipu::evaluate_amp_partition(mk2_1, p, precision::fp16_16, amp_partition{1, 2, 1, 1, true});
  const auto unshared = ipu::evaluate_amp_partition(mk2_1, p, precision::fp16_16, amp_partition{1, 2, 1, 1, false});
  // Each tile needs 32 x 16 inputs (1024 B) + the 16 x 16 weights (512 B) and owns 1280 B of 2560 B.
  CHECK(unshared.operand_bytes_per_tile == 256);
  CHECK(unshared.compute.exchange_cycles == 64 + 6);
  CHECK(shared.operand_bytes_per_tile == 0);  // the weight block comes once per pair
  CHECK(shared.compute.exchange_cycles == 0);
}

TEST_CASE("the planner beats or matches every hand-picked partition and respects the budget") {
  const amp_problem p = ipu::to_amp_problem(ipu::matmul_shape{1, 256, 512, 512});
  const auto best = ipu::plan_amp(mk2_1, p, precision::fp16_16);
  CHECK(best.fits_temporary_budget());
  CHECK(best.tiles_used <= 1472);
  CHECK(best.total_cycles() >= best.ideal_cycles);
  CHECK(best.efficiency() > 0.0);
  CHECK(best.efficiency() <= 1.0);
  // The pieces cover all the MACs.
  CHECK(best.tile_work.macs() * best.parts.tiles() * best.parts.serial_passes >= p.macs());
  for (const amp_partition& parts : {amp_partition{1, 16, 8, 8}, amp_partition{1, 256, 4, 1}, amp_partition{1, 1, 32, 32},
                                     amp_partition{1, 8, 8, 16, true}, amp_partition{}}) {
    const auto other = ipu::evaluate_amp_partition(mk2_1, p, precision::fp16_16, parts);
    if (other.fits_temporary_budget()) CHECK(best.total_cycles() <= other.total_cycles());
  }
}

TEST_CASE("efficiency depends on shape: a batch-1 matmul fills the AMP poorly, a 3-channel stem partly") {
  const auto big = ipu::plan_matmul(mk2_1, {1, 1024, 1024, 1024}, precision::fp16_16);
  const auto gemv = ipu::plan_matmul(mk2_1, {1, 1, 1024, 1024}, precision::fp16_16);
  CHECK(gemv.efficiency() < big.efficiency() / 4);
  const ipu::conv_shape conv1{8, 3, 64, 1, {224, 224}, {7, 7}, {2, 2}, {3, 3}, {3, 3}, {}};
  const ipu::conv_shape conv3x3{8, 64, 64, 1, {56, 56}, {3, 3}, {}, {1, 1}, {1, 1}, {}};
  const auto c1 = ipu::plan_conv(mk2_1, conv1, precision::fp16_16);
  const auto c3 = ipu::plan_conv(mk2_1, conv3x3, precision::fp16_16);
  // At weight height 4 the stem's blocks hold 4 channels of 4 kernel rows: 3 of 4 channels and 7 of
  // 8 rows are real, so it cannot beat 3/4 x 7/8 of the AMP.
  CHECK(c1.vertex.weight_height == 4);
  CHECK(c1.efficiency() < 0.75 * 7 / 8);
  CHECK(c1.efficiency() < c3.efficiency());
  // The nx1 vertex reloads weights per kernel position, pays per field row and needs its partials
  // zeroed (PopLibs' estimate): well below the 1x1 vertex.
  CHECK(c3.efficiency() > 0.4);
  // FP32 moves twice the bytes per MAC at a quarter of the rate: more cycles for the same matmul.
  CHECK(ipu::plan_matmul(mk2_1, {1, 1024, 1024, 1024}, precision::fp32).total_cycles() > big.total_cycles() * 2);
}

TEST_CASE("a tight temporary budget makes the planner serialise, like serializedMatMul") {
  const ipu::matmul_shape s{1, 2048, 2048, 2048};
  const auto roomy = ipu::plan_matmul(mk2_1, s, precision::fp16_16);
  const auto tight = ipu::plan_matmul(mk2_1, s, precision::fp16_16, {0, 0.05});
  CHECK(roomy.parts.serial_passes == 1);
  CHECK(tight.parts.serial_passes > 1);
  CHECK(tight.fits_temporary_budget());
  CHECK(tight.temporary_bytes_per_tile <= static_cast<std::uint64_t>(0.05 * 624 * 1024));
  CHECK(tight.total_cycles() > roomy.total_cycles());
  // Nothing fits in 10 bytes: the least-memory plan comes back, flagged.
  const auto hopeless = ipu::plan_matmul(mk2_1, {1, 64, 64, 64}, precision::fp32, {0, 10.0 / (624 * 1024)});
  CHECK_FALSE(hopeless.fits_temporary_budget());
}

TEST_CASE("fewer tiles, more cycles - more IPUs in the sync, more cycles") {
  const ipu::matmul_shape s{1, 512, 512, 512};
  const auto all = ipu::plan_matmul(mk2_1, s, precision::fp16_16);
  const auto quarter = ipu::plan_matmul(mk2_1, s, precision::fp16_16, {368});
  CHECK(quarter.tiles_used <= 368);
  CHECK(quarter.total_cycles() > all.total_cycles());
  const auto pod64 = ipu::plan_matmul(ipu::ipu_model<ipu::mk2, 64>::description(), s, precision::fp16_16);
  CHECK(pod64.compute.sync_cycles == 676);
  CHECK(pod64.total_cycles() > all.total_cycles());
}

TEST_CASE("the planner runs at compile time") {
  constexpr auto plan = ipu::plan_matmul(mk2_1, {4, 128, 256, 256}, precision::fp16_32);
  static_assert(plan.fits_temporary_budget());
  static_assert(plan.total_cycles() >= plan.ideal_cycles);
  static_assert(plan.tiles_used <= 1472);
  CHECK(plan.efficiency() <= 1.0);
}

TEST_CASE("plans reject impossible tile counts and memory proportions") {
  const amp_problem p{1, 64, 64, 64, 1, 64};
  try {
    (void)ipu::plan_amp(mk2_1, p, precision::fp32, {2000});
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::usage);
    CHECK(e.message() == "an op may use at most the 1472 tiles of one IPU, not 2000");
  }
  try {
    (void)ipu::plan_amp(mk2_1, p, precision::fp32, {0, 1.5});
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::options);
    CHECK(e.message() == "available memory proportion 1.500 is not in (0, 1]");
  }
  try {
    (void)ipu::evaluate_amp_partition(mk2_1, p, precision::fp32, amp_partition{1, 64, 64, 1}, {1000});
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.message() == "the partition needs 4096 tiles but 1000 are available");
  }
  CHECK_THROWS_AS((void)ipu::plan_amp(ipu::cpu_device_description(), p, precision::fp32), ipu::error);
}

}  // namespace test_compute_cost
