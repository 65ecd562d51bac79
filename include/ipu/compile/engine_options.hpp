#pragma once
// POPLAR_ENGINE_OPTIONS, as Poplar users set it to get reports without changing their program:
//
//   POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true", "autoReport.directory":"./report"}'
//
// Poplar writes its graph and execution profiles (for PopVision) there; this library writes its own
// pictures of the same things: `plan.html` (the plan report: Gantt chart of a step, tile-memory map,
// per-stage cycles; exec/plan_report.hpp) for the graph profile and `predicted_trace.json` (the
// predicted step as a Chrome trace) for the execution profile, in DIR/<executable name>/, each time
// popef::compile() returns an executable. The value is a flat JSON object whose values are strings
// or booleans, as Poplar takes them. Keys this library has no counterpart for are refused by name,
// never ignored.
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/error.hpp"

namespace ipu::popef {

/// The reports POPLAR_ENGINE_OPTIONS asks for.
struct engine_report_options {
  bool graph_profile = false;      // autoReport.outputGraphProfile (or autoReport.all): plan.html
  bool execution_profile = false;  // autoReport.outputExecutionProfile (or autoReport.all): predicted_trace.json
  std::filesystem::path directory = ".";  // autoReport.directory

  [[nodiscard]] bool any() const noexcept { return graph_profile || execution_profile; }
};

namespace detail {

/// A strict reader of one flat JSON object of string and boolean values: what Poplar's engine
/// options are. Anything else (nesting, numbers, duplicate keys, trailing text) is an error.
class flat_json_reader {
 public:
  explicit flat_json_reader(std::string_view text) : s_(text) {}

  std::vector<std::pair<std::string, std::string>> read_object() {
    std::vector<std::pair<std::string, std::string>> out;
    skip_space();
    expect('{');
    skip_space();
    if (peek() == '}') {
      ++i_;
    } else {
      for (;;) {
        skip_space();
        std::string key = read_string();
        skip_space();
        expect(':');
        skip_space();
        std::string value;
        if (peek() == '"')
          value = read_string();
        else if (s_.substr(i_, 4) == "true")
          value = "true", i_ += 4;
        else if (s_.substr(i_, 5) == "false")
          value = "false", i_ += 5;
        else
          fail("the value of '" + key + "' is not a string or a boolean");
        for (const auto& [k, v] : out)
          if (k == key) fail("'" + key + "' is given twice");
        out.emplace_back(std::move(key), std::move(value));
        skip_space();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}');
        break;
      }
    }
    skip_space();
    if (i_ != s_.size()) fail("text follows the object");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw error(error_category::usage, "POPLAR_ENGINE_OPTIONS: " + what + " (at character " + std::to_string(i_ + 1) + ")",
                "the environment", R"(set it to a JSON object such as {"autoReport.all":"true","autoReport.directory":"./report"})");
  }
  [[nodiscard]] char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string read_string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      const char c = s_[i_++];
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = peek();
      ++i_;
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        default: fail("an escape this reader does not take (\\" + std::string(1, e) + ")");
      }
    }
    expect('"');
    return out;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

inline bool engine_bool(const std::string& key, const std::string& v) {
  if (v == "true") return true;
  if (v == "false") return false;
  throw error(error_category::usage, "POPLAR_ENGINE_OPTIONS: '" + key + "' is '" + v + "', not true or false",
              "the environment", "give \"true\" or \"false\"");
}

}  // namespace detail

/// Reads the engine options in `json` (POPLAR_ENGINE_OPTIONS' syntax). Throws ipu::error (usage)
/// for text that is not a flat object of strings and booleans, for a key this library does not
/// honour, and for a value that does not fit its key.
inline engine_report_options parse_engine_options(std::string_view json) {
  constexpr std::size_t max_length = 64 * 1024;  // an environment variable, not a file
  if (json.size() > max_length)
    throw error(error_category::usage, "POPLAR_ENGINE_OPTIONS is " + std::to_string(json.size()) + " bytes long",
                "the environment", "keep it under 64 KiB");
  engine_report_options out;
  std::optional<bool> all, graph, execution;
  for (const auto& [key, value] : detail::flat_json_reader(json).read_object()) {
    if (key == "autoReport.all") {
      all = detail::engine_bool(key, value);
    } else if (key == "autoReport.outputGraphProfile") {
      graph = detail::engine_bool(key, value);
    } else if (key == "autoReport.outputExecutionProfile") {
      execution = detail::engine_bool(key, value);
    } else if (key == "autoReport.directory") {
      if (value.empty() || value.find('\0') != std::string::npos)
        throw error(error_category::usage, "POPLAR_ENGINE_OPTIONS: autoReport.directory is empty", "the environment",
                    "name the directory the reports go to");
      out.directory = value;
    } else {
      throw error(error_category::usage, "POPLAR_ENGINE_OPTIONS: '" + key + "' has no counterpart in this library",
                  "the environment",
                  "remove it; honoured are autoReport.all, autoReport.outputGraphProfile, "
                  "autoReport.outputExecutionProfile and autoReport.directory");
    }
  }
  // As in Poplar, autoReport.all turns every report on and a report's own key overrides it.
  out.graph_profile = graph.value_or(all.value_or(false));
  out.execution_profile = execution.value_or(all.value_or(false));
  return out;
}

/// POPLAR_ENGINE_OPTIONS from the environment; nothing when it is unset or empty.
inline std::optional<engine_report_options> engine_options_from_environment() {
  const char* v = std::getenv("POPLAR_ENGINE_OPTIONS");
  if (v == nullptr || *v == '\0') return std::nullopt;
  return parse_engine_options(v);
}

/// The folder name for an executable: its name with anything but letters, digits, '.', '-' and '_'
/// replaced, so a model's name (a stranger's) cannot leave the report directory.
inline std::string report_folder_name(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, 100)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                       c == '-' || c == '_';
    out += plain ? c : '_';
  }
  if (out.empty() || out.find_first_not_of('.') == std::string::npos) out = "model";
  return out;
}

}  // namespace ipu::popef
