#pragma once
// Pictures of a plan, from the plan's own data and nothing else: `plan_report_html` is one
// self-contained HTML page (inline SVG, a few lines of inline CSS and JS, nothing fetched) with
//  (a) the pipeline Gantt chart of one step: a row per stage (by IPU), a box per micro-batch over
//      predicted time, arrows for the IPU-Link copies between stages and the host transfers;
//  (b) a tile-memory map per IPU: a heat map of every tile's bytes, the worst tiles and their
//      largest tensors;
//  (c) per stage, its cycles as compute, exchange (IPU-Links, Streaming Memory), sync and host.
// `write_predicted_chrome_trace` draws the same step with the library's one trace writer, flow
// arrows for the same copies and counters for the same memory figures.
//
// The tile map counts the tensors the plan places (executable::placement, laid out as
// memory_plan.hpp maps them, views sharing their input's storage; summed per tile and kind by the
// device memory model, device/memory.hpp) over the whole step: activations are not
// retired at their last use, and op temporaries and vertex state (in the plan's per-IPU totals)
// have no per-tile placement, so the map and the plan's worst tile are shown side by side.
//
// Tensor and op names come from the model, that is from strangers: every one is escaped.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/device/compute_cost.hpp"
#include "ipu/device/memory.hpp"
#include "ipu/device/tile_mapping.hpp"
#include "ipu/ops/op_table.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/sched/training_plan.hpp"
#include "ipu/exec/predicted_timeline.hpp"
#include "ipu/exec/timeline.hpp"

namespace ipu {

/// `s` with & < > " ' replaced by entities: safe as HTML/SVG text and as a quoted attribute value.
inline std::string html_escape(std::string_view s) {
  std::string r;
  r.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      case '\'': r += "&#39;"; break;
      default: r += c;
    }
  }
  return r;
}

/// One row of the Gantt chart: a stage on its IPU.
struct report_row {
  std::uint32_t stage = 0, ipu = 0;
};

/// A micro-batch's run of a stage: from its first step's start to its last step's end.
struct report_box {
  std::uint32_t stage = 0;
  std::uint64_t micro_batch = 0, begin = 0, end = 0;
};

/// A transfer between stages (IPU-Link copy) or between the host and a stage.
struct report_arrow {
  step_kind kind = step_kind::ipu_copy;  // ipu_copy, host_to_device or device_to_host
  std::uint32_t from_stage = no_stage;   // no_stage: the host
  std::uint32_t to_stage = no_stage;     // no_stage: the host
  std::uint64_t micro_batch = 0, from_cycle = 0, to_cycle = 0;
  tensor_id tensor = no_tensor;
};

/// A stage's cycles for one micro-batch, by kind of work.
struct stage_breakdown {
  std::uint32_t stage = 0, ipu = 0;
  std::uint64_t compute = 0;   // ops
  std::uint64_t exchange = 0;  // IPU-Link copies in, Streaming Memory loads and stores
  std::uint64_t sync = 0;
  std::uint64_t host = 0;      // host streams in and out
};

/// A tile holding tensors, with the largest of them (name, bytes on the tile), largest first.
struct report_tile {
  std::uint32_t tile = 0;
  std::uint64_t bytes = 0;
  tile_memory by_kind;  // variables, constants, activations
  std::vector<std::pair<std::string, std::uint64_t>> tensors;
};

/// One IPU's tiles: bytes of the placed tensors on every tile, and the fullest tiles.
struct report_tile_map {
  std::uint32_t ipu = 0;
  std::vector<std::uint64_t> bytes;  // per tile
  std::vector<report_tile> worst;    // fullest first
};

/// What the pictures show, computed once from the plan.
struct plan_pictures {
  std::vector<report_row> rows;
  std::vector<report_box> boxes;
  std::vector<report_arrow> arrows;
  std::vector<stage_breakdown> stages;
  std::vector<report_tile_map> tiles;
  std::uint64_t span = 0;  // cycles of the drawn step
};

