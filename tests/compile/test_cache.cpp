// The executable cache: a second compile is served from the cache; a damaged or stale entry is
// detected, rebuilt and replaced; the key follows the model, the options and the device.
#include <doctest/doctest.h>

#include <cstdlib>

#include "ipu/onnx/import.hpp"
#include "ipu/compile/cache.hpp"
#include "../popef/popef_test_util.hpp"

using namespace ipu;
namespace fs = std::filesystem;

namespace {
graph transformer() { return ipu::onnx::load_model(fs::path(IPU_TEST_MODELS) / "transformer_encoder.onnx"); }

options cached(const fs::path& dir) {
  return options().execution_strategy(strategy_settings::sharded()).enable_executable_caching(dir.string());
}

std::size_t entries(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".popef";
  return n;
}
}  // namespace

TEST_CASE("the second compile is served from the cache") {
  test_popef::scratch_dir dir("cache");
  const auto g = transformer();
  const auto device = device_from_name("mk2", 1);
  const auto first = popef::compile_cached(g, cached(dir.path()), device);
  CHECK_FALSE(first.hit);
  CHECK(fs::exists(first.file));
  CHECK(first.file.parent_path() == dir.path());
  const auto second = popef::compile_cached(g, cached(dir.path()), device);
  CHECK(second.hit);
  CHECK(second.file == first.file);
  CHECK(second.model.plan == first.model.plan);
  CHECK(second.model.metadata == first.model.metadata);
  CHECK(entries(dir.path()) == 1);  // and no temporary files left behind
  std::size_t all = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) all += !e.path().empty();
  CHECK(all == 1);
}

TEST_CASE("the key follows the options, the device and the weights") {
  test_popef::scratch_dir dir("keys");
  const auto g = transformer();
  const auto device = device_from_name("mk2", 1);
  const popef::compile_options co;
  const auto base = popef::executable_cache::key(g, cached(dir.path()), device, co);
  CHECK(base.size() == 32);
  CHECK(base == popef::executable_cache::key(g, cached(dir.path()), device, co));
  CHECK(base != popef::executable_cache::key(g, cached(dir.path()).device_iterations(2), device, co));
  CHECK(base != popef::executable_cache::key(g, cached(dir.path()), device_from_name("bow", 1), co));
  graph changed = g;
  for (tensor_id t = 0; t < changed.num_tensors(); ++t)
    if (changed.tensor(t).kind == tensor_kind::variable) {
      auto bytes = std::vector<std::byte>(changed.tensor(t).data.bytes().begin(), changed.tensor(t).data.bytes().end());
      bytes[0] ^= std::byte{1};  // one bit of one weight
      changed.tensor(t).data = byte_buffer(std::move(bytes));
      break;
    }
  CHECK(base != popef::executable_cache::key(changed, cached(dir.path()), device, co));
}

TEST_CASE("a damaged cache entry is rebuilt and replaced") {
  test_popef::scratch_dir dir("damaged");
  const auto g = transformer();
  const auto device = device_from_name("mk2", 1);
  const auto first = popef::compile_cached(g, cached(dir.path()), device);
  REQUIRE(fs::exists(first.file));
  SUBCASE("a flipped byte") {
    auto bytes = test_popef::read_bytes(first.file);
    bytes[bytes.size() / 2] ^= std::byte{0x40};
    test_popef::write_bytes(first.file, bytes);
  }
  SUBCASE("a truncated entry") {
    auto bytes = test_popef::read_bytes(first.file);
    bytes.resize(bytes.size() / 3);
    test_popef::write_bytes(first.file, bytes);
  }
  SUBCASE("an empty entry") { test_popef::write_bytes(first.file, {}); }
  SUBCASE("an entry of another model under this key") {
    const auto other = options().execution_strategy(strategy_settings::sharded()).device_iterations(5);
    (void)popef::compile_and_export(g, other, device, first.file);
  }
  const auto again = popef::compile_cached(g, cached(dir.path()), device);
  CHECK_FALSE(again.hit);  // detected
  CHECK(again.model.plan == first.model.plan);
  const auto third = popef::compile_cached(g, cached(dir.path()), device);
  CHECK(third.hit);  // replaced by a good entry
  CHECK(third.model.plan == first.model.plan);
}

TEST_CASE("IPU_CACHE_DIR names the cache when the options do not") {
  test_popef::scratch_dir dir("env");
  const auto g = transformer();
  ::setenv("IPU_CACHE_DIR", dir.path().c_str(), 1);
  const auto opts = options().execution_strategy(strategy_settings::sharded());
  const auto first = popef::compile_cached(g, opts, device_from_name("mk2", 1));
  const auto second = popef::compile_cached(g, opts, device_from_name("mk2", 1));
  ::unsetenv("IPU_CACHE_DIR");
  CHECK_FALSE(first.hit);
  CHECK(second.hit);
  CHECK(first.file.parent_path() == dir.path());
  const auto off = popef::compile_cached(g, opts, device_from_name("mk2", 1));
  CHECK_FALSE(off.hit);
  CHECK(off.file.empty());
}

TEST_CASE("an unwritable cache directory only costs the caching") {
  test_popef::scratch_dir dir("unwritable");
  const auto blocker = dir / "file";
  test_popef::write_bytes(blocker, test_popef::pattern(3));
  const auto g = transformer();
  // The cache "directory" is a regular file: nothing can be written under it.
  const auto r = popef::compile_cached(g, cached(blocker / "sub"), device_from_name("mk2", 1));
  CHECK_FALSE(r.hit);
  CHECK_FALSE(fs::exists(r.file));
  CHECK(r.model.plan.model.num_ops() == g.num_ops());
}
