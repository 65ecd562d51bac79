// The executable cache: a second compile is served from the cache; a damaged or stale entry is
// detected, rebuilt and replaced; the key follows the model, the options and the device but not
// the cache's own directory; every way to compile (compile, compile_and_export, the inference
// session) and every way to name the cache (options, IPU_CACHE_DIR, POPTORCH_CACHE_DIR) uses it;
// threads compiling into one directory leave one good entry.
#include <doctest/doctest.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../runtime/small_model.hpp"
#include "../captured_log.hpp"
#include "../scoped_env.hpp"
#include "ipu/log.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/compile/cache.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/popart/inference_session.hpp"
#include "../popef/popef_test_util.hpp"

namespace test_cache {

using namespace ipu;
namespace fs = std::filesystem;

namespace {
using runtime_test::small_model;

graph transformer() { return ipu::onnx::load_model(fs::path(IPU_TEST_MODELS) / "transformer_encoder.onnx"); }

using ipu_test::captured_log;
using ipu_test::scoped_env;

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
  // What only changes how compiling looks (the progress bar, where it is drawn) is not in the key.
  popef::compile_options drawn;
  drawn.progress = [](const popef::compile_progress&) {};
  CHECK(base == popef::executable_cache::key(g, cached(dir.path()).show_compilation_progress_bar(false), device, drawn));
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
  const auto good = test_popef::read_bytes(first.file);
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
  SUBCASE("a good entry recording another key") {
    auto m = popef::load(first.file);
    REQUIRE(m.metadata.engine_options.at("ipu.cache_key") == first.file.stem().string());
    m.metadata.engine_options["ipu.cache_key"] = std::string(32, '0');
    popef::export_model(m, dir / "other.popef");
    fs::rename(dir / "other.popef", first.file);
  }
  REQUIRE(test_popef::read_bytes(first.file) != good);
  captured_log log(log::level::warn);
  const auto again = popef::compile_cached(g, cached(dir.path()), device);
  CHECK_FALSE(again.hit);  // detected
  CHECK(again.stored);
  CHECK(log.count("executable cache entry " + first.file.string()) == 1);  // and said so
  CHECK(again.model.plan == first.model.plan);
  CHECK(test_popef::read_bytes(first.file) == good);  // the rebuilt entry is the original's bytes
  CHECK(entries(dir.path()) == 1);
  const auto third = popef::compile_cached(g, cached(dir.path()), device);
  CHECK(third.hit);  // replaced by a good entry
  CHECK(third.model.plan == first.model.plan);
}

TEST_CASE("IPU_CACHE_DIR and POPTORCH_CACHE_DIR name the cache when the options do not") {
  test_popef::scratch_dir dir("env");
  const auto g = small_model();
  const auto device = device_from_name("mk2", 1);
  const auto opts = options().execution_strategy(strategy_settings::sharded());
  const auto env_dir = (dir / "env").string(), other_dir = (dir / "other").string();
  std::optional<scoped_env> ipu_name, poptorch_name;
  SUBCASE("IPU_CACHE_DIR") {
    ipu_name.emplace("IPU_CACHE_DIR", env_dir.c_str());
    poptorch_name.emplace("POPTORCH_CACHE_DIR", nullptr);
  }
  SUBCASE("POPTORCH_CACHE_DIR") {
    ipu_name.emplace("IPU_CACHE_DIR", nullptr);
    poptorch_name.emplace("POPTORCH_CACHE_DIR", env_dir.c_str());
  }
  SUBCASE("both: IPU_CACHE_DIR wins, as in apply_environment") {
    ipu_name.emplace("IPU_CACHE_DIR", env_dir.c_str());
    poptorch_name.emplace("POPTORCH_CACHE_DIR", other_dir.c_str());
  }
  SUBCASE("an empty IPU_CACHE_DIR counts as unset") {
    ipu_name.emplace("IPU_CACHE_DIR", "");
    poptorch_name.emplace("POPTORCH_CACHE_DIR", env_dir.c_str());
  }
  // The cache and apply_environment read the same variables the same way.
  REQUIRE(options(opts).apply_environment().executable_cache_dir() == env_dir);
  const auto first = popef::compile_cached(g, opts, device);
  const auto second = popef::compile_cached(g, opts, device);
  CHECK_FALSE(first.hit);
  CHECK(second.hit);
  CHECK(first.file.parent_path() == fs::path(env_dir));
  CHECK_FALSE(fs::exists(other_dir));
  // The options' own directory wins over the environment.
  const auto own = popef::compile_cached(g, cached(dir / "own"), device);
  CHECK(own.file.parent_path() == dir / "own");
  CHECK(own.file.filename() == first.file.filename());  // the same key: the directory is not in it
}

TEST_CASE("without a cache directory nothing is cached") {
  scoped_env a("IPU_CACHE_DIR", nullptr), b("POPTORCH_CACHE_DIR", "");
  const auto off = popef::compile_cached(small_model(), options(), device_from_name("mk2", 1));
  CHECK_FALSE(off.hit);
  CHECK_FALSE(off.stored);
  CHECK(off.file.empty());
}

TEST_CASE("an unwritable cache directory only costs the caching") {
  test_popef::scratch_dir dir("unwritable");
  const auto blocker = dir / "file";
  test_popef::write_bytes(blocker, test_popef::pattern(3));
  const auto g = transformer();
  // The cache directory is under a regular file: it cannot be made, nothing can be written.
  captured_log log(log::level::warn);
  const auto r = popef::compile_cached(g, cached(blocker / "sub"), device_from_name("mk2", 1));
  CHECK_FALSE(r.hit);
  CHECK_FALSE(r.stored);
  CHECK_FALSE(fs::exists(r.file));
  CHECK(log.count("cannot write cache entry in " + (blocker / "sub").string()) == 1);
  CHECK(r.model.plan.model.num_ops() == g.num_ops());
}

TEST_CASE("a cache path that is empty or a regular file is refused") {
  test_popef::scratch_dir dir("refused");
  const auto file = dir / "file";
  test_popef::write_bytes(file, test_popef::pattern(3));
  const auto g = small_model();
  const auto device = device_from_name("mk2", 1);
  auto refused = [](auto&& f, std::string_view what, std::string_view where) {
    try {
      f();
    } catch (const ipu::error& e) {
      CHECK(e.category() == error_category::usage);
      CHECK(e.message().find(what) != std::string::npos);
      CHECK(e.location() == where);
      return;
    }
    FAIL("not refused");
  };
  refused([&] { (void)popef::executable_cache(""); }, "is empty", "executable cache");
  refused([&] { (void)popef::compile_cached(g, cached(file), device); }, "'" + file.string() + "' is a regular file",
          "enable_executable_caching");
  refused([&] { (void)popef::compile(g, cached(file), device); }, "is a regular file", "enable_executable_caching");
  {
    scoped_env a("IPU_CACHE_DIR", nullptr), b("POPTORCH_CACHE_DIR", file.c_str());
    refused([&] { (void)popef::compile_cached(g, options(), device); }, "is a regular file",
            "IPU_CACHE_DIR / POPTORCH_CACHE_DIR");
  }
  CHECK(test_popef::read_bytes(file) == test_popef::pattern(3));  // untouched
}

TEST_CASE("the cache directory changes neither the key nor the executable") {
  test_popef::scratch_dir dir("placeless");
  scoped_env a("IPU_CACHE_DIR", nullptr), b("POPTORCH_CACHE_DIR", nullptr);
  const auto g = transformer();
  const auto device = device_from_name("mk2", 1);
  const popef::compile_options co;
  const auto plain = options().execution_strategy(strategy_settings::sharded());
  const auto key = popef::executable_cache::key(g, plain, device, co);
  CHECK(popef::executable_cache::key(g, cached(dir / "a"), device, co) == key);
  CHECK(popef::executable_cache::key(g, cached(dir / "b"), device, co) == key);
  // Exported: uncached, a miss and a hit give one file, byte for byte.
  popef::export_model(popef::compile(g, plain, device), dir / "plain.popef");
  const auto miss = popef::compile_cached(g, cached(dir / "a"), device);
  const auto hit = popef::compile_cached(g, cached(dir / "a"), device);
  REQUIRE_FALSE(miss.hit);
  REQUIRE(hit.hit);
  CHECK(miss.file.stem() == key);
  popef::export_model(miss.model, dir / "miss.popef");
  popef::export_model(hit.model, dir / "hit.popef");
  const auto bytes = test_popef::read_bytes(dir / "plain.popef");
  CHECK(test_popef::read_bytes(dir / "miss.popef") == bytes);
  CHECK(test_popef::read_bytes(dir / "hit.popef") == bytes);
  // The entry itself differs only in recording its key.
  CHECK(popef::load(miss.file).metadata.engine_options.at("ipu.cache_key") == key);
  CHECK_FALSE(hit.model.metadata.engine_options.contains("ipu.cache_key"));
  CHECK(popef::load(dir / "plain.popef").metadata.engine_options.at("ipu.options").find("Caching") == std::string::npos);
}

TEST_CASE("compile and compile_and_export go through the cache") {
  test_popef::scratch_dir dir("driver");
  const auto g = small_model();
  const auto device = device_from_name("mk2", 1);
  const auto opts = cached(dir / "cache");
  const auto first = popef::compile(g, opts, device);
  REQUIRE(entries(dir / "cache") == 1);
  const auto key = popef::executable_cache::key(g, opts, device, {});
  // Mark the entry (a valid entry under its key), so a later compile served from it shows.
  const popef::executable_cache cache(dir / "cache");
  auto marked = popef::load(cache.entry(key));
  marked.metadata.engine_options["test.marker"] = "from the cache";
  REQUIRE(cache.store(key, marked));
  CHECK(popef::compile(g, opts, device).metadata.engine_options.at("test.marker") == "from the cache");
  const auto exported = popef::compile_and_export(g, opts, device, dir / "out.popef");
  CHECK(exported.metadata.engine_options.at("test.marker") == "from the cache");
  CHECK(popef::load(dir / "out.popef").metadata.engine_options.at("test.marker") == "from the cache");
  CHECK(exported.plan == first.plan);
  CHECK(entries(dir / "cache") == 1);
}

TEST_CASE("an inference session with caching options compiles through the cache") {
  test_popef::scratch_dir dir("session");
  const data_flow flow(2, {"y", "z"}, anchor_return_type::all());
  auto run = [&](runtime::inference_session& s) {
    s.prepare_device();
    auto anchors = s.init_anchor_arrays();
    const auto x = host_tensor::from<float>({2, 3}, {1.f, -2.f, 4.f, 3.f, 0.5f, -1.f});
    step_io io({{"x", x.view()}}, anchors);
    s.run(io);
    return anchors;
  };
  runtime::inference_session first(small_model(), flow, device_from_name("mk2", 1), cached(dir / "cache"));
  const auto a = run(first);
  CHECK_FALSE(first.is_from_cache());
  CHECK(entries(dir / "cache") == 1);
  runtime::inference_session second(small_model(), flow, device_from_name("mk2", 1), cached(dir / "cache"));
  const auto b = run(second);
  CHECK(second.is_from_cache());
  CHECK(second.executable().plan == first.executable().plan);
  auto values = [](const host_tensor& t) {
    const auto v = t.as<float>();
    return std::vector<float>(v.begin(), v.end());
  };
  for (const auto* name : {"y", "z"}) CHECK(values(a.at(name)) == values(b.at(name)));
  // y = relu(x * w0 + b0) for the first sample, by hand: relu(2 + 1), relu(2 + 1), relu(2 - 4).
  const auto y = values(b.at("y"));
  REQUIRE(y.size() == 6);
  CHECK(std::vector<float>(y.begin(), y.begin() + 3) == std::vector<float>{3.f, 3.f, 0.f});
  // compile_and_export of a third session: served from the cache, the file a fresh compile writes.
  runtime::inference_session third(small_model(), flow, device_from_name("mk2", 1), cached(dir / "cache"));
  third.compile_and_export(dir / "third.popef");
  CHECK(third.is_from_cache());
  runtime::inference_session plain(small_model(), flow, device_from_name("mk2", 1),
                                   options().execution_strategy(strategy_settings::sharded()));
  plain.compile_and_export(dir / "plain.popef");
  CHECK_FALSE(plain.is_from_cache());
  CHECK(test_popef::read_bytes(dir / "third.popef") == test_popef::read_bytes(dir / "plain.popef"));
}

TEST_CASE("threads compiling one model into one cache directory leave one good entry") {
  test_popef::scratch_dir dir("threads");
  const auto g = transformer();
  const auto device = device_from_name("mk2", 1);
  const auto opts = cached(dir.path());
  const auto expected = popef::compile_uncached(g, opts, device);
  constexpr int n = 4;
  std::vector<popef::cache_result> results(n);
  std::vector<std::string> errors(n);
  captured_log log(log::level::warn);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        try {
          results[static_cast<std::size_t>(i)] = popef::compile_cached(g, opts, device);
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(i)] = e.what();
        }
      });
  }
  const auto key = popef::executable_cache::key(g, opts, device, {});
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(errors[static_cast<std::size_t>(i)].empty());
    CHECK(results[static_cast<std::size_t>(i)].model.plan == expected.plan);
    CHECK(results[static_cast<std::size_t>(i)].file == dir / (key + ".popef"));
  }
  CHECK(log.count("popef:") == 0);  // every store succeeded: no two writers shared a temporary file
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) files += !e.path().empty();
  CHECK(files == 1);  // no temporary files left
  const auto entry = popef::load(dir / (key + ".popef"));
  CHECK(entry.metadata.engine_options.at("ipu.cache_key") == key);
  CHECK(entry.plan == expected.plan);
  CHECK(popef::compile_cached(g, opts, device).hit);
}

}  // namespace test_cache