namespace detail::report {
/// Bytes per tile of `p`'s tensor, mapped as memory_plan.hpp maps it: linearly, whole vectors per tile.
inline linear_tile_mapping placed_mapping(const executable& e, const tensor_placement& p, data_type& type) {
  const auto& t = e.model.tensor(p.tensor);
  type = t.info.type;
  if (e.precision && (type == data_type::F32 || type == data_type::F16)) type = *e.precision;
  const auto n = t.info.num_elements();
  const auto& a = e.device.arch;
  auto m = map_linearly(n > 0 ? static_cast<std::uint64_t>(n) : 0, a.tiles_per_ipu, vector_width(a, type));
  m.first_tile = p.first_tile;
  // Never past the last tile, whatever the plan says.
  if (m.first_tile >= a.tiles_per_ipu) m.tiles_used = 0;
  else m.tiles_used = std::min(m.tiles_used, a.tiles_per_ipu - m.first_tile);
  return m;
}

inline std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

inline std::string bytes_text(std::uint64_t b) {
  if (b >= 1024 * 1024) return fixed(static_cast<double>(b) / (1024.0 * 1024.0), 1) + " MiB";
  if (b >= 1024) return fixed(static_cast<double>(b) / 1024.0, 1) + " KiB";
  return std::to_string(b) + " B";
}

/// White (empty) through yellow to red (`scale` bytes); purple beyond the tile's `capacity`.
inline std::string heat(std::uint64_t bytes, std::uint64_t scale, std::uint64_t capacity) {
  if (bytes > capacity) return "#7b1fa2";
  const double f = std::clamp(static_cast<double>(bytes) / static_cast<double>(std::max<std::uint64_t>(scale, 1)), 0.0, 1.0);
  int r = 255, g = 255, b = 255;
  if (f < 0.5) {
    b = static_cast<int>(255 * (1 - 2 * f));
  } else {
    g = static_cast<int>(255 * (2 - 2 * f));
    b = 0;
  }
  char s[8];
  std::snprintf(s, sizeof s, "#%02x%02x%02x", r, g, b);
  return s;
}

inline const char* kind_colour(step_kind k) {
  switch (k) {
    case step_kind::ipu_copy: return "#1565c0";
    case step_kind::host_to_device: return "#2e7d32";
    case step_kind::device_to_host: return "#c62828";
    default: return "#555";
  }
}
}  // namespace detail::report

