// Pipelined and phased training (exec/training_executor.hpp, train/training_placement.hpp) against
// the single-device training session: the same weights, statistics and losses bit for bit after
// several steps; PopTorch's accumulation rule and annotation errors. Issue 12's done-when on whole
// models exported by PyTorch (tests/data/export_models.py): ResNet-18 and a transformer encoder
// layer trained 10 steps pipelined over 4 IPUs, serial and parallel phased, and replicated over 2
// and 4 replicas give the single-IPU session's weights bit for bit.
#include "ipu/exec/training_executor.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/compile/strategies.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/ops/all.hpp"
#include "ipu/train/session.hpp"

namespace test_training_executor {

namespace {

using ipu::train::training_schedule;

/// An MLP of `layers` Linear + ReLU layers of width 8 over x [4, 8] (a BatchNormalization after the
/// second), layer i annotated with forward stage (or phase) i * stages / layers; with
/// `checkpoint_after`, that layer's MatMul output a recomputation checkpoint.
ipu::graph mlp(int layers, int stages, bool phases, bool batch_norm = true, int checkpoint_after = -1) {
  ipu::builder b("mlp");
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto random = [&](ipu::shape s) {
    std::vector<float> v(static_cast<std::size_t>(s.num_elements()));
    for (auto& x : v) x = u(rng);
    return ipu::make_constant<float>(s, std::span<const float>(v));
  };
  auto h = b.add_input_tensor({ipu::data_type::F32, {4, 8}}, "x");
  for (int i = 0; i < layers; ++i) {
    const auto at = i * stages / layers;
    auto s = b.scope();
    if (phases) s.phase(at).ipu(at % 2);
    else s.stage(at).ipu(at);
    const auto n = std::to_string(i);
    auto m = b.matmul(h, b.add_initialized_input(random({8, 8}), "w" + n));
    if (i == checkpoint_after) m = b.checkpoint_output(m, "checkpoint");
    h = b.add(m, b.add_initialized_input(random({8}), "b" + n));
    if (batch_norm && i == 1) {
      const std::vector<float> one(8, 1.0f), zero(8, 0.0f);
      h = b.batch_normalization(h, b.add_initialized_input(random({8}), "bn/scale"),
                                b.add_initialized_input(random({8}), "bn/bias"),
                                b.add_initialized_input(ipu::make_constant<float>({8}, std::span<const float>(zero)), "bn/mean"),
                                b.add_initialized_input(ipu::make_constant<float>({8}, std::span<const float>(one)), "bn/var"));
    }
    if (i + 1 < layers) h = b.relu(h);
  }
  b.add_output(h);
  return b.build();
}

/// `g` with every annotation dropped: what the single-device session trains.
ipu::graph unannotated(const ipu::graph& g) {
  ipu::graph r(g.name());
  for (ipu::tensor_id t = 0; t < g.num_tensors(); ++t) {
    const auto& n = g.tensor(t);
    r.add_tensor(n.name, n.info, n.kind, n.data);
  }
  for (auto op : g.ops()) {
    op.where = {};
    r.add_op(std::move(op));
  }
  for (auto t : g.outputs()) r.mark_output(t);
  r.set_opset_imports(g.opset_imports());
  return r;
}

ipu::host_tensor random_tensor(ipu::shape s, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  ipu::host_tensor t({ipu::data_type::F32, std::move(s)});
  for (auto& x : t.as<float>()) x = d(rng);
  return t;
}

bool same_bytes(const ipu::host_tensor& a, const ipu::host_tensor& b) {
  return a.info() == b.info() && std::memcmp(a.bytes().data(), b.bytes().data(), a.bytes().size()) == 0;
}

/// Trains `model` for `steps` steps both ways and checks every weight, statistic and loss bit for bit.
void check_same_as_session(const ipu::graph& model, const ipu::train::training_options& o,
                           const ipu::placed_training_options& p, int steps, std::size_t expect_stages) {
  ipu::train::training_session reference(unannotated(model), o);
  ipu::placed_training_session placed(model, o, p);
  CHECK(placed.stages() == expect_stages);
  const auto rows = 4 * o.gradient_accumulation;
  for (int k = 0; k < steps; ++k) {
    const auto x = random_tensor({rows, 8}, 100 + static_cast<unsigned>(k));
    const auto y = random_tensor({rows, 8}, 200 + static_cast<unsigned>(k));
    const auto a = reference.run({{"x", x.view()}}, y.view());
    const auto b = placed.run({{"x", x.view()}}, y.view());
    CHECK(a.micro_batch_losses == b.micro_batch_losses);
    CHECK(a.loss == b.loss);
    REQUIRE(a.outputs.size() == b.outputs.size());
    CHECK(same_bytes(a.outputs[0], b.outputs[0]));
  }
  for (const auto& n : reference.weight_names()) {
    INFO("weight " << n);
    CHECK(same_bytes(reference.weight(n), placed.weight(n)));
  }
  for (const auto& n : reference.buffer_names()) {
    INFO("buffer " << n);
    CHECK(same_bytes(reference.buffer(n), placed.buffer(n)));
  }
  // The weights moved: the comparison is not of untouched initial values.
  const auto initial = ipu::placed_training_session(model, o, p).weight("w0");
  CHECK_FALSE(same_bytes(initial, placed.weight("w0")));
}

ipu::placed_training_options schedule(training_schedule s, bool separate = false) {
  ipu::placed_training_options p;
  p.placement.schedule = s;
  p.placement.separate_backward_phase = separate;
  p.threads = 4;  // more than the cores of a small machine: the stages overlap whatever it has
  return p;
}

ipu::train::training_options mse(std::int64_t accumulation, ipu::train::optimizer opt) {
  ipu::train::training_options o;
  o.loss.kind = ipu::train::loss_kind::mse;
  o.gradient_accumulation = accumulation;
  o.opt = std::move(opt);
  return o;
}

}  // namespace

TEST_SUITE("concurrent") {

TEST_CASE("pipelined training over 2 and 4 IPUs equals the single-device session bit for bit") {
  const ipu::train::sgd momentum{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01};
  SUBCASE("2 forward stages: 3 stages, 4 micro-batches per update, SGD with momentum") {
    check_same_as_session(mlp(4, 2, false), mse(4, momentum), schedule(training_schedule::pipelined), 3, 3);
  }
  SUBCASE("4 forward stages: 7 stages, 8 micro-batches per update, Adam") {
    check_same_as_session(mlp(4, 4, false), mse(8, ipu::train::adam{.lr = 0.01}), schedule(training_schedule::pipelined), 3, 7);
  }
  SUBCASE("one host thread runs the same pipeline to the same bits") {
    auto p = schedule(training_schedule::pipelined);
    p.threads = 1;
    check_same_as_session(mlp(4, 4, false), mse(7, momentum), p, 2, 7);
  }
}

TEST_CASE("pipelined training: the last forward stage runs its own backward; each backward op on its forward op's stage") {
  ipu::placed_training_session s(mlp(4, 4, false), mse(7, ipu::train::sgd{}), schedule(training_schedule::pipelined));
  const auto& tg = s.graph_of_step();
  const auto& pl = s.placement();
  REQUIRE(pl.forward_stages == 4);
  for (ipu::op_id id = 0; id < tg.step.num_ops(); ++id) {
    const auto& op = tg.step.op(id);
    if (!op.where.stage) continue;
    const auto f = static_cast<std::uint32_t>(*op.where.stage);
    INFO(ipu::graph::describe(op));
    CHECK(pl.stage_of[id] == (id < tg.forward_ops ? f : 6 - f));
  }
  // Stage 3 holds the last layer's forward, the loss, and the last layer's backward.
  bool forward = false, backward = false;
  for (auto id : s.stage_ops(3)) (id < tg.forward_ops ? forward : backward) = true;
  CHECK(forward);
  CHECK(backward);
  // Activations are stashed between stages and freed after their last reader.
  const auto x = random_tensor({28, 8}, 1), y = random_tensor({28, 8}, 2);
  (void)s.run({{"x", x.view()}}, y.view());
  CHECK(s.peak_stashed_bytes() > 0);
  CHECK(s.threads_used() == 4);
}

TEST_CASE("recomputation (Standard, NormOnly) changes what a pipeline stashes, not its results") {
  const auto model = mlp(4, 4, false);
  const auto o = mse(7, ipu::train::sgd{.lr = 0.05, .momentum = 0.9});
  auto with = [](ipu::recomputation r) {
    auto p = schedule(training_schedule::pipelined);
    p.recompute = r;
    return p;
  };
  check_same_as_session(model, o, with(ipu::recomputation::standard), 2, 7);
  check_same_as_session(model, o, with(ipu::recomputation::norm_only), 2, 7);
  const auto x = random_tensor({28, 8}, 1), y = random_tensor({28, 8}, 2);
  auto peak = [&](ipu::recomputation r, std::size_t* recomputed_ops = nullptr, bool* only_norm = nullptr) {
    auto p = with(r);
    p.threads = 1;  // one thread runs the stages in one order: the peak does not depend on timing
    ipu::placed_training_session s(model, o, p);
    (void)s.run({{"x", x.view()}}, y.view());
    std::size_t n = 0;
    bool norm = true;
    for (std::size_t k = 0; k < s.stages(); ++k) {
      if (k < 4) CHECK(s.recomputed_ops(k).empty());  // forward stages and the fused last one recompute nothing
      for (auto id : s.recomputed_ops(k)) {
        ++n;
        norm = norm && s.graph_of_step().step.op(id).name.rfind("bn_train/", 0) == 0;
        CHECK(id < s.graph_of_step().forward_ops);
      }
    }
    if (recomputed_ops) *recomputed_ops = n;
    if (only_norm) *only_norm = norm;
    return s.peak_stashed_bytes();
  };
  // The stash is measured on one thread, whose order of stages is fixed.
  std::size_t standard_ops = 0, norm_ops = 0;
  bool norm_only = false;
  const auto none = peak(ipu::recomputation::none);
  const auto standard = peak(ipu::recomputation::standard, &standard_ops);
  const auto norms = peak(ipu::recomputation::norm_only, &norm_ops, &norm_only);
  CHECK(standard < none);
  CHECK(norms < none);
  CHECK(standard < norms);
  CHECK(standard_ops > norm_ops);
  CHECK(norm_ops > 0);
  CHECK(norm_only);
  // RecomputeAll: in a pipeline the ops Standard reruns.
  check_same_as_session(model, o, with(ipu::recomputation::all), 2, 7);
  std::size_t all_ops = 0;
  CHECK(peak(ipu::recomputation::all, &all_ops) == standard);
  CHECK(all_ops == standard_ops);
  CHECK_THROWS_WITH_AS(ipu::placed_training_session(mlp(4, 4, true), o, [] {
    auto p = schedule(training_schedule::serial_phased);
    p.recompute = ipu::recomputation::standard;
    return p;
  }()), doctest::Contains("recomputation was asked of phased execution"), ipu::error);
}

TEST_CASE("a recomputation checkpoint is stashed: what comes before it is not recomputed for what reads it") {
  // 2 forward stages of 2 layers each; layer 1's MatMul output is a checkpoint inside stage 0. The
  // backward reads the ops after it (the bias Add, for the BatchNormalization's gradient), but not
  // the MatMul's own output: with the checkpoint, that MatMul is not rerun.
  const auto o = mse(3, ipu::train::sgd{.lr = 0.05, .momentum = 0.9});
  auto p = schedule(training_schedule::pipelined);
  p.recompute = ipu::recomputation::all;
  const auto with = mlp(4, 2, false, true, 1), without = mlp(4, 2, false);
  std::size_t marked = 0;
  for (const auto& op : with.ops()) marked += op.where.checkpoint ? 1 : 0;
  CHECK(marked == 1);
  check_same_as_session(with, o, p, 2, 3);
  const auto x = random_tensor({12, 8}, 1), y = random_tensor({12, 8}, 2);
  auto measure = [&](const ipu::graph& g, ipu::recomputation r, std::size_t& ops) {
    auto q = p;
    q.recompute = r;
    q.threads = 1;
    ipu::placed_training_session s(g, o, q);
    (void)s.run({{"x", x.view()}}, y.view());
    ops = 0;
    for (std::size_t k = 0; k < s.stages(); ++k)
      for (auto id : s.recomputed_ops(k)) {
        ++ops;
        CHECK_FALSE(s.graph_of_step().step.op(id).where.checkpoint);  // never recomputed
      }
    return s.peak_stashed_bytes();
  };
  std::size_t ops_plain = 0, ops_checkpoint = 0, ops_none = 0;
  const auto plain = measure(without, ipu::recomputation::all, ops_plain);
  const auto checkpointed = measure(with, ipu::recomputation::all, ops_checkpoint);
  const auto none = measure(with, ipu::recomputation::none, ops_none);
  CHECK(ops_none == 0);
  CHECK(ops_checkpoint > 0);
  CHECK(ops_checkpoint < ops_plain);  // layer 1 reads the checkpoint from the stash
  CHECK(checkpointed > plain);        // which costs its bytes per micro-batch in flight
  CHECK(checkpointed < none);
  // Without placement a checkpoint changes nothing: the single-device session trains the model.
  CHECK_NOTHROW(ipu::train::training_session(unannotated(with), o));
  ipu::builder b("unplaced");
  const std::vector<float> w(64, 0.1f);
  auto h = b.add_input_tensor({ipu::data_type::F32, {4, 8}}, "x");
  h = b.checkpoint_output(b.matmul(h, b.add_initialized_input(ipu::make_constant<float>({8, 8}, std::span<const float>(w)), "w0")));
  b.add_output(h);
  CHECK_NOTHROW(ipu::train::training_session(b.build(), o));
}

TEST_CASE("each stage's memory plan holds its stash: a hand-computed two-layer case") {
  // Layer 0 (stage 0): a0 = x w0 + b0, h = Relu(a0); layer 1 (stage 1): h w1 + b1, the loss and its
  // backward, which sends dh [4, 8] back. Stage 2, layer 0's backward, reads a0 (Relu's gradient);
  // stage 1 reads h. Each is F32 [4, 8]: 128 bytes.
  const auto model = mlp(2, 2, false, false);
  const auto o = mse(3, ipu::train::sgd{.lr = 0.05});
  ipu::placed_training_session s(model, o, schedule(training_schedule::pipelined));
  REQUIRE(s.stages() == 3);
  // Lockstep: h is held for 2 micro-batches (made at 0, read at 1), a0 for 3 (0 to 2), dh for 2 (1 to 2).
  CHECK(s.memory_plan(0).stash_bytes_per_micro_batch == 256);
  CHECK(s.memory_plan(0).stash_bytes == 128 * 2 + 128 * 3);
  CHECK(s.memory_plan(1).stash_bytes_per_micro_batch == 128);
  CHECK(s.memory_plan(1).stash_bytes == 128 * 2);
  CHECK(s.memory_plan(2).stash_bytes == 0);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(s.memory_plan(k).arena_bytes > 0);
    CHECK(s.memory_plan(k).total() == s.memory_plan(k).arena_bytes + s.memory_plan(k).stash_bytes);
  }
  // Recomputing stage 0 for its backward stashes nothing for stage 2: a0 is made again there.
  auto r = schedule(training_schedule::pipelined);
  r.recompute = ipu::recomputation::all;
  CHECK(ipu::placed_training_session(model, o, r).memory_plan(0).stash_bytes == 128 * 2);
  // Serial phased: every micro-batch (2) passes a phase before the next reads it.
  ipu::placed_training_session phased(mlp(2, 2, true, false), mse(2, ipu::train::sgd{.lr = 0.05}),
                                      schedule(training_schedule::serial_phased));
  CHECK(phased.memory_plan(0).stash_bytes == 256 * 2);
  CHECK(phased.memory_plan(1).stash_bytes == 128 * 2);
}

TEST_CASE("ops marked Recompute are rerun by their backward stage whatever autoRecomputation says: the hand-computed stash") {
  // The two-layer case above: stage 2 reads a0 = x w0 + b0 (Relu's gradient). PopART's
  // RecomputeType::Recompute on layer 0's Add alone reruns the Add, which reads the MatMul's output
  // m0 from the stash instead of a0: the same 128 bytes held 3 micro-batches. Marking the MatMul
  // too reruns both from x and stashes only h (128 bytes, 2 micro-batches), as RecomputeAll does.
  const auto o = mse(3, ipu::train::sgd{.lr = 0.05});
  auto marked = [](bool matmul_too) {
    auto r = mlp(2, 2, false, false);
    bool add = false, matmul = false;
    for (ipu::op_id id = 0; id < r.num_ops(); ++id) {
      auto& op = r.op(id);
      if (op.type == "Add" && !add) op.where.recompute = add = true;
      if (op.type == "MatMul" && !matmul && matmul_too) op.where.recompute = matmul = true;
    }
    return r;
  };
  auto recomputed = [](const ipu::placed_training_session& s, std::size_t k) {
    std::vector<std::string> types;
    for (auto id : s.recomputed_ops(k)) types.push_back(s.graph_of_step().step.op(id).type);
    return types;
  };
  for (const bool both : {false, true}) {
    CAPTURE(both);
    const auto model = marked(both);
    check_same_as_session(model, o, schedule(training_schedule::pipelined), 2, 3);  // the weights bit for bit
    ipu::placed_training_session s(model, o, schedule(training_schedule::pipelined));  // recompute: none
    CHECK(recomputed(s, 0).empty());
    CHECK(recomputed(s, 1).empty());
    CHECK(recomputed(s, 2) == (both ? std::vector<std::string>{"MatMul", "Add"} : std::vector<std::string>{"Add"}));
    CHECK(s.memory_plan(0).stash_bytes == (both ? 128 * 2 : 128 * 2 + 128 * 3));
    CHECK(s.memory_plan(0).stash_bytes_per_micro_batch == (both ? 128 : 256));
    CHECK(s.memory_plan(1).stash_bytes == 128 * 2);  // dh, as without marks
  }
  // The marks are not recomputation of phased execution, nor of the single-device session.
  auto phased = mlp(2, 2, true, false);
  phased.op(0).where.recompute = true;
  CHECK_THROWS_WITH_AS(ipu::placed_training_session(phased, o, schedule(training_schedule::serial_phased)),
                       doctest::Contains("is marked for recomputation (RecomputeType::Recompute) in phased execution"), ipu::error);
  auto unplaced = unannotated(phased);
  unplaced.op(0).where.recompute = true;
  CHECK_THROWS_WITH_AS(ipu::train::training_session(unplaced, o),
                       doctest::Contains("is marked for recomputation (RecomputeType::Recompute)"), ipu::error);
}

TEST_CASE("phased training, serial and parallel, with and without a separate backward phase, equals the session") {
  const ipu::train::sgd momentum{.lr = 0.05, .momentum = 0.9};
  SUBCASE("serial phased: 4 phases, 7 in all") {
    check_same_as_session(mlp(4, 4, true), mse(2, momentum), schedule(training_schedule::serial_phased), 3, 7);
  }
  SUBCASE("parallel phased: 4 phases, 7 in all") {
    check_same_as_session(mlp(4, 4, true), mse(3, momentum), schedule(training_schedule::parallel_phased), 3, 7);
  }
  SUBCASE("parallel phased with a separate backward phase: 8 in all") {
    check_same_as_session(mlp(4, 4, true), mse(2, momentum), schedule(training_schedule::parallel_phased, true), 3, 8);
  }
  SUBCASE("one micro-batch: the update runs in the backward phases") {
    check_same_as_session(mlp(4, 2, true), mse(1, ipu::train::adam{.lr = 0.01}), schedule(training_schedule::serial_phased), 3, 3);
  }
}

}  // TEST_SUITE("concurrent")

