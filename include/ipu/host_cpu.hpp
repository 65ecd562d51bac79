#pragma once
// What the host's CPU offers, asked once: the vector extensions that the kernels' element-wise
// copies (ops/kernels/vector_isa.hpp) and the channel block of the nchwc-layout pass choose by, and
// the vendor and family, for what differs between cores with the same extensions (AMD's Zen 4 runs
// AVX-512 as two 256-bit halves, Zen 5 at full width). Not x86-64, or not GCC or Clang: none.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace ipu {

struct host_cpu {
  bool avx2 = false;
  /// AVX-512 F, VL, BW and DQ: the subsets the kernels use.
  bool avx512 = false;
  /// "AuthenticAMD".
  bool amd = false;
  /// CPUID's family with the extended family added (AMD Zen 4: 0x19, Zen 5: 0x1A).
  unsigned family = 0;
};

/// This host's CPU. __builtin_cpu_supports also asks the operating system (XGETBV) whether it
/// saves the wider registers, so an extension counts only where it can run.
[[nodiscard]] inline const host_cpu& this_host_cpu() noexcept {
  static const host_cpu cpu = [] {
    host_cpu c;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();  // the first call may come from a static initializer, before the runtime's own
    c.avx2 = __builtin_cpu_supports("avx2");
    c.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) != 0)
      c.amd = ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;  // "Auth" "enti" "cAMD"
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0) {
      const unsigned base = (eax >> 8) & 0xfu;
      c.family = base == 0xfu ? base + ((eax >> 20) & 0xffu) : base;
    }
#endif
    return c;
  }();
  return cpu;
}

}  // namespace ipu
