// The KServe v2 gRPC server in-process on an ephemeral port, queried through the generated client
// stub as any KServe / Triton gRPC client would: the serve tests' small model (y = relu(x * w + b),
// z = y - x, compiled batch 4), answers checked against values computed by hand, typed and raw
// tensors, the repository extension, and bad requests answered with the right status and a message.
#include <doctest/doctest.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ipu/serve/grpc_server.hpp"
#include "ipu/serve/http_server.hpp"
#include "ipu/serve/kserve_v2.grpc.pb.h"
#include "ipu/serve/model_repository.hpp"
#include "serve_test_models.hpp"

namespace test_grpc_server {

using namespace serve_test_models;
using inference::GRPCInferenceService;

/// A loaded repository served over gRPC on an ephemeral loopback port, and a stub of it.
struct served {
  std::filesystem::path dir;
  ipu::serve::model_repository repo;
  ipu::serve::grpc_server server;
  std::unique_ptr<GRPCInferenceService::Stub> stub;
  explicit served(const std::string& tag, ipu::serve::grpc_server_options o = {}, const std::string& config = "")
      : dir(make_repository("grpc_" + tag, config)), repo(dir, options()), server(repo, o) {
    repo.load_all();
    server.start();
    stub = GRPCInferenceService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()), grpc::InsecureChannelCredentials()));
  }
  ~served() {
    server.stop();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  /// Calls one method with a deadline; the status.
  template <class Req, class Res, class M>
  grpc::Status call(M method, const Req& q, Res& r) {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return ((*stub).*method)(&c, q, &r);
  }
  grpc::Status infer(const inference::ModelInferRequest& q, inference::ModelInferResponse& r) {
    return call(&GRPCInferenceService::Stub::ModelInfer, q, r);
  }
};

/// A request for `rows` rows of x as typed fp32 contents.
inline inference::ModelInferRequest typed_request(const std::vector<float>& x, std::int64_t rows) {
  inference::ModelInferRequest q;
  q.set_model_name("rows");
  q.set_id("g1");
  auto* in = q.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(rows);
  in->add_shape(3);
  for (float v : x) in->mutable_contents()->add_fp32_contents(v);
  return q;
}

inline std::vector<float> floats_of(const std::string& raw) {
  std::vector<float> v(raw.size() / sizeof(float));
  std::memcpy(v.data(), raw.data(), v.size() * sizeof(float));
  return v;
}

/// The status code and message of a call expected to fail.
inline void expect_failure(const grpc::Status& s, grpc::StatusCode code, const std::string& part) {
  CAPTURE(s.error_message());
  CHECK(s.error_code() == code);
  CHECK(s.error_message().find(part) != std::string::npos);
}

TEST_CASE("serve grpc: health, server and model metadata, readiness") {
  served s("meta");
  inference::ServerLiveResponse live;
  REQUIRE(s.call(&GRPCInferenceService::Stub::ServerLive, inference::ServerLiveRequest(), live).ok());
  CHECK(live.live());
  inference::ServerReadyResponse ready;
  REQUIRE(s.call(&GRPCInferenceService::Stub::ServerReady, inference::ServerReadyRequest(), ready).ok());
  CHECK(ready.ready());
  inference::ServerMetadataResponse sm;
  REQUIRE(s.call(&GRPCInferenceService::Stub::ServerMetadata, inference::ServerMetadataRequest(), sm).ok());
  CHECK(sm.name() == "ipu");
  CHECK(sm.version() == ipu::serve::server_version);
  REQUIRE(sm.extensions_size() == 1);
  CHECK(sm.extensions(0) == "model_repository");

  for (const char* version : {"", "1"}) {
    CAPTURE(version);
    inference::ModelMetadataRequest q;
    q.set_name("rows");
    q.set_version(version);
    inference::ModelMetadataResponse m;
    REQUIRE(s.call(&GRPCInferenceService::Stub::ModelMetadata, q, m).ok());
    CHECK(m.name() == "rows");
    REQUIRE(m.versions_size() == 1);
    CHECK(m.versions(0) == "1");
    CHECK(m.platform() == "ipu_popef");
    REQUIRE(m.inputs_size() == 1);
    CHECK(m.inputs(0).name() == "x");
    CHECK(m.inputs(0).datatype() == "FP32");
    CHECK(std::vector<std::int64_t>(m.inputs(0).shape().begin(), m.inputs(0).shape().end()) == std::vector<std::int64_t>{-1, 3});
    REQUIRE(m.outputs_size() == 2);
    CHECK(m.outputs(0).name() == "y");
    CHECK(m.outputs(1).name() == "z");
  }
  inference::ModelReadyRequest rq;
  rq.set_name("rows");
  inference::ModelReadyResponse rr;
  REQUIRE(s.call(&GRPCInferenceService::Stub::ModelReady, rq, rr).ok());
  CHECK(rr.ready());

  inference::ModelMetadataRequest q;
  q.set_name("rows");
  q.set_version("2");
  inference::ModelMetadataResponse m;
  expect_failure(s.call(&GRPCInferenceService::Stub::ModelMetadata, q, m), grpc::StatusCode::NOT_FOUND, "no version '2'");
  rq.set_name("nope");
  expect_failure(s.call(&GRPCInferenceService::Stub::ModelReady, rq, rr), grpc::StatusCode::NOT_FOUND, "unknown model 'nope'");
}

