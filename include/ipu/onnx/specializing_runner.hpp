#pragma once
// Runs an ONNX model whose structure depends on input values (value_dependence.hpp) on the CPU
// device, run after run.
//
// Each run's inputs are looked up among the plans made so far: a plan matches when the inputs it
// fixed at import (a Loop's trip count, an If's condition, a sequence position) have the values it
// was imported for. Otherwise the model is imported for this run's values
// (import_model_given_inputs) and planned, and the plan is kept, the least recently used dropped
// beyond `max_plans`. A model that depends on no value has one plan, made by the first run. As
// PopART prepares one session per input shape, each plan is a static graph; only the choice
// between them happens at run time. Not thread-safe: give each thread its own runner.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/error.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/tensor.hpp"

namespace ipu::onnx {

class specializing_runner {
 public:
  using named_values = std::map<std::string, host_tensor, std::less<>>;

  explicit specializing_runner(::onnx::ModelProto model, import_options options = {}, cpu::device_options device = {},
                               std::size_t max_plans = 8)
      : model_(std::move(model)), options_(std::move(options)), device_(std::move(device)), max_plans_(max_plans) {
    if (max_plans_ == 0)
      throw error(error_category::usage, "max_plans is 0", "specializing_runner", "keep at least one plan");
  }

  /// Runs the model on `inputs` (every input of the model, by name); the outputs in the model's order.
  std::vector<host_tensor> run(const named_values& inputs) {
    auto it = std::find_if(plans_.begin(), plans_.end(), [&](const plan& p) { return p.matches(inputs); });
    if (it == plans_.end()) {
      std::vector<std::string> fixed;
      auto g = import_model_given_inputs(model_, options_, inputs, &fixed);
      plan p;
      for (const auto& name : fixed) p.fixed.emplace(name, inputs.at(name));
      p.device = std::make_unique<cpu::device>(std::move(g), device_);
      plans_.push_front(std::move(p));
      if (plans_.size() > max_plans_) plans_.pop_back();
      ++imports_;
    } else if (it != plans_.begin()) {
      plans_.splice(plans_.begin(), plans_, it);  // most recently used first
    }
    const auto& p = plans_.front();
    cpu::named_tensors named;
    for (const auto& [name, t] : inputs)
      if (!p.fixed.count(name)) named.emplace_back(name, t.view());
    return p.device->run(named);
  }

  /// The plans kept, and how many imports the runs have needed so far.
  [[nodiscard]] std::size_t plans() const noexcept { return plans_.size(); }
  [[nodiscard]] std::size_t imports() const noexcept { return imports_; }

 private:
  struct plan {
    named_values fixed;  // the inputs fixed at import, with the values they were fixed to
    std::unique_ptr<cpu::device> device;

    [[nodiscard]] bool matches(const named_values& inputs) const {
      return std::all_of(fixed.begin(), fixed.end(), [&](const auto& entry) {
        auto it = inputs.find(entry.first);
        if (it == inputs.end() || it->second.info() != entry.second.info()) return false;
        const auto a = it->second.bytes();
        const auto b = entry.second.bytes();
        // Fixed inputs are integers or bools (with_dependent_inputs), so equal values are equal bytes.
        return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
      });
    }
  };

  ::onnx::ModelProto model_;
  import_options options_;
  cpu::device_options device_;
  std::size_t max_plans_;
  std::list<plan> plans_;  // most recently used first
  std::size_t imports_ = 0;
};

}  // namespace ipu::onnx
