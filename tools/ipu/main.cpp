// The `ipu` command-line tool.
#include <CLI/CLI.hpp>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"ipu: import, plan, compile and run models on a simulated Graphcore IPU"};
  app.require_subcommand(1);
  app.add_subcommand("version", "print the library version")->callback([] { std::cout << "ipu 0.1.0\n"; });
  CLI11_PARSE(app, argc, argv);
  return 0;
}