TEST_CASE("serve grpc: typed contents in and out against hand-computed values") {
  served s("typed");
  const std::vector<float> x{1, 2, 3, -1, 0, 4};
  inference::ModelInferResponse r;
  const auto st = s.infer(typed_request(x, 2), r);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  CHECK(r.model_name() == "rows");
  CHECK(r.model_version() == "1");
  CHECK(r.id() == "g1");
  CHECK(r.raw_output_contents_size() == 0);
  REQUIRE(r.outputs_size() == 2);
  const auto& y = r.outputs(0);
  CHECK(y.name() == "y");
  CHECK(y.datatype() == "FP32");
  CHECK(std::vector<std::int64_t>(y.shape().begin(), y.shape().end()) == std::vector<std::int64_t>{2, 3});
  // By hand: y = relu(x * (2, -1, 0.5) + (1, 1, -4)), z = y - x.
  CHECK(std::vector<float>(y.contents().fp32_contents().begin(), y.contents().fp32_contents().end()) ==
        std::vector<float>{3, 0, 0, 0, 1, 0});
  const auto& z = r.outputs(1).contents().fp32_contents();
  CHECK(std::vector<float>(z.begin(), z.end()) == std::vector<float>{2, -2, -3, 1, 1, -4});
}

TEST_CASE("serve grpc: raw contents, outputs by name, a request over several runs, the HTTP server's batcher") {
  served s("raw", {}, R"({"max_batch_size": 8})");
  ipu::serve::http_server http(s.repo, {});  // the same repository over both protocols at once
  http.start();
  const std::vector<float> x{1, 2, 3, -1, 0, 4, 0.5f, 8, 9, 3, 3, 3, -2, -2, 20, 1, 1, 1};  // 6 rows: 2 runs of 4
  inference::ModelInferRequest q;
  q.set_model_name("rows");
  q.set_model_version("1");
  auto* in = q.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(6);
  in->add_shape(3);
  q.add_raw_input_contents(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
  q.add_outputs()->set_name("z");
  const auto before = s.repo.find("rows", "")->batcher().stats();
  inference::ModelInferResponse r;
  const auto st = s.infer(q, r);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  REQUIRE(r.outputs_size() == 1);
  CHECK(r.outputs(0).name() == "z");
  CHECK(r.outputs(0).shape(0) == 6);
  CHECK_FALSE(r.outputs(0).has_contents());
  REQUIRE(r.raw_output_contents_size() == 1);
  CHECK(floats_of(r.raw_output_contents(0)) == z_of(x));
  const auto after = s.repo.find("rows", "")->batcher().stats();
  CHECK(after.requests == before.requests + 1);
  CHECK(after.runs == before.runs + 2);
  CHECK(after.rows == before.rows + 6);
}

TEST_CASE("serve grpc: the request parameter timeout overrides the model's, bad values are INVALID_ARGUMENT") {
  // A run starts once 4 rows wait or the oldest has waited 2 s: a 2 ms timeout leaves the queue
  // first (were it ignored, the request would run after 2 s and succeed).
  served s("timeout", {}, R"({"dynamic_batching": {"preferred_batch_size": [4], "max_queue_delay_microseconds": 2000000}})");
  inference::ModelInferResponse r;
  auto q = typed_request({1, 2, 3}, 1);
  (*q.mutable_parameters())["timeout"].set_int64_param(2000);
  expect_failure(s.infer(q, r), grpc::StatusCode::UNAVAILABLE, "the request waited 2000 us in the queue without starting");
  CHECK(s.repo.find("rows", "")->batcher().stats().timed_out == 1);
  CHECK(s.repo.find("rows", "")->batcher().stats().runs == 0);
  (*q.mutable_parameters())["timeout"].set_string_param("2000");
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "parameter 'timeout' is not an int64_param");
  (*q.mutable_parameters())["timeout"].set_int64_param(-5);
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "parameter 'timeout' is -5, negative");
  (*q.mutable_parameters())["timeout"].set_int64_param(4'000'000'000);
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "over the limit of 3600000000 (an hour)");
  // A full batch starts at once, well within its timeout.
  q = typed_request({1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 1}, 4);
  (*q.mutable_parameters())["timeout"].set_int64_param(5'000'000);
  const auto st = s.infer(q, r);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  CHECK(std::vector<float>(r.outputs(0).contents().fp32_contents().begin(), r.outputs(0).contents().fp32_contents().end()) ==
        y_of({1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 1}));
}

