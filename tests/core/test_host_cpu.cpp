// ipu::this_host_cpu against Linux's own account of the CPU (/proc/cpuinfo): its flags, vendor
// and family, read by the kernel rather than through the compiler's builtins.
#include "ipu/host_cpu.hpp"

#include <doctest/doctest.h>

#include <string>

#include "../proc_cpuinfo.hpp"

namespace test_host_cpu {

TEST_CASE("the host's extensions, vendor and family are those Linux reports") {
  const auto info = ipu_test::first_processor_cpuinfo();
  const ipu::host_cpu& cpu = ipu::this_host_cpu();
  CHECK(&cpu == &ipu::this_host_cpu());  // asked once
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (!info.contains("flags") || !info.contains("vendor_id") || !info.contains("cpu family")) {
    MESSAGE("no x86 /proc/cpuinfo to compare with");
    return;
  }
  const auto& flags = info.at("flags");
  CHECK(cpu.avx2 == ipu_test::has_cpu_flag(flags, "avx2"));
  CHECK(cpu.avx512 == ipu_test::has_kernels_avx512(flags));
  CHECK(cpu.amd == (info.at("vendor_id") == "AuthenticAMD"));
  CHECK(cpu.family == static_cast<unsigned>(std::stoul(info.at("cpu family"))));
  CHECK(cpu.family != 0);
#else
  CHECK_FALSE(cpu.avx2);
  CHECK_FALSE(cpu.avx512);
#endif
}

}  // namespace test_host_cpu
