// runtime::inference_session (PopART's InferenceSession) on a small model with two weights
// (y = relu(x * w + b), z = y - x) and on PyTorch's transformer encoder from its ONNX file:
// outputs against values computed by hand, ipu::cpu::device and PyTorch; anchor return types;
// compile_and_export and load_executable; devices acquired from a device manager; error paths.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "../popef/popef_test_util.hpp"
#include "../runtime/small_model.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/runtime/device_manager.hpp"
#include "ipu/builder/builder.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/popart/inference_session.hpp"

namespace test_inference_session {

using namespace ipu;
namespace fs = std::filesystem;

namespace inference_session_tests {

using runtime_test::b0;
using runtime_test::relative_difference;
using runtime_test::relu;
using runtime_test::small_model;
using runtime_test::w0;
using test_popef::scratch_dir;

float y_of(float x, std::size_t i) { return relu(x * w0[i] + b0[i]); }

/// Micro-batch m of a step: x = {m + 1, 2 - 3m, 0.5 m + 4}.
std::vector<float> x_of(std::size_t m, float k = 0) {
  const auto f = static_cast<float>(m) + k;
  return {f + 1.f, 2.f - 3.f * f, 0.5f * f + 4.f};
}
host_tensor step_input(std::size_t batches, float k = 0) {
  std::vector<float> v;
  for (std::size_t m = 0; m < batches; ++m) {
    const auto x = x_of(m, k);
    v.insert(v.end(), x.begin(), x.end());
  }
  return host_tensor::from<float>({static_cast<std::int64_t>(batches), 3}, v);
}

const auto sharded_opts = [] { return options().execution_strategy(strategy_settings::sharded()); };
const auto pipelined_opts = [] { return options().execution_strategy(strategy_settings::pipelined()); };

/// Checks All anchors y and z of a step built by step_input(batches, k).
bool check_all(const std::map<std::string, host_tensor>& anchors, std::size_t batches, float k = 0) {
  const auto y = anchors.at("y").as<float>(), z = anchors.at("z").as<float>();
  if (y.size() != 3 * batches || z.size() != 3 * batches) return false;
  for (std::size_t m = 0; m < batches; ++m) {
    const auto x = x_of(m, k);
    for (std::size_t i = 0; i < 3; ++i) {
      if (y[3 * m + i] != y_of(x[i], i)) return false;
      if (z[3 * m + i] != y_of(x[i], i) - x[i]) return false;
    }
  }
  return true;
}

std::map<std::string, host_tensor> run_step(runtime::inference_session& s, std::size_t batches, float k = 0) {
  auto anchors = s.init_anchor_arrays();
  const auto x = step_input(batches, k);
  step_io io({{"x", x.view()}}, anchors);
  s.run(io);
  return anchors;
}

data_flow all_of_both(std::uint64_t bps) { return data_flow(bps, {"y", "z"}, anchor_return_type::all()); }

TEST_CASE("an inference session compiles a builder graph and runs steps") {
  runtime::inference_session s(small_model(), all_of_both(4), device_from_name("mk2", 1), sharded_opts());
  CHECK_FALSE(s.is_prepared());
  CHECK(s.input_array_info("x") == tensor_info{data_type::F32, shape{4, 3}});
  s.prepare_device();
  CHECK(s.is_prepared());
  CHECK_FALSE(s.is_loaded_from_file());
  CHECK(s.executable().plan.batches_per_step == 4);
  CHECK(s.options().device_iterations() == 4);
  const auto anchors = run_step(s, 4);
  CHECK(anchors.at("y").info() == tensor_info{data_type::F32, shape{4, 3}});
  CHECK(check_all(anchors, 4));
  CHECK(check_all(run_step(s, 4, 7.f), 4, 7.f));  // a second step with other data

  // The CPU device on the same graph gives the same bits, micro-batch by micro-batch.
  const auto g = small_model();
  cpu::device dev(g);
  for (std::size_t m = 0; m < 4; ++m) {
    const auto xm = host_tensor::from<float>({3}, x_of(m));
    const auto ref = dev.run(cpu::named_tensors{{"x", xm.view()}});
    CHECK(std::memcmp(ref[0].data(), anchors.at("y").data() + m * 12, 12) == 0);
    CHECK(std::memcmp(ref[1].data(), anchors.at("z").data() + m * 12, 12) == 0);
  }
}

TEST_CASE("anchor return types Final and Sum through a pipeline over two IPUs") {
  const data_flow flow(4, {{"y", anchor_return_type::final()}, {"z", anchor_return_type::sum()}});
  runtime::inference_session s(small_model(), flow, device_from_name("mk2", 2), pipelined_opts());
  s.prepare_device();
  CHECK(s.executable().plan.stages.size() == 2);
  const auto anchors = run_step(s, 4);
  const auto y = anchors.at("y").as<float>(), z = anchors.at("z").as<float>();
  REQUIRE(y.size() == 3);
  REQUIRE(z.size() == 3);
  const auto last = x_of(3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(y[i] == y_of(last[i], i));
    float sum = 0;
    for (std::size_t m = 0; m < 4; ++m) sum += y_of(x_of(m)[i], i) - x_of(m)[i];
    CHECK(z[i] == sum);
  }
}

TEST_CASE("run before prepare_device is an error with a hint") {
  runtime::inference_session s(small_model(), all_of_both(2), device_from_name("mk2", 1), sharded_opts());
  auto anchors = s.init_anchor_arrays();
  const auto x = step_input(2);
  step_io io({{"x", x.view()}}, anchors);
  CHECK_THROWS_WITH_AS(s.run(io), doctest::Contains("run() before prepare_device()"), error);
  CHECK_THROWS_WITH_AS(s.run(io), doctest::Contains("call prepare_device() first"), error);
  CHECK_THROWS_WITH_AS((void)s.executable(), doctest::Contains("not compiled yet"), error);
  CHECK_THROWS_AS((void)s.runtime_session(), error);
  s.prepare_device();
  s.run(io);
  CHECK(check_all(anchors, 2));
  const auto one = step_input(1);
  step_io short_io({{"x", one.view()}}, anchors);
  CHECK_THROWS_WITH_AS(s.run(short_io), doctest::Contains("tensor 'x': expected 6 but received 3"), error);
  step_io missing({}, anchors);
  CHECK_THROWS_WITH_AS(s.run(missing), doctest::Contains("input 'x' is unbound"), error);
}

TEST_CASE("options and data flow must agree on batches per step") {
  CHECK_THROWS_WITH_AS(
      runtime::inference_session(small_model(), all_of_both(4), device_from_name("mk2", 1), sharded_opts().device_iterations(3)),
      doctest::Contains("3 device iterations but the data flow runs 4"), error);
  CHECK_NOTHROW(
      runtime::inference_session(small_model(), all_of_both(4), device_from_name("mk2", 1), sharded_opts().device_iterations(4)));
}

TEST_CASE("compile_and_export then load_executable runs without compiling") {
  scratch_dir dir("inference");
  const auto file = dir / "small.popef";
  {
    runtime::inference_session s(small_model(), all_of_both(4), device_from_name("mk2", 1), sharded_opts());
    s.compile_and_export(file);  // no device attached
    CHECK_FALSE(s.is_prepared());
    CHECK(fs::exists(file));
  }
  // Pipelined options would plan another executable: the file's sharded one runs instead.
  runtime::inference_session s(small_model(), all_of_both(4), device_from_name("mk2", 1), pipelined_opts());
  s.load_executable(file);
  CHECK(s.is_loaded_from_file());
  CHECK(s.loaded_from() == file);
  s.prepare_device();
  CHECK(s.executable().plan.strategy == "sharded");
  CHECK(s.executable().plan == popef::load(file).plan);
  CHECK(check_all(run_step(s, 4), 4));

  // And with no model at all: the file is everything.
  auto f = runtime::inference_session::from_executable(file, all_of_both(4), device_from_name("mk2", 1));
  CHECK(f.is_loaded_from_file());
  f.prepare_device();
  CHECK(check_all(run_step(f, 4, 2.f), 4, 2.f));
}

TEST_CASE("load_executable refuses an executable that does not fit") {
  scratch_dir dir("inference-bad");
  const auto file = dir / "small.popef";
  runtime::inference_session(small_model(), all_of_both(4), device_from_name("mk2", 1), sharded_opts()).compile_and_export(file);
  {
    runtime::inference_session s(small_model("input"), data_flow(4, {"y"}, anchor_return_type::all()),
                                 device_from_name("mk2", 1), sharded_opts());
    CHECK_THROWS_WITH_AS(s.load_executable(file), doctest::Contains("was compiled from another model"), error);
  }
  {
    runtime::inference_session s(small_model(), all_of_both(2), device_from_name("mk2", 1), sharded_opts());
    CHECK_THROWS_WITH_AS(s.load_executable(file), doctest::Contains("runs 4 batches per step but the data flow 2"), error);
  }
  {
    runtime::inference_session s(small_model(), all_of_both(4), device_from_name("bow", 1), sharded_opts());
    CHECK_THROWS_WITH_AS(s.load_executable(file), doctest::Contains("needs 1 ipu2 IPU but the device has ipu21"), error);
  }
  {
    runtime::inference_session s(small_model(), all_of_both(4), device_from_name("mk2", 1), sharded_opts());
    s.prepare_device();
    CHECK_THROWS_WITH_AS(s.load_executable(file), doctest::Contains("load_executable after prepare_device"), error);
  }
}

TEST_CASE("an inference session on a device acquired from the device manager") {
  scratch_dir dir("inference-devices");
  const device_manager manager(make_ipu_system(describe_architecture<mk2>(), 4, 4), dir / "locks");
  {
    runtime::inference_session s(small_model(), all_of_both(4), manager.acquire(2), pipelined_opts());
    CHECK(s.device().num_ipus == 2);
    CHECK_FALSE(manager.enumerate(2).front().is_free());  // reserved while the session lives
    s.prepare_device();
    CHECK(check_all(run_step(s, 4), 4));
  }
  CHECK(manager.enumerate(2).front().is_free());
  // The CPU: compiled and run on the host.
  runtime::inference_session c(small_model(), all_of_both(4), {}, sharded_opts());
  c.prepare_device();
  CHECK(c.executable().metadata.ipu_version == "cpu");
  CHECK(check_all(run_step(c, 4), 4));
}

TEST_CASE("an ONNX file through an inference session equals PyTorch") {
  const fs::path models = IPU_TEST_MODELS;
  const auto onnx = models / "transformer_encoder.onnx";
  const auto g = ipu::onnx::load_model(onnx);
  const auto in = g.tensor(g.inputs()[0]).name, out = g.tensor(g.outputs()[0]).name;
  runtime::inference_session s(onnx, data_flow(1, {out}, anchor_return_type::all()), device_from_name("mk2", 1),
                               sharded_opts());
  CHECK(s.model().name() == g.name());
  s.prepare_device();
  const auto x = io::read_npy(models / "transformer_encoder.input.npy");
  auto anchors = s.init_anchor_arrays();
  step_io io({{in, x.view()}}, anchors);
  s.run(io);
  const auto& got = anchors.at(out);
  cpu::device dev(g);
  const auto ref = dev.run(cpu::named_tensors{{in, x.view()}});
  CHECK(std::memcmp(ref[0].data(), got.data(), got.info().num_bytes()) == 0);
  const auto torch = io::read_npy(models / "transformer_encoder.output.npy");
  REQUIRE(torch.info().num_elements() == got.info().num_elements());
  CHECK(relative_difference(got.as<float>(), torch.as<float>()) <= 1e-3);
}

TEST_SUITE("concurrent") {
  TEST_CASE("threads calling run on one inference session get their own results") {
    runtime::inference_session s(small_model(), all_of_both(4), device_from_name("mk2", 2), pipelined_opts());
    s.prepare_device();
    constexpr int threads = 4, steps = 10;
    std::atomic<int> wrong{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (int i = 0; i < steps; ++i) {
          const auto k = static_cast<float>(t * 50 + i);
          if (!check_all(run_step(s, 4, k), 4, k)) ++wrong;
        }
      });
    for (auto& th : pool) th.join();
    CHECK(wrong == 0);
  }
}

}  // namespace inference_session_tests

}  // namespace test_inference_session
