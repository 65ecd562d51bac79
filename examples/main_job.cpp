// The main job: compile once, load anywhere, serve through zero-copy queues.
//
//   main_job [MODELS_DIR] [--batches N] [--clients N] [--popef FILE]
//
// 1. Imports the bundled LeNet-5 (examples/models/lenet5.onnx, batch 4, exported by PyTorch).
// 2. Compiles it for a 4-IPU Mk2 with pipelining (stages split by the cost model) and writes the
//    PopEF file; nothing of the device is attached.
// 3. Loads the PopEF file into a fresh Model Runtime (the ONNX model and the compiled plan in
//    memory are dropped first), reserving 4 IPUs of the simulated system.
// 4. Streams a few hundred batches through the runtime's queues from several client threads and
//    checks the first batch against PyTorch's output and others against the CPU device.
// 5. Prints a sample of outputs, the predicted IPU throughput and the measured host throughput.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/cpu/blas_tuning.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/runtime/model_runner.hpp"

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

struct arguments {
  fs::path models = IPU_EXAMPLE_MODELS;
  int batches = 400;
  int clients = 4;
  fs::path popef;
};

arguments parse(int argc, char** argv) {
  arguments a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ipu::error(ipu::error_category::usage, s + " needs a value", "main_job arguments");
      return argv[++i];
    };
    if (s == "--batches") a.batches = std::stoi(value());
    else if (s == "--clients") a.clients = std::stoi(value());
    else if (s == "--popef") a.popef = value();
    else if (s == "-h" || s == "--help") {
      std::puts("usage: main_job [MODELS_DIR] [--batches N] [--clients N] [--popef FILE]");
      std::exit(0);
    } else a.models = s;
  }
  if (a.batches < 1 || a.clients < 1)
    throw ipu::error(ipu::error_category::usage, "--batches and --clients must be at least 1", "main_job arguments");
  if (a.popef.empty()) a.popef = fs::temp_directory_path() / "ipu_main_job_lenet5.popef";
  return a;
}

/// Batch i: PyTorch's input for i = 0, otherwise a deterministic variation of it.
ipu::host_tensor batch(const ipu::host_tensor& base, int i) {
  ipu::host_tensor t = base;
  if (i == 0) return t;
  auto v = t.as<float>();
  for (std::size_t k = 0; k < v.size(); ++k)
    v[k] = v[k] * (1.0f + 0.01f * static_cast<float>(i % 17)) + 0.001f * static_cast<float>((k * 7 + static_cast<std::size_t>(i)) % 13);
  return t;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  float d = 0;
  for (std::size_t k = 0; k < a.size(); ++k) d = std::max(d, std::abs(a[k] - b[k]));
  return d;
}

