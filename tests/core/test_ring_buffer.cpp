#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "ipu/ring_buffer.hpp"

namespace test_ring_buffer {

using namespace std::chrono_literals;

TEST_CASE("ring_buffer holds exactly its capacity, in FIFO order") {
  ipu::ring_buffer<int, 4> q;
  CHECK(q.empty());
  for (int i = 0; i < 4; ++i) {
    CHECK(q.has_room());
    CHECK(q.try_push(i));
  }
  CHECK_FALSE(q.has_room());
  CHECK_FALSE(q.try_push(99));
  CHECK(q.size() == 4);
  int v = -1;
  for (int i = 0; i < 4; ++i) {
    REQUIRE(q.try_pop(v));
    CHECK(v == i);
  }
  CHECK(q.has_room());  // the consumer published its pops once it had taken all it had seen
  CHECK_FALSE(q.try_pop(v));
  CHECK_FALSE(q.try_pop().has_value());
}

TEST_CASE("ring_buffer wraps around many times") {
  ipu::ring_buffer<std::uint64_t, 8> q;
  std::uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 1000; ++round) {
    const int n = 1 + round % 8;
    for (int i = 0; i < n; ++i) REQUIRE(q.try_push(next_in++));
    for (int i = 0; i < n; ++i) CHECK(*q.try_pop() == next_out++);
  }
  CHECK(q.empty());
}

TEST_CASE("ring_buffer bulk push and pop move what fits") {
  ipu::ring_buffer<int, 8> q;
  std::vector<int> in(12);
  std::iota(in.begin(), in.end(), 0);
  CHECK(q.try_push_bulk(in) == 8);
  std::array<int, 5> out{};
  CHECK(q.try_pop_bulk(out) == 5);
  CHECK(out == std::array<int, 5>{0, 1, 2, 3, 4});
  CHECK(q.try_push_bulk(std::span(in).subspan(8)) == 4);
  std::array<int, 16> rest{};
  CHECK(q.try_pop_bulk(rest) == 7);
  CHECK(rest[0] == 5);
  CHECK(rest[6] == 11);
}

TEST_CASE("ring_buffer carries move-only values and destroys leftovers") {
  auto probe = std::make_shared<int>(7);
  {
    ipu::ring_buffer<std::shared_ptr<int>, 4> q;
    q.push(probe);
    q.push(probe);
    CHECK(probe.use_count() == 3);
    auto p = q.pop();
    CHECK(*p == 7);
  }  // one left in the queue: the destructor must release it
  CHECK(probe.use_count() == 1);

  ipu::ring_buffer<std::unique_ptr<int>, 2> u;
  CHECK(u.try_push(std::make_unique<int>(3)));
  CHECK(*u.pop() == 3);
}

TEST_CASE("ring_buffer: a consumer slipping behind a streaming producer still takes what is there") {
  using ring = ipu::ring_buffer<std::uint64_t, 64>;
  static_assert(ring::slip_items == 16);  // 128 bytes of slots
  static_assert(ipu::ring_buffer<std::uint64_t, 8>::slip_items == 4);  // at most half the ring
  static_assert(ipu::ring_buffer<std::array<char, 512>, 8>::slip_items == 1);
  ring q;
  std::uint64_t v = 0;
  // Each re-read of the producer's index finds fewer elements than slip_items, the first after an
  // empty one (no slip), the rest while streaming (a bounded wait, then the pop).
  CHECK_FALSE(q.try_pop(v));
  for (std::uint64_t i = 0; i < 5; ++i) {
    REQUIRE(q.try_push(i));
    REQUIRE(q.try_pop(v));
    CHECK(v == i);
  }
  for (std::uint64_t i = 5; i < 8; ++i) REQUIRE(q.try_push(i));
  for (std::uint64_t i = 5; i < 8; ++i) {
    REQUIRE(q.try_pop(v));
    CHECK(v == i);
  }
  CHECK_FALSE(q.try_pop(v));
  CHECK(q.empty());
}

TEST_CASE("ring_buffer publishes pops in batches and everything once the consumer has caught up") {
  using ring = ipu::ring_buffer<int, 64>;
  static_assert(ring::publish_batch == 16);
  ring q;
  for (int i = 0; i < 64; ++i) REQUIRE(q.try_push(i));
  int v = -1;
  REQUIRE(q.try_pop(v));
  // One pop into a batch: the producer does not see the slot yet.
  CHECK_FALSE(q.try_push(64));
  CHECK(q.size() == 64);
  for (int i = 1; i < 16; ++i) REQUIRE(q.try_pop(v));
  CHECK(v == 15);
  // The batch is complete: 16 slots free at once.
  CHECK(q.size() == 48);
  for (int i = 64; i < 80; ++i) CHECK(q.try_push(i));
  CHECK_FALSE(q.try_push(80));
  // Draining everything it has seen publishes every pop, whatever the batch.
  for (int i = 16; i < 80; ++i) {
    REQUIRE(q.try_pop(v));
    CHECK(v == i);
  }
  CHECK(q.empty());
  CHECK(q.size() == 0);
  for (int i = 0; i < 64; ++i) CHECK(q.try_push(i));
}

TEST_CASE("ring_buffer timed operations give up") {
  ipu::ring_buffer<int, 2> q;
  CHECK_FALSE(q.pop_for(1ms).has_value());
  CHECK(q.push_for(1, 1ms));
  CHECK(q.push_for(2, 1ms));
  CHECK_FALSE(q.push_for(3, 1ms));
  CHECK(*q.pop_for(1ms) == 1);
}

TEST_SUITE("concurrent") {
  TEST_CASE("ring_buffer stress: one producer, one consumer, every value once and in order") {
    constexpr std::uint64_t n = 200'000;
    ipu::ring_buffer<std::uint64_t, 64> q;
    std::thread producer([&] {
      for (std::uint64_t i = 0; i < n; ++i) q.push(i);
    });
    std::uint64_t expected = 0;
    bool in_order = true;
    while (expected < n) {
      const auto v = q.pop();
      in_order = in_order && v == expected;
      ++expected;
    }
    producer.join();
    CHECK(in_order);
    CHECK(q.empty());
  }

  TEST_CASE("ring_buffer stress with bulk operations on both sides") {
    constexpr std::uint64_t n = 200'000;
    ipu::ring_buffer<std::uint64_t, 128> q;
    std::thread producer([&] {
      std::vector<std::uint64_t> batch;
      for (std::uint64_t i = 0; i < n;) {
        batch.clear();
        for (std::uint64_t k = 0; k < 37 && i < n; ++k) batch.push_back(i++);
        q.push_bulk(batch);
      }
    });
    std::array<std::uint64_t, 50> out{};
    std::uint64_t expected = 0;
    bool in_order = true;
    while (expected < n) {
      const auto got = q.try_pop_bulk(out);
      for (std::size_t i = 0; i < got; ++i) in_order = in_order && out[i] == expected++;
      if (!got) std::this_thread::yield();
    }
    producer.join();
    CHECK(in_order);
  }
}

}  // namespace test_ring_buffer
