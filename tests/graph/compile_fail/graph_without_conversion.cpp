// Must not compile: an opted-in graph type must say how it becomes an ipu::graph. Checked by
// tests/compile_fail.cmake.
#include "ipu/graph/concepts.hpp"

struct my_model {
  using graph_concept = ipu::graph_tag;
};

int main() { return static_cast<int>(ipu::as_graph(my_model{}).num_ops()); }
