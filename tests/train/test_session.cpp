// Training sessions against PyTorch training the same models on the same data (tests/train/
// torch_training.py): the seed's Linear(10, 10) + MSELoss example over 800 steps, an MLP whose
// first layer feeds two branches and a small CNN, under SGD (momentum, dampening, Nesterov, weight
// decay), Adam and AdamW, with cross-entropy and L1 losses.
#include "ipu/train/session.hpp"

#include <doctest/doctest.h>

#include <barrier>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/ops/all.hpp"
#include "pytorch_reference.hpp"
#include "replica_grouping_problem.hpp"

namespace test_session {

namespace {

using ipu::train::loss_kind;
using ipu_test::relative_difference;

/// Trains case `name` of tests/train/torch_training.py as PyTorch did and checks every weight, the
/// losses and the output.
void check_against_pytorch(const std::string& name, loss_kind loss, const ipu::train::optimizer& opt,
                           std::int64_t steps, double tolerance) {
  ipu::train::training_options o;
  o.loss.kind = loss;
  o.opt = opt;
  ipu_test::check_training("torch_training.py", name, o, steps, tolerance);
}

}  // namespace

TEST_CASE("the seed's example: Linear(10, 10) + MSELoss, 800 steps of PopTorch's default SGD, as PyTorch") {
  // PopTorch's default optimizer is SGD with lr 0.01; the seed asserts rtol = atol = 1e-4.
  check_against_pytorch("seed_example", loss_kind::mse, ipu::train::sgd{}, 800, 1e-4);
}

TEST_CASE("an MLP trained with cross-entropy: SGD with momentum, dampening and weight decay, as torch.optim.SGD") {
  check_against_pytorch("mlp_ce_sgd_momentum", loss_kind::cross_entropy,
                        ipu::train::sgd{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 10,
                        1e-4);
}

TEST_CASE("an MLP trained with cross-entropy: SGD with Nesterov momentum, as torch.optim.SGD") {
  check_against_pytorch("mlp_ce_sgd_nesterov", loss_kind::cross_entropy,
                        ipu::train::sgd{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}, 10, 1e-4);
}

TEST_CASE("an MLP trained with cross-entropy: Adam and AdamW, as torch.optim") {
  check_against_pytorch("mlp_ce_adam", loss_kind::cross_entropy, ipu::train::adam{.lr = 0.01, .weight_decay = 0.01}, 10,
                        1e-4);
  check_against_pytorch("mlp_ce_adamw", loss_kind::cross_entropy,
                        ipu::train::adam{.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true}, 10, 1e-4);
}

TEST_CASE("an MLP trained with L1 loss and SGD with momentum, as PyTorch") {
  check_against_pytorch("mlp_l1_sgd_momentum", loss_kind::l1,
                        ipu::train::sgd{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 10,
                        1e-4);
}

TEST_CASE("a small CNN (grouped, strided and padded convolutions, max and average pooling): SGD and Adam, as PyTorch") {
  check_against_pytorch("cnn_ce_sgd_momentum", loss_kind::cross_entropy,
                        ipu::train::sgd{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 10,
                        1e-4);
  check_against_pytorch("cnn_ce_adam", loss_kind::cross_entropy, ipu::train::adam{.lr = 0.01, .weight_decay = 0.01}, 10,
                        1e-4);
}

TEST_CASE("take_rows: a micro-batch of stacked samples, wrapping around at the end") {
  const auto all = ipu::host_tensor::from<float>({3, 2}, {0, 1, 10, 11, 20, 21});
  const auto b = ipu::train::take_rows(all, 2, 2);
  CHECK(b.info() == ipu::tensor_info{ipu::data_type::F32, {2, 2}});
  CHECK(std::vector<float>(b.as<float>().begin(), b.as<float>().end()) == std::vector<float>{20, 21, 0, 1});
  CHECK(ipu::train::take_rows(all, 7, 1).as<float>()[0] == 10);
  CHECK_THROWS_AS(ipu::train::take_rows(all, 0, 0), ipu::error);
  CHECK_THROWS_AS(ipu::train::take_rows(ipu::host_tensor::from<float>({}, {1}), 0, 1), ipu::error);
}

TEST_CASE("BatchNormalization trains as PyTorch's train() mode: batch statistics, running statistics updated") {
  check_against_pytorch("cnn_bn_ce_sgd_momentum", loss_kind::cross_entropy,
                        ipu::train::sgd{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 10,
                        1e-4);
}

TEST_CASE("set_optimizer changes values between steps, and refuses what would change the compiled step") {
  ipu::builder b("linear");
  const auto x = b.add_input_tensor({ipu::data_type::F32, {2, 3}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>(ipu::shape{3, 2}, {1, 2, 3, 4, 5, 6}), "w");
  b.add_output(b.matmul(x, w, "y"));
  ipu::train::training_options o;
  o.opt = ipu::train::sgd{.lr = 0.1, .momentum = 0.9};
  ipu::train::training_session s(b.build(), o);
  const auto xv = ipu::host_tensor::from<float>({2, 3}, {1, 0, 0, 0, 1, 0});
  const auto target = ipu::host_tensor::from<float>({2, 2}, {0, 0, 0, 0});
  (void)s.run({{"x", xv.view()}}, target.view());
  const auto before = s.weight("w");
  // Learning rate 0: the momentum buffer moves, the weight does not.
  s.set_optimizer(ipu::train::sgd{.lr = 0, .momentum = 0.9});
  (void)s.run({{"x", xv.view()}}, target.view());
  CHECK(std::vector<float>(s.weight("w").as<float>().begin(), s.weight("w").as<float>().end()) ==
        std::vector<float>(before.as<float>().begin(), before.as<float>().end()));
  // Back to 0.1: it moves again, with the momentum kept.
  s.set_optimizer(ipu::train::sgd{.lr = 0.1, .momentum = 0.9});
  (void)s.run({{"x", xv.view()}}, target.view());
  CHECK(s.weight("w").as<float>()[0] != before.as<float>()[0]);
  CHECK_THROWS_WITH_AS(s.set_optimizer(ipu::train::sgd{.lr = 0.1}), doctest::Contains("changes the shape of the compiled step"),
                       ipu::error);
  CHECK_THROWS_WITH_AS(s.set_optimizer(ipu::train::adam{}), doctest::Contains("changes the shape of the compiled step"),
                       ipu::error);
  CHECK_THROWS_WITH_AS(s.set_optimizer(ipu::train::sgd{.lr = -1, .momentum = 0.9}), doctest::Contains("learning rate"),
                       ipu::error);
  // Bad inputs to a step.
  CHECK_THROWS_WITH_AS((void)s.run({{"nope", xv.view()}}, target.view()), doctest::Contains("no input named 'nope'"),
                       ipu::error);
  CHECK_THROWS_WITH_AS((void)s.run({}, target.view()), doctest::Contains("input 'x' is not given"), ipu::error);
  const auto wrong = ipu::host_tensor::from<std::int64_t>({2}, {0, 1});
  CHECK_THROWS_AS((void)s.run({{"x", xv.view()}}, wrong.view()), ipu::error);
  CHECK(s.steps() == 3);
}

TEST_CASE("a training session refuses models it cannot train, with what to do") {
  ipu::builder b("m");
  const auto x = b.add_input_tensor({ipu::data_type::F32, {2, 3}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>(ipu::shape{3, 2}, {1, 2, 3, 4, 5, 6}), "w");
  const auto y = b.matmul(x, w, "y");
  b.add_output(y);
  b.add_output(b.relu(y, "z"));
  const auto g = b.build();
  auto with = [](std::string output, std::vector<std::string> frozen = {}) {
    ipu::train::training_options o;
    o.output = std::move(output);
    o.frozen = std::move(frozen);
    return o;
  };
  CHECK_THROWS_WITH_AS(ipu::train::training_session(g, with("")), doctest::Contains("the model has 2 outputs"), ipu::error);
  CHECK_THROWS_WITH_AS(ipu::train::training_session(g, with("q")), doctest::Contains("no output named 'q'"), ipu::error);
  CHECK_THROWS_WITH_AS(ipu::train::training_session(g, with("y", {"v"})), doctest::Contains("frozen weight 'v'"),
                       ipu::error);
  CHECK_THROWS_WITH_AS(ipu::train::training_session(g, with("y", {"w"})), doctest::Contains("no trainable weights"),
                       ipu::error);
  ipu::train::training_options nll = with("y");
  nll.loss.kind = loss_kind::nll;
  ipu::train::training_session s(g, nll);  // log-probabilities [2, 2]: class indices [2]
  const auto xv = ipu::host_tensor::from<float>({2, 3}, {1, 0, 0, 0, 1, 0});
  const auto out_of_range = ipu::host_tensor::from<std::int64_t>({2}, {0, 5});
  CHECK_THROWS_WITH_AS((void)s.run({{"x", xv.view()}}, out_of_range.view()), doctest::Contains("target 5 is not a class"),
                       ipu::error);
}

TEST_CASE("an LSTM tagger (Embedding, bidirectional LSTM, Linear; cross-entropy over [N, C, T]): SGD and Adam, as PyTorch") {
  check_against_pytorch("lstm_tagger_ce_sgd_momentum", loss_kind::cross_entropy,
                        ipu::train::sgd{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 10,
                        1e-4);
  check_against_pytorch("lstm_tagger_ce_adam", loss_kind::cross_entropy,
                        ipu::train::adam{.lr = 0.01, .weight_decay = 0.01}, 10, 1e-4);
}

TEST_CASE("a GRU tagger (Embedding, two-layer GRU, Linear; cross-entropy flattened): SGD and Adam, as PyTorch") {
  check_against_pytorch("gru_tagger_ce_sgd_momentum", loss_kind::cross_entropy,
                        ipu::train::sgd{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 10,
                        1e-4);
  check_against_pytorch("gru_tagger_ce_adam", loss_kind::cross_entropy,
                        ipu::train::adam{.lr = 0.01, .weight_decay = 0.01}, 10, 1e-4);
}

TEST_CASE("weights PyTorch's export shares as Identity ops of one initializer train separately; Conv then BatchNorm") {
  // bn2's parameters and statistics, norm1's and norm2's are Identity copies of bn1's initial ones
  // and zeros in the export: tied, they would train as one weight and fail here.
  check_against_pytorch("tied_initials_ce_sgd_momentum", loss_kind::cross_entropy,
                        ipu::train::sgd{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 10,
                        1e-4);
}

namespace {

/// x [2, 2] MatMul w [2, 2], MSE against zeros: with x the identity, the loss is mean(w^2) and
/// w's gradient w / 2 (times the loss scale).
ipu::graph square_model(ipu::data_type type) {
  ipu::builder b("square");
  const auto x = b.add_input_tensor({type, {2, 2}}, "x");
  const std::vector<float> w0{1.0f, 0.01f, 0.02f, 0.03f};
  ipu::constant_tensor w = ipu::make_constant<float>(ipu::shape{2, 2}, std::span<const float>(w0));
  if (type == ipu::data_type::F16) {
    std::vector<ipu::half> h;
    for (float v : w0) h.emplace_back(v);
    w = ipu::make_constant<ipu::half>(ipu::shape{2, 2}, std::span<const ipu::half>(h));
  }
  const auto y = b.matmul(x, b.add_initialized_input(w, "w"), type == ipu::data_type::F16 ? "y16" : "y");
  b.add_output(type == ipu::data_type::F16 ? b.cast(y, ipu::data_type::F32, "y") : y);  // a loss reads F32
  return b.build();
}

}  // namespace

TEST_CASE("automatic loss scaling: the scale halves when too many gradient elements reach the bin edge, else doubles") {
  using ipu::data_type;
  const auto x = ipu::host_tensor::from<float>({2, 2}, {1, 0, 0, 1});
  const auto zeros = ipu::host_tensor::from<float>({2, 2}, {0, 0, 0, 0});
  ipu::train::training_options o;
  o.opt = ipu::train::sgd{.lr = 0};  // the weights stay: the gradients are (0.5, 0.005, 0.01, 0.015) times the scale
  o.auto_loss_scaling.enabled = true;
  o.auto_loss_scaling.bin_edge_location = 4.0 / static_cast<double>(std::numeric_limits<float>::max());  // the edge at 4
  o.auto_loss_scaling.threshold_upper_count_proportion = 0.2;  // halve when upper > 0.25 lower
  SUBCASE("every update") {
    ipu::train::training_session s(square_model(data_type::F32), o);
    std::vector<double> scales;
    for (int i = 0; i < 6; ++i) {
      (void)s.run({{"x", x.view()}}, zeros.view());
      scales.push_back(s.loss_scaling());
    }
    // 1 -> 2 -> 4 -> 8; at 8 the largest gradient (4) reaches the edge: 1 of 4 elements, over 0.2.
    CHECK(scales == std::vector<double>{2, 4, 8, 4, 8, 4});
  }
  SUBCASE("every second update, from the counts of both") {
    o.auto_loss_scaling.update_period = 2;
    ipu::train::training_session s(square_model(data_type::F32), o);
    std::vector<double> scales;
    for (int i = 0; i < 8; ++i) {
      (void)s.run({{"x", x.view()}}, zeros.view());
      scales.push_back(s.loss_scaling());
    }
    CHECK(scales == std::vector<double>{1, 2, 2, 4, 4, 8, 8, 4});
  }
  SUBCASE("the counts since the last change are optimizer state, saved and restored") {
    o.auto_loss_scaling.update_period = 2;
    ipu::train::training_session s(square_model(data_type::F32), o);
    for (int i = 0; i < 7; ++i) (void)s.run({{"x", x.view()}}, zeros.view());  // the 7th at scale 8: one upper element
    const auto state = s.optimizer_state();
    ipu::train::training_options o8 = o;
    o8.opt = ipu::train::sgd{.lr = 0, .loss_scaling = 8};
    ipu::train::training_session t(square_model(data_type::F32), o8);
    t.load_optimizer_state(state);
    (void)t.run({{"x", x.view()}}, zeros.view());
    (void)s.run({{"x", x.view()}}, zeros.view());
    CHECK(t.loss_scaling() == 4);
    CHECK(s.loss_scaling() == 4);
    // A count that is no count is refused, and the session keeps its state.
    auto bad = s.optimizer_state();
    for (auto& [name, value] : bad)
      if (name == "automatic_loss_scaling/upper_count") value.as<double>()[0] = std::numeric_limits<double>::infinity();
    CHECK_THROWS_WITH_AS(t.load_optimizer_state(bad), doctest::Contains("finite non-negative"), ipu::error);
    CHECK(t.steps() == 8);
  }
}

TEST_CASE("automatic loss scaling changes nothing else: float32 training is the same bit for bit; float16 stops at 2^15") {
  using ipu::data_type;
  const auto x = ipu::host_tensor::from<float>({2, 2}, {1, 2, -1, 0.5f});
  const auto target = ipu::host_tensor::from<float>({2, 2}, {0.3f, -0.2f, 0.1f, 0.7f});
  ipu::train::training_options plain;
  plain.opt = ipu::train::sgd{.lr = 0.1, .momentum = 0.9};
  auto scaled = plain;
  scaled.auto_loss_scaling.enabled = true;  // powers of two: scaling and unscaling are exact in float32
  ipu::train::training_session a(square_model(data_type::F32), plain), b(square_model(data_type::F32), scaled);
  for (int i = 0; i < 10; ++i) {
    const auto ra = a.run({{"x", x.view()}}, target.view()), rb = b.run({{"x", x.view()}}, target.view());
    CHECK(ra.loss == rb.loss);
  }
  CHECK(b.loss_scaling() == 1024);
  const auto wa = a.weight("w").as<float>(), wb = b.weight("w").as<float>();
  CHECK(std::vector<float>(wa.begin(), wa.end()) == std::vector<float>(wb.begin(), wb.end()));

  std::vector<ipu::half> xh;  // small inputs: gradients of about 1e-4, far below the edge (4094) at any scale up to 2^15
  for (float v : x.as<float>()) xh.emplace_back(v * 1e-3f);
  const auto x16 = ipu::host_tensor::from<ipu::half>({2, 2}, xh);
  ipu::train::training_session h(square_model(data_type::F16), scaled);
  for (int i = 0; i < 20; ++i) (void)h.run({{"x", x16.view()}}, target.view());
  CHECK(h.loss_scaling() == 32768);
}

TEST_CASE("automatic loss scaling refuses settings out of range, and makes a constant loss scale variable") {
  auto refuse = [](ipu::train::training_options o, const char* needle) {
    o.auto_loss_scaling.enabled = true;
    CHECK_THROWS_WITH_AS(ipu::train::training_session(square_model(ipu::data_type::F32), o), doctest::Contains(needle),
                         ipu::error);
  };
  ipu::train::training_options o;
  o.opt = ipu::train::const_sgd(0.1, 0, 4);  // PopART's ConstSGD: the loss scale starts constant at 4
  o.auto_loss_scaling.enabled = true;
  ipu::train::training_session s(square_model(ipu::data_type::F32), o);
  const auto x = ipu::host_tensor::from<float>({2, 2}, {1, 0, 0, 1});
  (void)s.run({{"x", x.view()}}, x.view());
  CHECK(s.loss_scaling() == 8);
  s.set_optimizer(ipu::train::const_sgd(0.1, 0, 2));  // a value set by hand starts from there
  (void)s.run({{"x", x.view()}}, x.view());
  CHECK(s.loss_scaling() == 4);
  CHECK_THROWS_WITH_AS(s.set_optimizer(ipu::train::const_sgd(0.2, 0, 2)), doctest::Contains("'lr' is constant"), ipu::error);
  o.opt = ipu::train::sgd{.lr = 0.1};
  o.auto_loss_scaling.update_period = 0;
  refuse(o, "update period is 0");
  o.auto_loss_scaling.update_period = 1;
  o.auto_loss_scaling.threshold_upper_count_proportion = 1.5;
  refuse(o, "threshold upper count proportion");
  o.auto_loss_scaling.threshold_upper_count_proportion = 0;
  o.auto_loss_scaling.bin_edge_location = 0;
  refuse(o, "bin edge location");
}

namespace {

std::vector<std::byte> bytes_of(const ipu::host_tensor& t) { return {t.bytes().begin(), t.bytes().end()}; }

/// Trains `steps` steps of case `name` of tests/train/torch_optimizers.py (a row of x: 4
/// micro-batches) in `s`, and returns the losses of every micro-batch.
std::vector<double> train_rows(ipu::train::training_session& s, const std::string& name, std::int64_t steps) {
  const auto dir = ipu_test::pytorch_runs("torch_optimizers.py") / name;
  const auto x = ipu::io::read_npy(dir / "x.npy");
  const auto labels = ipu::io::read_npy(dir / "labels.npy");
  std::vector<double> losses;
  for (std::int64_t k = 0; k < steps; ++k) {
    const auto xb = ipu_test::row(x, k % x.info().shape[0]), lb = ipu_test::row(labels, k % x.info().shape[0]);
    const auto r = s.run({{"x", xb.view()}}, lb.view());
    losses.insert(losses.end(), r.micro_batch_losses.begin(), r.micro_batch_losses.end());
  }
  return losses;
}

}  // namespace

TEST_CASE("replicated training: R replicas of G micro-batches update as one replica accumulating G * R, bit for bit") {
  using ipu::train::training_session;
  const auto dir = ipu_test::pytorch_runs("torch_optimizers.py");
  const auto mlp = ipu::onnx::load_model(dir / "mlp_adam_accumulate4" / "model.onnx");
  ipu::train::training_options o;
  o.loss.kind = loss_kind::cross_entropy;
  o.opt = ipu::train::adam{.lr = 0.01};
  auto with = [&](std::int64_t accumulation, ipu::train::accumulation_reduction reduction) {
    auto t = o;
    t.gradient_accumulation = accumulation;
    t.reduction = reduction;
    return t;
  };
  for (const auto reduction : {ipu::train::accumulation_reduction::mean, ipu::train::accumulation_reduction::sum}) {
    training_session one(mlp, with(4, reduction), {}, ipu::train::output_mode::all);
    const auto want = train_rows(one, "mlp_adam_accumulate4", 5);
    for (const auto& [g, r] : {std::pair<std::int64_t, std::int64_t>{2, 2}, {1, 4}}) {
      CAPTURE(g);
      CAPTURE(r);
      // Each replica's device gets one kernel thread here, the single replica's every thread.
      training_session s(mlp, with(g, reduction), {}, ipu::train::output_mode::all, {.replicas = r});
      CHECK(s.graph_of_step().micro_batches == 4);
      CHECK(train_rows(s, "mlp_adam_accumulate4", 5) == want);
      for (const auto& w : one.weight_names()) CHECK(bytes_of(s.weight(w)) == bytes_of(one.weight(w)));
      const auto a = one.optimizer_state(), b = s.optimizer_state();
      REQUIRE(a.size() == b.size());
      for (std::size_t i = 0; i < a.size(); ++i) CHECK(bytes_of(a[i].second) == bytes_of(b[i].second));
    }
  }
  SUBCASE("a product large enough to be cut over the kernel threads: each replica's device has the given threads") {
    // 2 * 32 * 256 * 512 flops: the CPU device cuts it into one GEMM per thread, and the bits
    // depend on the cut; a replica with a share of the threads would round otherwise.
    ipu::builder b("wide");
    const auto xi = b.add_input_tensor({ipu::data_type::F32, {32, 256}}, "x");
    std::vector<float> w0(256 * 512), xs(2 * 32 * 256);
    std::mt19937 gen(7);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    for (auto& v : w0) v = normal(gen);
    for (auto& v : xs) v = normal(gen) * 20;
    b.add_output(b.matmul(xi, b.add_initialized_input(ipu::make_constant<float>(ipu::shape{256, 512}, w0), "w"), "y"));
    const auto model = b.build();
    const auto x = ipu::host_tensor::from<float>({64, 256}, xs);
    const ipu::host_tensor target(ipu::tensor_info{ipu::data_type::F32, {64, 512}});
    auto c = o;
    c.loss.kind = loss_kind::mse;
    c.opt = ipu::train::sgd{.lr = 0.5};
    c.gradient_accumulation = 2;
    training_session one(model, c, {.threads = 2});
    c.gradient_accumulation = 1;
    training_session s(model, c, {.threads = 2}, ipu::train::output_mode::final, {.replicas = 2});
    for (int k = 0; k < 2; ++k) {
      (void)one.run({{"x", x.view()}}, target.view());
      (void)s.run({{"x", x.view()}}, target.view());
    }
    CHECK(bytes_of(s.weight("w")) == bytes_of(one.weight("w")));
  }
  SUBCASE("the outputs, by the output mode, in the order of the micro-batches") {
    const auto x = ipu_test::row(ipu::io::read_npy(dir / "mlp_adam_accumulate4" / "x.npy"), 0);
    const auto labels = ipu_test::row(ipu::io::read_npy(dir / "mlp_adam_accumulate4" / "labels.npy"), 0);
    for (const auto mode : {ipu::train::output_mode::all, ipu::train::output_mode::final, ipu::train::output_mode::sum}) {
      training_session one(mlp, with(4, ipu::train::accumulation_reduction::mean), {}, mode);
      training_session s(mlp, with(2, ipu::train::accumulation_reduction::mean), {}, mode, {.replicas = 2});
      const auto a = one.run({{"x", x.view()}}, labels.view()), b = s.run({{"x", x.view()}}, labels.view());
      CHECK(a.loss == b.loss);
      REQUIRE(a.outputs.size() == b.outputs.size());
      CHECK(bytes_of(a.outputs[0]) == bytes_of(b.outputs[0]));
    }
  }
  SUBCASE("BatchNormalization: the weights as one replica's; each replica's running statistics its own micro-batches'") {
    const auto cnn = ipu::onnx::load_model(dir / "cnn_bn_adamw_accumulate2" / "model.onnx");
    auto c = o;
    c.opt = ipu::train::adam{.lr = 0.01, .weight_decay = 0.05, .decoupled_weight_decay = true};
    c.gradient_accumulation = 2;
    training_session one(cnn, c);
    c.gradient_accumulation = 1;
    training_session s(cnn, c, {}, ipu::train::output_mode::final, {.replicas = 2});
    training_session first(cnn, c);  // replica 0's micro-batch alone
    const auto x = ipu_test::row(ipu::io::read_npy(dir / "cnn_bn_adamw_accumulate2" / "x.npy"), 0);
    const auto labels = ipu_test::row(ipu::io::read_npy(dir / "cnn_bn_adamw_accumulate2" / "labels.npy"), 0);
    (void)one.run({{"x", x.view()}}, labels.view());
    (void)s.run({{"x", x.view()}}, labels.view());
    const auto rows = x.info().shape[0] / 2;
    const auto x0 = ipu::train::take_rows(x, 0, rows), l0 = ipu::train::take_rows(labels, 0, rows);
    (void)first.run({{"x", x0.view()}}, l0.view());
    for (const auto& w : one.weight_names()) CHECK(bytes_of(s.weight(w)) == bytes_of(one.weight(w)));
    REQUIRE(!s.buffer_names().empty());
    for (const auto& b : s.buffer_names()) {
      CHECK(bytes_of(s.buffer(b)) == bytes_of(first.buffer(b)));
      CHECK(bytes_of(s.buffer(b)) != bytes_of(one.buffer(b)));
    }
  }
}

TEST_CASE("replica grouping: the seed's 8 replicas, W split 4 ways over orthogonal groups and X 2 ways, as numpy") {
  // poptorch-features.txt 4.4.3; tests/train/numpy_replica_grouping.py computes the whole problem.
  const auto problem = ipu_test::make_replica_grouping_problem();
  const auto& [model, x, w_init, w_final, losses] = problem;
  ipu::train::training_options o;
  o.output = "loss";
  o.loss.kind = loss_kind::output;
  o.opt = ipu::train::sgd{.lr = 0.01};
  using ipu::train::comm_group_type;
  using ipu::train::variable_retrieval_mode;
  for (const auto retrieval : {variable_retrieval_mode::one_per_group, variable_retrieval_mode::all_replicas}) {
    ipu::train::replication_options r{.replicas = 8,
                                      .weights = {{"W", {comm_group_type::orthogonal, 2, retrieval}}},
                                      .inputs = ipu::train::replica_grouping{comm_group_type::consecutive, 4}};
    ipu::train::training_session s(model, o, {}, ipu::train::output_mode::all, r);
    s.set_weight("W", w_init.view());
    for (std::int64_t k = 0; k < 4; ++k) {
      const auto step = s.run({{"x", x.view()}});
      CHECK(step.micro_batch_losses.size() == 8);
      // Replicas 0..3 take rows 0..11, replicas 4..7 rows 12..23: the losses of one block each.
      CHECK(step.loss == doctest::Approx(losses.as<double>()[static_cast<std::size_t>(k)]).epsilon(1e-5));
    }
    const auto& got = s.weight("W");
    if (retrieval == variable_retrieval_mode::one_per_group) {
      CHECK(got.info() == ipu::tensor_info{ipu::data_type::F32, {4, 40, 14}});
      CHECK(relative_difference(got, w_final) < 1e-5);
    } else {
      // One value per replica: replica r holds its group's, r % 4.
      REQUIRE(got.info() == ipu::tensor_info{ipu::data_type::F32, {8, 40, 14}});
      for (std::int64_t rep = 0; rep < 8; ++rep)
        CHECK(relative_difference(ipu_test::row(got, rep), ipu_test::row(w_final, rep % 4)) < 1e-5);
    }
    // The trained model holds replica 0's value (group 0's).
    const auto trained = s.trained_model();
    const auto& data = trained.tensor(*trained.find_tensor("W")).data;
    const auto g0 = ipu_test::row(w_final, 0);
    ipu::host_tensor t(g0.info());
    std::memcpy(t.bytes().data(), data.bytes().data(), t.bytes().size());
    CHECK(relative_difference(t, g0) < 1e-5);
  }
}

TEST_CASE("replica grouping: consecutive, none and all groups reduce gradients within their group only") {
  // y = x w, loss mean(y^2) per replica; 4 replicas, each its own x. With SGD (lr 1) and the mean
  // over 4 replicas, a group's value descends by the sum of its replicas' gradients / 4.
  ipu::builder b("square");
  const auto x = b.add_input_tensor({ipu::data_type::F32, {1, 1}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>(ipu::shape{1, 1}, std::vector<float>{1.0f}), "w");
  const auto y = b.matmul(x, w, "y");
  b.add_output(b.reduce_mean(b.mul(y, y), {0, 1}, false, "loss"));
  ipu::train::training_options o;
  o.loss.kind = loss_kind::output;
  o.opt = ipu::train::sgd{.lr = 1};
  const auto xs = ipu::host_tensor::from<float>({4, 1}, {1, 2, 3, 4});  // gradient of replica r: 2 x^2 w = 2 (r+1)^2
  using ipu::train::comm_group_type;
  auto trained = [&](comm_group_type type, std::int64_t size) {
    ipu::train::training_session s(b.build(), o, {}, ipu::train::output_mode::final,
                                   {.replicas = 4, .weights = {{"w", {type, size}}}});
    (void)s.run({{"x", xs.view()}});
    const auto v = s.weight("w").as<float>();
    return std::vector<float>(v.begin(), v.end());
  };
  CHECK(trained(comm_group_type::all, 0) == std::vector<float>{1 - (2 + 8 + 18 + 32) / 4.0f});
  CHECK(trained(comm_group_type::consecutive, 2) == std::vector<float>{1 - (2 + 8) / 4.0f, 1 - (18 + 32) / 4.0f});
  CHECK(trained(comm_group_type::orthogonal, 2) == std::vector<float>{1 - (2 + 18) / 4.0f, 1 - (8 + 32) / 4.0f});
  CHECK(trained(comm_group_type::none, 0) == std::vector<float>{0.5f, -1, -3.5f, -7});
}

TEST_CASE("replicated training refuses groupings and inputs that do not fit, with what to do") {
  const auto model = square_model(ipu::data_type::F32);
  using ipu::train::comm_group_type;
  auto refuse = [&](ipu::train::replication_options r, const char* needle) {
    CHECK_THROWS_WITH_AS(ipu::train::training_session(model, {}, {}, ipu::train::output_mode::final, r),
                         doctest::Contains(needle), ipu::error);
  };
  refuse({.replicas = 0}, "replication factor of 0");
  refuse({.replicas = 8, .weights = {{"w", {comm_group_type::orthogonal, 3}}}},
         "Orthogonal groups of 3 replicas do not divide the replication factor 8");
  refuse({.replicas = 4, .inputs = ipu::train::replica_grouping{comm_group_type::consecutive, 3}},
         "the inputs: Consecutive groups of 3 replicas do not divide the replication factor 4");
  refuse({.replicas = 2, .weights = {{"v", {comm_group_type::none}}}}, "the step trains no weight of that name");
  refuse({.replicas = 2, .weights = {{"w", {comm_group_type::none}}, {"w", {comm_group_type::all}}}}, "twice");
  // All and None imply their size: another one is refused, not ignored.
  refuse({.replicas = 4, .weights = {{"w", {comm_group_type::all, 2}}}}, "All groups with a group size of 2 over 4 replicas");
  refuse({.replicas = 4, .inputs = ipu::train::replica_grouping{comm_group_type::none, 2}},
         "None groups with a group size of 2 over 4 replicas");
  ipu::train::training_session s(model, {}, {}, ipu::train::output_mode::final, {.replicas = 2});
  const auto x = ipu::host_tensor::from<float>({2, 2}, {1, 0, 0, 1});
  CHECK_THROWS_WITH_AS((void)s.run({{"x", x.view()}}, x.view()), doctest::Contains("times 2 input groups"), ipu::error);
  CHECK(s.steps() == 0);
  ipu::train::training_session g(model, {}, {}, ipu::train::output_mode::final,
                                 {.replicas = 2, .weights = {{"w", {comm_group_type::none}}}});
  const auto wrong = ipu::host_tensor::from<float>({3}, {1, 2, 3});
  CHECK_THROWS_WITH_AS(g.set_weight("w", wrong.view()), doctest::Contains("(one per group)"), ipu::error);
}

TEST_CASE("replicas spread over processes (replica_instance): two sessions of one replica each, gathering, train as one") {
  // Two "processes" on two threads, each running one of 2 replicas and exchanging its replica's
  // step outputs through shared memory (ipu/dist/ does it over MPI): both hold the weights of one
  // session running the 2 replicas, bit for bit, and the same losses.
  const auto model = square_model(ipu::data_type::F32);
  ipu::train::training_options o;
  o.opt = ipu::train::adam{.lr = 0.05};
  o.gradient_accumulation = 2;
  std::vector<std::byte> shared;
  std::barrier<> meet(2);
  auto instance = [&](std::int64_t first) {
    return ipu::train::replica_instance{
        first, 1, [&, first](std::uint64_t, std::int64_t, std::span<const std::byte> mine, std::span<std::byte> all) {
          if (first == 0) shared.assign(all.size(), std::byte{0});
          meet.arrive_and_wait();
          std::memcpy(shared.data() + static_cast<std::size_t>(first) * mine.size(), mine.data(), mine.size());
          meet.arrive_and_wait();
          std::memcpy(all.data(), shared.data(), all.size());
          meet.arrive_and_wait();  // both read before the next exchange writes
        }};
  };
  ipu::train::training_session one(model, o, {}, ipu::train::output_mode::all, {.replicas = 2});
  ipu::train::training_session a(model, o, {}, ipu::train::output_mode::all, {.replicas = 2, .instance = instance(0)});
  ipu::train::training_session b(model, o, {}, ipu::train::output_mode::all, {.replicas = 2, .instance = instance(1)});
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int k = 0; k < 3; ++k) {
    std::vector<float> xs(4 * 2 * 2), ys(4 * 2 * 2);
    for (auto& v : xs) v = normal(gen);
    for (auto& v : ys) v = normal(gen);
    const auto x = ipu::host_tensor::from<float>({8, 2}, xs), y = ipu::host_tensor::from<float>({8, 2}, ys);
    ipu::train::step_result ra;
    {
      std::jthread other([&] { ra = a.run({{"x", x.view()}}, y.view()); });
      const auto rb = b.run({{"x", x.view()}}, y.view());
      other.join();
      const auto r1 = one.run({{"x", x.view()}}, y.view());
      CHECK(ra.micro_batch_losses == r1.micro_batch_losses);
      CHECK(rb.micro_batch_losses == r1.micro_batch_losses);
      CHECK(bytes_of(rb.outputs[0]) == bytes_of(r1.outputs[0]));
    }
  }
  CHECK(bytes_of(a.weight("w")) == bytes_of(one.weight("w")));
  CHECK(bytes_of(b.weight("w")) == bytes_of(one.weight("w")));
  CHECK(a.weight("w").as<float>()[0] != 1.0f);  // trained
  // Refused: replicas outside the factor, or no gather.
  auto refuse = [&](ipu::train::replica_instance i, const char* needle) {
    CHECK_THROWS_WITH_AS(ipu::train::training_session(model, o, {}, ipu::train::output_mode::final,
                                                      {.replicas = 2, .instance = std::move(i)}),
                         doctest::Contains(needle), ipu::error);
  };
  refuse(instance(2), "[2, 2 + 1) are not among the 2 replicas");
  refuse({0, 3, instance(0).gather}, "[0, 0 + 3) are not among the 2 replicas");
  refuse({0, 1, {}}, "no gather function");
}

}  // namespace test_session
