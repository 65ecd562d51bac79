#pragma once
// How a model is compiled and run: PopTorch's `poptorch.Options` as a C++ value.
//
// Setters are fluent (`options().device_iterations(8).replication_factor(2)`) and check their own
// argument at once, throwing ipu::error (category options). Checks that involve several options —
// or whether the model is trained — run in `validate(training)`, which sessions call before
// compiling. Getters share the setters' names.
//
// Option files use PopTorch's syntax (see options_file.hpp): `load_from_file("poptorch.conf")`.
// Environment variables apply only through an explicit `apply_environment()`.
//
// The execution strategy and PopTorch's enumerations are plain data in strategy.hpp; the scheduler
// gives them meaning.
#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/data_type.hpp"
#include "ipu/error.hpp"
#include "ipu/file.hpp"
#include "ipu/log.hpp"
#include "ipu/poptorch/strategy.hpp"

namespace ipu {

/// Where one class of tensors is stored (PopTorch's TensorLocationSettings). Unset: the compiler
/// decides.
struct tensor_location {
  /// true: on-chip SRAM; false: Streaming Memory.
  std::optional<bool> on_chip;
  /// Shard the tensor across replicas (weights and optimiser state).
  bool replicated_tensor_sharding = false;
  /// Tensors smaller than this stay on chip.
  std::optional<std::int64_t> min_elements_for_off_chip;
  /// Tensors smaller than this are not sharded across replicas.
  std::optional<std::int64_t> min_elements_for_replicated_tensor_sharding;
  bool io_tiles_to_load = false;
  bool io_tiles_to_store = false;
  friend bool operator==(const tensor_location&, const tensor_location&) = default;
};

// --- the options -------------------------------------------------------------------------------------

class options {
 public:
  options() = default;

  // General ------------------------------------------------------------------------------------------
  /// Batches the device processes per run before returning to the host (default 1).
  options& device_iterations(std::int64_t n) {
    at_least(n, 1, "device iterations");
    device_iterations_ = n;
    return *this;
  }
  [[nodiscard]] std::int64_t device_iterations() const noexcept { return device_iterations_; }

  /// Copies of the model, each on its own IPUs (default 1).
  options& replication_factor(std::int64_t n) {
    at_least(n, 1, "the replication factor");
    replication_factor_ = n;
    return *this;
  }
  [[nodiscard]] std::int64_t replication_factor() const noexcept { return replication_factor_; }

  /// Replicas in groups of `group_size` receive the same input data (default 1: each its own).
  options& input_replica_grouping(std::int64_t group_size, comm_group_type type) {
    at_least(group_size, 1, "the input replica group size");
    input_group_size_ = group_size;
    input_group_type_ = type;
    return *this;
  }
  [[nodiscard]] std::int64_t input_group_size() const noexcept { return input_group_size_; }
  [[nodiscard]] comm_group_type input_group_type() const noexcept { return input_group_type_; }

  /// Training: micro-batches whose gradients are accumulated before each weight update (default 1).
  options& gradient_accumulation(std::int64_t n) {
    at_least(n, 1, "gradient accumulation");
    gradient_accumulation_ = n;
    return *this;
  }
  [[nodiscard]] std::int64_t gradient_accumulation() const noexcept { return gradient_accumulation_; }

  /// What the device returns per run; `period` is for every_n only (return every period-th batch).
  options& output_mode(ipu::output_mode m, std::int64_t period = 0) {
    if (m == ipu::output_mode::every_n) {
      if (period < 1)
        fail("EveryN output needs a return period of at least 1, got " + std::to_string(period),
             "pass the period: output_mode(every_n, n), in a file outputMode(poptorch.OutputMode.EveryN, n)");
    } else if (period != 0) {
      fail("a return period only applies to EveryN output, not " + std::string(to_string(m)), "drop the period");
    }
    output_mode_ = m;
    output_return_period_ = m == ipu::output_mode::every_n ? period : 1;
    return *this;
  }
  [[nodiscard]] ipu::output_mode output_mode() const noexcept { return output_mode_; }
  [[nodiscard]] std::int64_t output_return_period() const noexcept { return output_return_period_; }
  /// The mode in effect: `default_` becomes `final` for training and `all` for inference.
  [[nodiscard]] ipu::output_mode resolved_output_mode(bool training) const noexcept {
    if (output_mode_ != ipu::output_mode::default_) return output_mode_;
    return training ? ipu::output_mode::final : ipu::output_mode::all;
  }

