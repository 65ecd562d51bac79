#pragma once
// Element type + shape: everything about a tensor except its contents.
#include <cstddef>
#include <string>

#include "ipu/data_type.hpp"
#include "ipu/shape.hpp"

namespace ipu {

struct tensor_info {
  data_type type = data_type::F32;
  ipu::shape shape;

  [[nodiscard]] constexpr std::int64_t num_elements() const noexcept { return shape.num_elements(); }
  [[nodiscard]] constexpr std::size_t num_bytes() const noexcept {
    return static_cast<std::size_t>(shape.num_elements()) * size_of(type);
  }
  friend constexpr bool operator==(const tensor_info&, const tensor_info&) = default;
};

/// "F32[4,3,224,224]"
inline std::string to_string(const tensor_info& i) {
  return std::string(to_string(i.type)) + to_string(i.shape);
}

}  // namespace ipu
