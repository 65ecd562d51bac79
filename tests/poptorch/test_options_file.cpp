#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/poptorch/options_file.hpp"

namespace test_options_file {

using ipu::options;
using ipu::stage;

namespace {
namespace fs = std::filesystem;

// A file in the temp directory, removed when done.
struct temp_file {
  fs::path path;
  temp_file(std::string_view name, std::string_view contents)
      : path(fs::temp_directory_path() / ("ipu_options_" + std::to_string(::getpid()) + "_" + std::string(name))) {
    std::ofstream(path) << contents;
  }
  ~temp_file() { fs::remove(path); }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
};

std::optional<ipu::error> load_error(std::string_view text, options* into = nullptr) {
  options scratch;
  try {
    (into ? *into : scratch).load_from_string(text, "my.conf");
  } catch (const ipu::error& e) {
    return e;
  }
  return std::nullopt;
}

options load(std::string_view text) {
  options o;
  o.load_from_string(text);
  return o;
}
}  // namespace

TEST_CASE("options file: the example from PopTorch's documentation, verbatim") {
  const temp_file f("poptorch.conf",
                    "deviceIterations(1)\n"
                    "setExecutionStrategy(poptorch.ShardedExecution())\n"
                    "replicationFactor(1)\n"
                    "enableSyntheticData(True)\n");
  options o;
  o.load_from_file(f.path);
  CHECK(o.device_iterations() == 1);
  CHECK(o.replication_factor() == 1);
  CHECK(o.synthetic_data());
  CHECK(o.execution_strategy().mode == ipu::execution_mode::sharded);
  CHECK(o.execution_strategy().stages.empty());
  CHECK(o.execution_strategy().auto_stage == ipu::auto_stage::same_as_ipu);
  // Everything else keeps its default.
  options expected;
  expected.enable_synthetic_data(true).execution_strategy(ipu::strategy_settings::sharded());
  CHECK(o == expected);
}

TEST_CASE("options file: comments, blank lines, groups, enums, keywords, chains") {
  const auto o = load(R"(
# training run on 4 IPUs
   deviceIterations(8)   # trailing comment
replicationFactor(2)

Training.gradientAccumulation(4)
outputMode(poptorch.OutputMode.EveryN, output_return_period=2)
Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Sum).setAutomaticLossScaling(True)
Precision.setPartialsType(torch.half)
Precision.halfFloatCasting(poptorch.HalfFloatCastingBehavior.HalfUpcastToFloat)
inputReplicaGrouping(input_group_size=2, input_group_type=poptorch.enums.CommGroupType.Consecutive)
setAvailableMemoryProportion({"IPU0": 0.5, 'IPU3': 0.25,})
enableExecutableCaching('/tmp/exe cache')
randomSeed(1_000)
autoRoundNumIPUs()
connectionType(poptorch.ConnectionType.OnDemand).syncPattern(poptorch.SyncPattern.SinglePipeline)
TensorLocations.setWeightLocation(poptorch.TensorLocationSettings().useOnChipStorage(False).minElementsForOffChip(1024))
Distributed.configureProcessId(1, 4)
)");
  CHECK(o.device_iterations() == 8);
  CHECK(o.replication_factor() == 2);
  CHECK(o.gradient_accumulation() == 4);
  CHECK(o.output_mode() == ipu::output_mode::every_n);
  CHECK(o.output_return_period() == 2);
  CHECK(o.accumulation_and_replication_reduction_type() == ipu::reduction_type::sum);
  CHECK(o.automatic_loss_scaling());
  CHECK(o.partials_type() == ipu::data_type::F16);
  CHECK(o.half_float_casting() == ipu::half_float_casting::half_upcast_to_float);
  CHECK(o.input_group_size() == 2);
  CHECK(o.input_group_type() == ipu::comm_group_type::consecutive);
  CHECK(o.available_memory_proportion_for(0) == 0.5);
  CHECK(o.available_memory_proportion_for(3) == 0.25);
  CHECK(o.available_memory_proportion_for(1) == 0.6);
  CHECK(o.executable_cache_dir() == "/tmp/exe cache");
  CHECK(o.random_seed() == 1000u);
  CHECK(o.auto_round_num_ipus());
  CHECK(o.connection_type() == ipu::connection_type::on_demand);
  CHECK(o.sync_pattern() == ipu::sync_pattern::single_pipeline);
  CHECK(o.weight_location().on_chip == false);
  CHECK(o.weight_location().min_elements_for_off_chip == 1024);
  CHECK(o.activation_location() == ipu::tensor_location{});
  CHECK(o.process_id() == 1);
  CHECK(o.num_processes() == 4);
  // Parsed, but without effect here: a session refuses the file (options: test_options.cpp).
  CHECK_THROWS_WITH_AS(o.validate(true), doctest::Contains("connectionType(OnDemand) is not supported"), ipu::error);
}

