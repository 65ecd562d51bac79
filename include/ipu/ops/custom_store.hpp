#pragma once
// The run-time store of custom ops (ops/custom_ops.hpp has the API and explains them): the rows the
// op table's and the op registry's run-time lookups fall back to. Kept apart from the API so that
// ops/op_table.hpp and ops/registry.hpp, which the API itself needs, can read it.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "ipu/ops/kernel.hpp"
#include "ipu/ops/op_def.hpp"

namespace ipu::ops::detail::custom {

/// One registered op; its op_def and op_entry view its own strings, so rows never move (deque).
struct row {
  std::string domain, type;
  std::int64_t version = 1;
  op_def def{};
  op_entry entry{};
};

struct store {
  std::shared_mutex mutex;
  std::deque<row> rows;
};

inline store& the_store() {
  static store s;
  return s;
}

inline constexpr std::size_t none = static_cast<std::size_t>(-1);

/// The index of (domain, type)'s row, or `none`.
inline std::size_t index_of(std::string_view domain, std::string_view type) noexcept {
  auto& s = the_store();
  const std::shared_lock lock(s.mutex);
  for (std::size_t i = 0; i < s.rows.size(); ++i)
    if (s.rows[i].domain == domain && s.rows[i].type == type) return i;
  return none;
}

/// Row `i` (from index_of); rows are never removed or moved, so the reference stays valid.
inline const row& at(std::size_t i) noexcept {
  auto& s = the_store();
  const std::shared_lock lock(s.mutex);
  return s.rows[i];
}

}  // namespace ipu::ops::detail::custom
