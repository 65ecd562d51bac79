#pragma once
// Lets a user's own graph type stand wherever the library takes a graph.
//
// A type opts in explicitly, either with a member alias
//     struct my_model { using graph_concept = ipu::graph_tag; ... };
// or by specialising `ipu::enable_dataflow_graph<my_model> = true`, and says how it becomes an
// `ipu::graph` with one of (looked up in this order):
//     ipu::graph to_ipu_graph() const;                     // member
//     friend ipu::graph to_ipu_graph(const my_model&);     // found by argument-dependent lookup
// Either may return `const ipu::graph&` instead, to view a graph the type already holds. Both
// may be constexpr, so conversion works in constant expressions.
//
// Library code takes `const ipu::dataflow_graph auto& g` and reads it through
// `ipu::as_graph(g)`: `const graph&` for an ipu::graph, whatever the conversion returns otherwise
// (bind it with `auto&&` or `decltype(auto)` to avoid a copy).
#include <concepts>
#include <type_traits>

#include "ipu/graph/graph.hpp"

namespace ipu {

struct graph_tag {};

namespace detail {
template <class T>
concept declares_graph_tag = requires { typename T::graph_concept; } &&
                             std::same_as<typename T::graph_concept, graph_tag>;
}  // namespace detail

/// True for types that declare `using graph_concept = ipu::graph_tag;`; specialise it to opt in
/// a type you cannot change.
template <class T>
inline constexpr bool enable_dataflow_graph = detail::declares_graph_tag<T>;
template <>
inline constexpr bool enable_dataflow_graph<graph> = true;

namespace detail::as_graph_cpo {

void to_ipu_graph() = delete;  // only argument-dependent lookup finds the user's function

template <class T>
concept has_member = requires(const T& g) {
  { g.to_ipu_graph() } -> std::convertible_to<const graph&>;
};
template <class T>
concept has_adl = requires(const T& g) {
  { to_ipu_graph(g) } -> std::convertible_to<const graph&>;
};

struct fn {
  constexpr const graph& operator()(const graph& g) const noexcept { return g; }

  template <class T>
    requires(!std::same_as<std::remove_cvref_t<T>, graph>)
  constexpr decltype(auto) operator()(const T& g) const {
    static_assert(enable_dataflow_graph<T>,
                  "ipu: this type is not a dataflow graph; opt in with `using graph_concept = ipu::graph_tag;` "
                  "or by specialising ipu::enable_dataflow_graph");
    static_assert(has_member<T> || has_adl<T>,
                  "ipu: a dataflow graph needs `to_ipu_graph() const` or a free `to_ipu_graph(const T&)` "
                  "returning ipu::graph or const ipu::graph&");
    if constexpr (has_member<T>) return g.to_ipu_graph();
    else if constexpr (has_adl<T>) return to_ipu_graph(g);
  }
};

}  // namespace detail::as_graph_cpo

/// Views or converts a dataflow graph as an `ipu::graph` (a customisation point object).
inline constexpr detail::as_graph_cpo::fn as_graph{};

/// A graph the library accepts: ipu::graph, or a type that opted in and converts to one.
template <class T>
concept dataflow_graph =
    enable_dataflow_graph<std::remove_cvref_t<T>> &&
    (std::same_as<std::remove_cvref_t<T>, graph> || detail::as_graph_cpo::has_member<std::remove_cvref_t<T>> ||
     detail::as_graph_cpo::has_adl<std::remove_cvref_t<T>>);

}  // namespace ipu