TEST_CASE("options file: execution strategies with stages, phases and liveness") {
  auto s = load(R"(setExecutionStrategy(poptorch.PipelinedExecution(poptorch.Stage("A", "B").ipu(0), "C", ["D", "E"])))")
               .execution_strategy();
  CHECK(s.mode == ipu::execution_mode::pipelined);
  REQUIRE(s.stages.size() == 3);
  CHECK(s.stages[0] == stage{{"A", "B"}, 0});
  CHECK(s.stages[1] == stage{{"C"}, std::nullopt});
  CHECK(s.stages[2] == stage{{"D", "E"}, std::nullopt});

  s = load("setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))").execution_strategy();
  CHECK(s.auto_stage == ipu::auto_stage::auto_increment);
  CHECK(s.stages.empty());

  s = load(R"(setExecutionStrategy(poptorch.SerialPhasedExecution(poptorch.Phase(poptorch.Stage("A").ipu(0), poptorch.Stage("A2").ipu(1)), poptorch.Phase(poptorch.Stage("B"), poptorch.Stage("B2")).ipus(0, 1), ["C", "C2"]).setTensorsLiveness(poptorch.Liveness.OffChipAfterEachPhase)))")
          .execution_strategy();
  CHECK(s.mode == ipu::execution_mode::serial_phased);
  REQUIRE(s.phases.size() == 3);
  CHECK(s.phases[0].stages == std::vector<stage>{{{"A"}, 0}, {{"A2"}, 1}});
  CHECK(s.phases[1].stages == std::vector<stage>{{{"B"}, 0}, {{"B2"}, 1}});
  CHECK(s.phases[2].stages == std::vector<stage>{{{"C", "C2"}, std::nullopt}});  // a list of ids is one stage
  CHECK(s.tensors_liveness == ipu::liveness::off_chip_after_each_phase);

  s = load(R"(setExecutionStrategy(poptorch.ParallelPhasedExecution([poptorch.Phase(poptorch.Stage("0").ipu(0)), poptorch.Phase(poptorch.Stage("1").ipu(1))]).sendTensorsOffChipAfterFwd().useSeparateBackwardPhase(True)))")
          .execution_strategy();
  CHECK(s.mode == ipu::execution_mode::parallel_phased);
  CHECK(s.phases.size() == 2);
  CHECK(s.tensors_liveness == ipu::liveness::off_chip_after_fwd);
  CHECK(s.separate_backward_phase);

  // The strategy's own validation applies, with the file position.
  auto e = load_error(R"(setExecutionStrategy(poptorch.ParallelPhasedExecution(poptorch.Phase(poptorch.Stage("0").ipu(1)))))");
  REQUIRE(e);
  CHECK(e->location() == "my.conf:1");
  CHECK(e->message().find("phase 0 stage 0 is on IPU 1") != std::string::npos);
  e = load_error("setExecutionStrategy(poptorch.SerialPhasedExecution())");
  REQUIRE(e);
  CHECK(e->hint().find("no AutoStage") != std::string::npos);
  e = load_error(R"(setExecutionStrategy(poptorch.ShardedExecution("A", "A")))");
  REQUIRE(e);
  CHECK(e->message().find("block 'A' is in more than one stage") != std::string::npos);
  e = load_error("setExecutionStrategy(poptorch.ShardedExecution().setTensorsLiveness(poptorch.Liveness.AlwaysLive))");
  REQUIRE(e);
  CHECK(e->message().find("ShardedExecution has no method 'setTensorsLiveness'") != std::string::npos);
  e = load_error("setExecutionStrategy(poptorch.GreedyExecution())");
  REQUIRE(e);
  CHECK(e->message().find("expected poptorch.PipelinedExecution") != std::string::npos);
}

