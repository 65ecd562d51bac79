#pragma once
// A served model's configuration: DIR/<model>/config.json in the model repository (optional).
//
//   {"max_batch_size": 16,
//    "dynamic_batching": {"preferred_batch_size": [4, 8], "max_queue_delay_microseconds": 500},
//    "instance_count": 2, "request_timeout_microseconds": 2000000,
//    "version_policy": {"latest": {"num_versions": 2}}}
//
// max_batch_size: the most rows one request may carry along the batch (leading) dimension; 0 turns
// the batch dimension off (requests give the compiled shapes exactly). Absent: the compiled batch
// when every input and output leads with it, else 0. A request larger than the compiled batch is
// run as several steps. dynamic_batching present: requests from many clients are stacked into one
// run, which starts once the rows waiting reach the largest preferred size (else the compiled
// batch) or the oldest has waited max_queue_delay_microseconds. instance_count: threads running
// batches on the model at once (they share one model runner, so several batches can fill a step of
// several batches per step). request_timeout_microseconds (0 or absent: none): a request still
// waiting in the queue, none of its rows started, that long after it arrived is answered 503
// instead (rows already running are finished: they read the request); a request's own "timeout"
// parameter overrides it. version_policy (Triton's): which versions under DIR/<model>/ are served,
// each on its own runner, batcher and device: {"latest": {"num_versions": N}} the N highest (the
// default, N = 1), {"all": {}} every one, {"specific": {"versions": [1, 3]}} those (each must be on
// disk). Unknown keys are refused: a misspelt setting is never ignored.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ipu/error.hpp"
#include "ipu/serve/tensor_codec.hpp"

namespace ipu::serve {

struct dynamic_batching_config {
  std::vector<std::uint64_t> preferred_batch_size;
  std::uint64_t max_queue_delay_microseconds = 0;
};

/// Which of a model's versions are served (Triton's ModelVersionPolicy).
struct version_policy {
  enum class kind : std::uint8_t { latest, all, specific };
  kind policy = kind::latest;
  std::uint64_t num_versions = 1;       // latest: the highest N on disk
  std::vector<std::uint64_t> versions;  // specific: ascending, distinct
};

struct model_config {
  std::optional<std::uint64_t> max_batch_size;  // absent: from the compiled model
  std::optional<dynamic_batching_config> dynamic_batching;
  std::uint64_t instance_count = 1;
  std::uint64_t request_timeout_microseconds = 0;  // 0: none
  serve::version_policy version_policy;
};

namespace detail::config {

inline std::uint64_t count(const nlohmann::json& v, const std::string& key, const std::string& where,
                           std::uint64_t lo, std::uint64_t hi) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0))
    throw error(error_category::options, "'" + key + "' is " + v.dump() + ", not a non-negative integer", where,
                "give a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  const auto n = v.get<std::uint64_t>();
  if (n < lo || n > hi)
    throw error(error_category::options, "'" + key + "' is " + std::to_string(n) + ", out of range", where,
                "give a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return n;
}

inline void refuse_unknown(const nlohmann::json& o, std::initializer_list<std::string_view> known, const std::string& where) {
  for (const auto& [k, v] : o.items()) {
    bool ok = false;
    for (auto n : known) ok = ok || k == n;
    if (!ok) {
      std::string names;
      for (auto n : known) names += (names.empty() ? "" : ", ") + std::string(n);
      throw error(error_category::options, "unknown key '" + k + "'", where, "the keys are " + names);
    }
  }
}

}  // namespace detail::config

/// Limits on the numbers a config may hold (a bad config is an error, never a huge allocation).
inline constexpr std::uint64_t max_config_batch = std::uint64_t{1} << 20;
inline constexpr std::uint64_t max_instances = 64;
inline constexpr std::uint64_t max_queue_delay_us = 10'000'000;  // 10 s
// max_request_timeout_us (an hour) is tensor_codec.hpp's: a request's "timeout" parameter has the same cap.
/// Versions of one model served at once: each holds a runner, its threads and a device.
inline constexpr std::uint64_t max_served_versions = 64;

