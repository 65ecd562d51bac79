// Must not compile: a tensor needs its bytes. Checked by tests/compile_fail.cmake.
#include "ipu/tensor.hpp"

struct shape_only {
  using tensor_concept = ipu::tensor_tag;
  ipu::tensor_info info() const { return {}; }
};

int main() { return static_cast<int>(ipu::host_tensor::copy_of(shape_only{}).bytes().size()); }
