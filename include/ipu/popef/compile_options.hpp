#pragma once
// What popef::compile does beyond what the options say (compile.hpp). Its own header because the
// executable cache's key covers it (cache.hpp), and compile.hpp compiles through that cache.
#include <optional>
#include <string>

#include "ipu/options.hpp"

namespace ipu::popef {

struct compile_options {
  /// The executable's name; empty: the graph's name, or "model" when it has none.
  std::string name;
  /// Pipelined and sharded strategies without explicit stages: split a model without placement
  /// annotations over every IPU of a replica (auto_split.hpp). (Phased strategies list their
  /// phases; auto_split() makes a model and phases that fit each other.)
  bool auto_split = true;
  /// zlib-compress the Executable blob when exporting.
  bool compress = true;
  /// Plan with this strategy from the ops' own annotations (PopART's virtual graphs, pipeline
  /// stages, execution phases) instead of the options' strategy settings — the only way to run a
  /// phased strategy without listing its phases, which the options require.
  std::optional<execution_mode> from_annotations;
};

}  // namespace ipu::popef
