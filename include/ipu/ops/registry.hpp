#pragma once
// The op registry: one entry per (domain, op type) with its host kernel. Kernel headers add their
// entries in `register_*` functions; `ipu::default_op_registry()` (ipu/ops/all.hpp) holds those of
// every op-table row (ops/op_table.hpp). A user's registry may add kernels for ops of its own;
// every registry also finds the custom ops registered at run time (ops/custom_ops.hpp).
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/ops/custom_store.hpp"
#include "ipu/ops/kernel.hpp"

namespace ipu {

class op_registry {
 public:
  void add(op_entry e) {
    if (find(e.domain, e.type))
      throw error(error_category::internal, "op " + std::string(e.type) + " registered twice", "op registry");
    entries_.push_back(e);
  }
  [[nodiscard]] const op_entry* find(std::string_view domain, std::string_view type) const noexcept {
    if (domain == "ai.onnx") domain = "";
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&](const op_entry& e) { return e.domain == domain && e.type == type; });
    if (it != entries_.end()) return &*it;
    // Custom ops (ops/custom_ops.hpp) run under every registry, as the op table's rows do.
    const auto i = ops::detail::custom::index_of(domain, type);
    return i == ops::detail::custom::none ? nullptr : &ops::detail::custom::at(i).entry;
  }
  /// The kernel for (domain, type); throws if there is none (find() says so without throwing).
  [[nodiscard]] kernel_fn kernel(std::string_view domain, std::string_view type) const {
    const op_entry* e = find(domain, type);
    if (!e || !e->kernel) {
      const std::string qualified = domain.empty() || domain == "ai.onnx" ? std::string(type)
                                                                           : std::string(domain) + "::" + std::string(type);
      throw error(error_category::runtime, "no host kernel for op " + qualified, "op registry",
                  "register a kernel for it or rewrite the model to avoid the op");
    }
    return e->kernel;
  }
  [[nodiscard]] const std::vector<op_entry>& entries() const noexcept { return entries_; }

 private:
  std::vector<op_entry> entries_;
};

}  // namespace ipu
