#include "ipu/cpu/thread_pool.hpp"

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace test_thread_pool {

namespace {
using chunk_list = std::vector<std::pair<std::size_t, std::size_t>>;

chunk_list chunks_seen(ipu::thread_pool& pool, std::size_t n) {
  std::mutex m;
  chunk_list seen;
  pool.parallel_for(n, [&](std::size_t b, std::size_t e) {
    std::lock_guard lock(m);
    seen.emplace_back(b, e);
  });
  std::sort(seen.begin(), seen.end());
  return seen;
}
}  // namespace

TEST_SUITE("concurrent") {
  TEST_CASE("thread_pool: static chunks cover 0..n exactly once as documented") {
    ipu::thread_pool pool({.threads = 3});
    CHECK(pool.size() == 3);
    // 10 items over 3 threads: [0,3) [3,6) [6,10) (i*n/k).
    CHECK(chunks_seen(pool, 10) == chunk_list{{0, 3}, {3, 6}, {6, 10}});
    // Fewer items than threads: one item per chunk.
    CHECK(chunks_seen(pool, 2) == chunk_list{{0, 1}, {1, 2}});
    CHECK(chunks_seen(pool, 0).empty());
    CHECK(pool.chunk_bounds(10) == std::vector<std::size_t>{0, 3, 6, 10});
    for (std::size_t n : {1u, 7u, 64u, 1000u}) {
      auto c = chunks_seen(pool, n);
      std::size_t expect = 0;
      for (auto [b, e] : c) {
        CHECK(b == expect);
        CHECK(e > b);
        expect = e;
      }
      CHECK(expect == n);
    }
  }

  TEST_CASE("thread_pool: chunking is the same on every call (deterministic partial sums)") {
    ipu::thread_pool pool({.threads = 4});
    std::vector<float> x(10007);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1.0f / static_cast<float>(i + 1);
    auto sum = [&] {
      const auto bounds = pool.chunk_bounds(x.size());
      std::vector<float> partial(bounds.size() - 1);
      pool.parallel_for(x.size(), [&](std::size_t b, std::size_t e) {
        const auto chunk = static_cast<std::size_t>(std::upper_bound(bounds.begin(), bounds.end(), b) - bounds.begin() - 1);
        float s = 0;
        for (std::size_t i = b; i < e; ++i) s += x[i];
        partial[chunk] = s;
      });
      return std::accumulate(partial.begin(), partial.end(), 0.0f);
    };
    const float first = sum();
    for (int i = 0; i < 20; ++i) CHECK(sum() == first);  // bitwise equal, not approximately
  }

  TEST_CASE("thread_pool: work really runs on several threads") {
    ipu::thread_pool pool({.threads = 4});
    std::mutex m;
    std::set<std::thread::id> ids;
    std::atomic<int> arrived{0};
    pool.parallel_for(4, [&](std::size_t, std::size_t) {
      {
        std::lock_guard lock(m);
        ids.insert(std::this_thread::get_id());
      }
      // Every chunk waits for the others, which only terminates if all four run concurrently.
      arrived.fetch_add(1);
      while (arrived.load() < 4) std::this_thread::yield();
    });
    CHECK(ids.size() == 4);
    CHECK(ids.count(std::this_thread::get_id()) == 1);  // the caller runs one of them
  }

  TEST_CASE("thread_pool: the caller runs the chunks of a worker that has not started") {
    // With spin 0 the worker sleeps between jobs, and waking it through the kernel takes far
    // longer than these chunks: the caller claims both chunks of most jobs. A pool that gave each
    // chunk to a fixed thread would make the caller wait for the worker every time.
    ipu::thread_pool pool({.threads = 2, .spin = std::chrono::microseconds{0}});
    const auto caller = std::this_thread::get_id();
    int caller_ran_both = 0;
    for (int job = 0; job < 200; ++job) {
      std::array<std::thread::id, 2> ran{};
      std::array<std::pair<std::size_t, std::size_t>, 2> bounds{};
      pool.parallel_for(10, [&](std::size_t b, std::size_t e) {
        const std::size_t chunk = b == 0 ? 0 : 1;
        ran[chunk] = std::this_thread::get_id();
        bounds[chunk] = {b, e};
      });
      // Whoever runs them, the chunks are the same.
      CHECK(bounds[0] == std::pair<std::size_t, std::size_t>{0, 5});
      CHECK(bounds[1] == std::pair<std::size_t, std::size_t>{5, 10});
      caller_ran_both += ran[0] == caller && ran[1] == caller;
    }
    CHECK(caller_ran_both > 0);
  }

  TEST_CASE("thread_pool: the lowest failing chunk's exception propagates after all chunks finish") {
    ipu::thread_pool pool({.threads = 4});
    std::atomic<int> finished{0};
    try {
      pool.parallel_for(4, [&](std::size_t b, std::size_t) {
        finished.fetch_add(1);
        if (b >= 1) throw std::runtime_error("chunk " + std::to_string(b));
      });
      FAIL("parallel_for did not throw");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "chunk 1");
    }
    CHECK(finished.load() == 4);
    // The pool is still usable afterwards.
    std::atomic<std::size_t> total{0};
    pool.parallel_for(100, [&](std::size_t b, std::size_t e) { total.fetch_add(e - b); });
    CHECK(total.load() == 100);
  }

  TEST_CASE("thread_pool: nested calls run inline with the same chunking instead of deadlocking") {
    ipu::thread_pool pool({.threads = 3});
    std::atomic<std::size_t> total{0};
    std::mutex m;
    std::vector<chunk_list> inner(3);
    pool.parallel_for(3, [&](std::size_t b, std::size_t) {
      pool.parallel_for(9, [&](std::size_t ib, std::size_t ie) {
        total.fetch_add(ie - ib);
        std::lock_guard lock(m);
        inner[b].emplace_back(ib, ie);
      });
    });
    CHECK(total.load() == 27);
    for (const auto& c : inner) CHECK(c == chunk_list{{0, 3}, {3, 6}, {6, 9}});
  }

  TEST_CASE("thread_pool: concurrent callers from different threads take turns") {
    ipu::thread_pool pool({.threads = 2});
    std::atomic<std::size_t> total{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c)
      callers.emplace_back([&] {
        for (int r = 0; r < 50; ++r)
          pool.parallel_for(37, [&](std::size_t b, std::size_t e) { total.fetch_add(e - b); });
      });
    for (auto& t : callers) t.join();
    CHECK(total.load() == 4u * 50u * 37u);
  }

  TEST_CASE("thread_pool: one thread runs everything on the caller and the default size is the hardware") {
    ipu::thread_pool one({.threads = 1});
    CHECK(chunks_seen(one, 5) == chunk_list{{0, 5}});
    ipu::thread_pool dflt;
    CHECK(dflt.size() == std::max(1u, std::thread::hardware_concurrency()));
  }

  TEST_CASE("thread_pool: idle workers watch for the next job for `spin`, then sleep") {
    // After a job, a worker with spin 0 goes to sleep at once; one with 10 s is still watching
    // (awake) 2 s later. Either way the next job runs and the pool shuts down.
    const auto asleep_after_job = [](std::chrono::microseconds spin) {
      ipu::thread_pool pool({.threads = 2, .spin = spin});
      std::atomic<std::size_t> done{0};
      pool.parallel_for(2, [&](std::size_t b, std::size_t e) { done.fetch_add(e - b); });
      CHECK(done.load() == 2);
      // Bounded: a worker told not to watch is asleep well within this (a descheduled worker may
      // take a while to reach its wait).
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      std::size_t asleep = pool.sleeping_workers();
      while (asleep == 0 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        asleep = pool.sleeping_workers();
      }
      pool.parallel_for(2, [&](std::size_t b, std::size_t e) { done.fetch_add(e - b); });
      CHECK(done.load() == 4);
      return asleep;
    };
    CHECK(asleep_after_job(std::chrono::microseconds{0}) == 1);
    CHECK(asleep_after_job(std::chrono::seconds{10}) == 0);
  }

  TEST_CASE("thread_pool: as_parallel_for drives a kernel_context and shutdown is clean") {
    for (int round = 0; round < 20; ++round) {  // repeated construction/destruction under TSan
      ipu::thread_pool pool({.threads = 3});
      ipu::parallel_for_fn pf = pool.as_parallel_for();
      std::vector<int> out(50, 0);
      pf(out.size(), [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) out[i] = static_cast<int>(i) * 2;
      });
      for (std::size_t i = 0; i < out.size(); ++i) CHECK(out[i] == static_cast<int>(i) * 2);
    }
  }
}

}  // namespace test_thread_pool
