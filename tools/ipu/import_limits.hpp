#pragma once
// `--max-model-bytes N` and `--max-tensor-bytes N` on every subcommand that imports an ONNX model
// (info, run, plan, compile, train): the importer's resource caps (ipu::onnx::import_options); and
// with them how the model's sequence and optional inputs are bound (`--sequence-input`,
// `--absent-input`; ipu/onnx/sequences.hpp) and which inputs are fixed to a value (`--input-value`;
// ipu/onnx/value_dependence.hpp).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>

#include <cstdint>
#include <string>
#include <vector>

#include "input_files.hpp"
#include "ipu/onnx/import.hpp"
#include "outputs.hpp"

namespace ipu_cli {

/// The caps given on the command line (the library's defaults otherwise).
inline ipu::onnx::import_options& import_limits() {
  static ipu::onnx::import_options limits;
  return limits;
}

/// `--input-value NAME=FILE`s, in order; read by limited_import_options.
inline std::vector<std::pair<std::string, std::string>>& input_value_files() {
  static std::vector<std::pair<std::string, std::string>> files;
  return files;
}

/// Import options carrying the command line's caps, bindings and fixed input values; every
/// subcommand starts from these.
inline ipu::onnx::import_options limited_import_options() {
  ipu::onnx::import_options o;
  o.max_model_bytes = import_limits().max_model_bytes;
  o.max_tensor_bytes = import_limits().max_tensor_bytes;
  o.sequence_inputs = import_limits().sequence_inputs;
  o.absent_inputs = import_limits().absent_inputs;
  for (const auto& [name, file] : input_value_files()) o.input_values.emplace(name, read_input_file(file));
  return o;
}

/// Whether the command line binds sequence or optional inputs or fixes input values (which a
/// PopEF file has none of).
inline bool binds_structured_inputs() {
  return !import_limits().sequence_inputs.empty() || !import_limits().absent_inputs.empty() ||
         !input_value_files().empty();
}

/// The flag binds_structured_inputs() found, for its error message.
inline const char* binding_flag() {
  if (!import_limits().sequence_inputs.empty()) return "--sequence-input";
  if (!import_limits().absent_inputs.empty()) return "--absent-input";
  return "--input-value";
}

/// "xs=2,3:4:" -> {"xs", {{2, 3}, {4}, {}}}: the shapes of the elements, ':' between elements,
/// ',' between dimensions; an empty element is a scalar, "xs=" an empty sequence. The name is
/// everything before the last '='.
inline std::pair<std::string, std::vector<std::vector<std::int64_t>>> parse_sequence_input(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return CLI::ValidationError("--sequence-input", "'" + text + "': " + why +
                                                        "; write NAME=D0,D1:D0,D1:... (one shape per element, ':' between elements)");
  };
  const auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) throw bad("expected NAME=SHAPE:SHAPE:...");
  std::vector<std::vector<std::int64_t>> elements;
  const std::string list = text.substr(eq + 1);
  if (list.empty()) return {text.substr(0, eq), elements};
  std::size_t start = 0;
  for (;;) {
    const auto end = std::min(list.find(':', start), list.size());
    std::vector<std::int64_t> dims;
    std::size_t pos = start;
    while (pos < end) {
      const auto next = std::min(list.find(',', pos), end);
      std::int64_t d = 0;
      const char* first = list.data() + pos;
      const char* last = list.data() + next;
      const auto [p, ec] = std::from_chars(first, last, d);
      if (ec != std::errc() || p != last || d < 0) throw bad("'" + std::string(first, last) + "' is not a size");
      dims.push_back(d);
      if (next + 1 == end) throw bad("trailing comma");
      pos = next + 1;
    }
    elements.push_back(std::move(dims));
    if (end == list.size()) break;
    start = end + 1;
  }
  return {text.substr(0, eq), std::move(elements)};
}

inline void add_import_limit_options(CLI::App& app) {
  auto& l = import_limits();
  // Sizes in bytes, or with a unit: 512M, 16GiB (k = 1024).
  app.add_option("--max-model-bytes", l.max_model_bytes,
                 "refuse ONNX models (file plus external data) larger than this (default 8G)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1}, UINT64_MAX));
  app.add_option("--max-tensor-bytes", l.max_tensor_bytes,
                 "refuse ONNX models with any tensor larger than this, before allocating it (default 4G)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1}, UINT64_MAX));
  app.add_option_function<std::vector<std::string>>(
      "--sequence-input",
      [&l](const std::vector<std::string>& texts) {
        for (const auto& t : texts) {
          auto [name, elements] = parse_sequence_input(t);
          if (!l.sequence_inputs.emplace(name, std::move(elements)).second)
            throw CLI::ValidationError("--sequence-input", "'" + name + "' is given twice");
        }
      },
      "bind a sequence input: NAME=D0,D1:D0,D1:... gives its elements' shapes; it becomes the inputs NAME[0], "
      "NAME[1], ... (repeatable)");
  app.add_option_function<std::vector<std::string>>(
      "--absent-input",
      [&l](const std::vector<std::string>& names) { l.absent_inputs.insert(names.begin(), names.end()); },
      "give the optional input NAME no value (repeatable)");
  app.add_option_function<std::vector<std::string>>(
      "--input-value",
      [](const std::vector<std::string>& texts) {
        for (const auto& t : texts) {
          const auto eq = t.find('=');
          if (eq == std::string::npos || eq == 0 || eq + 1 == t.size())
            throw CLI::ValidationError("--input-value", "'" + t + "' is not NAME=FILE; write --input-value n=n.npy");
          const auto name = t.substr(0, eq);
          for (const auto& [given, file] : input_value_files())
            if (given == name) throw CLI::ValidationError("--input-value", "'" + name + "' is given twice");
          input_value_files().emplace_back(name, t.substr(eq + 1));
          files_read_by_options().emplace_back(t.substr(eq + 1));
        }
      },
      "fix the input NAME to the value in FILE (.npy or .pb) at import, making it a constant: for inputs that decide "
      "a shape or a sequence's structure, such as a Loop's trip count (repeatable)");
}

}  // namespace ipu_cli