int run(const arguments& args) {
  const auto onnx_file = args.models / "lenet5.onnx";
  const auto input = ipu::io::read_npy(args.models / "lenet5.input.npy");
  const auto expected = ipu::io::read_npy(args.models / "lenet5.output.npy");

  // --- 1-2. compile for a 4-IPU Mk2, pipelined, and export -----------------------------------
  std::printf("== compile %s for a 4-IPU Mk2, pipelined\n", onnx_file.string().c_str());
  double predicted_samples_per_second = 0;
  {
    const auto g = ipu::onnx::load_model(onnx_file);
    const auto opts = ipu::options().device_iterations(16).execution_strategy(ipu::strategy_settings::pipelined());
    const auto t0 = clock_type::now();
    const auto m = ipu::popef::compile_and_export(g, opts, ipu::device_from_name("mk2", 4), args.popef);
    const auto& p = m.plan.predicted;
    predicted_samples_per_second = p.samples_per_second;
    std::printf("   %zu ops in %zu pipeline stages on %u IPUs, %llu batches per step, compiled and written in %.1f ms\n",
                g.num_ops(), m.plan.stages.size(), m.plan.device.num_ipus,
                static_cast<unsigned long long>(m.plan.batches_per_step),
                std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
    std::printf("   PopEF: %s (%llu bytes)\n", args.popef.string().c_str(),
                static_cast<unsigned long long>(fs::file_size(args.popef)));
    std::printf("   predicted: %.0f samples/s, latency %.1f us per batch, pipeline bubble %.1f%%\n",
                p.samples_per_second, p.latency_seconds * 1e6, p.pipeline_bubble * 100);
  }  // the ONNX graph and the in-memory plan end here: the runtime sees only the file

  // --- 3. a fresh runtime on the PopEF file --------------------------------------------------
  std::printf("== load %s into the model runner\n", args.popef.string().c_str());
  ipu::runtime::model_runner_config config;
  config.device_wait = ipu::device_wait_config::with_timeout(std::chrono::seconds(30));
  const auto t_load = clock_type::now();
  ipu::runtime::model_runner runner(args.popef, config);
  std::printf("   loaded in %.1f ms; %s; %llu requests per step\n",
              std::chrono::duration<double, std::milli>(clock_type::now() - t_load).count(),
              runner.device().valid() ? ("reserved device " + std::to_string(runner.device().id()) + " (IPUs " +
                                         std::to_string(runner.device().ipus().front()) + "-" +
                                         std::to_string(runner.device().ipus().back()) + ")")
                                            .c_str()
                                      : "no device reserved",
              static_cast<unsigned long long>(runner.requests_per_step()));
  const auto& in_name = runner.layout().inputs.front().name;
  const auto& out_name = runner.layout().anchors.front().name;

  // --- 4. stream batches from several clients --------------------------------------------------
  std::printf("== stream %d batches of 4 images from %d client threads\n", args.batches, args.clients);
  std::vector<ipu::host_tensor> inputs, outputs(static_cast<std::size_t>(args.batches));
  for (int i = 0; i < args.batches; ++i) inputs.push_back(batch(input, i));
  std::atomic<int> next{0};
  std::exception_ptr failure;
  std::mutex failure_lock;
  const auto t0 = clock_type::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < args.clients; ++c)
    clients.emplace_back([&] {
      try {
        // Each client keeps a window of requests in flight, the queues hold the pointers.
        std::vector<std::pair<int, ipu::runtime::future_map>> window;
        for (;;) {
          const int i = next.fetch_add(1);
          if (i < args.batches)
            window.emplace_back(i, runner.execute_async({{in_name, inputs[static_cast<std::size_t>(i)].view()}}));
          if (window.empty()) break;
          if (i >= args.batches || window.size() >= 8) {
            auto& [k, f] = window.front();
            outputs[static_cast<std::size_t>(k)] = f.at(out_name).get();
            window.erase(window.begin());
          }
        }
      } catch (...) {
        std::lock_guard lock(failure_lock);
        failure = std::current_exception();
      }
    });
  for (auto& t : clients) t.join();
  const double seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (failure) std::rethrow_exception(failure);

  // --- checks -------------------------------------------------------------------------------
  const float d0 = max_abs_diff(outputs[0].as<float>(), expected.as<float>());
  std::printf("== batch 0 against PyTorch (lenet5.output.npy): max |difference| %.2e\n", static_cast<double>(d0));
  bool ok = d0 <= 1e-5f;
  {
    const auto g = ipu::onnx::load_model(onnx_file);
    ipu::cpu::device reference(g);
    float worst = 0;
    for (int i : {1, args.batches / 2, args.batches - 1}) {
      if (i <= 0) continue;
      const auto want = reference.run(ipu::cpu::named_tensors{{in_name, inputs[static_cast<std::size_t>(i)].view()}});
      worst = std::max(worst, max_abs_diff(outputs[static_cast<std::size_t>(i)].as<float>(), want.front().as<float>()));
    }
    std::printf("   batches 1, %d, %d against the CPU device: max |difference| %.2e\n", args.batches / 2,
                args.batches - 1, static_cast<double>(worst));
    ok = ok && worst == 0;
  }

  // --- 5. a sample of outputs and the throughputs ------------------------------------------------
  std::printf("== sample outputs (class probabilities)\n");
  for (int i : {0, args.batches - 1}) {
    const auto v = outputs[static_cast<std::size_t>(i)].as<float>();
    for (std::size_t img = 0; img < 4; ++img) {
      const auto row = v.subspan(img * 10, 10);
      const auto best = static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin());
      std::printf("   batch %3d image %zu: class %zu (p=%.4f)  [", i, img, best, static_cast<double>(row[best]));
      for (std::size_t k = 0; k < 10; ++k) std::printf("%s%.3f", k ? " " : "", static_cast<double>(row[k]));
      std::printf("]\n");
    }
  }
  const double samples = 4.0 * args.batches;
  std::printf("== throughput\n");
  std::printf("   predicted IPU throughput (4-IPU Mk2, pipelined): %12.0f samples/s\n", predicted_samples_per_second);
  std::printf("   measured host throughput (simulation on this CPU): %10.0f samples/s (%d batches in %.3f s, %llu steps)\n",
              samples / seconds, args.batches, seconds, static_cast<unsigned long long>(runner.steps_run()));
  std::printf("%s\n", ok ? "== OK" : "== MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  ipu::tune_openblas_for_host_device();  // this program owns its process
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "main_job: %s\n", e.what());
    return 2;
  }
}
