#pragma once
// A Google Benchmark main that also prints, for registered pairs, the ratio of a benchmark's
// result to a baseline measured in the same run (so goals are judged on the same machine state).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ipu/cpu/blas_tuning.hpp"

namespace ipu::bench {

struct ratio_spec {
  std::string subject;
  std::string baseline;
  std::string counter;  // empty: compare real time per iteration (lower is better)
};

inline std::vector<ratio_spec>& ratios() {
  static std::vector<ratio_spec> r;
  return r;
}

/// The median of paired-round figures (benchmarks that measure every contender in each round).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// Registers "subject vs baseline" for the closing report.
inline int compare(std::string subject, std::string baseline, std::string counter = {}) {
  ratios().push_back({std::move(subject), std::move(baseline), std::move(counter)});
  return 0;
}

class collecting_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.run_type != Run::RT_Iteration && r.aggregate_name != "median") continue;
      auto& entry = results_[r.run_name.function_name];
      entry.first = r.GetAdjustedRealTime();
      for (const auto& [name, c] : r.counters) entry.second[name] = c.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void print_ratios() const {
    for (const auto& spec : ratios()) {
      auto s = results_.find(spec.subject), b = results_.find(spec.baseline);
      if (s == results_.end() || b == results_.end()) continue;
      double sv = spec.counter.empty() ? s->second.first : s->second.second.at(spec.counter);
      double bv = spec.counter.empty() ? b->second.first : b->second.second.at(spec.counter);
      std::printf("ratio %s / %s (%s) = %.3f\n", spec.subject.c_str(), spec.baseline.c_str(),
                  spec.counter.empty() ? "time" : spec.counter.c_str(), bv != 0 ? sv / bv : 0.0);
    }
  }

 private:
  std::map<std::string, std::pair<double, std::map<std::string, double>>> results_;
};

inline int run_main(int argc, char** argv) {
  ipu::tune_openblas_for_host_device();  // this program owns its process
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  collecting_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  benchmark::Shutdown();
  return 0;
}

}  // namespace ipu::bench
