#pragma once
// What `ipu run` needs as a performance tool (trtexec, onnxruntime_perf_test): invented inputs,
// latency statistics, a progress line, and the comparison of outputs with reference files.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/tensor.hpp"

namespace ipu_cli::run_perf {

/// Calls f(T{}) with the element type of `t`, a number's (STRING is for the callers to handle).
template <class F>
decltype(auto) visit_type(ipu::data_type t, F&& f) {
  using ipu::data_type;
  switch (t) {
    case data_type::BOOL: return f(bool{});
    case data_type::U8: return f(std::uint8_t{});
    case data_type::S8: return f(std::int8_t{});
    case data_type::U16: return f(std::uint16_t{});
    case data_type::S16: return f(std::int16_t{});
    case data_type::S32: return f(std::int32_t{});
    case data_type::U32: return f(std::uint32_t{});
    case data_type::S64: return f(std::int64_t{});
    case data_type::U64: return f(std::uint64_t{});
    case data_type::F16: return f(ipu::half{});
    case data_type::F32: return f(float{});
    case data_type::F64: return f(double{});
    case data_type::F8143: return f(ipu::float8_143{});
    case data_type::F8152: return f(ipu::float8_152{});
    case data_type::BF16: return f(ipu::bfloat16{});
    case data_type::STRING: break;
  }
  throw ipu::error(ipu::error_category::internal, "not a number type: " + std::string(ipu::to_string(t)), "ipu run",
                   "please report this");
}

/// An input of `info` made up: "zeros", or "random" from `rng` — floats uniform in [-1, 1), integers
/// in [0, 4) (small, so an index input stays in range for most models), booleans 0 or 1, strings
/// the digits of such an integer ("zeros": empty strings).
inline ipu::host_tensor synthetic_tensor(const ipu::tensor_info& info, const std::string& mode, std::mt19937_64& rng) {
  ipu::host_tensor t(info);
  if (mode == "zeros") return t;  // zero bytes: 0, false, empty strings
  if (info.type == ipu::data_type::STRING) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(info.num_elements()); ++i) t.set_string(i, std::to_string(rng() % 4));
    return t;
  }
  visit_type(info.type, [&](auto tag) {
    using T = decltype(tag);
    auto values = t.as<T>();
    if constexpr (std::is_same_v<T, bool>) {
      for (auto& v : values) v = (rng() & 1) != 0;
    } else if constexpr (std::is_integral_v<T>) {
      for (auto& v : values) v = static_cast<T>(rng() % 4);
    } else {
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (auto& v : values) v = T(u(rng));
    }
  });
  return t;
}

/// Latency statistics in milliseconds; percentiles interpolate linearly between the sorted samples
/// (NumPy's default), so p50 is the median.
struct latency_stats {
  double mean = 0, median = 0, p90 = 0, p95 = 0, p99 = 0, min = 0, max = 0;
};

inline double percentile(const std::vector<double>& sorted, double q) {
  const double pos = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

inline latency_stats summarize(std::vector<double> ms) {
  latency_stats s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double v : ms) sum += v;
  s.mean = sum / static_cast<double>(ms.size());
  s.median = percentile(ms, 50);
  s.p90 = percentile(ms, 90);
  s.p95 = percentile(ms, 95);
  s.p99 = percentile(ms, 99);
  s.min = ms.front();
  s.max = ms.back();
  return s;
}

/// printf onto the end of `out`.
__attribute__((format(printf, 2, 3))) inline void appendf(std::string& out, const char* format, ...) {
  char buf[8192];  // a line with a path in it
  std::va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  if (n > 0) out.append(buf, std::min(static_cast<std::size_t>(n), sizeof buf - 1));
}

/// Adds the `latency_ms ...` line to `text` and the same figures to `json`.
inline void report_latency(const std::vector<double>& ms, nlohmann::json& json, std::string& text) {
  const auto s = summarize(ms);
  appendf(text, "latency_ms mean=%.3f median=%.3f p90=%.3f p95=%.3f p99=%.3f min=%.3f max=%.3f\n", s.mean, s.median, s.p90,
              s.p95, s.p99, s.min, s.max);
  json["latency_ms"] = {{"mean", s.mean}, {"median", s.median}, {"p90", s.p90}, {"p95", s.p95},
                        {"p99", s.p99},   {"min", s.min},       {"max", s.max}};
  json["samples_ms"] = ms;
}

