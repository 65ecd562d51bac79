#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "ipu/event_count.hpp"

namespace test_event_count {

TEST_CASE("event_count: a notify between prepare_wait and wait is not lost") {
  ipu::event_count ev;
  const auto key = ev.prepare_wait();
  ev.notify_all();  // the condition changed after the waiter's re-check
  ev.wait(key);     // returns at once: the epoch moved on
  // With nobody announced, notify does not advance the epoch (no system call either).
  const auto before = ev.prepare_wait();
  ev.cancel_wait();
  ev.notify_all();
  const auto after = ev.prepare_wait();
  ev.cancel_wait();
  CHECK(after == before);
}

TEST_CASE("event_count: a sleeping waiter wakes and sees the change") {
  ipu::event_count ev;
  std::atomic<bool> ready{false};
  std::atomic<bool> saw{false};
  std::thread waiter([&] {
    ev.await([&] { return ready.load(); });
    saw = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // most likely asleep by now
  ready = true;
  ev.notify_all();
  waiter.join();
  CHECK(saw.load());
}

TEST_SUITE("concurrent") {
  TEST_CASE("event_count stress: two threads hand a counter back and forth without a lost wake-up") {
    // Each side waits for the counter to reach its turn; a lost wake-up would hang the test.
    constexpr std::uint64_t rounds = 20'000;
    std::atomic<std::uint64_t> counter{0};
    ipu::event_count ev;
    auto wait_for = [&](std::uint64_t value) {
      ev.await([&] { return counter.load(std::memory_order_acquire) == value; });
    };
    std::thread odd([&] {
      for (std::uint64_t i = 1; i < 2 * rounds; i += 2) {
        wait_for(i);
        counter.store(i + 1, std::memory_order_release);
        ev.notify_all();
      }
    });
    for (std::uint64_t i = 0; i < 2 * rounds; i += 2) {
      wait_for(i);
      counter.store(i + 1, std::memory_order_release);
      ev.notify_all();
    }
    odd.join();
    CHECK(counter.load() == 2 * rounds);
  }
}

}  // namespace test_event_count
