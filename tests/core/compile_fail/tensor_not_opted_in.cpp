// Must not compile: a type with a tensor's members but no opt-in is not a tensor. Checked by
// tests/compile_fail.cmake.
#include <cstddef>
#include <span>

#include "ipu/tensor.hpp"

struct lookalike {
  ipu::tensor_info info() const { return {}; }
  std::span<const std::byte> bytes() const { return {}; }
};

int main() { return static_cast<int>(ipu::host_tensor::copy_of(lookalike{}).bytes().size()); }