/// The pictures' data: Gantt rows, boxes and arrows of one predicted step, per-stage cycles, and
/// tile maps with the `worst_tiles` fullest tiles of each IPU and their `tensors_per_tile` largest tensors.
inline plan_pictures describe_plan(const executable& e, std::size_t worst_tiles = 8, std::size_t tensors_per_tile = 3) {
  plan_pictures out;
  const auto& g = e.model;
  const auto ns = e.stages.size();
  for (const auto& st : e.stages) out.rows.push_back(report_row{st.id, st.ipu});
  std::stable_sort(out.rows.begin(), out.rows.end(), [](const report_row& a, const report_row& b) {
    return a.ipu != b.ipu ? a.ipu < b.ipu : a.stage < b.stage;
  });

  // Boxes: (stage, micro-batch) -> first begin, last end.
  const auto events = predicted_timeline(e);
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::pair<std::uint64_t, std::uint64_t>> runs;
  for (const auto& ev : events) {
    out.span = std::max(out.span, ev.sim_end());
    if (ev.stage >= ns) continue;
    auto [it, fresh] = runs.try_emplace({ev.stage, ev.micro_batch}, ev.sim_begin, ev.sim_end());
    if (!fresh) {
      it->second.first = std::min(it->second.first, ev.sim_begin);
      it->second.second = std::max(it->second.second, ev.sim_end());
    }
  }
  for (const auto& [k, v] : runs) out.boxes.push_back(report_box{k.first, k.second, v.first, v.second});

  // Arrows: a copy from the stage producing its tensor to the stage it feeds; host streams.
  auto producer_stage = [&](tensor_id t) -> std::uint32_t {
    if (t == no_tensor || t >= g.num_tensors()) return no_stage;
    const auto p = g.tensor(t).producer;
    return p != no_op && p < e.op_stage.size() ? e.op_stage[p] : no_stage;
  };
  for (const auto& ev : events) {
    if (ev.stage >= ns) continue;
    report_arrow a{ev.kind, no_stage, no_stage, ev.micro_batch, ev.sim_begin, ev.sim_end(), ev.tensor};
    if (ev.kind == step_kind::ipu_copy) {
      a.from_stage = producer_stage(ev.tensor);
      a.to_stage = ev.stage;
      if (a.from_stage == no_stage || a.from_stage == a.to_stage) continue;
      // From the end of the producing stage's run of this micro-batch.
      if (auto it = runs.find({a.from_stage, ev.micro_batch}); it != runs.end()) a.from_cycle = it->second.second;
      a.to_cycle = ev.sim_end();
    } else if (ev.kind == step_kind::host_to_device) {
      a.to_stage = ev.stage;
    } else if (ev.kind == step_kind::device_to_host) {
      a.from_stage = ev.stage;
    } else {
      continue;
    }
    out.arrows.push_back(a);
  }

  // Per-stage cycles of one micro-batch.
  for (const auto& st : e.stages) out.stages.push_back(stage_breakdown{st.id, st.ipu, 0, 0, 0, 0});
  if (e.programs.size() > static_cast<std::size_t>(program_index::main))
    for (const auto& s : e.programs[static_cast<std::size_t>(program_index::main)].steps) {
      if (s.stage >= ns) continue;
      auto& b = out.stages[s.stage];
      switch (s.kind) {
        case step_kind::compute: b.compute += s.cycles; break;
        case step_kind::ipu_copy:
        case step_kind::to_remote:
        case step_kind::from_remote: b.exchange += s.cycles; break;
        case step_kind::sync: b.sync += s.cycles; break;
        case step_kind::host_to_device:
        case step_kind::device_to_host: b.host += s.cycles; break;
      }
    }

  // Tile maps: the placed tensors as the device memory model's allocations (a view's output shares
  // its input's storage), summed per tile by its tile_usage.
  const auto tiles = e.device.arch.tiles_per_ipu;
  std::vector<memory_allocation> allocs;
  for (const auto& p : e.placement) {
    if (p.in_streaming_memory || p.ipu >= e.ipus_per_replica || p.tensor >= g.num_tensors()) continue;
    const auto& t = g.tensor(p.tensor);
    if (t.producer != no_op && t.producer < g.num_ops() && is_view(g, g.op(t.producer))) continue;
    data_type type{};
    const auto m = detail::report::placed_mapping(e, p, type);
    const auto kind = t.kind == tensor_kind::variable ? memory_kind::variable
                      : t.kind == tensor_kind::constant ? memory_kind::constant : memory_kind::activation;
    allocs.push_back(tensor_allocation(t.name, kind, type, p.ipu, m));
  }
  for (std::uint32_t i = 0; i < e.ipus_per_replica; ++i) {
    report_tile_map map{i, {}, {}};
    const auto usage = e.device.has_tile_limits() ? tile_usage(e.device, allocs, i) : std::vector<tile_memory>{};
    map.bytes.resize(tiles, 0);
    for (const auto& u : usage)
      if (u.tile < tiles) map.bytes[u.tile] = u.total();
    std::vector<std::uint32_t> order(tiles);
    for (std::uint32_t t = 0; t < tiles; ++t) order[t] = t;
    const auto n = std::min<std::size_t>(worst_tiles, tiles);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                      [&](std::uint32_t a, std::uint32_t b) {
                        return map.bytes[a] != map.bytes[b] ? map.bytes[a] > map.bytes[b] : a < b;
                      });
    for (std::size_t k = 0; k < n; ++k) {
      const auto t = order[k];
      if (map.bytes[t] == 0 || t >= usage.size()) break;
      report_tile rt{t, map.bytes[t], usage[t], {}};
      for (const auto& al : allocs)
        if (al.ipu == i)
          if (const auto bt = al.bytes_on_tile(t); bt > 0) rt.tensors.emplace_back(al.name, bt);
      std::stable_sort(rt.tensors.begin(), rt.tensors.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
      if (rt.tensors.size() > tensors_per_tile) rt.tensors.resize(tensors_per_tile);
      map.worst.push_back(std::move(rt));
    }
    out.tiles.push_back(std::move(map));
  }
  return out;
}

