#pragma once
// Tensor data stored outside the model file (ONNX "external data"), memory-mapped rather than read:
// weights can be gigabytes, and a mapping lets the IR share the pages without a copy.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "ipu/error.hpp"

namespace ipu::onnx {

/// A read-only memory mapping of a whole file; the pages stay valid while the object lives.
class mapped_file {
 public:
  explicit mapped_file(const std::filesystem::path& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw error(error_category::io, std::string("cannot open external data file: ") + std::strerror(errno),
                  path.string(), "keep the data file next to the model, or set import_options::base_dir");
    struct ::stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw error(error_category::io, "external data location is not a regular file", path.string());
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        throw error(error_category::io, std::string("cannot map external data file: ") + std::strerror(e),
                    path.string());
      }
      data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);  // the mapping keeps the file alive
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file() {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  }

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Resolves external-data locations against a base directory, mapping each file once.
/// Locations must be relative and stay inside the base directory: a model may not read arbitrary
/// files (ONNX's own loader had a path-traversal bug of this kind).
class external_data_resolver {
 public:
  external_data_resolver() = default;
  explicit external_data_resolver(std::filesystem::path base_dir) : base_(std::move(base_dir)), has_base_(true) {}

  /// Checks a location without opening it; returns the resolved path.
  [[nodiscard]] std::filesystem::path resolve(const std::string& location, const std::string& tensor) const {
    const std::string where = "tensor '" + tensor + "'";
    if (!has_base_)
      throw error(error_category::onnx, "tensor data is stored in external file '" + location +
                                            "' but no base directory is known",
                  where, "load the model from its file, or set import_options::base_dir");
    const std::filesystem::path rel(location);
    if (location.empty() || rel.is_absolute() || rel.has_root_name())
      throw error(error_category::onnx, "external data location '" + location + "' is not a relative path", where,
                  "store external data next to the model and refer to it by a relative name");
    for (const auto& part : rel)
      if (part == "..")
        throw error(error_category::onnx, "external data location '" + location + "' leaves the model directory",
                    where, "external data must live in the model's directory or below it");
    return base_ / rel;
  }

  /// The mapping of `location` (opened on first use).
  [[nodiscard]] std::shared_ptr<const mapped_file> open(const std::string& location, const std::string& tensor) {
    auto path = resolve(location, tensor);
    auto key = path.lexically_normal().string();
    auto it = files_.find(key);
    if (it != files_.end()) return it->second;
    auto f = std::make_shared<const mapped_file>(path);
    files_.emplace(key, f);
    return f;
  }

  [[nodiscard]] const std::filesystem::path& base_dir() const noexcept { return base_; }
  [[nodiscard]] bool has_base_dir() const noexcept { return has_base_; }

 private:
  std::filesystem::path base_;
  bool has_base_ = false;
  std::map<std::string, std::shared_ptr<const mapped_file>> files_;
};

}  // namespace ipu::onnx
