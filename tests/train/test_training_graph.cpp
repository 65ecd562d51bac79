// The training step's Dropout in training mode (ipu/train/training_graph.hpp): written out as a
// seeded mask and a Mul, trained through a session. Its masks (drawn from the session's seed, step
// and micro-batch), its values and its gradient are checked element by element, and one SGD step
// of a model PyTorch exported in train() mode against PyTorch given the same mask.
#include "ipu/train/training_graph.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/train/session.hpp"
#include "pytorch_reference.hpp"

namespace test_training_graph {

namespace {

using ipu::data_type;
using ipu::host_tensor;
using ipu::shape;

/// Dropout(x, ratio, training_mode) with both outputs.
std::vector<ipu::tensor_id> dropout(ipu::builder& b, ipu::tensor_id x, float ratio, bool training = true) {
  const auto r = b.add_constant(ipu::make_constant<float>(shape{}, {ratio}));
  const auto t = b.add_constant(ipu::make_constant<bool>(shape{}, {training}));
  return b.op("Dropout", {x, r, t}, {}, {.num_outputs = 2});
}

/// x + w (w a weight of zeros) through a Dropout; the loss is sum(y * c). Outputs: the loss, y, mask.
ipu::graph summed_dropout(std::int64_t n, float ratio, bool training = true) {
  ipu::builder b("dropout");
  const auto x = b.add_input_tensor({data_type::F32, {n}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>(shape{n}, std::vector<float>(static_cast<std::size_t>(n), 0.0f)), "w");
  std::vector<float> c(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = 0.25f + static_cast<float>(i % 13) * 0.3f;
  const auto d = dropout(b, b.add(x, w, "h"), ratio, training);
  const auto cv = b.add_constant(ipu::make_constant<float>(shape{n}, c), "c");
  const auto loss = b.reduce_sum(b.mul(d[0], cv), {0}, false, "loss");
  b.add_output(loss);
  b.add_output(d[0]);
  b.add_output(d[1]);
  return std::move(b).build();
}

ipu::train::training_options own_loss(std::uint64_t seed = 0) {
  ipu::train::training_options o;
  o.output = "loss";
  o.loss.kind = ipu::train::loss_kind::output;
  o.opt = ipu::train::sgd{.lr = 1.0};
  o.seed = seed;
  return o;
}

host_tensor inputs_of(std::int64_t n) {
  std::vector<float> x(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1.5f + static_cast<float>(i % 17) * 0.37f - (i % 2 ? 4.0f : 0.0f);
  return host_tensor::from<float>(shape{n}, x);
}

/// An MLP with dropout between its layers: x [8, 6] -> Linear(6, 16) -> Relu -> Dropout(0.5) ->
/// Linear(16, 4) = y, its mask a second output. Weights from a fixed generator.
ipu::graph mlp_with_dropout() {
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto values = [&](std::size_t k) {
    std::vector<float> v(k);
    for (auto& e : v) e = u(gen);
    return v;
  };
  ipu::builder b("mlp");
  const auto x = b.add_input_tensor({data_type::F32, {8, 6}}, "x");
  const auto w1 = b.add_initialized_input(ipu::make_constant<float>(shape{6, 16}, values(96)), "w1");
  const auto b1 = b.add_initialized_input(ipu::make_constant<float>(shape{16}, values(16)), "b1");
  const auto w2 = b.add_initialized_input(ipu::make_constant<float>(shape{16, 4}, values(64)), "w2");
  const auto h = b.relu(b.add(b.matmul(x, w1), b1));
  const auto d = dropout(b, h, 0.5f);
  b.add_output(b.matmul(d[0], w2, "y"));
  b.add_output(d[1]);
  return std::move(b).build();
}

/// Trains mlp_with_dropout() for 5 steps of 2 micro-batches with `seed` (unset: none given); its
/// weights w1, b1, w2 after.
std::vector<host_tensor> train_mlp(std::optional<std::uint64_t> seed, std::vector<host_tensor>* masks = nullptr) {
  ipu::train::training_options o;
  o.output = "y";
  o.opt = ipu::train::sgd{.lr = 0.1, .momentum = 0.9};
  o.gradient_accumulation = 2;
  if (seed) o.seed = *seed;
  ipu::train::training_session s(mlp_with_dropout(), o, {}, ipu::train::output_mode::all);
  std::mt19937 gen(9);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int step = 0; step < 5; ++step) {
    std::vector<float> x(16 * 6), t(16 * 4);
    for (auto& e : x) e = u(gen);
    for (auto& e : t) e = u(gen);
    const auto xv = host_tensor::from<float>(shape{16, 6}, x), tv = host_tensor::from<float>(shape{16, 4}, t);
    auto r = s.run({{"x", xv.view()}}, tv.view());
    if (masks) masks->push_back(std::move(r.outputs[1]));  // [16, 16]: both micro-batches' masks
  }
  std::vector<host_tensor> w;
  for (const char* name : {"w1", "b1", "w2"}) w.push_back(s.weight(name));
  return w;
}

/// x [4, 6] -> Linear(6, 8) -> LayerNorm over the 8 written out as PyTorch exports it below opset 17
/// (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) -> y. With `centred_output` the
/// centred values are a second output, which keeps the ops from fusing: the same arithmetic, op by op.
ipu::graph written_out_layer_norm(bool centred_output) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto values = [&](std::size_t k, float offset) {
    std::vector<float> v(k);
    for (auto& e : v) e = u(gen) + offset;
    return v;
  };
  ipu::builder b("ln");
  const auto x = b.add_input_tensor({data_type::F32, {4, 6}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>(shape{6, 8}, values(48, 0)), "w");
  const auto scale = b.add_initialized_input(ipu::make_constant<float>(shape{8}, values(8, 1)), "scale");
  const auto bias = b.add_initialized_input(ipu::make_constant<float>(shape{8}, values(8, 0)), "bias");
  const auto h = b.matmul(x, w);
  const auto d = b.sub(h, b.reduce_mean(h, {-1}));
  const auto var = b.reduce_mean(b.pow(d, b.add_constant(ipu::make_scalar(2.0f))), {-1});
  const auto n = b.div(d, b.sqrt(b.add(var, b.add_constant(ipu::make_scalar(1e-5f)))));
  b.add_output(b.add(b.mul(n, scale), bias, "y"));
  if (centred_output) b.add_output(d);
  return std::move(b).build();
}

bool same_bytes(const host_tensor& a, const host_tensor& b) {
  return a.info() == b.info() && std::memcmp(a.bytes().data(), b.bytes().data(), a.bytes().size()) == 0;
}

}  // namespace

TEST_CASE("training-mode Dropout: a ratio dropped, the kept scaled by 1/(1-ratio) exactly, dX = dY * mask / (1-ratio)") {
  const std::int64_t n = 100000;
  const float ratio = 0.2f;
  ipu::train::training_session s(summed_dropout(n, ratio), own_loss(3));
  const auto x = inputs_of(n);
  const auto r = s.run({{"x", x.view()}});
  const auto y = r.outputs[1].as<float>();
  const auto mask = r.outputs[2].as<bool>();
  // The scale in F32, as the step holds it; the weight started at 0, so h = x exactly.
  const float scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(ratio)));
  // SGD with lr 1 from w = 0: w' = -dW = -dX exactly.
  const auto w = s.weight("w").as<float>();
  std::int64_t dropped = 0, wrong_y = 0, wrong_mask = 0, wrong_grad = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
    const float ci = 0.25f + static_cast<float>(i % 13) * 0.3f;
    dropped += mask[i] ? 0 : 1;
    wrong_mask += mask[i] != (y[i] != 0.0f);
    wrong_y += y[i] != (mask[i] ? x.as<float>()[i] * scale : 0.0f);
    wrong_grad += -w[i] != (mask[i] ? ci * scale : 0.0f);
  }
  CHECK(wrong_mask == 0);
  CHECK(wrong_y == 0);
  CHECK(wrong_grad == 0);
  // Binomial: within 5 standard deviations (0.0063 at ratio 0.2 over 100k elements).
  const double p = 0.2, sigma = std::sqrt(p * (1 - p) / static_cast<double>(n));
  CHECK(std::fabs(static_cast<double>(dropped) / static_cast<double>(n) - p) < 5 * sigma);
  // The next step draws a fresh mask.
  const auto again = s.run({{"x", x.view()}});
  std::int64_t differ = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) differ += again.outputs[2].as<bool>()[i] != mask[i];
  CHECK(differ > n / 5);  // 2 p (1 - p) = 32% expected
}

