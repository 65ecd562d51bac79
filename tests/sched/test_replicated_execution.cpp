// Replication: copies of a plan on their own IPUs; distinct samples scale with replicas / group.
#include <doctest/doctest.h>

#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/replicated_execution.hpp"
#include "ipu/sched/sharded_execution.hpp"
#include "plan_test_models.hpp"

namespace test_replicated_execution {

namespace {
using plan_test::with_bps;
}  // namespace

static_assert(ipu::execution_strategy<ipu::replicated_execution<ipu::pipelined_execution>>);
static_assert(ipu::execution_strategy<ipu::replicated_execution<ipu::replicated_execution<ipu::sharded_execution>>>);

TEST_CASE("replicas multiply throughput and reserve ipus_per_replica x replicas IPUs") {
  const auto g = plan_test::pipelined_mlp(2, 64, 8);
  const auto mk2x8 = ipu::ipu_model<ipu::mk2, 8>::description();
  const auto one = ipu::pipelined_execution{}.plan(g, mk2x8, with_bps(8));
  const auto four = ipu::replicated_execution<ipu::pipelined_execution>{{}, 4}.plan(g, mk2x8, with_bps(8));
  CHECK(four.strategy == "replicated pipelined");
  CHECK(four.replication_factor == 4);
  CHECK(four.ipus_per_replica == 2);
  CHECK(four.ipus_reserved == 8);
  CHECK(four.memory.size() == 2);  // per IPU of one replica; replicas are identical
  CHECK(four.memory == one.memory);
  // Replicas run in step, their syncs spanning all 8 IPUs (3 hops instead of 1): a step takes a
  // little longer, and each replica brings its own micro-batches.
  CHECK(four.predicted.cycles_per_step > one.predicted.cycles_per_step);
  CHECK(four.predicted.cycles_per_step < 2 * one.predicted.cycles_per_step);
  CHECK(four.predicted.samples_per_second == doctest::Approx(4.0 * 8 * 8 / four.predicted.seconds_per_step));
  CHECK(four.predicted.samples_per_second > 2 * one.predicted.samples_per_second);
  // Groups of 2 replicas read the same data: 2 distinct streams of samples.
  const auto grouped = ipu::replicated_execution<ipu::pipelined_execution>{{}, 4, 2}.plan(g, mk2x8, with_bps(8));
  CHECK(grouped.input_group_size == 2);
  CHECK(grouped.predicted.samples_per_second == doctest::Approx(four.predicted.samples_per_second / 2));
  // Setting the options instead is the same plan.
  auto o = with_bps(8);
  o.replication_factor = 4;
  auto same = ipu::pipelined_execution{}.plan(g, mk2x8, o);
  same.strategy = four.strategy;
  CHECK(same == four);
}

TEST_CASE("replicas must fit the device, and the count be a power of two unless auto-rounded") {
  const auto g = plan_test::pipelined_mlp(2, 16, 4);
  const auto mk2x4 = ipu::ipu_model<ipu::mk2, 4>::description();
  const auto e = plan_test::error_of([&] {
    (void)ipu::replicated_execution<ipu::pipelined_execution>{{}, 4}.plan(g, mk2x4, with_bps(4));
  });
  CHECK(e.category() == ipu::error_category::schedule);
  CHECK(e.message().find("4 replicas need 8 IPUs") != std::string::npos);
  const auto odd = plan_test::error_of([&] {
    (void)ipu::replicated_execution<ipu::sharded_execution>{{}, 3}.plan(plan_test::mlp(2, 16, 4), mk2x4, with_bps(4));
  });
  CHECK(odd.message().find("not a power of two") != std::string::npos);
  auto o = with_bps(4);
  o.auto_round_num_ipus = true;
  const auto rounded = ipu::replicated_execution<ipu::sharded_execution>{{}, 3}.plan(plan_test::mlp(2, 16, 4), mk2x4, o);
  CHECK(rounded.ipus_reserved == 4);
  // The replication factor set twice, differently, is refused.
  auto twice = with_bps(4);
  twice.replication_factor = 2;
  const auto conflict = plan_test::error_of([&] {
    (void)ipu::replicated_execution<ipu::sharded_execution>{{}, 4}.plan(plan_test::mlp(2, 16, 4), mk2x4, twice);
  });
  CHECK(conflict.message().find("the options ask for 2 replicas but the strategy for 4") != std::string::npos);
}

TEST_CASE("training replicas all-reduce their gradients over the IPU-Links") {
  const auto g = plan_test::pipelined_mlp(2, 256, 8);
  const auto mk2x4 = ipu::ipu_model<ipu::mk2, 4>::description();
  ipu::plan_options o;
  o.is_inference = false;
  o.gradient_accumulation = 8;
  const auto one = ipu::pipelined_execution{}.plan(g, mk2x4, o);
  const auto two = ipu::replicated_execution<ipu::pipelined_execution>{{}, 2}.plan(g, mk2x4, o);
  CHECK(two.predicted.cycles_per_step > one.predicted.cycles_per_step);  // the all-reduce
  CHECK(two.predicted.samples_per_second > one.predicted.samples_per_second);
}

}  // namespace test_replicated_execution
