#pragma once
// Op attributes of every ONNX kind: scalars, strings, tensors, subgraphs and lists of each.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/tensor_info.hpp"

namespace ipu {

class graph;

/// A tensor whose contents are known: an initializer or a tensor-valued attribute.
struct constant_tensor {
  tensor_info info;
  byte_buffer data;
  friend constexpr bool operator==(const constant_tensor&, const constant_tensor&) = default;
};

namespace detail {
/// A deep-copying owner of one T, usable with an incomplete T (for recursive subgraphs).
template <class T>
class box {
 public:
  constexpr box() : p_(new T()) {}
  constexpr explicit box(T v) : p_(new T(std::move(v))) {}
  constexpr box(const box& o) : p_(new T(*o.p_)) {}
  constexpr box(box&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  constexpr box& operator=(box o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  constexpr ~box() { delete p_; }
  constexpr T& operator*() { return *p_; }
  constexpr const T& operator*() const { return *p_; }
  constexpr T* operator->() { return p_; }
  constexpr const T* operator->() const { return p_; }
  friend constexpr bool operator==(const box& a, const box& b) { return *a == *b; }

 private:
  T* p_;
};
}  // namespace detail

/// A single-graph attribute (ONNX GRAPH), as opposed to a list of graphs (GRAPHS).
struct subgraph {
  detail::box<graph> body;
  friend constexpr bool operator==(const subgraph&, const subgraph&) = default;
};

enum class attribute_kind { f, i, s, t, g, floats, ints, strings, tensors, graphs };

struct attribute {
  using value_type = std::variant<float, std::int64_t, std::string, constant_tensor, subgraph, std::vector<float>,
                                  std::vector<std::int64_t>, std::vector<std::string>,
                                  std::vector<constant_tensor>, std::vector<graph>>;
  std::string name;
  value_type value;

  [[nodiscard]] constexpr attribute_kind kind() const noexcept {
    return static_cast<attribute_kind>(value.index());
  }
  friend constexpr bool operator==(const attribute&, const attribute&) = default;
};

constexpr std::string_view to_string(attribute_kind k) noexcept {
  constexpr std::string_view names[] = {"FLOAT", "INT",  "STRING",  "TENSOR",  "GRAPH",
                                        "FLOATS", "INTS", "STRINGS", "TENSORS", "GRAPHS"};
  return names[static_cast<int>(k)];
}

}  // namespace ipu
