#pragma once
// What the executor did in one step, twice over: in simulated IPU cycles (the executable's
// predictions laid out on the schedule) and in host time (steady_clock, as it really ran on the
// host's threads).
//
// Simulated time: each IPU worker keeps a cycle clock that advances by the predicted cycles of
// every step it runs; a worker that waits for data (a pipeline stage for its input, a phase for
// the previous round) starts no earlier than the data is ready. Host time is measured from the
// start of the step.
//
// `write_chrome_trace` exports both as Chrome-trace JSON (chrome://tracing, Perfetto): per
// replica, a "simulated" process with one track per IPU and a "host" process with one track per
// worker thread. `chrome_trace_writer` is the library's one writer of that format.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/graph/graph.hpp"
#include "ipu/sched/executable.hpp"

namespace ipu {

inline constexpr std::uint32_t no_stage = static_cast<std::uint32_t>(-1);

struct timeline_event {
  step_kind kind = step_kind::compute;
  std::uint32_t replica = 0;
  std::uint32_t ipu = 0;
  std::uint32_t worker = 0;          // host worker thread within the replica
  std::uint32_t stage = no_stage;    // compute: the stage run
  std::int64_t phase = -1;
  std::uint64_t micro_batch = 0;
  op_id op = no_op;                  // compute: the op (no_op when the event covers a whole stage)
  tensor_id tensor = no_tensor;      // streams, copies and transfers
  std::uint32_t peer = 0;            // ipu_copy: the destination IPU
  std::uint64_t sim_begin = 0;       // cycles since the start of the step
  std::uint64_t sim_cycles = 0;
  std::int64_t host_begin_ns = 0;    // nanoseconds since the start of the step
  std::int64_t host_end_ns = 0;

  [[nodiscard]] constexpr std::uint64_t sim_end() const noexcept { return sim_begin + sim_cycles; }
};

/// How much the executor records.
enum class timeline_detail : std::uint8_t {
  none,    // nothing
  stages,  // one event per stage run, stream and transfer
  ops,     // one event per op inside each stage run, plus streams and transfers
};

class timeline {
 public:
  timeline() = default;
  explicit timeline(std::uint64_t clock_hz) : clock_hz_(clock_hz) {}

  /// Events ordered by replica, worker and host start time.
  [[nodiscard]] const std::vector<timeline_event>& events() const noexcept { return events_; }
  [[nodiscard]] bool empty() const noexcept { return events_.empty(); }
  /// The device clock the simulated cycles count (0 for the host CPU device: no simulated time).
  [[nodiscard]] std::uint64_t clock_hz() const noexcept { return clock_hz_; }

  /// The simulated length of the step: the latest end of any event.
  [[nodiscard]] std::uint64_t simulated_cycles() const noexcept {
    std::uint64_t end = 0;
    for (const auto& e : events_) end = std::max(end, e.sim_end());
    return end;
  }
  [[nodiscard]] double simulated_seconds() const noexcept {
    return clock_hz_ ? static_cast<double>(simulated_cycles()) / static_cast<double>(clock_hz_) : 0.0;
  }
  /// The host time from the first event's start to the last one's end.
  [[nodiscard]] std::chrono::nanoseconds host_duration() const noexcept {
    if (events_.empty()) return {};
    std::int64_t lo = events_.front().host_begin_ns, hi = 0;
    for (const auto& e : events_) {
      lo = std::min(lo, e.host_begin_ns);
      hi = std::max(hi, e.host_end_ns);
    }
    return std::chrono::nanoseconds(hi - lo);
  }

  /// Adds a worker's events (the executor merges per-worker buffers after a step).
  void append(const std::vector<timeline_event>& events) { events_.insert(events_.end(), events.begin(), events.end()); }
  void sort() {
    std::stable_sort(events_.begin(), events_.end(), [](const timeline_event& a, const timeline_event& b) {
      if (a.replica != b.replica) return a.replica < b.replica;
      if (a.worker != b.worker) return a.worker < b.worker;
      return a.host_begin_ns < b.host_begin_ns;
    });
  }
  void clear() noexcept { events_.clear(); }

