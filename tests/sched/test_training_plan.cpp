// The training cost model: the training step's forward, backward and optimizer ops costed through
// the op table on the forward plan's stages, PopART's 2N - 1 stage pipeline with its ramp-up and
// ramp-down, optimizer-state and accumulator memory, the gradient all-reduce with replicas.
// (Not in a constant expression: GCC 12 cannot copy training_options' strings there, so
// make_training_graph is not constant-evaluable yet; predict_training itself is constexpr.)
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ipu/ops/op_cost.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/sharded_execution.hpp"
#include "ipu/sched/training_plan.hpp"
#include "plan_test_models.hpp"

namespace test_training_plan {

namespace {

constexpr ipu::plan_options training_options(std::uint64_t accumulation) {
  ipu::plan_options o;
  o.is_inference = false;
  o.gradient_accumulation = accumulation;
  o.batches_per_step = 1;
  return o;
}

constexpr ipu::train::training_options step_options(ipu::train::optimizer opt, std::int64_t accumulation) {
  ipu::train::training_options t;
  t.opt = opt;
  t.gradient_accumulation = accumulation;
  return t;
}

// A 4-layer MLP (width 16, batch 8), one layer per IPU, trained with Adam and accumulation 7.
ipu::training_prediction adam_pipeline() {
  const auto o = training_options(7);
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 16, 8),
                                                 ipu::ipu_model<ipu::mk2, 4>::description(), o);
  ipu::train::training_options t;
  t.opt = ipu::train::adam{};
  t.gradient_accumulation = 7;
  const auto tg = ipu::train::make_training_graph(plan_test::mlp(4, 16, 8), t);
  return ipu::predict_training(e, tg, ipu::training_plan_options{&o, 1});
}

}  // namespace

TEST_CASE("training plan: PopART's 2N - 1 stage pipeline, ramp-up and ramp-down, Adam's two state copies") {
  const auto p = adam_pipeline();
  CHECK(p.pipelined);
  CHECK(p.pipeline_stages == 7);
  REQUIRE(p.stages.size() == 4);
  // G + 2N - 2 pipeline cycles: ramp-up with forwards only, ramp-down with backwards only.
  REQUIRE(p.cycles.size() == 13);
  CHECK(p.cycles[0].forward == std::vector<std::int64_t>{0, -1, -1, -1});
  CHECK(p.cycles[0].backward == std::vector<std::int64_t>{-1, -1, -1, -1});
  CHECK(p.cycles[3].forward == std::vector<std::int64_t>{3, 2, 1, 0});
  CHECK(p.cycles[3].backward == std::vector<std::int64_t>{-1, -1, -1, 0});  // the last stage's fused cycle
  CHECK(p.cycles[6].backward == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(p.cycles[12].forward == std::vector<std::int64_t>{-1, -1, -1, -1});
  CHECK(p.cycles[12].backward == std::vector<std::int64_t>{6, -1, -1, -1});
  // A ramp cycle is shorter than a steady one; the cycles follow one another.
  CHECK(p.cycles[0].cycles < p.cycles[6].cycles);
  for (std::size_t k = 1; k < p.cycles.size(); ++k) CHECK(p.cycles[k].begin == p.cycles[k - 1].begin + p.cycles[k - 1].cycles);
  for (const auto& s : p.stages) {
    CHECK(s.forward > 0);
    CHECK(s.backward > 0);
    CHECK(s.update > 0);
  }
  // Adam: two state copies of each weight; accumulation: one accumulator.
  for (const auto& m : p.memory) {
    CHECK(m.weight_bytes == 16 * 16 * 4);
    CHECK(m.optimizer_bytes == 2 * 16 * 16 * 4);
    CHECK(m.gradient_bytes == 16 * 16 * 4);
  }
  // The output leaves once per weight update (the last micro-batch's), from the last stage.
  CHECK(p.output_cycles > 0);
  CHECK(p.cycles_per_step == p.accumulation_cycles + p.update_cycles + p.output_cycles);
  CHECK(p.samples_per_second == doctest::Approx(8.0 * 7 / p.seconds_per_step));
}

TEST_CASE("training plan: backward ops land on their forward op's stage, the loss on the last") {
  const auto o = training_options(7);
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 16, 8),
                                                 ipu::ipu_model<ipu::mk2, 4>::description(), o);
  const auto tg = ipu::train::make_training_graph(plan_test::mlp(4, 16, 8), step_options(ipu::train::sgd{}, 7));
  const auto p = ipu::predict_training(e, tg, {&o, 1});
  REQUIRE(p.stages.size() == 4);
  // Layers 1-3 need dX and dW, layer 0 only dW (its input is not trained): the same backward ops on
  // stages 1 and 2, fewer on stage 0, more on stage 3 (the loss's gradient too).
  CHECK(p.stages[1].backward_ops == p.stages[2].backward_ops);
  CHECK(p.stages[3].backward_ops > p.stages[2].backward_ops);
  CHECK(p.stages[0].backward_ops < p.stages[1].backward_ops);
  // Stage 3 also computes the loss.
  CHECK(p.stages[0].forward_ops == 2);
  CHECK(p.stages[3].forward_ops > 2);
  // dX = dY W^T and dW = X^T dY each multiply as many numbers as the forward X W: the backward of a
  // middle stage costs at least twice its forward MatMul.
  const auto fwd_matmul = ipu::estimate_op_cost(e.model, 2, e.device).cycles();  // mm1, stage 1
  CHECK(p.stages[1].backward >= 2 * fwd_matmul);
  // Recomputation is off by default (PopART's autoRecomputation None): everything the backward
  // reads is stashed, nothing rerun.
  for (const auto& s : p.stages) CHECK(s.recompute == 0);
  // Plain SGD keeps no state; accumulation keeps one accumulator per weight.
  for (const auto& m : p.memory) {
    CHECK(m.optimizer_bytes == 0);
    CHECK(m.gradient_bytes == 16 * 16 * 4);
  }
  CHECK(p.uncosted_ops.empty());
}

