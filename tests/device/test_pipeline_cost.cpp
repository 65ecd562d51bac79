#include <doctest/doctest.h>

#include "ipu/device/pipeline_cost.hpp"

namespace test_pipeline_cost {

TEST_CASE("pipeline bubble = (S - 1) / (M + S - 1)") {
  CHECK(ipu::pipeline_bubble_fraction(1, 1) == 0.0);   // one stage: never idle
  CHECK(ipu::pipeline_bubble_fraction(4, 1) == doctest::Approx(0.75));
  CHECK(ipu::pipeline_bubble_fraction(4, 16) == doctest::Approx(3.0 / 19.0));
  CHECK(ipu::pipeline_bubble_fraction(8, 64) == doctest::Approx(7.0 / 71.0));
  // More micro-batches shrink the bubble.
  CHECK(ipu::pipeline_bubble_fraction(4, 64) < ipu::pipeline_bubble_fraction(4, 16));
  static_assert(ipu::pipeline_bubble_fraction(2, 3) == 0.25);
}

TEST_CASE("pipelined cycles: (M + S - 1) steps of the slowest stage") {
  CHECK(ipu::pipeline_cycles(1000, 4, 16) == 19000);
  CHECK(ipu::pipeline_cycles(1000, 1, 16) == 16000);
  // The bubble is the idle share of that time: (S - 1) steps of M + S - 1.
  const double busy = 16.0 * 1000;
  CHECK(1.0 - busy / static_cast<double>(ipu::pipeline_cycles(1000, 4, 16)) ==
        doctest::Approx(ipu::pipeline_bubble_fraction(4, 16)));
}

TEST_CASE("training pipelines have 2N - 1 stages for N IPUs") {
  CHECK(ipu::training_pipeline_stages(1) == 1);
  CHECK(ipu::training_pipeline_stages(2) == 3);
  CHECK(ipu::training_pipeline_stages(4) == 7);
  CHECK(ipu::training_pipeline_stages(0) == 0);
}

TEST_CASE("an empty pipeline is a usage error") {
  try {
    (void)ipu::pipeline_bubble_fraction(0, 4);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::usage);
    CHECK(e.message() == "a pipeline needs at least one stage and one micro-batch (got 0 stages, 4 micro-batches)");
  }
  CHECK_THROWS_AS((void)ipu::pipeline_cycles(10, 2, 0), ipu::error);
}

}  // namespace test_pipeline_cost
