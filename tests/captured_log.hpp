#pragma once
// Test helper: collects the library's log lines for one scope at a chosen level, then puts the
// level and the default sink back -- also when the scope is left by a failed REQUIRE or an
// exception. A sink left capturing a finished test's local vector crashes whatever logs next.
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/log.hpp"

namespace ipu_test {

class captured_log {
 public:
  using line = std::pair<ipu::log::level, std::string>;

  explicit captured_log(ipu::log::level level) : saved_(ipu::log::get_level()) {
    ipu::log::set_level(level);
    ipu::log::set_sink([this](ipu::log::level l, std::string_view m) {
      const std::lock_guard lock(mutex_);
      lines_.emplace_back(l, std::string(m));
    });
  }
  captured_log(const captured_log&) = delete;
  captured_log& operator=(const captured_log&) = delete;
  ~captured_log() {
    ipu::log::set_sink({});
    ipu::log::set_level(saved_);
  }

  [[nodiscard]] std::vector<line> lines() const {
    const std::lock_guard lock(mutex_);
    return lines_;
  }
  /// The messages alone, in order.
  [[nodiscard]] std::vector<std::string> messages() const {
    const std::lock_guard lock(mutex_);
    std::vector<std::string> r;
    for (const auto& l : lines_) r.push_back(l.second);
    return r;
  }
  /// How many lines contain `part`.
  [[nodiscard]] std::size_t count(std::string_view part) const {
    const std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const auto& l : lines_) n += l.second.find(part) != std::string::npos;
    return n;
  }
  /// Whether a line of level `level` contains `part`.
  [[nodiscard]] bool has(ipu::log::level level, std::string_view part) const {
    const std::lock_guard lock(mutex_);
    for (const auto& l : lines_)
      if (l.first == level && l.second.find(part) != std::string::npos) return true;
    return false;
  }

 private:
  ipu::log::level saved_;
  mutable std::mutex mutex_;
  std::vector<line> lines_;
};

}  // namespace ipu_test
