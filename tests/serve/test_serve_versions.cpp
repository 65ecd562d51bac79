// What the KServe v2 server does with its devices, its model versions and a request's timeout, over
// HTTP (gRPC's side is in test_grpc_server.cpp): every version served reserves its own simulated
// device, and one that gets none is unavailable with a reason naming what it asked for and who holds
// the IPUs until a load retries it; config.json's version_policy chooses the versions served side by
// side, each addressed by /versions/<v>; the request parameter "timeout" overrides the model's.
#include <doctest/doctest.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include "ipu/serve/http_server.hpp"
#include "ipu/serve/model_config.hpp"
#include "ipu/serve/model_repository.hpp"
#include "serve_test_models.hpp"

namespace test_serve_versions {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// A private simulated system for the runners of this scope (IPU_SYSTEM, IPU_DEVICE_LOCK_DIR), the
/// variables restored after: the default lock directory is shared with other processes.
struct simulated_system {
  fs::path locks;
  std::optional<std::string> old_system, old_dir;
  simulated_system(const std::string& system, const std::string& tag)
      : locks(fs::temp_directory_path() / ("ipu_serve_locks_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(locks);
    if (const char* v = std::getenv("IPU_SYSTEM")) old_system = v;
    if (const char* v = std::getenv("IPU_DEVICE_LOCK_DIR")) old_dir = v;
    ::setenv("IPU_SYSTEM", system.c_str(), 1);
    ::setenv("IPU_DEVICE_LOCK_DIR", locks.c_str(), 1);
  }
  ~simulated_system() {
    if (old_system) ::setenv("IPU_SYSTEM", old_system->c_str(), 1);
    else ::unsetenv("IPU_SYSTEM");
    if (old_dir) ::setenv("IPU_DEVICE_LOCK_DIR", old_dir->c_str(), 1);
    else ::unsetenv("IPU_DEVICE_LOCK_DIR");
    std::error_code ec;
    fs::remove_all(locks, ec);
  }
};

/// Adds a model (or a version) to a repository: a copy of the serve tests' model, optionally a config.
inline void add_version(const fs::path& repo, const std::string& model, const std::string& version) {
  fs::create_directories(repo / model / version);
  fs::copy_file(repo / "rows" / "1" / "model.popef", repo / model / version / "model.popef", fs::copy_options::overwrite_existing);
}
inline void write_config(const fs::path& repo, const std::string& model, const std::string& config) {
  std::ofstream(repo / model / "config.json") << config;
}

/// Removes a test's repository directory when the test ends.
struct remove_on_exit {
  fs::path dir;
  explicit remove_on_exit(fs::path d) : dir(std::move(d)) {}
  remove_on_exit(const remove_on_exit&) = delete;
  remove_on_exit& operator=(const remove_on_exit&) = delete;
  ~remove_on_exit() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

/// A repository served over HTTP on an ephemeral port; the models are loaded by the test.
struct server {
  fs::path dir;
  ipu::serve::model_repository repo;
  ipu::serve::http_server http;
  httplib::Client client;
  server(fs::path d, ipu::serve::repository_options o)
      : dir(std::move(d)), repo(dir, std::move(o)), http(repo, {}), client("127.0.0.1", start(http)) {
    client.set_read_timeout(30, 0);
  }
  static int start(ipu::serve::http_server& s) {
    s.start();
    return s.port();
  }
  ~server() {
    http.stop();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  /// Status and parsed body of a GET (no body) or POST.
  std::pair<int, json> call(const std::string& path, const std::optional<json>& body = std::nullopt) {
    auto r = body ? client.Post(path.c_str(), body->dump(), "application/json") : client.Get(path.c_str());
    REQUIRE(r);
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  std::pair<int, json> post(const std::string& path) { return call(path, json::object()); }
  /// The repository index's entry for a model version ("" for a model unavailable as a whole).
  json entry(const std::string& model, const std::string& version) {
    const auto [status, index] = post("/v2/repository/index");
    REQUIRE(status == 200);
    for (const auto& e : index)
      if (e["name"] == model && e.value("version", "") == version) return e;
    FAIL("no index entry for " << model << " version '" << version << "' in " << index.dump());
    return {};
  }
};

inline json infer_body(const std::vector<float>& x, const json& parameters = nullptr) {
  json j{{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {static_cast<std::int64_t>(x.size() / 3), 3}}, {"data", x}}}}};
  if (!parameters.is_null()) j["parameters"] = parameters;
  return j;
}

inline std::string error_of(const json& j) { return j.is_object() && j.contains("error") ? j["error"].get<std::string>() : j.dump(); }

inline bool has(const std::string& text, const std::string& part) {
  CAPTURE(text);
  CAPTURE(part);
  return text.find(part) != std::string::npos;
}

}  // namespace test_serve_versions

TEST_CASE("serve devices: each version reserves its own device, and one that gets none is unavailable with who holds the IPUs, until a load retries") {
  using namespace test_serve_versions;
  const simulated_system system("mk2:2", "devices");
  const auto pid = std::to_string(::getpid());
  // rows: versions 1 and 2, both served (one IPU each); second: one more model, no IPU left for it.
  const auto dir = serve_test_models::make_repository("devices");
  add_version(dir, "rows", "2");
  write_config(dir, "rows", R"({"version_policy": {"all": {}}})");
  add_version(dir, "second", "1");
  server s(dir, ipu::serve::repository_options{});  // the default: runners reserve their devices
  CHECK_FALSE(s.repo.load_all());

  {
    // Held only in this scope: an unload waits for the holders of its versions.
    const auto v1 = s.repo.find("rows", "1"), v2 = s.repo.find("rows", "2");
    REQUIRE(v1->runner().device().valid());
    REQUIRE(v2->runner().device().valid());
    CHECK(v1->runner().device().ipus() != v2->runner().device().ipus());
  }
  CHECK(s.entry("rows", "1")["state"] == "READY");
  CHECK(s.entry("rows", "2")["state"] == "READY");
  const auto second = s.entry("second", "1");
  CHECK(second["state"] == "UNAVAILABLE");
  const auto reason = second["reason"].get<std::string>();
  CHECK(has(reason, "no free device: every device of 1 IPU is busy"));
  CHECK(has(reason, "held by process " + pid + " (this process)"));
  CHECK(has(reason, "model 'rows' version 1 holds IPU "));
  CHECK(has(reason, "model 'rows' version 2 holds IPU "));
  CHECK(has(reason, "2 x mk2"));  // the system it asked
  CHECK(has(reason, "unload a model holding them"));

  auto [status, body] = s.call("/v2/models/second/ready");
  CHECK(status == 400);  // KServe: not ready
  std::tie(status, body) = s.call("/v2/health/ready");
  CHECK(status == 400);
  std::tie(status, body) = s.call("/v2/models/second/infer", infer_body({1, 2, 3}));
  CHECK(status == 503);
  CHECK(has(error_of(body), "model 'second' is not ready: version 1: no free device: every device of 1 IPU is busy"));
  std::tie(status, body) = s.post("/v2/repository/models/second/load");
  CHECK(status == 400);  // still no device
  CHECK(has(error_of(body), "every device of 1 IPU is busy"));

  // Unloading rows releases both its devices: a load of second now gets one, and it serves.
  std::tie(status, body) = s.post("/v2/repository/models/rows/unload");
  REQUIRE(status == 200);
  std::tie(status, body) = s.post("/v2/repository/models/second/load");
  CHECK(status == 200);
  CHECK(s.entry("second", "1")["state"] == "READY");
  std::tie(status, body) = s.call("/v2/models/second/infer", infer_body({1, 2, 3}));
  CHECK(status == 200);
  CHECK(body["outputs"][0]["data"].get<std::vector<float>>() == serve_test_models::y_of({1, 2, 3}));

  // rows again: one IPU is left, for version 1; version 2 is unavailable (held by second and by
  // rows' own version 1, loaded a moment before), and rows without a version is version 1.
  std::tie(status, body) = s.post("/v2/repository/models/rows/load");
  CHECK(status == 400);
  CHECK(s.entry("rows", "1")["state"] == "READY");
  const auto v2_reason = s.entry("rows", "2")["reason"].get<std::string>();
  CHECK(has(v2_reason, "model 'second' version 1 holds IPU "));
  CHECK(has(v2_reason, "model 'rows' version 1 holds IPU "));
  std::tie(status, body) = s.call("/v2/models/rows/versions/2/infer", infer_body({1, 2, 3}));
  CHECK(status == 503);
  CHECK(has(error_of(body), "version 2 is not ready: no free device"));
  std::tie(status, body) = s.call("/v2/models/rows/infer", infer_body({1, 2, 3}));
  CHECK(status == 200);
  CHECK(body["model_version"] == "1");
  std::tie(status, body) = s.call("/v2/models/rows");
  CHECK(body["versions"] == json::array({"1"}));

  // Reloading second with no spare IPU: its old load gives its device up to the new one.
  std::tie(status, body) = s.post("/v2/repository/models/second/load");
  CHECK(status == 200);
  std::tie(status, body) = s.call("/v2/models/second/infer", infer_body({4, 5, 6}));
  CHECK(status == 200);
}

TEST_CASE("serve versions: version_policy chooses the versions served side by side, each addressed by /versions/<v>") {
  using namespace test_serve_versions;
  const auto dir = serve_test_models::make_repository("versions");
  add_version(dir, "rows", "2");
  add_version(dir, "rows", "3");
  fs::create_directories(dir / "rows" / "04");  // not a version (Triton: a leading 0), nor one without a model.popef
  fs::copy_file(dir / "rows" / "1" / "model.popef", dir / "rows" / "04" / "model.popef");
  fs::create_directories(dir / "rows" / "7");
  server s(dir, serve_test_models::options());

  // The default: the highest version only.
  CHECK(s.repo.load("rows"));
  auto [status, body] = s.call("/v2/models/rows");
  CHECK(body["versions"] == json::array({"3"}));
  std::tie(status, body) = s.call("/v2/models/rows/versions/1/infer", infer_body({1, 2, 3}));
  CHECK(status == 404);
  CHECK(has(error_of(body), "model 'rows' has no version '1' served (versions served: 3)"));

  // latest 2: versions 2 and 3, each with its own batcher; no version is 3.
  write_config(dir, "rows", R"({"version_policy": {"latest": {"num_versions": 2}}})");
  std::tie(status, body) = s.post("/v2/repository/models/rows/load");
  REQUIRE(status == 200);
  std::tie(status, body) = s.call("/v2/models/rows/versions/2");
  CHECK(status == 200);
  CHECK(body["versions"] == json::array({"2", "3"}));
  std::tie(status, body) = s.call("/v2/models/rows/versions/2/infer", infer_body({1, 2, 3}));
  REQUIRE(status == 200);
  CHECK(body["model_version"] == "2");
  CHECK(body["outputs"][1]["data"].get<std::vector<float>>() == serve_test_models::z_of({1, 2, 3}));
  std::tie(status, body) = s.call("/v2/models/rows/infer", infer_body({1, 2, 3, 4, 5, 6}));
  REQUIRE(status == 200);
  CHECK(body["model_version"] == "3");
  CHECK(s.repo.find("rows", "2")->batcher().stats().requests == 1);
  CHECK(s.repo.find("rows", "3")->batcher().stats().requests == 1);
  CHECK(s.repo.find("rows", "2") != s.repo.find("rows", "3"));
  std::tie(status, body) = s.call("/v2/models/rows/versions/2/ready");
  CHECK(status == 200);
  std::tie(status, body) = s.call("/v2/models/rows/versions/1/ready");
  CHECK(status == 404);
  CHECK(s.entry("rows", "2")["state"] == "READY");
  CHECK(s.entry("rows", "3")["state"] == "READY");
  const auto metrics = s.client.Get("/metrics");
  REQUIRE(metrics);
  CHECK(has(metrics->body, "ipu_inference_requests_total{model=\"rows\",version=\"2\"} 1\n"));
  CHECK(has(metrics->body, "ipu_inference_requests_total{model=\"rows\",version=\"3\"} 1\n"));

  // all: 1, 2 and 3 (04 and 7 are not versions).
  write_config(dir, "rows", R"({"version_policy": {"all": {}}})");
  CHECK(s.repo.load("rows"));
  CHECK(s.repo.served_versions("rows") == std::vector<std::uint64_t>{1, 2, 3});

  // specific [3, 1]: those two; 2 is no longer served.
  write_config(dir, "rows", R"({"version_policy": {"specific": {"versions": [3, 1]}}})");
  CHECK(s.repo.load("rows"));
  std::tie(status, body) = s.call("/v2/models/rows");
  CHECK(body["versions"] == json::array({"1", "3"}));
  std::tie(status, body) = s.call("/v2/models/rows/versions/2/infer", infer_body({1, 2, 3}));
  CHECK(status == 404);
  CHECK(has(error_of(body), "versions served: 1, 3"));
  std::tie(status, body) = s.call("/v2/models/rows/versions/1/infer", infer_body({1, 2, 3}));
  CHECK(status == 200);
  CHECK(body["model_version"] == "1");

  // A specific version that is not on disk: the model is unavailable, saying which.
  write_config(dir, "rows", R"({"version_policy": {"specific": {"versions": [1, 7]}}})");
  std::tie(status, body) = s.post("/v2/repository/models/rows/load");
  CHECK(status == 400);
  const auto e = s.entry("rows", "");
  CHECK(e["state"] == "UNAVAILABLE");
  CHECK(has(e["reason"].get<std::string>(), "version_policy names version 7, which has no model.popef (versions on disk: 1, 2, 3)"));
  std::tie(status, body) = s.call("/v2/models/rows/ready");
  CHECK(status == 400);
  std::tie(status, body) = s.call("/v2/models/rows/versions/1/infer", infer_body({1, 2, 3}));
  CHECK(status == 503);
  CHECK(has(error_of(body), "version 7"));
}

TEST_CASE("serve versions: version_policy is checked") {
  using ipu::serve::parse_model_config;
  using kind = ipu::serve::version_policy::kind;
  CHECK(parse_model_config("{}", "cfg").version_policy.policy == kind::latest);
  CHECK(parse_model_config("{}", "cfg").version_policy.num_versions == 1);
  const auto latest = parse_model_config(R"({"version_policy": {"latest": {"num_versions": 3}}})", "cfg").version_policy;
  CHECK(latest.policy == kind::latest);
  CHECK(latest.num_versions == 3);
  CHECK(parse_model_config(R"({"version_policy": {"all": {}}})", "cfg").version_policy.policy == kind::all);
  const auto specific = parse_model_config(R"({"version_policy": {"specific": {"versions": [4, 2]}}})", "cfg").version_policy;
  CHECK(specific.policy == kind::specific);
  CHECK(specific.versions == std::vector<std::uint64_t>{2, 4});
  const std::pair<const char*, const char*> bad[] = {
      {R"({"version_policy": 1})", "exactly one of latest, all, specific"},
      {R"({"version_policy": {}})", "exactly one of latest, all, specific"},
      {R"({"version_policy": {"latest": {"num_versions": 1}, "all": {}}})", "exactly one of latest, all, specific"},
      {R"({"version_policy": {"newest": {}}})", "unknown key 'newest'"},
      {R"({"version_policy": {"latest": 2}})", "'latest' is not an object"},
      {R"({"version_policy": {"latest": {}}})", "'latest' has no num_versions"},
      {R"({"version_policy": {"latest": {"num_versions": 0}}})", "'num_versions' is 0, out of range"},
      {R"({"version_policy": {"latest": {"num_versions": 65}}})", "'num_versions' is 65, out of range"},
      {R"({"version_policy": {"latest": {"num_versions": 1.5}}})", "not a non-negative integer"},
      {R"({"version_policy": {"latest": {"num_versions": 1, "n": 2}}})", "unknown key 'n'"},
      {R"({"version_policy": {"all": {"versions": [1]}}})", "'all' takes no keys"},
      {R"({"version_policy": {"specific": {}}})", "non-empty 'versions' array"},
      {R"({"version_policy": {"specific": {"versions": []}}})", "non-empty 'versions' array"},
      {R"({"version_policy": {"specific": {"versions": "1"}}})", "non-empty 'versions' array"},
      {R"({"version_policy": {"specific": {"versions": [0]}}})", "'versions' is 0, out of range"},
      {R"({"version_policy": {"specific": {"versions": [-1]}}})", "not a non-negative integer"},
      {R"({"version_policy": {"specific": {"versions": [2, 1, 2]}}})", "version 2 is listed twice"},
  };
  for (const auto& b : bad) {  // no structured binding: CAPTURE's lambda would capture it (Clang 14 cannot)
    CAPTURE(b.first);
    CHECK_THROWS_WITH_AS(parse_model_config(b.first, "cfg"), doctest::Contains(b.second), ipu::error);
  }
  CHECK_THROWS_WITH_AS(parse_model_config(R"({"version_policy": {"latest": {}}})", "models/m/config.json"),
                       doctest::Contains("models/m/config.json: version_policy.latest"), ipu::error);
}

TEST_CASE("serve timeout: the request parameter 'timeout' overrides the model's request timeout, and bad values are refused") {
  using namespace test_serve_versions;
  // slow: a run starts only once 4 rows wait or the oldest has waited 2 s, and no timeout of its own.
  // quick: runs start after 300 ms, and requests time out after 1 ms in the queue.
  const auto dir = serve_test_models::make_repository("timeout_parameter");
  add_version(dir, "slow", "1");
  write_config(dir, "slow", R"({"dynamic_batching": {"preferred_batch_size": [4], "max_queue_delay_microseconds": 2000000}})");
  add_version(dir, "quick", "1");
  write_config(dir, "quick", R"({"dynamic_batching": {"preferred_batch_size": [4], "max_queue_delay_microseconds": 300000},
                                 "request_timeout_microseconds": 1000})");
  server s(dir, serve_test_models::options());
  REQUIRE(s.repo.load_all());

