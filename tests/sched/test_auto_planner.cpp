// The automatic planner: balanced contiguous stages for unannotated models, within memory.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string_view>

#include "ipu/sched/auto_planner.hpp"
#include "ipu/sched/phased_execution.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/sharded_execution.hpp"
#include "plan_test_models.hpp"

namespace test_auto_planner {

namespace {

const auto mk2x4 = ipu::ipu_model<ipu::mk2, 4>::description();

using plan_test::with_bps;

struct small_ipu : ipu::mk2 {
  static constexpr std::string_view name = "small";
  static constexpr std::uint32_t tiles_per_ipu = 64;
  static constexpr std::uint64_t sram_bytes_per_tile = 64 * 1024;
};

/// Predicted time of ops [b, e) of the cut problem as stage j on IPU j: the same figures the
/// planner uses (ops, host streams, the copy of what crosses the stage's first cut).
std::uint64_t stage_time(const ipu::detail::sched::cut_problem& cp, const ipu::device_description& d, std::size_t j,
                         std::size_t b, std::size_t e) {
  std::uint64_t c = 0;
  for (auto i = b; i < e; ++i) c += cp.cycles[i] + cp.host_cycles[i];
  if (j > 0 && cp.cross_bytes[b] > 0)
    c += ipu::ipu_link_copy_cycles(d, static_cast<std::uint32_t>(j - 1), static_cast<std::uint32_t>(j), cp.cross_bytes[b]);
  return c;
}

/// Layers of growing width: the last layers dominate.
ipu::graph growing_mlp() {
  ipu::builder b("growing");
  auto x = b.add_input_tensor({ipu::data_type::F32, {16, 64}}, "x");
  std::int64_t w = 64;
  for (int i = 0; i < 8; ++i) {
    const std::int64_t next = i < 4 ? 64 : 512;
    auto wt = b.add_initialized_input(
        ipu::make_constant<float>({w, next}, std::vector<float>(static_cast<std::size_t>(w * next), 0.1f)));
    x = b.relu(b.matmul(x, wt));
    w = next;
  }
  b.add_output(x);
  return std::move(b).build();
}

}  // namespace

TEST_CASE("the proposed cut minimises the slowest stage over every contiguous cut") {
  const auto g = plan_test::mlp(8, 256, 16);  // 16 ops
  const auto p = ipu::propose_stages(g, mk2x4, 4);
  REQUIRE(p.stage_begin.size() == 4);
  CHECK(p.stage_begin[0] == 0);
  CHECK(std::is_sorted(p.stage_begin.begin(), p.stage_begin.end()));
  // Brute force over all 455 ways to cut 16 ops into 4 non-empty stages, with the same figures: the
  // ops' costs, host streams where graph inputs are read and outputs produced, and the copy of what
  // crosses each cut from the previous stage's IPU.
  const auto cp = ipu::detail::sched::make_cut_problem(g, p.order, mk2x4, {});
  const std::size_t n = p.order.size();
  std::uint64_t best = UINT64_MAX;
  for (std::size_t a = 1; a < n; ++a)
    for (std::size_t b = a + 1; b < n; ++b)
      for (std::size_t c = b + 1; c < n; ++c) {
        const auto worst = std::max({stage_time(cp, mk2x4, 0, 0, a), stage_time(cp, mk2x4, 1, a, b),
                                     stage_time(cp, mk2x4, 2, b, c), stage_time(cp, mk2x4, 3, c, n)});
        best = std::min(best, worst);
      }
  CHECK(*std::max_element(p.stage_cycles.begin(), p.stage_cycles.end()) == best);
  // Every op annotated with its stage and IPU; the pipelined plan follows the proposal.
  for (std::size_t j = 0; j < 4; ++j) {
    const auto end = j + 1 < 4 ? p.stage_begin[j + 1] : p.order.size();
    for (auto i = p.stage_begin[j]; i < end; ++i) {
      CHECK(p.annotated.op(p.order[i]).where.ipu == static_cast<std::int64_t>(j));
      CHECK(p.annotated.op(p.order[i]).where.stage == static_cast<std::int64_t>(j));
    }
  }
  const auto e = ipu::pipelined_execution{}.plan(p.annotated, mk2x4, with_bps(16));
  CHECK(e.stages.size() == 4);
}

TEST_CASE("heavy layers get stages of their own: the slowest stage beats an equal op-count split") {
  const auto g = growing_mlp();
  const auto p = ipu::propose_stages(g, mk2x4, 4);
  const auto slowest = *std::max_element(p.stage_cycles.begin(), p.stage_cycles.end());
  // Equal op counts: 4 ops (2 layers) per stage.
  const auto cp = ipu::detail::sched::make_cut_problem(g, p.order, mk2x4, {});
  std::uint64_t naive = 0;
  for (std::size_t j = 0; j < 4; ++j) naive = std::max(naive, stage_time(cp, mk2x4, j, 4 * j, 4 * j + 4));
  CHECK(slowest < naive);
}

TEST_CASE("a model too big for one IPU fits when the planner cuts it over four") {
  // 6 MiB of weights; 4 MiB per IPU, of which a 512 x 512 matmul's temporaries take 1.2 MiB: two
  // layers per IPU at most.
  const auto g = plan_test::mlp(6, 512, 4);
  const auto small4 = ipu::ipu_model<small_ipu, 4>::description();
  const auto small1 = ipu::ipu_model<small_ipu, 1>::description();
  CHECK_THROWS_AS((void)ipu::sharded_execution{}.plan(g, small1, {}), ipu::error);
  const auto p = ipu::propose_stages(g, small4, 4);
  for (auto b : p.stage_bytes) CHECK(b <= small_ipu::tiles_per_ipu * small_ipu::sram_bytes_per_tile);
  const auto e = ipu::sharded_execution{}.plan(p.annotated, small4, {});
  CHECK(e.ipus_per_replica == 4);
  CHECK(ipu::pipelined_execution{}.plan(p.annotated, small4, with_bps(4)).stages.size() == 4);
  // Over two IPUs no cut fits the estimate: the planner still returns its most balanced cut, and
  // the plan's memory check says what does not fit.
  const auto small2 = ipu::ipu_model<small_ipu, 2>::description();
  const auto two = ipu::propose_stages(g, small2, 2);
  CHECK(plan_test::error_of([&] { (void)ipu::sharded_execution{}.plan(two.annotated, small2, {}); }).category() ==
        ipu::error_category::memory);
}

TEST_CASE("phases: doubled until every phase fits, on alternating IPUs for parallel execution") {
  const auto g = plan_test::mlp(6, 512, 4);
  const auto small2 = ipu::ipu_model<small_ipu, 2>::description();
  const auto p = ipu::propose_phases(g, small2, 2, true);
  const auto phases = p.stage_begin.size();
  CHECK(phases >= 2);
  for (const auto& op : p.annotated.ops()) CHECK(*op.where.ipu == *op.where.phase % 2);
  ipu::plan_options o = with_bps(1);
  const auto e = ipu::parallel_phased_execution{{}, ipu::liveness::off_chip_after_fwd}.plan(p.annotated, small2, o);
  CHECK(e.num_phases == phases);
  CHECK_THROWS_AS((void)ipu::propose_phases(g, small2, 1, true), ipu::error);  // parallel needs 2 groups
}

TEST_CASE("phases: min_phases sets where the doubling starts") {
  const auto g = plan_test::mlp(8, 8, 4);  // 16 small ops: every phase fits at once
  ipu::auto_plan_options ao;
  CHECK(ipu::propose_phases(g, mk2x4, 2, false, {}, ao).stage_begin.size() == 2);
  ao.min_phases = 5;
  const auto p = ipu::propose_phases(g, mk2x4, 2, false, {}, ao);
  CHECK(p.stage_begin.size() == 5);
  for (const auto& op : p.annotated.ops()) CHECK(*op.where.ipu == *op.where.phase % 2);
  ao.min_phases = 100;  // more than the ops: one op per phase
  CHECK(ipu::propose_phases(g, mk2x4, 2, false, {}, ao).stage_begin.size() == g.num_ops());
}

TEST_CASE("has_placement_annotations sees any of IPU, stage, phase and block") {
  CHECK_FALSE(ipu::has_placement_annotations(plan_test::mlp(2, 8, 4)));
  CHECK(ipu::has_placement_annotations(plan_test::pipelined_mlp(2, 8, 4)));
  auto g = plan_test::mlp(2, 8, 4);
  g.op(1).where.block = "b";
  CHECK(ipu::has_placement_annotations(g));
}

TEST_CASE("the planner refuses annotated models and more stages than ops or IPUs") {
  CHECK_THROWS_AS((void)ipu::propose_stages(plan_test::pipelined_mlp(2, 8, 4), mk2x4, 2), ipu::error);
  const auto tiny = plan_test::mlp(1, 8, 4);  // 2 ops
  const auto e = plan_test::error_of([&] { (void)ipu::propose_stages(tiny, mk2x4, 4); });
  CHECK(e.category() == ipu::error_category::schedule);
  CHECK(e.message().find("fewer than the 4 stages") != std::string::npos);
  CHECK_THROWS_AS((void)ipu::propose_stages(plan_test::mlp(8, 8, 4), mk2x4, 8), ipu::error);  // 8 > 4 IPUs
}

// The planner runs in constant expressions too.
static_assert([] {
  const auto p = ipu::propose_stages(plan_test::mlp(4, 16, 4), ipu::ipu_model<ipu::mk2, 2>::description(), 2);
  return p.stage_begin.size() == 2 && p.stage_begin[0] == 0 && p.stage_begin[1] > 0 && p.stage_begin[1] < 8;
}());

TEST_CASE("training's estimate: extra copies of each variable and the outputs kept for the backward") {
  const auto g = plan_test::mlp(4, 16, 8);
  const auto plain = ipu::propose_stages(g, mk2x4, 2);
  ipu::auto_plan_options ao;
  ao.variable_copies = 3;     // the weight, its accumulator and one state copy
  ao.kept_output_copies = 1;  // every MatMul and Relu output, [8, 16] F32
  const auto training = ipu::propose_stages(g, mk2x4, 2, {}, ao);
  REQUIRE(training.stage_begin == plain.stage_begin);  // equal layers: the same cut
  const auto total = [](const std::vector<std::uint64_t>& v) { return std::accumulate(v.begin(), v.end(), std::uint64_t{0}); };
  CHECK(total(training.stage_bytes) - total(plain.stage_bytes) == 2 * 4 * 16 * 16 * 4 + 8 * 8 * 16 * 4);
}

}  // namespace test_auto_planner