  options& execution_strategy(ipu::strategy_settings s) {
    s.validate();
    strategy_ = std::move(s);
    return *this;
  }
  [[nodiscard]] const ipu::strategy_settings& execution_strategy() const noexcept { return strategy_; }

  /// Reserve the next power of two of IPUs when the model needs another number (default off).
  options& auto_round_num_ipus(bool on) {
    auto_round_num_ipus_ = on;
    return *this;
  }
  [[nodiscard]] bool auto_round_num_ipus() const noexcept { return auto_round_num_ipus_; }

  /// Cache compiled executables in `dir` (as `<dir>/<hash>.popef`).
  options& enable_executable_caching(std::string_view dir) {
    if (dir.empty()) fail("the executable cache directory is empty", "give a directory, or call disable_executable_caching()");
    cache_dir_ = std::string(dir);
    return *this;
  }
  options& disable_executable_caching() {
    cache_dir_.reset();
    return *this;
  }
  [[nodiscard]] const std::optional<std::string>& executable_cache_dir() const noexcept { return cache_dir_; }
  /// The cache directory the environment names: IPU_CACHE_DIR, else PopTorch's POPTORCH_CACHE_DIR
  /// (empty values count as unset). apply_environment() and the executable cache both read it here.
  [[nodiscard]] static std::optional<std::string> cache_dir_from_environment() {
    return env("IPU_CACHE_DIR", "POPTORCH_CACHE_DIR");
  }

  /// Run on the IPU Model (a simulated IPU with the hardware's semantics) instead of hardware.
  options& use_ipu_model(bool on) {
    use_ipu_model_ = on;
    return *this;
  }
  [[nodiscard]] bool use_ipu_model() const noexcept { return use_ipu_model_; }

  /// Compile for `version` ("ipu1", "ipu2", "ipu21") without attaching to a device.
  options& use_offline_ipu_target(std::string_view version) {
    if (version != "ipu1" && version != "ipu2" && version != "ipu21")
      fail("unknown IPU version '" + std::string(version) + "'", "use ipu1 (Mk1), ipu2 (Mk2) or ipu21 (Bow)");
    offline_ipu_target_ = std::string(version);
    connection_type_ = ipu::connection_type::never;
    return *this;
  }
  [[nodiscard]] const std::optional<std::string>& offline_ipu_target() const noexcept { return offline_ipu_target_; }

  /// Use the device with this id (one IPU or a multi-IPU group, as `gc-info` lists them).
  options& use_ipu_id(std::int64_t id) {
    at_least(id, 0, "the IPU device id");
    ipu_id_ = id;
    return *this;
  }
  [[nodiscard]] std::optional<std::int64_t> ipu_id() const noexcept { return ipu_id_; }

  /// Seed for the device's random number generators.
  options& random_seed(std::uint64_t seed) {
    random_seed_ = seed;
    return *this;
  }
  [[nodiscard]] std::optional<std::uint64_t> random_seed() const noexcept { return random_seed_; }

  /// Proportion of tile memory matmuls and convolutions may use as temporary memory, on every IPU.
  options& available_memory_proportion(double p) {
    check_proportion(p);
    default_memory_proportion_ = p;
    return *this;
  }
  /// The same for one IPU; overrides the all-IPU value.
  options& available_memory_proportion(std::int64_t ipu, double p) {
    at_least(ipu, 0, "the IPU number");
    check_proportion(p);
    memory_proportion_[ipu] = p;
    return *this;
  }
  /// The proportion in force on `ipu` (Poplar's default 0.6 unless set).
  [[nodiscard]] double available_memory_proportion_for(std::int64_t ipu) const {
    if (auto it = memory_proportion_.find(ipu); it != memory_proportion_.end()) return it->second;
    return default_memory_proportion_.value_or(default_available_memory_proportion);
  }
  [[nodiscard]] const std::map<std::int64_t, double>& per_ipu_available_memory_proportion() const noexcept {
    return memory_proportion_;
  }
  static constexpr double default_available_memory_proportion = 0.6;

