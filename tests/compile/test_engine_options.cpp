// POPLAR_ENGINE_OPTIONS: its autoReport keys make compile() write the plan report and the
// predicted trace where autoReport.directory says; anything else it holds is refused by name.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "../popef/popef_test_util.hpp"
#include "../runtime/small_model.hpp"
#include "../scoped_env.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/compile/engine_options.hpp"
#include "ipu/error.hpp"

namespace test_engine_options {

using namespace ipu;
namespace fs = std::filesystem;

namespace {

std::string refusal(std::string_view json) {
  try {
    (void)popef::parse_engine_options(json);
  } catch (const error& e) {
    CHECK(e.category() == error_category::usage);
    return e.what();
  }
  return {};
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("POPLAR_ENGINE_OPTIONS: autoReport.all turns both reports on, and a report's own key overrides it") {
  auto r = popef::parse_engine_options(R"({"autoReport.all":"true", "autoReport.directory":"./rep"})");
  CHECK(r.graph_profile);
  CHECK(r.execution_profile);
  CHECK(r.directory == "./rep");
  r = popef::parse_engine_options(R"( { "autoReport.all" : true , "autoReport.outputExecutionProfile":"false" } )");
  CHECK(r.graph_profile);
  CHECK_FALSE(r.execution_profile);
  CHECK(r.directory == ".");
  r = popef::parse_engine_options(R"({"autoReport.outputExecutionProfile":"true"})");
  CHECK_FALSE(r.graph_profile);
  CHECK(r.execution_profile);
  CHECK_FALSE(popef::parse_engine_options("{}").any());
}

TEST_CASE("POPLAR_ENGINE_OPTIONS: what this library cannot honour, or cannot read, is refused by name") {
  CHECK(refusal(R"({"debug.instrument":"true"})").find("'debug.instrument' has no counterpart") != std::string::npos);
  CHECK(refusal(R"({"autoReport.all":"yes"})").find("'autoReport.all' is 'yes', not true or false") != std::string::npos);
  CHECK(refusal(R"({"autoReport.all":1})").find("not a string or a boolean") != std::string::npos);
  CHECK(refusal(R"({"autoReport.all":{"x":"y"}})").find("not a string or a boolean") != std::string::npos);
  CHECK(refusal(R"({"autoReport.all":"true","autoReport.all":"false"})").find("given twice") != std::string::npos);
  CHECK(refusal(R"({"autoReport.all":"true"} x)").find("text follows") != std::string::npos);
  CHECK(refusal(R"({"autoReport.all":"true")").find("expected '}'") != std::string::npos);
  CHECK(refusal("autoReport.all=true").find("expected '{'") != std::string::npos);
  CHECK(refusal(R"({"autoReport.directory":""})").find("empty") != std::string::npos);
  CHECK(refusal(std::string(70000, ' ')).find("bytes long") != std::string::npos);
}

TEST_CASE("POPLAR_ENGINE_OPTIONS: compile() writes the reports asked for, under a name that cannot leave the directory") {
  test_popef::scratch_dir dir("engine-options");
  const std::string json = R"({"autoReport.all":"true","autoReport.directory":")" + dir.path().string() + R"("})";
  const ipu_test::scoped_env env("POPLAR_ENGINE_OPTIONS", json.c_str());
  popef::compile_options co;
  co.name = "../../escape/me";
  const auto m = popef::compile(runtime_test::small_model(), options(), device_from_name("mk2", 1), co);
  CHECK(popef::report_folder_name(co.name) == ".._.._escape_me");
  const auto folder = dir / ".._.._escape_me";
  const auto html = slurp(folder / "plan.html");
  CHECK(html == plan_report_html(m.plan));
  CHECK(html.find("<svg") != std::string::npos);
  const auto trace = slurp(folder / "predicted_trace.json");
  CHECK(trace.find("\"traceEvents\"") != std::string::npos);
  CHECK(popef::report_folder_name("..") == "model");
  CHECK(popef::report_folder_name("") == "model");
}

TEST_CASE("POPLAR_ENGINE_OPTIONS: a bad value stops compile() before any work, with the key named") {
  const ipu_test::scoped_env env("POPLAR_ENGINE_OPTIONS", R"({"target.syncReplicasIndependently":"true"})");
  CHECK_THROWS_WITH_AS(popef::compile(runtime_test::small_model(), options(), device_from_name("mk2", 1)),
                       doctest::Contains("target.syncReplicasIndependently"), error);
}

}  // namespace test_engine_options
