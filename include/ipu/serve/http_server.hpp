#pragma once
// KServe v2 over HTTP/REST (cpp-httplib): health, server and model metadata, model readiness,
// inference (JSON and the binary-tensor extension) and the model repository extension.
//
//   ipu::serve::model_repository repo("models");
//   repo.load_all();
//   ipu::serve::http_server server(repo, {.port = 0});   // 0: an ephemeral port
//   server.start();                                       // bound and accepting on return
//   std::printf("%d\n", server.port());
//
//   GET  /v2/health/live, /v2/health/ready, /v2
//   GET  /v2/models/<m>[/versions/<v>], /v2/models/<m>[/versions/<v>]/ready
//   POST /v2/models/<m>[/versions/<v>]/infer
//   POST /v2/repository/index, /v2/repository/models/<m>/load, /v2/repository/models/<m>/unload
//   GET  /metrics   (Prometheus text per model: requests, runs, rows, queue and compute time; histograms
//                    of request, queue and compute latency and of the batch sizes formed)
//
// Without /versions/<v>, a model's highest served version answers. Every error is KServe's
// {"error": "..."}: 400 malformed or mismatched requests, 404 unknown model or version (not one the
// version policy serves), 413 a body over the size cap, 503 a model or version not loaded (the
// reason: no free device, a bad file...) or a request that waited its timeout, 500 a failed run.
#include <charconv>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "ipu/error.hpp"
#include "ipu/serve/model_repository.hpp"
#include "ipu/serve/tensor_codec.hpp"

namespace ipu::serve {

struct server_options {
  std::string bind = "127.0.0.1";
  int port = 0;                                       // 0: an ephemeral port (see port())
  std::size_t max_body_bytes = std::size_t{64} << 20;  // larger requests get 413
  std::size_t threads = 16;                            // connections served at once
};

class http_server {
 public:
  http_server(model_repository& repo, server_options options) : repo_(repo), options_(std::move(options)) {
    if (options_.port < 0 || options_.port > 65535)
      throw error(error_category::usage, "port " + std::to_string(options_.port) + " is out of range", "http server",
                  "give 0 (ephemeral) to 65535");
    if (options_.threads == 0) throw error(error_category::usage, "0 threads", "http server", "use at least 1");
    if (options_.max_body_bytes == 0) throw error(error_category::usage, "a body cap of 0 bytes", "http server", "allow some bytes");
    routes();
  }
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;
  ~http_server() { stop(); }

  /// Binds and starts accepting (on a thread); throws ipu::error when the address cannot be bound.
  void start() {
    if (thread_.joinable()) throw error(error_category::usage, "the server is already started", "http server");
    const int port = options_.port == 0 ? svr_.bind_to_any_port(options_.bind) : (svr_.bind_to_port(options_.bind, options_.port) ? options_.port : -1);
    if (port <= 0)
      throw error(error_category::io, "cannot listen on " + options_.bind + ":" + std::to_string(options_.port), "http server",
                  "choose a free port and an address of this host");
    port_ = port;
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
  }

  /// Stops accepting and waits for the connections' handlers.
  void stop() {
    if (!thread_.joinable()) return;
    svr_.stop();
    thread_.join();
  }

  [[nodiscard]] int port() const noexcept { return port_; }

 private:
  using request = httplib::Request;
  using response = httplib::Response;

  static void reply(response& res, int status, const nlohmann::json& j) {
    res.status = status;
    // Messages may quote a request's bytes (a JSON parser's "last read"), which need not be UTF-8:
    // replaced, not thrown (a throw here turned a 400 into an empty 500).
    res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
  }
  static void fail(response& res, int status, const std::string& message) { reply(res, status, {{"error", message}}); }

  /// Runs a handler, turning every exception into KServe's error JSON.
  template <class F>
  static void guarded(response& res, F&& f) {
    try {
      f();
    } catch (const request_error& e) {
      fail(res, e.status(), e.what());
    } catch (const std::exception& e) {
      fail(res, 500, e.what());
    }
  }

  static std::string version_of(const request& req, std::size_t group) {
    return req.matches.size() > group ? std::string(req.matches[group]) : std::string();
  }

