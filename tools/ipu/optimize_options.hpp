#pragma once
// `--passes LIST` and `--no-optimize`, on every subcommand that optimises a model before planning
// or running it (run, compile, convert): the graph optimisation stage (ipu/passes/optimize.hpp)
// runs its default passes unless told otherwise, and what each pass did goes into the report.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/passes/optimize.hpp"

namespace ipu_cli {

struct optimize_args {
  std::optional<std::string> passes;  // --passes LIST
  bool no_optimize = false;           // --no-optimize
};

inline void add_optimize_options(CLI::App& cmd, optimize_args& a) {
  std::string defaults, by_name;
  for (const auto& p : ipu::passes::all_passes()) {
    auto& list = p.by_default ? defaults : by_name;
    list += (list.empty() ? "" : ", ") + std::string(p.name);
  }
  cmd.add_option("--passes", a.passes,
                 "graph passes to run, in order, comma-separated (default: " + defaults + "; by name only: " + by_name +
                     ", e.g. --passes fuse-qdq,default; none: no pass)");
  cmd.add_flag("--no-optimize", a.no_optimize, "run the model as imported, without graph passes (--passes none)");
}

/// The passes asked for: default_passes() unless --passes or --no-optimize says otherwise.
inline std::vector<std::string> chosen_passes(const optimize_args& a) {
  if (a.no_optimize && a.passes)
    throw ipu::error(ipu::error_category::usage, "--passes and --no-optimize contradict each other", "--no-optimize",
                     "give one of them");
  if (a.no_optimize) return {};
  return a.passes ? ipu::passes::parse_pass_list(*a.passes) : ipu::passes::default_passes();
}

/// `g` after the chosen passes; `report`, when given, gets one entry per pass (name, ops before and after).
inline ipu::graph optimized(const ipu::graph& g, const optimize_args& a, nlohmann::json* report = nullptr) {
  std::vector<ipu::passes::pass_report> done;
  auto out = ipu::passes::optimize(g, chosen_passes(a), &done);
  if (report) {
    *report = nlohmann::json::array();
    for (const auto& r : done)
      report->push_back({{"pass", r.name}, {"ops_before", r.ops_before}, {"ops_after", r.ops_after}});
  }
  return out;
}

}  // namespace ipu_cli