  /// No host I/O: inputs are random data generated on the device (for benchmarking).
  options& enable_synthetic_data(bool on) {
    synthetic_data_ = on;
    return *this;
  }
  [[nodiscard]] bool synthetic_data() const noexcept { return synthetic_data_; }

  options& connection_type(ipu::connection_type c) {
    connection_type_ = c;
    return *this;
  }
  [[nodiscard]] ipu::connection_type connection_type() const noexcept { return connection_type_; }

  options& sync_pattern(ipu::sync_pattern s) {
    sync_pattern_ = s;
    return *this;
  }
  [[nodiscard]] ipu::sync_pattern sync_pattern() const noexcept { return sync_pattern_; }

  /// Where log files go (default ".").
  options& log_dir(std::string_view dir) {
    if (dir.empty()) fail("the log directory is empty", "give a directory, e.g. \".\"");
    log_dir_ = std::string(dir);
    return *this;
  }
  [[nodiscard]] const std::string& log_dir() const noexcept { return log_dir_; }

  /// Write execution profiles (for a PopVision-style report) to `dir`.
  options& enable_profiling(std::string_view dir) {
    if (dir.empty()) fail("the profile directory is empty", "give a directory");
    profile_dir_ = std::string(dir);
    return *this;
  }
  options& disable_profiling() {
    profile_dir_.reset();
    return *this;
  }
  [[nodiscard]] const std::optional<std::string>& profile_dir() const noexcept { return profile_dir_; }

  /// Slower but more accurate norm operators.
  options& enable_stable_norm(bool on) {
    stable_norm_ = on;
    return *this;
  }
  [[nodiscard]] bool stable_norm() const noexcept { return stable_norm_; }

  /// Count and log the cycles of each run.
  options& log_cycle_count(bool on) {
    log_cycle_count_ = on;
    return *this;
  }
  [[nodiscard]] bool log_cycle_count() const noexcept { return log_cycle_count_; }

  /// Broadcast model buffers from replica 0 to the others (default on).
  options& broadcast_buffers(bool on) {
    broadcast_buffers_ = on;
    return *this;
  }
  [[nodiscard]] bool broadcast_buffers() const noexcept { return broadcast_buffers_; }

  options& show_compilation_progress_bar(bool on) {
    progress_bar_ = on;
    return *this;
  }
  [[nodiscard]] bool show_compilation_progress_bar() const noexcept { return progress_bar_; }

  // Training -----------------------------------------------------------------------------------------
  /// How gradients combine over accumulation steps and replicas (default mean).
  options& accumulation_and_replication_reduction_type(reduction_type r) {
    reduction_type_ = r;
    return *this;
  }
  [[nodiscard]] reduction_type accumulation_and_replication_reduction_type() const noexcept { return reduction_type_; }

  options& mean_reduction_strategy(ipu::mean_reduction_strategy s) {
    mean_reduction_strategy_ = s;
    return *this;
  }
  [[nodiscard]] ipu::mean_reduction_strategy mean_reduction_strategy() const noexcept { return mean_reduction_strategy_; }

  /// Adjust the loss scale automatically during training.
  options& automatic_loss_scaling(bool on) {
    automatic_loss_scaling_ = on;
    return *this;
  }
  [[nodiscard]] bool automatic_loss_scaling() const noexcept { return automatic_loss_scaling_; }

  /// PopART's autoRecomputation, which PopTorch sets as `_Popart.set("autoRecomputation", value)`:
  /// what a pipelined training step recomputes in its backward stages instead of stashing
  /// (ipu::placed_options_from applies it). Training only. Setting it, even to its default None,
  /// is remembered: a command line that contradicts the file's explicit None can then be refused.
  options& auto_recomputation(ipu::recomputation r) {
    recomputation_ = r;
    return *this;
  }
  [[nodiscard]] ipu::recomputation auto_recomputation() const noexcept {
    return recomputation_.value_or(ipu::recomputation::none);
  }
  /// autoRecomputation as it was set, or nothing when it was left at its default.
  [[nodiscard]] std::optional<ipu::recomputation> auto_recomputation_set() const noexcept { return recomputation_; }

