// Every annotation rule of the reference (PopART's and PopTorch's) has its own ipu::error
// (category schedule) naming the op or block and the rule.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ipu/device/device_model.hpp"
#include "ipu/sched/phased_execution.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/sharded_execution.hpp"
#include "plan_test_models.hpp"

namespace test_annotation_rules {

using doctest::Contains;
using plan_test::blocked_mlp;
using plan_test::error_of;
using plan_test::layer_annotation;
using plan_test::mlp;

namespace {

const auto mk2x4 = ipu::ipu_model<ipu::mk2, 4>::description();

ipu::plan_options deep(std::uint64_t bps = 16) {
  ipu::plan_options o;
  o.batches_per_step = bps;
  return o;
}

void check_schedule_error(const ipu::error& e, const std::string& rule, const std::string& who) {
  CHECK(e.category() == ipu::error_category::schedule);
  CHECK_MESSAGE(e.message().find(rule) != std::string::npos, e.what());
  CHECK_MESSAGE(std::string(e.what()).find(who) != std::string::npos, e.what());
  CHECK_FALSE(e.hint().empty());
}

}  // namespace

TEST_CASE("all ops annotated or none: an op without an IPU among annotated ones") {
  const auto g = mlp(2, 8, 4, [](int i) { return i == 0 ? layer_annotation{0, 0, {}, {}} : layer_annotation{}; });
  const auto e = error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, deep()); });
  check_schedule_error(e, "all ops annotated or none", "MatMul 'mm1'");
}

TEST_CASE("all ops annotated or none: pipeline stages and execution phases too") {
  const auto stages = mlp(2, 8, 4, [](int i) { return layer_annotation{i, i == 0 ? std::optional<std::int64_t>(0) : std::nullopt, {}, {}}; });
  check_schedule_error(error_of([&] { (void)ipu::pipelined_execution{}.plan(stages, mk2x4, deep()); }),
                       "all ops annotated or none", "pipeline stage");
  const auto phases = mlp(2, 8, 4, [](int i) { return layer_annotation{0, {}, i == 0 ? std::optional<std::int64_t>(0) : std::nullopt, {}}; });
  check_schedule_error(error_of([&] { (void)ipu::serial_phased_execution{}.plan(phases, mk2x4, deep()); }),
                       "all ops annotated or none", "execution phase");
}

TEST_CASE("ops in one pipeline stage share one IPU") {
  // Layer 1 is in stage 0 like layer 0, but on IPU 1.
  const auto g = mlp(2, 8, 4, [](int i) { return layer_annotation{i, 0, {}, {}}; });
  const auto e = error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, deep()); });
  check_schedule_error(e, "ops in one pipeline stage share one IPU", "MatMul 'mm1'");
  CHECK(e.message().find("IPU 0") != std::string::npos);
  // Explicit stages whose blocks sit on different IPUs break the same rule.
  const auto b = blocked_mlp({0, 1});
  check_schedule_error(error_of([&] {
                         (void)ipu::pipelined_execution{{ipu::stage{{"b0", "b1"}, {}}}}.plan(b, mk2x4, deep());
                       }),
                       "ops in one stage share one IPU", "block 'b1'");
}

TEST_CASE("pipelining needs virtual graphs") {
  const auto g = mlp(2, 8, 4, [](int i) { return layer_annotation{{}, i, {}, {}}; });
  const auto e = error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, deep()); });
  check_schedule_error(e, "pipelining needs virtual graphs", "MatMul 'mm0'");
}

TEST_CASE("pipeline depth: device iterations (inference) and gradient accumulation (training) >= stages") {
  const auto g = plan_test::pipelined_mlp(4, 8, 4);
  const auto e = error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, deep(3)); });
  check_schedule_error(e, "pipeline depth >= number of stages", "4 stages");
  CHECK(e.hint().find("at least 4") != std::string::npos);
  CHECK_NOTHROW((void)ipu::pipelined_execution{}.plan(g, mk2x4, deep(4)));

  ipu::plan_options train;
  train.is_inference = false;
  train.gradient_accumulation = 6;  // 4 IPUs train in 2 x 4 - 1 = 7 stages
  const auto t = error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, train); });
  check_schedule_error(t, "pipeline depth >= number of stages", "7 stages");
  train.gradient_accumulation = 7;
  CHECK_NOTHROW((void)ipu::pipelined_execution{}.plan(g, mk2x4, train));
}

TEST_CASE("a block in more than one stage") {
  const auto g = blocked_mlp({0, 1});
  const auto e = error_of([&] {
    (void)ipu::pipelined_execution{{ipu::stage{{"b0"}, 0}, ipu::stage{{"b1", "b0"}, 1}}}.plan(g, mk2x4, deep());
  });
  check_schedule_error(e, "a block in more than one stage", "block 'b0'");
  const auto p = error_of([&] {
    (void)ipu::serial_phased_execution{{ipu::phase{{ipu::stage{{"b0"}, 0}}}, ipu::phase{{ipu::stage{{"b0", "b1"}, 0}}}}}
        .plan(g, mk2x4, deep());
  });
  check_schedule_error(p, "a block in more than one stage", "block 'b0'");
}

