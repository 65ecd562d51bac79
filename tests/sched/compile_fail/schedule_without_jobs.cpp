// Must not compile: a schedule adds the jobs of a step. Checked by tests/compile_fail.cmake.
#include <cstddef>
#include <string_view>

#include "ipu/exec/executor.hpp"

struct my_schedule {
  using schedule_concept = ipu::schedule_tag;
  static constexpr std::string_view name = "mine";
  static constexpr ipu::schedule_kind kind = ipu::schedule_kind::sequential;
  std::size_t workers_per_replica(const ipu::exec::engine_base&) const { return 1; }
};

struct my_strategy {
  using strategy_concept = ipu::execution_strategy_tag;
  using schedule = my_schedule;
  static constexpr std::string_view name = "mine";
  ipu::executable plan(const ipu::graph&, const ipu::device_description&, const ipu::plan_options&) const { return {}; }
};

int main() { return sizeof(ipu::executor<my_strategy, ipu::ipu_model<ipu::mk2, 1>>) > 0 ? 0 : 1; }