  // Precision ----------------------------------------------------------------------------------------
  /// Compile the model's float tensors as F32 or F16 (PopRT's --precision). Unset: as the model has
  /// them. With partials_type this picks the matrix engine's mode (ipu::precision in
  /// device/precision.hpp: F32 -> FP32; F16 with F16 / F32 partials -> FP16.16 / FP16.32).
  options& precision(data_type t) {
    if (t != data_type::F32 && t != data_type::F16)
      fail("precision must be F32 or F16, not " + std::string(to_string(t)), "use data_type::F32 or data_type::F16");
    precision_ = t;
    return *this;
  }
  [[nodiscard]] std::optional<data_type> precision() const noexcept { return precision_; }

  /// Type of the partial sums in matmuls and convolutions (default F32).
  options& partials_type(data_type t) {
    if (t != data_type::F32 && t != data_type::F16)
      fail("partials type must be F32 or F16, not " + std::string(to_string(t)), "use data_type::F32 or data_type::F16");
    partials_type_ = t;
    return *this;
  }
  [[nodiscard]] data_type partials_type() const noexcept { return partials_type_; }

  options& half_float_casting(ipu::half_float_casting c) {
    half_float_casting_ = c;
    return *this;
  }
  [[nodiscard]] ipu::half_float_casting half_float_casting() const noexcept { return half_float_casting_; }

  /// Round float16 results stochastically (unbiased on average, not deterministic).
  options& enable_stochastic_rounding(bool on) {
    stochastic_rounding_ = on;
    return *this;
  }
  [[nodiscard]] bool stochastic_rounding() const noexcept { return stochastic_rounding_; }

  /// Raise an error on invalid floating-point operations, division by zero and overflow.
  options& enable_floating_point_exceptions(bool on) {
    floating_point_exceptions_ = on;
    return *this;
  }
  [[nodiscard]] bool floating_point_exceptions() const noexcept { return floating_point_exceptions_; }

  /// Keep batch-norm running statistics in float32 whatever the input type (default on).
  options& running_statistics_always_float(bool on) {
    running_statistics_always_float_ = on;
    return *this;
  }
  [[nodiscard]] bool running_statistics_always_float() const noexcept { return running_statistics_always_float_; }

  // Tensor locations ---------------------------------------------------------------------------------
  options& activation_location(const tensor_location& l) {
    check_location(l);
    activation_location_ = l;
    return *this;
  }
  [[nodiscard]] const tensor_location& activation_location() const noexcept { return activation_location_; }
  options& weight_location(const tensor_location& l) {
    check_location(l);
    weight_location_ = l;
    return *this;
  }
  [[nodiscard]] const tensor_location& weight_location() const noexcept { return weight_location_; }
  options& optimizer_location(const tensor_location& l) {
    check_location(l);
    optimizer_location_ = l;
    return *this;
  }
  [[nodiscard]] const tensor_location& optimizer_location() const noexcept { return optimizer_location_; }
  options& accumulator_location(const tensor_location& l) {
    check_location(l);
    accumulator_location_ = l;
    return *this;
  }
  [[nodiscard]] const tensor_location& accumulator_location() const noexcept { return accumulator_location_; }

  // Distributed --------------------------------------------------------------------------------------
  /// This process is `process_id` of `num_processes` running the model together.
  options& distributed_process(std::int64_t process_id, std::int64_t num_processes) {
    at_least(num_processes, 1, "the number of processes");
    if (process_id < 0 || process_id >= num_processes)
      fail("process id " + std::to_string(process_id) + " is not in [0, " + std::to_string(num_processes) + ")",
           "process ids count from 0 to num_processes - 1");
    process_id_ = process_id;
    num_processes_ = num_processes;
    return *this;
  }
  [[nodiscard]] std::int64_t process_id() const noexcept { return process_id_; }
  [[nodiscard]] std::int64_t num_processes() const noexcept { return num_processes_; }

  // Device and logging -------------------------------------------------------------------------------
  /// Wait for a device to become free instead of failing when all are in use.
  options& wait_for_device(bool on) {
    wait_for_device_ = on;
    return *this;
  }
  [[nodiscard]] bool wait_for_device() const noexcept { return wait_for_device_; }

  /// The log level a session should set (unset: leave the process's level alone).
  options& log_level(log::level l) {
    log_level_ = l;
    return *this;
  }
  [[nodiscard]] std::optional<log::level> log_level() const noexcept { return log_level_; }