TEST_CASE("pipelined training refuses a gradient accumulation below its stages, as PopTorch does") {
  const auto model = mlp(4, 2, false);
  CHECK_NOTHROW(ipu::placed_training_session(model, mse(3, ipu::train::sgd{}), schedule(training_schedule::pipelined)));
  try {
    ipu::placed_training_session(model, mse(2, ipu::train::sgd{}), schedule(training_schedule::pipelined));
    FAIL("a gradient accumulation of 2 over 3 stages was accepted");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::usage);
    const std::string m = e.what();
    CHECK(m.find("gradient accumulation of 2 is below the pipeline's 3 stages (2 forward, 1 backward") != std::string::npos);
    CHECK(m.find("accumulate at least 3 micro-batches per weight update (Training.gradientAccumulation)") != std::string::npos);
  }
  // Phased execution has no such rule.
  CHECK_NOTHROW(ipu::placed_training_session(mlp(4, 2, true), mse(2, ipu::train::sgd{}), schedule(training_schedule::serial_phased)));
}

TEST_CASE("placed training refuses annotations it cannot run, saying which op and what to do") {
  auto fails = [](const ipu::graph& g, const ipu::placed_training_options& p, const std::string& want) {
    try {
      ipu::placed_training_session(g, mse(8, ipu::train::sgd{}), p);
      FAIL("accepted: " << want);
    } catch (const ipu::error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(want) != std::string::npos);
    }
  };
  // An op that reads from a later stage: a micro-batch cannot go back.
  ipu::builder b("backwards");
  const auto x = b.add_input_tensor({ipu::data_type::F32, {4, 8}}, "x");
  const std::vector<float> w(64, 0.1f);
  ipu::tensor_id h;
  {
    auto s = b.scope().stage(1).ipu(1);
    h = b.matmul(x, b.add_initialized_input(ipu::make_constant<float>({8, 8}, std::span<const float>(w)), "w0"), "late");
  }
  {
    auto s = b.scope().stage(0).ipu(0);
    h = b.relu(h, "early");
  }
  b.add_output(h);
  fails(b.build(), schedule(training_schedule::pipelined), "reads 'late', made later, at stage 1");
  // Stages with a gap; no annotations at all; a separate backward phase asked of a pipeline.
  fails(mlp(4, 4, false, false), [] {
    auto p = schedule(training_schedule::pipelined);
    p.placement.separate_backward_phase = true;
    return p;
  }(), "a separate backward phase was asked of a pipeline");
  fails(mlp(4, 4, false), schedule(training_schedule::serial_phased), "no op of the model names its phase");
  fails(unannotated(mlp(4, 4, false)), schedule(training_schedule::pipelined), "no op of the model names its stage");
  ipu::builder gap("gap");
  auto y = gap.add_input_tensor({ipu::data_type::F32, {4, 8}}, "x");
  {
    auto s = gap.scope().stage(0);
    y = gap.matmul(y, gap.add_initialized_input(ipu::make_constant<float>({8, 8}, std::span<const float>(w)), "w0"));
  }
  {
    auto s = gap.scope().stage(2);
    y = gap.relu(y);
  }
  gap.add_output(y);
  fails(gap.build(), schedule(training_schedule::pipelined), "stage 1 has no ops, but later ones do");
  // Automatic loss scaling is refused rather than ignored.
  auto o = mse(8, ipu::train::sgd{});
  o.auto_loss_scaling.enabled = true;
  CHECK_THROWS_WITH_AS(ipu::placed_training_session(mlp(4, 2, false), o, schedule(training_schedule::pipelined)),
                       doctest::Contains("automatic loss scaling is not supported"), ipu::error);
}

