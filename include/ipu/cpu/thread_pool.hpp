#pragma once
// A fixed-size pool of worker threads with a statically chunked parallel_for.
//
// Host kernels get their parallelism through `ipu::parallel_for_fn` (ops/kernel.hpp). Results must
// be deterministic for a given thread count, so [0, n) is always cut into the same chunks — chunk
// i of k is [i*n/k, (i+1)*n/k) with k = min(threads, n) — whoever runs them. The calling thread
// runs chunks too, so a pool of N threads starts N-1 workers.
//
// Which thread runs which chunk is decided as they come: each thread, the caller included, claims
// the next unclaimed chunk until none is left. On a virtual machine a worker is now and then not
// running when a job starts (its vCPU is descheduled, or busy with another process); the caller
// then runs that worker's chunk itself instead of waiting for it, so the job takes at worst about
// as long as on one thread.
//
// A model's ops call parallel_for back to back, a few microseconds apart. Waking a sleeping thread
// through the kernel takes tens of microseconds on a virtual machine, as long as a small op's whole
// work, so a worker that finishes a job watches for the next one for a short while
// (`thread_pool_options::spin`) before it sleeps, and the caller watches for the workers' last chunk the
// same way. Only sleeping threads are woken through the kernel.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "ipu/error.hpp"
#include "ipu/ops/kernel.hpp"

namespace ipu {

struct thread_pool_options {
  /// Threads that run chunks, the caller included; 0 means std::thread::hardware_concurrency().
  std::size_t threads = 0;
  /// How long an idle worker keeps watching for the next job before it sleeps, and the caller for
  /// the last chunk before it sleeps; 0 sleeps at once. Watching costs a core for that long after
  /// each job; sleeping costs a wake-up through the kernel on the next one.
  std::chrono::microseconds spin{100};
};

class thread_pool {
 public:
  explicit thread_pool(thread_pool_options options = {})
      : threads_(resolve(options.threads)), spin_(std::max(options.spin, std::chrono::microseconds{0})) {
    workers_.reserve(threads_ - 1);
    try {
      for (std::size_t w = 1; w < threads_; ++w) workers_.emplace_back([this] { work(); });
    } catch (...) {
      shutdown();
      throw error(error_category::runtime,
                  "could not start " + std::to_string(threads_ - 1) + " worker threads", "thread_pool",
                  "ask for fewer threads");
    }
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  /// Joins the workers; a parallel_for still running on another thread must have returned first.
  ~thread_pool() { shutdown(); }

  [[nodiscard]] std::size_t size() const noexcept { return threads_; }

  /// Workers asleep now, waiting to be woken through the kernel (the others run a chunk or watch
  /// for the next job).
  [[nodiscard]] std::size_t sleeping_workers() {
    std::lock_guard lock(mutex_);
    return sleeping_;
  }

  /// The chunk boundaries parallel_for uses for `n` items: chunks()+1 ascending offsets.
  [[nodiscard]] std::vector<std::size_t> chunk_bounds(std::size_t n) const {
    const std::size_t k = std::min(threads_, n);
    std::vector<std::size_t> b(k + 1);
    for (std::size_t i = 0; i <= k; ++i) b[i] = bound(i, k, n);
    return b;
  }

  /// Runs body(begin, end) over the static chunks of [0, n) and waits for all of them. If chunks
  /// throw, every chunk still finishes and the exception of the lowest-numbered failing chunk is
  /// rethrown. A nested call (from inside a chunk) runs its chunks in order on the calling
  /// thread: same boundaries, no deadlock. Calls from unrelated threads take turns.
  void parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& body) {
    if (n == 0) return;
    const std::size_t k = std::min(threads_, n);
    if (k == 1) {
      body(0, n);
      return;
    }
    if (active_pool == this) {
      run_inline(n, k, body);
      return;
    }
    std::lock_guard dispatch(dispatch_);  // one job at a time uses the workers
    std::vector<std::exception_ptr> errors(k);
    bool sleepers = false;
    std::size_t generation = 0;
    {
      std::lock_guard lock(mutex_);
      job_ = job{n, k, &body, &errors};
      pending_.store(k, std::memory_order_relaxed);
      generation = generation_.load(std::memory_order_relaxed) + 1;
      claims_.store(generation << claim_bits, std::memory_order_relaxed);
      generation_.store(generation, std::memory_order_release);
      sleepers = sleeping_ > 0;
    }
    if (sleepers) wake_.notify_all();
    run_claimed_chunks(generation, job{n, k, &body, &errors});
    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    {
      std::lock_guard lock(mutex_);
      job_ = {};
    }
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  /// This pool as the `parallel_for` of a kernel_context (the pool must outlive it).
  [[nodiscard]] parallel_for_fn as_parallel_for() {
    return [this](std::size_t n, const std::function<void(std::size_t, std::size_t)>& body) { parallel_for(n, body); };
  }

 private:
  struct job {
    std::size_t n = 0, chunks = 0;
    const std::function<void(std::size_t, std::size_t)>* body = nullptr;
    std::vector<std::exception_ptr>* errors = nullptr;
  };

  // claims_ holds the job's generation above claim_bits and the next unclaimed chunk below them,
  // so that a thread still holding an earlier job cannot claim a chunk of a later one.
  static constexpr unsigned claim_bits = 16;
  static constexpr std::size_t max_threads = std::size_t{1} << claim_bits;

  static std::size_t resolve(std::size_t threads) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    if (threads >= max_threads)
      throw error(error_category::runtime, std::to_string(threads) + " threads asked of a thread pool", "thread_pool",
                  "ask for fewer than " + std::to_string(max_threads) + " threads");
    return threads;
  }

