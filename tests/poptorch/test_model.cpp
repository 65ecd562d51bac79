// PopTorch's model wrappers: the seed's trainingModel example against PyTorch (tests/train/
// torch_training.py), the implicit and explicit weight syncs between the host model and its
// training and inference models, the CounterModel's buffer (seed 4.8), and what they refuse.
#include "ipu/poptorch/model.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../train/pytorch_reference.hpp"
#include "../train/replica_grouping_problem.hpp"
#include "ipu/builder/builder.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/ops/all.hpp"

namespace test_model {

namespace {

using ipu::host_tensor;
using ipu_test::relative_difference;

ipu::poptorch::loss_spec mse_loss() {
  ipu::poptorch::loss_spec s;
  s.loss.kind = ipu::train::loss_kind::mse;
  return s;
}

float at(const host_tensor& t, std::size_t i) { return t.as<float>()[i]; }

/// The seed's CounterModel: `i` = [0.], output `i + 1`; with `registered`, `i` takes the output's
/// value after each run.
ipu::poptorch::model counter(bool registered) {
  ipu::builder b("counter");
  const auto i = b.add_initialized_input(ipu::make_constant<float>({1}, {0.F}), "i");
  const auto one = b.add_constant(ipu::make_constant<float>({1}, {1.F}), "one");
  const auto next = b.add(i, one, "next");
  b.add_output(next);
  ipu::poptorch::model m(std::move(b).build());
  if (registered) m.register_buffer("i", "next");
  return m;
}

/// The seed's Linear(10, 10), as PyTorch exported it, untrained; its input and target.
struct seed_case {
  ipu::poptorch::model m;
  host_tensor x, target;
};
seed_case seed_example() {
  const auto dir = ipu_test::pytorch_runs("torch_training.py") / "seed_example";
  return {ipu::poptorch::model(ipu::onnx::load_model(dir / "model.onnx")),
          ipu_test::row(ipu::io::read_npy(dir / "x.npy"), 0), ipu_test::row(ipu::io::read_npy(dir / "labels.npy"), 0)};
}

/// W x + b for the seed's Linear(10, 10) with x [1, 10], computed here.
std::vector<double> linear(const host_tensor& w, const host_tensor& b, const host_tensor& x) {
  std::vector<double> y(10);
  for (std::size_t o = 0; o < 10; ++o) {
    double s = at(b, o);
    for (std::size_t i = 0; i < 10; ++i) s += static_cast<double>(at(w, o * 10 + i)) * at(x, i);
    y[o] = s;
  }
  return y;
}
void check_values(const host_tensor& got, const std::vector<double>& want) {
  REQUIRE(got.info().shape.num_elements() == static_cast<std::int64_t>(want.size()));
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(at(got, i) == doctest::Approx(want[i]).epsilon(1e-6));
}

}  // namespace

TEST_CASE("the seed's trainingModel example: Linear(10, 10) + MSELoss, 800 steps of PopTorch's default SGD, as PyTorch") {
  const auto dir = ipu_test::pytorch_runs("torch_training.py") / "seed_example";
  auto [m, x, target] = seed_example();
  ipu::poptorch::training_model train(m, {}, ipu::train::sgd{}, mse_loss());
  const auto losses = ipu::io::read_npy(dir / "losses.npy");
  ipu::train::step_result r;
  for (std::size_t k = 0; k < 800; ++k) {
    r = train({{"x", x.view()}}, target.view());
    INFO("step " << k);
    CHECK(r.loss == doctest::Approx(losses.as<double>()[k]).epsilon(1e-4).scale(1e-3));
  }
  // As the seed asserts: the last call's output (before its update) is PyTorch's trained output.
  const auto native_out = ipu::io::read_npy(dir / "out.npy");
  CHECK(relative_difference(r.outputs.at(0), native_out) < 1e-4);
  // The host model has the trained weights without an explicit copy (the implicit sync).
  CHECK(relative_difference(m.weight("fc.weight"), ipu::io::read_npy(dir / "fc.weight.npy")) < 1e-4);
  CHECK(relative_difference(m.weight("fc.bias"), ipu::io::read_npy(dir / "fc.bias.npy")) < 1e-4);
}

TEST_CASE("a training and an inference model over one host model share its weights, as PoplarExecutor keeps them") {
  auto [m, x, target] = seed_example();
  ipu::poptorch::inference_model infer(m);
  const auto w0 = m.weight("fc.weight"), b0 = m.weight("fc.bias");
  check_values(infer({{"x", x.view()}}).at(0), linear(w0, b0, x));

  ipu::poptorch::training_model train(m, {}, ipu::train::sgd{}, mse_loss());
  for (int k = 0; k < 5; ++k) (void)train({{"x", x.view()}}, target.view());
  // The inference model's next call sees the trained weights, and so does the host model.
  const auto trained = infer({{"x", x.view()}}).at(0);
  const auto w1 = m.weight("fc.weight"), b1 = m.weight("fc.bias");
  CHECK(relative_difference(w1, w0) > 1e-4);
  check_values(trained, linear(w1, b1, x));
  CHECK(relative_difference(trained, train({{"x", x.view()}}, target.view()).outputs.at(0)) == 0);

  SUBCASE("host weights changed by other means reach a wrapper with copy_weights_to_device") {
    const auto zeros = host_tensor(w0.info());  // zero-initialised
    const auto bias = host_tensor::from<float>({10}, {0.F, 1.F, 2.F, 3.F, 4.F, 5.F, 6.F, 7.F, 8.F, 9.F});
    const auto before = infer({{"x", x.view()}}).at(0);
    m.set_weight("fc.weight", zeros.view());
    m.set_weight("fc.bias", bias.view());
    CHECK(relative_difference(infer({{"x", x.view()}}).at(0), before) == 0);  // not seen yet
    infer.copy_weights_to_device();
    check_values(infer({{"x", x.view()}}).at(0), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});

    // The training model too: its next step starts from W = 0, b = bias, so its output is the bias
    // and its loss mean((bias - target)^2).
    train.copy_weights_to_device();
    const auto r = train({{"x", x.view()}}, target.view());
    check_values(r.outputs.at(0), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    double want = 0;
    for (std::size_t i = 0; i < 10; ++i) want += (static_cast<double>(i) - at(target, i)) * (static_cast<double>(i) - at(target, i));
    CHECK(r.loss == doctest::Approx(want / 10).epsilon(1e-6));
  }
  SUBCASE("copy_weights_to_host of a training model, then the device's weights changed by the host") {
    train.copy_weights_to_host();
    CHECK(relative_difference(m.weight("fc.weight"), w1) > 0);  // one more step was made above
    const auto w2 = m.weight("fc.weight"), b2 = m.weight("fc.bias");
    check_values(infer({{"x", x.view()}}).at(0), linear(w2, b2, x));
  }
}

TEST_CASE("a registered buffer keeps its value between runs (seed 4.8's CounterModel); a plain initializer is frozen") {
  SUBCASE("registered: 1, then 2; the host's copy only after copy_weights_to_host") {
    auto m = counter(true);
    ipu::poptorch::inference_model infer(m);
    CHECK(at(infer().at(0), 0) == 1.F);
    CHECK(at(infer().at(0), 0) == 2.F);
    CHECK(at(m.weight("i"), 0) == 0.F);
    infer.copy_weights_to_host();
    CHECK(at(m.weight("i"), 0) == 2.F);
    CHECK(at(infer().at(0), 0) == 3.F);
    // The host's value replaces the device's only on copy_weights_to_device.
    const auto ten = host_tensor::from<float>({1}, {10.F});
    m.set_weight("i", ten.view());
    CHECK(at(infer().at(0), 0) == 4.F);
    infer.copy_weights_to_device();
    CHECK(at(infer().at(0), 0) == 11.F);
    // A second inference model starts from the host's value.
    ipu::poptorch::inference_model other(m);
    CHECK(at(other().at(0), 0) == 11.F);
  }
  SUBCASE("not registered: frozen, 1 and 1") {
    auto m = counter(false);
    ipu::poptorch::inference_model infer(m);
    CHECK(at(infer().at(0), 0) == 1.F);
    CHECK(at(infer().at(0), 0) == 1.F);
    infer.copy_weights_to_host();
    CHECK(at(m.weight("i"), 0) == 0.F);
  }
}

TEST_CASE("PopTorch's model wrappers refuse what they cannot do, saying what") {
  auto m = counter(false);
  CHECK_THROWS_WITH_AS(m.register_buffer("one", "next"), doctest::Contains("not a floating-point initializer"), ipu::error);
  CHECK_THROWS_WITH_AS(m.register_buffer("i", "nothing"), doctest::Contains("no tensor of the model"), ipu::error);
  CHECK_THROWS_WITH_AS((void)m.weight("j"), doctest::Contains("no weight named 'j'"), ipu::error);
  const auto two = host_tensor::from<float>({2}, {1.F, 2.F});
  CHECK_THROWS_WITH_AS(m.set_weight("i", two.view()), doctest::Contains("F32[2]"), ipu::error);

  ipu::builder b("typed");
  const auto i = b.add_initialized_input(ipu::make_constant<float>({1}, {0.F}), "i");
  const auto x = b.add_input_tensor({ipu::data_type::F32, {2}}, "x");
  const auto y = b.add(i, x, "y");
  b.add_output(y);
  ipu::poptorch::model typed(std::move(b).build());
  CHECK_THROWS_WITH_AS(typed.register_buffer("i", "y"), doctest::Contains("its update 'y' is F32[2]"), ipu::error);
  typed.register_buffer("i", "i");
  CHECK_THROWS_WITH_AS(typed.register_buffer("i", "i"), doctest::Contains("registered twice"), ipu::error);
  CHECK_THROWS_WITH_AS(ipu::poptorch::training_model(typed, {}, ipu::train::sgd{}, mse_loss()),
                       doctest::Contains("registered buffers (i)"), ipu::error);

  ipu::poptorch::inference_model infer(typed);
  CHECK_THROWS_WITH_AS(typed.register_buffer("i", "y"), doctest::Contains("after the model was wrapped"), ipu::error);
  const auto x3 = host_tensor::from<float>({3}, {1.F, 2.F, 3.F});
  CHECK_THROWS_WITH_AS(infer({{"x", x3.view()}}), doctest::Contains("the model takes F32[2]"), ipu::error);
  CHECK_THROWS_WITH_AS(infer({{"z", two.view()}}), doctest::Contains("no input named 'z'"), ipu::error);
  CHECK_THROWS_WITH_AS(infer(), doctest::Contains("input 'x' is not given"), ipu::error);
  CHECK_THROWS_WITH_AS(infer({{"x", two.view()}, {"x", two.view()}}), doctest::Contains("given twice"), ipu::error);

  CHECK_THROWS_WITH_AS(ipu::poptorch::inference_model(typed, ipu::options().replication_factor(2)),
                       doctest::Contains("replicationFactor(2)"), ipu::error);
  auto [seed, sx, target] = seed_example();
  CHECK_THROWS_WITH_AS(ipu::poptorch::training_model(seed, ipu::options().device_iterations(4)),
                       doctest::Contains("deviceIterations(4)"), ipu::error);
  CHECK_THROWS_WITH_AS(ipu::poptorch::training_model(seed, ipu::options().output_mode(ipu::output_mode::every_n, 1)),
                       doctest::Contains("EveryN"), ipu::error);
  ipu::poptorch::training_model train(seed, {}, ipu::train::sgd{}, mse_loss());
  CHECK_THROWS_WITH_AS(train({{"x", sx.view()}}), doctest::Contains("no labels given"), ipu::error);
}

TEST_CASE("randomSeed seeds an inference model's random ops: the CPU device's draws for that seed") {
  ipu::builder b("rand");
  const auto x = b.add_input_tensor({ipu::data_type::F32, {4}}, "x");
  const auto r = b.op("RandomNormal", {}, {{"shape", std::vector<std::int64_t>{4}}}).front();
  b.add_output(b.add(x, r, "y"));
  const auto g = std::move(b).build();
  const auto x0 = host_tensor::from<float>({4}, {1.F, 2.F, 3.F, 4.F});
  const auto drawn = [&](std::uint64_t seed) {
    ipu::cpu::device_options o;
    o.random_seed = seed;
    ipu::cpu::device dev(g, o);
    const auto y = dev.run(ipu::cpu::named_tensors{{"x", x0.view()}});
    return std::vector<float>(y[0].as<float>().begin(), y[0].as<float>().end());
  };
  const auto called = [&](const ipu::options& o) {
    ipu::poptorch::model m(g);
    ipu::poptorch::inference_model infer(m, o);
    const auto y = infer({{"x", x0.view()}});
    return std::vector<float>(y[0].as<float>().begin(), y[0].as<float>().end());
  };
  CHECK(called(ipu::options().random_seed(7)) == drawn(7));
  CHECK(called(ipu::options().random_seed(7)) != drawn(8));
  CHECK(called(ipu::options()) == drawn(ipu::random_source::default_seed));
}

TEST_CASE("randomSeed decides a training model's Dropout masks: the same seed trains the same weights") {
  const auto trained = [](const ipu::options& o) {
    ipu::builder b("drop");
    const auto x = b.add_input_tensor({ipu::data_type::F32, {16}}, "x");
    const auto w = b.add_initialized_input(ipu::make_constant<float>({16}, std::vector<float>(16, 0.5F)), "w");
    const auto ratio = b.add_constant(ipu::make_constant<float>(ipu::shape{}, {0.5F}));
    const auto training = b.add_constant(ipu::make_constant<bool>(ipu::shape{}, {true}));  // PyTorch's train()
    b.add_output(b.op("Dropout", {b.mul(x, w, "xw"), ratio, training}).front());
    ipu::poptorch::model m(std::move(b).build());
    ipu::poptorch::training_model train(m, o, ipu::train::sgd{}, mse_loss());
    const auto x0 = host_tensor::from<float>({16}, std::vector<float>(16, 1.F));
    const auto t0 = host_tensor::from<float>({16}, std::vector<float>(16, 3.F));
    (void)train({{"x", x0.view()}}, t0.view());
    const auto w1 = m.weight("w");
    return std::vector<float>(w1.as<float>().begin(), w1.as<float>().end());
  };
  const auto one = trained(ipu::options().random_seed(1));
  CHECK(one == trained(ipu::options().random_seed(1)));
  CHECK(one != trained(ipu::options().random_seed(2)));
  CHECK(one != std::vector<float>(16, 0.5F));  // it trained
}

TEST_CASE("a training model's options: gradient accumulation and the output mode change what a call does") {
  auto [m, x, target] = seed_example();
  // Two micro-batches: x and 2x, stacked. The loss is their mean; All returns both outputs, Final
  // the second's.
  host_tensor x2({ipu::data_type::F32, {20}}), t2({ipu::data_type::F32, {20}});  // the model takes x F32[10]
  for (std::size_t i = 0; i < 10; ++i) {
    x2.as<float>()[i] = at(x, i);
    x2.as<float>()[10 + i] = 2 * at(x, i);
    t2.as<float>()[i] = t2.as<float>()[10 + i] = at(target, i);
  }
  const auto w = m.weight("fc.weight"), b = m.weight("fc.bias");
  host_tensor x_twice({ipu::data_type::F32, {10}});
  for (std::size_t i = 0; i < 10; ++i) x_twice.as<float>()[i] = 2 * at(x, i);
  const auto y1 = linear(w, b, x), y2 = linear(w, b, x_twice);
  double l1 = 0, l2 = 0;
  for (std::size_t i = 0; i < 10; ++i) {
    l1 += (y1[i] - at(target, i)) * (y1[i] - at(target, i)) / 10;
    l2 += (y2[i] - at(target, i)) * (y2[i] - at(target, i)) / 10;
  }
  const auto mse = mse_loss();
  SUBCASE("Final (the default)") {
    ipu::poptorch::training_model train(m, ipu::options().gradient_accumulation(2), ipu::train::sgd{}, mse);
    const auto r = train({{"x", x2.view()}}, t2.view());
    check_values(r.outputs.at(0), y2);
    CHECK(r.loss == doctest::Approx((l1 + l2) / 2).epsilon(1e-6));
  }
  SUBCASE("All") {
    ipu::poptorch::training_model train(m, ipu::options().gradient_accumulation(2).output_mode(ipu::output_mode::all),
                                        ipu::train::sgd{}, mse);
    auto want = y1;
    want.insert(want.end(), y2.begin(), y2.end());
    check_values(train({{"x", x2.view()}}, t2.view()).outputs.at(0), want);
  }
  SUBCASE("Sum") {
    ipu::poptorch::training_model train(m, ipu::options().gradient_accumulation(2).output_mode(ipu::output_mode::sum),
                                        ipu::train::sgd{}, mse);
    std::vector<double> want(10);
    for (std::size_t i = 0; i < 10; ++i) want[i] = y1[i] + y2[i];
    check_values(train({{"x", x2.view()}}, t2.view()).outputs.at(0), want);
  }
}

TEST_CASE("a training model's buffers are BatchNormalization's running statistics: the host and an inference model get them") {
  const auto dir = ipu_test::pytorch_runs("torch_training.py") / "cnn_bn_ce_sgd_momentum";
  ipu::poptorch::model m(ipu::onnx::load_model(dir / "model.onnx"));
  ipu::poptorch::loss_spec ce;
  ce.loss.kind = ipu::train::loss_kind::cross_entropy;
  ipu::poptorch::training_model train(m, {}, ipu::train::sgd{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, ce);
  const auto x = ipu::io::read_npy(dir / "x.npy"), labels = ipu::io::read_npy(dir / "labels.npy");
  for (std::int64_t k = 0; k < 10; ++k) {
    const auto xb = ipu_test::row(x, k % 3), lb = ipu_test::row(labels, k % 3);
    (void)train({{"x", xb.view()}}, lb.view());
  }
  for (const auto* name : {"bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var", "conv1.weight"}) {
    CAPTURE(name);
    CHECK(relative_difference(m.weight(name), ipu::io::read_npy(dir / (std::string(name) + ".npy"))) < 1e-4);
  }
  // PyTorch's trained model in eval mode: normalised by the trained running statistics.
  ipu::poptorch::inference_model infer(m);
  const auto x0 = ipu_test::row(x, 0);
  CHECK(relative_difference(infer({{"x", x0.view()}}).at(0), ipu::io::read_npy(dir / "out.npy")) < 1e-4);
}

TEST_CASE("a training model's replication factor and input grouping: replicas train as accumulation, bit for bit") {
  auto [m, x, target] = seed_example();
  // Four micro-batches: x, 2x, 3x, 4x, stacked.
  host_tensor x4({ipu::data_type::F32, {40}}), t4({ipu::data_type::F32, {40}});
  for (std::size_t j = 0; j < 4; ++j)
    for (std::size_t i = 0; i < 10; ++i) {
      x4.as<float>()[10 * j + i] = static_cast<float>(j + 1) * at(x, i);
      t4.as<float>()[10 * j + i] = at(target, i);
    }
  const auto mse = mse_loss();
  auto trained = [&](const ipu::options& o, const host_tensor& xs, const host_tensor& ts) {
    ipu::poptorch::model copy(m.network());
    ipu::poptorch::training_model train(copy, o, ipu::train::sgd{.lr = 0.01, .momentum = 0.9}, mse);
    std::vector<double> losses;
    for (int k = 0; k < 3; ++k) losses.push_back(train({{"x", xs.view()}}, ts.view()).loss);
    train.copy_weights_to_host();
    const auto w = copy.weight("fc.weight").as<float>();
    return std::make_pair(losses, std::vector<float>(w.begin(), w.end()));
  };
  const auto want = trained(ipu::options().gradient_accumulation(4), x4, t4);
  CHECK(trained(ipu::options().gradient_accumulation(2).replication_factor(2), x4, t4) == want);
  CHECK(trained(ipu::options().replication_factor(4), x4, t4) == want);
  // Replicas in consecutive input groups of 2 take the same data: 2 micro-batches feed 4 replicas,
  // as 4 micro-batches x, x, 2x, 2x.
  host_tensor xx({ipu::data_type::F32, {40}});
  for (std::size_t i = 0; i < 40; ++i) xx.as<float>()[i] = x4.as<float>()[i % 10 + (i >= 20 ? 10 : 0)];
  const auto x2 = ipu::train::take_rows(x4, 0, 20), t2 = ipu::train::take_rows(t4, 0, 20);
  CHECK(trained(ipu::options().replication_factor(4).input_replica_grouping(2, ipu::comm_group_type::consecutive), x2, t2) ==
        trained(ipu::options().gradient_accumulation(4), xx, t4));
}

TEST_CASE("a training model's per-weight replicaGrouping: the seed's 8 replicas, W over orthogonal groups, as numpy") {
  // poptorch-features.txt 4.4.3 through the wrapper: tests/train/numpy_replica_grouping.py computes
  // the whole problem; copy_weights_to_host returns what the retrieval mode says.
  const auto problem = ipu_test::make_replica_grouping_problem();
  const auto& [network, x, w_init, w_final, losses] = problem;
  ipu::poptorch::loss_spec identity;
  identity.output = "loss";
  identity.loss.kind = ipu::train::loss_kind::output;
  const auto o = ipu::options()
                     .replication_factor(8)
                     .input_replica_grouping(4, ipu::comm_group_type::consecutive)
                     .output_mode(ipu::output_mode::all);
  using ipu::train::variable_retrieval_mode;
  for (const auto retrieval : {variable_retrieval_mode::one_per_group, variable_retrieval_mode::all_replicas}) {
    CAPTURE(static_cast<int>(retrieval));
    ipu::poptorch::model m(network);
    ipu::poptorch::training_model train(m, o, ipu::train::sgd{.lr = 0.01}, identity);
    train.replica_grouping("W", ipu::comm_group_type::orthogonal, 2, retrieval);
    // Each group starts from the host's value: the host copy is now one per group (or replica).
    CHECK(m.weight("W").info().shape[0] == (retrieval == variable_retrieval_mode::one_per_group ? 4 : 8));
    CHECK_THROWS_WITH_AS(ipu::poptorch::inference_model{m}, doctest::Contains("a training model grouped it across replicas"),
                         ipu::error);
    if (retrieval == variable_retrieval_mode::one_per_group) {
      m.set_weight("W", w_init.view());
    } else {  // one value per replica: replica r is in group r % 4
      host_tensor per_replica({ipu::data_type::F32, {8, 40, 14}});
      for (std::int64_t r = 0; r < 8; ++r) {
        const auto g = ipu_test::row(w_init, r % 4);
        std::memcpy(per_replica.bytes().data() + r * 40 * 14 * 4, g.bytes().data(), g.bytes().size());
      }
      m.set_weight("W", per_replica.view());
    }
    train.copy_weights_to_device();
    for (std::int64_t k = 0; k < 4; ++k)
      CHECK(train({{"x", x.view()}}).loss == doctest::Approx(losses.as<double>()[static_cast<std::size_t>(k)]).epsilon(1e-5));
    CHECK_THROWS_WITH_AS(train.replica_grouping("W", ipu::comm_group_type::all), doctest::Contains("after the first call"),
                         ipu::error);
    const auto& got = m.weight("W");  // the implicit copyWeightsToHost
    if (retrieval == variable_retrieval_mode::one_per_group) {
      CHECK(got.info() == ipu::tensor_info{ipu::data_type::F32, {4, 40, 14}});
      CHECK(relative_difference(got, w_final) < 1e-5);
    } else {
      REQUIRE(got.info() == ipu::tensor_info{ipu::data_type::F32, {8, 40, 14}});
      for (std::int64_t r = 0; r < 8; ++r) CHECK(relative_difference(ipu_test::row(got, r), ipu_test::row(w_final, r % 4)) < 1e-5);
    }
  }
  SUBCASE("a grouping that does not fit, or of no weight, changes nothing") {
    ipu::poptorch::model m(network);
    ipu::poptorch::training_model train(m, o, ipu::train::sgd{.lr = 0.01}, identity);
    CHECK_THROWS_WITH_AS(train.replica_grouping("W", ipu::comm_group_type::orthogonal, 3),
                         doctest::Contains("Orthogonal groups of 3 replicas do not divide the replication factor 8"), ipu::error);
    CHECK_THROWS_WITH_AS(train.replica_grouping("V", ipu::comm_group_type::consecutive, 2), doctest::Contains("'V'"), ipu::error);
    CHECK(m.weight("W").info() == ipu::tensor_info{ipu::data_type::F32, {40, 14}});
    train.replica_grouping("W", ipu::comm_group_type::ungrouped);  // each replica alone: 8 values
    CHECK(m.weight("W").info() == ipu::tensor_info{ipu::data_type::F32, {8, 40, 14}});
    CHECK_THROWS_WITH_AS(train.replica_grouping("W", ipu::comm_group_type::all), doctest::Contains("replica grouping twice"),
                         ipu::error);
  }
}

}  // namespace test_model