namespace {

/// `g` with the ops that compute from its inputs cut, in topological order, into `parts` runs of
/// about as many ops each, run k annotated stage k on IPU k, or phase k on IPU k % 2. An op reading
/// only weights and constants (PyTorch's export makes Identity copies of shared initializers) goes
/// with its first reader.
ipu::graph in_parts(const ipu::graph& g, std::size_t parts, bool phases) {
  const auto order = ipu::topological_order(g);
  std::vector<bool> computed(g.num_tensors(), false), from_input(g.num_ops(), false);
  for (auto t : g.inputs()) computed[t] = g.tensor(t).kind == ipu::tensor_kind::input;
  std::size_t computing = 0;
  for (auto id : order) {
    for (auto t : g.op(id).inputs) from_input[id] = from_input[id] || (t != ipu::no_tensor && computed[t]);
    for (auto t : g.op(id).outputs)
      if (t != ipu::no_tensor) computed[t] = from_input[id];
    computing += from_input[id] ? 1 : 0;
  }
  std::vector<std::int64_t> part(g.num_ops(), 0);
  std::size_t i = 0;
  for (auto id : order)
    if (from_input[id]) part[id] = static_cast<std::int64_t>(i++ * parts / computing);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (from_input[*it]) continue;
    auto first = static_cast<std::int64_t>(parts - 1);
    for (auto t : g.op(*it).outputs)
      if (t != ipu::no_tensor)
        for (auto c : g.tensor(t).consumers) first = std::min(first, part[c]);
    part[*it] = first;
  }
  ipu::graph r(g.name());
  for (ipu::tensor_id t = 0; t < g.num_tensors(); ++t) {
    const auto& n = g.tensor(t);
    r.add_tensor(n.name, n.info, n.kind, n.data);
  }
  for (ipu::op_id id = 0; id < g.num_ops(); ++id) {
    auto op = g.op(id);
    op.where = {};
    if (phases) op.where.phase = part[id];
    else op.where.stage = part[id];
    op.where.ipu = phases ? part[id] % 2 : part[id];
    r.add_op(std::move(op));
  }
  for (auto t : g.outputs()) r.mark_output(t);
  r.set_opset_imports(g.opset_imports());
  return r;
}

