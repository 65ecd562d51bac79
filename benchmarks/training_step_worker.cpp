// The library's side of benchmarks/training_step.py: one training session (cross-entropy, SGD),
// stepped on command so the driver can alternate it with PyTorch in the same run, round by round.
// Timing is taken here, around training_session::run alone: process start, ONNX loading, compiling
// the step and reading the data happen before the first command and are not timed.
//
//   training_step_worker MODEL.onnx X.npy LABELS.npy LR MOMENTUM THREADS
//
// Prints "ready" once compiled, then reads commands from stdin, one a line:
//   step      one training step; prints "step_ms=<ms> loss=<loss before the update>"
//   profile   per op type: the time spent in its kernels per step (the mean over every step so far,
//             the untimed first one included) and how many ops of that type one step runs; then the
//             slowest single ops and the tensors they read; then "end"
//   profile TYPE   the same, then every op of that type, slowest first
// and exits at end of input.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "ipu/cpu/blas_tuning.hpp"
#include "ipu/error.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/train/session.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

int run(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s MODEL.onnx X.npy LABELS.npy LR MOMENTUM THREADS\n", argv[0]);
    return 2;
  }
  ipu::tune_openblas_for_host_device();
  const auto model = ipu::onnx::load_model(argv[1]);
  const auto x = ipu::io::read_npy(argv[2]);
  const auto labels = ipu::io::read_npy(argv[3]);
  ipu::train::training_options o;
  o.loss.kind = ipu::train::loss_kind::cross_entropy;
  o.opt = ipu::train::sgd{.lr = std::strtod(argv[4], nullptr), .momentum = std::strtod(argv[5], nullptr)};

  // Kernel time per op, summed over the steps; an op's index is its id in the step graph.
  std::vector<double> op_seconds;
  ipu::cpu::device_options d;
  d.threads = static_cast<std::size_t>(std::strtoul(argv[6], nullptr, 10));
  d.on_op = [&op_seconds](ipu::op_id op, clock_type::time_point begin, clock_type::time_point end) {
    if (op >= op_seconds.size()) op_seconds.resize(op + 1, 0.0);
    op_seconds[op] += std::chrono::duration<double>(end - begin).count();
  };
  ipu::train::training_session session(model, o, d);
  std::printf("ready openblas_core=%s\n", openblas_get_corename());
  std::fflush(stdout);

  std::int64_t steps = 0;
  double step_seconds = 0;
  for (std::string line; std::getline(std::cin, line);) {
    if (line == "step") {
      const auto t0 = clock_type::now();
      const auto r = session.run({{"x", x.view()}}, labels.view());
      const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
      step_seconds += s;
      ++steps;
      std::printf("step_ms=%.3f loss=%.9g\n", s * 1e3, r.loss);
    } else if (line == "profile" || line.starts_with("profile ")) {
      const std::string only = line.size() > 8 ? line.substr(8) : std::string();
      const auto& g = session.graph_of_step().step;
      struct total {
        double seconds = 0;
        int ops = 0;
      };
      std::map<std::string, total> by_type;
      double kernels = 0;
      for (ipu::op_id i = 0; i < op_seconds.size() && i < g.ops().size(); ++i) {
        auto& t = by_type[g.op(i).type];
        t.seconds += op_seconds[i];
        kernels += op_seconds[i];
        ++t.ops;
      }
      std::vector<std::pair<std::string, total>> sorted(by_type.begin(), by_type.end());
      std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
      const double n = static_cast<double>(std::max<std::int64_t>(steps, 1));
      std::printf("steps=%lld step_ms_mean=%.3f kernels_ms_mean=%.3f\n", static_cast<long long>(steps), step_seconds / n * 1e3,
                  kernels / n * 1e3);
      for (const auto& [type, t] : sorted)
        std::printf("op %s ms_per_step=%.3f ops=%d\n", type.c_str(), t.seconds / n * 1e3, t.ops);
      // The slowest single ops, with what they read: which instance of a type to speed up.
      std::vector<ipu::op_id> slowest;
      for (ipu::op_id i = 0; i < op_seconds.size() && i < g.ops().size(); ++i)
        if (only.empty() || g.op(i).type == only) slowest.push_back(i);
      const auto top = only.empty() ? std::min<std::size_t>(slowest.size(), 12) : slowest.size();
      std::partial_sort(slowest.begin(), slowest.begin() + static_cast<std::ptrdiff_t>(top), slowest.end(),
                        [&](auto a, auto b) { return op_seconds[a] > op_seconds[b]; });
      for (std::size_t k = 0; k < top; ++k) {
        const auto& op = g.op(slowest[k]);
        std::string reads;
        for (auto t : op.inputs)
          if (t != ipu::no_tensor) reads += (reads.empty() ? "" : ", ") + ipu::to_string(g.tensor(t).info);
        std::printf("slow %s ms_per_step=%.3f reads %s\n", op.type.c_str(), op_seconds[slowest[k]] / n * 1e3, reads.c_str());
      }
      std::printf("end\n");
    } else {
      std::fprintf(stderr, "unknown command '%s': use step or profile\n", line.c_str());
      return 2;
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "training_step_worker: %s\n", e.what());
    return 1;
  }
}
