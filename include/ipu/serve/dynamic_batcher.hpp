#pragma once
// Dynamic batching: requests of any number of rows are stacked along the batch (leading) dimension
// into runs of the model's compiled batch, and each run's output rows are split back to the
// requests they came from.
//
//   dynamic_batcher b(layout, config, [&](inputs, outputs) { ... run one compiled batch ... });
//   auto f = b.submit({x_bytes}, rows);   // x_bytes must stay alive until f is ready
//   std::vector<std::vector<std::byte>> outputs = f.get();   // per output, rows x row bytes
//
// A run starts when the rows waiting reach `dispatch_rows` (or the compiled batch), or when the
// oldest request has waited `max_delay`; without dynamic batching every run holds one request's
// rows only. A request larger than the compiled batch is run in several pieces (possibly by several
// instances at once, each writing its own rows). A partly filled run is padded by repeating its last
// row, and the padding's outputs are dropped. `instances` threads run batches at once.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "ipu/error.hpp"

namespace ipu::serve {

struct batch_layout {
  std::vector<std::size_t> input_row_bytes, output_row_bytes;
  std::uint64_t batch = 1;  // rows per run (the compiled batch)
};

struct batcher_config {
  bool dynamic = false;
  std::uint64_t dispatch_rows = 0;  // 0: the compiled batch
  std::chrono::microseconds max_delay{0};
  std::size_t instances = 1;
};

/// Runs one compiled batch: each input and output span holds layout.batch rows.
using batch_function = std::function<void(const std::vector<std::span<const std::byte>>& inputs,
                                          const std::vector<std::span<std::byte>>& outputs)>;
using batch_outputs = std::vector<std::vector<std::byte>>;

/// A Prometheus-style histogram: observations counted per bucket of upper bounds (the last
/// bucket, +Inf, implicit), their sum and count.
struct histogram {
  std::vector<double> bounds;         // ascending upper bounds
  std::vector<std::uint64_t> counts;  // per bucket, not cumulative; bounds.size() + 1 (+Inf)
  double sum = 0;
  std::uint64_t count = 0;

  histogram() = default;
  explicit histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void observe(double v) {
    const auto k = static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin());
    ++counts[k];  // v <= bounds[k], Prometheus' "le"
    sum += v;
    ++count;
  }
};