/// A model of the exported set, loaded once per process; exported first when the fixture's default
/// set leaves it out (ResNet-18's, for the skipped case).
const ipu::graph& exported(const std::string& name) {
  static std::map<std::string, ipu::graph> loaded;
  auto it = loaded.find(name);
  const auto file = std::filesystem::path(IPU_TEST_MODELS) / (name + ".onnx");
  if (it == loaded.end() && !std::filesystem::exists(file)) {
    const std::string cmd = std::string(IPU_PYTHON) + " " + IPU_SOURCE_DIR + "/tests/data/export_models.py " +
                            IPU_TEST_MODELS + " " + name;
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  if (it == loaded.end()) it = loaded.emplace(name, ipu::onnx::load_model(file)).first;
  return it->second;
}

/// Step k's inputs: `micro` micro-batches of x (normal) and class labels, stacked.
struct step_data {
  ipu::host_tensor x, labels;
};
step_data data_for(const ipu::graph& g, std::int64_t micro, std::int64_t classes, int k) {
  auto dims = g.tensor(g.inputs()[0]).info.shape.dims();
  const auto rows = dims[0];
  dims[0] *= micro;
  step_data d{random_tensor(ipu::shape(dims), 300 + static_cast<unsigned>(k)),
              ipu::host_tensor({ipu::data_type::S64, {rows * micro}})};
  std::mt19937 rng(400 + static_cast<unsigned>(k));
  for (auto& l : d.labels.as<std::int64_t>()) l = static_cast<std::int64_t>(rng() % static_cast<unsigned>(classes));
  return d;
}

ipu::train::training_options cross_entropy(std::int64_t accumulation) {
  ipu::train::training_options o;
  o.loss.kind = ipu::train::loss_kind::cross_entropy;
  o.gradient_accumulation = accumulation;
  o.opt = ipu::train::sgd{.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-3};
  return o;
}

/// Trains exported model `name` 10 steps on the single-IPU session with `micro` micro-batches per
/// update, and with `run` (a placed or replicated session over the same micro-batches), and checks
/// every loss and weight (and, with `buffers`, running statistic) bit for bit.
template <class Session>
void check_ten_steps(const std::string& name, std::int64_t classes, std::int64_t micro, Session& other, bool buffers) {
  const auto& g = exported(name);
  ipu::train::training_session reference(g, cross_entropy(micro));
  std::vector<ipu::host_tensor> initial;
  for (const auto& n : reference.weight_names()) initial.push_back(reference.weight(n));
  const auto started = std::chrono::steady_clock::now();
  for (int k = 0; k < 10; ++k) {
    const auto d = data_for(g, micro, classes, k);
    const auto a = reference.run({{"x", d.x.view()}}, d.labels.view());
    const auto b = other.run({{"x", d.x.view()}}, d.labels.view());
    INFO("step " << k);
    CHECK(a.micro_batch_losses == b.micro_batch_losses);
  }
  MESSAGE(name << ": 10 steps of " << micro << " micro-batches, both ways, in "
               << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() << " s");
  std::size_t moved = 0;
  const auto names = reference.weight_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    INFO("weight " << names[i]);
    CHECK(same_bytes(reference.weight(names[i]), other.weight(names[i])));
    if (!same_bytes(reference.weight(names[i]), initial[i])) ++moved;
  }
  CHECK(moved * 2 > names.size());  // most weights moved: not a comparison of initial values
  if (buffers)
    for (const auto& n : reference.buffer_names()) {
      INFO("buffer " << n);
      CHECK(same_bytes(reference.buffer(n), other.buffer(n)));
    }
}

