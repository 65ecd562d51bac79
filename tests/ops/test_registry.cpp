// The op registry: lookups by (domain, type), and the checked lookup planning relies on.
#include "ipu/ops/registry.hpp"

#include <doctest/doctest.h>

#include <string>

namespace test_registry {

namespace {
void first_kernel(const ipu::kernel_context&) {}
void second_kernel(const ipu::kernel_context&) {}
}  // namespace

TEST_CASE("op registry: find and kernel agree; a missing op is an ipu::error naming it") {
  ipu::op_registry r;
  r.add({"", "Relu", &first_kernel});
  r.add({"com.example", "Relu", &second_kernel});
  CHECK((r.find("ai.onnx", "Relu")->kernel == &first_kernel));  // "ai.onnx" is the default domain
  CHECK((r.kernel("", "Relu") == &first_kernel));
  CHECK((r.kernel("com.example", "Relu") == &second_kernel));
  CHECK(r.find("", "Tanh") == nullptr);
  CHECK_THROWS_WITH_AS(static_cast<void>(r.kernel("", "Tanh")), doctest::Contains("no host kernel for op Tanh"),
                       ipu::error);
  CHECK_THROWS_WITH_AS(static_cast<void>(r.kernel("com.example", "Tanh")),
                       doctest::Contains("no host kernel for op com.example::Tanh"), ipu::error);
  CHECK_THROWS_AS(r.add({"", "Relu", &second_kernel}), ipu::error);
}

}  // namespace test_registry