TEST_CASE("training-mode Dropout: the same seed trains bit for bit the same, another seed otherwise; fresh masks each micro-batch") {
  std::vector<host_tensor> masks, masks_again;
  const auto a = train_mlp(7, &masks), b = train_mlp(7, &masks_again), other = train_mlp(8);
  const auto by_default = train_mlp(std::nullopt), zero = train_mlp(0);
  for (std::size_t w = 0; w < a.size(); ++w) {
    CAPTURE(w);
    CHECK(same_bytes(a[w], b[w]));
    CHECK(!same_bytes(a[w], other[w]));
    CHECK(same_bytes(by_default[w], zero[w]));  // the documented default seed is 0
    CHECK(!same_bytes(by_default[w], a[w]));
  }
  REQUIRE(masks.size() == 5);
  for (std::size_t k = 0; k < masks.size(); ++k) CHECK(same_bytes(masks[k], masks_again[k]));
  // Micro-batch 0 (rows 0-7) and 1 (rows 8-15) of a step, and the steps, draw different masks.
  auto half_of = [](const host_tensor& m, int part) {
    const auto v = m.as<bool>();
    return std::vector<bool>(v.begin() + part * 128, v.begin() + (part + 1) * 128);
  };
  CHECK(half_of(masks[0], 0) != half_of(masks[0], 1));
  CHECK(half_of(masks[0], 0) != half_of(masks[1], 0));
  CHECK(half_of(masks[1], 1) != half_of(masks[2], 1));
}