 private:
  std::uint64_t clock_hz_ = 0;
  std::vector<timeline_event> events_;
};

namespace detail::trace {
inline void write_json_string(std::ostream& os, std::string_view s) {
  os << '"';
  for (char c : s) {
    switch (c) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\t': os << "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char hex[] = "0123456789abcdef";
          os << "\\u00" << hex[(c >> 4) & 0xf] << hex[c & 0xf];
        } else {
          os << c;
        }
    }
  }
  os << '"';
}

inline std::string event_name(const timeline_event& e, const graph& g) {
  if (e.kind == step_kind::compute) {
    if (e.op != no_op && e.op < g.num_ops()) {
      const auto& op = g.op(e.op);
      return op.name.empty() ? op.type : op.type + " " + op.name;
    }
    return "stage " + std::to_string(e.stage);
  }
  std::string s(to_string(e.kind));
  if (e.tensor != no_tensor && e.tensor < g.num_tensors()) s += " " + g.tensor(e.tensor).name;
  return s;
}

/// Microseconds rounded to whole nanoseconds.
inline std::int64_t round_ns(double us) { return static_cast<std::int64_t>(us * 1000.0 + (us >= 0 ? 0.5 : -0.5)); }

/// `ns` nanoseconds written as microseconds with nanosecond resolution, as Chrome's trace format wants.
inline void write_ns_as_us(std::ostream& os, std::int64_t ns) {
  if (ns < 0) os << '-';
  const auto a = ns < 0 ? -ns : ns;
  os << a / 1000 << '.';
  const auto frac = a % 1000;
  os << static_cast<char>('0' + frac / 100) << static_cast<char>('0' + frac / 10 % 10) << static_cast<char>('0' + frac % 10);
}

inline void write_us(std::ostream& os, double us) { write_ns_as_us(os, round_ns(us)); }
}  // namespace detail::trace

/// The one Chrome-trace JSON writer of the library (chrome://tracing, Perfetto): the executor's
/// recorded timelines, the predicted inference and training steps (exec/plan_report.hpp). Names are
/// escaped; `args` is a JSON object's members, written as given (numbers only, by its callers).
class chrome_trace_writer {
 public:
  explicit chrome_trace_writer(std::ostream& os) : os_(&os) { *os_ << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":["; }
  chrome_trace_writer(const chrome_trace_writer&) = delete;
  chrome_trace_writer& operator=(const chrome_trace_writer&) = delete;