/// The predicted step of `e` as Chrome-trace JSON: a track per IPU with every step, a flow arrow
/// per IPU-Link copy from the stage producing the tensor to the stage receiving it, and counters
/// of each IPU's predicted memory (total and worst tile, in bytes).
inline void write_predicted_chrome_trace(std::ostream& os, const executable& e) {
  chrome_trace_writer w(os);
  const double us_per_cycle = 1e6 / static_cast<double>(std::max<std::uint64_t>(e.device.arch.clock_hz, 1));
  w.process_name(0, "predicted " + e.strategy + " on " + to_string(e.device) + " (replica 0)");
  for (std::uint32_t i = 0; i < e.ipus_per_replica; ++i) w.thread_name(0, i, "IPU " + std::to_string(i));
  const auto& g = e.model;
  for (const auto& ev : predicted_timeline(e)) {
    std::string name;
    if (ev.kind == step_kind::compute && ev.op != no_op && ev.op < g.num_ops()) {
      name = graph::describe(g.op(ev.op));
    } else {
      name = to_string(ev.kind);
      if (ev.tensor != no_tensor && ev.tensor < g.num_tensors()) name += " " + g.tensor(ev.tensor).name;
      if (ev.kind == step_kind::ipu_copy) name += " -> IPU " + std::to_string(ev.peer);
    }
    std::string args = "\"cycles\":" + std::to_string(ev.sim_cycles) + ",\"micro_batch\":" + std::to_string(ev.micro_batch) +
                       ",\"stage\":" + std::to_string(ev.stage);
    if (ev.phase >= 0) args += ",\"phase\":" + std::to_string(ev.phase);
    w.complete(to_string(ev.kind), name, 0, ev.worker, static_cast<double>(ev.sim_begin) * us_per_cycle,
               static_cast<double>(ev.sim_cycles) * us_per_cycle, args);
  }
  const auto pictures = describe_plan(e, 0, 0);
  std::uint64_t id = 0;
  for (const auto& a : pictures.arrows) {
    if (a.kind != step_kind::ipu_copy) continue;
    const auto from = e.stages[a.from_stage].ipu, to = e.stages[a.to_stage].ipu;
    // Inside the producing stage's last slice and the copy's slice, so the arrow binds to both.
    const double from_us = (static_cast<double>(a.from_cycle) - 0.5) * us_per_cycle;
    const double to_us = (static_cast<double>(a.to_cycle) - 0.5) * us_per_cycle;
    w.flow(++id, "mb " + std::to_string(a.micro_batch) + ": stage " + std::to_string(a.from_stage) + " -> " +
                     std::to_string(a.to_stage),
           0, from, from_us, to, to_us);
  }
  for (const auto& m : e.memory) {
    const std::string args = "\"total_bytes\":" + std::to_string(m.total_bytes) +
                             ",\"worst_tile_bytes\":" + std::to_string(m.worst_tile_bytes);
    w.counter("memory IPU " + std::to_string(m.ipu), 0, 0.0, args);
    w.counter("memory IPU " + std::to_string(m.ipu), 0, static_cast<double>(pictures.span) * us_per_cycle, args);
  }
  w.finish();
}

