// The gradient all-reduce: ring arithmetic over IPU-Links checked by hand against the link figures,
// the ring's bottleneck on a ladder, link sharing between the rings of multi-IPU replicas, gateway
// links between pods, and the refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "ipu/device/bsp.hpp"
#include "ipu/device/collective_cost.hpp"

namespace test_collective_cost {

namespace {
constexpr auto mk2 = ipu::describe_architecture<ipu::mk2>();
constexpr auto mk1 = ipu::describe_architecture<ipu::mk1>();
// 128 Gibit/s per link and direction at 85% (ipu-spec), written out independently of transfer.hpp.
constexpr double link = 128.0 * 1073741824.0 / 8 * 0.85;
constexpr double clock = 1.325e9;

std::uint64_t cycles_of(double seconds) { return static_cast<std::uint64_t>(std::ceil(seconds * clock)); }
}  // namespace

TEST_CASE("one replica, or nothing to reduce: no all-reduce") {
  CHECK(ipu::ring_all_reduce_cost(mk2, 1, 1, 1 << 20).cycles == 0);
  CHECK(ipu::ring_all_reduce_cost(mk2, 4, 4, 0).cycles == 0);
}

TEST_CASE("16 single-IPU replicas: a ring up and down the ladder, 2 links at its narrowest") {
  const std::uint64_t bytes = 100ull << 20;
  const auto c = ipu::ring_all_reduce_cost(mk2, 1, 16, bytes);
  CHECK(c.ring_links == 2);
  CHECK(c.link_sharing == 1);
  CHECK(c.pods == 1);
  const double seconds = 2.0 * 15 / 16 * static_cast<double>(bytes) / (2 * link);
  CHECK(c.link_seconds == doctest::Approx(seconds));
  // 2 (R - 1) ring steps, each closed by a sync over 16 IPUs: 15 ns x 1.325 GHz x (1 + 16/4) hops x 2.
  const std::uint64_t sync = static_cast<std::uint64_t>(std::ceil(15e-9 * clock * 5 * 2));
  CHECK(c.sync_cycles == 30 * sync);
  CHECK(c.cycles == cycles_of(seconds) + 30 * sync);
  // Two replicas: the partner IPU on the rung, 4 links.
  CHECK(ipu::ring_all_reduce_cost(mk2, 1, 2, bytes).ring_links == 4);
}

TEST_CASE("replicas of 4 IPUs: each ring stays on one side of the ladder and shares it with another") {
  const std::uint64_t bytes = 64ull << 20;
  const auto c = ipu::ring_all_reduce_cost(mk2, 4, 4, bytes);
  CHECK(c.ring_links == 2);
  CHECK(c.link_sharing == 2);
  CHECK(c.link_seconds == doctest::Approx(2.0 * 3 / 4 * static_cast<double>(bytes) / (2 * link / 2)));
  // More replicas of the same gradients cost more, approaching twice the bytes over the ring.
  CHECK(ipu::ring_all_reduce_cost(mk2, 4, 8, bytes).link_seconds > c.link_seconds);
}

TEST_CASE("replicas over pods: reduce-scatter in the pod, the shares across pods over the gateways") {
  const std::uint64_t bytes = 64ull << 20;
  const auto in_pod = ipu::ring_all_reduce_cost(mk2, 1, 64, bytes);
  const auto two_pods = ipu::ring_all_reduce_cost(mk2, 1, 128, bytes);
  CHECK(two_pods.pods == 2);
  CHECK(two_pods.replicas_per_pod == 64);
  CHECK(two_pods.link_seconds == doctest::Approx(in_pod.link_seconds));
  // 2 x 100 Gbit/s per 4-IPU machine; each IPU sends its 1/64 share: 2 (P - 1) / P x share / rate.
  const double gateway = 2.0 * 1 / 2 * (static_cast<double>(bytes) / 64) / (200e9 / 8 / 4);
  CHECK(two_pods.gateway_seconds == doctest::Approx(gateway));
  CHECK(two_pods.cycles > in_pod.cycles);
}

TEST_CASE("all-reduce refusals name the fix") {
  auto message = [](auto f) {
    try {
      f();
    } catch (const ipu::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([] { (void)ipu::ring_all_reduce_cost(mk2, 1, 96, 1024); }).find("multiple of 64") != std::string::npos);
  CHECK(message([] { (void)ipu::ring_all_reduce_cost(mk1, 1, 128, 1024); }).find("no gateway") != std::string::npos);
  CHECK(message([] { (void)ipu::ring_all_reduce_cost(mk2, 3, 2, 1024); }).find("power of two") != std::string::npos);
}

static_assert(ipu::ring_all_reduce_cost(ipu::describe_architecture<ipu::bow>(), 1, 16, 1 << 20).ring_links == 2);

}  // namespace test_collective_cost
