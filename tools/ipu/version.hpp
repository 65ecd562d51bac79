#pragma once
// `ipu version` and `ipu --version`: the library version.
#include <CLI/CLI.hpp>

#include <memory>

#include "json_output.hpp"

namespace ipu_cli {

inline constexpr const char* version_number = "0.1.0";
inline constexpr const char* version_text = "ipu 0.1.0";

inline void add_version_command(CLI::App& app) {
  app.set_version_flag("--version", version_text);
  auto j = std::make_shared<json_option>();
  auto* cmd = app.add_subcommand("version", "print the library version");
  add_json_option(*cmd, *j);
  cmd->callback([j] {
    report r(*j);
    r.printf("%s\n", version_text);
    r.json = {{"name", "ipu"}, {"version", version_number}};
    r.finish();
  });
}

}  // namespace ipu_cli
