#pragma once
// What popef::compile does beyond what the options say (compile.hpp). Its own header because the
// executable cache's key covers it (cache.hpp), and compile.hpp compiles through that cache.
#include <optional>
#include <string>

#include "ipu/poptorch/strategy.hpp"
#include "ipu/compile/precision.hpp"
#include "ipu/compile/progress.hpp"

namespace ipu::popef {

struct compile_options {
  /// The executable's name; empty: the graph's name, or "model" when it has none.
  std::string name;
  /// Pipelined and sharded strategies without explicit stages: place a model without placement
  /// annotations over every IPU of a replica with the automatic planner (ipu::propose_stages).
  /// (Phased strategies list their phases, or run from annotations that ipu::propose_phases makes.)
  bool auto_plan = true;
  /// PopRT's --precision fp8_weight / fp8 (precision.hpp): store the product weights, and for fp8
  /// round the product activations, in F8143. Needs the options' precision F16 (the rest of the
  /// model runs in F16); none: as the options' precision says.
  float8_mode float8 = float8_mode::none;
  /// zlib-compress the Executable blob when exporting.
  bool compress = true;
  /// Plan with this strategy from the ops' own annotations (PopART's virtual graphs, pipeline
  /// stages, execution phases) instead of the options' strategy settings — the only way to run a
  /// phased strategy without listing its phases, which the options require.
  std::optional<execution_mode> from_annotations;
  /// Where the compilation progress bar is drawn when the options' showCompilationProgressBar is
  /// on (progress.hpp); empty: on stderr when it is a terminal. Not part of the cache key.
  progress_sink progress;
};

}  // namespace ipu::popef
