#pragma once
// Model Runtime's QueueManager: an input and an output queue per anchor, each a ring of POINTERS to
// user memory (zero copy) with a completion callback per entry.
//
//   ipu::runtime::queue_manager qm;
//   qm.add_input("x", 4 * 784);                       // anchor name, bytes of one tensor
//   qm.add_output("y", 4 * 10);
//   qm.input("x").enqueue(x_ptr, 4 * 784, [](ipu::runtime::entry_status s) { ... });
//   auto e = qm.input("x").dequeue(std::chrono::milliseconds(5));   // the device side
//   ...; e->complete(ipu::runtime::entry_status::done);
//
// Each queue is an ipu::ring_buffer (single producer, single consumer); many producer threads or
// many consumer threads take turns through a per-side mutex, so the ring itself stays SPSC.
// flush() completes pending entries as `flushed`; disconnect() makes every waiter and every later
// call fail with a clear error (shutdown).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "ipu/error.hpp"
#include "ipu/ring_buffer.hpp"

namespace ipu::runtime {

/// How an entry left its queue: consumed by the device, dropped by flush / disconnect, or its
/// step failed.
enum class entry_status : std::uint8_t { done, flushed, disconnected, failed };

constexpr std::string_view to_string(entry_status s) noexcept {
  switch (s) {
    case entry_status::done: return "done";
    case entry_status::flushed: return "flushed";
    case entry_status::disconnected: return "disconnected";
    case entry_status::failed: return "failed";
  }
  return "?";
}

/// One queued tensor: where it lives in user memory, its size, and whom to tell when it is used.
struct queue_entry {
  void* data = nullptr;
  std::size_t bytes = 0;
  std::function<void(entry_status)> on_complete;

  /// Calls the callback once (if any).
  void complete(entry_status s) {
    if (auto f = std::exchange(on_complete, nullptr)) f(s);
  }
};

enum class queue_direction : std::uint8_t { input, output };

namespace detail {
/// Spin-then-sleep wait: short waits stay cheap, long ones do not burn a shared core.
class waiter {
 public:
  void pause() {
    if (n_ < 64) {
      ++n_;
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(n_ < 256 ? 20 : 200));
      ++n_;
    }
  }

 private:
  unsigned n_ = 0;
};
}  // namespace detail

/// The queue of one anchor in one direction. Capacity slots, of which `depth()` are used.
template <std::size_t Capacity = 64>
class anchor_queue {
 public:
  static constexpr std::size_t depth_limit = Capacity;

  anchor_queue(std::string name, queue_direction direction, std::size_t tensor_bytes, std::size_t depth)
      : name_(std::move(name)), direction_(direction), tensor_bytes_(tensor_bytes), depth_(clamp_depth(depth)) {}
  anchor_queue(const anchor_queue&) = delete;
  anchor_queue& operator=(const anchor_queue&) = delete;
  ~anchor_queue() { drain(entry_status::disconnected); }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] queue_direction direction() const noexcept { return direction_; }
  [[nodiscard]] std::size_t tensor_bytes() const noexcept { return tensor_bytes_; }
  /// Entries the queue holds before enqueue waits (ring-buffer size multiplier x batch, at most Capacity).
  [[nodiscard]] std::size_t depth() const noexcept { return depth_; }
  [[nodiscard]] std::size_t size() const noexcept { return ring_.size(); }
  [[nodiscard]] bool disconnected() const noexcept { return disconnected_.load(std::memory_order_acquire); }

  /// Throws ipu::error (shape) naming the anchor, the expected and the received byte counts when
  /// `bytes` is not the anchor's tensor size, and (usage) for a null pointer.
  void check(const void* data, std::size_t bytes) const {
    if (bytes != tensor_bytes_)
      throw error(error_category::shape,
                  "anchor '" + name_ + "' expects " + std::to_string(tensor_bytes_) + " bytes but received " +
                      std::to_string(bytes),
                  where(), "enqueue one whole tensor of the anchor's type and shape");
    if (!data && bytes)
      throw error(error_category::usage, "null pointer enqueued for anchor '" + name_ + "'", where(),
                  "pass the address of the tensor's memory");
  }

  /// Adds an entry without waiting; false when the queue is full. Throws as check() does, and
  /// ipu::error (runtime) after disconnect.
  bool try_enqueue(void* data, std::size_t bytes, std::function<void(entry_status)> on_complete = {}) {
    check(data, bytes);
    std::lock_guard lock(producer_);
    throw_if_disconnected();
    if (ring_.size() >= depth_) return false;
    return ring_.try_push(queue_entry{data, bytes, std::move(on_complete)});
  }

  /// Adds an entry, waiting up to `timeout` for room. Throws ipu::recoverable_error (runtime) on
  /// timeout — the entry was not queued, retry it — and ipu::error (runtime) on disconnect.
  void enqueue(void* data, std::size_t bytes, std::function<void(entry_status)> on_complete = {},
               std::chrono::nanoseconds timeout = std::chrono::hours(24 * 365)) {
    check(data, bytes);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::lock_guard lock(producer_);
    detail::waiter w;
    queue_entry e{data, bytes, std::move(on_complete)};
    for (;;) {
      throw_if_disconnected();
      if (ring_.size() < depth_ && ring_.try_push(std::move(e))) return;
      if (std::chrono::steady_clock::now() >= deadline)
        throw recoverable_error(recovery_action::ipu_reset, error_category::runtime,
                                "timed out after " + ms(timeout) + " waiting for room in the queue of anchor '" +
                                    name_ + "' (" + std::to_string(depth_) + " entries)",
                                where(), "the device is not consuming: retry, or reset the runner");
      w.pause();
    }
  }

  /// Takes the oldest entry without waiting. Throws ipu::error (runtime) when disconnected and empty.
  std::optional<queue_entry> try_dequeue() {
    std::lock_guard lock(consumer_);
    if (auto e = ring_.try_pop()) return e;
    throw_if_disconnected();
    return std::nullopt;
  }

  /// Takes the oldest entry, waiting up to `timeout`; nullopt on timeout. Throws ipu::error
  /// (runtime) when the queue is disconnected (while waiting too) and empty.
  std::optional<queue_entry> dequeue(std::chrono::nanoseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::lock_guard lock(consumer_);
    detail::waiter w;
    for (;;) {
      if (auto e = ring_.try_pop()) return e;
      throw_if_disconnected();
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      w.pause();
    }
  }

  /// Completes every pending entry as `flushed`; returns how many.
  std::size_t flush() { return drain(entry_status::flushed); }

  /// Wakes every waiter with an error, completes pending entries as `disconnected`, and makes
  /// every later enqueue / dequeue on an empty queue throw.
  void disconnect() {
    disconnected_.store(true, std::memory_order_release);
    drain(entry_status::disconnected);
  }

 private:
  static std::size_t clamp_depth(std::size_t d) noexcept { return d == 0 ? 1 : d > Capacity ? Capacity : d; }
  static std::string ms(std::chrono::nanoseconds t) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(t).count()) + " ms";
  }
  [[nodiscard]] std::string where() const {
    return std::string(direction_ == queue_direction::input ? "input" : "output") + " queue '" + name_ + "'";
  }
  void throw_if_disconnected() const {
    if (disconnected())
      throw error(error_category::runtime, "the queue of anchor '" + name_ + "' was disconnected", where(),
                  "the runner or session is shutting down; do not enqueue after disconnect_all()");
  }
  std::size_t drain(entry_status s) {
    std::lock_guard lock(consumer_);
    std::size_t n = 0;
    while (auto e = ring_.try_pop()) {
      e->complete(s);
      ++n;
    }
    return n;
  }

  std::string name_;
  queue_direction direction_;
  std::size_t tensor_bytes_;
  std::size_t depth_;
  std::atomic<bool> disconnected_{false};
  std::mutex producer_;
  std::mutex consumer_;
  ring_buffer<queue_entry, Capacity> ring_;
};

