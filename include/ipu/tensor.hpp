#pragma once
// Tensors: an owning host tensor, non-owning views, a static-extent tensor whose shape is part of
// its type, and the `tensor` concept they all satisfy.
//
// STRING tensors keep the fixed-size bytes every other part of the library moves: each element is
// a string_ref (a pointer and a length), and the characters live in a string_heap that whoever
// owns the tensor keeps alive: a host_tensor its own, a device's run one per run. Copying a STRING
// host_tensor copies its characters, so a copy never points into someone else's heap. The bytes
// are addresses, so they are never written to a file as they are: every writer encodes the strings.
#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/data_type.hpp"
#include "ipu/error.hpp"
#include "ipu/bfloat16.hpp"
#include "ipu/float8.hpp"
#include "ipu/half.hpp"
#include "ipu/tensor_info.hpp"

namespace ipu {

// --- strings ---------------------------------------------------------------------------------------
/// An element of a STRING tensor: `size` bytes (UTF-8 as ONNX says, not checked, not NUL-terminated)
/// at `data`, in a string_heap its tensor's owner keeps. All-zero bytes are the empty string, so a
/// fresh tensor holds empty strings.
struct string_ref {
  const char* data = nullptr;
  std::uint64_t size = 0;
  [[nodiscard]] std::string_view view() const noexcept {
    return size ? std::string_view(data, static_cast<std::size_t>(size)) : std::string_view();
  }
};
static_assert(sizeof(string_ref) == 16, "ipu: size_of(data_type::STRING) assumes a 16-byte string_ref");

/// Characters that string_refs point at: appended, never moved, freed with the heap. Safe to append
/// to from several threads (a kernel's parallel chunks write their elements at once).
class string_heap {
 public:
  string_heap() = default;
  string_heap(const string_heap&) = delete;
  string_heap& operator=(const string_heap&) = delete;

  /// A copy of `s` that lives as long as the heap.
  [[nodiscard]] string_ref keep(std::string_view s) {
    if (s.empty()) return {};
    std::lock_guard lock(mutex_);
    if (s.size() > capacity_ - used_) {
      // Long strings get a block of their own, so a block wastes at most a short string's tail.
      const std::size_t n = std::max(s.size(), block_bytes);
      blocks_.push_back(std::make_unique<char[]>(n));
      used_ = 0;
      capacity_ = n;
    }
    char* at = blocks_.back().get() + used_;
    std::memcpy(at, s.data(), s.size());
    used_ += s.size();
    return {at, s.size()};
  }

