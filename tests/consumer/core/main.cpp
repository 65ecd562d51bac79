// Builds a four-layer model with the installed headers and plans it over four Mk2 IPUs, once at
// compile time (static_assert) and once at run time; the two plans must agree.
#include <ipu/builder/builder.hpp>
#include <ipu/sched/pipelined_execution.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace {

using mk2x4 = ipu::ipu_model<ipu::mk2, 4>;

constexpr ipu::graph model() {
  ipu::builder b("consumer");
  auto x = b.add_input_tensor({ipu::data_type::F32, {8, 16}}, "x");
  for (std::int64_t i = 0; i < 4; ++i) {
    auto scope = b.block(std::string("layer") + static_cast<char>('0' + i), i);
    auto w = b.add_initialized_input(ipu::make_constant<float>({16, 16}, std::vector<float>(16 * 16, 0.01f)));
    x = b.relu(b.matmul(x, w));
  }
  b.add_output(x);
  return std::move(b).build();
}

constexpr ipu::plan_options options() {
  ipu::plan_options o;
  o.batches_per_step = 8;
  return o;
}

constexpr std::size_t planned_stages = ipu::pipelined_execution{}.plan(model(), mk2x4::description(), options()).stages.size();
static_assert(planned_stages == 4, "ipu: each block should be its own pipeline stage");

}  // namespace

int main() {
  const auto plan = ipu::pipelined_execution{}.plan(model(), mk2x4::description(), options());
  std::printf("consumer (ipu::core): %zu stages planned at run time, %zu at compile time, %.0f samples/s predicted\n",
              plan.stages.size(), planned_stages, plan.predicted.samples_per_second);
  return plan.stages.size() == planned_stages && plan.predicted.samples_per_second > 0 ? 0 : 1;
}
