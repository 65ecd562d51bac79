#pragma once
// The model the serve tests share: a small Builder model (y = relu(x * w + b), z = y - x over rows
// of 3) compiled to PopEF with a compiled batch of 4, in a fresh repository directory, and its
// answers computed by hand.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "ipu/compile/compile.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/serve/model_repository.hpp"
#include "../runtime/small_model.hpp"

namespace serve_test_models {

namespace fs = std::filesystem;

// The weights and graph are the runtime suites' small model (tests/runtime/small_model.hpp).
inline const std::vector<float>& w = runtime_test::w0;
inline const std::vector<float>& b = runtime_test::b0;
constexpr std::int64_t batch = 4;

/// y = relu(x * w + b), z = y - x for x: F32[4,3].
inline ipu::graph rows_model() { return runtime_test::small_model("x", batch, "rows"); }

/// The hand-computed answer for one row.
inline std::vector<float> y_of(const std::vector<float>& x) {
  std::vector<float> y;
  for (std::size_t i = 0; i < x.size(); ++i) y.push_back(std::max(0.f, x[i] * w[i % 3] + b[i % 3]));
  return y;
}
inline std::vector<float> z_of(const std::vector<float>& x) {
  auto y = y_of(x);
  for (std::size_t i = 0; i < x.size(); ++i) y[i] -= x[i];
  return y;
}

/// A fresh repository directory holding `rows` (version 1) with an optional config.json.
inline fs::path make_repository(const std::string& tag, const std::string& config = "") {
  const auto dir = fs::temp_directory_path() / ("ipu_serve_test_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "rows" / "1");
  static const auto model = ipu::popef::compile(rows_model(), ipu::options(), ipu::device_from_name("mk2", 1));
  ipu::popef::export_model(model, dir / "rows" / "1" / "model.popef");
  if (!config.empty()) std::ofstream(dir / "rows" / "config.json") << config;
  return dir;
}

inline ipu::serve::repository_options options() {
  ipu::serve::repository_options o;
  o.runner.acquire_device = false;  // tests share the simulated system with other processes
  return o;
}

}  // namespace serve_test_models