  void routes() {
    svr_.new_task_queue = [n = options_.threads] { return new httplib::ThreadPool(n); };
    svr_.set_payload_max_length(options_.max_body_bytes);
    // httplib writes a response's headers and body separately: with Nagle's algorithm the body
    // waited for the client's delayed ACK, up to 40 ms on every keep-alive request.
    svr_.set_tcp_nodelay(true);
    // Answers httplib gives itself (413, 404 for no route, 400 for a bad request line) get a body too.
    svr_.set_error_handler(httplib::Server::HandlerWithResponse([](const request& req, response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      std::string what = "HTTP status " + std::to_string(res.status);
      if (res.status == 413) what = "the request body exceeds the server's size limit";
      // curl -d and urllib send form-urlencoded by default, which httplib caps at 8 KiB.
      if (res.status == 413 && req.get_header_value("Content-Type") == "application/x-www-form-urlencoded")
        what = "a form-urlencoded body over 8 KiB is refused: send the request with Content-Type: application/json";
      if (res.status == 404) what = "no such endpoint";
      // httplib answers 400 itself for a request it cannot read: say the likely causes.
      if (res.status == 400) what = "unreadable HTTP request: a malformed request line or header, or a POST with no Content-Length (send a body, even empty)";
      fail(res, res.status, what);
      return httplib::Server::HandlerResponse::Handled;
    }));

    svr_.Get("/v2/health/live", [](const request&, response& res) { reply(res, 200, {{"live", true}}); });
    svr_.Get("/v2/health/ready", [this](const request&, response& res) {
      if (repo_.all_ready()) reply(res, 200, {{"ready", true}});
      else fail(res, 400, "not ready: a model failed to load (POST /v2/repository/index says which)");
    });
    svr_.Get("/v2", [](const request&, response& res) {
      reply(res, 200, {{"name", server_name}, {"version", server_version}, {"extensions", {"binary_tensor_data", "model_repository"}}});
    });
    svr_.Get("/metrics", [this](const request&, response& res) { guarded(res, [&] { res.set_content(metrics(), "text/plain; version=0.0.4"); }); });

    const std::string model = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
    svr_.Get(model, [this](const request& req, response& res) {
      guarded(res, [&] {
        const auto m = repo_.find(req.matches[1], version_of(req, 2));
        auto versions = nlohmann::json::array();  // every version served; inputs and outputs are the one asked for
        for (const auto v : repo_.served_versions(m->name())) versions.push_back(std::to_string(v));
        nlohmann::json j{{"name", m->name()}, {"versions", versions}, {"platform", "ipu_popef"}};
        auto tensors = [](const std::vector<tensor_metadata>& v) {
          auto a = nlohmann::json::array();
          for (const auto& t : v) a.push_back({{"name", t.name}, {"datatype", kserve_name(t.type)}, {"shape", t.shape}});
          return a;
        };
        j["inputs"] = tensors(m->inputs());
        j["outputs"] = tensors(m->outputs());
        reply(res, 200, j);
      });
    });
    svr_.Get(model + "/ready", [this](const request& req, response& res) {
      guarded(res, [&] {
        try {
          (void)repo_.find(req.matches[1], version_of(req, 2));
        } catch (const request_error& e) {
          if (e.status() == 503) return fail(res, 400, e.what());  // KServe: ready is 200, not ready a 4xx
          throw;
        }
        reply(res, 200, {{"ready", true}});
      });
    });
    svr_.Post(model + "/infer", [this](const request& req, response& res) {
      guarded(res, [&] {
        std::optional<std::size_t> header;
        if (req.has_header("Inference-Header-Content-Length")) {
          const auto v = req.get_header_value("Inference-Header-Content-Length");
          std::size_t n = 0;
          const auto [p, err] = std::from_chars(v.data(), v.data() + v.size(), n);
          if (err != std::errc() || p != v.data() + v.size() || v.empty())
            throw request_error(400, "Inference-Header-Content-Length '" + v.substr(0, 40) + "' is not a byte count", "request headers");
          header = n;
        }
        const auto m = repo_.find(req.matches[1], version_of(req, 2));
        const auto out = encode_infer_response(m->infer(decode_infer_request(req.body, header)));
        if (out.header_length) {
          res.set_header("Inference-Header-Content-Length", std::to_string(*out.header_length));
          res.set_content(out.body, "application/octet-stream");
        } else {
          res.set_content(out.body, "application/json");
        }
        res.status = 200;
      });
    });

    svr_.Post("/v2/repository/index", [this](const request&, response& res) {
      guarded(res, [&] {
        auto a = nlohmann::json::array();
        // One entry per version, as Triton's; a model unavailable as a whole (no version chosen) has one without.
        for (const auto& [name, e] : repo_.index()) {
          if (e.versions.empty()) a.push_back({{"name", name}, {"state", "UNAVAILABLE"}, {"reason", e.reason}});
          for (const auto& v : e.versions) {
            nlohmann::json j{{"name", name}, {"version", std::to_string(v.version)}, {"state", v.model ? "READY" : "UNAVAILABLE"}};
            if (!v.model) j["reason"] = v.reason;
            a.push_back(std::move(j));
          }
        }
        reply(res, 200, a);
      });
    });
    svr_.Post(R"(/v2/repository/models/([^/]+)/load)", [this](const request& req, response& res) {
      guarded(res, [&] {
        repo_.load_or_refuse(req.matches[1]);
        reply(res, 200, nlohmann::json::object());
      });
    });
    svr_.Post(R"(/v2/repository/models/([^/]+)/unload)", [this](const request& req, response& res) {
      guarded(res, [&] {
        repo_.unload(req.matches[1]);
        reply(res, 200, nlohmann::json::object());
      });
    });
  }

