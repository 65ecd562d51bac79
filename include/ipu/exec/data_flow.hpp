#pragma once
// PopART's DataFlow: how many micro-batches one call of the main program runs (batches per step)
// and which tensors come back to the host (anchors), each with an anchor return type:
//
//   All        every micro-batch of the step
//   Final      the last micro-batch only
//   EveryN(N)  every N-th batch (batches N-1, 2N-1, ...); N > 0, N <= batches per step, N | bps
//   Sum        the sum over every micro-batch of the step
//
// Per replica, a step returns 1 value (Final, Sum), bps/N x accumulation (EveryN) or
// bps x accumulation (All) values of an anchor. Arrays exchanged with the host carry the
// micro-batch dimensions in front of the tensor's own: [batches, accumulation, replicas, ...],
// with dimensions of size 1 left out (PopART's convention).
//
//   ipu::data_flow flow(4, {{"logits", ipu::anchor_return_type::all()},
//                           {"loss", ipu::anchor_return_type::every_n(2)}});
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/shape.hpp"

namespace ipu {

enum class anchor_return_type_id : std::uint8_t { all, final, every_n, sum };

/// PopART's spelling: "All", "Final", "EveryN", "Sum".
constexpr std::string_view to_string(anchor_return_type_id id) noexcept {
  switch (id) {
    case anchor_return_type_id::all: return "All";
    case anchor_return_type_id::final: return "Final";
    case anchor_return_type_id::every_n: return "EveryN";
    case anchor_return_type_id::sum: return "Sum";
  }
  return "?";
}

/// How many micro-batches one step runs, per replica and in all.
struct step_counts {
  std::uint64_t batches_per_step = 1;
  std::uint64_t accumulation = 1;  // gradient accumulation factor (1 for inference)
  std::uint64_t replicas = 1;

  /// Micro-batches one replica runs per step.
  [[nodiscard]] constexpr std::uint64_t micro_batches() const noexcept { return batches_per_step * accumulation; }
  friend constexpr bool operator==(const step_counts&, const step_counts&) = default;
};

namespace detail::flow {
constexpr std::string to_decimal(std::uint64_t v) {
  if (v == 0) return "0";
  std::string s;
  while (v) {
    s.insert(s.begin(), static_cast<char>('0' + v % 10));
    v /= 10;
  }
  return s;
}
constexpr std::string to_decimal(std::int64_t v) {
  return v < 0 ? "-" + to_decimal(static_cast<std::uint64_t>(-(v + 1)) + 1) : to_decimal(static_cast<std::uint64_t>(v));
}
constexpr char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
constexpr bool iequal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}
/// "1, 2, 4 or 8": the valid EveryN periods for `bps` (divisors), abbreviated when there are many.
constexpr std::string divisors(std::uint64_t bps) {
  std::vector<std::uint64_t> d;
  for (std::uint64_t i = 1; i <= bps && d.size() < 9; ++i)
    if (bps % i == 0) d.push_back(i);
  std::string s;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i) s += i + 1 == d.size() ? " or " : ", ";
    s += to_decimal(d[i]);
  }
  if (d.size() == 9 && d.back() != bps) s += ", ... or " + to_decimal(bps);
  return s;
}
}  // namespace detail::flow

class anchor_return_type {
 public:
  constexpr anchor_return_type() = default;  // All

  static constexpr anchor_return_type all() noexcept { return {anchor_return_type_id::all, 0}; }
  static constexpr anchor_return_type final() noexcept { return {anchor_return_type_id::final, 0}; }
  static constexpr anchor_return_type sum() noexcept { return {anchor_return_type_id::sum, 0}; }
  /// Every `period`-th batch. Throws ipu::error (usage) for a period <= 0.
  static constexpr anchor_return_type every_n(std::int64_t period) {
    if (period <= 0)
      throw error(error_category::usage, "EveryN return period " + detail::flow::to_decimal(period) + " is not positive",
                  "anchor return type", "give a period of at least 1");
    return {anchor_return_type_id::every_n, static_cast<std::uint64_t>(period)};
  }
  /// PopART's constructor: a name ("All", "Final", "Sum", "EveryN", any case); `period` is
  /// required for EveryN and refused for the others.
  static constexpr anchor_return_type parse(std::string_view name, std::optional<std::int64_t> period = {}) {
    using detail::flow::iequal;
    if (iequal(name, "everyn")) {
      if (!period)
        throw error(error_category::usage, "EveryN needs a return period", "anchor return type",
                    "give the period, e.g. EveryN with period 2");
      return every_n(*period);
    }
    anchor_return_type t;
    if (iequal(name, "all")) t = all();
    else if (iequal(name, "final")) t = final();
    else if (iequal(name, "sum")) t = sum();
    else
      throw error(error_category::usage, "unknown anchor return type '" + std::string(name) + "'", "anchor return type",
                  "use All, Final, EveryN or Sum");
    if (period)
      throw error(error_category::usage, "a return period is only meaningful for EveryN, not " + std::string(name),
                  "anchor return type", "drop the period");
    return t;
  }