TEST_CASE("options file: malformed lines name the file, line and column") {
  struct bad_line {
    const char* text;
    const char* location;
    const char* says;
  };
  for (const auto& c : {bad_line{"deviceIterations(1", "my.conf:1:19", "expected ')' to close the argument list, found the end of the line"},
                        bad_line{"\n\ndeviceIterations 4", "my.conf:3:18", "unexpected '4'"},
                        bad_line{"deviceIterations(1))", "my.conf:1:20", "unexpected ')'"},
                        bad_line{"  deviceIterations(1,,)", "my.conf:1:22", "unexpected ','"},
                        bad_line{"replicationFactor(\"2)", "my.conf:1:22", "unterminated string"},
                        bad_line{"deviceIterations(1) = 3", "my.conf:1:21", "unexpected '='"},
                        bad_line{"deviceIterations(12abc)", "my.conf:1:18", "malformed number"},
                        bad_line{"deviceIterations(99999999999999999999999)", "my.conf:1:18", "integer too large"},
                        bad_line{"deviceIterations(x=1, 2)", "my.conf:1:23", "positional argument cannot follow"},
                        bad_line{"deviceIterations(1)(2)", "my.conf:1:20", "only names can be called"}}) {
    const std::string text = c.text;
    CAPTURE(text);
    const auto e = load_error(c.text);
    REQUIRE(e);
    CHECK(e->category() == ipu::error_category::options);
    CHECK(e->location() == c.location);
    CHECK_MESSAGE(e->message().find(c.says) != std::string::npos, e->message());
    CHECK(e->message().find("syntax error") == 0);
  }
  for (const char* not_a_call : {"deviceIterations", "4", "\"deviceIterations(1)\"", "deviceIterations(1).replicationFactor"}) {
    const std::string text = not_a_call;
    CAPTURE(text);
    const auto e = load_error(not_a_call);
    REQUIRE(e);
    CHECK(e->location().starts_with("my.conf:1"));
  }
}

TEST_CASE("options file: unknown names are errors that suggest the right one and list what is accepted") {
  auto e = load_error("deviceIterations(2)\ndeviceIteration(2)\n");
  REQUIRE(e);
  CHECK(e->category() == ipu::error_category::options);
  CHECK(e->location() == "my.conf:2");
  CHECK(e->message() == "unknown option 'deviceIteration'");
  CHECK(e->hint().starts_with("did you mean deviceIterations?"));
  CHECK(e->hint().find("accepted: deviceIterations, replicationFactor") != std::string::npos);
  CHECK(e->hint().find("Training.gradientAccumulation") != std::string::npos);

  e = load_error("gradientAccumulation(4)");  // PopTorch has it under Training
  REQUIRE(e);
  CHECK(e->hint().starts_with("did you mean Training.gradientAccumulation?"));
  e = load_error("options.deviceIterations(4)");
  REQUIRE(e);
  CHECK(e->hint().starts_with("omit the 'options.' prefix"));
  e = load_error("Training.gradientAccumulation(4).deviceIterations(2)");  // chained calls stay in the group
  REQUIRE(e);
  CHECK(e->message() == "unknown option 'Training.deviceIterations'");
  e = load_error("Jit.traceModel(True)");
  REQUIRE(e);
  CHECK(e->message() == "unknown option 'Jit.traceModel'");
}

