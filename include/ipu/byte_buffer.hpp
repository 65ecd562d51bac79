#pragma once
// An immutable, cheaply copyable byte buffer that works in constant expressions.
//
// Weights can be hundreds of MB, so the IR must hold them without copying: a buffer either owns
// its bytes inline (the only form available during constant evaluation) or refers to an external
// region — a memory-mapped file, a protobuf string, a PopEF blob — kept alive by a reference-counted
// owner. Copies share the external region.
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "ipu/error.hpp"

namespace ipu {

class byte_buffer {
 public:
  constexpr byte_buffer() = default;
  constexpr explicit byte_buffer(std::vector<std::byte> bytes) : inline_(std::move(bytes)) {}

  /// Shares `size` bytes at `data`, kept valid for as long as `owner` lives.
  static byte_buffer share(std::shared_ptr<const void> owner, const std::byte* data, std::size_t size) {
    if (!data && size != 0)
      throw error(error_category::usage, "byte_buffer::share given a null pointer for " + std::to_string(size) + " bytes",
                  {}, "pass the address of the shared region, or size 0");
    byte_buffer b;
    b.control_ = new control{std::move(owner)};
    b.data_ = data;
    b.size_ = size;
    return b;
  }

  /// Copies `bytes` into an owned buffer.
  static constexpr byte_buffer copy(std::span<const std::byte> bytes) {
    return byte_buffer(std::vector<std::byte>(bytes.begin(), bytes.end()));
  }

  /// Packs trivially copyable values into an owned buffer (constexpr for arithmetic types).
  template <class T>
    requires std::is_trivially_copyable_v<T>
  static constexpr byte_buffer from_values(std::span<const T> values) {
    std::vector<std::byte> out(values.size() * sizeof(T));
    for (std::size_t i = 0; i < values.size(); ++i) {
      auto bytes = std::bit_cast<std::array<std::byte, sizeof(T)>>(values[i]);
      for (std::size_t j = 0; j < sizeof(T); ++j) out[i * sizeof(T) + j] = bytes[j];
    }
    return byte_buffer(std::move(out));
  }

  constexpr byte_buffer(const byte_buffer& o) : inline_(o.inline_), control_(o.control_), data_(o.data_), size_(o.size_) {
    if (control_) acquire();
  }
  constexpr byte_buffer(byte_buffer&& o) noexcept
      : inline_(std::move(o.inline_)),
        control_(std::exchange(o.control_, nullptr)),
        data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  constexpr byte_buffer& operator=(byte_buffer o) noexcept {
    swap(o);
    return *this;
  }
  constexpr ~byte_buffer() {
    if (control_) release();
  }

  constexpr void swap(byte_buffer& o) noexcept {
    inline_.swap(o.inline_);
    std::swap(control_, o.control_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }

  [[nodiscard]] constexpr std::size_t size() const noexcept { return control_ ? size_ : inline_.size(); }
  [[nodiscard]] constexpr bool empty() const noexcept { return size() == 0; }
  /// True when the bytes live outside this object (shared, not copied).
  [[nodiscard]] constexpr bool is_shared() const noexcept { return control_ != nullptr; }

  [[nodiscard]] constexpr std::span<const std::byte> bytes() const noexcept {
    if (control_) return {data_, size_};
    return {inline_.data(), inline_.size()};
  }
  [[nodiscard]] const std::byte* data() const noexcept { return bytes().data(); }

  /// Reads element `i` of type T (constexpr; bounds-checked).
  template <class T>
    requires std::is_trivially_copyable_v<T>
  [[nodiscard]] constexpr T load(std::size_t i) const {
    auto b = bytes();
    if ((i + 1) * sizeof(T) > b.size())
      throw error(error_category::internal, "byte_buffer read past its end");
    if (std::is_constant_evaluated()) {
      std::array<std::byte, sizeof(T)> raw{};
      for (std::size_t j = 0; j < sizeof(T); ++j) raw[j] = b[i * sizeof(T) + j];
      return std::bit_cast<T>(raw);
    }
    T v;
    std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
    return v;
  }

  /// Compares contents, not identity.
  friend constexpr bool operator==(const byte_buffer& a, const byte_buffer& b) noexcept {
    auto x = a.bytes(), y = b.bytes();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i] != y[i]) return false;
    return true;
  }

 private:
  struct control {
    std::shared_ptr<const void> owner;
    std::atomic<long> refs{1};
  };
  void acquire() const noexcept { control_->refs.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (control_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete control_;
    control_ = nullptr;
  }

  std::vector<std::byte> inline_;
  control* control_ = nullptr;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ipu