TEST_CASE("serve grpc: versions served side by side: metadata, inference and the index per version") {
  served s("versions");
  std::filesystem::create_directories(s.dir / "rows" / "2");
  std::filesystem::copy_file(s.dir / "rows" / "1" / "model.popef", s.dir / "rows" / "2" / "model.popef");
  std::ofstream(s.dir / "rows" / "config.json") << R"({"version_policy": {"latest": {"num_versions": 2}}})";
  inference::RepositoryModelLoadRequest lq;
  lq.set_model_name("rows");
  inference::RepositoryModelLoadResponse lr;
  REQUIRE(s.call(&GRPCInferenceService::Stub::RepositoryModelLoad, lq, lr).ok());

  inference::ModelMetadataRequest mq;
  mq.set_name("rows");
  mq.set_version("1");
  inference::ModelMetadataResponse m;
  REQUIRE(s.call(&GRPCInferenceService::Stub::ModelMetadata, mq, m).ok());
  REQUIRE(m.versions_size() == 2);
  CHECK(m.versions(0) == "1");
  CHECK(m.versions(1) == "2");
  inference::ModelInferResponse r;
  for (const char* version : {"1", "2", ""}) {
    CAPTURE(version);
    auto q = typed_request({1, 2, 3}, 1);
    q.set_model_version(version);
    const auto st = s.infer(q, r);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    CHECK(r.model_version() == (*version ? version : "2"));  // none: the highest served
  }
  CHECK(s.repo.find("rows", "1")->batcher().stats().requests == 1);
  CHECK(s.repo.find("rows", "2")->batcher().stats().requests == 2);
  auto q = typed_request({1, 2, 3}, 1);
  q.set_model_version("3");
  expect_failure(s.infer(q, r), grpc::StatusCode::NOT_FOUND, "has no version '3' served (versions served: 1, 2)");
  inference::ModelReadyRequest rq;
  rq.set_name("rows");
  rq.set_version("1");
  inference::ModelReadyResponse rr;
  REQUIRE(s.call(&GRPCInferenceService::Stub::ModelReady, rq, rr).ok());
  CHECK(rr.ready());
  inference::RepositoryIndexRequest iq;
  inference::RepositoryIndexResponse ir;
  REQUIRE(s.call(&GRPCInferenceService::Stub::RepositoryIndex, iq, ir).ok());
  REQUIRE(ir.models_size() == 2);
  for (int k = 0; k < 2; ++k) {
    CHECK(ir.models(k).name() == "rows");
    CHECK(ir.models(k).version() == std::to_string(k + 1));
    CHECK(ir.models(k).state() == "READY");
  }
}