  void process_name(std::uint32_t pid, std::string_view name) {
    begin("M", "process_name", pid);
    *os_ << ",\"args\":{\"name\":";
    detail::trace::write_json_string(*os_, name);
    *os_ << "}}";
  }
  void thread_name(std::uint32_t pid, std::uint32_t tid, std::string_view name) {
    begin("M", "thread_name", pid);
    *os_ << ",\"tid\":" << tid << ",\"args\":{\"name\":";
    detail::trace::write_json_string(*os_, name);
    *os_ << "}}";
  }
  /// A slice ("X") of `dur_us` from `ts_us` on track (pid, tid).
  void complete(std::string_view cat, std::string_view name, std::uint32_t pid, std::uint32_t tid, double ts_us,
                double dur_us, std::string_view args) {
    begin("X", name, pid);
    *os_ << ",\"cat\":";
    detail::trace::write_json_string(*os_, cat);
    *os_ << ",\"tid\":" << tid;
    // The end rounded as the start is, so a slice starting where another ends never overlaps it.
    const auto begin_ns = detail::trace::round_ns(ts_us), end_ns = detail::trace::round_ns(ts_us + dur_us);
    *os_ << ",\"ts\":";
    detail::trace::write_ns_as_us(*os_, begin_ns);
    *os_ << ",\"dur\":";
    detail::trace::write_ns_as_us(*os_, end_ns - begin_ns);
    *os_ << ",\"args\":{" << args << "}}";
  }
  /// A flow arrow `id` from the slice enclosing `from_us` on (pid, from_tid) to the slice enclosing
  /// `to_us` on (pid, to_tid).
  void flow(std::uint64_t id, std::string_view name, std::uint32_t pid, std::uint32_t from_tid, double from_us,
            std::uint32_t to_tid, double to_us) {
    for (int end = 0; end < 2; ++end) {
      begin(end ? "f" : "s", name, pid);
      *os_ << ",\"cat\":\"flow\",\"id\":" << id << ",\"tid\":" << (end ? to_tid : from_tid);
      if (end) *os_ << ",\"bp\":\"e\"";
      time("ts", end ? to_us : from_us);
      *os_ << '}';
    }
  }
  /// A counter track `name` of process `pid`: its series' values from `ts_us` on.
  void counter(std::string_view name, std::uint32_t pid, double ts_us, std::string_view args) {
    begin("C", name, pid);
    time("ts", ts_us);
    *os_ << ",\"args\":{" << args << "}}";
  }
  /// Closes the JSON; the destructor does it if not called.
  void finish() {
    if (os_) *os_ << "\n]}\n";
    os_ = nullptr;
  }
  ~chrome_trace_writer() {
    if (os_) finish();
  }

 private:
  void begin(std::string_view ph, std::string_view name, std::uint32_t pid) {
    if (!first_) *os_ << ',';
    first_ = false;
    *os_ << "\n{\"ph\":\"" << ph << "\",\"name\":";
    detail::trace::write_json_string(*os_, name);
    *os_ << ",\"pid\":" << pid;
  }
  void time(std::string_view key, double us) {
    *os_ << ",\"" << key << "\":";
    detail::trace::write_us(*os_, us);
  }
  std::ostream* os_;
  bool first_ = true;
};

/// Writes `t` as Chrome-trace JSON; `g` (the executable's model) names ops and tensors.
inline void write_chrome_trace(std::ostream& os, const timeline& t, const graph& g) {
  chrome_trace_writer w(os);
  std::uint32_t replicas = 0;
  for (const auto& e : t.events()) replicas = std::max(replicas, e.replica + 1);
  const bool simulated = t.clock_hz() != 0;
  for (std::uint32_t r = 0; r < replicas; ++r) {
    if (simulated) w.process_name(2 * r, "replica " + std::to_string(r) + " simulated (IPU cycles)");
    w.process_name(2 * r + 1, "replica " + std::to_string(r) + " host");
  }
  const double per_us = static_cast<double>(t.clock_hz()) / 1e6;
  for (const auto& e : t.events()) {
    const auto name = detail::trace::event_name(e, g);
    std::string args = "\"micro_batch\":" + std::to_string(e.micro_batch) + ",\"ipu\":" + std::to_string(e.ipu) +
                       ",\"cycles\":" + std::to_string(e.sim_cycles);
    if (e.stage != no_stage) args += ",\"stage\":" + std::to_string(e.stage);
    if (e.phase >= 0) args += ",\"phase\":" + std::to_string(e.phase);
    if (e.kind == step_kind::ipu_copy) args += ",\"to_ipu\":" + std::to_string(e.peer);
    if (simulated)
      w.complete(to_string(e.kind), name, 2 * e.replica, e.ipu, static_cast<double>(e.sim_begin) / per_us,
                 static_cast<double>(e.sim_cycles) / per_us, args);
    w.complete(to_string(e.kind), name, 2 * e.replica + 1, e.worker, static_cast<double>(e.host_begin_ns) / 1000.0,
               static_cast<double>(e.host_end_ns - e.host_begin_ns) / 1000.0, args);
  }
  w.finish();
}

}  // namespace ipu
