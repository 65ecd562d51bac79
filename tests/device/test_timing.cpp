#include <doctest/doctest.h>

#include "ipu/device/timing.hpp"

namespace test_timing {

using ipu::precision;

namespace {
constexpr auto mk1 = ipu::describe_architecture<ipu::mk1>();
constexpr auto mk2 = ipu::describe_architecture<ipu::mk2>();
constexpr auto bow = ipu::describe_architecture<ipu::bow>();
constexpr double tera = 1e12;
}  // namespace

TEST_CASE("peak FLOP/s = tiles x clock x MACs per cycle x 2, against the datasheet table") {
  // The spec's own check: 1472 x 1.325 GHz x 64 x 2 = 249.7 TFLOP/s.
  CHECK(ipu::peak_flops(mk2, precision::fp16_16) == doctest::Approx(1472 * 1.325e9 * 64 * 2));
  CHECK(ipu::peak_flops(mk2, precision::fp16_16) / tera == doctest::Approx(249.7).epsilon(0.0005));
  // Datasheet figures are rounded: within 0.5%.
  const double rel = 0.005;
  CHECK(ipu::peak_flops(mk2, precision::fp16_32) / tera == doctest::Approx(125.0).epsilon(rel));
  CHECK(ipu::peak_flops(mk2, precision::fp32) / tera == doctest::Approx(62.5).epsilon(rel));
  CHECK(ipu::peak_flops(mk1, precision::fp32) / tera == doctest::Approx(31.1).epsilon(rel));
  CHECK(ipu::peak_flops(mk1, precision::fp16_32) / tera == doctest::Approx(124.5).epsilon(rel));
  CHECK(ipu::peak_flops(bow, precision::fp16_16) / tera == doctest::Approx(348.5).epsilon(rel));
  CHECK(ipu::peak_flops(bow, precision::fp16_32) / tera == doctest::Approx(174.0).epsilon(rel));
  CHECK(ipu::peak_flops(bow, precision::fp32) / tera == doctest::Approx(87.3).epsilon(rel));
  // GC2 has no separate 16-bit partials rate: modelled at the FP16.32 rate.
  CHECK(ipu::peak_flops(mk1, precision::fp16_16) == ipu::peak_flops(mk1, precision::fp16_32));
}

TEST_CASE("peak FLOP/s of a device scales with its IPUs") {
  constexpr auto pod4 = ipu::ipu_model<ipu::mk2, 4>::description();
  CHECK(ipu::peak_flops(pod4, precision::fp16_16) == doctest::Approx(4 * ipu::peak_flops(mk2, precision::fp16_16)));
  static_assert(ipu::peak_flops(pod4, precision::fp32) > 249e12, "4 x 62.4 TFLOP/s, at compile time");
}

TEST_CASE("cycles <-> seconds at the clock rate") {
  CHECK(ipu::cycles_to_seconds(mk2, 1'325'000'000) == doctest::Approx(1.0));
  CHECK(ipu::cycles_to_seconds(mk1, 1600) == doctest::Approx(1e-6));
  CHECK(ipu::seconds_to_cycles(mk2, 1e-6) == 1325);
  CHECK(ipu::seconds_to_cycles(bow, 1e-6) == 1850);
  CHECK(ipu::seconds_to_cycles(mk2, 1.5 / 1.325e9) == 2);  // partial cycles round up
  CHECK(ipu::seconds_to_cycles(mk2, 0) == 0);
  static_assert(ipu::seconds_to_cycles(mk2, ipu::cycles_to_seconds(mk2, 123456)) == 123456);
}

TEST_CASE("ideal AMP cycles: MACs / (MACs per cycle per tile x tiles), rounded up") {
  CHECK(ipu::ideal_amp_cycles(mk2, precision::fp16_16, 1472 * 64, 1472) == 1);
  CHECK(ipu::ideal_amp_cycles(mk2, precision::fp16_16, 1472 * 64 + 1, 1472) == 2);
  CHECK(ipu::ideal_amp_cycles(mk2, precision::fp32, 1024ull * 1024 * 1024, 1472) == 45591);  // ceil(2^30 / 23552)
  CHECK(ipu::ideal_amp_cycles(mk1, precision::fp32, 800, 10) == 10);
}

TEST_CASE("the host CPU device has no figures to time with") {
  const auto cpu = ipu::cpu_device_description().arch;
  try {
    (void)ipu::peak_flops(cpu, precision::fp32);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::device);
    CHECK(e.message() == "the cost model has no figures for device 'cpu'");
    CHECK(e.location() == "peak_flops");
  }
  CHECK_THROWS_AS((void)ipu::cycles_to_seconds(cpu, 1), ipu::error);
}

}  // namespace test_timing