/// Issue 12's done-when for one exported model.
void check_across_ipus(const std::string& name, std::int64_t classes) {
  const auto& g = exported(name);
  SUBCASE("pipelined over 4 IPUs: 7 stages, 7 micro-batches") {
    ipu::placed_training_session s(in_parts(g, 4, false), cross_entropy(7), schedule(training_schedule::pipelined));
    CHECK(s.stages() == 7);
    check_ten_steps(name, classes, 7, s, true);
  }
  SUBCASE("serial phased, 4 phases over 2 IPUs, 2 micro-batches") {
    ipu::placed_training_session s(in_parts(g, 4, true), cross_entropy(2), schedule(training_schedule::serial_phased));
    check_ten_steps(name, classes, 2, s, true);
  }
  SUBCASE("parallel phased, 4 phases over 2 IPUs, 2 micro-batches") {
    ipu::placed_training_session s(in_parts(g, 4, true), cross_entropy(2), schedule(training_schedule::parallel_phased));
    check_ten_steps(name, classes, 2, s, true);
  }
  // Each replica keeps its own running statistics (those of its micro-batches): only the weights
  // are the single IPU's.
  SUBCASE("2 replicas, 1 micro-batch each") {
    ipu::train::training_session s(g, cross_entropy(1), {}, ipu::train::output_mode::final, {.replicas = 2});
    check_ten_steps(name, classes, 2, s, false);
  }
  SUBCASE("4 replicas, 1 micro-batch each") {
    ipu::train::training_session s(g, cross_entropy(1), {}, ipu::train::output_mode::final, {.replicas = 4});
    check_ten_steps(name, classes, 4, s, false);
  }
}

}  // namespace

