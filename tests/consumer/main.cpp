// Builds a small graph with the installed headers and checks it.
#include <ipu/graph/graph.hpp>
#include <ipu/graph/validate.hpp>
#include <iostream>

int main() {
  ipu::graph g("consumer");
  auto x = g.add_tensor("x", {ipu::data_type::F32, {2, 3}}, ipu::tensor_kind::input);
  auto y = g.add_tensor("y", {ipu::data_type::F32, {2, 3}});
  g.add_op(ipu::op_node{"Relu", "", 13, "relu", {x}, {y}, {}, {}});
  g.mark_output(y);
  ipu::validate(g);
  std::cout << "consumer: graph '" << g.name() << "' with " << g.num_ops() << " op is valid\n";
  return g.num_ops() == 1 ? 0 : 1;
}
