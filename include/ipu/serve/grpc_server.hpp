#pragma once
// KServe v2 over gRPC (service inference.GRPCInferenceService, serve/kserve_v2.proto): health,
// server and model metadata, model readiness, inference and the model repository extension, over
// the same model repository and dynamic batchers as the HTTP server (both may serve one repository
// at once). Part of the optional ipu::serve_grpc component (gRPC++).
//
//   ipu::serve::grpc_server server(repo, {.port = 0});   // 0: an ephemeral port
//   server.start();                                       // bound and serving on return
//   std::printf("%d\n", server.port());
//
// ModelInfer's messages are read and written by serve/grpc_codec.hpp (typed or raw contents).
// ModelInfer takes the request parameter "timeout" (int64_param, microseconds); other request,
// tensor and repository parameters are refused. Without a version, a model's highest served
// version answers.
//
// Errors are gRPC statuses with the message the HTTP server would put in its {"error"}:
// INVALID_ARGUMENT (HTTP's 400), NOT_FOUND (404), RESOURCE_EXHAUSTED (413: over the message size
// cap; or more than `threads` inferences at once), UNAVAILABLE (503: a model not loaded), INTERNAL
// (a failed run).
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "ipu/error.hpp"
#include "ipu/serve/grpc_codec.hpp"
#include "ipu/serve/kserve_v2.grpc.pb.h"
#include "ipu/serve/model_repository.hpp"
#include "ipu/serve/tensor_codec.hpp"

namespace ipu::serve {

struct grpc_server_options {
  std::string bind = "127.0.0.1";
  int port = 0;                                          // 0: an ephemeral port (see port())
  std::size_t max_message_bytes = std::size_t{64} << 20;  // larger requests: RESOURCE_EXHAUSTED
  std::size_t threads = 16;  // ModelInfer calls served at once (as the HTTP server's); more: RESOURCE_EXHAUSTED
};

namespace detail::kserve_grpc {

/// The gRPC status for a request_error's HTTP status.
inline ::grpc::StatusCode code_of(int http_status) {
  switch (http_status) {
    case 400: return ::grpc::StatusCode::INVALID_ARGUMENT;
    case 404: return ::grpc::StatusCode::NOT_FOUND;
    case 413: return ::grpc::StatusCode::RESOURCE_EXHAUSTED;
    case 503: return ::grpc::StatusCode::UNAVAILABLE;
    default: return ::grpc::StatusCode::INTERNAL;
  }
}

/// Runs a handler, turning every exception into a status (gRPC's synchronous server would
/// otherwise terminate the process).
template <class F>
::grpc::Status guarded(F&& f) {
  try {
    f();
    return ::grpc::Status::OK;
  } catch (const request_error& e) {
    return {code_of(e.status()), e.what()};
  } catch (const std::exception& e) {
    return {::grpc::StatusCode::INTERNAL, e.what()};
  }
}

inline void describe(const std::vector<tensor_metadata>& v,
                     google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* out) {
  for (const auto& t : v) {
    auto* m = out->Add();
    m->set_name(t.name);
    m->set_datatype(kserve_name(t.type));
    for (auto d : t.shape) m->add_shape(d);
  }
}

inline void one_repository(const std::string& repository_name, const std::string& where) {
  if (!repository_name.empty())
    throw request_error(400, "repository '" + repository_name.substr(0, 60) + "' is not known", where,
                        "leave repository_name empty: this server has one repository");
}

class service final : public inference::GRPCInferenceService::Service {
 public:
  service(model_repository& repo, std::size_t max_inferences) : repo_(repo), max_inferences_(max_inferences) {}