TEST_CASE("training plan: a stage's recompute is the forward ops its backward reruns (the executor's rule)") {
  const auto o = training_options(3);
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(2, 16, 8),
                                                 ipu::ipu_model<ipu::mk2, 2>::description(), o);
  auto predict = [&](ipu::recomputation r, bool checkpoint_mm0, bool mark_mm0, bool mark_relu0) {
    auto model = plan_test::mlp(2, 16, 8);  // ops: mm0, relu0, mm1, relu1
    model.op(0).where.checkpoint = checkpoint_mm0;
    model.op(0).where.recompute = mark_mm0;
    model.op(1).where.recompute = mark_relu0;
    const auto tg = ipu::train::make_training_graph(model, step_options(ipu::train::sgd{}, 3));
    ipu::training_plan_options to{&o, 1};
    to.recompute = r;
    return ipu::predict_training(e, tg, to);
  };
  // Hand count. Stage 0's backward reads only x (a model input, for dW0 = x^T dY) and mm0's output
  // (Relu's gradient is Where(x > 0, dY, 0) on Relu's input), so Standard and RecomputeAll rerun mm0
  // alone (its inputs x and w0 have no producer), not relu0; the last stage reruns nothing.
  const auto mm0 = ipu::estimate_op_cost(e.model, 0, e.device).cycles();
  const auto relu0 = ipu::estimate_op_cost(e.model, 1, e.device).cycles();
  const auto none = predict(ipu::recomputation::none, false, false, false);
  CHECK(none.stages[0].recompute == 0);
  CHECK(none.stages[1].recompute == 0);
  for (auto r : {ipu::recomputation::standard, ipu::recomputation::all}) {
    const auto p = predict(r, false, false, false);
    CHECK(p.stages[0].forward == mm0 + relu0);
    CHECK(p.stages[0].recompute == mm0);
    CHECK(p.stages[1].recompute == 0);
    // The rerun runs in stage 0's backward: each steady cycle grows by it, the whole step by G of them
    // at most (the lockstep cycle is the busiest IPU's).
    CHECK(p.accumulation_cycles > none.accumulation_cycles);
    CHECK(p.accumulation_cycles <= none.accumulation_cycles + 3 * mm0);
  }
  // NormOnly: no normalisation in an MLP, nothing rerun.
  CHECK(predict(ipu::recomputation::norm_only, false, false, false).stages[0].recompute == 0);
  // Per-op marks: a checkpointed mm0 is stashed even under RecomputeAll; a marked mm0 is rerun even
  // under None; a marked relu0 is not read by stage 0's backward, so nothing is rerun for it.
  CHECK(predict(ipu::recomputation::all, true, false, false).stages[0].recompute == 0);
  CHECK(predict(ipu::recomputation::none, false, true, false).stages[0].recompute == mm0);
  CHECK(predict(ipu::recomputation::none, false, false, true).stages[0].recompute == 0);
}

