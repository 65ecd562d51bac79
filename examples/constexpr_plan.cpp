// A model written in C++ and planned for four Mk2 IPUs inside a constant expression: the compiler
// checks that the pipeline fits in tile memory and meets a throughput target, before the program
// exists. (The planning runs the same code as at run time; GCC needs a larger constexpr budget for
// it, see examples/CMakeLists.txt.)
#include <cstdio>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/sharded_execution.hpp"

namespace {

using mk2x4 = ipu::ipu_model<ipu::mk2, 4>;

/// A 4-block MLP, PopTorch style: each block in a `Block(name, ipu)` scope, AutoStage SameAsIpu
/// making each block a pipeline stage.
constexpr ipu::graph model() {
  ipu::builder b("mlp4");
  auto x = b.add_input_tensor({ipu::data_type::F32, {8, 32}}, "x");
  for (std::int64_t i = 0; i < 4; ++i) {
    std::string block = "layer";
    block += static_cast<char>('0' + i);
    auto scope = b.block(block, i);
    auto w = b.add_initialized_input(ipu::make_constant<float>({32, 32}, std::vector<float>(32 * 32, 0.01f)));
    x = b.relu(b.matmul(x, w));
  }
  b.add_output(x);
  return std::move(b).build();
}

constexpr ipu::plan_options options() {
  ipu::plan_options o;
  o.batches_per_step = 16;  // 16 micro-batches per step: enough to fill 4 stages
  return o;
}

struct summary {
  std::size_t stages = 0;
  bool fits = true;
  double samples_per_second = 0;
  double bubble = 0;
  std::uint64_t worst_tile_bytes = 0;
};

constexpr summary summarise(const ipu::executable& e) {
  summary s;
  s.stages = e.stages.size();
  for (const auto& m : e.memory) {
    s.fits = s.fits && m.worst_tile_bytes <= mk2x4::sram_bytes_per_tile;
    s.worst_tile_bytes = s.worst_tile_bytes > m.worst_tile_bytes ? s.worst_tile_bytes : m.worst_tile_bytes;
  }
  s.samples_per_second = e.predicted.samples_per_second;
  s.bubble = e.predicted.pipeline_bubble;
  return s;
}

// Planned at compile time. An annotation error or an out-of-memory tile would be a compile error.
constexpr summary pipelined = summarise(ipu::pipelined_execution{}.plan(model(), mk2x4::description(), options()));
constexpr summary sharded = summarise(ipu::sharded_execution{}.plan(model(), mk2x4::description(), options()));

static_assert(pipelined.stages == 4, "ipu: each block should be its own pipeline stage");
static_assert(pipelined.fits, "ipu: the pipeline must fit in tile memory");
static_assert(pipelined.bubble > 0.157 && pipelined.bubble < 0.158, "ipu: bubble = (S - 1) / (M + S - 1) = 3 / 19");
static_assert(pipelined.samples_per_second > 1e6, "ipu: the target is at least a million samples per second");
static_assert(pipelined.samples_per_second > 2 * sharded.samples_per_second,
              "ipu: pipelining should more than double the sharded throughput");

}  // namespace

int main() {
  std::printf("pipelined over 4 x mk2: %zu stages, worst tile %llu B, bubble %.3f, %.0f samples/s (sharded: %.0f)\n",
              pipelined.stages, static_cast<unsigned long long>(pipelined.worst_tile_bytes), pipelined.bubble,
              pipelined.samples_per_second, sharded.samples_per_second);
}
