#include <doctest/doctest.h>
#include <stdlib.h>

#include <limits>
#include <optional>
#include <string>

#include "ipu/error.hpp"
#include "ipu/poptorch/options.hpp"
#include "../scoped_env.hpp"

namespace test_options {

using ipu::strategy_settings;
using ipu::options;
using ipu::phase;
using ipu::stage;

namespace {
template <class F>
std::optional<ipu::error> error_of(F&& f) {
  try {
    f();
  } catch (const ipu::error& e) {
    return e;
  }
  return std::nullopt;
}

using ipu_test::scoped_env;
}  // namespace

TEST_CASE("options: PopTorch's defaults") {
  const options o;
  CHECK(o.device_iterations() == 1);
  CHECK(o.replication_factor() == 1);
  CHECK(o.gradient_accumulation() == 1);
  CHECK(o.input_group_size() == 1);
  CHECK(o.output_mode() == ipu::output_mode::default_);
  CHECK(o.execution_strategy().mode == ipu::execution_mode::pipelined);
  CHECK(o.execution_strategy().auto_stage == ipu::auto_stage::same_as_ipu);
  CHECK_FALSE(o.auto_round_num_ipus());
  CHECK_FALSE(o.executable_cache_dir().has_value());
  CHECK_FALSE(o.use_ipu_model());
  CHECK_FALSE(o.offline_ipu_target().has_value());
  CHECK_FALSE(o.ipu_id().has_value());
  CHECK_FALSE(o.random_seed().has_value());
  CHECK(o.available_memory_proportion_for(0) == 0.6);
  CHECK_FALSE(o.synthetic_data());
  CHECK(o.connection_type() == ipu::connection_type::always);
  CHECK(o.partials_type() == ipu::data_type::F32);
  CHECK_FALSE(o.precision().has_value());
  CHECK(o.accumulation_and_replication_reduction_type() == ipu::reduction_type::mean);
  CHECK(o.running_statistics_always_float());
  CHECK(o.broadcast_buffers());
  CHECK(o.log_dir() == ".");
  CHECK_FALSE(o.wait_for_device());
  CHECK_FALSE(o.log_level().has_value());
  CHECK_NOTHROW(o.validate(false));
  CHECK_NOTHROW(o.validate(true));
}

TEST_CASE("options: fluent setters and getters") {
  options o;
  o.device_iterations(16)
      .replication_factor(4)
      .input_replica_grouping(2, ipu::comm_group_type::orthogonal)
      .gradient_accumulation(8)
      .output_mode(ipu::output_mode::every_n, 4)
      .auto_round_num_ipus(true)
      .enable_executable_caching("/tmp/cache")
      .use_ipu_model(true)
      .random_seed(42)
      .available_memory_proportion(0.3)
      .available_memory_proportion(1, 0.9)
      .enable_synthetic_data(true)
      .partials_type(ipu::data_type::F16)
      .precision(ipu::data_type::F16)
      .accumulation_and_replication_reduction_type(ipu::reduction_type::sum)
      .distributed_process(1, 2);
  CHECK(o.device_iterations() == 16);
  CHECK(o.replication_factor() == 4);
  CHECK(o.input_group_size() == 2);
  CHECK(o.input_group_type() == ipu::comm_group_type::orthogonal);
  CHECK(o.gradient_accumulation() == 8);
  CHECK(o.output_mode() == ipu::output_mode::every_n);
  CHECK(o.output_return_period() == 4);
  CHECK(o.executable_cache_dir() == "/tmp/cache");
  CHECK(o.random_seed() == 42u);
  CHECK(o.available_memory_proportion_for(0) == 0.3);
  CHECK(o.available_memory_proportion_for(1) == 0.9);
  CHECK(o.per_ipu_available_memory_proportion().size() == 1);
  CHECK(o.partials_type() == ipu::data_type::F16);
  CHECK(o.process_id() == 1);
  CHECK(o.num_processes() == 2);
  // Read back as set; the session refuses the two whose effect the library does not have.
  CHECK_THROWS_WITH_AS(o.validate(true), doctest::Contains("enableSyntheticData(True) is not supported"), ipu::error);
  o.enable_synthetic_data(false);
  CHECK_THROWS_WITH_AS(o.validate(true), doctest::Contains("Distributed.configureProcessId is not supported"), ipu::error);
  o.distributed_process(0, 1);
  CHECK_NOTHROW(o.validate(true));
  o.disable_executable_caching();
  CHECK_FALSE(o.executable_cache_dir().has_value());
  o.use_ipu_model(false).use_offline_ipu_target("ipu21");
  CHECK(o.offline_ipu_target() == "ipu21");
  CHECK(o.connection_type() == ipu::connection_type::never);  // offline targets never attach
}

TEST_CASE("options: default output mode resolves by model kind") {
  options o;
  CHECK(o.resolved_output_mode(false) == ipu::output_mode::all);
  CHECK(o.resolved_output_mode(true) == ipu::output_mode::final);
  o.output_mode(ipu::output_mode::sum);
  CHECK(o.resolved_output_mode(false) == ipu::output_mode::sum);
  CHECK(o.resolved_output_mode(true) == ipu::output_mode::sum);
  CHECK(o.output_return_period() == 1);
}

TEST_CASE("options: setters reject bad values with an options error, what and how to fix") {
  options o;
  auto e = error_of([&] { o.device_iterations(0); });
  REQUIRE(e);
  CHECK(e->category() == ipu::error_category::options);
  CHECK(e->message() == "device iterations must be at least 1, got 0");
  CHECK_FALSE(e->hint().empty());
  CHECK_THROWS_AS(o.replication_factor(-2), ipu::error);
  CHECK_THROWS_AS(o.gradient_accumulation(0), ipu::error);
  CHECK_THROWS_AS(o.input_replica_grouping(0, ipu::comm_group_type::consecutive), ipu::error);
  CHECK_THROWS_AS(o.output_mode(ipu::output_mode::every_n), ipu::error);     // no period
  CHECK_THROWS_AS(o.output_mode(ipu::output_mode::every_n, -1), ipu::error);
  CHECK_THROWS_AS(o.output_mode(ipu::output_mode::all, 3), ipu::error);      // period without EveryN
  CHECK_THROWS_AS(o.use_ipu_id(-1), ipu::error);
  CHECK_THROWS_AS(o.available_memory_proportion(0.0), ipu::error);
  CHECK_THROWS_AS(o.available_memory_proportion(1.5), ipu::error);
  CHECK_THROWS_AS(o.available_memory_proportion(-1, 0.5), ipu::error);
  CHECK_THROWS_AS(o.available_memory_proportion(std::numeric_limits<double>::quiet_NaN()), ipu::error);
  CHECK_THROWS_AS(o.use_offline_ipu_target("mk3"), ipu::error);
  CHECK_THROWS_AS(o.partials_type(ipu::data_type::F64), ipu::error);
  CHECK_THROWS_AS(o.precision(ipu::data_type::S32), ipu::error);
  CHECK_THROWS_AS(o.enable_executable_caching(""), ipu::error);
  CHECK_THROWS_AS(o.distributed_process(2, 2), ipu::error);
  CHECK_THROWS_AS(o.distributed_process(0, 0), ipu::error);
  ipu::tensor_location negative;
  negative.min_elements_for_off_chip = -5;
  CHECK_THROWS_AS(o.weight_location(negative), ipu::error);
  CHECK(o == options());  // failed setters change nothing
}

TEST_CASE("execution strategies: plain data with structural validation") {
  const auto p = strategy_settings::pipelined({stage{{"A"}, 0}, stage{{"B", "C"}, 1}});
  CHECK(p.mode == ipu::execution_mode::pipelined);
  CHECK(p.stages.size() == 2);
  CHECK(p.stages[1].blocks == std::vector<std::string>{"B", "C"});
  CHECK(strategy_settings::sharded(ipu::auto_stage::auto_increment).auto_stage == ipu::auto_stage::auto_increment);
  CHECK(ipu::to_string(ipu::execution_mode::parallel_phased) == "ParallelPhasedExecution");
  CHECK(ipu::to_string(ipu::liveness::off_chip_after_each_phase) == "OffChipAfterEachPhase");

  auto e = error_of([] { (void)strategy_settings::pipelined({stage{{"A"}, {}}, stage{{"A"}, {}}}); });
  REQUIRE(e);
  CHECK(e->message() == "block 'A' is in more than one stage");
  CHECK(e->location() == "execution strategy PipelinedExecution");

  e = error_of([] { (void)strategy_settings::serial_phased({}); });
  REQUIRE(e);
  CHECK(e->hint().find("no AutoStage for phased execution") != std::string::npos);

  CHECK_THROWS_AS((void)strategy_settings::sharded({stage{{}, 0}}), ipu::error);  // a stage without blocks
  CHECK_THROWS_AS((void)strategy_settings::sharded({stage{{"A"}, -1}}), ipu::error);
  CHECK_THROWS_AS((void)strategy_settings::serial_phased({phase{}}), ipu::error);
  // Stages of a phase run in parallel: one IPU each.
  CHECK_THROWS_AS((void)strategy_settings::serial_phased({phase{{stage{{"A"}, 0}, stage{{"B"}, 0}}}}), ipu::error);

  // Parallel phased: even phases on even IPUs, odd phases on odd IPUs.
  const std::vector<phase> good{phase{{stage{{"0"}, 0}, stage{{"1"}, 2}}}, phase{{stage{{"2"}, 1}, stage{{"3"}, 3}}},
                                phase{{stage{{"4"}, 0}, stage{{"5"}, 2}}}};
  CHECK_NOTHROW((void)strategy_settings::parallel_phased(good));
  CHECK_NOTHROW((void)strategy_settings::serial_phased(good));
  auto bad = good;
  bad[1].stages[0].ipu = 2;
  e = error_of([&] { (void)strategy_settings::parallel_phased(bad); });
  REQUIRE(e);
  CHECK(e->message() == "phase 1 stage 0 is on IPU 2 but phase 1 is odd");
  CHECK_NOTHROW((void)strategy_settings::serial_phased(bad));  // serial phases may use any IPUs

  strategy_settings s = strategy_settings::pipelined();
  s.tensors_liveness = ipu::liveness::off_chip_after_fwd;  // liveness is for phased execution
  CHECK_THROWS_AS(options().execution_strategy(s), ipu::error);
}

TEST_CASE("options: validate checks options together and against the model kind") {
  CHECK_THROWS_AS(options().device_iterations(6).output_mode(ipu::output_mode::every_n, 4).validate(false), ipu::error);
  CHECK_NOTHROW(options().device_iterations(8).output_mode(ipu::output_mode::every_n, 4).validate(false));
  CHECK_THROWS_AS(options().replication_factor(6).input_replica_grouping(4, ipu::comm_group_type::consecutive).validate(false),
                  ipu::error);
  CHECK_THROWS_AS(options().use_offline_ipu_target("ipu2").use_ipu_model(true).validate(false), ipu::error);
  CHECK_THROWS_AS(options().use_ipu_id(3).use_ipu_model(true).validate(false), ipu::error);
  CHECK_THROWS_AS(options().use_ipu_id(3).use_offline_ipu_target("ipu2").validate(false), ipu::error);
  const auto training_only = options().gradient_accumulation(4);
  CHECK_NOTHROW(training_only.validate(true));
  auto e = error_of([&] { training_only.validate(false); });
  REQUIRE(e);
  CHECK(e->category() == ipu::error_category::options);
  CHECK(e->message() == "gradient accumulation is 4 for an inference model");
  CHECK_THROWS_AS(options().automatic_loss_scaling(true).validate(false), ipu::error);
}

TEST_CASE("options: an option whose effect the library does not have is refused, never accepted and ignored") {
  const auto location = [](auto member, auto value) {
    ipu::tensor_location l;
    l.*member = value;
    return l;
  };
  using L = ipu::tensor_location;
  const std::pair<const char*, options> refused[] = {
      {"enableSyntheticData(True) is not supported", options().enable_synthetic_data(true)},
      {"useOfflineIpuTarget is not supported", options().use_offline_ipu_target("ipu2")},
      {"connectionType(OnDemand) is not supported", options().connection_type(ipu::connection_type::on_demand)},
      {"syncPattern(SinglePipeline) is not supported", options().sync_pattern(ipu::sync_pattern::single_pipeline)},
      {"logDir is not supported", options().log_dir("/tmp/logs")},
      {"enableProfiling is not supported", options().enable_profiling("/tmp/profile")},
      {"enableStableNorm(True) is not supported", options().enable_stable_norm(true)},
      {"logCycleCount(True) is not supported", options().log_cycle_count(true)},
      {"broadcastBuffers(False) is not supported", options().broadcast_buffers(false)},
      {"Training.meanReductionStrategy(Post) is not supported",
       options().mean_reduction_strategy(ipu::mean_reduction_strategy::post)},
      {"Precision.halfFloatCasting(HalfUpcastToFloat) is not supported",
       options().half_float_casting(ipu::half_float_casting::half_upcast_to_float)},
      {"Precision.enableStochasticRounding(True) is not supported", options().enable_stochastic_rounding(true)},
      {"Precision.enableFloatingPointExceptions(True) is not supported", options().enable_floating_point_exceptions(true)},
      {"Precision.runningStatisticsAlwaysFloat(False) is not supported", options().running_statistics_always_float(false)},
      {"TensorLocations.setActivationLocation is not supported", options().activation_location(location(&L::on_chip, std::optional<bool>(false)))},
      {"TensorLocations.setWeightLocation is not supported",
       options().weight_location(location(&L::replicated_tensor_sharding, true))},
      {"TensorLocations.setOptimizerLocation is not supported", options().optimizer_location(location(&L::on_chip, std::optional<bool>(true)))},
      {"TensorLocations.setAccumulatorLocation is not supported", options().accumulator_location(location(&L::io_tiles_to_load, true))},
      {"Distributed.configureProcessId is not supported", options().distributed_process(1, 2)},
  };
  for (const auto& [message, o] : refused) {
    CAPTURE(message);
    for (const bool training : {false, true}) {
      const auto e = error_of([&] { o.validate(training); });
      REQUIRE(e);
      CHECK(e->category() == ipu::error_category::options);
      CHECK(std::string(e->message()).find(message) == 0);
      CHECK_FALSE(e->hint().empty());
    }
  }
  // Set back to PopTorch's defaults, the same options validate.
  CHECK_NOTHROW(options().enable_synthetic_data(false).log_dir(".").broadcast_buffers(true).distributed_process(0, 1)
                    .running_statistics_always_float(true).validate(false));
}

TEST_CASE("options: apply_environment reads IPU_* and PopTorch's variables, only when called") {
  scoped_env a("IPU_LOG_LEVEL", "debug");
  scoped_env b("IPU_CACHE_DIR", nullptr);
  scoped_env c("POPTORCH_CACHE_DIR", "/var/cache/poptorch");
  scoped_env d("IPU_USE_MODEL", nullptr);
  scoped_env e("POPTORCH_IPU_MODEL", "1");
  scoped_env f("IPU_WAIT_FOR_DEVICE", "true");
  scoped_env g("POPTORCH_WAIT_FOR_IPU", "0");

  options o;
  CHECK_FALSE(o.use_ipu_model());  // nothing happens without the explicit call
  o.apply_environment();
  CHECK(o.log_level() == ipu::log::level::debug);
  CHECK(o.executable_cache_dir() == "/var/cache/poptorch");
  CHECK(o.use_ipu_model());
  CHECK(o.wait_for_device());  // IPU_WAIT_FOR_DEVICE wins over POPTORCH_WAIT_FOR_IPU

  {
    scoped_env h("IPU_CACHE_DIR", "/ipu/cache");  // the IPU_ name wins
    scoped_env i("IPU_USE_MODEL", "off");         // and environment overrides code
    options p;
    p.use_ipu_model(true).enable_executable_caching("/code");
    p.apply_environment();
    CHECK(p.executable_cache_dir() == "/ipu/cache");
    CHECK_FALSE(p.use_ipu_model());
  }
  {
    scoped_env h("IPU_LOG_LEVEL", nullptr);  // PopTorch's name when ours is unset
    scoped_env i("POPTORCH_LOG_LEVEL", "WARN");
    CHECK(options().apply_environment().log_level() == ipu::log::level::warn);
    scoped_env j("POPTORCH_LOG_LEVEL", "loud");
    CHECK_THROWS_WITH_AS(options().apply_environment(), doctest::Contains("POPTORCH_LOG_LEVEL='loud' is not a log level"),
                         ipu::error);
  }
  {
    scoped_env h("IPU_CACHE_DIR", "");  // empty is unset
    scoped_env i("POPTORCH_CACHE_DIR", nullptr);
    options p;
    p.enable_executable_caching("/code").apply_environment();
    CHECK(p.executable_cache_dir() == "/code");
  }
}

TEST_CASE("options: bad environment values are options errors naming the variable") {
  {
    scoped_env a("IPU_LOG_LEVEL", "chatty");
    auto e = error_of([] { options().apply_environment(); });
    REQUIRE(e);
    CHECK(e->category() == ipu::error_category::options);
    CHECK(e->message() == "IPU_LOG_LEVEL='chatty' is not a log level");
    CHECK(e->location() == "environment");
    CHECK(e->hint().find("TRACE") != std::string::npos);
  }
  {
    scoped_env a("IPU_LOG_LEVEL", nullptr);
    scoped_env b("IPU_USE_MODEL", nullptr);
    scoped_env c("POPTORCH_IPU_MODEL", "maybe");
    auto e = error_of([] { options().apply_environment(); });
    REQUIRE(e);
    CHECK(e->message() == "POPTORCH_IPU_MODEL='maybe' is not a boolean");
  }
}

}  // namespace test_options
