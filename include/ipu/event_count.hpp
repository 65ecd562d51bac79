#pragma once
// Lets threads sleep until another thread changes a condition they poll (a ring gaining an
// element, say), with no lost wake-up and no system call on the signalling side while nobody
// sleeps. The classic event count (as in Folly and Eigen): a waiter announces itself, re-checks its
// condition, then sleeps on an epoch; a notifier advances the epoch only when someone announced.
//
//   ev.await(condition);                     // waiter (see await for the protocol)
//   make_condition_true(); ev.notify_all();  // notifier
#include <atomic>
#include <cstdint>

namespace ipu {

class event_count {
 public:
  using key_type = std::uint32_t;

  /// Announces a waiter. Re-check the condition after this, then wait(key) or cancel_wait().
  [[nodiscard]] key_type prepare_wait() noexcept {
    // Both sides update waiters_ with a read-modify-write, so the two are ordered: either the
    // notifier's comes later and sees this waiter, or it comes first and this one synchronises
    // with it, so the caller's re-check sees the change. (No fences: TSan does not model them.)
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    return epoch_.load(std::memory_order_seq_cst);
  }
  void cancel_wait() noexcept { waiters_.fetch_sub(1, std::memory_order_relaxed); }

  /// Sleeps until a notify_all that follows the prepare_wait which returned `key`.
  void wait(key_type key) noexcept {
    epoch_.wait(key, std::memory_order_seq_cst);
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }

  /// Returns once `ready()` is true, sleeping between checks: check, announce, check again, sleep.
  template <class Ready>
  void await(Ready&& ready) {
    while (!ready()) {
      const auto key = prepare_wait();
      if (ready()) {
        cancel_wait();
        return;
      }
      wait(key);
    }
  }

  /// Wakes every announced waiter; call after making the condition true.
  void notify_all() noexcept {
    if (waiters_.fetch_add(0, std::memory_order_seq_cst) == 0) return;  // an RMW: see prepare_wait
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    epoch_.notify_all();
  }

 private:
  std::atomic<key_type> epoch_{0};
  std::atomic<std::uint32_t> waiters_{0};
};

}  // namespace ipu