namespace detail::config {

inline version_policy parse_version_policy(const nlohmann::json& p, const std::string& where) {
  const std::string example = R"(write {"latest": {"num_versions": 1}}, {"all": {}} or {"specific": {"versions": [1, 3]}})";
  if (!p.is_object() || p.size() != 1)
    throw error(error_category::options, "version_policy must be an object with exactly one of latest, all, specific", where, example);
  refuse_unknown(p, {"latest", "all", "specific"}, where);
  version_policy v;
  const std::string key = p.begin().key();
  const auto& body = p.begin().value();
  const auto w = where + "." + key;
  if (!body.is_object()) throw error(error_category::options, "'" + key + "' is not an object", w, example);
  if (key == "latest") {
    refuse_unknown(body, {"num_versions"}, w);
    if (!body.contains("num_versions")) throw error(error_category::options, "'latest' has no num_versions", w, "write {\"num_versions\": 1}");
    v.num_versions = count(body["num_versions"], "num_versions", w, 1, max_served_versions);
  } else if (key == "all") {
    if (!body.empty()) throw error(error_category::options, "unknown key '" + body.begin().key() + "'", w, "'all' takes no keys: write {}");
    v.policy = version_policy::kind::all;
  } else {
    refuse_unknown(body, {"versions"}, w);
    v.policy = version_policy::kind::specific;
    if (!body.contains("versions") || !body["versions"].is_array() || body["versions"].empty())
      throw error(error_category::options, "'specific' needs a non-empty 'versions' array", w, "e.g. {\"versions\": [1, 3]}");
    if (body["versions"].size() > max_served_versions)
      throw error(error_category::options, std::to_string(body["versions"].size()) + " versions listed", w,
                  "serve at most " + std::to_string(max_served_versions) + " versions of a model at once");
    for (const auto& n : body["versions"]) v.versions.push_back(count(n, "versions", w, 1, std::numeric_limits<std::uint64_t>::max()));
    std::sort(v.versions.begin(), v.versions.end());
    if (const auto d = std::adjacent_find(v.versions.begin(), v.versions.end()); d != v.versions.end())
      throw error(error_category::options, "version " + std::to_string(*d) + " is listed twice", w, "list each version once");
  }
  return v;
}

}  // namespace detail::config

/// Parses a config's text; `where` names it in errors.
inline model_config parse_model_config(std::string_view text, const std::string& where) {
  namespace dc = detail::config;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw error(error_category::options, std::string("not valid JSON: ") + e.what(), where, "write the config as a JSON object");
  }
  if (!j.is_object()) throw error(error_category::options, "the config is not a JSON object", where, "write {\"max_batch_size\": 8, ...}");
  dc::refuse_unknown(j, {"max_batch_size", "dynamic_batching", "instance_count", "request_timeout_microseconds", "version_policy"}, where);
  model_config c;
  if (j.contains("max_batch_size")) c.max_batch_size = dc::count(j["max_batch_size"], "max_batch_size", where, 0, max_config_batch);
  if (j.contains("instance_count")) c.instance_count = dc::count(j["instance_count"], "instance_count", where, 1, max_instances);
  if (j.contains("request_timeout_microseconds"))
    c.request_timeout_microseconds =
        dc::count(j["request_timeout_microseconds"], "request_timeout_microseconds", where, 0, max_request_timeout_us);
  if (j.contains("version_policy")) c.version_policy = dc::parse_version_policy(j["version_policy"], where + ": version_policy");
  if (j.contains("dynamic_batching")) {
    const auto& d = j["dynamic_batching"];
    const auto w = where + ": dynamic_batching";
    if (!d.is_object()) throw error(error_category::options, "dynamic_batching is not an object", where, "write {} for the defaults");
    dc::refuse_unknown(d, {"preferred_batch_size", "max_queue_delay_microseconds"}, w);
    dynamic_batching_config b;
    if (d.contains("max_queue_delay_microseconds"))
      b.max_queue_delay_microseconds = dc::count(d["max_queue_delay_microseconds"], "max_queue_delay_microseconds", w, 0, max_queue_delay_us);
    if (d.contains("preferred_batch_size")) {
      const auto& p = d["preferred_batch_size"];
      if (!p.is_array()) throw error(error_category::options, "preferred_batch_size is not an array", w, "e.g. [4, 8]");
      for (const auto& v : p) b.preferred_batch_size.push_back(dc::count(v, "preferred_batch_size", w, 1, max_config_batch));
    }
    c.dynamic_batching = std::move(b);
  }
  return c;
}

/// Reads DIR/<model>/config.json; the defaults when there is none.
inline model_config read_model_config(const std::filesystem::path& model_dir) {
  const auto file = model_dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return {};
  std::ifstream in(file, std::ios::binary);
  if (!in) throw error(error_category::io, "cannot read the model config", file.string(), "check its permissions");
  std::ostringstream s;
  s << in.rdbuf();
  return parse_model_config(s.str(), file.string());
}

}  // namespace ipu::serve
