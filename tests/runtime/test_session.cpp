// runtime::session on a small model with two weights (y = relu(x * w + b), z = y - x), compiled
// and exported as PopEF: outputs against values computed by hand and against ipu::cpu::device,
// TensorData binding with exclusion predicates and overrides, the device checks, every error path,
// the save programs, threads sharing a session, and a PyTorch-exported model against PyTorch.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "../popef/popef_test_util.hpp"
#include "small_model.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/runtime/device_manager.hpp"
#include "ipu/builder/builder.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/runtime/model_runner.hpp"
#include "ipu/runtime/session.hpp"

namespace test_session {

using namespace ipu;
namespace fs = std::filesystem;

namespace session_tests {

using runtime_test::b0;
using runtime_test::relative_difference;
using runtime_test::relu;
using runtime_test::small_model;
using runtime_test::w0;
using test_popef::scratch_dir;

std::vector<float> expect_y(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b) {
  std::vector<float> y;
  for (std::size_t i = 0; i < 3; ++i) y.push_back(relu(x[i] * w[i] + b[i]));
  return y;
}
std::vector<float> expect_z(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b) {
  auto y = expect_y(x, w, b);
  for (std::size_t i = 0; i < 3; ++i) y[i] -= x[i];
  return y;
}

options opts(std::int64_t bps, bool pipeline = false) {
  return options().device_iterations(bps).execution_strategy(pipeline ? strategy_settings::pipelined()
                                                                       : strategy_settings::sharded());
}

popef::compiled_model compiled(std::int64_t bps = 2, bool pipeline = false, const device_description& d = device_from_name("mk2", 1)) {
  return popef::compile(small_model(), opts(bps, pipeline), d);
}

/// Two micro-batches of x: F32[2, 3].
const std::vector<float> x0{1.f, 2.f, 3.f}, x1{-2.f, 4.f, 10.f};
host_tensor two_batches() {
  std::vector<float> v = x0;
  v.insert(v.end(), x1.begin(), x1.end());
  return host_tensor::from<float>({2, 3}, v);
}

std::vector<float> slice(const host_tensor& t, std::size_t i) {
  const auto v = t.as<float>();
  return {v.begin() + static_cast<std::ptrdiff_t>(3 * i), v.begin() + static_cast<std::ptrdiff_t>(3 * i + 3)};
}

/// Runs the two micro-batches and checks y and z against the hand-computed values.
void check_step(runtime::session& s, const std::vector<float>& w, const std::vector<float>& b) {
  const auto x = two_batches();
  step_io io;
  io.set_input("x", x.view());
  s.run_main_programs(io);
  const auto& y = s.outputs().at("y");
  const auto& z = s.outputs().at("z");
  CHECK(y.info() == tensor_info{data_type::F32, shape{2, 3}});
  CHECK(slice(y, 0) == expect_y(x0, w, b));
  CHECK(slice(y, 1) == expect_y(x1, w, b));
  CHECK(slice(z, 0) == expect_z(x0, w, b));
  CHECK(slice(z, 1) == expect_z(x1, w, b));
}

bool identical(const host_tensor& a, const host_tensor& b) {
  return a.info() == b.info() && std::memcmp(a.data(), b.data(), a.info().num_bytes()) == 0;
}

/// The weightless part of a PopEF file: the executable and its metadata (as popef::write_model
/// writes them, without TensorData).
void write_weightless(const popef::compiled_model& m, const fs::path& file) {
  popef::pb::Executable e;
  *e.mutable_graph() = popef::graph_to_proto(m.model());
  *e.mutable_plan() = popef::plan_to_proto(m.plan);
  const auto bytes = popef::detail::serialize_message(e, "executable");
  popef::writer w(file);
  w.write_executable(m.name, std::as_bytes(std::span(bytes.data(), bytes.size())), true);
  w.write_metadata(m.metadata);
  w.close();
}

TEST_CASE("a session runs a PopEF file compiled from a builder graph") {
  scratch_dir dir("session");
  (void)popef::compile_and_export(small_model(), opts(2), device_from_name("mk2", 1), dir / "m.popef");
  runtime::session s(dir / "m.popef", device_from_name("mk2", 1));
  CHECK(s.binding("w") == runtime::binding_source::tensor_data);
  CHECK(s.binding("b") == runtime::binding_source::tensor_data);
  CHECK(s.binding("x") == runtime::binding_source::none);  // a main input: no TensorData
  CHECK(s.unbound_tensors() == std::vector<std::string>{"x"});
  CHECK_FALSE(s.loaded());
  s.run_load_programs();
  CHECK(s.loaded());
  check_step(s, w0, b0);

  // Against the CPU device on the original graph, micro-batch by micro-batch.
  cpu::device dev(small_model());
  for (std::size_t i = 0; i < 2; ++i) {
    const auto xi = host_tensor::from<float>({3}, i == 0 ? x0 : x1);
    const auto ref = dev.run(cpu::named_tensors{{"x", xi.view()}});
    REQUIRE(ref.size() == 2);
    CHECK(std::vector<float>(ref[0].as<float>().begin(), ref[0].as<float>().end()) == slice(s.outputs().at("y"), i));
    CHECK(std::vector<float>(ref[1].as<float>().begin(), ref[1].as<float>().end()) == slice(s.outputs().at("z"), i));
  }
  // Step arrays given by the caller receive the anchors instead.
  const auto x = two_batches();
  host_tensor y(s.layout().anchor_info("y"));
  step_io io;
  io.set_input("x", x.view()).set_output("y", y.view());
  s.run_main_programs(io);
  CHECK(slice(y, 1) == expect_y(x1, w0, b0));
}

TEST_CASE("a session runs a compiled model in memory on the CPU and a pipelined one on two IPUs") {
  const auto cpu_exe = compiled(2, false, device_from_name("cpu"));
  CHECK(cpu_exe.metadata.ipu_version == "cpu");
  {
    runtime::session s(cpu_exe);  // the host: no device needed
    s.run_load_programs();
    check_step(s, w0, b0);
  }
  {
    runtime::session s(cpu_exe, device_from_name("bow", 4));  // a CPU executable needs no IPUs
    s.run_load_programs();
    check_step(s, w0, b0);
  }
  runtime::session p(compiled(2, true, device_from_name("mk2", 2)), device_from_name("mk2", 2));
  CHECK(p.plan().stages.size() == 2);
  p.run_load_programs();
  check_step(p, w0, b0);
}

TEST_CASE("the file's random seed seeds the model's random ops: the CPU device's draws for that seed") {
  // y = x + RandomUniform[3] with no seed attribute: the run's seed decides the draws.
  const auto model = [] {
    builder g("rand");
    const auto x = g.add_input_tensor({data_type::F32, shape{3}}, "x");
    const auto r = g.op("RandomUniform", {}, {{"shape", std::vector<std::int64_t>{3}}}).front();
    g.add_output(g.add(x, r, "y"));
    return std::move(g).build();
  }();
  const auto draws = [&](std::uint64_t seed) {  // micro-batch 0 and 1 on the CPU device
    cpu::device_options o;
    o.random_seed = seed;
    cpu::device dev(model, o);
    std::vector<float> v;
    for (const auto& xi : {x0, x1}) {
      const auto a = host_tensor::from<float>({3}, xi);
      const auto r = dev.run(cpu::named_tensors{{"x", a.view()}});
      v.insert(v.end(), r[0].as<float>().begin(), r[0].as<float>().end());
    }
    return v;
  };
  const auto step = [&](const options& o) {
    runtime::session s(popef::compile(model, o, device_from_name("mk2", 1)), device_from_name("mk2", 1));
    s.run_load_programs();
    const auto x = two_batches();
    step_io io;
    io.set_input("x", x.view());
    s.run_main_programs(io);
    const auto y = s.outputs().at("y").as<float>();
    return std::vector<float>(y.begin(), y.end());
  };
  const auto seven = step(opts(2).random_seed(7));
  CHECK(seven == draws(7));
  CHECK(seven != draws(8));
  CHECK(step(opts(2)) == draws(random_source::default_seed));  // no seed in the file: the default
  // The model runner reads it too.
  runtime::model_runner_config c;
  c.acquire_device = false;  // tests share the simulated system with other processes
  runtime::model_runner runner(popef::compile(model, opts(2).random_seed(7), device_from_name("mk2", 1)), c);
  const auto a = host_tensor::from<float>({3}, x0);
  const auto out = runner.execute({{"x", a.view()}});
  const auto y = out.at("y").as<float>();
  CHECK(std::vector<float>(y.begin(), y.end()) == std::vector<float>(seven.begin(), seven.begin() + 3));
}

TEST_CASE("predicates exclude TensorData from binding and the user binds it instead") {
  scratch_dir dir("exclude");
  const auto m = compiled();
  popef::export_model(m, dir / "m.popef");
  using pf = runtime::predicate_factory;
  {
    runtime::session_config c;
    c.exclude_from_binding = {pf::names({"w"})};
    runtime::session s(dir / "m.popef", device_from_name("mk2", 1), c);
    CHECK(s.binding("w") == runtime::binding_source::none);
    CHECK(s.binding("b") == runtime::binding_source::tensor_data);
    CHECK_THROWS_WITH_AS(s.run_load_programs(), doctest::Contains("weights that have no data: 'w'"), error);
    const std::vector<float> w1{-1.f, 3.f, 1.f};
    s.set_tensor("w", host_tensor::from<float>({3}, w1).view());
    CHECK(s.binding("w") == runtime::binding_source::user);
    s.run_load_programs();
    check_step(s, w1, b0);
  }
  {
    runtime::session_config c;  // by anchor kind: every input anchor, weights included
    c.exclude_from_binding = {pf::of_type(popef::anchor_type::input)};
    runtime::session s(m, device_from_name("mk2", 1), c);
    CHECK(s.binding("w") == runtime::binding_source::none);
    CHECK(s.binding("b") == runtime::binding_source::none);
    CHECK_THROWS_WITH_AS(s.run_load_programs(), doctest::Contains("'w', 'b'"), error);
  }
  {
    runtime::session_config c;  // weights (the load flow's anchors) except b
    c.exclude_from_binding = {pf::all_of({pf::in_load_flow(), pf::negate(pf::names({"b"}))})};
    runtime::session s(m, device_from_name("mk2", 1), c);
    CHECK(s.binding("w") == runtime::binding_source::none);
    CHECK(s.binding("b") == runtime::binding_source::tensor_data);
  }
  {
    runtime::session_config c;  // predicates that match nothing leave everything bound
    c.exclude_from_binding = {pf::in_save_flow(), pf::no_program(), pf::in_program(7)};
    runtime::session s(m, device_from_name("mk2", 1), c);
    CHECK(s.binding("w") == runtime::binding_source::tensor_data);
    CHECK(pf::in_program(0)(*m.metadata.find_anchor("w"), m.metadata));
    CHECK(pf::in_main_flow()(*m.metadata.find_anchor("x"), m.metadata));
    CHECK_FALSE(pf::in_main_flow()(*m.metadata.find_anchor("w"), m.metadata));
  }
}

TEST_CASE("the user overrides a bound weight and the load programs upload it") {
  runtime::session s(compiled(), device_from_name("mk2", 1));
  const std::vector<float> b1{0.f, 5.f, 5.f};
  s.set_tensor("b", host_tensor::from<float>({3}, b1).view());
  CHECK(s.binding("b") == runtime::binding_source::user);
  s.run_load_programs();
  check_step(s, w0, b1);
  // Changed after loading: the device still has the old value until the load programs run again.
  const std::vector<float> b2{-1.f, -1.f, -1.f};
  s.set_tensor("b", std::make_shared<const host_tensor>(host_tensor::from<float>({3}, b2)));
  const auto x = two_batches();
  step_io io;
  io.set_input("x", x.view());
  CHECK_THROWS_WITH_AS(s.run_main_programs(io), doctest::Contains("weight 'b' was set after the load programs"), error);
  s.run_load_programs();
  check_step(s, w0, b2);
}

TEST_CASE("a file without weights runs with weights from a second file or from the user") {
  scratch_dir dir("weightless");
  const auto m = compiled();
  write_weightless(m, dir / "exe.popef");
  {
    runtime::session s(dir / "exe.popef", device_from_name("mk2", 1));
    CHECK(s.unbound_tensors() == std::vector<std::string>{"x", "w", "b"});
    CHECK_THROWS_WITH_AS(s.run_load_programs(), doctest::Contains("'w', 'b'"), error);
    const std::vector<float> w1{1.f, 1.f, 1.f}, b1{0.f, 0.f, 0.f};
    s.set_tensor("w", host_tensor::from<float>({3}, w1).view());
    s.set_tensor("b", host_tensor::from<float>({3}, b1).view());
    s.run_load_programs();
    check_step(s, w1, b1);
  }
  {
    popef::writer w(dir / "weights.popef");
    w.write_tensor_data("w", {data_type::F32, shape{3}}, std::as_bytes(std::span(w0)));
    w.write_tensor_data("b", {data_type::F32, shape{3}}, std::as_bytes(std::span(b0)));
    w.close();
    const std::vector<fs::path> files{dir / "exe.popef", dir / "weights.popef"};
    runtime::session s(files, device_from_name("mk2", 1));
    CHECK(s.binding("w") == runtime::binding_source::tensor_data);
    s.run_load_programs();
    check_step(s, w0, b0);
  }
}

TEST_CASE("a main input with TensorData in the file is fed from it") {
  scratch_dir dir("feed");
  const auto m = compiled();
  {
    popef::writer w(dir / "m.popef");
    popef::write_model(w, m);
    w.write_tensor_data("x", {data_type::F32, shape{3}}, std::as_bytes(std::span(x1)));
    w.close();
  }
  runtime::session s(dir / "m.popef", device_from_name("mk2", 1));
  CHECK(s.binding("x") == runtime::binding_source::tensor_data);
  s.run_load_programs();
  const auto& out = s.run_main_programs();  // every micro-batch reads the bound value
  CHECK(slice(out.at("y"), 0) == expect_y(x1, w0, b0));
  CHECK(slice(out.at("y"), 1) == expect_y(x1, w0, b0));
  s.set_tensor("x", host_tensor::from<float>({3}, x0).view());  // a main input may change between steps
  CHECK(slice(s.run_main_programs().at("z"), 1) == expect_z(x0, w0, b0));
  check_step(s, w0, b0);  // the step io's array wins over the binding
}

TEST_CASE("the device must meet the executable's requirements") {
  const auto two = compiled(2, true, device_from_name("mk2", 2));
  const auto req = runtime::device_requirements::of(two.metadata);
  CHECK(req.num_ipus == 2);
  CHECK(req.ipu_version == "ipu2");
  CHECK(req.text() == "2 ipu2 IPUs");
  CHECK_THROWS_WITH_AS(runtime::session(two, device_from_name("mk2", 1)),
                       doctest::Contains("needs 2 ipu2 IPUs but the device has 1 IPU"), error);
  CHECK_THROWS_WITH_AS(runtime::session(two, device_from_name("mk2", 4)), doctest::Contains("the device has 4 IPUs"),
                       error);
  CHECK_THROWS_WITH_AS(runtime::session(two, device_from_name("bow", 2)), doctest::Contains("the device has ipu21 IPUs"),
                       error);
  CHECK_THROWS_WITH_AS(runtime::session{two}, doctest::Contains("the device is the host CPU"), error);
  try {
    runtime::session s(two, device_from_name("mk1", 2));
    FAIL("a Mk1 device was accepted");
  } catch (const error& e) {
    CHECK(e.category() == error_category::device);
    CHECK(e.hint().find("ipu2") != std::string::npos);
  }
  CHECK_NOTHROW(runtime::session(two, runtime::target_device::of<ipu_model<mk2, 2>>()));
}

TEST_CASE("acquire_device reserves a device of the system meeting the requirements") {
  scratch_dir dir("devices");
  const device_manager mk2_system(make_ipu_system(describe_architecture<mk2>(), 4, 4), dir / "locks");
  const auto two = compiled(2, true, device_from_name("mk2", 2));
  {
    auto target = runtime::acquire_device(two.metadata, mk2_system);
    REQUIRE(target.handle());
    CHECK(target.handle()->num_ipus() == 2);
    runtime::session s(two, std::move(target));
    CHECK(s.target().handle());
    // Two 2-IPU devices in the system: one is now held by the session, one is free.
    std::size_t free_pairs = 0;
    for (const auto& d : mk2_system.enumerate(2)) free_pairs += d.is_free() ? 1u : 0u;
    CHECK(free_pairs == 1);
    s.run_load_programs();
    check_step(s, w0, b0);
  }
  for (const auto& d : mk2_system.enumerate(2)) CHECK(d.is_free());  // released with the session
  const device_manager bow_system(make_ipu_system(describe_architecture<bow>(), 4, 4), dir / "bow-locks");
  CHECK_THROWS_WITH_AS(runtime::acquire_device(two.metadata, bow_system),
                       doctest::Contains("the system's IPUs are ipu21"), error);
  const auto cpu_exe = compiled(2, false, device_from_name("cpu"));
  const auto host = runtime::acquire_device(cpu_exe.metadata, mk2_system);
  CHECK_FALSE(host.handle());
  CHECK(host.description().kind == device_kind::cpu);
  CHECK_THROWS_AS(runtime::target_device(device_handle{}), error);
}

TEST_CASE("acquire_device follows PopTorch's useIpuId and wait-for-device options") {
  scratch_dir dir("options-devices");
  const device_manager system(make_ipu_system(describe_architecture<mk2>(), 4, 4), dir / "locks");
  const auto two = compiled(2, true, device_from_name("mk2", 2));
  const auto needs = runtime::device_requirements::of(two.metadata);
  const auto pairs = system.enumerate(2);
  REQUIRE(pairs.size() == 2);
  const auto second_pair = pairs.back().id;
  {
    auto target = runtime::acquire_device(needs, system, options().use_ipu_id(second_pair));
    REQUIRE(target.handle());
    CHECK(target.handle()->id() == second_pair);
    // Without waiting, the same id while it is held is busy at once.
    CHECK_THROWS_AS(runtime::acquire_device(needs, system, options().use_ipu_id(second_pair)), device_busy_error);
    // No id: any free pair, the other one.
    auto other = runtime::acquire_device(needs, system, options());
    REQUIRE(other.handle());
    CHECK(other.handle()->id() == pairs.front().id);
  }
  // A single IPU's id for a 2-IPU executable: the device does not meet the requirements.
  CHECK_THROWS_WITH_AS(runtime::acquire_device(needs, system, options().use_ipu_id(system.enumerate(1).front().id)),
                       doctest::Contains("needs 2 ipu2 IPUs but the device has 1 IPU"), error);
  CHECK_THROWS_WITH_AS(runtime::acquire_device(needs, system, options().use_ipu_id(99)), doctest::Contains("99"), error);
}

TEST_CASE("session errors name what is wrong") {
  runtime::session s(compiled(), device_from_name("mk2", 1));
  const auto x = two_batches();
  step_io io;
  io.set_input("x", x.view());
  CHECK_THROWS_WITH_AS(s.run_main_programs(io), doctest::Contains("the main programs ran before the load programs"),
                       error);
  CHECK_THROWS_WITH_AS(s.run_main_programs(io), doctest::Contains("run_load_programs() first"), error);
  CHECK_THROWS_WITH_AS((void)s.run_save_programs(), doctest::Contains("before the load programs"), error);
  s.run_load_programs();
  CHECK_THROWS_WITH_AS(s.run_main_programs(), doctest::Contains("input 'x' is unbound"), error);
  CHECK_THROWS_WITH_AS(s.set_tensor("b", host_tensor::from<float>({4}, {1.f, 2.f, 3.f, 4.f}).view()),
                       doctest::Contains("'b' is given as F32[4] but the anchor is F32[3]"), error);
  CHECK_THROWS_WITH_AS(s.set_tensor("b", host_tensor::from<std::int32_t>({3}, {1, 2, 3}).view()),
                       doctest::Contains("the anchor is F32[3]"), error);
  CHECK_THROWS_WITH_AS(s.set_tensor("x", host_tensor::from<float>({2, 3}, {1, 2, 3, 4, 5, 6}).view()),
                       doctest::Contains("'x' is given as F32[2,3]"), error);
  CHECK_THROWS_WITH_AS(s.set_tensor("nope", x.view()), doctest::Contains("no anchor named 'nope'"), error);
  CHECK_THROWS_WITH_AS((void)s.binding("nope"), doctest::Contains("the anchors are: x, y, z"), error);
  CHECK_THROWS_WITH_AS(s.set_tensor("y", host_tensor::from<float>({3}, {1, 2, 3}).view()),
                       doctest::Contains("'y' is an output anchor"), error);
  const auto short_x = host_tensor::from<float>({3}, x0);  // one micro-batch for a step of two
  step_io bad;
  bad.set_input("x", short_x.view());
  CHECK_THROWS_WITH_AS(s.run_main_programs(bad), doctest::Contains("expected 6 but received 3"), error);
  step_io unknown;
  unknown.set_input("x", x.view()).set_input("q", x.view());
  CHECK_THROWS_WITH_AS(s.run_main_programs(unknown), doctest::Contains("'q', which is not a graph input"), error);
  runtime::session_config c;
  c.flow = data_flow(3, {"y"}, anchor_return_type::all());
  CHECK_THROWS_WITH_AS(runtime::session(compiled(), device_from_name("mk2", 1), c),
                       doctest::Contains("batches per step"), error);
  check_step(s, w0, b0);  // still usable
  s.stop();
  CHECK_FALSE(s.loaded());
  CHECK_THROWS_AS(s.run_main_programs(io), error);
}

TEST_CASE("the save programs return the weights the device holds") {
  auto m = compiled();
  CHECK(runtime::session(m, device_from_name("mk2", 1)).plan().flow.save.empty());  // inference exports save nothing
  m.plan.flow.save = {static_cast<std::uint32_t>(program_index::weights_to_host)};
  m.metadata.flow.save = m.plan.flow.save;
  runtime::session s(m, device_from_name("mk2", 1));
  const std::vector<float> w1{4.f, 4.f, -4.f};
  s.set_tensor("w", host_tensor::from<float>({3}, w1).view());
  s.run_load_programs();
  check_step(s, w1, b0);
  const auto saved = s.run_save_programs();
  REQUIRE(saved.size() == 2);
  CHECK(std::vector<float>(saved.at("w").as<float>().begin(), saved.at("w").as<float>().end()) == w1);
  CHECK(std::vector<float>(saved.at("b").as<float>().begin(), saved.at("b").as<float>().end()) == b0);
}

TEST_CASE("a PyTorch-exported model through a session equals PyTorch and the CPU device") {
  const fs::path models = IPU_TEST_MODELS;
  scratch_dir dir("torch");
  const auto g = ipu::onnx::load_model(models / "transformer_encoder.onnx");
  const auto x = io::read_npy(models / "transformer_encoder.input.npy");
  const auto in = g.tensor(g.inputs()[0]).name;
  std::vector<host_tensor> reference;
  {
    cpu::device dev(g);
    reference = dev.run(cpu::named_tensors{{in, x.view()}});
  }
  (void)popef::compile_and_export(g, opts(1), device_from_name("mk2", 1), dir / "t.popef");
  runtime::session s(dir / "t.popef", device_from_name("mk2", 1));
  s.run_load_programs();
  step_io io;
  io.set_input(in, x.view());
  s.run_main_programs(io);
  const auto out_name = g.tensor(g.outputs()[0]).name;
  const auto& out = s.outputs().at(out_name);
  CHECK(identical(out, reference[0]));
  const auto torch = io::read_npy(models / "transformer_encoder.output.npy");
  REQUIRE(torch.info() == out.info());
  CHECK(relative_difference(out.as<float>(), torch.as<float>()) <= 1e-3);
}

TEST_SUITE("concurrent") {
  TEST_CASE("threads sharing a session each get their own step's results") {
    runtime::session s(compiled(2, true, device_from_name("mk2", 2)), device_from_name("mk2", 2));
    s.run_load_programs();
    constexpr int threads = 4, steps = 15;
    std::atomic<int> wrong{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (int i = 0; i < steps; ++i) {
          const float k = static_cast<float>(t * 100 + i);
          const std::vector<float> a{k, -k, 0.5f * k}, c{1.f - k, k, 2.f};
          std::vector<float> v = a;
          v.insert(v.end(), c.begin(), c.end());
          const auto x = host_tensor::from<float>({2, 3}, v);
          host_tensor y(tensor_info{data_type::F32, shape{2, 3}}), z(tensor_info{data_type::F32, shape{2, 3}});
          step_io io;
          io.set_input("x", x.view()).set_output("y", y.view()).set_output("z", z.view());
          s.run_main_programs(io);
          if (slice(y, 0) != expect_y(a, w0, b0) || slice(y, 1) != expect_y(c, w0, b0) ||
              slice(z, 1) != expect_z(c, w0, b0))
            ++wrong;
        }
      });
    for (auto& th : pool) th.join();
    CHECK(wrong == 0);
  }
}

}  // namespace session_tests

}  // namespace test_session