TEST_CASE("training plan: a pipeline stashes what the backward reads and does not recompute, per micro-batch in flight") {
  // The 2-layer MLP of the test above (batch 8, width 16, F32), 2 IPUs, G = 3. Stage 0's backward
  // reads x (the stage's input, which the forward plan stashes) and mm0's output (Relu's gradient):
  // without recomputation mm0's [8,16] is held for the 2 (N - 0) - 1 = 3 micro-batches between
  // stage 0's forward and backward, one of them counted as the backward's activations: 2 x 512 B
  // stashed. Recomputing mm0 stashes nothing of its own; a checkpoint keeps it stashed. The last
  // stage runs its backward in the forward's cycle: nothing stashed.
  const auto o = training_options(3);
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(2, 16, 8),
                                                 ipu::ipu_model<ipu::mk2, 2>::description(), o);
  auto predict = [&](ipu::recomputation r, bool checkpoint_mm0) {
    auto model = plan_test::mlp(2, 16, 8);
    model.op(0).where.checkpoint = checkpoint_mm0;
    const auto tg = ipu::train::make_training_graph(model, step_options(ipu::train::sgd{}, 3));
    ipu::training_plan_options to{&o, 1};
    to.recompute = r;
    return ipu::predict_training(e, tg, to);
  };
  auto on = [](const ipu::training_prediction& p, std::uint32_t ipu) {
    for (const auto& m : p.memory)
      if (m.ipu == ipu) return m;
    FAIL("no memory entry for IPU " << ipu);
    return ipu::training_memory{};
  };
  const auto stage0 = e.stages[0].ipu, stage1 = e.stages[1].ipu;
  REQUIRE(stage0 != stage1);
  const auto none = predict(ipu::recomputation::none, false);
  CHECK(on(none, stage0).stash_bytes == 2 * 8 * 16 * 4);
  CHECK(on(none, stage1).stash_bytes == 0);
  const auto all = predict(ipu::recomputation::all, false);
  CHECK(on(all, stage0).stash_bytes == 0);
  CHECK(on(all, stage0).total() + 2 * 8 * 16 * 4 == on(none, stage0).total());
  CHECK(on(predict(ipu::recomputation::all, true), stage0).stash_bytes == 2 * 8 * 16 * 4);
  // Sharded training holds one micro-batch at a time: no stash.
  const auto one = ipu::sharded_execution{}.plan(plan_test::mlp(2, 16, 8), ipu::ipu_model<ipu::mk2, 1>::description(), o);
  const auto tg = ipu::train::make_training_graph(plan_test::mlp(2, 16, 8), step_options(ipu::train::sgd{}, 3));
  CHECK(ipu::predict_training(one, tg, {&o, 1}).memory[0].stash_bytes == 0);
}