TEST_CASE("options file: bad values say what is accepted, with file and line") {
  struct bad_value {
    const char* text;
    const char* says;
  };
  for (const auto& c :
       {bad_value{"deviceIterations(-1)", "deviceIterations: device iterations must be at least 1, got -1"},
        bad_value{"replicationFactor(0)", "replicationFactor: the replication factor must be at least 1, got 0"},
        bad_value{"deviceIterations(True)", "deviceIterations: device_iterations must be an integer, got 'True'"},
        bad_value{"deviceIterations(\"4\")", "deviceIterations: device_iterations must be an integer, got '\"4\"'"},
        bad_value{"deviceIterations(2.5)", "must be an integer, got '2.5'"},
        bad_value{"deviceIterations()", "deviceIterations: missing argument 'device_iterations'"},
        bad_value{"deviceIterations(1, 2)", "deviceIterations: takes at most 1 argument, got 2"},
        bad_value{"deviceIterations(n=2)", "deviceIterations: unknown keyword argument 'n'"},
        bad_value{"Training.gradientAccumulation(0)", "gradient accumulation must be at least 1, got 0"},
        bad_value{"enableSyntheticData(1)", "enabled must be True or False, got '1'"},
        bad_value{"useIpuModel(None)", "use_model must be True or False, got 'None'"},
        bad_value{"outputMode(poptorch.OutputMode.Everyn)", "expected one of poptorch.OutputMode.All, poptorch.OutputMode.Sum"},
        bad_value{"outputMode(poptorch.OutputMode.EveryN)", "EveryN output needs a return period of at least 1, got 0"},
        bad_value{"outputMode(poptorch.OutputMode.EveryN, 0)", "EveryN output needs a return period of at least 1, got 0"},
        bad_value{"outputMode(poptorch.OutputMode.All, 2)", "a return period only applies to EveryN output"},
        bad_value{"setAvailableMemoryProportion({\"IPU0\": 1.5})", "available memory proportion must be in (0, 1]"},
        bad_value{"setAvailableMemoryProportion({\"GPU0\": 0.5})", "keys are IPU names like \"IPU0\", got 'GPU0'"},
        bad_value{"setAvailableMemoryProportion([0.5])", "must be a number, got '[0.5]'"},
        bad_value{"randomSeed(-3)", "random_seed must be at least 0, got -3"},
        bad_value{"useIpuId(-1)", "the IPU device id must be at least 0, got -1"},
        bad_value{"useOfflineIpuTarget(3)", "unknown IPU version 3"},
        bad_value{"useOfflineIpuTarget(\"ipu9\")", "unknown IPU version 'ipu9'"},
        bad_value{"Precision.setPartialsType(torch.int32)", "expected torch.float or torch.half, got 'torch.int32'"},
        bad_value{"enableExecutableCaching(42)", "path must be a string, got '42'"},
        bad_value{"Distributed.configureProcessId(4, 4)", "process id 4 is not in [0, 4)"},
        bad_value{"TensorLocations.setWeightLocation(poptorch.TensorLocationSettings().minElementsForOffChip(-1))",
                  "minElementsForOffChip must be at least 0, got -1"},
        bad_value{"TensorLocations.setWeightLocation(poptorch.TensorLocationSettings().onChip(True))",
                  "TensorLocationSettings has no method 'onChip'"},
        bad_value{"setExecutionStrategy(poptorch.PipelinedExecution(poptorch.Stage(\"A\").ipu(-1)))", "stage 0 is on IPU -1"},
        bad_value{"setExecutionStrategy(poptorch.PipelinedExecution(poptorch.Stage(1)))", "a block id must be a string, got '1'"}}) {
    const std::string text = c.text;
    CAPTURE(text);
    options o;
    const auto e = load_error(std::string("# header\n") + c.text, &o);
    REQUIRE(e);
    CHECK(e->category() == ipu::error_category::options);
    CHECK(e->location() == "my.conf:2");
    CHECK(e->message().find(c.says) != std::string::npos);
    CHECK_FALSE(e->hint().empty());
    CHECK(o == options());
  }
  // The hint shows the call's signature.
  const auto e = load_error("replicationFactor(\"two\")");
  REQUIRE(e);
  CHECK(e->hint() == "usage: replicationFactor(replication_factor: int >= 1)");
}

TEST_CASE("options file: loading is all or nothing") {
  options o;
  o.device_iterations(3);
  const auto e = load_error("deviceIterations(10)\nreplicationFactor(4)\nreplicationFactor(-4)\n", &o);
  REQUIRE(e);
  CHECK(e->location() == "my.conf:3");
  CHECK(o.device_iterations() == 3);
  CHECK(o.replication_factor() == 1);
}

