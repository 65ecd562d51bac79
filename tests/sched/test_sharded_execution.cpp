// Sharded execution: one IPU at a time in model order, copies at each hand-over, no overlap.
#include <doctest/doctest.h>

#include "ipu/device/cost.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/sharded_execution.hpp"
#include "plan_test_models.hpp"

namespace test_sharded_execution {

using plan_test::layer_annotation;

namespace {
const auto mk2x4 = ipu::ipu_model<ipu::mk2, 4>::description();
using plan_test::with_bps;
}  // namespace

TEST_CASE("shards run one after another: a step is M x the sum of the stages") {
  const auto g = plan_test::pipelined_mlp(4, 64, 8);
  const auto e = ipu::sharded_execution{}.plan(g, mk2x4, with_bps(8));
  CHECK(e.schedule == ipu::schedule_kind::sequential);
  CHECK(e.strategy == "sharded");
  REQUIRE(e.stages.size() == 4);
  std::uint64_t sum = 0;
  for (const auto& s : e.stages) sum += s.cycles;
  CHECK(e.predicted.latency_cycles == sum);
  CHECK(e.predicted.cycles_per_step == 8 * sum);
  CHECK(e.predicted.pipeline_bubble == 0);
  // The same split pipelined overlaps the stages: at least as fast, faster here.
  const auto p = ipu::pipelined_execution{}.plan(g, mk2x4, with_bps(8));
  CHECK(p.predicted.samples_per_second > e.predicted.samples_per_second);
}

TEST_CASE("ops interleaved between IPUs run in as few hand-overs as the data flow allows") {
  // Two independent branches, one per IPU, built alternately: sharding groups each IPU's ops.
  ipu::builder b("branches");
  auto x = b.add_input_tensor({ipu::data_type::F32, {4, 8}}, "x");
  auto y = x, z = x;
  for (int i = 0; i < 3; ++i) {
    {
      auto s = b.scope().ipu(0);
      y = b.relu(y);
    }
    {
      auto s = b.scope().ipu(1);
      z = b.neg(z);
    }
  }
  ipu::tensor_id sum;
  {
    auto s = b.scope().ipu(1);
    sum = b.add(y, z, "sum");
  }
  b.add_output(sum);
  const auto g = std::move(b).build();
  const auto e = ipu::sharded_execution{}.plan(g, mk2x4, with_bps(1));
  REQUIRE(e.stages.size() == 2);
  CHECK(e.stages[0].ipu == 0);
  CHECK(e.stages[0].ops.size() == 3);
  CHECK(e.stages[1].ops.size() == 4);
  // x is streamed to IPU 0, then copied to IPU 1; y is copied to IPU 1 for the sum.
  int copies = 0, h2d = 0;
  for (const auto& s : e.programs[5].steps) {
    copies += s.kind == ipu::step_kind::ipu_copy;
    h2d += s.kind == ipu::step_kind::host_to_device;
  }
  CHECK(copies == 2);
  CHECK(h2d == 1);
}

TEST_CASE("without annotations everything runs on IPU 0") {
  const auto e = ipu::sharded_execution{}.plan(plan_test::mlp(3, 16, 4), mk2x4, with_bps(2));
  REQUIRE(e.stages.size() == 1);
  CHECK(e.ipus_per_replica == 1);
  CHECK(e.ipus_reserved == 1);
  CHECK(e.memory.size() == 1);
  for (auto ipu : e.op_ipu) CHECK(ipu == 0);
}

}  // namespace test_sharded_execution
