#pragma once
// `--json [FILE]`, one rule for every subcommand: `--json` alone prints the report as JSON on stdout
// instead of the text; `--json FILE` writes it to FILE as well as printing the text. The JSON holds
// what the text says, numbers as numbers (bytes, cycles, seconds: unrounded and unformatted).
//
// A command writes its text through a `report` (printf-like) and fills `report::json`; `finish`
// prints or writes the JSON once the command has succeeded, so a failure leaves no half report.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/file.hpp"
#include "outputs.hpp"

namespace ipu_cli {

/// What --json asked for: nothing (unset), stdout ("" after a bare --json), or a file.
struct json_option {
  std::optional<std::string> target;
  [[nodiscard]] bool to_stdout() const { return target && target->empty(); }
  [[nodiscard]] bool to_file() const { return target && !target->empty(); }
};

/// Adds `--json [FILE]` to `cmd`.
inline CLI::Option* add_json_option(CLI::App& cmd, json_option& j) {
  return cmd
      .add_option_function<std::vector<std::string>>(
          "--json",
          [&j](const std::vector<std::string>& v) { j.target = v.empty() ? std::string() : v.front(); },
          "print the report as JSON instead of the text; --json FILE: write it to FILE as well as printing the text")
      ->expected(0, 1)
      ->allow_extra_args(false)
      ->type_name("[FILE]");
}

class report {
 public:
  /// `inputs`: the files the command reads, which the JSON file must not replace. A missing
  /// directory fails now, before the command's work.
  explicit report(json_option j, const std::vector<std::filesystem::path>& inputs = {}) : j_(std::move(j)) {
    if (j_.to_file()) {
      // `--json` takes the next word as its file: `ipu inspect --json a.popef b.popef` would write
      // over a.popef. A model's or data file's name is refused instead.
      const auto ext = std::filesystem::path(*j_.target).extension().string();
      for (const char* reads : {".onnx", ".popef", ".npy", ".pb"})
        if (ext == reads)
          throw ipu::error(ipu::error_category::usage, "--json would write the report to the " + ext + " file '" + *j_.target + "'",
                           "--json", "put --json after the command's files, or give the report's file: --json=report.json");
      refuse_overwriting_inputs(*j_.target, inputs, "--json");
      auto dir = std::filesystem::path(*j_.target).parent_path();
      if (dir.empty()) dir = ".";
      std::error_code ec;
      if (!std::filesystem::is_directory(dir, ec))
        throw ipu::error(ipu::error_category::io, "the directory '" + dir.string() + "' does not exist",
                         "--json '" + *j_.target + "'", "create it, or give a path in an existing directory");
    }
  }

  nlohmann::json json = nlohmann::json::object();

  /// Whether the text goes to stdout (not when --json alone replaces it).
  [[nodiscard]] bool text_on() const { return !j_.to_stdout(); }
  [[nodiscard]] const json_option& option() const { return j_; }

  /// Text, printed at once (streamed, so long commands show progress) unless the JSON replaces it.
  __attribute__((format(printf, 2, 3))) void printf(const char* format, ...) {
    if (!text_on()) return;
    std::va_list args;
    va_start(args, format);
    std::vprintf(format, args);
    va_end(args);
  }
  void text(const std::string& s) {
    if (text_on()) std::fputs(s.c_str(), stdout);
  }
  void flush() {
    if (text_on()) std::fflush(stdout);
  }

  /// The JSON on stdout (--json) or in the file (--json FILE, with a text line saying so).
  void finish() {
    if (j_.to_stdout()) {
      std::fputs((json.dump(2) + "\n").c_str(), stdout);
    } else if (j_.to_file()) {
      const auto s = json.dump(2) + "\n";
      ipu::write_file_atomically(*j_.target, std::as_bytes(std::span(s.data(), s.size())), "JSON report");
      printf("wrote %s (JSON report)\n", j_.target->c_str());
    }
    std::fflush(stdout);
  }

 private:
  json_option j_;
};

}  // namespace ipu_cli