// Skipped by default: under CI's ASan it ran over 10 minutes (the 11M weights' updates and the
// weight-bound convolutions dominate even at 16x16), far over the suite's budget. Run it with
// `ipu_test_exec -tc='*ResNet-18*' --no-skip`.
TEST_CASE("ResNet-18 (16x16 images, 2 per micro-batch) trains 10 steps across IPUs and replicas as on one, bit for bit" *
          doctest::skip()) {
  check_across_ipus("resnet18_train", 10);
}

TEST_CASE("a transformer encoder layer trains 10 steps across IPUs and replicas as on one, bit for bit") {
  check_across_ipus("encoder_layer_train", 3);
}

TEST_CASE("PopART's RecomputationType names and values map to the executor's recomputation") {
  CHECK(ipu::recomputation_from("None") == ipu::recomputation::none);
  CHECK(ipu::recomputation_from("Standard") == ipu::recomputation::standard);
  CHECK(ipu::recomputation_from("2") == ipu::recomputation::norm_only);
  CHECK(ipu::recomputation_from("RecomputeAll") == ipu::recomputation::all);
  CHECK(ipu::recomputation_from("Pipeline") == ipu::recomputation::all);
  CHECK_THROWS_WITH_AS(ipu::recomputation_from("Some"), doctest::Contains("use None, Standard, NormOnly"), ipu::error);
}