  // Files and environment ----------------------------------------------------------------------------
  /// Applies an options file in PopTorch's syntax (one `name(value)` per line, `#` comments). All or
  /// nothing: on an error the options are unchanged.
  static constexpr std::uint64_t max_options_file_bytes = 1 << 20;
  options& load_from_file(const std::filesystem::path& path) {
    // An options file is a few lines: a larger one (or /dev/zero, or a FIFO) is refused unread.
    return load_from_string(read_regular_file(path, "options file", max_options_file_bytes), path.string());
  }

  /// Applies options text in PopTorch's file syntax; `source` names it in errors.
  options& load_from_string(std::string_view text, std::string_view source = "<string>");

  /// Applies the environment: IPU_LOG_LEVEL (or POPTORCH_LOG_LEVEL); IPU_CACHE_DIR (or POPTORCH_CACHE_DIR); IPU_USE_MODEL
  /// (or POPTORCH_IPU_MODEL); IPU_WAIT_FOR_DEVICE (or POPTORCH_WAIT_FOR_IPU). Set variables override
  /// the options; empty ones are ignored; the IPU_ name wins when both are set.
  options& apply_environment() {
    if (const auto v = env("IPU_LOG_LEVEL", "POPTORCH_LOG_LEVEL")) {
      const auto l = log::parse_level(*v);
      const char* name = env("IPU_LOG_LEVEL") ? "IPU_LOG_LEVEL" : "POPTORCH_LOG_LEVEL";
      if (!l)
        throw error(error_category::options, std::string(name) + "='" + *v + "' is not a log level", "environment",
                    "accepted: " + std::string(log::accepted_levels));
      log_level_ = *l;
    }
    if (const auto v = cache_dir_from_environment()) cache_dir_ = *v;
    if (const auto v = env_flag("IPU_USE_MODEL", "POPTORCH_IPU_MODEL")) use_ipu_model_ = *v;
    if (const auto v = env_flag("IPU_WAIT_FOR_DEVICE", "POPTORCH_WAIT_FOR_IPU")) wait_for_device_ = *v;
    return *this;
  }

  /// Checks the options as a whole for a training (or inference) model; throws ipu::error (options).
  void validate(bool training) const {
    strategy_.validate();
    if (output_mode_ == ipu::output_mode::every_n && device_iterations_ % output_return_period_ != 0)
      fail("EveryN return period " + std::to_string(output_return_period_) + " does not divide the " +
               std::to_string(device_iterations_) + " device iterations",
           "choose a period that divides device_iterations");
    if (replication_factor_ % input_group_size_ != 0)
      fail("input replica group size " + std::to_string(input_group_size_) + " does not divide the replication factor " +
               std::to_string(replication_factor_),
           "choose a group size that divides the replication factor");
    if (offline_ipu_target_ && use_ipu_model_)
      fail("an offline IPU target cannot be used with the IPU Model", "choose one of use_offline_ipu_target and use_ipu_model");
    if (ipu_id_ && use_ipu_model_)
      fail("use_ipu_id selects a hardware device, but the IPU Model is enabled", "drop use_ipu_id or use_ipu_model");
    if (ipu_id_ && offline_ipu_target_)
      fail("use_ipu_id selects a device, but an offline target never attaches to one", "drop one of them");
    refuse_without_effect();
    if (!training) {
      if (gradient_accumulation_ != 1)
        fail("gradient accumulation is " + std::to_string(gradient_accumulation_) + " for an inference model",
             "gradient accumulation applies to training; for inference use device_iterations");
      if (automatic_loss_scaling_)
        fail("automatic loss scaling is enabled for an inference model", "it applies to training only");
      if (auto_recomputation() != ipu::recomputation::none)
        fail("autoRecomputation is " + std::string(to_string(auto_recomputation())) + " for an inference model",
             "recomputation applies to a pipelined training step; drop _Popart.set(\"autoRecomputation\", ...)");
    }
    if (auto_recomputation() != ipu::recomputation::none && strategy_.mode != ipu::execution_mode::pipelined) {
      fail("autoRecomputation is " + std::string(to_string(auto_recomputation())) + " but the execution strategy is " +
               std::string(to_string(strategy_.mode)),
           "recomputation applies to a pipeline's backward stages: use PipelinedExecution, or autoRecomputation None");
    }
  }

