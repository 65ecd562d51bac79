// Training a small CNN on scikit-learn's handwritten digits through the training session.
//
//   train_digits DATA_DIR [--epochs N] [--min-accuracy A]
//
// DATA_DIR holds digits_{train,test}_{x,y}.npy (examples/models/make_digits.py writes them from
// Debian's python3-sklearn). The CNN is built in C++ with the Builder (Conv 3x3 -> ReLU -> MaxPool
// -> Conv 3x3 -> ReLU -> MaxPool -> Gemm, PyTorch's default initialisation from a fixed seed), then
// trained with cross-entropy and Adam, 32 images per step. Prints the loss per epoch, the test
// accuracy, the measured host training throughput and the cost model's prediction for one Mk2 IPU
// running the same training step; exits 1 when the accuracy is below --min-accuracy.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/cpu/blas_tuning.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/train/session.hpp"

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t batch = 32;

/// PyTorch's default initialisation of a layer's weight and bias: uniform in +-1/sqrt(fan_in),
/// drawn from a fixed-seed generator so every run trains the same network.
struct uniform_init {
  std::uint64_t state = 0x9E3779B97F4A7C15ULL;
  std::vector<float> draw(std::size_t n, std::int64_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    std::vector<float> v(n);
    for (auto& x : v) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const double u = static_cast<double>(state >> 11) / static_cast<double>(1ULL << 53);
      x = static_cast<float>((2 * u - 1) * bound);
    }
    return v;
  }
};

ipu::graph make_cnn() {
  ipu::builder b("digits_cnn");
  uniform_init init;
  auto weight = [&](std::vector<std::int64_t> dims, std::int64_t fan_in, const char* name) {
    std::size_t n = 1;
    for (auto d : dims) n *= static_cast<std::size_t>(d);
    return b.add_initialized_input(ipu::make_constant<float>(ipu::shape(dims), init.draw(n, fan_in)), name);
  };
  auto x = b.add_input_tensor({ipu::data_type::F32, {batch, 1, 8, 8}}, "image");
  const ipu::conv_options same{.pads = {1, 1, 1, 1}};
  const ipu::pool_options halve{.kernel_shape = {2, 2}, .strides = {2, 2}};
  x = b.conv(x, weight({8, 1, 3, 3}, 9, "conv1.weight"), weight({8}, 9, "conv1.bias"), same);
  x = b.max_pool(b.relu(x), halve);  // [N, 8, 4, 4]
  x = b.conv(x, weight({16, 8, 3, 3}, 72, "conv2.weight"), weight({16}, 72, "conv2.bias"), same);
  x = b.max_pool(b.relu(x), halve);  // [N, 16, 2, 2]
  x = b.flatten(x, 1);
  x = b.gemm(x, weight({10, 64}, 64, "fc.weight"), weight({10}, 64, "fc.bias"), {.trans_b = true}, "logits");
  b.add_output(x);
  return std::move(b).build();
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_digits DATA_DIR [--epochs N] [--min-accuracy A]\n");
    return 2;
  }
  const fs::path dir = argv[1];
  int epochs = 12;
  double min_accuracy = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--epochs" && i + 1 < argc) epochs = std::stoi(argv[++i]);
    else if (a == "--min-accuracy" && i + 1 < argc) min_accuracy = std::stod(argv[++i]);
    else {
      std::fprintf(stderr, "train_digits: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (epochs < 1) {
    std::fprintf(stderr, "train_digits: --epochs must be at least 1\n");
    return 2;
  }
  const auto train_x = ipu::io::read_npy(dir / "digits_train_x.npy");
  const auto train_y = ipu::io::read_npy(dir / "digits_train_y.npy");
  const auto test_x = ipu::io::read_npy(dir / "digits_test_x.npy");
  const auto test_y = ipu::io::read_npy(dir / "digits_test_y.npy");
  const auto n_train = train_x.info().shape[0], n_test = test_x.info().shape[0];

  const auto model = make_cnn();
  ipu::train::training_options o;
  o.output = "logits";
  o.loss.kind = ipu::train::loss_kind::cross_entropy;
  o.opt = ipu::train::adam{.lr = 0.01};
  ipu::train::training_session s(model, o);
  std::printf("CNN of %zu ops, %zu trained weights; training step of %zu ops (forward, loss, backward, Adam)\n",
              model.num_ops(), s.weight_names().size(), s.graph_of_step().step.num_ops());

  const auto steps_per_epoch = n_train / batch;
  const auto t0 = std::chrono::steady_clock::now();
  for (int e = 0; e < epochs; ++e) {
    double sum = 0;
    for (std::int64_t k = 0; k < steps_per_epoch; ++k) {
      const auto first = (static_cast<std::int64_t>(e) * steps_per_epoch + k) * batch;
      const auto xb = ipu::train::take_rows(train_x, first, batch), yb = ipu::train::take_rows(train_y, first, batch);
      sum += s.run({{"image", xb.view()}}, yb.view()).loss;
    }
    std::printf("epoch %d: mean loss %.4f\n", e + 1, sum / static_cast<double>(steps_per_epoch));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto samples = static_cast<double>(epochs * steps_per_epoch * batch);

  // Test accuracy with the trained weights, in batches of 32 (the last one wraps; only real images count).
  ipu::cpu::device dev(s.trained_model());
  std::int64_t correct = 0;
  for (std::int64_t first = 0; first < n_test; first += batch) {
    const auto out = dev.run(std::vector<ipu::host_tensor>{ipu::train::take_rows(test_x, first, batch)});
    const auto logits = out[0].as<float>();
    for (std::int64_t i = 0; i < batch && first + i < n_test; ++i) {
      const auto* row = logits.data() + i * 10;
      const auto predicted = std::max_element(row, row + 10) - row;
      correct += predicted == test_y.as<std::int64_t>()[static_cast<std::size_t>(first + i)];
    }
  }
  const double accuracy = static_cast<double>(correct) / static_cast<double>(n_test);
  std::printf("test accuracy: %.2f%% (%lld of %lld held-out images)\n", 100 * accuracy,
              static_cast<long long>(correct), static_cast<long long>(n_test));
  std::printf("measured host training throughput (simulation on this CPU): %.0f samples/s\n", samples / seconds);

  // The cost model's view of the same training step on one Mk2 IPU.
  ipu::options opts;
  const auto compiled = ipu::popef::compile(s.graph_of_step().step, opts, ipu::device_from_name("mk2", 1));
  std::printf("predicted IPU training throughput (1 Mk2 IPU, weights and optimizer state streamed each step): "
              "%.0f samples/s\n",
              compiled.plan.predicted.samples_per_second);
  if (accuracy < min_accuracy) {
    std::printf("== accuracy %.2f%% is below the required %.2f%%\n", 100 * accuracy, 100 * min_accuracy);
    return 1;
  }
  std::printf("== OK\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ipu::tune_openblas_for_host_device();  // this program owns its process
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_digits: %s\n", e.what());
    return 2;
  }
}