  [[nodiscard]] constexpr anchor_return_type_id id() const noexcept { return id_; }
  /// EveryN's period; 0 for the other return types.
  [[nodiscard]] constexpr std::uint64_t period() const noexcept { return period_; }

  /// Values of the anchor one replica returns per step.
  [[nodiscard]] constexpr std::uint64_t fetches(const step_counts& c) const noexcept {
    switch (id_) {
      case anchor_return_type_id::all: return c.batches_per_step * c.accumulation;
      case anchor_return_type_id::every_n: return c.batches_per_step / period_ * c.accumulation;
      case anchor_return_type_id::final:
      case anchor_return_type_id::sum: return 1;
    }
    return 0;
  }

  /// Where micro-batch `m` (batch m / accumulation, accumulation index m % accumulation) lands
  /// among the replica's fetches; nothing when it is not returned. Sum adds every micro-batch
  /// into fetch 0.
  [[nodiscard]] constexpr std::optional<std::uint64_t> fetch_of(std::uint64_t m, const step_counts& c) const noexcept {
    const auto batch = m / c.accumulation, acc = m % c.accumulation;
    switch (id_) {
      case anchor_return_type_id::all: return m;
      case anchor_return_type_id::every_n:
        if ((batch + 1) % period_ != 0) return std::nullopt;
        return ((batch + 1) / period_ - 1) * c.accumulation + acc;
      case anchor_return_type_id::final:
        if (m + 1 != c.micro_batches()) return std::nullopt;
        return 0;
      case anchor_return_type_id::sum: return 0;
    }
    return std::nullopt;
  }

  friend constexpr bool operator==(const anchor_return_type&, const anchor_return_type&) = default;

 private:
  constexpr anchor_return_type(anchor_return_type_id id, std::uint64_t period) noexcept : id_(id), period_(period) {}
  anchor_return_type_id id_ = anchor_return_type_id::all;
  std::uint64_t period_ = 0;
};

/// "All", "EveryN(4)".
constexpr std::string to_string(const anchor_return_type& t) {
  std::string s(to_string(t.id()));
  if (t.id() == anchor_return_type_id::every_n) s += "(" + detail::flow::to_decimal(t.period()) + ")";
  return s;
}

struct anchor {
  std::string name;
  anchor_return_type type;
  friend constexpr bool operator==(const anchor&, const anchor&) = default;
};

class data_flow {
 public:
  /// One batch per step, no anchors.
  constexpr data_flow() = default;

  /// Throws ipu::error (usage) for 0 batches per step, an empty or repeated anchor name, or an
  /// EveryN period larger than the batches per step or not dividing it.
  constexpr data_flow(std::uint64_t batches_per_step, std::initializer_list<anchor> anchors)
      : bps_(batches_per_step), anchors_(anchors) {
    check();
  }
  constexpr data_flow(std::uint64_t batches_per_step, const std::vector<anchor>& anchors)
      : bps_(batches_per_step), anchors_(anchors) {
    check();
  }
  /// The same return type for every tensor in `names`.
  constexpr data_flow(std::uint64_t batches_per_step, const std::vector<std::string>& names, anchor_return_type type)
      : bps_(batches_per_step) {
    for (const auto& n : names) anchors_.push_back(anchor{n, type});
    check();
  }

  /// Every output of `g`, returned with `type`.
  static constexpr data_flow for_outputs(const graph& g, std::uint64_t batches_per_step,
                                         anchor_return_type type = anchor_return_type::all()) {
    std::vector<std::string> names;
    for (auto t : g.outputs()) names.push_back(g.tensor(t).name);
    return data_flow(batches_per_step, names, type);
  }

