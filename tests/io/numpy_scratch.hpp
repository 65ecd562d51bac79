#pragma once
// What the .npy tests share: a scratch directory per test case, and a Python snippet run with
// Debian's numpy to write the files numpy itself writes.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace test_io_support {

/// A scratch directory, removed afterwards; `prefix` names what made it.
struct scratch {
  std::filesystem::path dir;
  explicit scratch(const std::string& prefix = "ipu-npy-") {
    dir = std::filesystem::temp_directory_path() / (prefix + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  ~scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::filesystem::path operator/(const std::string& name) const { return dir / name; }
};

/// Runs a Python snippet with Debian's numpy; the scratch directory is the variable D in it.
inline int python(const scratch& s, const std::string& code) {
  const auto script = s / "script.py";
  std::ofstream(script) << "import sys, numpy as np\nD = sys.argv[1]\n" << code << "\n";
  const std::string cmd = std::string(IPU_PYTHON) + " '" + script.string() + "' '" + s.dir.string() + "'";
  return std::system(cmd.c_str());
}

}  // namespace test_io_support