TEST_CASE("Dropout in a training step: ratio 0 and inference are the identity; a bad ratio or a computed training_mode is refused") {
  const std::int64_t n = 64;
  const auto x = inputs_of(n);
  for (const bool training : {true, false}) {
    CAPTURE(training);
    ipu::train::training_session s(summed_dropout(n, training ? 0.0f : 0.5f, training), own_loss());
    const auto r = s.run({{"x", x.view()}});
    CHECK(same_bytes(r.outputs[1], x));
    for (bool k : r.outputs[2].as<bool>()) CHECK(k);
  }
  // Dropout in inference stays a Dropout of the step (the identity); in training it is written out.
  auto has_op = [](const ipu::graph& g, const char* type) {
    for (const auto& op : g.ops())
      if (op.type == type) return true;
    return false;
  };
  const auto inference = ipu::train::make_training_graph(summed_dropout(n, 0.5f, false), own_loss());
  CHECK(has_op(inference.step, "Dropout"));
  CHECK(!inference.step.find_tensor(ipu::train::dropout_seed_input));
  const auto training = ipu::train::make_training_graph(summed_dropout(n, 0.5f), own_loss());
  CHECK(!has_op(training.step, "Dropout"));
  CHECK(has_op(training.step, "DropoutMask"));
  CHECK(training.step.find_tensor(ipu::train::dropout_seed_input));

  for (const float bad : {1.0f, -0.1f, 2.0f})
    CHECK_THROWS_WITH_AS((void)ipu::train::make_training_graph(summed_dropout(n, bad), own_loss()),
                         doctest::Contains("outside [0, 1)"), ipu::error);
  ipu::builder b("computed");
  const auto xi = b.add_input_tensor({data_type::F32, {4}}, "x");
  const auto flag = b.add_input_tensor({data_type::BOOL, {}}, "training");
  const auto w = b.add_initialized_input(ipu::make_constant<float>(shape{4}, {1, 2, 3, 4}), "w");
  const auto r = b.add_constant(ipu::make_constant<float>(shape{}, {0.5f}));
  const auto y = b.op("Dropout", {b.mul(xi, w), r, flag}).front();
  b.add_output(b.reduce_sum(y, {0}, false, "loss"));
  CHECK_THROWS_WITH_AS((void)ipu::train::make_training_graph(std::move(b).build(), own_loss()),
                       doctest::Contains("training_mode of Dropout"), ipu::error);
}