  // A 2 ms timeout leaves slow's queue long before its 2 s delay: 503, unrun (ignored, it would run).
  const auto sent = std::chrono::steady_clock::now();
  auto [status, body] = s.call("/v2/models/slow/infer", infer_body({1, 2, 3}, {{"timeout", 2000}}));
  CHECK(status == 503);
  CHECK(has(error_of(body), "the request waited 2000 us in the queue without starting"));
  CHECK(has(error_of(body), "longer 'timeout' parameter"));
  CHECK(std::chrono::steady_clock::now() - sent < std::chrono::milliseconds(1500));
  CHECK(s.repo.find("slow", "")->batcher().stats().timed_out == 1);
  CHECK(s.repo.find("slow", "")->batcher().stats().runs == 0);
  // 0 is the model's (none): it waits out the delay and runs.
  std::tie(status, body) = s.call("/v2/models/slow/infer", infer_body({1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 1}, {{"timeout", 0}}));
  CHECK(status == 200);

  // quick's own timeout (1 ms) expires before its 300 ms delay; a request's 10 s outlasts it.
  std::tie(status, body) = s.call("/v2/models/quick/infer", infer_body({1, 2, 3}));
  CHECK(status == 503);
  CHECK(has(error_of(body), "waited 1000 us"));
  CHECK(has(error_of(body), "request_timeout_microseconds"));
  std::tie(status, body) = s.call("/v2/models/quick/infer", infer_body({1, 2, 3}, {{"timeout", 10000000}}));
  CHECK(status == 200);
  CHECK(body["outputs"][0]["data"].get<std::vector<float>>() == serve_test_models::y_of({1, 2, 3}));

