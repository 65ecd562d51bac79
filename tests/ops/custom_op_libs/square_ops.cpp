// A custom-op library as a user builds one (add_library(... MODULE ...)), loaded by
// tests/ops/test_custom_ops.cpp through ipu::ops::load_custom_ops: plugin.ops::SquarePlus (version 2),
// y = x * x + offset, where `offset` is a FLOAT attribute (0 when absent).
#include <cstddef>
#include <vector>

#include "ipu/ops/custom_ops.hpp"

namespace {

std::vector<ipu::tensor_info> square_plus_shape(const ipu::infer_context& c) {
  if (c.in_type(0) != ipu::data_type::F32) throw c.fail("SquarePlus takes F32", "cast the input to float");
  return {c.input(0)};
}

void square_plus(const ipu::kernel_context& c) {
  const auto x = c.input(0).as<float>();
  const auto y = c.outputs[0].as<float>();
  const float offset = c.attr_float("offset", 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * x[i] + offset;
}

}  // namespace

extern "C" void ipu_register_custom_ops(ipu::ops::custom_op_registrar& r) {
  r.add({.domain = "plugin.ops", .type = "SquarePlus", .version = 2, .shape = square_plus_shape, .kernel = square_plus});
}
