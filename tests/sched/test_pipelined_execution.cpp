// Pipelined execution: stages, the main program's copies, and the pipeline arithmetic of the
// predictions (bubble (S-1)/(M+S-1), (M+S-1) x slowest stage, more IPUs -> more throughput for a
// balanced compute-bound model), plus a plan made inside a constant expression.
#include <doctest/doctest.h>

#include <vector>

#include "ipu/device/cost.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "plan_test_models.hpp"

namespace test_pipelined_execution {

using plan_test::layer_annotation;

namespace {

const auto mk2x4 = ipu::ipu_model<ipu::mk2, 4>::description();

using plan_test::with_bps;

// A 4-layer MLP, one layer per IPU and stage, planned entirely at compile time.
constexpr ipu::executable constexpr_plan() {
  return ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 16, 8), ipu::ipu_model<ipu::mk2, 4>::description(),
                                         [] {
                                           ipu::plan_options o;
                                           o.batches_per_step = 16;
                                           return o;
                                         }());
}

}  // namespace

static_assert([] {
  const auto e = constexpr_plan();
  if (e.stages.size() != 4 || e.schedule != ipu::schedule_kind::pipelined) return false;
  // It fits: the plan checked every tile; no tile is fuller than its SRAM.
  for (const auto& m : e.memory)
    if (m.worst_tile_bytes > ipu::mk2::sram_bytes_per_tile || m.total_bytes == 0) return false;
  // Throughput: 8 samples per micro-batch, 16 micro-batches through (16 + 3) slowest-stage cycles.
  std::uint64_t slowest = 0;
  for (const auto& s : e.stages) slowest = slowest > s.cycles ? slowest : s.cycles;
  const double seconds = static_cast<double>(19 * slowest) / 1.325e9;
  const double want = 8.0 * 16.0 / seconds;
  const double got = e.predicted.samples_per_second;
  return got > 0.999 * want && got < 1.001 * want && got > 1e6;
}(), "a pipelined plan made in a constant expression fits and predicts its throughput");

TEST_CASE("the constexpr plan is the same plan at run time") {
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 16, 8), mk2x4, with_bps(16));
  CHECK(e == constexpr_plan());
}

TEST_CASE("one stage per IPU: copies between neighbours, host streams at the ends") {
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 64, 8), mk2x4, with_bps(8));
  REQUIRE(e.stages.size() == 4);
  CHECK(e.ipus_per_replica == 4);
  for (std::uint32_t s = 0; s < 4; ++s) {
    CHECK(e.stages[s].ipu == s);
    CHECK(e.stages[s].ops.size() == 2);  // MatMul + Relu
    CHECK(e.stages[s].inputs.size() == 1);
    CHECK(e.stages[s].outputs.size() == 1);
  }
  const auto& main = e.programs[static_cast<std::size_t>(ipu::program_index::main)];
  std::vector<ipu::step> copies;
  for (const auto& s : main.steps)
    if (s.kind == ipu::step_kind::ipu_copy) copies.push_back(s);
  REQUIRE(copies.size() == 3);
  for (std::uint32_t i = 0; i < 3; ++i) {
    CHECK(copies[i].ipu == i);
    CHECK(copies[i].peer == i + 1);
    CHECK(copies[i].stage == i + 1);
    CHECK(copies[i].bytes == 8 * 64 * 4);
    CHECK(copies[i].cycles == ipu::ipu_link_copy_cycles(mk2x4, i, i + 1, 8 * 64 * 4));
  }
  CHECK(main.steps.front().kind == ipu::step_kind::host_to_device);
  CHECK(main.steps.front().ipu == 0);
  REQUIRE(e.streams.size() == 2);
  CHECK(e.streams[0].direction == ipu::stream_direction::to_device);
  CHECK(e.streams[0].ipu == 0);
  CHECK(e.streams[1].direction == ipu::stream_direction::to_host);
  CHECK(e.streams[1].ipu == 3);
  CHECK(e.flow.load == std::vector<std::uint32_t>{0});
  CHECK(e.flow.main == std::vector<std::uint32_t>{5});
  CHECK(e.flow.save.empty());  // inference
  // Each IPU loads its own layer's weights.
  const auto& load = e.programs[0].steps;
  REQUIRE(load.size() == 4);
  for (std::uint32_t i = 0; i < 4; ++i) {
    CHECK(load[i].ipu == i);
    CHECK(load[i].bytes == 64 * 64 * 4);
  }
}

