#pragma once
// A bounded single-producer / single-consumer queue with a compile-time capacity.
//
// Shared by the pipelined executor (stage to stage) and the runtime's queue manager (host to
// device). The design follows the well-known cached-index SPSC ring: producer and consumer each
// own one index on its own cache line and keep a cached copy of the other side's index, so in the
// steady state neither touches the other's cache line. Indices grow without bound (64-bit, never
// wrap in practice) and are masked on access, so all Capacity slots are usable.
//
// The consumer publishes its pops in batches (every `publish_batch` pops, and at once whenever it
// has taken every element it has seen). When the producer is the faster side the ring runs full,
// and publishing each pop would make the two cores trade the consumer's cache line for every
// element; batched, a producer waiting for room sees several free slots at a time. The cost: while
// the consumer is part-way through a batch, the producer sees up to publish_batch - 1 free slots as
// still taken (size() counts them). A consumer that empties what it has seen publishes everything,
// so an empty ring always looks empty.
//
// Two measured details (benchmarks/bench_ring_buffer.cpp, against boost::lockfree::spsc_queue):
// - The producer's line, the consumer's line and the slots are 128 bytes apart, not 64: x86 cores
//   fetch 64-byte lines in aligned pairs (the adjacent-line prefetcher), so indices one line apart
//   still pull each other between cores.
// - A try_pop that has just re-read the producer's index and still finds the ring empty pauses the
//   core briefly (empty_poll_pauses CPU pauses) before returning false. Callers poll try_pop in a
//   loop; without the pause the loop floods the producer's line with loads, so each of the
//   producer's stores must first win its line back, and when one lands the polling core discards
//   its speculative loads (a memory-order pipeline flush). Fewer polls make the round trip
//   shorter, not longer (measured: 4 pauses gave 0.78-0.87 of boost's round trip, 1 gave
//   0.86-0.99). A caller that does not poll pays the pause on an empty ring only.
// - A consumer that keeps up with a streaming producer slips back a little (FastForward's
//   "temporal slipping"). Right behind the producer, the two cores share the slot line being
//   written and the producer's index line: every element moves both lines between the cores, and
//   both queues slow down several-fold. So when try_pop re-reads the producer's index, finds fewer
//   than `slip_items` elements (128 bytes of slots), and its previous re-read had found elements
//   too (the producer is streaming, not answering one message at a time), it waits briefly (up to
//   slip_polls short pauses) for the producer to get that far ahead. A ping-pong consumer always
//   finds the ring empty first, so it never slips: the round trip is unchanged. Measured
//   throughput against the same ring without slipping: 1.0-1.2x in paired runs. The cost: a
//   consumer catching up with a producer that streams slowly (a pipeline stage much slower than the
//   next) waits out the slip_polls polls (32 CPU pauses: 0.1-1.5 us, by core) each time it catches up.
#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <thread>
#include <type_traits>
#include <utility>

namespace ipu {

namespace detail {
// Distance between data that different threads write. Fixed rather than
// std::hardware_destructive_interference_size, whose value GCC warns may change between compiler
// versions (an ABI hazard for a header-only library), and 128 rather than one 64-byte line because
// x86 prefetches lines in aligned pairs.
inline constexpr std::size_t false_sharing_range = 128;

/// Tells the core this thread is polling (x86 PAUSE, AArch64 YIELD).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// The pause of a consumer that has just found the ring empty (see the top of this file).
inline constexpr int empty_poll_pauses = 4;
inline void empty_poll_pause() noexcept {
  for (int i = 0; i < empty_poll_pauses; ++i) cpu_relax();
}

/// Spins briefly, then yields: lowest latency when the other side is about to answer, without
/// burning a core when it is not.
class backoff {
 public:
  void pause() noexcept {
    if (spins_ < 64) {
      ++spins_;
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }

 private:
  unsigned spins_ = 0;
};
}  // namespace detail

template <class T, std::size_t Capacity>
class ring_buffer {
  static_assert(Capacity >= 2 && std::has_single_bit(Capacity),
                "ipu: ring_buffer capacity must be a power of two >= 2; round it up with std::bit_ceil");
  static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_destructible_v<T>,
                "ipu: ring_buffer elements must be nothrow move-constructible and destructible; "
                "store a pointer or handle instead");

 public:
  using value_type = T;
  static constexpr std::size_t capacity() noexcept { return Capacity; }
  /// Pops the consumer makes before the producer is told of them (see above).
  static constexpr std::size_t publish_batch = Capacity >= 64 ? 16 : (Capacity >= 8 ? Capacity / 4 : 1);
  /// How far behind a streaming producer the consumer stays, and how long it waits for that (see above).
  static constexpr std::size_t slip_items =
      std::clamp<std::size_t>(detail::false_sharing_range / sizeof(T), 1, Capacity / 2);
  static constexpr int slip_polls = 8;

  ring_buffer() = default;
  ring_buffer(const ring_buffer&) = delete;
  ring_buffer& operator=(const ring_buffer&) = delete;
  ~ring_buffer() {
    if constexpr (!std::is_trivially_destructible_v<T>)
      while (try_pop()) {
      }
  }