TEST_CASE("unknown block ids") {
  const auto g = blocked_mlp({0, 1});
  const auto e = error_of([&] {
    (void)ipu::sharded_execution{{ipu::stage{{"b0"}, 0}, ipu::stage{{"b2"}, 1}}}.plan(g, mk2x4, deep());
  });
  check_schedule_error(e, "unknown block ids", "'b2'");
  CHECK(e.hint().find("'b0', 'b1'") != std::string::npos);  // names the blocks the model has
}

TEST_CASE("AutoStage.SameAsIpu without an IPU") {
  const auto g = blocked_mlp({0, -1});
  const auto e = error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, deep()); });
  check_schedule_error(e, "AutoStage.SameAsIpu without an IPU", "block 'b1'");
  // AutoIncrement does not need IPUs from the blocks: b1 without an IPU runs on IPU 0.
  const auto p = ipu::pipelined_execution{{}, ipu::auto_stage::auto_increment}.plan(g, mk2x4, deep());
  CHECK(p.stages.size() == 1);  // both blocks on IPU 0: consecutive stages merge
}

TEST_CASE("no AutoStage for phased execution") {
  const auto g = blocked_mlp({0, 1});
  const auto e = error_of([&] { (void)ipu::parallel_phased_execution{}.plan(g, mk2x4, deep()); });
  check_schedule_error(e, "no AutoStage for phased execution", "parallel-phased");
  const auto plain = mlp(2, 8, 4);
  check_schedule_error(error_of([&] { (void)ipu::serial_phased_execution{}.plan(plain, mk2x4, deep()); }),
                       "no AutoStage for phased execution", "serial-phased");
}

TEST_CASE("ops outside any block") {
  const auto g = mlp(2, 8, 4, [](int i) { return i == 0 ? layer_annotation{0, {}, {}, "a"} : layer_annotation{}; });
  const auto e = error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, deep()); });
  check_schedule_error(e, "no ops outside any block", "MatMul 'mm1'");
  // A block the explicit stages leave out is outside every stage.
  const auto b = blocked_mlp({0, 1});
  check_schedule_error(error_of([&] { (void)ipu::sharded_execution{{ipu::stage{{"b0"}, 0}}}.plan(b, mk2x4, deep()); }),
                       "no ops outside any stage", "block 'b1'");
}

TEST_CASE("the IPU count is a power of two unless auto-rounded") {
  const auto g = plan_test::pipelined_mlp(3, 8, 4);
  const auto e = error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, deep()); });
  check_schedule_error(e, "IPU count a power of two unless auto-rounded", "3 IPUs");
  auto o = deep();
  o.auto_round_num_ipus = true;
  const auto p = ipu::pipelined_execution{}.plan(g, mk2x4, o);
  CHECK(p.ipus_per_replica == 3);
  CHECK(p.ipus_reserved == 4);  // one reserved and idle
  CHECK(p.memory.size() == 3);
}

TEST_CASE("at most 64 IPUs: two replicas of 33 IPUs do not fit a 64-IPU device even rounded") {
  const auto g = plan_test::mlp(33, 4, 1, [](int i) { return layer_annotation{i, i, {}, {}}; });
  auto o = deep(64);
  o.auto_round_num_ipus = true;
  o.replication_factor = 2;
  const auto e = error_of([&] { (void)ipu::pipelined_execution{}.plan(g, ipu::ipu_model<ipu::mk2, 64>::description(), o); });
  check_schedule_error(e, "IPU ids within the device", "66 IPUs");
}

TEST_CASE("IPU ids beyond the device") {
  const auto g = mlp(2, 8, 4, [](int i) { return layer_annotation{4 * i, i, {}, {}}; });
  const auto e = error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, deep()); });
  check_schedule_error(e, "IPU ids within the device", "IPU 4");
  CHECK(e.message().find("device has 4") != std::string::npos);
  // Replicas count too: 2 IPUs x 4 replicas need 8.
  const auto two = plan_test::pipelined_mlp(2, 8, 4);
  auto o = deep();
  o.replication_factor = 4;
  check_schedule_error(error_of([&] { (void)ipu::pipelined_execution{}.plan(two, mk2x4, o); }),
                       "IPU ids within the device", "4 replicas need 8 IPUs");
}

