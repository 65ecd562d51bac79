#pragma once
// Training runs made by PyTorch at test time, and the check that a training session reproduces one:
// shared by the training suites. A script writes OUT/<case>/model.onnx (the untrained model, with
// PyTorch's parameter names as initializer names), x.npy and labels.npy (stacked, one row per step:
// [steps, rows, ...]), and after training: <param>.npy for every parameter and floating-point
// buffer, losses.npy (each step's loss before its update) and out.npy (the trained model in eval
// mode on the first row of x).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "ipu/cpu/device.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/train/session.hpp"

namespace ipu_test {

namespace fs = std::filesystem;

/// The runs of tests/train/<script>, made once per test process and removed when it ends.
inline const fs::path& pytorch_runs(const std::string& script) {
  struct runs {
    fs::path dir;
    explicit runs(const std::string& s)
        : dir(fs::temp_directory_path() / ("ipu_train_" + std::to_string(std::random_device{}()))) {
      const std::string cmd = std::string(IPU_PYTHON) + " " + IPU_SOURCE_DIR + "/tests/train/" + s + " " + dir.string();
      REQUIRE(std::system(cmd.c_str()) == 0);
    }
    runs(const runs&) = delete;
    runs& operator=(const runs&) = delete;
    ~runs() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  };
  static std::map<std::string, std::unique_ptr<runs>> made;
  auto& r = made[script];
  if (!r) r = std::make_unique<runs>(script);
  return r->dir;
}

/// Row `k` of a stacked [steps, ...] array, as its own tensor.
inline ipu::host_tensor row(const ipu::host_tensor& all, std::int64_t k) {
  auto dims = all.info().shape.dims();
  dims.erase(dims.begin());
  ipu::host_tensor t(ipu::tensor_info{all.info().type, ipu::shape(dims)});
  const auto n = t.bytes().size();
  std::memcpy(t.bytes().data(), all.bytes().data() + static_cast<std::size_t>(k) * n, n);
  return t;
}

/// max |a - b| / max(max |b|, 1e-6), for F32 or F64 tensors.
inline double relative_difference(const ipu::host_tensor& a, const ipu::host_tensor& b) {
  REQUIRE(a.info() == b.info());
  double diff = 0, scale = 1e-6;
  auto compare = [&](auto x, auto y) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i])));
      scale = std::max(scale, std::fabs(static_cast<double>(y[i])));
    }
  };
  if (a.info().type == ipu::data_type::F64) compare(a.as<double>(), b.as<double>());
  else compare(a.as<float>(), b.as<float>());
  return diff / scale;
}

/// Trains case `name` of `script` with options `o` as PyTorch did and checks every weight and buffer,
/// the losses and the trained model's output. A row of x holds the step's micro-batches.
inline void check_training(const std::string& script, const std::string& name, const ipu::train::training_options& o,
                           std::int64_t steps, double tolerance) {
  CAPTURE(name);
  const auto dir = pytorch_runs(script) / name;
  const auto model = ipu::onnx::load_model(dir / "model.onnx");
  const auto x = ipu::io::read_npy(dir / "x.npy");
  const auto labels = ipu::io::read_npy(dir / "labels.npy");
  ipu::train::training_session s(model, o);
  const auto batches = x.info().shape[0];
  const auto want_losses = ipu::io::read_npy(dir / "losses.npy");
  for (std::int64_t k = 0; k < steps; ++k) {
    const auto xb = row(x, k % batches), lb = row(labels, k % batches);
    const auto r = s.run({{"x", xb.view()}}, lb.view());
    const double want = want_losses.as<double>()[static_cast<std::size_t>(k)];
    INFO("step " << k);
    CHECK(r.loss == doctest::Approx(want).epsilon(tolerance).scale(1e-3));
  }
  CHECK(s.steps() == static_cast<std::uint64_t>(steps));
  for (const auto& w : s.weight_names()) {
    CAPTURE(w);
    CHECK(relative_difference(s.weight(w), ipu::io::read_npy(dir / (w + ".npy"))) < tolerance);
  }
  for (const auto& b : s.buffer_names()) {
    CAPTURE(b);
    CHECK(relative_difference(s.buffer(b), ipu::io::read_npy(dir / (b + ".npy"))) < tolerance);
  }
  // The trained model, run for inference, gives PyTorch's trained output (on one micro-batch).
  ipu::cpu::device dev(s.trained_model());
  auto x0 = row(x, 0);
  const auto micro_rows = dev.model().tensor(dev.model().inputs().front()).info.shape[0];
  if (x0.info().shape[0] != micro_rows) x0 = ipu::train::take_rows(x0, 0, micro_rows);
  const auto out = dev.run(std::vector<ipu::host_tensor>{x0});
  CHECK(relative_difference(out.at(0), ipu::io::read_npy(dir / "out.npy")) < tolerance);
}

}  // namespace ipu_test
