#pragma once
// Parsing `--input-shape NAME=D0,D1,...` (PopRT's spelling) into the importer's shape map.
#include <charconv>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ipu/error.hpp"

namespace ipu_cli {

/// "x=1,3,224,224" -> {"x", {1, 3, 224, 224}}; "x=" is a scalar. The name is everything before the
/// last '=' (tensor names may contain '=').
inline std::pair<std::string, std::vector<std::int64_t>> parse_input_shape(const std::string& text) {
  const auto eq = text.rfind('=');
  const auto bad = [&](const std::string& why) {
    return ipu::error(ipu::error_category::usage, "bad --input-shape '" + text + "': " + why, {},
                      "write NAME=D0,D1,... with non-negative sizes, e.g. input=1,3,224,224");
  };
  if (eq == std::string::npos || eq == 0) throw bad("expected NAME=D0,D1,...");
  std::vector<std::int64_t> dims;
  const std::string list = text.substr(eq + 1);
  std::size_t pos = 0;
  while (pos < list.size()) {
    auto next = list.find(',', pos);
    if (next == std::string::npos) next = list.size();
    std::int64_t d = 0;
    const char* first = list.data() + pos;
    const char* last = list.data() + next;
    auto [p, ec] = std::from_chars(first, last, d);
    if (ec != std::errc() || p != last || d < 0) throw bad("'" + std::string(first, last) + "' is not a size");
    dims.push_back(d);
    pos = next + 1;
    if (next + 1 == list.size()) throw bad("trailing comma");
  }
  return {text.substr(0, eq), std::move(dims)};
}

/// All --input-shape options as the importer's map; a name given twice is an error.
inline std::map<std::string, std::vector<std::int64_t>, std::less<>> parse_input_shapes(const std::vector<std::string>& texts) {
  std::map<std::string, std::vector<std::int64_t>, std::less<>> out;
  for (const auto& t : texts) {
    auto [name, dims] = parse_input_shape(t);
    if (!out.emplace(name, std::move(dims)).second)
      throw ipu::error(ipu::error_category::usage, "--input-shape gives '" + name + "' twice", {},
                       "give each input's shape once");
  }
  return out;
}

}  // namespace ipu_cli