  ::grpc::Status ServerLive(::grpc::ServerContext*, const inference::ServerLiveRequest*, inference::ServerLiveResponse* r) override {
    r->set_live(true);
    return ::grpc::Status::OK;
  }
  ::grpc::Status ServerReady(::grpc::ServerContext*, const inference::ServerReadyRequest*, inference::ServerReadyResponse* r) override {
    return guarded([&] { r->set_ready(repo_.all_ready()); });
  }
  ::grpc::Status ModelReady(::grpc::ServerContext*, const inference::ModelReadyRequest* q, inference::ModelReadyResponse* r) override {
    return guarded([&] { r->set_ready(repo_.ready(q->name(), q->version())); });
  }
  ::grpc::Status ServerMetadata(::grpc::ServerContext*, const inference::ServerMetadataRequest*,
                                inference::ServerMetadataResponse* r) override {
    r->set_name(server_name);
    r->set_version(server_version);
    r->add_extensions("model_repository");
    return ::grpc::Status::OK;
  }
  ::grpc::Status ModelMetadata(::grpc::ServerContext*, const inference::ModelMetadataRequest* q,
                               inference::ModelMetadataResponse* r) override {
    return guarded([&] {
      const auto m = repo_.find(q->name(), q->version());
      r->set_name(m->name());
      for (const auto v : repo_.served_versions(m->name())) r->add_versions(std::to_string(v));
      r->set_platform("ipu_popef");
      describe(m->inputs(), r->mutable_inputs());
      describe(m->outputs(), r->mutable_outputs());
    });
  }
  ::grpc::Status ModelInfer(::grpc::ServerContext*, const inference::ModelInferRequest* q, inference::ModelInferResponse* r) override {
    // gRPC's synchronous server gives every call a thread: past the cap a client is told to back
    // off rather than queue without bound. Health and metadata calls stay answered.
    if (inferences_.fetch_add(1) >= max_inferences_) {
      inferences_.fetch_sub(1);
      return {::grpc::StatusCode::RESOURCE_EXHAUSTED, "the server is running " + std::to_string(max_inferences_) +
                                                         " inferences already (its threads option): retry later"};
    }
    struct release {
      std::atomic<std::size_t>& n;
      ~release() { n.fetch_sub(1); }
    } done{inferences_};
    return guarded([&] {
      if (q->model_name().empty()) throw request_error(400, "no model_name", "request", "name the model to run");
      const auto m = repo_.find(q->model_name(), q->model_version());
      encode_infer_response(m->infer(decode_infer_request(*q)), *r);
    });
  }
  ::grpc::Status RepositoryIndex(::grpc::ServerContext*, const inference::RepositoryIndexRequest* q,
                                 inference::RepositoryIndexResponse* r) override {
    return guarded([&] {
      one_repository(q->repository_name(), "repository index");
      // One entry per version, as over HTTP; a model unavailable as a whole has one without.
      for (const auto& kv : repo_.index()) {
        if (kv.second.versions.empty() && !q->ready()) {
          auto* m = r->add_models();
          m->set_name(kv.first);
          m->set_state("UNAVAILABLE");
          m->set_reason(kv.second.reason);
        }
        for (const auto& v : kv.second.versions) {
          if (q->ready() && !v.model) continue;
          auto* m = r->add_models();
          m->set_name(kv.first);
          m->set_version(std::to_string(v.version));
          m->set_state(v.model ? "READY" : "UNAVAILABLE");
          if (!v.model) m->set_reason(v.reason);
        }
      }
    });
  }
  ::grpc::Status RepositoryModelLoad(::grpc::ServerContext*, const inference::RepositoryModelLoadRequest* q,
                                     inference::RepositoryModelLoadResponse*) override {
    return guarded([&] {
      one_repository(q->repository_name(), "model load");
      grpc_codec::refuse_parameters(q->parameters(), "model load");
      repo_.load_or_refuse(q->model_name());
    });
  }
  ::grpc::Status RepositoryModelUnload(::grpc::ServerContext*, const inference::RepositoryModelUnloadRequest* q,
                                       inference::RepositoryModelUnloadResponse*) override {
    return guarded([&] {
      one_repository(q->repository_name(), "model unload");
      grpc_codec::refuse_parameters(q->parameters(), "model unload");
      repo_.unload(q->model_name());
    });
  }

 private:
  model_repository& repo_;
  std::size_t max_inferences_;
  std::atomic<std::size_t> inferences_{0};  // ModelInfer calls under way
};

}  // namespace detail::kserve_grpc

class grpc_server {
 public:
  grpc_server(model_repository& repo, grpc_server_options options)
      : options_(std::move(options)), service_(repo, options_.threads) {
    if (options_.threads == 0 || options_.threads > 4096)
      throw error(error_category::usage, std::to_string(options_.threads) + " threads", "grpc server", "use 1 to 4096");
    if (options_.port < 0 || options_.port > 65535)
      throw error(error_category::usage, "port " + std::to_string(options_.port) + " is out of range", "grpc server",
                  "give 0 (ephemeral) to 65535");
    if (options_.max_message_bytes == 0 || options_.max_message_bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw error(error_category::usage, "a message cap of " + std::to_string(options_.max_message_bytes) + " bytes", "grpc server",
                  "allow 1 byte to 2 GiB - 1 (gRPC's limit)");
  }
  grpc_server(const grpc_server&) = delete;
  grpc_server& operator=(const grpc_server&) = delete;
  ~grpc_server() { stop(); }

  /// Binds and starts serving (gRPC's own threads); throws ipu::error when the address cannot be bound.
  void start() {
    if (server_) throw error(error_category::usage, "the server is already started", "grpc server");
    // IPv6 addresses are bracketed in gRPC's host:port form.
    const auto host = options_.bind.find(':') != std::string::npos ? "[" + options_.bind + "]" : options_.bind;
    ::grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort(host + ":" + std::to_string(options_.port), ::grpc::InsecureServerCredentials(), &port);
    b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a port in use is an error, not shared with another server
    b.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
    b.SetMaxSendMessageSize(std::numeric_limits<int>::max());
    // Bounds the threads of every call, not only inferences: the cap's calls, health and metadata
    // calls besides, and gRPC's pollers. Past it gRPC itself answers RESOURCE_EXHAUSTED.
    ::grpc::ResourceQuota quota("ipu serve grpc");
    quota.SetMaxThreads(static_cast<int>(options_.threads) + 16);
    b.SetResourceQuota(quota);
    b.RegisterService(&service_);
    auto s = b.BuildAndStart();
    if (!s || port <= 0)
      throw error(error_category::io, "cannot listen on " + options_.bind + ":" + std::to_string(options_.port), "grpc server",
                  "choose a free port and an address of this host");
    server_ = std::move(s);
    port_ = port;
  }

  /// Stops accepting and waits for the calls under way.
  void stop() {
    if (!server_) return;
    server_->Shutdown();
    server_->Wait();
    server_.reset();
  }

  [[nodiscard]] int port() const noexcept { return port_; }

 private:
  grpc_server_options options_;
  detail::kserve_grpc::service service_;
  std::unique_ptr<::grpc::Server> server_;
  int port_ = 0;
};

}  // namespace ipu::serve
