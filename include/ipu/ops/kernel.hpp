#pragma once
// The contract between a host kernel and whatever schedules it (the CPU device, or a simulated
// IPU's worker). A kernel reads its inputs, writes its preallocated outputs, and knows nothing
// about how ops are ordered or where buffers live.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/tensor.hpp"

namespace ipu {

/// Runs a subgraph (If / Loop bodies) on the same device that runs the calling kernel.
struct subgraph_runner {
  virtual ~subgraph_runner() = default;
  /// Binds `inputs` to `body`'s graph inputs in order and returns its outputs in order.
  virtual std::vector<host_tensor> run(const graph& body, std::span<const const_tensor_view> inputs) = 0;
};

/// What a kernel prepared from its op's constant inputs (weights reordered into a library's
/// layout), kept by the runner between runs of the same planned op so that the work is done once.
/// The runner owns it and drops it with the plan; a kernel stores anything it likes in `prepared`
/// and must check that it still fits (same source, same shape) before using it.
struct op_cache {
  std::shared_ptr<void> prepared;
};

/// Splits [0, n) into chunks run concurrently. Chunking depends only on `n` and the thread count,
/// so results are deterministic for a given thread count.
using parallel_for_fn =
    std::function<void(std::size_t n, const std::function<void(std::size_t begin, std::size_t end)>&)>;

inline void serial_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& body) {
  if (n) body(0, n);
}

/// What random ops (RandomNormal, RandomUniform, their -Like forms, Bernoulli, Multinomial) draw
/// from: a seed, and how many times each op has drawn. An op's draw is a function of (its `seed`
/// attribute, or else this seed; the op's identity; the op's call number), so each run of a device
/// draws afresh, two devices with the same seed draw the same values run for run, and a different
/// seed gives different values (ops/kernels/random.hpp). Safe to share between threads.
class random_source {
 public:
  /// The seed of a source made without one, and of kernels run without a source (whose call
  /// number is always 0): fixed, so results are reproducible unless another seed is asked for.
  static constexpr std::uint64_t default_seed = 0;

  explicit random_source(std::uint64_t seed = default_seed) noexcept : seed_(seed) {}
  random_source(const random_source&) = delete;
  random_source& operator=(const random_source&) = delete;

  [[nodiscard]] std::uint64_t seed() const {
    std::lock_guard lock(mutex_);
    return seed_;
  }
  /// Starts over: the next draws are those of a new source with `seed`.
  void reseed(std::uint64_t seed) {
    std::lock_guard lock(mutex_);
    seed_ = seed;
    calls_.clear();
  }
  /// The seed, and the call number of this draw of `op` (0 on its first, then 1, 2, ...). Ops are
  /// told apart by address: the graph they belong to must outlive the source's use of them.
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> draw(const op_node& op) {
    std::lock_guard lock(mutex_);
    return {seed_, calls_[&op]++};
  }

 private:
  mutable std::mutex mutex_;
  std::uint64_t seed_;
  std::unordered_map<const op_node*, std::uint64_t> calls_;
};

struct kernel_context {
  const op_node& op;
  std::span<const const_tensor_view> inputs;  // an omitted optional input is an empty view
  std::span<const tensor_view> outputs;       // allocated with the shapes in the IR
  parallel_for_fn parallel_for = serial_for;
  subgraph_runner* subgraphs = nullptr;
  /// The most iterations a Loop without scan outputs may run (its trip count M and its condition
  /// come from the model, so a hostile one could run for ever): past it the Loop is an error.
  std::int64_t max_loop_trips = std::int64_t{1} << 24;
  /// Where random ops draw from; nullptr: random_source::default_seed, call number 0 on every call.
  random_source* random = nullptr;
  /// Null when the runner keeps nothing between runs (constant folding, tests).
  op_cache* cache = nullptr;
  /// Bit i: input i is a constant of the graph (a weight or initializer), the same bytes at the
  /// same address on every run of this op. Only inputs 0 to 63 can be marked.
  std::uint64_t constant_inputs = 0;
  /// Where a STRING output's characters go: the runner's heap, kept at least until it has copied
  /// the outputs out. Null when the runner takes no strings.
  string_heap* strings = nullptr;

  /// A copy of `s` for an element of a STRING output.
  [[nodiscard]] string_ref keep_string(std::string_view s) const {
    if (!strings)
      throw fail("the runner of this op keeps no strings", "run STRING ops on the CPU device (ipu::cpu::device)");
    return strings->keep(s);
  }

  [[nodiscard]] bool input_is_constant(std::size_t i) const noexcept {
    return i < 64 && has_input(i) && ((constant_inputs >> i) & 1u) != 0;
  }

  [[nodiscard]] bool has_input(std::size_t i) const noexcept { return i < inputs.size() && !inputs[i].empty(); }
  [[nodiscard]] const_tensor_view input(std::size_t i) const {
    if (!has_input(i))
      throw error(error_category::runtime, "required input #" + std::to_string(i) + " is missing",
                  "op " + graph::describe(op), "connect the input in the model");
    return inputs[i];
  }

  // Attribute access with defaults; a present attribute of the wrong kind is an error.
  [[nodiscard]] std::int64_t attr_int(std::string_view name, std::int64_t fallback) const {
    return get<std::int64_t>(name, fallback);
  }
  [[nodiscard]] float attr_float(std::string_view name, float fallback) const { return get<float>(name, fallback); }
  [[nodiscard]] std::string attr_string(std::string_view name, const std::string& fallback = {}) const {
    return get<std::string>(name, fallback);
  }
  [[nodiscard]] std::vector<std::int64_t> attr_ints(std::string_view name,
                                                    const std::vector<std::int64_t>& fallback = {}) const {
    return get<std::vector<std::int64_t>>(name, fallback);
  }
  [[nodiscard]] std::vector<float> attr_floats(std::string_view name, const std::vector<float>& fallback = {}) const {
    return get<std::vector<float>>(name, fallback);
  }
  [[nodiscard]] std::vector<std::string> attr_strings(std::string_view name,
                                                      const std::vector<std::string>& fallback = {}) const {
    return get<std::vector<std::string>>(name, fallback);
  }
  [[nodiscard]] bool has_attr(std::string_view name) const { return op.find_attribute(name) != nullptr; }

  /// An error about this op's inputs or attributes (for values only known at run time).
  [[nodiscard]] error fail(const std::string& what, const std::string& fix = {}) const {
    return error(error_category::runtime, what, "op " + graph::describe(op), fix);
  }

 private:
  template <class T>
  T get(std::string_view name, const T& fallback) const {
    const attribute* a = op.find_attribute(name);
    if (!a) return fallback;
    if (const T* v = std::get_if<T>(&a->value)) return *v;
    throw error(error_category::graph,
                "attribute '" + std::string(name) + "' is " + std::string(to_string(a->kind())) +
                    ", not the kind expected",
                "op " + graph::describe(op), "check the model against the ONNX operator specification");
  }
};

using kernel_fn = void (*)(const kernel_context&);

/// An op's host kernel as the op registry (ops/registry.hpp) holds it.
struct op_entry {
  std::string_view domain;  // "" for ai.onnx
  std::string_view type;
  kernel_fn kernel = nullptr;
  // The kernel writes every element of its outputs, so the CPU device need not zero its arena
  // outputs first (that zeroing was ~10% of a training step).
  bool writes_all_outputs = false;
};

}  // namespace ipu
