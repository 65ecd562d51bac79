// Training a small CNN on scikit-learn's handwritten digits through the training session.
//
//   train_digits DATA_DIR [--epochs N] [--min-accuracy A] [--f16 [--loss-scaling S]]
//
// DATA_DIR holds digits_{train,test}_{x,y}.npy (examples/models/make_digits.py writes them from
// Debian's python3-sklearn). The CNN is built in C++ with the Builder (Conv 3x3 -> ReLU -> MaxPool
// -> Conv 3x3 -> ReLU -> MaxPool -> Gemm, PyTorch's default initialisation from a fixed seed), then
// trained with cross-entropy and Adam, 32 images per step. Prints the loss per epoch, the test
// accuracy, the measured host training throughput and the cost model's prediction for one Mk2 IPU
// running the same training step; exits 1 when the accuracy is below --min-accuracy.
//
// --f16 then trains the same network again in half precision, as PopTorch's float16 models train:
// F16 weights, activations and gradients, the loss on the logits cast to F32, the loss multiplied by
// --loss-scaling (default 128) before the backward pass so small gradients do not underflow, and
// Adam's moments kept in F32. It exits 1 when its accuracy is more than 1 point below F32's.
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
#include "ipu/half.hpp"
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

/// The CNN with weights and activations of `type` (F32 or F16); its logits are F32.
ipu::graph make_cnn(ipu::data_type type) {
  ipu::builder b("digits_cnn");
  uniform_init init;
  auto weight = [&](std::vector<std::int64_t> dims, std::int64_t fan_in, const char* name) {
    std::size_t n = 1;
    for (auto d : dims) n *= static_cast<std::size_t>(d);
    const auto v = init.draw(n, fan_in);
    if (type == ipu::data_type::F16) {
      std::vector<ipu::half> h;
      for (float f : v) h.emplace_back(f);
      return b.add_initialized_input(ipu::make_constant<ipu::half>(ipu::shape(dims), h), name);
    }
    return b.add_initialized_input(ipu::make_constant<float>(ipu::shape(dims), v), name);
  };
  auto x = b.add_input_tensor({type, {batch, 1, 8, 8}}, "image");
  const ipu::conv_options same{.pads = {1, 1, 1, 1}};
  const ipu::pool_options halve{.kernel_shape = {2, 2}, .strides = {2, 2}};
  x = b.conv(x, weight({8, 1, 3, 3}, 9, "conv1.weight"), weight({8}, 9, "conv1.bias"), same);
  x = b.max_pool(b.relu(x), halve);  // [N, 8, 4, 4]
  x = b.conv(x, weight({16, 8, 3, 3}, 72, "conv2.weight"), weight({16}, 72, "conv2.bias"), same);
  x = b.max_pool(b.relu(x), halve);  // [N, 16, 2, 2]
  x = b.flatten(x, 1);
  if (type == ipu::data_type::F32) {
    x = b.gemm(x, weight({10, 64}, 64, "fc.weight"), weight({10}, 64, "fc.bias"), {.trans_b = true}, "logits");
  } else {
    x = b.gemm(x, weight({10, 64}, 64, "fc.weight"), weight({10}, 64, "fc.bias"), {.trans_b = true});
    x = b.cast(x, ipu::data_type::F32, "logits");
  }
  b.add_output(x);
  return std::move(b).build();
}

/// `t` (F32) as `type`.
ipu::host_tensor as(const ipu::host_tensor& t, ipu::data_type type) {
  if (type == ipu::data_type::F32) return t;
  ipu::host_tensor r(ipu::tensor_info{type, t.info().shape});
  const auto in = t.as<float>();
  auto out = r.as<ipu::half>();
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = ipu::half(in[i]);
  return r;
}

struct outcome {
  double accuracy = 0;
  double samples_per_second = 0;
  ipu::graph step;
};

