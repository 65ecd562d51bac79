#pragma once
// Tensor data stored outside the model file (ONNX "external data"), memory-mapped rather than read:
// weights can be gigabytes, and a mapping lets the IR share the pages without a copy.
#include <sys/mman.h>

#include <algorithm>
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
#include "ipu/file.hpp"

namespace ipu::onnx {

/// A read-only memory mapping of a whole file; the pages stay valid while the object lives.
class mapped_file {
 public:
  explicit mapped_file(const std::filesystem::path& path) : path_(path) {
    // No symbolic link is followed here: the resolver hands over a path with its links resolved.
    const auto file = open_regular_file(path, "external data file", {.no_follow = true});
    size_ = static_cast<std::size_t>(file.size());
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
      if (p == MAP_FAILED)
        throw error(error_category::io, std::string("cannot map external data file: ") + std::strerror(errno),
                    path.string());
      data_ = static_cast<const std::byte*>(p);
    }
  }  // the mapping keeps the file when the descriptor closes
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

  /// Checks a location before anything reads it and maps the file it names, its symbolic links
  /// resolved by the file system. That must lie inside the base directory; if not (or if nothing is
  /// there) the error says only that, so a model learns nothing about files outside its folder.
  /// Each location is resolved once and each file opened once, however many tensors name it.
  [[nodiscard]] std::shared_ptr<const mapped_file> open(const std::string& location, const std::string& tensor) {
    if (auto it = by_location_.find(location); it != by_location_.end()) return it->second;
    auto path = resolve(location, tensor);
    auto& f = files_[path.string()];  // another spelling of a location already mapped
    if (!f) {
      f = std::make_shared<const mapped_file>(path);  // refuses a FIFO, a device or a directory
      ++files_opened_;
    }
    by_location_.emplace(location, f);
    return f;
  }

  /// How many files open() has opened: one per distinct file, however many tensors use it.
  [[nodiscard]] std::size_t files_opened() const noexcept { return files_opened_; }

  [[nodiscard]] const std::filesystem::path& base_dir() const noexcept { return base_; }
  [[nodiscard]] bool has_base_dir() const noexcept { return has_base_; }

 private:
  std::filesystem::path base_;
  bool has_base_ = false;
  std::map<std::string, std::shared_ptr<const mapped_file>> files_;        // canonical path -> mapping
  std::map<std::string, std::shared_ptr<const mapped_file>> by_location_;  // location as written -> mapping
  std::size_t files_opened_ = 0;

  /// The file a location names, checked to lie inside the base directory (see open()).
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
    std::error_code ec;
    const auto base = std::filesystem::canonical(base_, ec);
    if (ec)
      throw error(error_category::io, "the model's directory cannot be resolved: " + ec.message(), base_.string(),
                  "load the model from a readable directory");
    const auto target = std::filesystem::canonical(base_ / rel, ec);
    const auto [b, t] = std::mismatch(base.begin(), base.end(), target.begin(), target.end());
    if (ec || b != base.end() || t == target.end())
      throw error(error_category::onnx,
                  "external data location '" + location + "' does not name a file inside the model's directory", where,
                  "keep the data file in the model's directory (a symbolic link may only point to a file inside it)");
    return target;
  }
};

}  // namespace ipu::onnx