TEST_CASE("training plan: one IPU runs G x (forward + backward), then the update") {
  const auto o = training_options(3);
  const auto e = ipu::sharded_execution{}.plan(plan_test::mlp(2, 32, 4), ipu::ipu_model<ipu::mk2, 1>::description(), o);
  ipu::train::sgd momentum;
  momentum.momentum = 0.9;
  const auto tg = ipu::train::make_training_graph(plan_test::mlp(2, 32, 4), step_options(momentum, 3));
  const auto p = ipu::predict_training(e, tg, {&o, 1});
  REQUIRE(p.stages.size() == 1);
  const auto& s = p.stages[0];
  CHECK(p.accumulation_cycles == 3 * (s.forward + s.forward_io + s.backward + s.backward_io));
  CHECK(p.cycles_per_update == p.accumulation_cycles + s.update + p.output_cycles);
  CHECK(p.all_reduce.cycles == 0);
  CHECK(p.samples_per_second == doctest::Approx(4.0 * 3 / (static_cast<double>(p.cycles_per_step) / 1.325e9)));
  // SGD with momentum: one velocity per weight.
  CHECK(p.memory[0].optimizer_bytes == 2 * 32 * 32 * 4);
  CHECK(p.memory[0].activation_bytes > 0);
}

TEST_CASE("training plan: replicas add the ring all-reduce of each IPU's gradients") {
  auto o = training_options(7);
  o.replication_factor = 4;
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 16, 8),
                                                 ipu::ipu_model<ipu::mk2, 16>::description(), o);
  const auto tg = ipu::train::make_training_graph(plan_test::mlp(4, 16, 8), step_options(ipu::train::adam{}, 7));
  const auto p = ipu::predict_training(e, tg, {&o, 4});
  CHECK(p.all_reduce == ipu::ring_all_reduce_cost(e.device.arch, 4, 4, 16 * 16 * 4));
  CHECK(p.cycles_per_update == p.accumulation_cycles + p.all_reduce.cycles + p.update_cycles + p.output_cycles);
  CHECK(p.samples_per_second == doctest::Approx(8.0 * 7 * 4 / p.seconds_per_step));
}

TEST_CASE("training plan: replicated tensor sharding keeps and updates 1/R of the optimizer state") {
  auto o = training_options(7);
  o.replication_factor = 4;
  const auto e = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 16, 8),
                                                 ipu::ipu_model<ipu::mk2, 16>::description(), o);
  const auto tg = ipu::train::make_training_graph(plan_test::mlp(4, 16, 8), step_options(ipu::train::adam{}, 7));
  const auto whole = ipu::predict_training(e, tg, {&o, 4, false});
  const auto sharded = ipu::predict_training(e, tg, {&o, 4, true});
  for (std::size_t i = 0; i < whole.memory.size(); ++i)
    CHECK(sharded.memory[i].optimizer_bytes == whole.memory[i].optimizer_bytes / 4);
  CHECK(sharded.update_cycles < whole.update_cycles);
  CHECK(sharded.all_reduce == whole.all_reduce);
  const auto o1 = training_options(7);
  const auto e1 = ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 16, 8),
                                                  ipu::ipu_model<ipu::mk2, 4>::description(), o1);
  const auto err = plan_test::error_of([&] { (void)ipu::predict_training(e1, tg, {&o1, 1, true}); });
  CHECK(std::string(err.what()).find("with one replica") != std::string::npos);
}

TEST_CASE("training plan: accumulation below the 2N - 1 stages is refused with PopTorch's rule") {
  const auto o = training_options(6);
  const auto e = plan_test::error_of([&] {
    (void)ipu::pipelined_execution{}.plan(plan_test::pipelined_mlp(4, 16, 8), ipu::ipu_model<ipu::mk2, 4>::description(), o);
  });
  const std::string m = e.what();
  CHECK(m.find("7 stages") != std::string::npos);
  CHECK(m.find("gradient accumulation is 6") != std::string::npos);
  CHECK(m.find("at least 7") != std::string::npos);
}

}  // namespace test_training_plan