  const std::pair<json, const char*> bad[] = {
      {{{"timeout", -1}}, "parameter 'timeout' is -1, negative"},
      {{{"timeout", 2.5}}, "parameter 'timeout' is 2.5, not a whole number of microseconds"},
      {{{"timeout", "100"}}, "parameter 'timeout' is \"100\", not a whole number of microseconds"},
      {{{"timeout", true}}, "not a whole number of microseconds"},
      {{{"timeout", 4000000000u}}, "over the limit of 3600000000 (an hour)"},
      {{{"timeout", 18446744073709551615u}}, "is 18446744073709551615 us, over the limit of 3600000000 (an hour)"},
      {{{"priority", 1}}, "parameter 'priority' is not supported"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.first.dump());
    std::tie(status, body) = s.call("/v2/models/quick/infer", infer_body({1, 2, 3}, b.first));
    CHECK(status == 400);
    CHECK(has(error_of(body), b.second));
  }
  // Unknown input and output parameters are refused as well, not ignored.
  auto j = infer_body({1, 2, 3});
  j["inputs"][0]["parameters"] = {{"shared_memory_region", "r"}};
  std::tie(status, body) = s.call("/v2/models/quick/infer", j);
  CHECK(status == 400);
  CHECK(has(error_of(body), "parameter 'shared_memory_region' is not supported"));
  j = infer_body({1, 2, 3});
  j["outputs"] = {{{"name", "y"}, {"parameters", {{"classification", 2}}}}};
  std::tie(status, body) = s.call("/v2/models/quick/infer", j);
  CHECK(status == 400);
  CHECK(has(error_of(body), "parameter 'classification' is not supported"));
}