 private:
  static constexpr std::size_t block_bytes = 4096;
  std::mutex mutex_;
  std::vector<std::unique_ptr<char[]>> blocks_;
  std::size_t used_ = 0, capacity_ = 0;
};

// --- element type <-> data_type -------------------------------------------------------------------
template <class T>
struct data_type_of;  // no definition: an unsupported element type fails to compile
template <> struct data_type_of<bool> { static constexpr data_type value = data_type::BOOL; };
template <> struct data_type_of<std::uint8_t> { static constexpr data_type value = data_type::U8; };
template <> struct data_type_of<std::int8_t> { static constexpr data_type value = data_type::S8; };
template <> struct data_type_of<std::uint16_t> { static constexpr data_type value = data_type::U16; };
template <> struct data_type_of<std::int16_t> { static constexpr data_type value = data_type::S16; };
template <> struct data_type_of<std::int32_t> { static constexpr data_type value = data_type::S32; };
template <> struct data_type_of<std::uint32_t> { static constexpr data_type value = data_type::U32; };
template <> struct data_type_of<std::int64_t> { static constexpr data_type value = data_type::S64; };
template <> struct data_type_of<std::uint64_t> { static constexpr data_type value = data_type::U64; };
template <> struct data_type_of<half> { static constexpr data_type value = data_type::F16; };
template <> struct data_type_of<float> { static constexpr data_type value = data_type::F32; };
template <> struct data_type_of<double> { static constexpr data_type value = data_type::F64; };
template <> struct data_type_of<float8_143> { static constexpr data_type value = data_type::F8143; };
template <> struct data_type_of<float8_152> { static constexpr data_type value = data_type::F8152; };
template <> struct data_type_of<bfloat16> { static constexpr data_type value = data_type::BF16; };
template <> struct data_type_of<string_ref> { static constexpr data_type value = data_type::STRING; };
template <class T>
inline constexpr data_type data_type_of_v = data_type_of<T>::value;

// --- the concept ---------------------------------------------------------------------------------
struct tensor_tag {};

/// Types opt in by declaring `using tensor_concept = ipu::tensor_tag;` or by specialising this.
/// (A nested requirement, so that a type without `tensor_concept` is simply not a tensor.)
template <class T>
inline constexpr bool enable_tensor = requires { requires std::same_as<typename T::tensor_concept, tensor_tag>; };

/// Something with a type, a shape and contiguous row-major bytes.
template <class T>
concept tensor = enable_tensor<std::remove_cvref_t<T>> && requires(const T& t) {
  { t.info() } -> std::convertible_to<tensor_info>;
  { t.bytes() } -> std::convertible_to<std::span<const std::byte>>;
};

namespace detail {
/// The concept's requirements one by one, each failing with a message saying how to fix it (a
/// plain concept failure lists the requirements, not the fix).
template <class T>
consteval bool check_tensor() {
  using U = std::remove_cvref_t<T>;
  static_assert(enable_tensor<U>,
                "ipu: this type is not a tensor; declare `using tensor_concept = ipu::tensor_tag;` or specialise "
                "ipu::enable_tensor");
  static_assert(requires(const U& t) { { t.info() } -> std::convertible_to<tensor_info>; },
                "ipu: a tensor needs `info() const` returning its ipu::tensor_info (element type and shape)");
  static_assert(requires(const U& t) { { t.bytes() } -> std::convertible_to<std::span<const std::byte>>; },
                "ipu: a tensor needs `bytes() const` returning its contiguous row-major bytes as a "
                "std::span<const std::byte>");
  return tensor<U>;
}

template <class T>
constexpr void check_element_type(const tensor_info& info) {
  if (info.type != data_type_of_v<T>)
    throw error(error_category::shape,
                "tensor holds " + std::string(to_string(info.type)) + " elements, not " +
                    std::string(to_string(data_type_of_v<T>)),
                {}, "access it with the matching element type");
}

/// The elements at `data` as T: checks the type and the alignment; no elements for a null view.
template <class T, class Byte>
std::span<T> typed_span(const tensor_info& info, Byte* data) {
  check_element_type<std::remove_const_t<T>>(info);
  if (!data) return {};
  if (reinterpret_cast<std::uintptr_t>(data) % alignof(T) != 0)
    throw error(error_category::usage,
                "tensor data is not aligned for " + std::string(to_string(info.type)) + " elements (needs " +
                    std::to_string(alignof(T)) + "-byte alignment)",
                {}, "read it through bytes(), or copy it into a host_tensor (64-byte aligned)");
  return {reinterpret_cast<T*>(data), static_cast<std::size_t>(info.num_elements())};
}
}  // namespace detail

// --- views ---------------------------------------------------------------------------------------
/// Read-only view of someone else's tensor bytes.
class const_tensor_view {
 public:
  using tensor_concept = tensor_tag;
  const_tensor_view() = default;
  const_tensor_view(tensor_info info, const std::byte* data) : info_(std::move(info)), data_(data) {}

  [[nodiscard]] const tensor_info& info() const noexcept { return info_; }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, data_ ? info_.num_bytes() : 0}; }
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  [[nodiscard]] bool empty() const noexcept { return data_ == nullptr; }
  /// The elements as T; throws for another element type or misaligned data; empty for an empty view.
  template <class T>
  [[nodiscard]] std::span<const T> as() const {
    return detail::typed_span<const T>(info_, data_);
  }

 private:
  tensor_info info_;
  const std::byte* data_ = nullptr;
};