/// The leading dimension of the graph's first input: the samples one run (one request) carries.
inline std::int64_t batch_size(const ipu::graph& g) {
  if (g.inputs().empty()) return 1;
  const auto& dims = g.tensor(g.inputs().front()).info.shape;
  return dims.rank() == 0 ? 1 : std::max<std::int64_t>(1, dims[0]);
}

/// A progress line on stderr once a timed run has taken 2 s, then every second (only when asked:
/// stderr a terminal, or --progress), so short runs and tests stay quiet.
class progress_line {
 public:
  progress_line(bool on, std::size_t iterations, double duration) : on_(on), iterations_(iterations), duration_(duration) {}

  void tick(std::size_t done, double elapsed_s) {
    if (!on_ || elapsed_s < next_) return;
    next_ = elapsed_s + 1.0;
    if (duration_ > 0)
      std::fprintf(stderr, "ipu run: %zu iterations, %.1f of %.1f s\n", done, elapsed_s, duration_);
    else
      std::fprintf(stderr, "ipu run: %zu of %zu iterations, %.1f s\n", done, iterations_, elapsed_s);
    std::fflush(stderr);
  }

 private:
  bool on_;
  std::size_t iterations_;
  double duration_;
  double next_ = 2.0;
};

/// Element i of `t` as a double.
inline std::vector<double> to_doubles(const ipu::host_tensor& t) {
  std::vector<double> out;
  visit_type(t.info().type, [&](auto tag) {
    using T = decltype(tag);
    const auto values = t.as<T>();
    out.reserve(values.size());
    for (const auto& v : values) {
      if constexpr (std::is_arithmetic_v<T>) out.push_back(static_cast<double>(v));
      else out.push_back(static_cast<double>(static_cast<float>(v)));
    }
  });
  return out;
}

/// Compares `got` with `want` as numpy.isclose does (|got - want| <= atol + rtol * |want|, NaN equal
/// to NaN); "" when they match, else what differs.
inline std::string compare(const ipu::host_tensor& got, const ipu::host_tensor& want, double rtol, double atol) {
  if (got.info() != want.info())
    return "the reference is " + ipu::to_string(want.info()) + ", the output " + ipu::to_string(got.info());
  if (got.info().type == ipu::data_type::STRING) {  // strings match exactly
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(got.info().num_elements()); ++i)
      if (got.string_at(i) != want.string_at(i) && bad++ == 0) first = i;
    if (!bad) return {};
    return std::to_string(bad) + " of " + std::to_string(got.info().num_elements()) + " strings differ; first at " +
           std::to_string(first) + ": \"" + std::string(got.string_at(first).substr(0, 40)) + "\" vs \"" +
           std::string(want.string_at(first).substr(0, 40)) + "\"";
  }
  const auto a = to_doubles(got), b = to_doubles(want);
  std::size_t bad = 0, worst = 0;
  double worst_err = -1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool nan_a = std::isnan(a[i]), nan_b = std::isnan(b[i]);
    double err = 0;
    bool ok;
    if (nan_a || nan_b) {
      ok = nan_a && nan_b;
      err = ok ? 0 : INFINITY;
    } else if (std::isinf(a[i]) || std::isinf(b[i])) {
      ok = a[i] == b[i];
      err = ok ? 0 : INFINITY;
    } else {
      err = std::fabs(a[i] - b[i]);
      ok = err <= atol + rtol * std::fabs(b[i]);
    }
    if (!ok) {
      ++bad;
      if (err > worst_err) worst_err = err, worst = i;
    }
  }
  if (bad == 0) return {};
  char buf[256];
  std::snprintf(buf, sizeof buf, "%zu of %zu elements differ; the worst, element %zu, is %.9g where %.9g is expected", bad,
                a.size(), worst, a[worst], b[worst]);
  return buf;
}

/// The reference for graph output `i` beside the --data inputs: output_<i>.pb, else output_<i>.npy.
inline std::optional<std::filesystem::path> reference_file(const std::filesystem::path& dir, std::size_t i) {
  for (const char* ext : {".pb", ".npy"}) {
    auto p = dir / ("output_" + std::to_string(i) + ext);
    if (std::filesystem::exists(p)) return p;
  }
  return std::nullopt;
}

}  // namespace ipu_cli::run_perf