TEST_CASE("PopTorch's options carry autoRecomputation to the pipeline: the hand-computed stash shrinks") {
  // The two-layer case of "each stage's memory plan holds its stash": without recomputation stage 0
  // stashes h (2 micro-batches) and a0 (3) of 128 bytes each; recomputing, a0 is made again at stage 2.
  const auto model = mlp(2, 2, false, false);
  const auto o = mse(3, ipu::train::sgd{.lr = 0.05});
  auto session = [&](const char* recompute) {
    ipu::options opts;
    opts.load_from_string(std::string("setExecutionStrategy(poptorch.PipelinedExecution())\n") +
                          "_Popart.set(\"autoRecomputation\", " + recompute + ")\n");
    return ipu::placed_training_session(model, o, ipu::placed_options_from(opts));
  };
  const auto none = session("0");
  CHECK(none.memory_plan(0).stash_bytes == 128 * 2 + 128 * 3);
  CHECK(none.recomputed_ops(2).empty());
  const auto all = session("\"RecomputeAll\"");
  CHECK(all.memory_plan(0).stash_bytes == 128 * 2);
  CHECK_FALSE(all.recomputed_ops(2).empty());
  // Options the executor cannot honour are refused before anything runs.
  auto sharded = ipu::options().execution_strategy(ipu::strategy_settings::sharded());
  sharded.auto_recomputation(ipu::recomputation::standard);
  CHECK_THROWS_WITH_AS((void)ipu::placed_options_from(sharded), doctest::Contains("the execution strategy is ShardedExecution"),
                       ipu::error);
  auto piped = ipu::options().execution_strategy(ipu::strategy_settings::pipelined());
  piped.auto_recomputation(ipu::recomputation::standard);
  // The planner takes it for training (training_plan_options_from), not for an inference plan.
  const auto po = ipu::plan_options_from(piped, true);
  CHECK(ipu::training_plan_options_from(piped, po).recompute == ipu::recomputation::standard);
  CHECK_THROWS_WITH_AS((void)ipu::plan_options_from(piped, false), doctest::Contains("for an inference model"),
                       ipu::error);
  CHECK_THROWS_WITH_AS((void)ipu::training_plan_options_from(sharded, po), doctest::Contains("a step that is not pipelined"),
                       ipu::error);
}

