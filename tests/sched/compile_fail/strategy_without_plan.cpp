// Must not compile: an execution strategy plans. Checked by tests/compile_fail.cmake.
#include <string_view>

#include "ipu/exec/executor.hpp"

struct my_strategy {
  using strategy_concept = ipu::execution_strategy_tag;
  using schedule = ipu::pipelined_schedule;
  static constexpr std::string_view name = "mine";
};

int main() { return sizeof(ipu::executor<my_strategy, ipu::ipu_model<ipu::mk2, 1>>) > 0 ? 0 : 1; }
