#pragma once
// Test helper: Linux's own account of the CPU (/proc/cpuinfo), a witness independent of the
// compiler's builtins that the library asks (ipu::this_host_cpu).
#include <fstream>
#include <map>
#include <string>

namespace ipu_test {

/// The first processor's "key : value" lines; empty without /proc/cpuinfo.
inline std::map<std::string, std::string> first_processor_cpuinfo() {
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

/// Whether the space-separated `flags` hold `flag`.
inline bool has_cpu_flag(const std::string& flags, const char* flag) {
  return (" " + flags + " ").find(" " + std::string(flag) + " ") != std::string::npos;
}

/// AVX-512 as the kernels use it: F, VL, BW and DQ.
inline bool has_kernels_avx512(const std::string& flags) {
  return has_cpu_flag(flags, "avx512f") && has_cpu_flag(flags, "avx512vl") && has_cpu_flag(flags, "avx512bw") &&
         has_cpu_flag(flags, "avx512dq");
}

}  // namespace ipu_test
