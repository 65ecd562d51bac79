// Must not compile: a type that converts to a graph but did not opt in is not a dataflow graph.
// Checked by tests/compile_fail.cmake.
#include "ipu/graph/concepts.hpp"

struct my_model {
  ipu::graph to_ipu_graph() const { return ipu::graph("m"); }
};

int main() { return static_cast<int>(ipu::as_graph(my_model{}).num_ops()); }
