// Planning the PyTorch-exported models (AlexNet, MobileNetV2, a transformer encoder) with every
// strategy on Mk2, strategies chosen at run time from PopTorch's options, and out-of-memory on Mk1.
#include <doctest/doctest.h>

#include <string>

#include "ipu/onnx/import.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/compile/strategies.hpp"
#include "../sched/plan_test_models.hpp"

namespace test_strategies {

namespace {

ipu::graph load(const std::string& name) { return ipu::onnx::load_model(std::string(IPU_TEST_MODELS) + "/" + name + ".onnx"); }

using plan_test::with_bps;

void check_plan(const ipu::executable& e, std::uint32_t ipus) {
  CHECK(e.ipus_per_replica == ipus);
  REQUIRE(e.memory.size() == ipus);
  for (const auto& m : e.memory) {
    CHECK(m.total_bytes > 0);
    CHECK(m.total_bytes <= e.device.arch.sram_bytes_per_ipu());
    CHECK(m.worst_tile_bytes <= e.device.arch.sram_bytes_per_tile);
  }
  CHECK(e.predicted.samples_per_second > 0);
  CHECK(e.predicted.cycles_per_step >= e.predicted.latency_cycles);
  CHECK(e.micro_batch_size == 4);  // the fixture's models take a batch of 4
  for (std::size_t op = 0; op < e.model.num_ops(); ++op) CHECK(e.op_ipu[op] < ipus);
}

void plan_everything(const std::string& name) {
  CAPTURE(name);
  const auto g = load(name);
  const auto mk2x4 = ipu::ipu_model<ipu::mk2, 4>::description();
  const auto mk2x2 = ipu::ipu_model<ipu::mk2, 2>::description();

  const auto one = ipu::sharded_execution{}.plan(g, mk2x4, with_bps(8));
  check_plan(one, 1);

  const auto staged = ipu::propose_stages(g, mk2x4, 4);
  const auto sharded = ipu::sharded_execution{}.plan(staged.annotated, mk2x4, with_bps(8));
  check_plan(sharded, 4);
  const auto pipelined = ipu::pipelined_execution{}.plan(staged.annotated, mk2x4, with_bps(8));
  check_plan(pipelined, 4);
  CHECK(pipelined.stages.size() == 4);
  CHECK(pipelined.predicted.samples_per_second > sharded.predicted.samples_per_second);
  MESSAGE(name << ": 1 IPU " << one.predicted.samples_per_second << " samples/s; 4 IPUs sharded "
               << sharded.predicted.samples_per_second << ", pipelined " << pipelined.predicted.samples_per_second);

  const auto serial = ipu::propose_phases(g, mk2x2, 2, false);
  const auto sp = ipu::serial_phased_execution{{}, ipu::liveness::off_chip_after_fwd}.plan(serial.annotated, mk2x2, with_bps(4));
  check_plan(sp, 2);
  CHECK(sp.predicted.streaming_memory_bytes > 0);
  const auto parallel = ipu::propose_phases(g, mk2x2, 2, true);
  const auto pp = ipu::parallel_phased_execution{{}, ipu::liveness::off_chip_after_each_phase}.plan(parallel.annotated, mk2x2,
                                                                                                     with_bps(4));
  check_plan(pp, 2);

  const auto two = ipu::propose_stages(g, mk2x2, 2);
  const auto replicated = ipu::replicated_execution<ipu::pipelined_execution>{{}, 2}.plan(two.annotated, mk2x4, with_bps(8));
  check_plan(replicated, 2);
  CHECK(replicated.ipus_reserved == 4);
  const auto unreplicated = ipu::pipelined_execution{}.plan(two.annotated, mk2x2, with_bps(8));
  // Twice the samples per step, at most twice the throughput: the replicas sync together, over
  // twice the IPUs, which costs a small model like the encoder a visible share of its step.
  CHECK(replicated.predicted.samples_per_second > 1.5 * unreplicated.predicted.samples_per_second);
  CHECK(replicated.predicted.samples_per_second <= 2.0 * unreplicated.predicted.samples_per_second);
}

}  // namespace

TEST_CASE("AlexNet: sharded, pipelined, phased and replicated on Mk2") { plan_everything("alexnet"); }
TEST_CASE("MobileNetV2: sharded, pipelined, phased and replicated on Mk2") { plan_everything("mobilenet_v2"); }
TEST_CASE("transformer encoder: sharded, pipelined, phased and replicated on Mk2") { plan_everything("transformer_encoder"); }

TEST_CASE("AlexNet in FP32 does not fit one Mk1 IPU - the error says what would help") {
  const auto g = load("alexnet");
  const auto mk1 = ipu::ipu_model<ipu::mk1, 1>::description();
  try {
    (void)ipu::sharded_execution{}.plan(g, mk1, {});
    FAIL("AlexNet FP32 planned on one Mk1");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::memory);
    CHECK(e.location().find("IPU 0 of 1 x mk1 (GC2)") != std::string::npos);
    CHECK(std::string(e.message()).find("out of memory") != std::string::npos);
    CHECK(e.hint().find("more IPUs") != std::string::npos);
    CHECK(e.hint().find("lower precision") != std::string::npos);
    CHECK(e.hint().find("phased execution") == std::string::npos);  // Mk1 has no Streaming Memory
  }
  // Split over two Mk1 IPUs by the planner, the classifier's 151 MB weight still leaves too little
  // room for the Gemm's temporaries at the default proportion; the error says so, and following
  // its advice fits.
  const auto mk1x2 = ipu::ipu_model<ipu::mk1, 2>::description();
  const auto split = ipu::propose_stages(g, mk1x2, 2).annotated;
  try {
    (void)ipu::pipelined_execution{}.plan(split, mk1x2, with_bps(2));
    FAIL("AlexNet FP32 planned on two Mk1 at the default available memory proportion");
  } catch (const ipu::error& e) {
    CHECK(e.hint().find("lower available memory proportion") != std::string::npos);
  }
  auto lean = with_bps(2);
  lean.available_memory_proportion = 0.1;
  CHECK_NOTHROW((void)ipu::pipelined_execution{}.plan(split, mk1x2, lean));
}

TEST_CASE("strategies chosen at run time from PopTorch's options") {
  const auto g = load("transformer_encoder");
  const auto mk2x4 = ipu::ipu_model<ipu::mk2, 4>::description();
  const auto annotated = ipu::propose_stages(g, ipu::ipu_model<ipu::mk2, 2>::description(), 2).annotated;
  ipu::options opts;
  opts.device_iterations(8).replication_factor(2).execution_strategy(ipu::strategy_settings::pipelined());
  const auto e = ipu::plan_with(opts, annotated, mk2x4);
  CHECK(e.strategy == "pipelined");
  CHECK(e.replication_factor == 2);
  CHECK(e.batches_per_step == 8);
  opts.execution_strategy(ipu::strategy_settings::sharded());
  CHECK(ipu::plan_with(opts, annotated, mk2x4).schedule == ipu::schedule_kind::sequential);
  opts.precision(ipu::data_type::F16);
  const auto half = ipu::plan_with(opts, annotated, mk2x4);
  CHECK(half.precision == ipu::data_type::F16);
  CHECK(half.memory[0].total_bytes < e.memory[0].total_bytes);
}

}  // namespace test_strategies