TEST_CASE("a Linear -> Dropout -> Linear PyTorch exported in train() mode: one SGD step as PyTorch's, given our mask") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ipu_dropout_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  auto python = [&](const char* mode) {
    const std::string cmd = std::string(IPU_PYTHON) + " " + IPU_SOURCE_DIR + "/tests/train/torch_dropout.py " + mode + " " +
                            dir.string();
    REQUIRE(std::system(cmd.c_str()) == 0);
  };
  python("export");
  auto model = ipu::onnx::load_model(dir / "model.onnx");
  // The Dropout's mask output, unused in the export, becomes an output: the mask the step drew.
  const auto mask_tensor = model.find_tensor("/drop/Dropout_output_1");
  REQUIRE(mask_tensor);
  model.mark_output(*mask_tensor);
  ipu::train::training_options o;
  o.output = "y";
  o.opt = ipu::train::sgd{.lr = 0.1};
  o.seed = 11;
  ipu::train::training_session s(model, o);
  const auto x = ipu::io::read_npy(dir / "x.npy"), labels = ipu::io::read_npy(dir / "labels.npy");
  const auto r = s.run({{"x", x.view()}}, labels.view());
  const auto& mask = r.outputs[1];
  REQUIRE(mask.info() == ipu::tensor_info{data_type::BOOL, {5, 6}});
  std::size_t kept = 0;
  for (bool k : mask.as<bool>()) kept += k;
  CHECK(kept > 0);  // a step that drops everything, or nothing, would test less
  CHECK(kept < 30);
  ipu::io::write_npy(dir / "mask.npy", mask);
  python("step");
  for (const char* w : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}) {
    CAPTURE(w);
    const auto want = ipu::io::read_npy(dir / ("trained_" + std::string(w) + ".npy"));
    CHECK(ipu_test::relative_difference(s.weight(w), want) < 1e-6);
    // The step changed the weight: a comparison of two untouched weights would prove nothing.
    CHECK(ipu_test::relative_difference(s.weight(w), ipu::io::read_npy(dir / (std::string(w) + ".npy"))) > 1e-4);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST_CASE("a LayerNorm written out as ONNX ops trains as one op each way, as its ops would train") {
  ipu::train::training_options o;
  o.output = "y";
  o.opt = ipu::train::sgd{.lr = 0.1, .momentum = 0.9};
  const auto fused = ipu::train::make_training_graph(written_out_layer_norm(false), o);
  std::size_t norms = 0, grads = 0, pows = 0;
  for (const auto& op : fused.step.ops()) {
    if (op.type == "LayerNormalization") {
      ++norms;
      CHECK(op.outputs.size() == 3);  // with its statistics, which the backward reads
    }
    grads += op.type == "LayerNormalizationGrad" && op.domain == "ipu" ? 1 : 0;
    pows += op.type == "Pow" || op.type == "Sqrt" ? 1 : 0;
  }
  CHECK(norms == 1);
  CHECK(grads == 1);
  CHECK(pows == 0);
  const auto op_by_op = ipu::train::make_training_graph(written_out_layer_norm(true), o);
  for (const auto& op : op_by_op.step.ops()) CHECK(op.type != "LayerNormalization");

  // Three SGD steps each way: the weights agree to float rounding.
  auto trained = [&](bool centred_output) {
    ipu::train::training_session s(written_out_layer_norm(centred_output), o);
    std::mt19937 gen(11);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int step = 0; step < 3; ++step) {
      std::vector<float> x(24), t(32);
      for (auto& e : x) e = u(gen);
      for (auto& e : t) e = u(gen);
      const auto xv = host_tensor::from<float>(shape{4, 6}, x), tv = host_tensor::from<float>(shape{4, 8}, t);
      (void)s.run({{"x", xv.view()}}, tv.view());
    }
    std::vector<host_tensor> w;
    for (const char* name : {"w", "scale", "bias"}) w.push_back(s.weight(name));
    return w;
  };
  const auto a = trained(false), b = trained(true);
  for (std::size_t k = 0; k < a.size(); ++k) {
    const auto av = a[k].as<float>(), bv = b[k].as<float>();
    REQUIRE(av.size() == bv.size());
    for (std::size_t i = 0; i < av.size(); ++i) CHECK(av[i] == doctest::Approx(bv[i]).epsilon(1e-5).scale(1e-5));
  }
}

}  // namespace test_training_graph