/// Writable view of someone else's tensor bytes.
class tensor_view {
 public:
  using tensor_concept = tensor_tag;
  tensor_view() = default;
  tensor_view(tensor_info info, std::byte* data) : info_(std::move(info)), data_(data) {}

  [[nodiscard]] const tensor_info& info() const noexcept { return info_; }
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {data_, data_ ? info_.num_bytes() : 0}; }
  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  /// The elements as T; throws for another element type or misaligned data; empty for an empty view.
  template <class T>
  [[nodiscard]] std::span<T> as() const {
    return detail::typed_span<T>(info_, data_);
  }
  operator const_tensor_view() const { return {info_, data_}; }  // NOLINT: views convert freely

 private:
  tensor_info info_;
  std::byte* data_ = nullptr;
};

// --- owning host tensor ---------------------------------------------------------------------------
/// A tensor that owns its bytes (zero-initialised), 64-byte aligned for vector kernels, and, for
/// STRING, the characters its elements point at.
class host_tensor {
 public:
  using tensor_concept = tensor_tag;
  /// An F32 scalar holding 0.
  host_tensor() : host_tensor(tensor_info{}) {}
  explicit host_tensor(tensor_info info) : info_(std::move(info)), storage_(allocate(info_.num_bytes())) {}

  /// A tensor holding a copy of `values`, with `s` giving the shape.
  template <class T>
  static host_tensor from(ipu::shape s, std::span<const T> values) {
    host_tensor t({data_type_of_v<T>, std::move(s)});
    if (values.size() != static_cast<std::size_t>(t.info_.num_elements()))
      throw error(error_category::shape,
                  std::to_string(values.size()) + " values given for shape " + to_string(t.info_.shape) + " of " +
                      std::to_string(t.info_.num_elements()) + " elements",
                  {}, "give exactly one value per element");
    if (!values.empty()) std::memcpy(t.storage_.get(), values.data(), values.size_bytes());
    return t;
  }
  template <class T>
  static host_tensor from(ipu::shape s, std::initializer_list<T> values) {
    return from<T>(std::move(s), std::span<const T>(values.begin(), values.size()));
  }
  /// A STRING tensor holding copies of `values`, with `s` giving the shape.
  static host_tensor from_strings(ipu::shape s, std::span<const std::string_view> values) {
    host_tensor t({data_type::STRING, std::move(s)});
    if (values.size() != static_cast<std::size_t>(t.info_.num_elements()))
      throw error(error_category::shape,
                  std::to_string(values.size()) + " strings given for shape " + to_string(t.info_.shape) + " of " +
                      std::to_string(t.info_.num_elements()) + " elements",
                  {}, "give exactly one string per element");
    for (std::size_t i = 0; i < values.size(); ++i) t.set_string(i, values[i]);
    return t;
  }
  static host_tensor from_strings(ipu::shape s, std::initializer_list<std::string_view> values) {
    return from_strings(std::move(s), std::span<const std::string_view>(values.begin(), values.size()));
  }
  /// A tensor holding a copy of any tensor's bytes; of a STRING tensor's, its characters too.
  template <class Src>
  static host_tensor copy_of(const Src& src) {
    static_assert(detail::check_tensor<Src>(), "ipu: host_tensor::copy_of takes an ipu::tensor");
    host_tensor t(tensor_info(src.info()));
    auto b = std::span<const std::byte>(src.bytes());
    if (b.empty()) return t;
    if (t.info_.type != data_type::STRING) {
      std::memcpy(t.storage_.get(), b.data(), b.size());
      return t;
    }
    for (std::size_t i = 0; i * sizeof(string_ref) < b.size(); ++i) {
      string_ref r;  // the source may be any tensor's bytes, aligned or not
      std::memcpy(&r, b.data() + i * sizeof(string_ref), sizeof r);
      t.set_string(i, r.view());
    }
    return t;
  }