TEST_CASE("PopTorch's execution strategies choose the placement; what the executor does not apply is refused") {
  const auto pipelined = ipu::placed_options_from(ipu::strategy_settings::pipelined());
  CHECK(pipelined.placement.schedule == training_schedule::pipelined);
  // PopTorch's phased strategies list their phases; one that leaves them to the ops' annotations:
  ipu::strategy_settings parallel;
  parallel.mode = ipu::execution_mode::parallel_phased;
  parallel.separate_backward_phase = true;
  const auto p = ipu::placed_options_from(parallel);
  CHECK(p.placement.schedule == training_schedule::parallel_phased);
  CHECK(p.placement.separate_backward_phase);
  CHECK(ipu::placed_training_session(mlp(4, 4, true), mse(2, ipu::train::sgd{}), p).stages() == 8);
  auto serial = parallel;
  serial.mode = ipu::execution_mode::serial_phased;
  CHECK(ipu::placed_options_from(serial).placement.schedule == training_schedule::serial_phased);
  const auto listed = ipu::strategy_settings::serial_phased({ipu::phase{{ipu::stage{{"A"}, 0}}}});
  CHECK_THROWS_WITH_AS(ipu::placed_options_from(listed), doctest::Contains("lists its stages or phases"), ipu::error);
  CHECK_THROWS_WITH_AS(ipu::placed_options_from(ipu::strategy_settings::sharded()), doctest::Contains("sharded"), ipu::error);
  CHECK_THROWS_WITH_AS(ipu::placed_options_from(ipu::strategy_settings::pipelined(ipu::auto_stage::auto_increment)),
                       doctest::Contains("AutoIncrement"), ipu::error);
  auto offchip = serial;
  offchip.tensors_liveness = ipu::liveness::off_chip_after_fwd;
  CHECK_THROWS_WITH_AS(ipu::placed_options_from(offchip), doctest::Contains("AlwaysLive"), ipu::error);
}

}  // namespace test_training_executor
