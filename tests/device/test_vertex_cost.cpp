#include <doctest/doctest.h>

#include "ipu/device/device_model.hpp"
#include "ipu/device/vertex_cost.hpp"

// Each expected figure is worked by hand from the PopLibs estimator the function follows
// (lib/poplin/PerformanceEstimation.hpp, ConvReducePlan.cpp); docs/cost-model.md names them.
namespace test_vertex_cost {

using ipu::amp_code_path;
using ipu::precision;

namespace {
constexpr auto mk2 = ipu::describe_architecture<ipu::mk2>();
constexpr amp_code_path half16 = ipu::amp_code_path_for(precision::fp16_16, 16);  // common path, retains 7
constexpr amp_code_path float8 = ipu::amp_code_path_for(precision::fp32, 8);
constexpr amp_code_path half8 = ipu::amp_code_path_for(precision::fp16_16, 8);  // Mk1 FP16.16: its own path
}  // namespace

TEST_CASE("a supervisor waits for its slowest worker, and at least the fastest plus a tag") {
  static_assert(ipu::supervisor_worker_cycles(6, 34, 25, 14) == 6 * 34);
  static_assert(ipu::supervisor_worker_cycles(6, 30, 30, 14) == 6 * 30 + 14);  // balanced: the tag shows
  CHECK(ipu::supervisor_worker_cycles(6, 40, 0, 14) == 240);                    // an idle worker: 0 + 14
  CHECK(ipu::supervisor_worker_cycles(6, 2, 0, 14) == 14);
}

TEST_CASE("1x1 worker runs follow PopLibs' cases by row count and code path") {
  static_assert(half16.common_path() && half16.retention_saving() == 7);
  static_assert(float8.common_path() && float8.retention_saving() == 0);
  static_assert(!half8.common_path() && half8.retention_saving() == 0);
  CHECK(ipu::amp_1x1_worker_cycles(half16, 0, true, 4) == 0);          // no work item
  CHECK(ipu::amp_1x1_worker_cycles(half16, 1, true, 4) == 31 + 1 - 7);
  CHECK(ipu::amp_1x1_worker_cycles(half16, 2, false, 4) == 40 + 2 - 7);
  CHECK(ipu::amp_1x1_worker_cycles(half16, 5, true, 4) == 37 - 12 + 5 * 4 - 7);
  CHECK(ipu::amp_1x1_worker_cycles(half16, 5, false, 4) == 38 - 12 + 5 * 4 - 7);
  // Float inputs zero in the worker: 2 + 4 per row (float partials, 8 units).
  CHECK(ipu::amp_1x1_worker_cycles(float8, 1, true, 4) == 47 + 2 + 4);
  CHECK(ipu::amp_1x1_worker_cycles(float8, 4, false, 4) == 46 - 24 + 4 * 4);
  CHECK(ipu::amp_1x1_worker_cycles(float8, 4, true, 4) == 46 - 24 + (2 + 4 * 4) + 4 * 4);
  // Half partials with 8 units: 2 zeroing cycles per row.
  CHECK(ipu::amp_1x1_worker_cycles(half8, 3, true, 2) == 41 - 12 + (2 + 2 * 3) + 3 * 2);
}

TEST_CASE("the 1x1 vertex: zeroing first input block, later blocks, retention and the tag") {
  // 12 rows, 2 per worker: zeroing run max(6 x 34, 6 x 34 + 14) = 218, later 6 x 35 + 14 = 224.
  constexpr std::uint64_t one = 50 + 6 * 7 + 13 + 11 + (18 + 7 + 32 + 218);
  static_assert(ipu::amp_1x1_vertex_cycles(mk2, half16, 1, 1, 1, 12, 4, 32) == one);
  CHECK(one == 391);
  // A second input block adds 15 + (19 + 6 + 32 + 224) and 6 x 3 retained cycles.
  CHECK(ipu::amp_1x1_vertex_cycles(mk2, half16, 1, 2, 1, 12, 4, 32) == one + 15 + (19 + 6 + 32 + 224) + 6 * 3);
  CHECK(ipu::amp_1x1_vertex_cycles(mk2, half16, 1, 1, 1, 0, 4, 32) == 0);
}

TEST_CASE("nx1 work-list items: one per field row a worker touches") {
  CHECK(ipu::amp_nx1_item_cycles(half16, 0, 4) == 3 + 17 - 9);
  CHECK(ipu::amp_nx1_item_cycles(half16, 1, 4) == 3 + 29 - 9);
  CHECK(ipu::amp_nx1_item_cycles(half16, 2, 4) == 3 + 33 + 1 - 9);  // half partials, 16 units: one more stride
  CHECK(ipu::amp_nx1_item_cycles(half16, 10, 4) == 3 + 34 - 12 + 40 - 9);
  CHECK(ipu::amp_nx1_item_cycles(float8, 2, 4) == 3 + 44 - 9);
  // Elements 5..24 of rows of 10: pieces of 5, 10 and 5; 17 + 1 (half partials) to start.
  CHECK(ipu::amp_nx1_worker_cycles(half16, 5, 25, 10, 4) == 18 + 2 * (3 + 34 - 12 + 20 - 9) + (3 + 34 - 12 + 40 - 9));
  CHECK(ipu::amp_nx1_worker_cycles(half16, 5, 25, 0, 4) == 18 + (3 + 34 - 12 + 80 - 9));  // one run
  CHECK(ipu::amp_nx1_worker_cycles(half16, 7, 7, 10, 4) == 18);                          // no items
}

TEST_CASE("the nx1 vertex loops over kernel rows and columns, and needs its partials zeroed") {
  // 3x3 kernel, 12 rows in one run: each worker one item of 2 (28 cycles) + 18 = 46;
  // per position max(6 x 46, 6 x 46 + 9) = 285. Supervisor per position 12 + 32 + 15 + 3 = 62,
  // per kernel row 14; fixed 109 + 6 x 9 + 6 x 10; zeroing loop 17 + 1 + 1; loops 16 + 14 + 14.
  constexpr std::uint64_t inner = 3 * (14 + 3 * 62) + 9 * 285;
  static_assert(ipu::amp_nx1_vertex_cycles(mk2, half16, 1, 1, 1, {3, 3}, 12, 0, 4, 32) ==
                (109 + 54 + 60) + 19 + (16 + 14 + 14 + inner));
  CHECK(ipu::amp_nx1_vertex_cycles(mk2, half16, 1, 1, 1, {3, 3}, 12, 0, 4, 32) == 3451);
  // Zeroing: 100 rows x 16 channels over 6 workers = 267 each, 2 per cycle -> 134 + 5.
  CHECK(ipu::amp_zero_vertex_cycles(mk2, 1, 1, 100, 16) == 6 * (134 + 5));
}

TEST_CASE("nx1 weight heights: more load cycles per block, fewer kernel rows") {
  static_assert(ipu::amp_nx1_weight_height_cycles(1) == 15);
  static_assert(ipu::amp_nx1_weight_height_cycles(2) == 46);
  static_assert(ipu::amp_nx1_weight_height_cycles(4) == 60);
  CHECK(ipu::amp_nx1_weight_height_cycles(3) == 60);  // PopLibs' 20 per row otherwise
  // The 3x3 case above at height 4 (one outer row of 3 positions) and 64-cycle loads: per position
  // 12 + 64 + 60 + 3 = 139, workers 285 as before.
  constexpr std::uint64_t inner = 1 * (14 + 3 * 139) + 3 * 285;
  static_assert(ipu::amp_nx1_vertex_cycles(mk2, half16, 1, 1, 1, {1, 3}, 12, 0, 4, 64, 4) ==
                (109 + 54 + 60) + 19 + (16 + 14 + 14 + inner));
  CHECK(ipu::amp_nx1_vertex_cycles(mk2, half16, 1, 1, 1, {1, 3}, 12, 0, 4, 64, 4) == 1572);
}

TEST_CASE("SLIC: items, workers, weight loads and the vertex") {
  constexpr ipu::slic_config one4{1, 4, 4}, one4x2{1, 4, 2}, eight1{8, 1, 4};
  // 2 elements at stride 1 on 4 chains, half partials: zeroing 10 + 1 + (13 + 2), later 10 + (17 + 2).
  static_assert(ipu::slic_item_cycles(one4, false, 2, true, 1) == 26);
  CHECK(ipu::slic_item_cycles(one4, false, 2, false, 1) == 29);
  // 2 chains with half partials (PopLibs' half8Conv): 9 a row, two passes over the inputs.
  CHECK(ipu::slic_item_cycles(one4x2, false, 2, true, 1) == 9 + 1 + 2 * 15);
  CHECK(ipu::slic_item_cycles(one4x2, false, 2, false, 1) == 9 + 2 * 19);
  // Float partials: 3 more an item, one fewer a pass.
  CHECK(ipu::slic_item_cycles(one4x2, true, 2, true, 1) == 10 + 1 + 3 + 2 * 14);
  // From 5 elements a loop: 15 + (n - 5); stride 2: 10 + (3 or 5) below 3, else 15 + 2 (n - 3).
  CHECK(ipu::slic_item_cycles(one4, false, 20, false, 1) == 10 + 30);
  CHECK(ipu::slic_item_cycles(one4, false, 20, false, 2) == 10 + 15 + 34);
  CHECK(ipu::slic_item_cycles(one4, false, 1, false, 2) == 10 + 13);
  // Workers: a preamble of 17 (4 more above 4 groups a block), then one item per field row touched:
  // elements 5..24 of rows of 10 are runs of 5, 10, 5.
  CHECK(ipu::slic_worker_cycles(one4, false, 0, 2, 0, true, 1) == 17 + 26);
  CHECK(ipu::slic_worker_cycles(eight1, false, 0, 0, 0, true, 1) == 21);
  CHECK(ipu::slic_worker_cycles(one4, false, 5, 25, 10, false, 1) == 17 + 2 * (10 + 15) + (10 + 20));
  // Weight loads: 4 channels directly, 18 + 16; smaller groups rearranged by the workers.
  static_assert(ipu::slic_weight_load_cycles(mk2, one4) == 34);
  CHECK(ipu::slic_weight_load_cycles(mk2, {2, 2, 4}) == 9 + 6 + 6 * 12 + 6 + 16);
  CHECK(ipu::slic_weight_load_cycles(mk2, eight1) == 9 + 6 + 6 * 11 + 6 + 16);
  // The vertex, 1 group, 3 sub-kernels (a 3x3 kernel), 12 elements (2 per worker): workers
  // 6 x (17 + 26) = 258 zeroing, 6 x (17 + 29) = 276 later; sub-kernel body 34 + 3 + 2 + 1 + 6 + 1 +
  // 6 + 1 = 54, 3 x 54 + 13; group block 15 + 1; preamble 28.
  static_assert(ipu::slic_vertex_cycles(mk2, one4, false, 1, 3, 12, 0, 1) == 28 + 16 + 175 + 258 + 2 * 276);
  CHECK(ipu::slic_vertex_cycles(mk2, one4, false, 1, 3, 12, 0, 1) == 1029);
  // half8: workers 6 x (19 + 40) + the merge 2 + 2 x 12 = 380, later 6 x (19 + 47) = 396; body 50.
  CHECK(ipu::slic_vertex_cycles(mk2, one4x2, false, 1, 3, 12, 0, 1) == 25 + 13 + (150 + 13) + 380 + 2 * 396);
  // Float partials on 2 chains: 6 x (17 + 42), 6 x (17 + 49).
  CHECK(ipu::slic_vertex_cycles(mk2, one4x2, true, 1, 3, 12, 0, 1) == 28 + 16 + 175 + 354 + 2 * 396);
  // 16 groups in blocks of 8: 2 blocks, 2 strides of 4 groups each: stride body 103 + 21, sub-kernel
  // body 2 x 124 + 7 + 15 = 270, group body 15 + 8; later worker runs 6 x (21 + 29) per stride.
  CHECK(ipu::slic_vertex_cycles(mk2, eight1, false, 16, 3, 12, 0, 1) ==
        28 + (2 * 23 + 7) + (3 * 270 + 13) + 2 * 6 * (21 + 26) + 2 * 2 * (2 * 6 * (21 + 29)));
  CHECK(ipu::slic_vertex_cycles(mk2, one4, false, 0, 3, 12, 0, 1) == 0);
}

TEST_CASE("reduce vertices: multi-input, single-input and the tail") {
  // Multi-input, F32 -> F32, 100 outputs of 3: 25 loops of 4, 5 per worker (remainder rounds up),
  // 4 / 2 + 1 = 3 cycles per partial, 7 per loop, 32 per worker.
  static_assert(ipu::reduce_vertex_cycles(mk2, precision::fp32, 100, 3) == 6 * (32 + 5 * (3 * 3 + 7)));
  CHECK(ipu::reduce_vertex_cycles(mk2, precision::fp16_32, 100, 3) == 6 * (32 + 5 * (3 * 3 + 6)));
  // F16 partials: 100 = 12 loops of 8 + one for the 4-bit: 13 loops, 2 per worker, + 2 x 2 + 11 for
  // the shorter remainder loop.
  CHECK(ipu::reduce_vertex_cycles(mk2, precision::fp16_16, 100, 2) == 6 * (32 + 4 + 11 + 2 * (3 * 2 + 8)));
  // 10 F32 outputs: 2 loops + 1 for the 2-bit; none per worker, the remainder path only.
  CHECK(ipu::reduce_vertex_cycles(mk2, true, true, 10, 3) == 6 * (32 + 6 + 13));
  // Single-input: depth - 1 partials read, 2 cycles each per loop of 4, 8 per loop, 20 + 33.
  CHECK(ipu::reduce_vertex_cycles(mk2, true, true, 100, 3, true) == 6 * (20 + 5 * (2 * 2 + 8)) + 33);
  CHECK(ipu::reduce_vertex_cycles(mk2, precision::fp16_16, 100, 1) == 0);  // nothing to add
  CHECK(ipu::reduce_vertex_cycles(mk2, precision::fp16_16, 0, 4) == 0);
}

TEST_CASE("multi-stage reduction plans: 2 stages from depth 16, 3 from 125") {
  static_assert(ipu::multi_stage_reduce_plan(15).count == 0);
  static_assert(ipu::multi_stage_reduce_plan(16) == ipu::reduce_stage_plan{{4, 0}, 1});  // 4 + 4 < 5 + 3.2
  CHECK(ipu::multi_stage_reduce_plan(64) == ipu::reduce_stage_plan{{8, 0}, 1});
  // 200: 200^(2/3) -> 34 or 35, then 5 or 6: 35 + 6 need 200/35 + 35/6 + 6 = 17.548 messages, 34 + 6 17.549.
  CHECK(ipu::multi_stage_reduce_plan(200) == ipu::reduce_stage_plan{{35, 6}, 2});
  // 125 = 5^3 exactly: the plan starts from 25 (the model's root is exact).
  CHECK(ipu::multi_stage_reduce_plan(125).depths[0] == 25);
  // 10 outputs kept of 64 partials: 80 outputs of depth 8, then 10 of depth 8.
  const auto s = ipu::reduce_stages(10, 64);
  CHECK(s[0] == ipu::reduce_stage{80, 8});
  CHECK(s[1] == ipu::reduce_stage{10, 8});
  CHECK(s[2] == ipu::reduce_stage{});
  CHECK(ipu::reduce_stages(10, 2)[0] == ipu::reduce_stage{10, 2});
  CHECK(ipu::reduce_stages(10, 1)[0] == ipu::reduce_stage{});
}

}  // namespace test_vertex_cost