TEST_CASE("serve grpc: bad requests get the right status and say what is wrong") {
  ipu::serve::grpc_server_options o;
  o.max_message_bytes = 4096;
  served s("bad", o);
  const std::vector<float> x{1, 2, 3};
  inference::ModelInferResponse r;
  auto q = typed_request(x, 1);

  q.set_model_name("nope");
  expect_failure(s.infer(q, r), grpc::StatusCode::NOT_FOUND, "unknown model 'nope'");
  q.set_model_name("");
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "no model_name");

  q = typed_request(x, 2);  // 3 values for a [2, 3] shape
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "shape has 6");
  q = typed_request(x, 1);
  q.mutable_inputs(0)->mutable_contents()->add_int_contents(7);  // a second field filled
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "contents hold 4 elements");
  q = typed_request(x, 1);
  q.mutable_inputs(0)->set_datatype("INT32");  // fp32_contents for an INT32 tensor; the model wants FP32 anyway
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "(0 in int_contents)");
  q.mutable_inputs(0)->set_datatype("BYTES");
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "unsupported datatype 'BYTES'");
  q = typed_request({}, 0);
  q.mutable_inputs(0)->set_shape(0, -1);
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "negative dimension -1");
  q = typed_request({}, 0);
  q.mutable_inputs(0)->set_shape(0, std::int64_t{1} << 40);
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "more than 2^40 elements");

  q = typed_request({1, 2, 3, 4, 5, 6}, 2);
  q.mutable_inputs(0)->set_datatype("INT32");
  q.mutable_inputs(0)->clear_contents();
  for (int v : {1, 2, 3, 4, 5, 6}) q.mutable_inputs(0)->mutable_contents()->add_int_contents(v);
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "input 'x' is INT32");  // the model's check, shared with HTTP
  q = typed_request({1, 2, 3}, 1);
  q.add_outputs()->set_name("w");
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "'w' is not an output of the model");
  q = typed_request({1, 2, 3}, 1);
  (*q.mutable_parameters())["priority"].set_int64_param(1);
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "parameter 'priority' is not supported");

  q = typed_request({}, 1);
  q.mutable_inputs(0)->clear_contents();
  q.add_raw_input_contents(std::string(8, '\0'));  // 8 bytes for 12
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "raw_input_contents holds 8 bytes, not the 12");
  q.add_raw_input_contents(std::string(12, '\0'));
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "2 raw_input_contents for 1 inputs");
  q = typed_request({1, 2, 3}, 1);
  q.add_raw_input_contents(std::string(12, '\0'));
  expect_failure(s.infer(q, r), grpc::StatusCode::INVALID_ARGUMENT, "both typed contents and raw_input_contents");

  q = typed_request(std::vector<float>(3 * 400, 1.f), 400);  // 4.8 KB: over the 4096-byte cap
  const auto big = s.infer(q, r);
  CHECK(big.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);

  // A model unloaded: UNAVAILABLE for inference, not ready; the index says why; loaded back it answers.
  inference::RepositoryModelUnloadRequest uq;
  uq.set_model_name("rows");
  inference::RepositoryModelUnloadResponse ur;
  REQUIRE(s.call(&GRPCInferenceService::Stub::RepositoryModelUnload, uq, ur).ok());
  q = typed_request({1, 2, 3}, 1);
  expect_failure(s.infer(q, r), grpc::StatusCode::UNAVAILABLE, "model 'rows' is not ready: unloaded");
  inference::ModelReadyRequest rq;
  rq.set_name("rows");
  inference::ModelReadyResponse rr;
  REQUIRE(s.call(&GRPCInferenceService::Stub::ModelReady, rq, rr).ok());
  CHECK_FALSE(rr.ready());
  inference::RepositoryIndexRequest iq;
  inference::RepositoryIndexResponse ir;
  REQUIRE(s.call(&GRPCInferenceService::Stub::RepositoryIndex, iq, ir).ok());
  REQUIRE(ir.models_size() == 1);
  CHECK(ir.models(0).name() == "rows");
  CHECK(ir.models(0).state() == "UNAVAILABLE");
  CHECK(ir.models(0).reason() == "unloaded");
  iq.set_ready(true);
  REQUIRE(s.call(&GRPCInferenceService::Stub::RepositoryIndex, iq, ir = {}).ok());
  CHECK(ir.models_size() == 0);
  iq.set_repository_name("other");
  expect_failure(s.call(&GRPCInferenceService::Stub::RepositoryIndex, iq, ir), grpc::StatusCode::INVALID_ARGUMENT,
                 "repository 'other' is not known");

  inference::RepositoryModelLoadRequest lq;
  inference::RepositoryModelLoadResponse lr;
  lq.set_model_name("../rows");
  expect_failure(s.call(&GRPCInferenceService::Stub::RepositoryModelLoad, lq, lr), grpc::StatusCode::NOT_FOUND, "unknown model '../rows'");
  // A model whose config cannot be read fails to load: INVALID_ARGUMENT with the reason.
  std::ofstream(s.dir / "rows" / "config.json") << "{\"max_batch_size\": \"many\"}";
  lq.set_model_name("rows");
  expect_failure(s.call(&GRPCInferenceService::Stub::RepositoryModelLoad, lq, lr), grpc::StatusCode::INVALID_ARGUMENT,
                 "failed to load model 'rows'");
  std::filesystem::remove(s.dir / "rows" / "config.json");
  REQUIRE(s.call(&GRPCInferenceService::Stub::RepositoryModelLoad, lq, lr).ok());
  const auto st = s.infer(q, r);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  CHECK(std::vector<float>(r.outputs(0).contents().fp32_contents().begin(), r.outputs(0).contents().fp32_contents().end()) ==
        y_of({1, 2, 3}));
}

