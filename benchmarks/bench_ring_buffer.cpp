// ring_buffer against boost::lockfree::spsc_queue<T, capacity<N>>, in the same run:
// throughput (items per second, one producer and one consumer thread) and ping-pong round-trip
// latency (two queues, one message in flight). Threads are pinned to distinct cores.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <boost/lockfree/spsc_queue.hpp>
#include <chrono>
#include <cstdint>
#include <thread>

#include "baseline_main.hpp"
#include "ipu/ring_buffer.hpp"

namespace {

constexpr std::size_t capacity = 1024;
constexpr std::uint64_t items = 2'000'000;

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

template <class Queue>
void throughput(benchmark::State& state) {
  pin(0);
  for (auto _ : state) {
    Queue q;
    std::thread consumer([&] {
      pin(1);
      std::uint64_t v = 0, sum = 0;
      for (std::uint64_t i = 0; i < items; ++i) {
        while (!q.try_pop(v)) {
        }
        sum += v;
      }
      benchmark::DoNotOptimize(sum);
    });
    for (std::uint64_t i = 0; i < items; ++i)
      while (!q.try_push(i)) {
      }
    consumer.join();
  }
  state.counters["items_per_s"] =
      benchmark::Counter(static_cast<double>(items) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

template <class Queue>
void round_trip(benchmark::State& state) {
  pin(0);
  Queue ping, pong;
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    pin(1);
    std::uint64_t v = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      if (ping.try_pop(v))
        while (!pong.try_push(v)) {
        }
    }
  });
  std::uint64_t v = 0;
  for (auto _ : state) {
    while (!ping.try_push(1)) {
    }
    while (!pong.try_pop(v)) {
    }
  }
  stop = true;
  echo.join();
}

}  // namespace

BENCHMARK_TEMPLATE(throughput, ipu_queue)->Name("throughput/ipu_ring_buffer")->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly();
BENCHMARK_TEMPLATE(throughput, boost_queue)->Name("throughput/boost_spsc_queue")->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly();
BENCHMARK_TEMPLATE(round_trip, ipu_queue)->Name("round_trip/ipu_ring_buffer")->UseRealTime()->Repetitions(5)->ReportAggregatesOnly();
BENCHMARK_TEMPLATE(round_trip, boost_queue)->Name("round_trip/boost_spsc_queue")->UseRealTime()->Repetitions(5)->ReportAggregatesOnly();

static const int ratio_throughput =
    ipu::bench::compare("throughput/ipu_ring_buffer", "throughput/boost_spsc_queue", "items_per_s");
static const int ratio_latency = ipu::bench::compare("round_trip/ipu_ring_buffer", "round_trip/boost_spsc_queue");

int main(int argc, char** argv) { return ipu::bench::run_main(argc, argv); }
