#pragma once
// Errors raised by every layer of the library.
//
// An error says three things: what happened, where (a file, op, tensor, tile...), and how to fix it.
// The `category` says which component raised it, so callers can react without parsing text.
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace ipu {

enum class error_category {
  usage,     // bad argument or API misuse
  options,   // invalid option / options file
  graph,     // malformed IR or impossible annotation
  onnx,      // ONNX model import / export
  shape,     // shape or type mismatch
  io,        // files and streams
  device,    // device acquisition / description
  memory,    // out of memory on a tile / IPU
  schedule,  // execution strategy planning
  popef,     // executable file format
  runtime,   // execution
  internal,  // a bug in this library
};

constexpr std::string_view to_string(error_category c) noexcept {
  switch (c) {
    case error_category::usage: return "usage";
    case error_category::options: return "options";
    case error_category::graph: return "graph";
    case error_category::onnx: return "onnx";
    case error_category::shape: return "shape";
    case error_category::io: return "io";
    case error_category::device: return "device";
    case error_category::memory: return "memory";
    case error_category::schedule: return "schedule";
    case error_category::popef: return "popef";
    case error_category::runtime: return "runtime";
    case error_category::internal: return "internal";
  }
  return "unknown";
}

/// What a caller should do to recover from a `recoverable_error` (Model Runtime semantics).
enum class recovery_action { ipu_reset, partition_reset, full_reset };

constexpr std::string_view to_string(recovery_action a) noexcept {
  switch (a) {
    case recovery_action::ipu_reset: return "IPU_RESET";
    case recovery_action::partition_reset: return "PARTITION_RESET";
    case recovery_action::full_reset: return "FULL_RESET";
  }
  return "unknown";
}

class error : public std::runtime_error {
 public:
  /// `message` says what happened, `location` where, `hint` how to fix it (may be empty).
  error(error_category category, std::string message, std::string location = {}, std::string hint = {})
      : std::runtime_error(compose(category, message, location, hint)),
        category_(category),
        message_(std::move(message)),
        location_(std::move(location)),
        hint_(std::move(hint)) {}

  [[nodiscard]] error_category category() const noexcept { return category_; }
  /// The bare message, without category, location or hint.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  [[nodiscard]] const std::string& location() const noexcept { return location_; }
  [[nodiscard]] const std::string& hint() const noexcept { return hint_; }

 private:
  static std::string compose(error_category c, const std::string& m, const std::string& loc,
                             const std::string& hint) {
    std::string s = "ipu ";
    s += to_string(c);
    s += " error";
    if (!loc.empty()) {
      s += " at ";
      s += loc;
    }
    s += ": ";
    s += m;
    if (!hint.empty()) {
      s += " (";
      s += hint;
      s += ')';
    }
    return s;
  }

  error_category category_;
  std::string message_;
  std::string location_;
  std::string hint_;
};

/// An error after which the device can be used again once `action()` has been taken.
class recoverable_error : public error {
 public:
  recoverable_error(recovery_action action, error_category category, std::string message,
                    std::string location = {}, std::string hint = {})
      : error(category, std::move(message), std::move(location), std::move(hint)), action_(action) {}
  [[nodiscard]] recovery_action action() const noexcept { return action_; }

 private:
  recovery_action action_;
};

/// An error after which the session or device cannot be used again.
class unrecoverable_error : public error {
 public:
  using error::error;
};

}  // namespace ipu