/// The queues of a model: one input and/or output queue per anchor, by name.
template <std::size_t Capacity = 64>
class basic_queue_manager {
 public:
  using queue_type = anchor_queue<Capacity>;

  /// `depth`: entries per queue before enqueue waits (at most Capacity).
  explicit basic_queue_manager(std::size_t depth = Capacity) : depth_(depth) {}

  /// Adds the queue of an input anchor whose tensors take `tensor_bytes`. Throws ipu::error
  /// (usage) for a name added twice.
  queue_type& add_input(const std::string& name, std::size_t tensor_bytes) {
    return add(inputs_, name, queue_direction::input, tensor_bytes);
  }
  queue_type& add_output(const std::string& name, std::size_t tensor_bytes) {
    return add(outputs_, name, queue_direction::output, tensor_bytes);
  }

  /// Throws ipu::error (usage) naming the anchor and listing the known ones.
  [[nodiscard]] queue_type& input(std::string_view name) const { return find(inputs_, name, "input"); }
  [[nodiscard]] queue_type& output(std::string_view name) const { return find(outputs_, name, "output"); }
  [[nodiscard]] const std::map<std::string, std::unique_ptr<queue_type>, std::less<>>& inputs() const noexcept {
    return inputs_;
  }
  [[nodiscard]] const std::map<std::string, std::unique_ptr<queue_type>, std::less<>>& outputs() const noexcept {
    return outputs_;
  }

  /// Completes every pending entry of every queue as `flushed`; returns how many.
  std::size_t flush_all() {
    std::size_t n = 0;
    for (auto& [_, q] : inputs_) n += q->flush();
    for (auto& [_, q] : outputs_) n += q->flush();
    return n;
  }
  /// Disconnects every queue (see anchor_queue::disconnect).
  void disconnect_all() {
    for (auto& [_, q] : inputs_) q->disconnect();
    for (auto& [_, q] : outputs_) q->disconnect();
  }

 private:
  using queue_map = std::map<std::string, std::unique_ptr<queue_type>, std::less<>>;

  queue_type& add(queue_map& m, const std::string& name, queue_direction d, std::size_t bytes) {
    if (m.contains(name))
      throw error(error_category::usage,
                  std::string(d == queue_direction::input ? "input" : "output") + " anchor '" + name +
                      "' already has a queue",
                  "queue manager", "add each anchor once");
    return *m.emplace(name, std::make_unique<queue_type>(name, d, bytes, depth_)).first->second;
  }
  static queue_type& find(const queue_map& m, std::string_view name, const char* what) {
    if (auto it = m.find(name); it != m.end()) return *it->second;
    std::string known;
    for (const auto& [n, _] : m) known += (known.empty() ? "" : ", ") + n;
    throw error(error_category::usage, "no " + std::string(what) + " queue for anchor '" + std::string(name) + "'",
                "queue manager", "the " + std::string(what) + " anchors are: " + (known.empty() ? "none" : known));
  }

  std::size_t depth_;
  queue_map inputs_;
  queue_map outputs_;
};

using queue_manager = basic_queue_manager<>;

}  // namespace ipu::runtime
