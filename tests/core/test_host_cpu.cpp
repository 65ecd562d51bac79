// ipu::this_host_cpu against Linux's own account of the CPU (/proc/cpuinfo): its flags, vendor
// and family, read by the kernel rather than through the compiler's builtins.
#include "ipu/host_cpu.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>

namespace test_host_cpu {

/// The first processor's "key : value" lines; empty without /proc/cpuinfo.
std::map<std::string, std::string> first_processor() {
  std::map<std::string, std::string> fields;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) break;  // the end of processor 0
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    fields[key] = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
  }
  return fields;
}

bool has_flag(const std::string& flags, const char* flag) {
  return (" " + flags + " ").find(" " + std::string(flag) + " ") != std::string::npos;
}

TEST_CASE("the host's extensions, vendor and family are those Linux reports") {
  const auto info = first_processor();
  const ipu::host_cpu& cpu = ipu::this_host_cpu();
  CHECK(&cpu == &ipu::this_host_cpu());  // asked once
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (!info.contains("flags") || !info.contains("vendor_id") || !info.contains("cpu family")) {
    MESSAGE("no x86 /proc/cpuinfo to compare with");
    return;
  }
  const auto& flags = info.at("flags");
  CHECK(cpu.avx2 == has_flag(flags, "avx2"));
  CHECK(cpu.avx512 == (has_flag(flags, "avx512f") && has_flag(flags, "avx512vl") && has_flag(flags, "avx512bw") &&
                       has_flag(flags, "avx512dq")));
  CHECK(cpu.amd == (info.at("vendor_id") == "AuthenticAMD"));
  CHECK(cpu.family == static_cast<unsigned>(std::stoul(info.at("cpu family"))));
  CHECK(cpu.family != 0);
#else
  CHECK_FALSE(cpu.avx2);
  CHECK_FALSE(cpu.avx512);
#endif
}

}  // namespace test_host_cpu
