// Placement and per-IPU memory of a plan, checked with the device memory model: hand-computed
// totals for a tiny model, views sharing storage, and the out-of-memory error's content.
#include <doctest/doctest.h>

#include <string_view>

#include "ipu/device/memory.hpp"
#include "ipu/sched/sharded_execution.hpp"
#include "plan_test_models.hpp"

namespace test_memory_plan {

namespace {
const auto mk2 = ipu::ipu_model<ipu::mk2, 1>::description();

// 64 tiles of 64 KiB: models that do not fit stay small.
struct small_ipu : ipu::mk2 {
  static constexpr std::string_view name = "small";
  static constexpr std::uint32_t tiles_per_ipu = 64;
  static constexpr std::uint64_t sram_bytes_per_tile = 64 * 1024;
};
}  // namespace

TEST_CASE("a one-op model: its input, its output and its vertex state") {
  ipu::builder b("relu");
  auto x = b.add_input_tensor({ipu::data_type::F32, {4, 8}}, "x");
  b.add_output(b.relu(x, "y"));
  const auto e = ipu::sharded_execution{}.plan(std::move(b).build(), mk2, {});
  REQUIRE(e.memory.size() == 1);
  // x and y: 32 F32 = 128 B each, mapped 2 per tile (one 64-bit vector) on 16 tiles; the Relu's
  // vertex state: 6 workers x 2 operands x 4 B = 48 B on each of its 16 tiles.
  CHECK(e.memory[0].total_bytes == 128 + 128 + 16 * 48);
  // y is placed first (tiles 0-15), then x where the previous small tensor ended (tiles 16-31); the
  // vertex state sits with the Relu's work on tiles 0-15.
  CHECK(e.memory[0].worst_tile_bytes == 8 + 48);
  CHECK(e.memory[0].worst_tile == 0);
  REQUIRE(e.placement.size() == 2);
  CHECK(e.model.tensor(e.placement[0].tensor).name == "y");
  CHECK(e.placement[0].first_tile == 0);
  CHECK(e.placement[0].num_tiles == 16);
  CHECK(e.model.tensor(e.placement[1].tensor).name == "x");
  CHECK(e.placement[1].first_tile == 16);
}

TEST_CASE("views share their input's storage") {
  ipu::builder b("view");
  auto x = b.add_input_tensor({ipu::data_type::F32, {4, 8}}, "x");
  b.add_output(b.relu(b.reshape(x, {32}, "flat"), "y"));
  const auto e = ipu::sharded_execution{}.plan(std::move(b).build(), mk2, {});
  CHECK(e.memory[0].total_bytes == 128 + 128 + 16 * 48);  // the reshape adds nothing
}

TEST_CASE("out of memory: the device model's error names the IPU, the tiles, the largest tensors and what helps") {
  // 6 layers of 512 x 512 F32 weights (1 MiB each) on a 4 MiB IPU.
  const auto g = plan_test::mlp(6, 512, 4);
  const auto small = ipu::ipu_model<small_ipu, 1>::description();
  const auto e = plan_test::error_of([&] { (void)ipu::sharded_execution{}.plan(g, small, {}); });
  CHECK(e.category() == ipu::error_category::memory);
  CHECK(e.location() == "IPU 0 of 1 x small (GC200)");
  const std::string m = e.message();
  CHECK(m.find("out of memory") != std::string::npos);
  CHECK(m.find("Fullest tiles: tile ") != std::string::npos);
  CHECK(m.find("'w0'") != std::string::npos);
  CHECK(m.find("(variable F32)") != std::string::npos);
  const std::string h = e.hint();
  CHECK(h.find("at least 2 IPUs") != std::string::npos);
  CHECK(h.find("pipelining") != std::string::npos);
  CHECK(h.find("phased execution") != std::string::npos);
  CHECK(h.find("lower precision") != std::string::npos);
  // Planning without the check reports the overflow instead.
  ipu::plan_options o;
  o.check_memory = false;
  const auto p = ipu::sharded_execution{}.plan(g, small, o);
  CHECK(p.memory[0].total_bytes > small_ipu::tiles_per_ipu * small_ipu::sram_bytes_per_tile);
  CHECK(p.memory[0].worst_tile_bytes > small_ipu::sram_bytes_per_tile);
}

TEST_CASE("FP16 halves the weights' memory") {
  const auto g = plan_test::mlp(2, 256, 4);
  const auto f32 = ipu::sharded_execution{}.plan(g, mk2, {});
  ipu::plan_options o;
  o.precision = ipu::data_type::F16;
  const auto f16 = ipu::sharded_execution{}.plan(g, mk2, o);
  CHECK(f16.memory[0].total_bytes < f32.memory[0].total_bytes);
  CHECK(f32.memory[0].total_bytes - f16.memory[0].total_bytes >= 2 * 256 * 256 * 2);  // the weights alone
  CHECK(f16.precision == ipu::data_type::F16);
}

}  // namespace test_memory_plan
