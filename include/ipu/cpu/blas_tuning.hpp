#pragma once
// Opt-in OpenBLAS tuning for programs that own their process (the `ipu` tool, the examples, the
// benchmarks and the tests call it first thing). The library never calls it: a host application
// that includes ipu keeps its own BLAS threading and kernel choice unless it asks for ours.
#include <cblas.h>

#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>

// Present in OpenBLAS builds with DYNAMIC_ARCH (Debian's); weak so other builds still link.
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace ipu {

/// How strong an OpenBLAS core's kernels are: 3 AVX-512, 2 AVX2+FMA, 0 older.
inline int openblas_core_rank(std::string_view core) noexcept {
  std::string c(core);
  for (auto& ch : c) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (c == "skylakex" || c == "cooperlake" || c == "sapphirerapids") return 3;
  if (c == "haswell" || c == "zen" || c == "excavator") return 2;
  return 0;
}

namespace detail::blas_tuning {

/// OpenBLAS 0.3.21 (Debian 12) does not know recent Xeon models and falls back to its SSE3
/// "Prescott" kernels, 4-5x slower than the AVX-512 ones the CPU runs. Unless the user chose a
/// core with OPENBLAS_CORETYPE, re-run OpenBLAS's own core selection forced to the best kernel set
/// the CPU supports.
inline void select_best_core() noexcept {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || std::getenv("OPENBLAS_CORETYPE")) return;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const char* want = nullptr;
  int want_rank = 0;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd")) {
    want = "SkylakeX";
    want_rank = 3;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    want = "Haswell";
    want_rank = 2;
  }
  if (!want || openblas_core_rank(openblas_get_corename()) >= want_rank) return;
  // gotoblas_dynamic_init reads the core type from the environment: set it just for this call.
  if (setenv("OPENBLAS_CORETYPE", want, 0) != 0) return;
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
#endif
}

}  // namespace detail::blas_tuning

/// Tune OpenBLAS for the host device: the best kernels the CPU supports, and one thread per GEMM
/// so that the device's own thread pool alone decides the parallelism (without it, each pool
/// thread's GEMM starts OpenBLAS's threads as well and they compete for the same cores). Results
/// are the same either way. Call it once, before any thread runs a GEMM: it changes process-wide
/// OpenBLAS state.
inline void tune_openblas_for_host_device() noexcept {
  detail::blas_tuning::select_best_core();
  openblas_set_num_threads(1);
}

}  // namespace ipu