/// The predicted training step `p` of `e` as Chrome-trace JSON: forward, backward, all-reduce and
/// update per IPU, and each IPU's predicted memory as counters.
inline void write_predicted_training_chrome_trace(std::ostream& os, const executable& e, const training_prediction& p) {
  chrome_trace_writer w(os);
  const double us_per_cycle = 1e6 / static_cast<double>(std::max<std::uint64_t>(e.device.arch.clock_hz, 1));
  w.process_name(0, "predicted training step, " + e.strategy + " on " + to_string(e.device) + " (replica 0)");
  for (std::uint32_t i = 0; i < e.ipus_per_replica; ++i) w.thread_name(0, i, "IPU " + std::to_string(i));
  std::uint64_t end = 0;
  for (const auto& ev : predicted_training_timeline(p)) {
    std::string name(to_string(ev.work));
    std::string args = "\"cycles\":" + std::to_string(ev.cycles) + ",\"weight_update\":" + std::to_string(ev.weight_update);
    if (ev.micro_batch >= 0) {
      name += " mb " + std::to_string(ev.micro_batch) + " (stage " + std::to_string(ev.stage) + ")";
      args += ",\"micro_batch\":" + std::to_string(ev.micro_batch) + ",\"stage\":" + std::to_string(ev.stage);
    }
    w.complete(to_string(ev.work), name, 0, ev.ipu, static_cast<double>(ev.begin) * us_per_cycle,
               static_cast<double>(ev.cycles) * us_per_cycle, args);
    end = std::max(end, ev.begin + ev.cycles);
  }
  for (const auto& m : p.memory) {
    const std::string args = "\"total_bytes\":" + std::to_string(m.total());
    w.counter("memory IPU " + std::to_string(m.ipu), 0, 0.0, args);
    w.counter("memory IPU " + std::to_string(m.ipu), 0, static_cast<double>(end) * us_per_cycle, args);
  }
  w.finish();
}