TEST_CASE("options file: a missing file is an io error naming the path") {
  const fs::path missing = fs::temp_directory_path() / "ipu_options_no_such_dir" / "poptorch.conf";
  try {
    options().load_from_file(missing);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::io);
    CHECK(e.location() == missing.string());
    CHECK(e.hint().find("does not exist") != std::string::npos);
  }
  const temp_file f("bad.conf", "deviceIterations(4)\n\nsetExecutionStrategy(poptorch.ShardedExecution()\n");
  try {
    options().load_from_file(f.path);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.location().starts_with(f.path.string() + ":3:"));  // errors in files name the file
  }
}

TEST_CASE("options file: literals: integers, floats, strings, big seeds") {
  CHECK(load("deviceIterations(0x10)").device_iterations() == 16);
  CHECK(load("deviceIterations(+2)").device_iterations() == 2);
  CHECK(load("randomSeed(18446744073709551615)").random_seed() == 18446744073709551615ull);
  CHECK(load("setAvailableMemoryProportion(.25)").available_memory_proportion_for(7) == 0.25);
  CHECK(load("setAvailableMemoryProportion(5e-1)").available_memory_proportion_for(0) == 0.5);
  CHECK(load("setAvailableMemoryProportion(1)").available_memory_proportion_for(0) == 1.0);
  CHECK(load(R"(logDir("a \"quoted\" dir\\x"))").log_dir() == R"(a "quoted" dir\x)");
  CHECK(load("enableExecutableCaching(None)").executable_cache_dir() == std::nullopt);
  CHECK(load("useOfflineIpuTarget()").offline_ipu_target() == "ipu2");  // PopTorch's default version
  CHECK(load("useOfflineIpuTarget(ipu_version=1)").offline_ipu_target() == "ipu1");
  CHECK(load("useOfflineIpuTarget('ipu21')").offline_ipu_target() == "ipu21");
  CHECK(load("deviceIterations(1)\r\nreplicationFactor(2)\r\n").replication_factor() == 2);  // CRLF files
  CHECK(load("").device_iterations() == 1);
  CHECK(load("# only a comment").device_iterations() == 1);
}

