#pragma once
// `ipu version`: the library version.
#include <CLI/CLI.hpp>

#include <iostream>

namespace ipu_cli {

inline void add_version_command(CLI::App& app) {
  app.add_subcommand("version", "print the library version")->callback([] { std::cout << "ipu 0.1.0\n"; });
}

}  // namespace ipu_cli
