#pragma once
// Lets threads sleep until another thread changes a condition they poll (a ring gaining an
// element, say), with no lost wake-up and no system call on the signalling side while nobody
// sleeps. The classic event count (as in Folly and Eigen): a waiter announces itself, re-checks its
// condition, then sleeps on an epoch; a notifier advances the epoch only when someone announced.
//
//   for (;;) {                              // waiter
//     if (condition()) break;
//     const auto key = ev.prepare_wait();
//     if (condition()) { ev.cancel_wait(); break; }
//     ev.wait(key);
//   }
//   make_condition_true(); ev.notify_all();  // notifier
#include <atomic>
#include <cstdint>

namespace ipu {

class event_count {
 public:
  using key_type = std::uint32_t;

  /// Announces a waiter. Re-check the condition after this, then wait(key) or cancel_wait().
  [[nodiscard]] key_type prepare_wait() noexcept {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    const auto key = epoch_.load(std::memory_order_seq_cst);
    // Orders the announcement before the caller's re-check of its condition; pairs with the
    // fence in notify_all (if the notifier missed this waiter, the re-check sees its change).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return key;
  }
  void cancel_wait() noexcept { waiters_.fetch_sub(1, std::memory_order_relaxed); }

  /// Sleeps until a notify_all that follows the prepare_wait which returned `key`.
  void wait(key_type key) noexcept {
    epoch_.wait(key, std::memory_order_seq_cst);
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }

  /// Wakes every announced waiter; call after making the condition true.
  void notify_all() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_relaxed) == 0) return;
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    epoch_.notify_all();
  }

 private:
  std::atomic<key_type> epoch_{0};
  std::atomic<std::uint32_t> waiters_{0};
};

}  // namespace ipu
