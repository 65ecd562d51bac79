// The `ipu` command-line tool. Each subcommand lives in its own header under tools/ipu/ and adds
// itself with add_<name>_command(app); a failure is one line on stderr and exit status 1 (2 for a
// command line the parser refuses). Every subcommand takes `--json [FILE]` (json_output.hpp).
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <string>

#include "compile.hpp"
#include "convert.hpp"
#include "import_limits.hpp"
#include "info.hpp"
#include "inspect.hpp"
#include "ipu/error.hpp"
#include "ipu/cpu/blas_tuning.hpp"
#include "model.hpp"
#include "plan.hpp"
#include "run.hpp"
#ifdef IPU_HAVE_SERVE
#include "serve.hpp"
#endif
#include "train.hpp"
#include "version.hpp"

namespace {

/// Errors are printed on one line, so scripts can grep them and users see them whole.
void print_error(std::string_view prefix, std::string_view what) {
  std::string line(prefix);
  for (char c : what) line += (c == '\n' || c == '\r') ? ' ' : c;
  std::cerr << line << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  ipu::tune_openblas_for_host_device();  // this program owns its process
  CLI::App app{"ipu: import, plan, compile and run models on a simulated Graphcore IPU"};
  app.require_subcommand(1);
  ipu_cli::add_version_command(app);
  ipu_cli::add_info_command(app);
  ipu_cli::add_run_command(app);
  ipu_cli::add_plan_command(app);
  ipu_cli::add_model_command(app);
  ipu_cli::add_compile_command(app);
  ipu_cli::add_convert_command(app);
  ipu_cli::add_train_command(app);
  ipu_cli::add_inspect_command(app);
#ifdef IPU_HAVE_SERVE
  ipu_cli::add_serve_command(app);
#endif
  // The subcommands that import ONNX models take the importer's caps.
  for (const char* name : {"info", "run", "plan", "compile", "train"}) ipu_cli::add_import_limit_options(*app.get_subcommand(name));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A bad command line: one line, and exit status 2 as usage errors have it.
    print_error("ipu: ", std::string(e.what()) + " (see --help)");
    return 2;
  } catch (const ipu::error& e) {
    print_error("", e.what());
    return 1;
  } catch (const std::exception& e) {
    print_error("ipu internal error: ", e.what());
    return 1;
  }
  return 0;
}
