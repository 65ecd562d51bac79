// Compile and export, then load: the loaded executable equals the compiled one (plan and graph,
// weights as views of the file), and the PyTorch-exported models give outputs bit-identical to
// running their ONNX files, on the CPU device and through the executor with the loaded plan.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "ipu/cpu/device.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/sched/auto_planner.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/exec/executor.hpp"
#include "ipu/log.hpp"
#include "../runtime/small_model.hpp"
#include "../popef/popef_test_util.hpp"
#include "../captured_log.hpp"

namespace test_compile {

using namespace ipu;
namespace fs = std::filesystem;

namespace {

const fs::path models = IPU_TEST_MODELS;

graph load_onnx(const std::string& name) { return ipu::onnx::load_model(models / (name + ".onnx")); }

std::vector<host_tensor> run_cpu(const graph& g, const host_tensor& x) {
  REQUIRE(g.inputs().size() == 1);
  cpu::device dev(g, {.threads = 2});
  return dev.run(cpu::named_tensors{{g.tensor(g.inputs()[0]).name, x.view()}});
}

bool identical(const host_tensor& a, const host_tensor& b) {
  return a.info() == b.info() && std::memcmp(a.data(), b.data(), a.info().num_bytes()) == 0;
}

options sharded_options() { return options().execution_strategy(strategy_settings::sharded()); }

}  // namespace

TEST_CASE("compile then load gives back the same executable") {
  test_popef::scratch_dir dir("compile");
  const auto g = load_onnx("transformer_encoder");
  for (bool compress : {false, true}) {
    const auto file = dir / (compress ? "c.popef" : "u.popef");
    popef::compile_options co;
    co.compress = compress;
    const auto compiled = popef::compile_and_export(g, sharded_options(), device_from_name("mk2", 1), file, co);
    const auto loaded = popef::load(file);
    CHECK(loaded.name == compiled.name);
    CHECK(loaded.metadata == compiled.metadata);
    CHECK(loaded.plan.model == compiled.plan.model);
    CHECK(loaded.plan == compiled.plan);
    std::size_t weights = 0;
    for (const auto& t : loaded.model().tensors())
      if (t.kind == tensor_kind::variable) {
        CHECK(t.data.is_shared());  // a view of the file, not a copy
        ++weights;
      }
    CHECK(weights > 0);
  }
}

TEST_CASE("compiling refuses STRING tensors: the IPU has no strings, and an executable carries no addresses") {
  graph g("text");
  const auto words = g.add_tensor("words", {data_type::STRING, {2}}, tensor_kind::input);
  const auto numbers = g.add_tensor("numbers", {data_type::F32, {2}});
  op_node cast;
  cast.type = "Cast";
  cast.name = "to_float";
  cast.inputs = {words};
  cast.outputs = {numbers};
  cast.attributes = {{"to", std::int64_t{1}}};
  g.add_op(std::move(cast));
  g.mark_output(numbers);
  CHECK_THROWS_WITH_AS(popef::compile(g, sharded_options(), device_from_name("mk2", 1)),
                       doctest::Contains("tensor 'words' is STRING: the IPU has no string type"), error);
  // The CPU device runs it.
  cpu::device dev(g, {.threads = 1});
  const auto out = dev.run(std::vector<host_tensor>{host_tensor::from_strings({2}, {"1.5", "-2"})});
  CHECK(out.at(0).as<float>()[0] == 1.5f);
  CHECK(out.at(0).as<float>()[1] == -2.0f);
}

TEST_CASE("the metadata describes the anchors and the device") {
  test_popef::scratch_dir dir("meta");
  const auto g = load_onnx("transformer_encoder");
  const auto m = popef::compile_and_export(g, sharded_options().device_iterations(3), device_from_name("mk2", 1),
                                           dir / "m.popef");
  const auto& md = m.metadata;
  CHECK(md.executable == m.name);
  CHECK(md.ipu_version == "ipu2");
  CHECK(md.num_ipus == 1);
  CHECK(md.device_iterations == 3);
  CHECK(md.is_inference);
  CHECK(md.flow.load == std::vector<std::uint32_t>{0});
  CHECK(md.flow.main == std::vector<std::uint32_t>{5});
  CHECK(md.programs.at(0) == "WeightsFromHost");  // PopART's names for PopART's numbering
  CHECK(md.programs.at(5) == "Program");
  const auto& in = g.tensor(g.inputs()[0]);
  const auto* a = md.find_anchor(in.name);
  REQUIRE(a);
  CHECK(a->type == popef::anchor_type::input);
  CHECK(a->info == in.info);
  CHECK(a->programs == std::vector<std::uint32_t>{5});
  const auto* o = md.find_anchor(g.tensor(g.outputs()[0]).name);
  REQUIRE(o);
  CHECK(o->type == popef::anchor_type::output);
  std::size_t weights = 0;
  for (const auto& t : m.model().tensors())
    if (t.kind == tensor_kind::variable) {
      const auto* w = md.find_anchor(t.name);
      REQUIRE(w);
      CHECK(w->programs == std::vector<std::uint32_t>{0});
      CHECK(w->info == t.info);
      ++weights;
    }
  CHECK(md.anchors.size() == 2 + weights);
  CHECK(md.engine_options.at("ipu.strategy") == "sharded");
  CHECK(md.engine_options.at("ipu.options").find("setExecutionStrategy") != std::string::npos);
}

namespace {
void check_model_round_trip(const std::string& name) {
  test_popef::scratch_dir dir("model-" + name);
  const auto x = io::read_npy(models / (name + ".input.npy"));
  std::vector<host_tensor> reference;
  {
    const auto g = load_onnx(name);
    reference = run_cpu(g, x);
    (void)popef::compile_and_export(g, sharded_options(), device_from_name("mk2", 1), dir / "m.popef");
  }  // the ONNX model is gone: only the PopEF file is left
  const auto loaded = popef::load(dir / "m.popef");
  const auto out = run_cpu(loaded.model(), x);
  REQUIRE(out.size() == reference.size());
  for (std::size_t i = 0; i < out.size(); ++i) CHECK(identical(out[i], reference[i]));
  // And against PyTorch's own output, as the ONNX tests check it.
  const auto torch = io::read_npy(models / (name + ".output.npy"));
  REQUIRE(torch.info() == out[0].info());
  const auto got = out[0].as<float>();
  const auto want = torch.as<float>();
  double worst = 0, scale = 1e-6;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  CHECK(worst <= 1e-3 * scale);
}
}  // namespace

TEST_CASE("AlexNet from PopEF equals AlexNet from ONNX") { check_model_round_trip("alexnet"); }
TEST_CASE("MobileNetV2 from PopEF equals MobileNetV2 from ONNX") { check_model_round_trip("mobilenet_v2"); }
TEST_CASE("the transformer encoder from PopEF equals it from ONNX") { check_model_round_trip("transformer_encoder"); }

TEST_CASE("a loaded pipelined plan runs on the executor and equals the CPU device") {
  test_popef::scratch_dir dir("pipelined");
  using device4 = ipu_model<mk2, 4>;
  const auto g = load_onnx("transformer_encoder");
  const std::uint64_t bps = 4;
  const auto opts = options().device_iterations(static_cast<std::int64_t>(bps)).execution_strategy(strategy_settings::pipelined());
  (void)popef::compile_and_export(g, opts, device4::description(), dir / "p.popef");
  const auto loaded = popef::load(dir / "p.popef");
  CHECK(loaded.plan.strategy == "pipelined");
  CHECK(loaded.plan.stages.size() == 4);  // split over the four IPUs
  CHECK(loaded.plan.ipus_per_replica == 4);

  const auto x = io::read_npy(models / "transformer_encoder.input.npy");
  const auto& in = loaded.model().tensor(loaded.model().inputs()[0]);
  std::vector<std::int64_t> dims{static_cast<std::int64_t>(bps)};
  for (auto d : in.info.shape) dims.push_back(d);
  host_tensor batch(tensor_info{in.info.type, shape(dims)});
  std::vector<host_tensor> slices;
  for (std::uint64_t i = 0; i < bps; ++i) {
    host_tensor s = x;
    for (auto& v : s.as<float>()) v = v * (1.0f - 0.2f * static_cast<float>(i)) + 0.05f * static_cast<float>(i);
    std::memcpy(batch.data() + i * s.info().num_bytes(), s.data(), s.info().num_bytes());
    slices.push_back(std::move(s));
  }
  const auto flow = data_flow::for_outputs(loaded.model(), bps);
  executor<pipelined_execution, device4> ex(loaded.plan, flow, {.threads_per_worker = 1});
  auto anchors = ex.make_anchor_arrays();
  step_io io({{in.name, batch.view()}}, anchors);
  ex.run(io);
  const auto& out_name = loaded.model().tensor(loaded.model().outputs()[0]).name;
  const auto& got = anchors.at(out_name);
  cpu::device dev(loaded.model(), {.threads = 1});
  for (std::uint64_t i = 0; i < bps; ++i) {
    const auto want = dev.run(cpu::named_tensors{{in.name, slices[i].view()}});
    const auto n = want[0].info().num_bytes();
    CHECK(std::memcmp(got.data() + i * n, want[0].data(), n) == 0);
  }
}

TEST_CASE("every strategy's plan survives the file") {
  test_popef::scratch_dir dir("strategies");
  const auto g = load_onnx("mobilenet_v2");
  const auto device = device_from_name("mk2", 4);
  for (auto mode : {execution_mode::sharded, execution_mode::pipelined, execution_mode::serial_phased,
                    execution_mode::parallel_phased}) {
    CAPTURE(to_string(mode));
    const bool phased = mode == execution_mode::serial_phased || mode == execution_mode::parallel_phased;
    auto opts = options().device_iterations(8);
    popef::compile_options co;
    graph model = g;
    std::size_t pieces = 4;  // sharded and pipelined: compile places the model over the 4 IPUs itself
    if (phased) {
      // Phased: the automatic planner annotates phases, and the plan follows the annotations.
      auto_plan_options ao;
      ao.min_phases = 4;
      const auto p = propose_phases(g, device, 4, mode == execution_mode::parallel_phased, {}, ao);
      model = p.annotated;
      pieces = p.stage_begin.size();
      co.from_annotations = mode;
    } else {
      opts.execution_strategy(mode == execution_mode::pipelined ? strategy_settings::pipelined()
                                                                : strategy_settings::sharded());
    }
    const auto file = dir / (std::string(to_string(mode)) + ".popef");
    const auto compiled = popef::compile_and_export(model, opts, device, file, co);
    CHECK(pieces >= 4);
    CHECK(compiled.plan.stages.size() == pieces);
    const auto loaded = popef::load(file);
    CHECK(loaded.plan == compiled.plan);
    CHECK(loaded.metadata == compiled.metadata);
  }
}

TEST_CASE("a replicated plan survives the file") {
  test_popef::scratch_dir dir("replicated");
  const auto g = load_onnx("mobilenet_v2");
  const auto device = device_from_name("mk2", 4);
  // Two replicas of two IPUs: compile places the model over one replica's IPUs.
  const auto opts =
      options().device_iterations(4).replication_factor(2).execution_strategy(strategy_settings::pipelined());
  const auto compiled = popef::compile_and_export(g, opts, device, dir / "r.popef");
  CHECK(compiled.plan.stages.size() == 2);
  CHECK(compiled.plan.replication_factor == 2);
  CHECK(compiled.plan.ipus_per_replica == 2);
  CHECK(compiled.metadata.replication_factor == 2);
  CHECK(compiled.metadata.num_ipus == 4);
  const auto loaded = popef::load(dir / "r.popef");
  CHECK(loaded.plan == compiled.plan);
}

TEST_CASE("fp16 precision stores F16 weights and keeps the model's inputs and outputs") {
  test_popef::scratch_dir dir("fp16");
  const auto g = load_onnx("transformer_encoder");
  const auto file = dir / "h.popef";
  (void)popef::compile_and_export(g, sharded_options().precision(data_type::F16), device_from_name("mk2", 1), file);
  const popef::reader r(file);
  REQUIRE_FALSE(r.tensors().empty());
  std::size_t f16 = 0;
  for (const auto& t : r.tensors()) {
    CHECK(t.info.type != data_type::F32);
    f16 += t.info.type == data_type::F16;
  }
  CHECK(f16 > 0);
  const auto loaded = popef::load(file);
  const auto& lg = loaded.model();
  CHECK(lg.tensor(lg.inputs()[0]).info == g.tensor(g.inputs()[0]).info);
  CHECK(lg.tensor(lg.outputs()[0]).info == g.tensor(g.outputs()[0]).info);
  CHECK(lg.tensor(lg.outputs()[0]).name == g.tensor(g.outputs()[0]).name);
  CHECK(loaded.plan.precision == data_type::F16);

  const auto x = io::read_npy(models / "transformer_encoder.input.npy");
  const auto want = run_cpu(g, x);
  const auto got = run_cpu(lg, x);
  REQUIRE(got.size() == want.size());
  const auto a = got[0].as<float>();
  const auto b = want[0].as<float>();
  double worst = 0, scale = 1e-6;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  CHECK(worst <= 2e-2 * scale);  // half precision: about 3 significant digits through the layers
  CHECK(worst > 0);              // and not the F32 model by accident
}

TEST_CASE("loading without the weights file names the missing weight") {
  test_popef::scratch_dir dir("split");
  const auto g = load_onnx("transformer_encoder");
  const auto m = popef::compile(g, sharded_options(), device_from_name("mk2", 1));
  {
    popef::writer w(dir / "exe.popef");
    popef::write_model(w, m);
  }
  // Keep only the executable and metadata: cut the file after the second blob.
  const popef::reader full(dir / "exe.popef");
  REQUIRE(full.blobs().size() > 2);
  auto bytes = test_popef::read_bytes(dir / "exe.popef");
  bytes.resize(static_cast<std::size_t>(full.blobs()[2].offset));
  test_popef::write_bytes(dir / "exe_only.popef", bytes);
  try {
    (void)popef::load(dir / "exe_only.popef");
    FAIL("no error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == error_category::popef);
    CHECK(std::string(e.what()).find("has no TensorData blob") != std::string::npos);
  }
  // The weights in a second file make the model whole again.
  {
    popef::writer w(dir / "weights.popef");
    for (const auto& t : m.model().tensors())
      if (t.kind == tensor_kind::variable) w.write_tensor_data(t.name, t.info, t.data.bytes());
  }
  const fs::path files[] = {dir / "exe_only.popef", dir / "weights.popef"};
  const auto loaded = popef::load(files);
  CHECK(loaded.plan == m.plan);
}

TEST_CASE("placing an unannotated model over several host devices is refused: the planner needs an IPU's figures") {
  const auto g = load_onnx("mobilenet_v2");
  const auto opts = options().device_iterations(2).execution_strategy(strategy_settings::pipelined());
  try {
    (void)popef::compile(g, opts, device_from_name("cpu", 2));
    FAIL("compiling for two host devices should fail");
  } catch (const error& e) {
    CHECK(e.category() == error_category::usage);
    CHECK(std::string(e.what()).find("host devices") != std::string::npos);
  }
}

TEST_CASE("an outputMode other than All is refused when compiling, not ignored") {
  const auto g = runtime_test::small_model();
  CHECK_NOTHROW((void)popef::compile(g, options().output_mode(output_mode::all), device_from_name("mk2", 1)));
  for (auto mode : {output_mode::final, output_mode::sum})
    CHECK_THROWS_WITH_AS((void)popef::compile(g, options().output_mode(mode), device_from_name("mk2", 1)),
                         doctest::Contains("is not supported when compiling"), error);
}

TEST_CASE("compile logs its stages and times at INFO and the plan's stages at DEBUG") {
  {
    const ipu_test::captured_log log(log::level::debug);
    const auto g = load_onnx("mobilenet_v2");
    const auto opts = options().device_iterations(4).execution_strategy(strategy_settings::pipelined());
    (void)popef::compile(g, opts, device_from_name("mk2", 2));
    CHECK(log.has(log::level::info, "compile: the automatic planner placed 'torch_jit' over 2 IPUs in "));
    CHECK(log.has(log::level::info, "pipelined over 2 mk2 IPU(s), 2 stage(s), 1 replica(s), 4 micro-batch(es) per step"));
    CHECK(log.has(log::level::info, " compiled in "));
    CHECK(log.has(log::level::debug, "\n  stage 1: IPU 1, "));
  }
  // Nothing below the level in force is even formatted: at WARN, compile says nothing.
  const ipu_test::captured_log log(log::level::warn);
  (void)popef::compile(runtime_test::small_model(), options(), device_from_name("mk2", 1));
  CHECK(log.lines().empty());
}

}  // namespace test_compile