TEST_CASE("stage ids must ascend along the model (AutoStage.SameAsIpu going back to IPU 0)") {
  // PopTorch's example: blocks on IPUs 0, 1, 0. SameAsIpu puts block 2 in stage 0, before block 1.
  const auto g = blocked_mlp({0, 1, 0});
  const auto e = error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, deep()); });
  check_schedule_error(e, "stage ids must ascend along the model", "MatMul 'mm2'");
  CHECK(e.hint().find("AutoIncrement") != std::string::npos);
  // AutoIncrement gives block 2 stage 2: three stages, the last back on IPU 0.
  const auto p = ipu::pipelined_execution{{}, ipu::auto_stage::auto_increment}.plan(g, mk2x4, deep());
  REQUIRE(p.stages.size() == 3);
  CHECK(p.stages[2].ipu == 0);
}

TEST_CASE("parallel phased execution: even phases on even IPUs, odd phases on odd IPUs") {
  const auto g = blocked_mlp({-1, -1});
  const auto bad = ipu::parallel_phased_execution{{ipu::phase{{ipu::stage{{"b0"}, 1}}}, ipu::phase{{ipu::stage{{"b1"}, 0}}}}};
  check_schedule_error(error_of([&] { (void)bad.plan(g, mk2x4, deep()); }), "even phases on even IPUs, odd phases on odd IPUs",
                       "phase 0 stage 0");
  // The same phases run serially on any IPUs.
  const auto serial = ipu::serial_phased_execution{bad.phases};
  CHECK_NOTHROW((void)serial.plan(g, mk2x4, deep()));
  // Per-op phase annotations follow the same rule.
  const auto ops = mlp(2, 8, 4, [](int i) { return layer_annotation{0, {}, i, {}}; });
  check_schedule_error(error_of([&] { (void)ipu::parallel_phased_execution{}.plan(ops, mk2x4, deep()); }),
                       "even phases on even IPUs", "MatMul 'mm1'");
}

TEST_CASE("phases: one stage per IPU of the group, stages of a phase on distinct IPUs") {
  const auto g = blocked_mlp({-1, -1, -1});
  const auto uneven = ipu::serial_phased_execution{
      {ipu::phase{{ipu::stage{{"b0"}, 0}, ipu::stage{{"b1"}, 1}}}, ipu::phase{{ipu::stage{{"b2"}, 0}}}}};
  check_schedule_error(error_of([&] { (void)uneven.plan(g, mk2x4, deep()); }),
                       "each phase has one stage per IPU of its group", "phase 1");
  const auto shared = ipu::serial_phased_execution{{ipu::phase{{ipu::stage{{"b0", "b1"}, 0}, ipu::stage{{"b2"}, 0}}}}};
  check_schedule_error(error_of([&] { (void)shared.plan(g, mk2x4, deep()); }), "each on its own IPU", "phase 0 stage 1");
}

TEST_CASE("phases must follow the data flow") {
  const auto g = blocked_mlp({-1, -1});
  const auto backwards = ipu::serial_phased_execution{{ipu::phase{{ipu::stage{{"b1"}, 0}}}, ipu::phase{{ipu::stage{{"b0"}, 0}}}}};
  check_schedule_error(error_of([&] { (void)backwards.plan(g, mk2x4, deep()); }), "phases must ascend along the model",
                       "MatMul 'mm1'");
}

TEST_CASE("off-chip liveness needs Streaming Memory, which Mk1 does not have") {
  const auto g = blocked_mlp({-1, -1});
  const auto s = ipu::serial_phased_execution{{ipu::phase{{ipu::stage{{"b0"}, 0}}}, ipu::phase{{ipu::stage{{"b1"}, 0}}}},
                                              ipu::liveness::off_chip_after_fwd};
  const auto mk1 = ipu::ipu_model<ipu::mk1, 2>::description();
  check_schedule_error(error_of([&] { (void)s.plan(g, mk1, deep()); }), "Streaming Memory", "mk1");
  CHECK_NOTHROW((void)ipu::serial_phased_execution{s.phases}.plan(g, mk1, deep()));  // AlwaysLive is fine
}

TEST_CASE("phased execution refuses pipeline annotations and pipelines refuse phases") {
  const auto g = mlp(2, 8, 4, [](int i) { return layer_annotation{0, {}, i, {}}; });
  check_schedule_error(error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, deep()); }),
                       "has no phases", "MatMul 'mm0'");
}

TEST_CASE("plan options: inference with gradient accumulation, group sizes, precision") {
  const auto g = plan_test::pipelined_mlp(2, 8, 4);
  auto o = deep();
  o.gradient_accumulation = 4;
  check_schedule_error(error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, o); }),
                       "gradient accumulation is 4 for an inference model", "pipelined");
  o = deep();
  o.replication_factor = 2;
  o.input_group_size = 3;
  check_schedule_error(error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, o); }), "does not divide",
                       "group size 3");
  o = deep();
  o.precision = ipu::data_type::S8;
  check_schedule_error(error_of([&] { (void)ipu::pipelined_execution{}.plan(g, mk2x4, o); }), "precision must be F32 or F16",
                       "S8");
}

}  // namespace test_annotation_rules
