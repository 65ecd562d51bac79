// Serial and parallel phased execution: phases in turn, liveness deciding the Streaming Memory
// traffic (costed at the device model's Streaming Memory rate), and memory per phase.
#include <doctest/doctest.h>

#include <string_view>
#include <vector>

#include "ipu/device/cost.hpp"
#include "ipu/sched/phased_execution.hpp"
#include "ipu/sched/sharded_execution.hpp"
#include "plan_test_models.hpp"

namespace test_phased_execution {

using plan_test::layer_annotation;

namespace {

const auto mk2x4 = ipu::ipu_model<ipu::mk2, 4>::description();

using plan_test::with_bps;

// Four layers in blocks b0..b3, one block per phase.
std::vector<ipu::phase> one_block_per_phase(bool parallel) {
  std::vector<ipu::phase> p;
  for (int i = 0; i < 4; ++i) {
    const std::int64_t ipu = parallel ? i % 2 : 0;
    p.push_back(ipu::phase{{ipu::stage{{"b" + std::to_string(i)}, ipu}}});
  }
  return p;
}

std::size_t count(const ipu::executable& e, ipu::step_kind k) {
  std::size_t n = 0;
  for (const auto& s : e.programs[5].steps) n += s.kind == k;
  return n;
}

}  // namespace

TEST_CASE("AlwaysLive: phases in turn, no Streaming Memory traffic") {
  const auto g = plan_test::blocked_mlp({-1, -1, -1, -1}, 64, 8);
  const auto e = ipu::serial_phased_execution{one_block_per_phase(false)}.plan(g, mk2x4, with_bps(4));
  CHECK(e.schedule == ipu::schedule_kind::phased);
  CHECK(e.num_phases == 4);
  REQUIRE(e.stages.size() == 4);
  for (std::int64_t p = 0; p < 4; ++p) CHECK(e.stages[static_cast<std::size_t>(p)].phase == p);
  CHECK(count(e, ipu::step_kind::from_remote) == 0);
  CHECK(count(e, ipu::step_kind::to_remote) == 0);
  CHECK(e.predicted.streaming_memory_bytes == 0);
  std::uint64_t sum = 0;
  for (const auto& s : e.stages) sum += s.cycles;
  CHECK(e.predicted.latency_cycles == sum);  // serial: loads, compute, stores, sync per phase in turn
  CHECK(e.predicted.cycles_per_step == 4 * sum);
  for (const auto& p : e.placement) CHECK_FALSE(p.in_streaming_memory);
}

TEST_CASE("OffChipAfterFwd: weights come from Streaming Memory at the start of their phase") {
  const auto g = plan_test::blocked_mlp({-1, -1, -1, -1}, 64, 8);
  const auto e = ipu::serial_phased_execution{one_block_per_phase(false), ipu::liveness::off_chip_after_fwd}.plan(
      g, mk2x4, with_bps(4));
  std::vector<ipu::step> loads;
  for (const auto& s : e.programs[5].steps)
    if (s.kind == ipu::step_kind::from_remote) loads.push_back(s);
  REQUIRE(loads.size() == 4);
  for (std::uint32_t i = 0; i < 4; ++i) {
    CHECK(loads[i].stage == i);
    CHECK(e.model.tensor(loads[i].tensor).kind == ipu::tensor_kind::variable);
    CHECK(loads[i].bytes == 64 * 64 * 4);
    // bytes / Streaming Memory rate (9.6 GB/s per IPU on Mk2), in cycles.
    CHECK(loads[i].cycles == ipu::seconds_to_cycles(mk2x4.arch, ipu::streaming_memory_seconds(mk2x4.arch, 64 * 64 * 4)));
  }
  CHECK(count(e, ipu::step_kind::to_remote) == 0);  // activations stay on chip during the forward pass
  CHECK(e.predicted.streaming_memory_bytes == 4 * 4 * 64 * 64 * 4);  // 4 micro-batches x 4 weights
  for (const auto& p : e.placement)
    if (e.model.tensor(p.tensor).kind == ipu::tensor_kind::variable) CHECK(p.in_streaming_memory);
  // Weights in Streaming Memory make each phase hold only its own weights: less memory than AlwaysLive.
  const auto live = ipu::serial_phased_execution{one_block_per_phase(false)}.plan(g, mk2x4, with_bps(4));
  CHECK(e.memory[0].total_bytes < live.memory[0].total_bytes);
  CHECK(e.predicted.cycles_per_step > live.predicted.cycles_per_step);
}

TEST_CASE("OffChipAfterEachPhase: activations read by a later phase are stored and loaded back") {
  const auto g = plan_test::blocked_mlp({-1, -1, -1, -1}, 64, 8);
  const auto e = ipu::serial_phased_execution{one_block_per_phase(false), ipu::liveness::off_chip_after_each_phase}.plan(
      g, mk2x4, with_bps(2));
  // relu0..relu2 each go to Streaming Memory after their phase and come back for the next.
  CHECK(count(e, ipu::step_kind::to_remote) == 3);
  CHECK(count(e, ipu::step_kind::from_remote) == 4 + 3);
  for (const auto& s : e.programs[5].steps)
    if (s.kind == ipu::step_kind::to_remote) {
      CHECK(s.bytes == 8 * 64 * 4);
      CHECK(e.stages[s.stage].phase + 1 ==
            e.stages[e.op_stage[e.model.tensor(s.tensor).consumers.front()]].phase);
    }
}

TEST_CASE("parallel phases alternate IPU groups and overlap the next phase's loads") {
  const auto g = plan_test::blocked_mlp({-1, -1, -1, -1}, 256, 8);
  const auto serial = ipu::serial_phased_execution{one_block_per_phase(true), ipu::liveness::off_chip_after_fwd}.plan(
      g, mk2x4, with_bps(4));
  const auto parallel = ipu::parallel_phased_execution{one_block_per_phase(true), ipu::liveness::off_chip_after_fwd}.plan(
      g, mk2x4, with_bps(4));
  for (std::size_t i = 0; i < 4; ++i) CHECK(parallel.stages[i].ipu == i % 2);
  CHECK(parallel.overlapped_phase_io);
  CHECK_FALSE(serial.overlapped_phase_io);
  CHECK(parallel.predicted.cycles_per_step < serial.predicted.cycles_per_step);
  // NoOverlap keeps the traffic but gives up the overlap.
  const auto no_overlap = ipu::parallel_phased_execution{one_block_per_phase(true),
                                                         ipu::liveness::off_chip_after_fwd_no_overlap}
                              .plan(g, mk2x4, with_bps(4));
  CHECK_FALSE(no_overlap.overlapped_phase_io);
  CHECK(no_overlap.predicted.cycles_per_step == serial.predicted.cycles_per_step);
  CHECK(no_overlap.predicted.streaming_memory_bytes == parallel.predicted.streaming_memory_bytes);
}

TEST_CASE("phases with two stages run them side by side - stage IPUs default to the group") {
  // Two independent branches per phase.
  ipu::builder b("two");
  auto x = b.add_input_tensor({ipu::data_type::F32, {4, 8}}, "x");
  ipu::tensor_id l, r;
  {
    auto s = b.block("left0");
    l = b.relu(x, "l0");
  }
  {
    auto s = b.block("right0");
    r = b.neg(x, "r0");
  }
  {
    auto s = b.block("left1");
    l = b.relu(l, "l1");
  }
  {
    auto s = b.block("right1");
    r = b.neg(r, "r1");
  }
  ipu::tensor_id out;
  {
    auto s = b.block("left1");
    out = b.add(l, r, "sum");
  }
  b.add_output(out);
  const auto g = std::move(b).build();
  const std::vector<ipu::phase> phases{ipu::phase{{ipu::stage{{"left0"}, {}}, ipu::stage{{"right0"}, {}}}},
                                       ipu::phase{{ipu::stage{{"left1"}, {}}, ipu::stage{{"right1"}, {}}}}};
  const auto serial = ipu::serial_phased_execution{phases}.plan(g, mk2x4, with_bps(1));
  REQUIRE(serial.stages.size() == 4);
  CHECK(serial.stages[0].ipu == 0);
  CHECK(serial.stages[1].ipu == 1);
  // In phase 1 the sum (in left1, on IPU 0) reads right1's result: right1 runs first.
  CHECK(serial.stages[2].ipu == 1);
  CHECK(serial.stages[3].ipu == 0);
  const auto parallel = ipu::parallel_phased_execution{phases}.plan(g, mk2x4, with_bps(1));
  CHECK(parallel.stages[0].ipu == 0);  // phase 0: IPUs 0, 2
  CHECK(parallel.stages[1].ipu == 2);
  CHECK(parallel.stages[2].ipu == 3);  // phase 1: IPUs 1, 3 (right1 first)
  CHECK(parallel.stages[3].ipu == 1);
  CHECK(parallel.num_phases == 2);
  // The sum's input from IPU 3 is copied over within the phase.
  bool copied = false;
  for (const auto& s : parallel.programs[5].steps)
    copied = copied || (s.kind == ipu::step_kind::ipu_copy && s.ipu == 3 && s.peer == 1);
  CHECK(copied);
}

TEST_CASE("phases from per-op annotations (PopART's execution phases)") {
  const auto g = plan_test::mlp(4, 16, 4, [](int i) { return layer_annotation{i % 2, {}, i, {}}; });
  const auto e = ipu::parallel_phased_execution{}.plan(g, mk2x4, with_bps(2));
  REQUIRE(e.stages.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(e.stages[i].phase == static_cast<std::int64_t>(i));
    CHECK(e.stages[i].ipu == i % 2);
  }
}

namespace {
// A small IPU (64 tiles of 64 KiB, 4 MiB in all) with Mk2's Streaming Memory, so a model that does
// not fit stays small.
struct small_ipu : ipu::mk2 {
  static constexpr std::string_view name = "small";
  static constexpr std::uint32_t tiles_per_ipu = 64;
  static constexpr std::uint64_t sram_bytes_per_tile = 64 * 1024;
};
static_assert(ipu::architecture<small_ipu>);
}  // namespace

TEST_CASE("a phase that does not fit names the phase in the out-of-memory error") {
  // 5 layers of 512 x 512 F32 weights (1 MiB each) on one 4 MiB IPU: all at once they do not fit;
  // one phase at a time from Streaming Memory they do.
  const auto g = plan_test::mlp(5, 512, 4, [](int i) { return layer_annotation{0, {}, i, {}}; });
  const auto small = ipu::ipu_model<small_ipu, 1>::description();
  const auto e = plan_test::error_of([&] { (void)ipu::serial_phased_execution{}.plan(g, small, with_bps(1)); });
  CHECK(e.category() == ipu::error_category::memory);
  CHECK(e.location().find("IPU 0") != std::string::npos);
  CHECK(e.location().find("execution phase 0") != std::string::npos);
  const auto off = ipu::serial_phased_execution{{}, ipu::liveness::off_chip_after_fwd}.plan(g, small, with_bps(1));
  for (const auto& m : off.memory) CHECK(m.worst_tile_bytes <= small_ipu::sram_bytes_per_tile);
  // Sharding the same model on one IPU has nowhere to put the weights.
  CHECK_THROWS_AS((void)ipu::sharded_execution{}.plan(plan_test::mlp(5, 512, 4), small, with_bps(1)), ipu::error);
}

}  // namespace test_phased_execution