  // --- producer side ------------------------------------------------------------------------
  template <class... Args>
  bool try_emplace(Args&&... args) noexcept(std::is_nothrow_constructible_v<T, Args...>) {
    const auto head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ == Capacity) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ == Capacity) return false;
    }
    std::construct_at(slot(head), std::forward<Args>(args)...);
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  bool try_push(const T& v) noexcept(std::is_nothrow_copy_constructible_v<T>) { return try_emplace(v); }
  bool try_push(T&& v) noexcept { return try_emplace(std::move(v)); }

  /// Whether a push would succeed now (producer side: room only grows until this thread pushes).
  [[nodiscard]] bool has_room() noexcept {
    const auto head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ == Capacity) tail_cache_ = tail_.load(std::memory_order_acquire);
    return head - tail_cache_ != Capacity;
  }

  /// Blocks (spin, then yield) until there is room.
  void push(T v) noexcept {
    detail::backoff b;
    while (!try_emplace(std::move(v))) b.pause();
  }

  /// Gives up after `timeout`; returns whether the value was pushed.
  template <class Rep, class Period>
  bool push_for(T v, std::chrono::duration<Rep, Period> timeout) noexcept {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    detail::backoff b;
    while (!try_emplace(std::move(v))) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      b.pause();
    }
    return true;
  }

  /// Pushes as many of `values` as fit (moving them) and returns how many; one release store.
  std::size_t try_push_bulk(std::span<T> values) noexcept {
    const auto head = head_.load(std::memory_order_relaxed);
    auto room = Capacity - (head - tail_cache_);
    if (room < values.size()) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      room = Capacity - (head - tail_cache_);
    }
    const auto n = std::min(room, values.size());
    for (std::size_t i = 0; i < n; ++i) std::construct_at(slot(head + i), std::move(values[i]));
    if (n) head_.store(head + n, std::memory_order_release);
    return n;
  }

  /// Blocks until every value has been pushed.
  void push_bulk(std::span<T> values) noexcept {
    detail::backoff b;
    while (!values.empty()) {
      const auto n = try_push_bulk(values);
      values = values.subspan(n);
      if (!n) b.pause();
    }
  }

  // --- consumer side ------------------------------------------------------------------------
  bool try_pop(T& out) noexcept {
    T* s = front();
    if (!s) return false;
    out = std::move(*s);
    release_front(s);
    return true;
  }
  std::optional<T> try_pop() noexcept {
    T* s = front();
    if (!s) return std::nullopt;
    std::optional<T> out(std::move(*s));
    release_front(s);
    return out;
  }

  /// Blocks (spin, then yield) until a value arrives.
  T pop() noexcept {
    detail::backoff b;
    for (;;) {
      if (auto v = try_pop()) return std::move(*v);
      b.pause();
    }
  }

  template <class Rep, class Period>
  std::optional<T> pop_for(std::chrono::duration<Rep, Period> timeout) noexcept {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    detail::backoff b;
    for (;;) {
      if (auto v = try_pop()) return v;
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      b.pause();
    }
  }

  /// Pops up to out.size() values and returns how many; one release store.
  std::size_t try_pop_bulk(std::span<T> out) noexcept {
    const auto tail = tail_local_;
    auto avail = head_cache_ - tail;
    if (avail < out.size()) avail = refresh(tail);
    const auto n = std::min(avail, out.size());
    for (std::size_t i = 0; i < n; ++i) {
      T* s = slot(tail + i);
      out[i] = std::move(*s);
      std::destroy_at(s);
    }
    if (n) {
      tail_local_ = tail + n;
      tail_.store(tail + n, std::memory_order_release);
    }
    return n;
  }

  // --- either side (approximate while the other side runs; counts unpublished pops) -------------
  [[nodiscard]] std::size_t size() const noexcept {
    const auto tail = tail_.load(std::memory_order_acquire);
    return head_.load(std::memory_order_acquire) - tail;
  }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }

 private:
  /// The oldest element, or nullptr (after the empty-poll pause) when the ring is empty.
  T* front() noexcept {
    const auto tail = tail_local_;
    if (tail == head_cache_) {
      const bool streaming = streaming_;
      const auto avail = refresh(tail);
      if (avail == 0) return nullptr;
      if (streaming && avail < slip_items) slip(tail);
    }
    return slot(tail);
  }
  /// Re-reads the producer's index and returns how many elements there are; pauses when there are
  /// none and remembers whether there were any (both: see the top of this file).
  std::size_t refresh(std::size_t tail) noexcept {
    head_cache_ = head_.load(std::memory_order_acquire);
    const auto avail = head_cache_ - tail;
    if (avail == 0) detail::empty_poll_pause();
    streaming_ = avail != 0;
    return avail;
  }
  /// Lets a streaming producer get slip_items ahead, or gives up after slip_polls polls.
  void slip(std::size_t tail) noexcept {
    for (int i = 0; i < slip_polls; ++i) {
      detail::empty_poll_pause();
      head_cache_ = head_.load(std::memory_order_acquire);
      if (head_cache_ - tail >= slip_items) return;
    }
  }
  /// Destroys the front element, whose value has been moved out. Tells the producer when a batch is
  /// complete or nothing the consumer has seen is left.
  void release_front(T* s) noexcept {
    std::destroy_at(s);
    const auto tail = ++tail_local_;
    if (tail % publish_batch == 0 || tail == head_cache_) tail_.store(tail, std::memory_order_release);
  }

  T* slot(std::size_t i) noexcept { return std::launder(reinterpret_cast<T*>(storage_ + (i & (Capacity - 1)) * sizeof(T))); }

  // Producer's line: its index and its view of the consumer's.
  alignas(detail::false_sharing_range) std::atomic<std::size_t> head_{0};
  std::size_t tail_cache_ = 0;
  // Consumer's line: the published index, its view of the producer's, and its own pops.
  alignas(detail::false_sharing_range) std::atomic<std::size_t> tail_{0};
  std::size_t head_cache_ = 0;
  std::size_t tail_local_ = 0;
  bool streaming_ = false;  // the last re-read of head_ found elements
  // Slots on their own lines so element writes never share with the indices.
  alignas(std::max(detail::false_sharing_range, alignof(T))) std::byte storage_[Capacity * sizeof(T)];
};

}  // namespace ipu