  /// A Prometheus label value: backslash, quote and newline escaped.
  static std::string label(const std::string& v) {
    std::string o;
    for (char c : v) o += c == '\\' ? "\\\\" : c == '"' ? "\\\"" : c == '\n' ? "\\n" : std::string(1, c);
    return o;
  }

  /// Every version served, by model and version.
  std::vector<std::shared_ptr<const served_model>> served() const {
    std::vector<std::shared_ptr<const served_model>> out;
    for (const auto& kv : repo_.index())
      for (const auto& v : kv.second.versions)
        if (v.model) out.push_back(v.model);
    return out;
  }

  /// Prometheus text exposition of each served version's batcher counters.
  std::string metrics() const {
    std::string s;
    auto family = [&](const char* name, const char* type, const char* help, auto value) {
      s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
      for (const auto& m : served()) {
        const auto st = m->batcher().stats();
        s += std::string(name) + "{model=\"" + label(m->name()) + "\",version=\"" + std::to_string(m->version()) + "\"} " + value(st) + "\n";
      }
    };
    auto u = [](std::uint64_t v) { return std::to_string(v); };
    auto secs = [](std::uint64_t ns) {
      char b[64];
      std::snprintf(b, sizeof b, "%.9f", static_cast<double>(ns) * 1e-9);
      return std::string(b);
    };
    family("ipu_inference_requests_total", "counter", "Requests queued to the model.", [&](const batcher_stats& st) { return u(st.requests); });
    family("ipu_inference_runs_total", "counter", "Compiled batches run.", [&](const batcher_stats& st) { return u(st.runs); });
    family("ipu_inference_failed_runs_total", "counter", "Runs that failed.", [&](const batcher_stats& st) { return u(st.failed_runs); });
    family("ipu_inference_timed_out_requests_total", "counter", "Requests that left the queue unrun at the model's request timeout.",
           [&](const batcher_stats& st) { return u(st.timed_out); });
    family("ipu_inference_rows_total", "counter", "Rows run (padding excluded).", [&](const batcher_stats& st) { return u(st.rows); });
    family("ipu_inference_queue_seconds_total", "counter", "Time requests waited before their first run.",
           [&](const batcher_stats& st) { return secs(st.queue_ns); });
    family("ipu_inference_compute_seconds_total", "counter", "Time spent running batches.",
           [&](const batcher_stats& st) { return secs(st.compute_ns); });
    // Histograms: cumulative buckets by upper bound "le", then _sum and _count.
    auto number = [](double v) {
      char b[64];
      std::snprintf(b, sizeof b, "%.9g", v);
      return std::string(b);
    };
    auto histograms = [&](const char* name, const char* help, const histogram batcher_stats::*member) {
      s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
      for (const auto& m : served()) {
        const auto st = m->batcher().stats();
        const auto& h = st.*member;
        const auto labels = "model=\"" + label(m->name()) + "\",version=\"" + std::to_string(m->version()) + "\"";
        std::uint64_t cumulative = 0;
        for (std::size_t k = 0; k < h.counts.size(); ++k) {
          cumulative += h.counts[k];
          const auto le = k < h.bounds.size() ? number(h.bounds[k]) : std::string("+Inf");
          s += std::string(name) + "_bucket{" + labels + ",le=\"" + le + "\"} " + u(cumulative) + "\n";
        }
        s += std::string(name) + "_sum{" + labels + "} " + number(h.sum) + "\n";
        s += std::string(name) + "_count{" + labels + "} " + u(h.count) + "\n";
      }
    };
    histograms("ipu_inference_request_duration_seconds", "Time from a request's arrival at the model's queue to its answer.",
               &batcher_stats::request_seconds);
    histograms("ipu_inference_queue_duration_seconds", "Time requests waited before their first run.", &batcher_stats::queue_seconds);
    histograms("ipu_inference_compute_duration_seconds", "Time each compiled batch took to run.", &batcher_stats::compute_seconds);
    histograms("ipu_inference_batch_size", "Rows each run held (padding excluded).", &batcher_stats::batch_rows);
    return s;
  }

  model_repository& repo_;
  server_options options_;
  httplib::Server svr_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace ipu::serve