  [[nodiscard]] constexpr std::uint64_t batches_per_step() const noexcept { return bps_; }
  [[nodiscard]] constexpr const std::vector<anchor>& anchors() const noexcept { return anchors_; }
  [[nodiscard]] constexpr const anchor* find(std::string_view name) const noexcept {
    for (const auto& a : anchors_)
      if (a.name == name) return &a;
    return nullptr;
  }
  [[nodiscard]] constexpr bool is_anchored(std::string_view name) const noexcept { return find(name) != nullptr; }
  /// The return type of anchor `name`; throws ipu::error (usage) when it is not an anchor.
  [[nodiscard]] constexpr anchor_return_type return_type(std::string_view name) const {
    if (const auto* a = find(name)) return a->type;
    throw error(error_category::usage, "tensor '" + std::string(name) + "' is not an anchor", "data flow",
                "add it to the data flow's anchors");
  }
  /// Values of `name` one replica returns per step (0 when it is not an anchor).
  [[nodiscard]] constexpr std::uint64_t fetches(std::string_view name, std::uint64_t accumulation = 1) const noexcept {
    for (const auto& a : anchors_)  // not through find(): GCC 12 cannot compare its pointer in constant expressions
      if (a.name == name) return a.type.fetches(step_counts{bps_, accumulation, 1});
    return 0;
  }

  friend constexpr bool operator==(const data_flow&, const data_flow&) = default;

 private:
  constexpr void check() const {
    using detail::flow::to_decimal;
    if (bps_ == 0)
      throw error(error_category::usage, "batches per step is 0", "data flow", "run at least one batch per step");
    for (std::size_t i = 0; i < anchors_.size(); ++i) {
      const auto& a = anchors_[i];
      if (a.name.empty())
        throw error(error_category::usage, "an anchor has an empty name", "data flow", "name the tensor to return");
      for (std::size_t j = 0; j < i; ++j)
        if (anchors_[j].name == a.name)
          throw error(error_category::usage, "tensor '" + a.name + "' is anchored twice", "data flow",
                      "give each anchor once, with one return type");
      if (a.type.id() != anchor_return_type_id::every_n) continue;
      const auto n = a.type.period();
      if (n > bps_)
        throw error(error_category::usage,
                    "anchor '" + a.name + "': return period " + to_decimal(n) + " is larger than the " +
                        to_decimal(bps_) + " batches per step",
                    "data flow", "use a period of at most the batches per step");
      if (bps_ % n != 0)
        throw error(error_category::usage,
                    "anchor '" + a.name + "': return period " + to_decimal(n) + " does not divide the " +
                        to_decimal(bps_) + " batches per step",
                    "data flow",
                    "use a factor of the batches per step (" + detail::flow::divisors(bps_) +
                        ") so the returned batches are the same every step");
    }
  }

  std::uint64_t bps_ = 1;
  std::vector<anchor> anchors_;
};

// --- host array shapes --------------------------------------------------------------------------

namespace detail::flow {
constexpr shape with_leading(std::initializer_list<std::uint64_t> leading, const shape& s) {
  std::vector<shape::dim_type> dims;
  for (auto d : leading)
    if (d != 1) dims.push_back(static_cast<shape::dim_type>(d));
  dims.insert(dims.end(), s.begin(), s.end());
  return shape(std::move(dims));
}
}  // namespace detail::flow

/// The host array one input needs for a step: [batches, accumulation, replicas, *tensor] with
/// dimensions of size 1 left out.
constexpr shape input_array_shape(const shape& tensor_shape, const step_counts& c) {
  return detail::flow::with_leading({c.batches_per_step, c.accumulation, c.replicas}, tensor_shape);
}

/// The host array an anchor fills in a step: All [bps, accumulation, replicas, *tensor],
/// EveryN [bps / N, accumulation, replicas, *tensor], Final and Sum [replicas, *tensor]; dimensions
/// of size 1 left out.
constexpr shape anchor_array_shape(const shape& tensor_shape, const anchor_return_type& type, const step_counts& c) {
  switch (type.id()) {
    case anchor_return_type_id::all:
      return detail::flow::with_leading({c.batches_per_step, c.accumulation, c.replicas}, tensor_shape);
    case anchor_return_type_id::every_n:
      return detail::flow::with_leading({c.batches_per_step / type.period(), c.accumulation, c.replicas}, tensor_shape);
    case anchor_return_type_id::final:
    case anchor_return_type_id::sum: return detail::flow::with_leading({c.replicas}, tensor_shape);
  }
  return tensor_shape;
}

}  // namespace ipu