TEST_CASE("serve grpc: options are checked and a port in use is refused") {
  const auto dir = make_repository("grpc_opts");
  ipu::serve::model_repository repo(dir, options());
  ipu::serve::grpc_server_options o;
  o.port = 70000;
  CHECK_THROWS_WITH_AS(ipu::serve::grpc_server(repo, o), doctest::Contains("port 70000 is out of range"), ipu::error);
  o.port = 0;
  o.max_message_bytes = 0;
  CHECK_THROWS_WITH_AS(ipu::serve::grpc_server(repo, o), doctest::Contains("message cap of 0 bytes"), ipu::error);
  ipu::serve::grpc_server a(repo, {});
  a.start();
  ipu::serve::grpc_server_options taken;
  taken.port = a.port();
  ipu::serve::grpc_server b(repo, taken);
  const auto in_use = "cannot listen on 127.0.0.1:" + std::to_string(a.port());
  CHECK_THROWS_WITH_AS(b.start(), doctest::Contains(in_use.c_str()), ipu::error);
  a.stop();
  o.max_message_bytes = 1024;
  o.threads = 0;
  CHECK_THROWS_WITH_AS(ipu::serve::grpc_server(repo, o), doctest::Contains("0 threads"), ipu::error);
  o.threads = 5000;
  CHECK_THROWS_WITH_AS(ipu::serve::grpc_server(repo, o), doctest::Contains("use 1 to 4096"), ipu::error);
  std::filesystem::remove_all(dir);
}

// Not in TEST_SUITE("concurrent"): Debian's gRPC and Abseil are not instrumented, so TSan reports
// their own threads' handoffs as races (in libgrpc, libabsl_* and grpc++'s inlined call ops). The
// cap itself is one std::atomic counter.
TEST_CASE("serve grpc: past `threads` inferences at once a call is answered RESOURCE_EXHAUSTED, health still answered") {
  // One row waits in the batcher for three more (preferred batch 4) for up to a second: the call
  // holds the server's only inference slot meanwhile.
  ipu::serve::grpc_server_options o;
  o.threads = 1;
  served s("threads", o, R"({"dynamic_batching": {"preferred_batch_size": [4], "max_queue_delay_microseconds": 1000000}})");
  const std::vector<float> x{1, 2, 3};
  inference::ModelInferResponse first;
  grpc::Status first_status;
  std::thread t([&] { first_status = s.infer(typed_request(x, 1), first); });
  const auto model = s.repo.find("rows", "");
  while (model->batcher().stats().requests == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  inference::ModelInferResponse refused;
  expect_failure(s.infer(typed_request(x, 1), refused), grpc::StatusCode::RESOURCE_EXHAUSTED, "running 1 inferences already");
  inference::ServerLiveResponse live;
  CHECK(s.call(&GRPCInferenceService::Stub::ServerLive, inference::ServerLiveRequest(), live).ok());
  CHECK(live.live());
  t.join();
  REQUIRE(first_status.ok());
  CHECK(first.outputs(0).contents().fp32_contents(0) == y_of(x)[0]);
  CHECK(model->batcher().stats().requests == 1);  // the refused call never reached the model
  // The slot is free again: four rows fill the preferred batch and run at once.
  const std::vector<float> x4{1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2, -3};
  inference::ModelInferResponse again;
  REQUIRE(s.infer(typed_request(x4, 4), again).ok());
  CHECK(again.outputs(1).contents().fp32_contents(11) == z_of(x4)[11]);
}

}  // namespace test_grpc_server
