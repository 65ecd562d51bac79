// Must not compile: an execution strategy names the schedule its plans run with. Checked by
// tests/compile_fail.cmake.
#include <string_view>

#include "ipu/exec/executor.hpp"

struct my_strategy {
  using strategy_concept = ipu::execution_strategy_tag;
  static constexpr std::string_view name = "mine";
  ipu::executable plan(const ipu::graph&, const ipu::device_description&, const ipu::plan_options&) const { return {}; }
};

int main() { return sizeof(ipu::executor<my_strategy, ipu::ipu_model<ipu::mk2, 1>>) > 0 ? 0 : 1; }
