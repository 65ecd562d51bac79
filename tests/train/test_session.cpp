// Training sessions against PyTorch training the same models on the same data (tests/train/
// torch_training.py): the seed's Linear(10, 10) + MSELoss example over 800 steps, an MLP whose
// first layer feeds two branches and a small CNN, under SGD (momentum, dampening, Nesterov, weight
// decay), Adam and AdamW, with cross-entropy and L1 losses.
#include "ipu/train/session.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <random>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/ops/all.hpp"
#include "pytorch_reference.hpp"

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
