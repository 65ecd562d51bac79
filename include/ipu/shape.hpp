#pragma once
// A tensor shape: a list of non-negative dimensions. Rank 0 is a scalar (one element).
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "ipu/error.hpp"

namespace ipu {

class shape {
 public:
  using dim_type = std::int64_t;
  /// The most elements a tensor may have (2^59): bytes = elements x element size never overflows.
  /// The bound holds for the product of the non-zero dimensions too, so that an empty tensor's
  /// partial products (rows, slices, strides a kernel forms) cannot overflow either.
  static constexpr dim_type max_elements = dim_type{1} << 59;

  constexpr shape() = default;
  constexpr shape(std::initializer_list<dim_type> dims) : dims_(dims) { check(); }
  constexpr explicit shape(std::vector<dim_type> dims) : dims_(std::move(dims)) { check(); }
  constexpr explicit shape(std::span<const dim_type> dims) : dims_(dims.begin(), dims.end()) { check(); }

  [[nodiscard]] constexpr std::size_t rank() const noexcept { return dims_.size(); }
  [[nodiscard]] constexpr const std::vector<dim_type>& dims() const noexcept { return dims_; }
  [[nodiscard]] constexpr dim_type operator[](std::size_t i) const { return dims_[i]; }
  [[nodiscard]] constexpr auto begin() const noexcept { return dims_.begin(); }
  [[nodiscard]] constexpr auto end() const noexcept { return dims_.end(); }

  /// Number of elements: the product of the dimensions (1 for a scalar).
  [[nodiscard]] constexpr std::int64_t num_elements() const noexcept {
    std::int64_t n = 1;
    for (auto d : dims_) n *= d;  // check() bounds every partial product
    return n;
  }

  /// Dimension `axis`, where a negative axis counts from the back (numpy style).
  [[nodiscard]] constexpr dim_type dim(std::int64_t axis) const { return dims_[normalize_axis(axis)]; }

  /// Maps a possibly negative axis into [0, rank); throws for an axis out of range.
  [[nodiscard]] constexpr std::size_t normalize_axis(std::int64_t axis) const {
    const auto r = static_cast<std::int64_t>(rank());
    if (axis < -r || axis >= r)
      throw error(error_category::shape, "axis " + std::to_string(axis) + " is out of range for rank " +
                                             std::to_string(r),
                  {}, "use an axis in [-rank, rank)");
    return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
  }

  /// Row-major strides in elements.
  [[nodiscard]] constexpr std::vector<std::int64_t> strides() const {
    std::vector<std::int64_t> s(rank(), 1);
    for (std::size_t i = rank(); i-- > 1;) s[i - 1] = s[i] * dims_[i];  // check() bounds every product
    return s;
  }

  friend constexpr bool operator==(const shape&, const shape&) = default;

 private:
  constexpr void check() const {
    // Every size computed from a shape (elements, bytes, strides, any partial product) stays
    // representable: the non-zero dimensions multiply to at most max_elements, so even 16-byte
    // elements fit an int64 byte count. An empty tensor is held to the same bound ([0, 2^62, 30]
    // is refused): kernels loop over its other dimensions, and the fuzzer found their products
    // overflowing.
    dim_type n = 1;
    bool overflow = false;
    for (auto d : dims_) {
      if (d < 0)
        throw error(error_category::shape, "dimension " + std::to_string(d) + " is negative", {},
                    "shapes hold known, non-negative sizes; fix dynamic dimensions before building the IR");
      if (d != 0) overflow = overflow || __builtin_mul_overflow(n, d, &n) || n > max_elements;
    }
    if (overflow)
      throw error(error_category::shape,
                  "a shape of dimensions " + list() + " has more than 2^59 elements, or its non-zero dimensions do", {},
                  "check the model's shapes: no tensor can be that large, and an empty one's other dimensions "
                  "are held to the same bound");
  }
  [[nodiscard]] std::string list() const {
    std::string r = "[";  // appended piece by piece: "," + std::string trips GCC 12's -Wrestrict
    for (std::size_t i = 0; i < dims_.size(); ++i) {
      if (i) r += ',';
      r += std::to_string(dims_[i]);
    }
    r += ']';
    return r;
  }
  std::vector<dim_type> dims_;
};

/// "[4,3,224,224]"
inline std::string to_string(const shape& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.rank(); ++i) {
    if (i) r += ',';
    r += std::to_string(s[i]);
  }
  return r + "]";
}

}  // namespace ipu
