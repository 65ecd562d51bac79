#include <doctest/doctest.h>

#include "ipu/error.hpp"

namespace test_error {

TEST_CASE("error composes category, location, message and hint") {
  const ipu::error e(ipu::error_category::shape, "expected 12 elements, got 10", "tensor 'x'", "pass a [3,4] array");
  CHECK(std::string(e.what()) == "ipu shape error at tensor 'x': expected 12 elements, got 10 (pass a [3,4] array)");
  CHECK(e.category() == ipu::error_category::shape);
  CHECK(e.message() == "expected 12 elements, got 10");
  CHECK(e.location() == "tensor 'x'");
  CHECK(e.hint() == "pass a [3,4] array");
}

TEST_CASE("recoverable errors carry a recovery action, both kinds are ipu::error") {
  try {
    throw ipu::recoverable_error(ipu::recovery_action::partition_reset, ipu::error_category::runtime, "link down");
  } catch (const ipu::error& e) {
    const auto* r = dynamic_cast<const ipu::recoverable_error*>(&e);
    REQUIRE(r != nullptr);
    CHECK(r->action() == ipu::recovery_action::partition_reset);
    CHECK(ipu::to_string(r->action()) == "PARTITION_RESET");
  }
  CHECK_THROWS_AS(throw ipu::unrecoverable_error(ipu::error_category::device, "IPU lost"), ipu::error);
}

}  // namespace test_error