  host_tensor(const host_tensor& o) : host_tensor(copy_of(o)) {}
  host_tensor(host_tensor&&) noexcept = default;
  host_tensor& operator=(const host_tensor& o) {
    if (this != &o) *this = copy_of(o);
    return *this;
  }
  host_tensor& operator=(host_tensor&&) noexcept = default;

  [[nodiscard]] const tensor_info& info() const noexcept { return info_; }
  // A moved-from tensor has no storage: it reports no bytes rather than bytes it does not own.
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {storage_.get(), storage_ ? info_.num_bytes() : 0}; }
  [[nodiscard]] std::span<std::byte> bytes() noexcept { return {storage_.get(), storage_ ? info_.num_bytes() : 0}; }
  [[nodiscard]] std::byte* data() noexcept { return storage_.get(); }
  [[nodiscard]] const std::byte* data() const noexcept { return storage_.get(); }
  template <class T>
  [[nodiscard]] std::span<T> as() {
    return view().as<T>();
  }
  template <class T>
  [[nodiscard]] std::span<const T> as() const {
    return view().as<T>();
  }
  [[nodiscard]] tensor_view view() noexcept { return {info_, storage_.get()}; }
  [[nodiscard]] const_tensor_view view() const noexcept { return {info_, storage_.get()}; }

  /// Element i of a STRING tensor.
  [[nodiscard]] std::string_view string_at(std::size_t i) const { return string_element(i).view(); }
  /// Sets element i of a STRING tensor to a copy of `s`, kept in this tensor's heap.
  void set_string(std::size_t i, std::string_view s) {
    string_ref& r = string_element(i);
    if (!strings_ && !s.empty()) strings_ = std::make_shared<string_heap>();
    r = s.empty() ? string_ref{} : strings_->keep(s);
  }

 private:
  struct aligned_delete {
    void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
  };
  static std::unique_ptr<std::byte[], aligned_delete> allocate(std::size_t n) {
    auto* p = static_cast<std::byte*>(::operator new[](n ? n : 1, std::align_val_t{64}));
    std::memset(p, 0, n);
    return std::unique_ptr<std::byte[], aligned_delete>(p);
  }

  string_ref& string_element(std::size_t i) const {
    check_element_type_is_string();
    if (!storage_ || i >= static_cast<std::size_t>(info_.num_elements()))
      throw error(error_category::usage,
                  "string element " + std::to_string(i) + " of a tensor of " +
                      std::to_string(storage_ ? info_.num_elements() : 0) + " elements",
                  {}, "index the elements from 0 to their count - 1");
    return reinterpret_cast<string_ref*>(storage_.get())[i];
  }
  void check_element_type_is_string() const { detail::check_element_type<string_ref>(info_); }

  tensor_info info_;
  std::unique_ptr<std::byte[], aligned_delete> storage_;
  std::shared_ptr<string_heap> strings_;  // STRING only: the characters the elements point at
};

// --- static-extent tensor -------------------------------------------------------------------------
/// A tensor whose element type and shape are part of its type; usable in constant expressions.
template <class T, std::int64_t... Dims>
class static_tensor {
  static_assert(((Dims >= 0) && ...), "ipu: static_tensor dimensions must be non-negative");

 public:
  using tensor_concept = tensor_tag;
  using value_type = T;
  static constexpr std::size_t rank = sizeof...(Dims);
  static constexpr std::size_t size = (std::size_t{1} * ... * static_cast<std::size_t>(Dims));

  std::array<T, size> values{};

  [[nodiscard]] static constexpr ipu::shape shape() { return ipu::shape{Dims...}; }
  [[nodiscard]] constexpr tensor_info info() const { return {data_type_of_v<T>, shape()}; }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return std::as_bytes(std::span(values)); }
  [[nodiscard]] constexpr T& operator[](std::size_t i) { return values[i]; }
  [[nodiscard]] constexpr const T& operator[](std::size_t i) const { return values[i]; }
};

}  // namespace ipu
