// showCompilationProgressBar: compile() reports its stages in order, from 0% to 100%, where
// compile_options::progress says, and draws nothing when the option is off.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "../runtime/small_model.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/compile/progress.hpp"

namespace test_progress {

using namespace ipu;

namespace {

std::vector<std::pair<std::string, unsigned>> compile_and_record(bool bar) {
  std::vector<std::pair<std::string, unsigned>> seen;
  popef::compile_options co;
  co.progress = [&](const popef::compile_progress& p) { seen.emplace_back(std::string(p.stage), p.percent); };
  const auto opts = options().show_compilation_progress_bar(bar).execution_strategy(strategy_settings::sharded());
  (void)popef::compile(runtime_test::small_model(), opts, device_from_name("mk2", 1), co);
  return seen;
}

}  // namespace

TEST_CASE("the compilation progress bar shows every stage in order, and nothing when it is turned off") {
  const auto seen = compile_and_record(true);
  REQUIRE(seen.size() >= 4);
  CHECK(seen.front() == std::pair<std::string, unsigned>{"validating the options", 0});
  CHECK(seen.back() == std::pair<std::string, unsigned>{"done", 100});
  bool planning = false;
  for (std::size_t i = 1; i < seen.size(); ++i) {
    CHECK(seen[i - 1].second < seen[i].second);  // strictly forward
    planning = planning || seen[i].first == "planning";
  }
  CHECK(planning);
  CHECK(compile_and_record(false).empty());
}

TEST_CASE("the progress bar's text") {
  CHECK(popef::progress_bar_text({"planning", 40}) == "Graph compilation:  40%|########            | planning");
  CHECK(popef::progress_bar_text({"done", 100}) == "Graph compilation: 100%|####################| done");
  CHECK(popef::progress_bar_text({"x", 250}, 4) == "Graph compilation: 100%|####| x");  // clamped
  // Not a terminal (a pipe in CI, /dev/null here): no bar is drawn at all.
  std::FILE* null = std::fopen("/dev/null", "w");
  REQUIRE(null != nullptr);
  CHECK_FALSE(static_cast<bool>(popef::terminal_progress_bar(null)));
  std::fclose(null);
}

}  // namespace test_progress
