#pragma once
// Test helpers for PopEF: scratch directories, whole-file reads and writes, and a small file holding
// one blob of every type.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ipu/popef/writer.hpp"

namespace test_popef {

/// A fresh directory under the system temp dir, removed with the object.
class scratch_dir {
 public:
  explicit scratch_dir(const std::string& tag) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("ipu-popef-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::vector<std::byte> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) out[i] = static_cast<std::byte>(c[i]);
  return out;
}

inline void write_bytes(const std::filesystem::path& p, const std::vector<std::byte>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// Bytes 0, 1, 2, ... (mod 251, so that no period lines up with a power of two).
inline std::vector<std::byte> pattern(std::size_t n, unsigned seed = 0) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i + seed) % 251);
  return v;
}

inline ipu::popef::metadata sample_metadata(const std::string& executable = "exe") {
  ipu::popef::metadata m;
  m.executable = executable;
  m.anchors.push_back({"x", "h2d_x", {ipu::data_type::F32, ipu::shape{2, 3}}, true, ipu::popef::anchor_type::input, {5}});
  m.anchors.push_back({"y", "d2h_y", {ipu::data_type::F16, ipu::shape{2}}, true, ipu::popef::anchor_type::output, {5}});
  m.anchors.push_back({"w", "h2d_w", {ipu::data_type::S32, ipu::shape{3, 5}}, false, ipu::popef::anchor_type::input, {0}});
  m.flow = {{0}, {5}, {}};
  m.programs = {{0, "WeightsFromHost"}, {5, "Program"}};
  m.replication_factor = 2;
  m.num_ipus = 4;
  m.ipu_version = "ipu2";
  m.num_processes = 1;
  m.device_iterations = 8;
  m.seed_handle = "seed";
  m.engine_options = {{"ipu.strategy", "pipelined"}};
  m.device_options = {{"device", "mk2"}};
  return m;
}

/// One blob of every type: executable "exe" (compressed when asked), metadata, TensorData "w"
/// (S32[3,5]), FeedData "x" (F32[2,3]), opaque "popart".
inline void write_sample(ipu::popef::writer& w, bool compress = true) {
  const auto exe = pattern(10000, 7);
  w.write_executable("exe", exe, compress);
  w.write_metadata(sample_metadata());
  w.write_tensor_data("w", {ipu::data_type::S32, ipu::shape{3, 5}}, pattern(60, 1));
  w.write_feed_data("x", {ipu::data_type::F32, ipu::shape{2, 3}}, pattern(24, 2));
  w.write_opaque("popart", "exe", pattern(100, 3));
}

}  // namespace test_popef