/// Latency buckets in seconds: 100 us to 10 s.
inline std::vector<double> latency_buckets() {
  return {1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}
/// Batch size buckets: the powers of two below the compiled batch, then the batch itself.
inline std::vector<double> batch_size_buckets(std::uint64_t batch) {
  std::vector<double> b;
  for (std::uint64_t p = 1; p < batch; p *= 2) b.push_back(static_cast<double>(p));
  b.push_back(static_cast<double>(batch));
  return b;
}

/// Counters since construction (read while serving: each is consistent on its own).
struct batcher_stats {
  std::uint64_t requests = 0, runs = 0, rows = 0, failed_runs = 0;
  std::uint64_t timed_out = 0;  // requests that left the queue unrun at their timeout (infer())
  std::uint64_t queue_ns = 0, compute_ns = 0;  // summed over requests (queue) and runs (compute)
  histogram request_seconds;  // per request answered: queued until its last rows ran
  histogram queue_seconds;    // per request: queued until its first rows started
  histogram compute_seconds;  // per run
  histogram batch_rows;       // per run: the rows it held (padding excluded)
};

class dynamic_batcher {
 public:
  dynamic_batcher(batch_layout layout, batcher_config config, batch_function run)
      : layout_(std::move(layout)), config_(config), run_(std::move(run)) {
    if (layout_.batch == 0) throw error(error_category::usage, "a compiled batch of 0 rows", "dynamic batcher");
    if (config_.instances == 0) throw error(error_category::usage, "0 instances", "dynamic batcher", "use at least 1");
    if (config_.dispatch_rows == 0 || config_.dispatch_rows > layout_.batch) config_.dispatch_rows = layout_.batch;
    stats_.request_seconds = stats_.queue_seconds = stats_.compute_seconds = histogram(latency_buckets());
    stats_.batch_rows = histogram(batch_size_buckets(layout_.batch));
    for (std::size_t i = 0; i < config_.instances; ++i) workers_.emplace_back([this] { work(); });
  }
  dynamic_batcher(const dynamic_batcher&) = delete;
  dynamic_batcher& operator=(const dynamic_batcher&) = delete;

  /// Finishes the runs under way; requests still waiting fail with an ipu::error (runtime).
  ~dynamic_batcher() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    ready_.notify_all();
    for (auto& w : workers_) w.join();
    for (auto& p : queue_)
      if (!p->failed.exchange(true))
        p->promise.set_exception(std::make_exception_ptr(
            error(error_category::runtime, "the model was unloaded before the request ran", "dynamic batcher", "send it again")));
  }

  /// Queues a request of `rows` rows: one span per input of rows x row bytes, alive until the
  /// future is ready.
  std::future<batch_outputs> submit(std::vector<std::span<const std::byte>> inputs, std::uint64_t rows) {
    return enqueue(std::move(inputs), rows, nullptr);
  }

  /// Submits a request and waits for its outputs. With a timeout (above 0), a request none of
  /// whose rows has started when it expires leaves the queue unrun: nullopt. Once rows run they
  /// read the request's inputs, so it is waited for to the end whatever the timeout.
  std::optional<batch_outputs> infer(std::vector<std::span<const std::byte>> inputs, std::uint64_t rows,
                                     std::chrono::microseconds timeout) {
    std::shared_ptr<pending> p;
    auto f = enqueue(std::move(inputs), rows, &p);
    if (timeout.count() <= 0 || f.wait_for(timeout) == std::future_status::ready) return f.get();
    {
      std::lock_guard lock(mutex_);
      if (p->taken == 0)
        if (const auto it = std::find(queue_.begin(), queue_.end(), p); it != queue_.end()) {
          queue_.erase(it);
          waiting_rows_ -= p->rows;
          ++stats_.timed_out;
          return std::nullopt;
        }
    }
    return f.get();
  }

  [[nodiscard]] batcher_stats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  [[nodiscard]] const batch_layout& layout() const noexcept { return layout_; }
  [[nodiscard]] const batcher_config& config() const noexcept { return config_; }

 private:
  struct pending {
    std::vector<const std::byte*> in;
    std::uint64_t rows = 0, taken = 0;
    std::atomic<std::uint64_t> remaining{0};
    std::atomic<bool> failed{false};
    batch_outputs out;
    std::promise<batch_outputs> promise;
    std::chrono::steady_clock::time_point arrived;
  };
  struct slice {
    std::shared_ptr<pending> request;
    std::uint64_t offset = 0, rows = 0;
  };

  /// submit(), also handing back the queued request (for infer()'s timeout).
  std::future<batch_outputs> enqueue(std::vector<std::span<const std::byte>> inputs, std::uint64_t rows,
                                     std::shared_ptr<pending>* queued) {
    if (inputs.size() != layout_.input_row_bytes.size())
      throw error(error_category::internal, "wrong number of inputs", "dynamic batcher");
    auto p = std::make_shared<pending>();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].size() != rows * layout_.input_row_bytes[i])
        throw error(error_category::internal, "an input's bytes are not its rows", "dynamic batcher");
      p->in.push_back(inputs[i].data());
    }
    p->rows = rows;
    p->remaining = rows;
    for (auto b : layout_.output_row_bytes) p->out.emplace_back(rows * b);
    p->arrived = std::chrono::steady_clock::now();
    auto f = p->promise.get_future();
    if (queued) *queued = p;
    if (rows == 0) {
      p->promise.set_value(std::move(p->out));
      return f;
    }
    {
      std::lock_guard lock(mutex_);
      if (stop_) throw error(error_category::runtime, "the batcher is shutting down", "dynamic batcher");
      queue_.push_back(std::move(p));
      waiting_rows_ += rows;
      ++stats_.requests;
    }
    ready_.notify_one();
    return f;
  }

  void work() {
    std::vector<std::vector<std::byte>> staged_in, staged_out;
    for (auto b : layout_.input_row_bytes) staged_in.emplace_back(layout_.batch * b);
    for (auto b : layout_.output_row_bytes) staged_out.emplace_back(layout_.batch * b);
    for (;;) {
      std::vector<slice> batch;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        if (config_.dynamic && config_.max_delay.count() > 0) {
          const auto deadline = queue_.front()->arrived + config_.max_delay;
          ready_.wait_until(lock, deadline, [&] { return stop_ || waiting_rows_ >= config_.dispatch_rows; });
          if (stop_) return;
          if (queue_.empty()) continue;  // another instance took them
        }
        take(batch);
        if (!queue_.empty()) ready_.notify_one();
      }
      if (!batch.empty()) run(batch, staged_in, staged_out);
    }
  }

  /// Moves up to a batch of rows from the queue's front into `batch` (under the lock).
  void take(std::vector<slice>& batch) {
    const auto now = std::chrono::steady_clock::now();
    std::uint64_t room = layout_.batch;
    while (room > 0 && !queue_.empty()) {
      auto& p = queue_.front();
      const auto n = std::min(room, p->rows - p->taken);
      if (p->taken == 0) {
        const auto ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - p->arrived).count());
        stats_.queue_ns += ns;
        stats_.queue_seconds.observe(static_cast<double>(ns) * 1e-9);
      }
      batch.push_back({p, p->taken, n});
      p->taken += n;
      room -= n;
      waiting_rows_ -= n;
      if (p->taken == p->rows) queue_.pop_front();
      if (!config_.dynamic) break;  // a run holds one request's rows
    }
  }

  void run(const std::vector<slice>& batch, std::vector<std::vector<std::byte>>& in, std::vector<std::vector<std::byte>>& out) {
    const auto start = std::chrono::steady_clock::now();
    std::uint64_t rows = 0;
    for (const auto& s : batch) {
      for (std::size_t i = 0; i < in.size(); ++i) {
        const auto rb = layout_.input_row_bytes[i];
        if (s.rows != 0 && rb != 0) std::memcpy(in[i].data() + rows * rb, s.request->in[i] + s.offset * rb, s.rows * rb);
      }
      rows += s.rows;
    }
    for (std::size_t i = 0; i < in.size(); ++i) {
      const auto rb = layout_.input_row_bytes[i];
      for (auto r = rows; r < layout_.batch; ++r)
        if (rb) std::memcpy(in[i].data() + r * rb, in[i].data() + (rows - 1) * rb, rb);
    }
    std::vector<std::span<const std::byte>> ins(in.begin(), in.end());
    std::vector<std::span<std::byte>> outs(out.begin(), out.end());
    std::exception_ptr failure;
    try {
      run_(ins, outs);
    } catch (...) {
      failure = std::current_exception();
    }
    const auto end = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mutex_);
      ++stats_.runs;
      stats_.rows += rows;
      if (failure) ++stats_.failed_runs;
      const auto ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
      stats_.compute_ns += ns;
      stats_.compute_seconds.observe(static_cast<double>(ns) * 1e-9);
      stats_.batch_rows.observe(static_cast<double>(rows));
    }
    auto answered = [&](const pending& p) {
      std::lock_guard lock(mutex_);
      stats_.request_seconds.observe(std::chrono::duration<double>(end - p.arrived).count());
    };
    std::uint64_t at = 0;
    for (const auto& s : batch) {
      auto& p = *s.request;
      if (failure) {
        if (!p.failed.exchange(true)) {
          answered(p);
          p.promise.set_exception(failure);
        }
        continue;
      }
      for (std::size_t k = 0; k < out.size(); ++k) {
        const auto rb = layout_.output_row_bytes[k];
        if (s.rows != 0 && rb != 0) std::memcpy(p.out[k].data() + s.offset * rb, out[k].data() + at * rb, s.rows * rb);
      }
      at += s.rows;
      // The last piece to finish answers; a request that failed elsewhere never reaches 0.
      if (p.remaining.fetch_sub(s.rows, std::memory_order_acq_rel) == s.rows && !p.failed.load()) {
        answered(p);
        p.promise.set_value(std::move(p.out));
      }
    }
  }

  batch_layout layout_;
  batcher_config config_;
  batch_function run_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::shared_ptr<pending>> queue_;
  std::uint64_t waiting_rows_ = 0;
  bool stop_ = false;
  batcher_stats stats_;
  std::vector<std::thread> workers_;
};

}  // namespace ipu::serve
