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
