// Whole models exported by PyTorch at test time (tests/train/torch_models.py) trained 10 steps (ResNet-18: 3) by a
// training session and by torch.optim on the same batches: LeNet-5, ResNet-18 (batch 4, BatchNorm
// in train() mode), a transformer encoder layer and an LSTM tagger, each under SGD (momentum,
// Nesterov, weight decay) in float32 (ResNet-18 in float64), and Adam, AdamW and RMSprop in float64
// (torch_models.py says why). Every weight, running statistic and loss must match within 1e-4
// relative.
#include <doctest/doctest.h>

#include <string>

#include "ipu/ops/all.hpp"
#include "ipu/train/session.hpp"
#include "pytorch_reference.hpp"

namespace test_models {

namespace {

namespace train = ipu::train;

void check_model(const std::string& model, std::int64_t steps = 10) {
  struct named {
    const char* name;
    train::optimizer opt;
  };
  const named optimizers[] = {
      {"sgd", train::sgd{.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true}},
      {"adam", train::adam{.lr = 1e-3}},
      {"adamw", train::adam{.lr = 1e-3, .weight_decay = 0.01, .decoupled_weight_decay = true}},
      {"rmsprop", train::rmsprop{.lr = 1e-3, .momentum = 0.5}},
  };
  for (const auto& [name, opt] : optimizers) {
    if (model == "resnet18" && std::string(name) == "rmsprop") continue;  // torch_models.py says why
    train::training_options o;
    o.loss.kind = train::loss_kind::cross_entropy;
    o.opt = opt;
    ipu_test::check_training("torch_models.py", model + "_" + name, o, steps, 1e-4);
  }
}

}  // namespace

TEST_CASE("LeNet-5 trains as PyTorch: SGD, Adam, AdamW, RMSprop") { check_model("lenet5"); }
TEST_CASE("ResNet-18 (batch 4, BatchNorm in train() mode) trains as PyTorch: SGD, Adam, AdamW") {
  check_model("resnet18", 3);  // chaotic at batch 4: torch_models.py says why
}
TEST_CASE("a transformer encoder layer trains as PyTorch: SGD, Adam, AdamW, RMSprop") { check_model("transformer"); }
TEST_CASE("an LSTM tagger trains as PyTorch: SGD, Adam, AdamW, RMSprop") { check_model("lstm_tagger"); }

}  // namespace test_models
