#pragma once
// `ipu serve --model-repository DIR [--http-port N] [--grpc-port N] [--bind ADDR] [--max-request-bytes N]`
//
// Serves the PopEF models of a Triton-style repository (DIR/<model>/<version>/model.popef, plus an
// optional DIR/<model>/config.json) over KServe v2's HTTP/REST protocol (ipu::serve). Prints one
// line "serving N models on http://ADDR:PORT" once it accepts connections (N: models with a version
// served; --http-port 0: the port the system chose), a stderr line for each model or version that
// failed to load (no free device among them: it stays unavailable, with the reason, in the
// repository index), and runs until SIGINT or SIGTERM, when it stops accepting,
// finishes the requests under way and exits 0. `--json` prints that line as one line of JSON
// (models, bind, port, url) instead; `--json FILE` writes it to FILE once serving.
// --grpc-port N also serves KServe v2's gRPC protocol (ipu::serve_grpc) from the same repository and
// batchers: the line then ends "and grpc://ADDR:PORT" (0: the port chosen), the JSON gains
// grpc_port, and --max-request-bytes caps gRPC messages too. Refused when built without gRPC.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>

#include <pthread.h>
#include <signal.h>

#include "ipu/error.hpp"
#ifdef IPU_HAVE_GRPC
#include "ipu/serve/grpc_server.hpp"
#endif
#include "ipu/serve/http_server.hpp"
#include "ipu/serve/model_repository.hpp"
#include "json_output.hpp"

namespace ipu_cli {

struct serve_args {
  std::string repository;
  int http_port = 8000;
  std::string bind = "127.0.0.1";
  std::size_t max_request_bytes = std::size_t{64} << 20;
  bool grpc = false;  // --grpc-port given
  int grpc_port = 8001;
  json_option json;
};

inline void run_serve(const serve_args& a) {
#ifndef IPU_HAVE_GRPC
  if (a.grpc)
    throw ipu::error(ipu::error_category::usage, "this ipu was built without gRPC", "--grpc-port",
                     "serve over HTTP (--http-port), or rebuild with libgrpc++-dev and protobuf-compiler-grpc installed");
#endif
  // Checked before anything starts: gRPC cannot take messages of 2 GiB or more.
  if (a.grpc && a.max_request_bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw ipu::error(ipu::error_category::usage,
                     std::to_string(a.max_request_bytes) + " bytes is more than gRPC can receive in one message",
                     "--max-request-bytes", "give at most 2147483647 bytes when serving with --grpc-port");
  // SIGINT and SIGTERM are taken by this thread alone (sigwait below): every thread started from
  // here on inherits the blocked mask, so no handler runs on a worker.
  report rep(a.json);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ipu::serve::model_repository repo(a.repository);
  // Each version served reserves its own device (IPU_SYSTEM, IPU_DEVICE_LOCK_DIR); one that gets
  // none stays unavailable with the reason, and a repository load retries it.
  std::size_t loaded = 0;
  for (const auto& name : repo.scan()) {
    repo.load(name);
    const auto e = repo.index().at(name);
    if (e.ready()) ++loaded;
    if (e.versions.empty()) std::fprintf(stderr, "ipu serve: model '%s' is unavailable: %s\n", name.c_str(), e.reason.c_str());
    for (const auto& v : e.versions)
      if (!v.model)
        std::fprintf(stderr, "ipu serve: model '%s' version %llu is unavailable: %s\n", name.c_str(),
                     static_cast<unsigned long long>(v.version), v.reason.c_str());
  }
  ipu::serve::server_options o;
  o.bind = a.bind;
  o.port = a.http_port;
  o.max_body_bytes = a.max_request_bytes;
  ipu::serve::http_server server(repo, o);
  server.start();
  std::string also;
#ifdef IPU_HAVE_GRPC
  std::unique_ptr<ipu::serve::grpc_server> grpc;
  if (a.grpc) {
    grpc = std::make_unique<ipu::serve::grpc_server>(
        repo, ipu::serve::grpc_server_options{.bind = a.bind, .port = a.grpc_port, .max_message_bytes = a.max_request_bytes});
    grpc->start();
    also = " and grpc://" + a.bind + ":" + std::to_string(grpc->port());
  }
#endif
  rep.printf("serving %zu models on http://%s:%d%s\n", loaded, a.bind.c_str(), server.port(), also.c_str());
  rep.json = {{"models", loaded}, {"bind", a.bind}, {"port", server.port()},
              {"url", "http://" + a.bind + ":" + std::to_string(server.port())}};
#ifdef IPU_HAVE_GRPC
  if (grpc) rep.json["grpc_port"] = grpc->port();
#endif
  if (rep.option().to_stdout()) std::printf("%s\n", rep.json.dump().c_str());  // one line: a script reads it and connects
  else rep.finish();
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
#ifdef IPU_HAVE_GRPC
  if (grpc) grpc->stop();
#endif
  server.stop();
  std::fprintf(stderr, "ipu serve: stopped (%s)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
}

/// Adds the `serve` subcommand to the tool.
inline void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<serve_args>();
  auto* cmd = app.add_subcommand("serve", "serve a model repository of PopEF files over KServe v2 (HTTP, and gRPC with --grpc-port)");
  cmd->add_option("--model-repository", a->repository, "DIR/<model>/<version>/model.popef [+ DIR/<model>/config.json]")->required();
  cmd->add_option("--http-port", a->http_port, "HTTP port (0: an ephemeral port, printed)")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--bind", a->bind, "the address to listen on")->capture_default_str();
  cmd->add_option("--max-request-bytes", a->max_request_bytes, "larger request bodies are answered 413")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40))->capture_default_str();
  auto* grpc = cmd->add_option("--grpc-port", a->grpc_port, "also serve KServe v2 over gRPC on this port (0: an ephemeral port, printed)")
                   ->check(CLI::Range(0, 65535));
  add_json_option(*cmd, a->json);
  cmd->callback([a, grpc] {
    a->grpc = grpc->count() > 0;
    run_serve(*a);
  });
}

}  // namespace ipu_cli
