#pragma once
// `ipu version` and `ipu --version`: the library version.
#include <CLI/CLI.hpp>

#include <iostream>

namespace ipu_cli {

inline constexpr const char* version_text = "ipu 0.1.0";

inline void add_version_command(CLI::App& app) {
  app.set_version_flag("--version", version_text);
  app.add_subcommand("version", "print the library version")->callback([] { std::cout << version_text << '\n'; });
}

}  // namespace ipu_cli