/// Trains the CNN in `type` for `epochs` and returns its test accuracy.
outcome train_and_test(const fs::path& dir, int epochs, ipu::data_type type, double loss_scaling) {
  const auto train_x = as(ipu::io::read_npy(dir / "digits_train_x.npy"), type);
  const auto train_y = ipu::io::read_npy(dir / "digits_train_y.npy");
  const auto test_x = as(ipu::io::read_npy(dir / "digits_test_x.npy"), type);
  const auto test_y = ipu::io::read_npy(dir / "digits_test_y.npy");
  const auto n_train = train_x.info().shape[0], n_test = test_x.info().shape[0];

  const auto model = make_cnn(type);
  ipu::train::training_options o;
  o.output = "logits";
  o.loss.kind = ipu::train::loss_kind::cross_entropy;
  auto adam = ipu::train::adam{.lr = 0.01};
  if (type == ipu::data_type::F16) {
    adam.loss_scaling = loss_scaling;
    adam.first_order_momentum_accum_type = ipu::data_type::F32;
    adam.second_order_momentum_accum_type = ipu::data_type::F32;
  }
  o.opt = adam;
  ipu::train::training_session s(model, o);
  std::printf("%s CNN of %zu ops, %zu trained weights; training step of %zu ops (forward, loss, backward, Adam)\n",
              std::string(ipu::to_string(type)).c_str(), model.num_ops(), s.weight_names().size(),
              s.graph_of_step().step.num_ops());

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
    std::fflush(stdout);
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
  return {accuracy, samples / seconds, s.graph_of_step().step};
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_digits DATA_DIR [--epochs N] [--min-accuracy A] [--f16 [--loss-scaling S]]\n");
    return 2;
  }
  const fs::path dir = argv[1];
  int epochs = 12;
  double min_accuracy = 0, loss_scaling = 128;
  bool f16 = false, scaling_given = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--epochs" && i + 1 < argc) epochs = std::stoi(argv[++i]);
    else if (a == "--min-accuracy" && i + 1 < argc) min_accuracy = std::stod(argv[++i]);
    else if (a == "--f16") f16 = true;
    else if (a == "--loss-scaling" && i + 1 < argc) {
      loss_scaling = std::stod(argv[++i]);
      scaling_given = true;
    } else {
      std::fprintf(stderr, "train_digits: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (epochs < 1) {
    std::fprintf(stderr, "train_digits: --epochs must be at least 1\n");
    return 2;
  }
  if (scaling_given && !f16) {
    std::fprintf(stderr, "train_digits: --loss-scaling applies to --f16 training\n");
    return 2;
  }
  if (!(loss_scaling > 0)) {
    std::fprintf(stderr, "train_digits: --loss-scaling must be > 0\n");
    return 2;
  }
  const auto f32 = train_and_test(dir, epochs, ipu::data_type::F32, 1);

  // The cost model's view of the same training step on one Mk2 IPU.
  ipu::options opts;
  const auto compiled = ipu::popef::compile(f32.step, opts, ipu::device_from_name("mk2", 1));
  std::printf("predicted IPU training throughput (1 Mk2 IPU, weights and optimizer state streamed each step): "
              "%.0f samples/s\n",
              compiled.plan.predicted.samples_per_second);
  if (f32.accuracy < min_accuracy) {
    std::printf("== accuracy %.2f%% is below the required %.2f%%\n", 100 * f32.accuracy, 100 * min_accuracy);
    return 1;
  }
  if (f16) {
    std::printf("== the same network in F16, loss scaling %g, Adam's moments in F32\n", loss_scaling);
    const auto half = train_and_test(dir, epochs, ipu::data_type::F16, loss_scaling);
    std::printf("F16 test accuracy %.2f%%, F32 %.2f%%\n", 100 * half.accuracy, 100 * f32.accuracy);
    if (half.accuracy < f32.accuracy - 0.01) {
      std::printf("== F16 is more than 1 point below F32\n");
      return 1;
    }
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