TEST_CASE("bubble = (S - 1) / (M + S - 1) - step = (M + S - 1) x slowest - latency = S x slowest") {
  const auto g = plan_test::pipelined_mlp(4, 64, 8);
  for (std::uint64_t m : {4u, 8u, 16u, 64u}) {
    const auto e = ipu::pipelined_execution{}.plan(g, mk2x4, with_bps(m));
    CHECK(e.predicted.pipeline_bubble == doctest::Approx(3.0 / static_cast<double>(m + 3)));
    std::uint64_t slowest = 0;
    for (const auto& s : e.stages) slowest = std::max(slowest, s.cycles);
    CHECK(e.predicted.cycles_per_step == (m + 3) * slowest);
    CHECK(e.predicted.latency_cycles == 4 * slowest);
    CHECK(e.stages[e.predicted.slowest_stage].cycles == slowest);
    CHECK(e.predicted.samples_per_second ==
          doctest::Approx(8.0 * static_cast<double>(m) / (static_cast<double>((m + 3) * slowest) / 1.325e9)));
  }
}

TEST_CASE("stage cycles add up the stage's steps") {
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 64, 8), mk2x4, with_bps(8));
  std::vector<std::uint64_t> sum(e.stages.size(), 0);
  for (const auto& s : e.programs[5].steps) sum[s.stage] += s.cycles;
  for (std::size_t i = 0; i < sum.size(); ++i) CHECK(e.stages[i].cycles == sum[i]);
  for (std::size_t op = 0; op < e.model.num_ops(); ++op) CHECK(e.op_cycles[op] > 0);
}

TEST_CASE("more IPUs pipelined give more throughput for a balanced compute-bound model") {
  // 16 equal layers of width 512 split evenly over 1, 2, 4 and 8 IPUs.
  const auto device = ipu::ipu_model<ipu::mk2, 8>::description();
  double last = 0;
  for (int ipus : {1, 2, 4, 8}) {
    const auto g = plan_test::mlp(16, 512, 16, [ipus](int i) {
      const std::int64_t s = i * ipus / 16;
      return layer_annotation{s, s, {}, {}};
    });
    const auto e = ipu::pipelined_execution{}.plan(g, device, with_bps(64));
    CHECK(e.stages.size() == static_cast<std::size_t>(ipus));
    MESSAGE(ipus << " IPUs: " << e.predicted.samples_per_second << " samples/s, bubble " << e.predicted.pipeline_bubble);
    CHECK(e.predicted.samples_per_second > last);
    last = e.predicted.samples_per_second;
  }
}

TEST_CASE("explicit stages from blocks - AutoIncrement merges consecutive stages on one IPU") {
  const auto g = plan_test::blocked_mlp({0, 0, 1, 1}, 16, 4);
  // SameAsIpu: stages 0, 0, 1, 1 -> two stages.
  CHECK(ipu::pipelined_execution{}.plan(g, mk2x4, with_bps(4)).stages.size() == 2);
  // AutoIncrement: stages 0, 1, 2, 3 on IPUs 0, 0, 1, 1 -> consecutive stages on one IPU merge.
  const auto inc = ipu::pipelined_execution{{}, ipu::auto_stage::auto_increment}.plan(g, mk2x4, with_bps(4));
  REQUIRE(inc.stages.size() == 2);
  CHECK(inc.stages[0].ops.size() == 4);
  // Explicit stages override the blocks' IPUs.
  const auto ex = ipu::pipelined_execution{{ipu::stage{{"b0"}, 3}, ipu::stage{{"b1", "b2"}, 1}, ipu::stage{{"b3"}, 0}}}.plan(
      plan_test::blocked_mlp({-1, -1, -1, -1}), mk2x4, with_bps(4));
  REQUIRE(ex.stages.size() == 3);
  CHECK(ex.stages[0].ipu == 3);
  CHECK(ex.stages[1].ipu == 1);
  CHECK(ex.stages[2].ipu == 0);
  CHECK(ex.stages[1].ops.size() == 4);
  CHECK(ex.op_ipu[0] == 3);
  CHECK(ex.ipus_per_replica == 4);  // IPU 2 idle
}

TEST_CASE("training pipelines have 2S - 1 stages and save the weights") {
  ipu::plan_options o;
  o.is_inference = false;
  o.gradient_accumulation = 16;
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 64, 8), mk2x4, o);
  CHECK(e.predicted.pipeline_bubble == doctest::Approx(6.0 / 22.0));
  CHECK(e.flow.save == std::vector<std::uint32_t>{7});
  CHECK(e.programs[7].steps.size() == 4);
  CHECK(e.predicted.micro_batches_per_step == 16);
  // Training costs more per sample than inference (backward pass, weight update).
  const auto inf = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 64, 8), mk2x4, with_bps(16));
  CHECK(e.predicted.samples_per_second < inf.predicted.samples_per_second);
}

TEST_CASE("on the host CPU device the plan has the schedule but no costs") {
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 16, 4), ipu::cpu_device_description(4), with_bps(4));
  CHECK(e.stages.size() == 4);
  CHECK(e.predicted.cycles_per_step == 0);
  CHECK(e.memory.empty());
  for (const auto& s : e.programs[5].steps) CHECK(s.cycles == 0);
}

}  // namespace test_pipelined_execution
