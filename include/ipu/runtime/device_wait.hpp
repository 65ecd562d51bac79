#pragma once
// What to do when the device asked for is busy, as Model Runtime's DeviceWaitConfig says it: fail at
// once, poll until a timeout, or poll forever, sleeping between attempts.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "ipu/error.hpp"

namespace ipu {

enum class device_wait_strategy : std::uint8_t { no_wait, wait_with_timeout, wait_forever };

/// Model Runtime's spelling: "NO_WAIT", "WAIT_WITH_TIMEOUT", "WAIT_FOREVER".
constexpr std::string_view to_string(device_wait_strategy s) noexcept {
  switch (s) {
    case device_wait_strategy::no_wait:
      return "NO_WAIT";
    case device_wait_strategy::wait_with_timeout:
      return "WAIT_WITH_TIMEOUT";
    case device_wait_strategy::wait_forever:
      return "WAIT_FOREVER";
  }
  return "?";
}

struct device_wait_config {
  /// Between two attempts when none is given. Simulated devices are local lock files, so polling is
  /// cheap; a real system would poll its device server less often.
  static constexpr std::chrono::milliseconds default_sleep_time{100};

  device_wait_strategy strategy = device_wait_strategy::no_wait;
  /// How long to keep trying (wait_with_timeout only).
  std::chrono::milliseconds timeout{0};
  /// How long to sleep between two attempts (waiting strategies only).
  std::chrono::milliseconds sleep_time = default_sleep_time;

  static constexpr device_wait_config no_wait() noexcept { return {}; }
  static constexpr device_wait_config with_timeout(std::chrono::milliseconds timeout,
                                                   std::chrono::milliseconds sleep = default_sleep_time) noexcept {
    return {device_wait_strategy::wait_with_timeout, timeout, sleep};
  }
  static constexpr device_wait_config forever(std::chrono::milliseconds sleep = default_sleep_time) noexcept {
    return {device_wait_strategy::wait_forever, std::chrono::milliseconds{0}, sleep};
  }

  /// Throws ipu::error (device) for a negative timeout, or a waiting strategy that would spin
  /// without sleeping.
  constexpr void validate() const {
    if (timeout.count() < 0)
      throw error(error_category::device, "negative device wait timeout", "device_wait_config",
                  "give a timeout >= 0 ms, or use device_wait_config::forever()");
    if (strategy != device_wait_strategy::no_wait && sleep_time.count() <= 0)
      throw error(error_category::device, "device wait sleep time is not positive", "device_wait_config",
                  "sleep at least 1 ms between attempts (the default is 100 ms)");
  }

  friend constexpr bool operator==(const device_wait_config&, const device_wait_config&) = default;
};

}  // namespace ipu