  /// The non-default options in PopTorch's file syntax; `load_from_string` reads it back. The log
  /// level and wait-for-device come from the environment and are not written.
  [[nodiscard]] std::string to_config() const;

  friend bool operator==(const options&, const options&) = default;

 private:
  [[noreturn]] static void fail(const std::string& what, const std::string& hint) {
    throw error(error_category::options, what, {}, hint);
  }
  static void at_least(std::int64_t v, std::int64_t min, const char* what) {
    if (v < min)
      fail(std::string(what) + " must be at least " + std::to_string(min) + ", got " + std::to_string(v),
           "pass an integer >= " + std::to_string(min));
  }
  static void check_proportion(double p) {
    if (!(p > 0.0 && p <= 1.0))
      fail("available memory proportion must be in (0, 1], got " + std::to_string(p),
           "pass a fraction of tile memory such as 0.6");
  }
  /// Options this library parses (so PopTorch option files load) but whose effect it does not
  /// have: set to anything but PopTorch's default, they are refused here instead of being accepted
  /// and ignored. Each message says why and what to do instead.
  void refuse_without_effect() const {
    const auto refuse = [](const std::string& option, const std::string& why, const std::string& instead) {
      fail(option + " is not supported: " + why, instead);
    };
    if (synthetic_data_)
      refuse("enableSyntheticData(True)", "the sessions always read their inputs from the host",
             "feed zeros or random inputs yourself (`ipu run` makes synthetic inputs when none are given)");
    if (offline_ipu_target_)
      refuse("useOfflineIpuTarget", "the simulated device is always present, so there is no offline compilation",
             "drop it; pick the simulated IPU generation where the session takes a device description");
    else if (connection_type_ != ipu::connection_type::always)
      refuse("connectionType(" + std::string(to_string(connection_type_)) + ")",
             "the simulated device is attached when the session is made", "drop it");
    if (sync_pattern_ != ipu::sync_pattern::full)
      refuse("syncPattern(" + std::string(to_string(sync_pattern_)) + ")",
             "the simulated IPUs and the host synchronise in one pattern", "drop it");
    if (log_dir_ != ".")
      refuse("logDir", "the library writes no log files; it logs to standard error",
             "drop it, and redirect standard error to keep the log");
    if (profile_dir_)
      refuse("enableProfiling", "sessions write no profile directory",
             "drop it; POPLAR_ENGINE_OPTIONS='{\"autoReport.all\":\"true\",\"autoReport.directory\":\"DIR\"}' makes "
             "compiling write the plan report and predicted trace to DIR, and `ipu run --trace` the measured one");
    if (stable_norm_)
      refuse("enableStableNorm(True)", "the normalisation kernels have one formulation", "drop it");
    if (log_cycle_count_)
      refuse("logCycleCount(True)", "sessions do not log cycle counts", "drop it; `ipu plan` prints the predicted cycles");
    if (!broadcast_buffers_)
      refuse("broadcastBuffers(False)", "the library handles buffers across replicas in one way only", "drop it");
    if (mean_reduction_strategy_ != ipu::mean_reduction_strategy::running)
      refuse("Training.meanReductionStrategy(Post)", "gradients are averaged in one way", "drop it");
    if (half_float_casting_ != ipu::half_float_casting::float_downcast_to_half)
      refuse("Precision.halfFloatCasting(HalfUpcastToFloat)", "mixed float16 and float32 operands are not cast another way", "drop it");
    if (stochastic_rounding_)
      refuse("Precision.enableStochasticRounding(True)", "the host kernels round to nearest even, deterministically", "drop it");
    if (floating_point_exceptions_)
      refuse("Precision.enableFloatingPointExceptions(True)", "the host kernels do not trap on invalid operations", "drop it");
    if (!running_statistics_always_float_)
      refuse("Precision.runningStatisticsAlwaysFloat(False)", "batch-norm running statistics are kept in float32", "drop it");
    for (const auto& [name, l] : {std::pair{"TensorLocations.setActivationLocation", &activation_location_},
                                  std::pair{"TensorLocations.setWeightLocation", &weight_location_},
                                  std::pair{"TensorLocations.setOptimizerLocation", &optimizer_location_},
                                  std::pair{"TensorLocations.setAccumulatorLocation", &accumulator_location_}})
      if (*l != tensor_location{})
        refuse(name, "the memory plan keeps tensors where the execution strategy puts them",
               "drop it; phased execution (SerialPhasedExecution / ParallelPhasedExecution) streams weights from "
               "Streaming Memory");
    if (num_processes_ != 1)
      refuse("Distributed.configureProcessId", "processes come from mpirun, not from options",
             "drop it and start the replicas with mpirun (`mpirun -n N ipu train ...`, or ipu::dist in C++)");
  }
  static void check_location(const tensor_location& l) {
    if (l.min_elements_for_off_chip) at_least(*l.min_elements_for_off_chip, 0, "min elements for off-chip");
    if (l.min_elements_for_replicated_tensor_sharding)
      at_least(*l.min_elements_for_replicated_tensor_sharding, 0, "min elements for replicated tensor sharding");
  }
  static std::optional<std::string> env(const char* name, const char* fallback = nullptr) {
    for (const char* n : {name, fallback}) {
      if (!n) continue;
      if (const char* v = std::getenv(n); v && *v) return std::string(v);
    }
    return std::nullopt;
  }
  static std::optional<bool> env_flag(const char* name, const char* fallback) {
    const char* used = name;
    auto v = env(name);
    if (!v) {
      used = fallback;
      v = env(fallback);
    }
    if (!v) return std::nullopt;
    std::string s;
    for (char c : *v) s += static_cast<char>((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
    if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
    if (s == "0" || s == "false" || s == "no" || s == "off") return false;
    throw error(error_category::options, std::string(used) + "='" + *v + "' is not a boolean", "environment",
                "use 1/0, true/false, yes/no or on/off");
  }

  std::int64_t device_iterations_ = 1;
  std::int64_t replication_factor_ = 1;
  std::int64_t input_group_size_ = 1;
  comm_group_type input_group_type_ = comm_group_type::ungrouped;
  std::int64_t gradient_accumulation_ = 1;
  ipu::output_mode output_mode_ = ipu::output_mode::default_;
  std::int64_t output_return_period_ = 1;
  ipu::strategy_settings strategy_;
  bool auto_round_num_ipus_ = false;
  std::optional<std::string> cache_dir_;
  bool use_ipu_model_ = false;
  std::optional<std::string> offline_ipu_target_;
  std::optional<std::int64_t> ipu_id_;
  std::optional<std::uint64_t> random_seed_;
  std::optional<double> default_memory_proportion_;
  std::map<std::int64_t, double> memory_proportion_;
  bool synthetic_data_ = false;
  ipu::connection_type connection_type_ = ipu::connection_type::always;
  ipu::sync_pattern sync_pattern_ = ipu::sync_pattern::full;
  std::string log_dir_ = ".";
  std::optional<std::string> profile_dir_;
  bool stable_norm_ = false;
  bool log_cycle_count_ = false;
  bool broadcast_buffers_ = true;
  bool progress_bar_ = true;
  reduction_type reduction_type_ = reduction_type::mean;
  ipu::mean_reduction_strategy mean_reduction_strategy_ = ipu::mean_reduction_strategy::running;
  bool automatic_loss_scaling_ = false;
  std::optional<ipu::recomputation> recomputation_;  // unset: None, PopART's default
  std::optional<data_type> precision_;
  data_type partials_type_ = data_type::F32;
  ipu::half_float_casting half_float_casting_ = ipu::half_float_casting::float_downcast_to_half;
  bool stochastic_rounding_ = false;
  bool floating_point_exceptions_ = false;
  bool running_statistics_always_float_ = true;
  tensor_location activation_location_;
  tensor_location weight_location_;
  tensor_location optimizer_location_;
  tensor_location accumulator_location_;
  std::int64_t process_id_ = 0;
  std::int64_t num_processes_ = 1;
  bool wait_for_device_ = false;
  std::optional<log::level> log_level_;
};

}  // namespace ipu

// Reading and writing option files: defines load_from_string and to_config. (That header includes
// this one first, so either can be included on its own.)
#include "ipu/poptorch/options_file.hpp"  // IWYU pragma: export