TEST_SUITE("concurrent") {
  TEST_CASE("serve devices: an unload waits for the requests under way, so that its device is free for the next load") {
    using namespace test_serve_versions;
    const simulated_system system("mk2:1", "unload_in_flight");
    // rows holds the only IPU; its runs start once 4 rows wait or the oldest has waited 300 ms, so a
    // request of one row is under way (queued, holding rows) for 300 ms.
    const auto dir = serve_test_models::make_repository(
        "unload_in_flight", R"({"dynamic_batching": {"preferred_batch_size": [4], "max_queue_delay_microseconds": 300000}})");
    add_version(dir, "second", "1");
    server s(dir, ipu::serve::repository_options{});
    CHECK_FALSE(s.repo.load_all());
    REQUIRE(s.repo.ready("rows", ""));
    REQUIRE_FALSE(s.repo.ready("second", ""));

    std::optional<std::pair<int, json>> answer;
    std::thread client([&] {
      httplib::Client c("127.0.0.1", s.http.port());
      c.set_read_timeout(30, 0);
      const auto r = c.Post("/v2/models/rows/infer", infer_body({1, 2, 3}).dump(), "application/json");
      if (r) answer.emplace(r->status, json::parse(r->body, nullptr, false));
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (s.repo.find("rows", "")->batcher().stats().requests == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(s.repo.find("rows", "")->batcher().stats().requests == 1);
    s.repo.unload("rows");  // returns once the queued request is answered and rows' runner is gone
    CHECK_MESSAGE(s.repo.load("second"), s.repo.index().at("second").why());
    client.join();
    REQUIRE(answer.has_value());
    CHECK(answer->first == 200);  // answered, not dropped by the unload
    CHECK(answer->second["outputs"][0]["data"].get<std::vector<float>>() == serve_test_models::y_of({1, 2, 3}));
    const auto [status, body] = s.call("/v2/models/second/infer", infer_body({1, 2, 3}));
    CHECK(status == 200);
  }

  TEST_CASE("serve devices: an unload wakes once the last holder of the model lets go, not at release_wait") {
    using namespace test_serve_versions;
    const simulated_system system("mk2:1", "unload_wakes");
    const auto dir = serve_test_models::make_repository("unload_wakes");
    const remove_on_exit cleanup{dir};
    add_version(dir, "second", "1");
    ipu::serve::repository_options o;
    o.release_wait = std::chrono::seconds(20);  // a waiter never woken fails here, not at 30 s
    ipu::serve::model_repository repo(dir, o);
    CHECK_FALSE(repo.load_all());  // second finds no free IPU
    REQUIRE(repo.ready("rows", ""));

    // A holder (a request under way, as it were) keeps rows alive ~50 ms past the unload's start.
    auto held = repo.find("rows", "");
    const auto signal = held->release_signal();  // the test's share of the latch outlives the model
    std::atomic<bool> dropping{false};
    std::thread holder([&, m = std::move(held)]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      dropping = true;
      m.reset();
    });
    const auto start = std::chrono::steady_clock::now();
    const bool released = repo.unload("rows");
    const auto waited = std::chrono::steady_clock::now() - start;
    CHECK(released);
    CHECK(waited < o.release_wait / 2);  // woken by the release (loose: a loaded machine's scheduling aside)
    CHECK(dropping);  // it returned only after the holder let go...
    CHECK(signal->released());  // ...and the model, its runner and device, were gone
    holder.join();
    CHECK_MESSAGE(repo.load("second"), repo.index().at("second").why());  // rows' IPU is free
  }

  TEST_CASE("serve devices: an unload whose model is still held past release_wait returns false, the device still held") {
    using namespace test_serve_versions;
    const simulated_system system("mk2:1", "unload_times_out");
    const auto dir = serve_test_models::make_repository("unload_times_out");
    const remove_on_exit cleanup{dir};
    add_version(dir, "second", "1");
    ipu::serve::repository_options o;
    o.release_wait = std::chrono::milliseconds(100);
    ipu::serve::model_repository repo(dir, o);
    CHECK_FALSE(repo.load_all());
    REQUIRE(repo.ready("rows", ""));

    auto held = repo.find("rows", "");  // held through the unload: never released within release_wait
    const auto signal = held->release_signal();
    CHECK_FALSE(repo.unload("rows"));
    CHECK_FALSE(signal->released());
    CHECK_FALSE(repo.ready("rows", ""));  // unloaded all the same: no new request reaches it
    CHECK_FALSE(repo.load("second"));     // rows still holds the only IPU
    CHECK(has(repo.index().at("second").why(), "no free device"));
    held.reset();
    CHECK(signal->released());
    CHECK_MESSAGE(repo.load("second"), repo.index().at("second").why());
  }
}
