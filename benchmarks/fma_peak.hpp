#pragma once
// This machine's single-thread FP32 peak, measured by a loop of independent fused multiply-adds
// on the widest vectors the CPU has. Kernel benchmarks report their fraction of it.
#include <benchmark/benchmark.h>

#include <cstdint>

namespace ipu::bench {

namespace detail {
template <int Width>
using vec [[gnu::vector_size(Width * 4)]] = float;

// 12 independent accumulators hide FMA latency (4 cycles) on two FMA ports.
#define IPU_FMA_LOOP(W)                                                                    \
  using v = vec<W>;                                                                        \
  v acc[12];                                                                               \
  for (int i = 0; i < 12; ++i) acc[i] = v{} + static_cast<float>(i) * 1e-3f;              \
  const v a = v{} + 0.999999f, b = v{} + 1e-7f;                                            \
  for (std::int64_t it = 0; it < iterations; ++it)                                         \
    for (int i = 0; i < 12; ++i) acc[i] = acc[i] * a + b;                                  \
  float s = 0;                                                                             \
  for (int i = 0; i < 12; ++i)                                                             \
    for (int j = 0; j < W; ++j) s += acc[i][j];                                            \
  return s;

[[gnu::target("avx512f")]] inline float fma_loop_512(std::int64_t iterations) { IPU_FMA_LOOP(16) }
[[gnu::target("avx2,fma")]] inline float fma_loop_256(std::int64_t iterations) { IPU_FMA_LOOP(8) }
#undef IPU_FMA_LOOP
}  // namespace detail

/// Vector width in floats used by the peak loop (16 with AVX-512, 8 with AVX2).
inline int fma_width() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? 16 : 8;
}

/// Runs the loop; FLOPs per call = iterations * 12 accumulators * width * 2.
inline float fma_loop(std::int64_t iterations) {
  return fma_width() == 16 ? detail::fma_loop_512(iterations) : detail::fma_loop_256(iterations);
}

/// Registers "fp32_peak" (GFLOP/s counter "gflops"), the baseline for kernel benchmarks.
inline void fp32_peak(benchmark::State& state) {
  constexpr std::int64_t iterations = 1 << 22;
  for (auto _ : state) benchmark::DoNotOptimize(fma_loop(iterations));
  const double flops = static_cast<double>(iterations) * 12 * fma_width() * 2;
  state.counters["gflops"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

}  // namespace ipu::bench
