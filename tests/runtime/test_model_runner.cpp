// The model runner on a small two-input, two-output model compiled for simulated IPUs (sharded
// on one IPU and pipelined over two, several batches per step) and loaded from a PopEF file:
// outputs against values computed by hand, input checks, and 8 client threads whose every
// response is checked against its own request.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ipu/device/device_model.hpp"
#include "ipu/builder/builder.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/runtime/model_runner.hpp"

namespace test_model_runner {

using namespace ipu;
namespace fs = std::filesystem;

namespace {

// s = a + b, p = relu(s * b - a): enough ops for the automatic planner to make two pipeline stages.
graph small_model() {
  builder b("small");
  const auto a = b.add_input_tensor({data_type::F32, {3}}, "a");
  const auto x = b.add_input_tensor({data_type::F32, {3}}, "b");
  const auto s = b.add(a, x, "s");
  const auto p = b.relu(b.sub(b.mul(s, x), a), "p");
  b.add_output(s);
  b.add_output(p);
  return std::move(b).build();
}

std::vector<float> a_of(int i) { return {float(i), float(i) + 1, -float(i)}; }
std::vector<float> b_of(int i) { return {0.5f, float(i % 7), 2.0f}; }
float relu(float v) { return v > 0 ? v : 0; }

popef::compiled_model compiled(bool pipelined, std::int64_t batches_per_step) {
  auto o = options().device_iterations(batches_per_step);
  o.execution_strategy(pipelined ? strategy_settings::pipelined() : strategy_settings::sharded());
  return popef::compile(small_model(), o, device_from_name("mk2", pipelined ? 2 : 1));
}

runtime::model_runner_config config() {
  runtime::model_runner_config c;
  c.acquire_device = false;  // tests share the simulated system with other processes
  return c;
}

/// Runs request i and checks both outputs; returns false on a mismatch.
bool check_request(runtime::model_runner& r, int i) {
  const auto av = a_of(i), bv = b_of(i);
  const auto a = host_tensor::from<float>({3}, av), b = host_tensor::from<float>({3}, bv);
  auto f = r.execute_async({{"a", a.view()}, {"b", b.view()}});
  const auto s = f.at("s").get(), p = f.at("p").get();
  bool ok = true;
  for (std::size_t k = 0; k < 3; ++k) {
    ok = ok && s.as<float>()[k] == av[k] + bv[k];
    ok = ok && p.as<float>()[k] == relu((av[k] + bv[k]) * bv[k] - av[k]);
  }
  return ok;
}

}  // namespace

TEST_CASE("execute returns the model's outputs for one request") {
  for (bool pipelined : {false, true}) {
    CAPTURE(pipelined);
    runtime::model_runner r(compiled(pipelined, 4), config());
    CHECK(r.requests_per_step() == 4);
    const auto a = host_tensor::from<float>({3}, {1.f, 2.f, 3.f});
    const auto b = host_tensor::from<float>({3}, {4.f, -5.f, 0.5f});
    auto out = r.execute({{"a", a.view()}, {"b", b.view()}});
    REQUIRE(out.size() == 2);
    const auto s = out.at("s").as<float>(), p = out.at("p").as<float>();
    CHECK(s[0] == 5.f);
    CHECK(s[1] == -3.f);
    CHECK(s[2] == 3.5f);
    CHECK(p[0] == 19.f);  // 5 * 4 - 1
    CHECK(p[1] == 13.f);  // -3 * -5 - 2
    CHECK(p[2] == 0.f);   // relu(3.5 * 0.5 - 3)
    CHECK(r.requests_served() == 1);
  }
}

TEST_CASE("keep_timeline keeps the last step's host timeline, one lane per pipeline stage") {
  {
    runtime::model_runner r(compiled(true, 4), config());
    CHECK(check_request(r, 1));
    CHECK(r.last_timeline().empty());  // not kept by default
  }
  auto c = config();
  c.keep_timeline = true;
  runtime::model_runner r(compiled(true, 4), c);
  CHECK(r.last_timeline().empty());  // no step yet
  CHECK(check_request(r, 1));
  const auto t = r.last_timeline();
  std::set<std::uint32_t> stages, workers;
  std::set<std::uint64_t> micro_batches;
  for (const auto& e : t.events())
    if (e.kind == step_kind::compute) {
      stages.insert(e.stage);
      workers.insert(e.worker);
      micro_batches.insert(e.micro_batch);
      CHECK(e.worker == e.stage);  // a pipelined step's lanes are its stages
    }
  CHECK(stages == std::set<std::uint32_t>{0, 1});
  CHECK(workers.size() == 2);
  CHECK(micro_batches.size() == 4);  // the padded step ran every micro-batch
}

TEST_CASE("a runner loads a PopEF file") {
  const auto dir = fs::temp_directory_path() / ("ipu_runtime_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto o = options().device_iterations(2).execution_strategy(strategy_settings::pipelined());
  (void)popef::compile_and_export(small_model(), o, device_from_name("mk2", 2), dir / "small.popef");
  {
    runtime::model_runner r(dir / "small.popef", config());
    CHECK(r.plan().device.num_ipus == 2);
    for (int i = 0; i < 5; ++i) CHECK(check_request(r, i));
  }
  fs::remove_all(dir);
}

TEST_CASE("bad requests are rejected before they are queued") {
  runtime::model_runner r(compiled(false, 2), config());
  const auto a = host_tensor::from<float>({3}, {1.f, 2.f, 3.f});
  const auto wrong = host_tensor::from<float>({4}, {1.f, 2.f, 3.f, 4.f});
  CHECK_THROWS_WITH_AS(r.execute({{"a", a.view()}}), doctest::Contains("no tensor for input 'b'"), error);
  CHECK_THROWS_WITH_AS(r.execute({{"a", a.view()}, {"b", a.view()}, {"c", a.view()}}),
                       doctest::Contains("'c' is not an input"), error);
  CHECK_THROWS_WITH_AS(r.execute({{"a", a.view()}, {"b", wrong.view()}}), doctest::Contains("input 'b' is F32[4]"),
                       error);
  auto c = config();
  c.validate_io = false;  // the queues still check the byte size
  runtime::model_runner unchecked(compiled(false, 2), c);
  CHECK_THROWS_WITH_AS(unchecked.execute({{"a", a.view()}, {"b", wrong.view()}}),
                       doctest::Contains("expects 12 bytes but received 16"), error);
  CHECK(check_request(r, 3));  // still serving
}

TEST_CASE("a zero ring-buffer multiplier is rejected") {
  auto c = config();
  c.ring_buffer_size_multiplier = 0;
  CHECK_THROWS_AS(runtime::model_runner(compiled(false, 1), c), error);
}

TEST_SUITE("concurrent") {
  TEST_CASE("8 client threads through one runner: every response matches its request") {
    for (bool pipelined : {false, true}) {
      CAPTURE(pipelined);
      runtime::model_runner r(compiled(pipelined, 4), config());
      constexpr int clients = 8, per_client = 40;
      std::atomic<int> wrong{0};
      std::vector<std::thread> threads;
      for (int c = 0; c < clients; ++c)
        threads.emplace_back([&, c] {
          for (int i = 0; i < per_client; ++i)
            if (!check_request(r, c * 1000 + i)) ++wrong;
        });
      for (auto& t : threads) t.join();
      CHECK(wrong == 0);
      CHECK(r.requests_served() == clients * per_client);
    }
  }

  TEST_CASE("many requests in flight per client thread") {
    runtime::model_runner r(compiled(true, 4), config());
    constexpr int clients = 8, per_client = 24;
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c)
      threads.emplace_back([&, c] {
        std::vector<host_tensor> as, bs;
        std::vector<runtime::future_map> futures;
        for (int i = 0; i < per_client; ++i) {
          as.push_back(host_tensor::from<float>({3}, a_of(c * 100 + i)));
          bs.push_back(host_tensor::from<float>({3}, b_of(c * 100 + i)));
        }
        for (int i = 0; i < per_client; ++i) {
          const auto k = static_cast<std::size_t>(i);
          futures.push_back(r.execute_async({{"a", as[k].view()}, {"b", bs[k].view()}}));
        }
        for (int i = 0; i < per_client; ++i) {
          const auto k = static_cast<std::size_t>(i);
          const auto s = futures[k].at("s").get();
          const auto av = a_of(c * 100 + i), bv = b_of(c * 100 + i);
          for (std::size_t j = 0; j < 3; ++j)
            if (s.as<float>()[j] != av[j] + bv[j]) ++wrong;
          (void)futures[k].at("p").get();
        }
      });
    for (auto& t : threads) t.join();
    CHECK(wrong == 0);
  }
}

}  // namespace test_model_runner
