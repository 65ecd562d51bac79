#pragma once
// What a session compares before it takes an executable from a file: the graph's inputs or outputs,
// each by name and type, in order.
#include <string>

#include "ipu/graph/graph.hpp"
#include "ipu/tensor_info.hpp"

namespace ipu::runtime {

/// "x F32[4,3], labels S32[4]": the inputs (or outputs) of `g`, in order.
inline std::string describe_signature(const graph& g, bool inputs) {
  std::string s;
  for (auto t : inputs ? g.inputs() : g.outputs())
    s += (s.empty() ? "" : ", ") + g.tensor(t).name + " " + to_string(g.tensor(t).info);
  return s;
}

}  // namespace ipu::runtime
