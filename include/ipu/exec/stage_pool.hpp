#pragma once
// Runs a grid of jobs (stage, micro-batch) on a pool of host threads, as a training step spread
// over IPUs runs: each micro-batch visits the stages in order, and each stage takes the
// micro-batches in order (what it carries from one to the next, such as gradient accumulators,
// stays in that order). The wavefront says what else must be done first:
//
// - pipelined: nothing else, so micro-batches overlap across stages; at most `max_in_flight`
//   micro-batches are between the first stage and the last (what is stashed for them is bounded);
// - serial_phased: a stage (a phase) starts only once the one before has done every micro-batch;
// - parallel_phased: phases alternate between two IPU groups, so phase k overlaps phase k - 1 (on
//   the other group) micro-batch by micro-batch, and starts only once phase k - 2 (on its own
//   group) is over.
//
// A thread takes the most downstream runnable stage, which drains the pipeline first and carries a
// micro-batch on while its data is in cache. The caller's thread is one of the pool. One claimant
// per stage at a time; the lock guards only the bookkeeping, never a job. The first job to throw
// stops the grid; its exception is rethrown once every thread is back.
#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>


namespace ipu::exec {

enum class wavefront : std::uint8_t { pipelined, serial_phased, parallel_phased };

struct stage_pool_options {
  std::size_t threads = 0;        // 0: one per core; never more than the stages
  std::size_t max_in_flight = 0;  // pipelined: micro-batches past the first stage and not through the last; 0: the stages
};

/// Runs `job(stage, micro_batch)` for every stage < `stages` and micro-batch < `micro_batches`, in
/// the order `w` allows, on up to `o.threads` threads. Returns the threads used.
template <class Job>
std::size_t run_stage_grid(std::size_t stages, std::size_t micro_batches, wavefront w, const stage_pool_options& o,
                           Job&& job) {
  if (stages == 0 || micro_batches == 0) return 0;
  const std::size_t cores = std::max<std::size_t>(1, std::thread::hardware_concurrency());
  const std::size_t threads = std::min(o.threads == 0 ? cores : o.threads, stages);
  const std::size_t in_flight = o.max_in_flight == 0 ? stages : o.max_in_flight;
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::size_t> done(stages, 0);  // micro-batches each stage has finished
  std::vector<bool> claimed(stages, false);
  std::size_t remaining = stages * micro_batches;
  std::exception_ptr failure;
  auto runnable = [&](std::size_t k) {
    const auto j = done[k];
    if (claimed[k] || j == micro_batches) return false;
    switch (w) {
      case wavefront::pipelined: return k == 0 ? j < done[stages - 1] + in_flight : j < done[k - 1];
      case wavefront::serial_phased: return k == 0 || done[k - 1] == micro_batches;
      case wavefront::parallel_phased: return (k == 0 || j < done[k - 1]) && (k < 2 || done[k - 2] == micro_batches);
    }
    return false;
  };
  auto worker = [&] {
    std::unique_lock lock(m);
    for (;;) {
      if (failure || remaining == 0) return;
      std::size_t k = stages;
      for (std::size_t s = stages; s-- > 0;)
        if (runnable(s)) {
          k = s;
          break;
        }
      if (k == stages) {
        cv.wait(lock);
        continue;
      }
      claimed[k] = true;
      const auto j = done[k];
      lock.unlock();
      try {
        job(k, j);
      } catch (...) {
        lock.lock();
        if (!failure) failure = std::current_exception();
        claimed[k] = false;
        cv.notify_all();
        return;
      }
      lock.lock();
      claimed[k] = false;
      ++done[k];
      --remaining;
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  try {
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  } catch (...) {
    {
      std::lock_guard lock(m);
      failure = std::current_exception();
    }
    cv.notify_all();
    for (auto& t : pool) t.join();
    throw;
  }
  worker();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  return threads;
}

}  // namespace ipu::exec
