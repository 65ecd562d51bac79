#include <doctest/doctest.h>

#include "ipu/device/cost.hpp"

namespace test_cost {

// The umbrella header gives the whole cost model, usable in constant expressions.
namespace {
using ipu::precision;
constexpr auto pod4 = ipu::ipu_model<ipu::mk2, 4>::description();

/// A two-layer MLP pipelined over IPUs 0 and 1 for 16 micro-batches, at compile time: each stage is
/// one matmul superstep sequence plus the copy of its activations to the next IPU.
constexpr std::uint64_t two_stage_mlp_cycles(std::uint64_t micro_batch) {
  const auto l1 = ipu::plan_matmul(pod4, {1, micro_batch, 1024, 4096}, precision::fp16_16);
  const auto l2 = ipu::plan_matmul(pod4, {1, micro_batch, 4096, 1024}, precision::fp16_16);
  const auto copy = ipu::ipu_link_copy_cycles(pod4, 0, 1, micro_batch * 4096 * 2);
  const auto stage1 = l1.total_cycles() + copy;
  const auto stage2 = l2.total_cycles();
  return ipu::pipeline_cycles(stage1 > stage2 ? stage1 : stage2, 2, 16);
}
}  // namespace

static_assert(ipu::peak_flops(pod4.arch, precision::fp16_16) > 249.6e12 &&
              ipu::peak_flops(pod4.arch, precision::fp16_16) < 249.7e12);
static_assert(ipu::sync_cycles(pod4) == 80);
static_assert(ipu::exchange_cycles(pod4.arch, 1000) == 256);
static_assert(ipu::ipu_link_route(pod4, 0, 1).links == 4);
static_assert(ipu::pipeline_bubble_fraction(4, 16) == 3.0 / 19.0);
static_assert(two_stage_mlp_cycles(64) > 0);
static_assert(two_stage_mlp_cycles(128) > two_stage_mlp_cycles(64), "more work per micro-batch costs more");

TEST_CASE("the cost model composes at compile time") {
  constexpr auto cycles = two_stage_mlp_cycles(64);
  constexpr double seconds = ipu::cycles_to_seconds(pod4.arch, cycles);
  // 17 pipeline steps of the slowest stage; the stage is at least its ideal AMP time.
  constexpr auto ideal_stage = ipu::ideal_amp_cycles(pod4.arch, precision::fp16_16, 64ull * 1024 * 4096, 1472);
  static_assert(cycles >= 17 * ideal_stage);
  CHECK(seconds > 0);
  CHECK(seconds == doctest::Approx(static_cast<double>(cycles) / 1.325e9));
}

}  // namespace test_cost
