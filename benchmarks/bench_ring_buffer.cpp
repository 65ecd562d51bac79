// ring_buffer against boost::lockfree::spsc_queue<T, capacity<N>>, in the same run:
// throughput (items per second, one producer and one consumer thread) and ping-pong round-trip
// latency (two queues, one message in flight). Threads are pinned to distinct cores.
//
// Two queues this fast are sensitive to the machine's state (on a VM, where the host places the
// two virtual CPUs changes both results several-fold from one second to the next). So each
// benchmark iteration is one round that measures both queues back to back, in alternating order,
// and the comparison is the median over rounds of the per-round ratio; the medians of each queue's
// own figures are reported beside it. Timing starts once both threads are pinned and running.
// Goal (issue 5): throughput ratio >= 1 and round-trip ratio <= 1.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <boost/lockfree/spsc_queue.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "baseline_main.hpp"
#include "ipu/ring_buffer.hpp"

namespace {

constexpr std::size_t capacity = 1024;
constexpr std::uint64_t items = 2'000'000;     // per throughput run
constexpr std::uint64_t round_trips = 100'000;  // per latency run
constexpr int rounds = 21;

void pin(int cpu) {
  const int n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 1) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<unsigned>(cpu % n), &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

struct ipu_queue {
  ipu::ring_buffer<std::uint64_t, capacity> q;
  bool try_push(std::uint64_t v) { return q.try_push(v); }
  bool try_pop(std::uint64_t& v) { return q.try_pop(v); }
};

struct boost_queue {
  boost::lockfree::spsc_queue<std::uint64_t, boost::lockfree::capacity<capacity>> q;
  bool try_push(std::uint64_t v) { return q.push(v); }
  bool try_pop(std::uint64_t& v) { return q.pop(v); }
};

using clock_type = std::chrono::steady_clock;
using ipu::bench::median;

/// Runs `main_side` on this thread (pinned to CPU 0) and `other_side` on a new thread (CPU 1);
/// returns the seconds from the moment both are running to the moment both are done.
template <class Main, class Other>
double timed_pair(Main&& main_side, Other&& other_side) {
  std::atomic<int> ready{0};
  pin(0);
  std::thread other([&] {
    pin(1);
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    other_side();
  });
  ready.fetch_add(1);
  while (ready.load() < 2) {
  }
  const auto t0 = clock_type::now();
  main_side();
  other.join();
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// The sides capture raw pointers by value and keep their counters local: a variable on the main
// thread's stack, written by one side and read by the other, would put a shared line in the loop.

/// Items per second through one queue.
template <class Queue>
double throughput_once() {
  const auto owner = std::make_unique<Queue>();
  Queue* q = owner.get();
  std::uint64_t received = 0;
  const double s = timed_pair(
      [q] {
        for (std::uint64_t i = 0; i < items; ++i)
          while (!q->try_push(i)) {
          }
      },
      [q, &received] {
        std::uint64_t v = 0, sum = 0;
        for (std::uint64_t i = 0; i < items; ++i) {
          while (!q->try_pop(v)) {
          }
          sum += v;
        }
        received = sum;
      });
  if (received != items * (items - 1) / 2) std::abort();  // every item arrived exactly once
  return static_cast<double>(items) / s;
}

/// Nanoseconds per round trip: ping, echoed back through the second queue.
template <class Queue>
double round_trip_once() {
  const auto ping_owner = std::make_unique<Queue>();
  const auto pong_owner = std::make_unique<Queue>();
  Queue* ping = ping_owner.get();
  Queue* pong = pong_owner.get();
  const double s = timed_pair(
      [ping, pong] {
        std::uint64_t v = 0;
        for (std::uint64_t i = 0; i < round_trips; ++i) {
          while (!ping->try_push(i)) {
          }
          while (!pong->try_pop(v)) {
          }
          if (v != i) std::abort();
        }
      },
      [ping, pong] {
        std::uint64_t v = 0;
        for (std::uint64_t i = 0; i < round_trips; ++i) {
          while (!ping->try_pop(v)) {
          }
          while (!pong->try_push(v)) {
          }
        }
      });
  return s * 1e9 / static_cast<double>(round_trips);
}

/// One round per iteration: both queues, in alternating order; the ratio is ours / theirs.
template <double (*Ours)(), double (*Theirs)()>
void compare_rounds(benchmark::State& state, const char* unit, double scale) {
  std::vector<double> ours, theirs, ratio;
  bool ours_first = true;
  for (auto _ : state) {
    double a = 0, b = 0;
    if (ours_first) {
      a = Ours();
      b = Theirs();
    } else {
      b = Theirs();
      a = Ours();
    }
    ours_first = !ours_first;
    ours.push_back(a);
    theirs.push_back(b);
    ratio.push_back(a / b);
    if (std::getenv("IPU_BENCH_VERBOSE")) std::printf("round: ipu %.3g boost %.3g\n", a, b);
  }
  state.counters[std::string("ipu_") + unit] = median(ours) * scale;
  state.counters[std::string("boost_") + unit] = median(theirs) * scale;
  state.counters["ratio"] = median(ratio);
  state.counters["ratio_min"] = *std::min_element(ratio.begin(), ratio.end());
  state.counters["ratio_max"] = *std::max_element(ratio.begin(), ratio.end());
}

void throughput(benchmark::State& state) {
  compare_rounds<&throughput_once<ipu_queue>, &throughput_once<boost_queue>>(state, "Mitems_per_s", 1e-6);
  state.SetLabel("ratio = ipu / boost throughput, median of rounds (goal >= 1)");
}

void round_trip(benchmark::State& state) {
  compare_rounds<&round_trip_once<ipu_queue>, &round_trip_once<boost_queue>>(state, "ns", 1.0);
  state.SetLabel("ratio = ipu / boost round-trip time, median of rounds (goal <= 1)");
}

}  // namespace

BENCHMARK(throughput)->Name("ring_buffer_vs_boost/throughput")->Iterations(rounds)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(round_trip)->Name("ring_buffer_vs_boost/round_trip")->Iterations(rounds)->UseRealTime()->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) { return ipu::bench::run_main(argc, argv); }