TEST_CASE("options file: to_config writes what load_from_string reads back") {
  CHECK(options().to_config().empty());  // defaults need no lines

  options o;
  o.device_iterations(12)
      .replication_factor(4)
      .input_replica_grouping(2, ipu::comm_group_type::orthogonal)
      .gradient_accumulation(6)
      .output_mode(ipu::output_mode::every_n, 3)
      .execution_strategy(ipu::strategy_settings::parallel_phased(
          {ipu::phase{{stage{{"a", "b"}, 0}, stage{{"c"}, 2}}}, ipu::phase{{stage{{"d \"quoted\""}, 1}}}}))
      .auto_round_num_ipus(true)
      .enable_executable_caching("/tmp/c")
      .use_offline_ipu_target("ipu21")
      .random_seed(18446744073709551615ull)
      .available_memory_proportion(0.1)
      .available_memory_proportion(2, 1.0 / 3.0)
      .enable_synthetic_data(true)
      .sync_pattern(ipu::sync_pattern::replica_and_ladder)
      .log_dir("logs")
      .enable_profiling("prof")
      .enable_stable_norm(true)
      .log_cycle_count(true)
      .broadcast_buffers(false)
      .show_compilation_progress_bar(false)
      .accumulation_and_replication_reduction_type(ipu::reduction_type::sum)
      .mean_reduction_strategy(ipu::mean_reduction_strategy::post)
      .automatic_loss_scaling(true)
      .precision(ipu::data_type::F16)
      .partials_type(ipu::data_type::F16)
      .half_float_casting(ipu::half_float_casting::half_upcast_to_float)
      .enable_stochastic_rounding(true)
      .enable_floating_point_exceptions(true)
      .running_statistics_always_float(false)
      .activation_location({true, false, 10, std::nullopt, true, false})
      .optimizer_location({false, true, std::nullopt, 64, false, true})
      .distributed_process(2, 3);
  auto strategy = o.execution_strategy();
  strategy.tensors_liveness = ipu::liveness::off_chip_after_fwd_no_overlap;
  strategy.separate_backward_phase = true;
  o.execution_strategy(strategy);

  const std::string text = o.to_config();
  CAPTURE(text);
  options back;
  back.load_from_string(text);
  CHECK(back == o);
  CHECK(text.find("useOfflineIpuTarget(\"ipu21\")\n") != std::string::npos);
  CHECK(text.find("Training.gradientAccumulation(6)\n") != std::string::npos);

  options inference;
  inference.execution_strategy(ipu::strategy_settings::pipelined(ipu::auto_stage::auto_increment))
      .connection_type(ipu::connection_type::on_demand);
  CHECK(inference.to_config() ==
        "setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))\n"
        "connectionType(poptorch.ConnectionType.OnDemand)\n");
  CHECK(options().load_from_string(inference.to_config()) == inference);
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

TEST_CASE("options file: _Popart.set(\"autoRecomputation\", ...) as PopTorch passes it to PopART") {
  // PopART's RecomputationType: None 0, Standard 1, NormOnly 2, Pipeline 3, RecomputeAll 4.
  const std::string pipelined = "setExecutionStrategy(poptorch.PipelinedExecution())\n";
  CHECK(load(pipelined + "_Popart.set(\"autoRecomputation\", 1)").auto_recomputation() == ipu::recomputation::standard);
  CHECK(load(pipelined + "_Popart.set(\"autoRecomputation\", \"NormOnly\")").auto_recomputation() ==
        ipu::recomputation::norm_only);
  CHECK(load(pipelined + "_Popart.set(\"autoRecomputation\", popart.RecomputationType.Pipeline)").auto_recomputation() ==
        ipu::recomputation::all);
  CHECK(load(pipelined + "_Popart.set(key=\"autoRecomputation\", value=4)").auto_recomputation() == ipu::recomputation::all);
  CHECK(load("_Popart.set(\"autoRecomputation\", 0)").auto_recomputation() == ipu::recomputation::none);
  // Setting it is remembered, None too: a command line can tell the file's None from no setting.
  CHECK_FALSE(options().auto_recomputation_set().has_value());
  CHECK(load("_Popart.set(\"autoRecomputation\", 0)").auto_recomputation_set() == ipu::recomputation::none);
  CHECK(load(pipelined + "_Popart.set(\"autoRecomputation\", 4)").auto_recomputation_set() == ipu::recomputation::all);
  const auto explicit_none = load("_Popart.set(\"autoRecomputation\", 0)");
  CHECK(explicit_none.to_config() == "_Popart.set(\"autoRecomputation\", 0)\n");
  CHECK(options().load_from_string(explicit_none.to_config()) == explicit_none);
  CHECK(explicit_none != options());
  CHECK_NOTHROW(explicit_none.validate(false));  // None is what inference does
  // A caller that never recomputes does what an explicit None asks: not a setting it ignores.
  CHECK(ipu::settings_not_applied(explicit_none, {}).empty());
  CHECK(ipu::settings_not_applied(load(pipelined + "_Popart.set(\"autoRecomputation\", 1)"), {}) ==
        std::vector<std::string>{"_Popart.set(\"autoRecomputation\", 1)"});
  // Written back as PopART's value; read back equal.
  const auto o = load(pipelined + "_Popart.set(\"autoRecomputation\", \"Standard\")");
  CHECK(o.to_config().find("_Popart.set(\"autoRecomputation\", 1)\n") != std::string::npos);
  CHECK(options().load_from_string(o.to_config()) == o);
  CHECK(load(pipelined + "_Popart.set(\"autoRecomputation\", 3)").to_config().find("\"autoRecomputation\", 4)") !=
        std::string::npos);  // Pipeline and RecomputeAll are one setting here
  // Bad values and other PopART options are refused with the file and line.
  const auto bad = load_error("_Popart.set(\"autoRecomputation\", 5)");
  REQUIRE(bad);
  CHECK(contains(bad->what(), "unknown recomputation type '5'"));
  CHECK(contains(bad->what(), "use None, Standard, NormOnly"));
  CHECK(contains(bad->what(), "my.conf"));
  CHECK(contains(load_error("_Popart.set(\"autoRecomputation\", 1.5)")->what(), "must be a RecomputationType"));
  CHECK(contains(load_error("_Popart.set(\"enableOutlining\", True)")->what(),
                 "PopART option 'enableOutlining' is not supported"));
  // It applies to a pipelined training step only.
  options inference = load(pipelined + "_Popart.set(\"autoRecomputation\", 1)");
  CHECK_THROWS_WITH_AS(inference.validate(false), doctest::Contains("for an inference model"), ipu::error);
  CHECK_NOTHROW(inference.validate(true));
  CHECK_THROWS_WITH_AS(load("setExecutionStrategy(poptorch.ShardedExecution())\n_Popart.set(\"autoRecomputation\", 1)")
                           .validate(true),
                       doctest::Contains("the execution strategy is ShardedExecution"), ipu::error);
}

TEST_CASE("options file: the parser on its own") {
  using ipu::detail::config::expr;
  const expr e = ipu::detail::config::parser(R"(f(1, -2.5, "s", [1, 2], (3,), {"k": None}, x=poptorch.A.B))").statement();
  REQUIRE(e.is_call());
  CHECK(e.text == "f");
  REQUIRE(e.items.size() == 7);
  CHECK(e.items[0].integer == 1);
  CHECK(e.items[1].real == -2.5);
  CHECK(e.items[2].text == "s");
  CHECK(e.items[3].k == expr::kind::list);
  CHECK(e.items[4].k == expr::kind::tuple);
  CHECK(e.items[5].k == expr::kind::dict);
  CHECK(e.items[5].items[1].k == expr::kind::none);
  CHECK(e.keywords[6] == "x");
  CHECK(e.items[6].text == "poptorch.A.B");
  CHECK(e.positional_count() == 6);
  CHECK(ipu::detail::config::edit_distance("deviceIteration", "deviceIterations") == 1);
  CHECK(ipu::detail::config::edit_distance("abc", "ABC") == 0);
}

TEST_CASE("options file: a FIFO, a device, a directory or a huge file is refused unread") {
  const fs::path fifo = fs::temp_directory_path() / ("ipu_options_fifo_" + std::to_string(::getpid()));
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // opening it for reading would block without a writer
  auto message_of = [](const fs::path& p) {
    try {
      options().load_from_file(p);
    } catch (const ipu::error& e) {
      CHECK(e.category() == ipu::error_category::io);
      return std::string(e.what());
    }
    FAIL("expected an error");
    return std::string();
  };
  CHECK(message_of(fifo).find("is a pipe (FIFO), not a regular file") != std::string::npos);
  fs::remove(fifo);
  CHECK(message_of("/dev/zero").find("is a device, not a regular file") != std::string::npos);
  CHECK(message_of(fs::temp_directory_path()).find("is a directory, not a regular file") != std::string::npos);
  const temp_file big("big.conf", std::string(options::max_options_file_bytes + 1, '#'));
  CHECK(message_of(big.path).find("more than the 1048576 accepted") != std::string::npos);
}

TEST_CASE("options file: nesting is bounded, so a hostile line is an error and not a stack overflow") {
  auto error_of = [](const std::string& text) {
    options o;
    try {
      o.load_from_string(text, "my.conf");
    } catch (const ipu::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // 20,000 of each would overflow the stack of a recursive parser (and of the tree it builds).
  const std::size_t n = 20000;
  CHECK(error_of("deviceIterations(" + std::string(n, '(') + "1" + std::string(n, ')') + ")").find("nested more than 64") !=
        std::string::npos);
  CHECK(error_of("deviceIterations(" + std::string(n, '[') + ")").find("nested more than 64") != std::string::npos);
  CHECK(error_of("deviceIterations(" + std::string(n, '-') + "1)").find("nested more than 64") != std::string::npos);
  std::string chain = "Training";
  for (std::size_t i = 0; i < n; ++i) chain += ".gradientAccumulation(2)";
  CHECK(error_of(chain).find("more than 64 chained calls") != std::string::npos);
  // Reasonable nesting still parses.
  options o;
  o.load_from_string("deviceIterations(" + std::string(10, '+') + "4)", "my.conf");
  CHECK(o.device_iterations() == 4);
}

}  // namespace test_options_file
