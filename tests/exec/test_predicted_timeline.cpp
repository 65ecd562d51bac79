// The predicted timeline lays every step of every micro-batch out as the schedule runs it; its span
// agrees with the predicted cycles per step.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "ipu/sched/phased_execution.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/exec/predicted_timeline.hpp"
#include "ipu/sched/sharded_execution.hpp"
#include "../sched/plan_test_models.hpp"

namespace test_predicted_timeline {

namespace {
const auto mk2x4 = ipu::ipu_model<ipu::mk2, 4>::description();
using plan_test::with_bps;
std::uint64_t span(const std::vector<ipu::timeline_event>& ev) {
  std::uint64_t end = 0;
  for (const auto& e : ev) end = std::max(end, e.sim_end());
  return end;
}
}  // namespace

TEST_CASE("sequential: every step of every micro-batch in turn") {
  const auto e = ipu::sharded_execution{}.plan(plan_test::pipelined_mlp(4, 64, 8), mk2x4, with_bps(3));
  const auto ev = ipu::predicted_timeline(e);
  CHECK(ev.size() == 3 * e.programs[5].steps.size());
  CHECK(span(ev) == e.predicted.cycles_per_step);
  for (std::size_t i = 1; i < ev.size(); ++i) CHECK(ev[i].sim_begin == ev[i - 1].sim_end());
}

TEST_CASE("pipelined: stage s of micro-batch m starts at (m + s) x the slowest stage") {
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 64, 8), mk2x4, with_bps(6));
  const auto ev = ipu::predicted_timeline(e);
  CHECK(ev.size() == 6 * e.programs[5].steps.size());
  std::uint64_t slowest = 0;
  for (const auto& s : e.stages) slowest = std::max(slowest, s.cycles);
  for (std::uint64_t m = 0; m < 6; ++m)
    for (std::uint32_t s = 0; s < 4; ++s) {
      std::uint64_t first = UINT64_MAX;
      for (const auto& x : ev)
        if (x.micro_batch == m && x.stage == s) first = std::min(first, x.sim_begin);
      CHECK(first == (m + s) * slowest);
    }
  CHECK(span(ev) <= e.predicted.cycles_per_step);
  CHECK(span(ev) > e.predicted.cycles_per_step - slowest);
  // Each IPU runs one stage at a time: its events (copies count for the receiving IPU) never overlap.
  for (std::uint32_t ipu = 0; ipu < 4; ++ipu) {
    std::uint64_t end = 0;
    for (const auto& x : ev) {
      if (x.worker != ipu) continue;
      CHECK(x.sim_begin >= end);
      end = x.sim_end();
    }
  }
}

TEST_CASE("phased: phases in turn") {
  std::vector<ipu::phase> phases;
  for (int i = 0; i < 3; ++i) phases.push_back(ipu::phase{{ipu::stage{{"b" + std::to_string(i)}, 0}}});
  const auto e = ipu::serial_phased_execution{phases, ipu::liveness::off_chip_after_fwd}.plan(
      plan_test::blocked_mlp({-1, -1, -1}, 64, 8), mk2x4, with_bps(2));
  const auto ev = ipu::predicted_timeline(e);
  CHECK(span(ev) == e.predicted.cycles_per_step);
  for (const auto& x : ev) CHECK(x.phase == static_cast<std::int64_t>(x.stage));
}

TEST_CASE("training: each pipeline cycle's forward then backward per IPU, then all-reduce and update") {
  ipu::plan_options o;
  o.is_inference = false;
  o.gradient_accumulation = 5;
  o.batches_per_step = 2;
  o.replication_factor = 2;
  o.auto_round_num_ipus = true;  // 3 stages on 4 IPUs per replica: IPU 3 holds nothing to reduce
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(3, 16, 8),
                                                 ipu::ipu_model<ipu::mk2, 8>::description(), o);
  ipu::train::training_options t;
  t.gradient_accumulation = 5;
  const auto tg = ipu::train::make_training_graph(plan_test::mlp(3, 16, 8), t);
  const auto p = ipu::predict_training(e, tg, {&o, 2});
  const auto events = ipu::predicted_training_timeline(p);
  // Per weight update: 5 forwards and 5 backwards per stage, an all-reduce per IPU with weights, an
  // update per stage.
  CHECK(events.size() == 2 * (3 * 10 + 3 + 3));
  for (std::uint32_t ipu = 0; ipu < 3; ++ipu) {
    std::uint64_t end = 0;
    for (const auto& ev : events) {
      if (ev.ipu != ipu) continue;
      CHECK(ev.begin >= end);  // one thing at a time on an IPU
      end = ev.begin + ev.cycles;
    }
  }
  for (const auto& ev : events) {
    const std::uint64_t base = ev.weight_update * p.cycles_per_update;
    if (ev.work == ipu::training_work::all_reduce) CHECK(ev.begin == base + p.accumulation_cycles);
    if (ev.work == ipu::training_work::update) CHECK(ev.begin >= base + p.accumulation_cycles + p.all_reduce.cycles);
    // Stage s runs micro-batch m's forward in cycle m + s and its backward in cycle m + 4 - s.
    if (ev.work == ipu::training_work::forward)
      CHECK(ev.begin == base + p.cycles[static_cast<std::size_t>(ev.micro_batch) + ev.stage].begin);
    if (ev.work == ipu::training_work::backward)
      CHECK(ev.begin >= base + p.cycles[static_cast<std::size_t>(ev.micro_batch) + 4 - ev.stage].begin);
  }
}

}  // namespace test_predicted_timeline