  /// Claims and runs chunks of job `generation` until none is left unclaimed, or at once returns
  /// if another job has started since.
  void run_claimed_chunks(std::size_t generation, const job& j) {
    const std::size_t mine = generation << claim_bits;
    std::size_t claim = claims_.load(std::memory_order_relaxed);
    for (;;) {
      if ((claim & ~(max_threads - 1)) != mine || (claim & (max_threads - 1)) >= j.chunks) return;
      if (!claims_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel, std::memory_order_relaxed))
        continue;
      run_chunk(claim & (max_threads - 1), j.n, j.chunks, *j.body, *j.errors);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // Under the mutex, so that a caller between its test and its wait cannot miss it.
        std::lock_guard lock(mutex_);
        done_.notify_one();
      }
      claim = claims_.load(std::memory_order_relaxed);
    }
  }
  static std::size_t bound(std::size_t i, std::size_t k, std::size_t n) noexcept {
    // i*n/k without overflowing for huge n.
    return (n / k) * i + (n % k) * i / k;
  }

  void run_chunk(std::size_t i, std::size_t n, std::size_t k, const std::function<void(std::size_t, std::size_t)>& body,
                 std::vector<std::exception_ptr>& errors) {
    thread_pool* outer = active_pool;
    active_pool = this;
    try {
      body(bound(i, k, n), bound(i + 1, k, n));
    } catch (...) {
      errors[i] = std::current_exception();
    }
    active_pool = outer;
  }

  void run_inline(std::size_t n, std::size_t k, const std::function<void(std::size_t, std::size_t)>& body) {
    std::vector<std::exception_ptr> errors(k);
    for (std::size_t i = 0; i < k; ++i) run_chunk(i, n, k, body, errors);
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  /// Polls `ready` for up to spin_; whether it became true.
  template <class Ready>
  bool spin_until(Ready ready) const {
    if (ready()) return true;
    if (spin_.count() == 0) return false;
    const auto until = std::chrono::steady_clock::now() + spin_;
    for (;;) {
      for (int i = 0; i < 64; ++i) {
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#endif
        if (ready()) return true;
      }
      if (std::chrono::steady_clock::now() >= until) return false;
    }
  }

  void work() {
    std::size_t seen = 0;
    for (;;) {
      spin_until([&] {
        return stop_.load(std::memory_order_relaxed) || generation_.load(std::memory_order_acquire) != seen;
      });
      job j;
      {
        std::unique_lock lock(mutex_);
        ++sleeping_;
        wake_.wait(lock, [&] { return stop_.load(std::memory_order_relaxed) || generation_.load(std::memory_order_relaxed) != seen; });
        --sleeping_;
        if (stop_.load(std::memory_order_relaxed)) return;
        seen = generation_.load(std::memory_order_relaxed);
        j = job_;
      }
      if (j.body) run_claimed_chunks(seen, j);
    }
  }

  void shutdown() noexcept {
    {
      std::lock_guard lock(mutex_);
      stop_.store(true, std::memory_order_relaxed);
    }
    wake_.notify_all();
    for (auto& t : workers_)
      if (t.joinable()) t.join();
    workers_.clear();
  }

  static inline thread_local thread_pool* active_pool = nullptr;

  std::size_t threads_;
  std::chrono::microseconds spin_;
  std::vector<std::thread> workers_;
  std::mutex dispatch_;
  std::mutex mutex_;  // guards job_ and sleeping_; generation_ and stop_ change under it too
  std::condition_variable wake_, done_;
  job job_;
  std::size_t sleeping_ = 0;                  // workers waiting on wake_
  std::atomic<std::size_t> pending_{0};       // chunks of the current job not finished
  std::atomic<std::size_t> generation_{0};    // jobs started
  std::atomic<std::size_t> claims_{0};        // the current job's generation and next chunk
  std::atomic<bool> stop_{false};
};

}  // namespace ipu
