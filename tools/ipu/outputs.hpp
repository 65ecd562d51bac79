#pragma once
// What the tool writes never replaces what it reads: an output that is the same file as an input
// (compared by device and inode, so `./m.onnx`, a hard link or a symbolic link are caught too) is
// refused before any work is done.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/file.hpp"

namespace ipu_cli {

/// Files that options shared by several subcommands read (`--input-value`'s values), which every
/// output must spare as well as the files a subcommand names itself.
inline std::vector<std::filesystem::path>& files_read_by_options() {
  static std::vector<std::filesystem::path> files;
  return files;
}

inline void refuse_overwriting_inputs(const std::filesystem::path& output, std::vector<std::filesystem::path> inputs,
                                      std::string_view flag) {
  inputs.insert(inputs.end(), files_read_by_options().begin(), files_read_by_options().end());
  for (const auto& in : inputs)
    if (ipu::same_file(output, in))
      throw ipu::error(ipu::error_category::usage,
                       "the output '" + output.string() + "' is the input '" + in.string() + "': writing it would destroy the input",
                       std::string(flag), "write the output to another path");
}

}  // namespace ipu_cli
