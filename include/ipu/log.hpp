#pragma once
// Library-wide logging: one level for the process, one line per message, to stderr or a sink.
//
// The level comes from `ipu::log::set_level` or, until that is called, from the environment variable
// IPU_LOG_LEVEL (OFF, ERR, WARN, INFO, DEBUG, TRACE; case-insensitive), read once at first use. A bad
// value is reported with a warning and the default, WARN, is used.
//
// A disabled message costs one relaxed atomic load: arguments are only formatted when the level is
// enabled, and a callable argument (`log::debug([&] { return expensive(); })`) is only called then.
// Lines are written whole, under a mutex, so messages from different threads never interleave.
#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace ipu::log {

/// Severity, from "log nothing" to "log everything". A message at level L is written when L <= the
/// current level (and L is not `off`).
enum class level : std::uint8_t { off, err, warn, info, debug, trace };

inline constexpr level default_level = level::warn;

/// "OFF", "ERR", "WARN", "INFO", "DEBUG", "TRACE": the spelling IPU_LOG_LEVEL accepts.
constexpr std::string_view to_string(level l) noexcept {
  switch (l) {
    case level::off: return "OFF";
    case level::err: return "ERR";
    case level::warn: return "WARN";
    case level::info: return "INFO";
    case level::debug: return "DEBUG";
    case level::trace: return "TRACE";
  }
  return "?";
}

/// Parses a level name, case-insensitively; also accepts "ERROR" and "WARNING". nullopt otherwise.
constexpr std::optional<level> parse_level(std::string_view s) noexcept {
  auto equals = [s](std::string_view name) {
    if (s.size() != name.size()) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      if (c != name[i]) return false;
    }
    return true;
  };
  for (auto l : {level::off, level::err, level::warn, level::info, level::debug, level::trace})
    if (equals(to_string(l))) return l;
  if (equals("ERROR")) return level::err;
  if (equals("WARNING")) return level::warn;
  return std::nullopt;
}

inline constexpr std::string_view accepted_levels = "OFF, ERR, WARN, INFO, DEBUG, TRACE";

/// Receives each enabled message (without a trailing newline). Called under the log mutex, so a
/// sink needs no locking of its own but must not log.
using sink = std::function<void(level, std::string_view message)>;

namespace detail {

inline constexpr int uninitialised = -1;

struct state {
  std::atomic<int> current{uninitialised};
  std::mutex mutex;  // guards `user_sink` and the output itself
  sink user_sink;
};

inline state& global() {
  static state s;
  return s;
}

/// "12:34:56.789"
inline std::string wall_clock() {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  std::array<char, 16> buf{};
  std::snprintf(buf.data(), buf.size(), "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf.data();
}

/// The line the default sink writes: "[12:34:56.789] [ipu] [WARN] message\n".
inline std::string stderr_line(level l, std::string_view message) {
  std::string line = "[" + wall_clock() + "] [ipu] [";
  line += to_string(l);
  line += "] ";
  line += message;
  line += '\n';
  return line;
}

inline void emit(level l, std::string_view message) {
  auto& s = global();
  const std::lock_guard lock(s.mutex);
  if (s.user_sink) {
    s.user_sink(l, message);
    return;
  }
  const std::string line = stderr_line(l, message);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

/// Reads IPU_LOG_LEVEL (else PopTorch's POPTORCH_LOG_LEVEL) unless a level has been set already;
/// returns the level in force.
inline int initialise_from_environment() {
  auto& s = global();
  const char* name = "IPU_LOG_LEVEL";
  const char* env = std::getenv(name);
  if (!env || !*env) env = std::getenv(name = "POPTORCH_LOG_LEVEL");
  std::optional<level> parsed = (env && *env) ? parse_level(env) : std::optional<level>(default_level);
  const bool bad = !parsed;
  int expected = uninitialised;
  const int wanted = static_cast<int>(parsed.value_or(default_level));
  if (!s.current.compare_exchange_strong(expected, wanted, std::memory_order_acq_rel))
    return expected;  // set_level or another thread got there first
  if (bad)
    emit(level::warn, std::string(name) + "='" + std::string(env) + "' is not a log level; using " +
                          std::string(to_string(default_level)) + " (accepted: " + std::string(accepted_levels) + ")");
  return wanted;
}

inline int current() noexcept {
  const int c = global().current.load(std::memory_order_relaxed);
  if (c != uninitialised) [[likely]]
    return c;
  try {
    return initialise_from_environment();
  } catch (...) {  // allocation failure while warning: logging must never throw
    return static_cast<int>(default_level);
  }
}

/// Forgets the level so that the next use reads IPU_LOG_LEVEL again (for tests).
inline void reset_for_testing() noexcept { global().current.store(uninitialised, std::memory_order_relaxed); }

template <class T>
concept message_maker = std::invocable<T&> && requires(T& f) {
  { std::ostringstream() << f() };
};

}  // namespace detail

/// The level in force (reads IPU_LOG_LEVEL on first use).
inline level get_level() noexcept { return static_cast<level>(detail::current()); }

/// Sets the level for the whole process; takes precedence over IPU_LOG_LEVEL.
inline void set_level(level l) noexcept { detail::global().current.store(static_cast<int>(l), std::memory_order_relaxed); }

/// True when a message at level `l` would be written.
inline bool enabled(level l) noexcept { return l != level::off && static_cast<int>(l) <= detail::current(); }

/// Sends messages to `s` instead of stderr; an empty sink restores stderr.
inline void set_sink(sink s) {
  auto& g = detail::global();
  const std::lock_guard lock(g.mutex);
  g.user_sink = std::move(s);
}

/// Writes one message made by streaming `args` (or by calling the one callable argument).
template <class... Args>
void write(level l, Args&&... args) {
  if (!enabled(l)) return;
  std::ostringstream os;
  if constexpr (sizeof...(Args) == 1 && (detail::message_maker<std::remove_reference_t<Args>> && ...))
    ((os << args()), ...);
  else
    (os << ... << std::forward<Args>(args));
  detail::emit(l, os.view());
}

/// Writes `message` whatever the level, at level info (to the sink, else stderr): output the user
/// asked for by name, such as PopART's PrintTensor, is not filtered like diagnostics.
inline void print(std::string_view message) { detail::emit(level::info, message); }

template <class... Args>
void error(Args&&... args) {
  write(level::err, std::forward<Args>(args)...);
}
template <class... Args>
void warn(Args&&... args) {
  write(level::warn, std::forward<Args>(args)...);
}
template <class... Args>
void info(Args&&... args) {
  write(level::info, std::forward<Args>(args)...);
}
template <class... Args>
void debug(Args&&... args) {
  write(level::debug, std::forward<Args>(args)...);
}
template <class... Args>
void trace(Args&&... args) {
  write(level::trace, std::forward<Args>(args)...);
}

}  // namespace ipu::log