/// The plan `e` as one self-contained HTML page (file comment).
inline std::string plan_report_html(const executable& e) {
  using detail::report::bytes_text;
  using detail::report::fixed;
  const auto pic = describe_plan(e);
  const auto& a = e.device.arch;
  const auto& g = e.model;
  const double us_per_cycle = 1e6 / static_cast<double>(std::max<std::uint64_t>(a.clock_hz, 1));
  std::ostringstream h;
  const auto title = "Plan of '" + g.name() + "': " + e.strategy + " on " + to_string(e.device);
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << html_escape(title) << "</title>\n"
    << "<style>body{font:13px sans-serif;margin:16px;color:#222}h1{font-size:18px}h2{font-size:15px;margin-top:24px}"
       "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
       "td.n{text-align:left}svg text{font:11px sans-serif}#tip{position:fixed;background:#fff;border:1px solid #888;"
       "padding:2px 4px;display:none;pointer-events:none}</style></head><body>\n";
  h << "<h1>" << html_escape(title) << "</h1>\n<p>" << e.ipus_per_replica << " IPU" << (e.ipus_per_replica == 1 ? "" : "s")
    << " per replica x " << e.replication_factor << " replica" << (e.replication_factor == 1 ? "" : "s") << "; "
    << e.predicted.micro_batches_per_step << " micro-batches per step; predicted " << e.predicted.cycles_per_step
    << " cycles per step (" << fixed(e.predicted.seconds_per_step * 1e3, 3) << " ms), "
    << fixed(e.predicted.samples_per_second, 1) << " samples/s, pipeline bubble "
    << fixed(100.0 * e.predicted.pipeline_bubble, 1) << "%.</p>\n";

  // (a) Gantt chart.
  const double label_w = 110, width = 1200, row_h = 28, top = 20;
  const double plot_w = width - label_w - 10;
  const double host_y = top + static_cast<double>(pic.rows.size()) * row_h + 10;
  const double height = host_y + row_h + 20;
  const double span = static_cast<double>(std::max<std::uint64_t>(pic.span, 1));
  auto x_of = [&](std::uint64_t c) { return label_w + plot_w * static_cast<double>(c) / span; };
  std::vector<double> row_y(e.stages.size(), 0);
  for (std::size_t r = 0; r < pic.rows.size(); ++r) row_y[pic.rows[r].stage] = top + static_cast<double>(r) * row_h;
  h << "<h2>Pipeline: one step over predicted time</h2>\n<p>A row per stage, a box per micro-batch (number inside); "
       "arrows: IPU-Link copies (blue), host to IPU (green), IPU to host (red). Time axis: "
    << fixed(span * us_per_cycle, 1) << " &micro;s.</p>\n";
  h << "<svg id=\"gantt\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height << "\">\n"
    << "<defs>";
  for (auto k : {step_kind::ipu_copy, step_kind::host_to_device, step_kind::device_to_host})
    h << "<marker id=\"head-" << to_string(k) << "\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" markerWidth=\"6\" "
      << "markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0L6,3L0,6z\" fill=\"" << detail::report::kind_colour(k) << "\"/></marker>";
  h << "</defs>\n";
  for (const auto& r : pic.rows) {
    const double y = row_y[r.stage];
    h << "<g class=\"stage-row\" data-stage=\"" << r.stage << "\" data-ipu=\"" << r.ipu << "\"><rect x=\"" << label_w
      << "\" y=\"" << y << "\" width=\"" << plot_w << "\" height=\"" << row_h - 4 << "\" fill=\"#f4f4f4\"/><text x=\"4\" y=\""
      << y + 16 << "\">IPU " << r.ipu << ", stage " << r.stage << "</text></g>\n";
  }
  h << "<g class=\"host-row\"><rect x=\"" << label_w << "\" y=\"" << host_y << "\" width=\"" << plot_w << "\" height=\""
    << row_h - 4 << "\" fill=\"#e8f0e8\"/><text x=\"4\" y=\"" << host_y + 16 << "\">host</text></g>\n";
  static constexpr const char* palette[] = {"#90caf9", "#a5d6a7", "#ffcc80", "#ce93d8", "#80cbc4", "#f48fb1", "#e6ee9c", "#bcaaa4"};
  for (const auto& b : pic.boxes) {
    const double x0 = x_of(b.begin), x1 = std::max(x_of(b.end), x0 + 1);
    h << "<rect class=\"mb\" data-stage=\"" << b.stage << "\" data-mb=\"" << b.micro_batch << "\" x=\"" << fixed(x0, 2)
      << "\" y=\"" << row_y[b.stage] + 2 << "\" width=\"" << fixed(x1 - x0, 2) << "\" height=\"" << row_h - 8 << "\" fill=\""
      << palette[b.micro_batch % 8] << "\" stroke=\"#333\" stroke-width=\"0.5\"><title>micro-batch " << b.micro_batch
      << ", stage " << b.stage << ": cycles " << b.begin << " to " << b.end << "</title></rect>";
    if (x1 - x0 > 14)
      h << "<text x=\"" << fixed(x0 + 2, 2) << "\" y=\"" << row_y[b.stage] + 16 << "\">" << b.micro_batch << "</text>";
    h << '\n';
  }
  for (const auto& ar : pic.arrows) {
    const double mid = row_h / 2 - 2;
    const double y0 = ar.from_stage == no_stage ? host_y : row_y[ar.from_stage] + mid;
    const double y1 = ar.to_stage == no_stage ? host_y + row_h - 4 : row_y[ar.to_stage] + mid;
    const double x0 = x_of(ar.from_cycle), x1 = x_of(ar.to_cycle);
    const auto kind = to_string(ar.kind);
    const auto tensor = ar.tensor != no_tensor && ar.tensor < g.num_tensors() ? g.tensor(ar.tensor).name : std::string();
    h << "<line class=\"arrow " << kind << "\" x1=\"" << fixed(x0, 2) << "\" y1=\"" << fixed(y0, 2) << "\" x2=\"" << fixed(x1, 2)
      << "\" y2=\"" << fixed(y1, 2) << "\" stroke=\"" << detail::report::kind_colour(ar.kind)
      << "\" stroke-width=\"1\" marker-end=\"url(#head-" << kind << ")\"><title>" << kind << " '" << html_escape(tensor)
      << "', micro-batch " << ar.micro_batch << "</title></line>\n";
  }
  h << "</svg>\n";

  // (c) Per-stage cycles.
  std::uint64_t most = 1;
  for (const auto& s : pic.stages) most = std::max(most, s.compute + s.exchange + s.sync + s.host);
  h << "<h2>Cycles per stage (one micro-batch)</h2>\n<p>compute (blue), exchange: IPU-Links and Streaming Memory "
       "(orange), sync (grey), host streams (green).</p>\n";
  const double bar_w = 800;
  h << "<svg id=\"breakdown\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << label_w + bar_w + 10 << "\" height=\""
    << pic.stages.size() * 22 + 4 << "\">\n";
  for (std::size_t i = 0; i < pic.stages.size(); ++i) {
    const auto& s = pic.stages[i];
    const double y = static_cast<double>(i) * 22 + 2;
    h << "<g class=\"stage-bar\" data-stage=\"" << s.stage << "\"><text x=\"4\" y=\"" << y + 14 << "\">IPU " << s.ipu
      << ", stage " << s.stage << "</text>";
    double x = label_w;
    const std::pair<const char*, std::uint64_t> parts[] = {
        {"compute", s.compute}, {"exchange", s.exchange}, {"sync", s.sync}, {"host", s.host}};
    const char* colours[] = {"#1e88e5", "#fb8c00", "#9e9e9e", "#43a047"};
    for (std::size_t k = 0; k < 4; ++k) {
      const double w = bar_w * static_cast<double>(parts[k].second) / static_cast<double>(most);
      h << "<rect class=\"" << parts[k].first << "\" x=\"" << fixed(x, 2) << "\" y=\"" << y << "\" width=\"" << fixed(w, 2)
        << "\" height=\"18\" fill=\"" << colours[k] << "\"><title>" << parts[k].first << ": " << parts[k].second
        << " cycles</title></rect>";
      x += w;
    }
    h << "</g>\n";
  }
  h << "</svg>\n<table id=\"cycles\"><tr><th>stage</th><th>IPU</th><th>compute</th><th>exchange</th><th>sync</th><th>host</th>"
       "<th>total</th></tr>\n";
  for (const auto& s : pic.stages)
    h << "<tr><td>" << s.stage << "</td><td>" << s.ipu << "</td><td>" << s.compute << "</td><td>" << s.exchange << "</td><td>"
      << s.sync << "</td><td>" << s.host << "</td><td>" << s.compute + s.exchange + s.sync + s.host << "</td></tr>\n";
  h << "</table>\n";

  // (b) Tile-memory maps.
  const std::uint32_t cols = 64, cell = 8;
  const std::uint32_t grid_rows = (a.tiles_per_ipu + cols - 1) / cols;
  const auto cap = a.sram_bytes_per_tile;
  // One colour scale for all IPUs: red is the fullest tile of the device (a tile a few percent full
  // would be white on a scale of the whole tile).
  std::uint64_t fullest = 1;
  for (const auto& map : pic.tiles)
    for (auto b : map.bytes) fullest = std::max(fullest, b);
  h << "<h2>Tile memory</h2>\n<p>Each square is a tile (" << a.tiles_per_ipu << " per IPU, " << bytes_text(cap)
    << " each), coloured by the bytes of the tensors placed on it over the whole step: white empty, yellow half "
       "and red all of the fullest tile's " << bytes_text(fullest) << " ("
    << fixed(100.0 * static_cast<double>(fullest) / static_cast<double>(std::max<std::uint64_t>(cap, 1)), 1)
    << "% of a tile), purple over a tile's memory; hover for a tile's bytes. Activations are counted for the whole step and op temporaries and vertex state "
       "are not placed per tile, so the plan's own figures (peak liveness, temporaries, code) are given beside "
       "each map.</p>\n";
  for (const auto& map : pic.tiles) {
    std::uint64_t placed = 0;
    for (auto b : map.bytes) placed += b;
    h << "<h3>IPU " << map.ipu << "</h3>\n<p>placed tensors " << bytes_text(placed);
    for (const auto& m : e.memory)
      if (m.ipu == map.ipu)
        h << "; plan: " << bytes_text(m.total_bytes) << " in all, worst tile " << m.worst_tile << " with "
          << bytes_text(m.worst_tile_bytes);
    h << "</p>\n<svg class=\"tiles\" data-ipu=\"" << map.ipu << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << cols * cell
      << "\" height=\"" << grid_rows * cell << "\">\n";
    for (std::uint32_t t = 0; t < map.bytes.size(); ++t)
      h << "<rect class=\"tile\" data-tile=\"" << t << "\" data-bytes=\"" << map.bytes[t] << "\" x=\"" << (t % cols) * cell
        << "\" y=\"" << (t / cols) * cell << "\" width=\"" << cell - 1 << "\" height=\"" << cell - 1 << "\" fill=\""
        << detail::report::heat(map.bytes[t], fullest, cap)
        << "\"/>\n";
    h << "</svg>\n<table class=\"worst\"><tr><th>tile</th><th>bytes</th><th>of the tile</th><th>variables</th><th>constants</th><th>activations</th><th class=\"n\">largest tensors</th></tr>\n";
    for (const auto& wt : map.worst) {
      h << "<tr><td>" << wt.tile << "</td><td>" << bytes_text(wt.bytes) << "</td><td>"
        << fixed(100.0 * static_cast<double>(wt.bytes) / static_cast<double>(std::max<std::uint64_t>(cap, 1)), 1)
        << "%</td><td>" << bytes_text(wt.by_kind.bytes(memory_kind::variable)) << "</td><td>"
        << bytes_text(wt.by_kind.bytes(memory_kind::constant)) << "</td><td>"
        << bytes_text(wt.by_kind.bytes(memory_kind::activation)) << "</td><td class=\"n\">";
      for (std::size_t k = 0; k < wt.tensors.size(); ++k)
        h << (k ? ", " : "") << "<code>" << html_escape(wt.tensors[k].first) << "</code> " << bytes_text(wt.tensors[k].second);
      h << "</td></tr>\n";
    }
    h << "</table>\n";
  }

  h << "<div id=\"tip\"></div>\n"
    // Hovering a tile shows its number and bytes (read from its data attributes: numbers only).
    << "<script>(function(){var tip=document.getElementById('tip');document.querySelectorAll('svg.tiles').forEach("
       "function(s){s.addEventListener('mousemove',function(ev){var t=ev.target;if(!t.classList.contains('tile')){"
       "tip.style.display='none';return;}tip.textContent='IPU '+s.dataset.ipu+', tile '+t.dataset.tile+': '+"
       "t.dataset.bytes+' bytes';tip.style.left=(ev.clientX+12)+'px';tip.style.top=(ev.clientY+12)+'px';"
       "tip.style.display='block';});s.addEventListener('mouseleave',function(){tip.style.display='none';});});"
       "document.body.dataset.ready='1';})();</script>\n</body></html>\n";
  return h.str();
}

}  // namespace ipu
