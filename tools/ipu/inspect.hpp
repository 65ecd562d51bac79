#pragma once
// `ipu inspect FILE.popef [FILE...]`: what PopEF files hold — every blob with its offset, size,
// type and name; skipped blobs; each model's metadata and anchors, with the tensor data bound to
// them. Checksums are verified, so a damaged file is reported (one error line, exit status 1).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/format.hpp"
#include "ipu/popef/model.hpp"
#include "ipu/popef/reader.hpp"
#include "json_output.hpp"

namespace ipu_cli {

struct inspect_args {
  std::vector<std::string> files;
  json_option json;
};

namespace inspect_detail {

template <class T>
std::string list(const std::vector<T>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace inspect_detail

inline void run_inspect(const inspect_args& a) {
  using inspect_detail::list;
  using nlohmann::json;
  std::vector<std::filesystem::path> inputs(a.files.begin(), a.files.end());
  report rep(a.json, inputs);
  auto& j = rep.json;
  j["files"] = json::array();
  ipu::popef::reader r;
  for (const auto& f : a.files) r.parse_file(f);

  for (std::size_t s = 0; s < r.sources().size(); ++s) {
    const auto& src = r.sources()[s];
    rep.printf("%s: %s bytes\n", src.name.c_str(), ipu::format_grouped(src.size).c_str());
    json fj = {{"name", src.name}, {"bytes", src.size}, {"blobs", json::array()}};
    rep.printf("  %-5s %14s %14s  %-10s %-24s %s\n", "blob", "offset", "size", "type", "name", "payload");
    for (const auto& b : r.blobs()) {
      if (b.source != s) continue;
      const std::string type = b.known() ? std::string(ipu::popef::to_string(b.type())) : "type " + std::to_string(b.header.type);
      std::string payload;
      if (b.known() && b.type() != ipu::popef::blob_type::metadata) {
        payload = ipu::format_grouped(b.payload_size) + " bytes at " + ipu::format_grouped(b.payload_offset);
        if (b.header.compressed()) payload += ", zlib from " + ipu::format_grouped(b.header.payload_raw_size);
      }
      if (!b.known()) payload = "skipped (unknown type)";
      json bj = {{"index", b.index}, {"offset", b.offset}, {"size", b.header.total_size}, {"type", type}, {"name", b.name},
                 {"known", b.known()}};
      if (b.known() && b.type() != ipu::popef::blob_type::metadata) {
        bj["payload_bytes"] = b.payload_size;
        bj["payload_offset"] = b.payload_offset;
        if (b.header.compressed()) bj["raw_bytes"] = b.header.payload_raw_size;
      }
      fj["blobs"].push_back(bj);
      rep.printf("  %-5zu %14s %14s  %-10s %-24s %s\n", b.index, ipu::format_grouped(b.offset).c_str(),
                  ipu::format_grouped(b.header.total_size).c_str(), type.c_str(), b.name.c_str(), payload.c_str());
    }
    j["files"].push_back(fj);
  }
  for (const auto& n : r.notes()) rep.printf("note: %s\n", n.c_str());
  j["notes"] = r.notes();
  j["models"] = json::array();

  const ipu::popef::model_builder builder(r);
  for (const auto& name : builder.model_names()) {
    const auto m = builder.create_model(name);
    const auto& md = m.metadata.value;
    json mj = {{"name", name},
               {"ipu_version", md.ipu_version},
               {"ipus", md.num_ipus},
               {"replication_factor", md.replication_factor},
               {"processes", md.num_processes},
               {"pod", md.is_pod},
               {"inference", md.is_inference},
               {"device_iterations", md.device_iterations},
               {"program_flow", {{"load", md.flow.load}, {"main", md.flow.main}, {"save", md.flow.save}}},
               {"programs", json::array()},
               {"anchors", json::array()}};
    for (const auto& [i, pn] : md.programs) mj["programs"].push_back({{"index", i}, {"name", pn}});
    if (!md.seed_handle.empty()) mj["seed_handle"] = md.seed_handle;
    rep.printf("\nmodel '%s'\n", name.c_str());
    rep.printf("  ipu version %s, %u IPUs, replication %u, %u processes%s, %s, %ju device iterations\n",
                md.ipu_version.c_str(), md.num_ipus, md.replication_factor, md.num_processes, md.is_pod ? " (POD)" : "",
                md.is_inference ? "inference" : "training", static_cast<std::uintmax_t>(md.device_iterations));
    rep.printf("  program flow: load %s, main %s, save %s\n", list(md.flow.load).c_str(), list(md.flow.main).c_str(),
                list(md.flow.save).c_str());
    std::string programs;
    for (const auto& [i, pn] : md.programs) programs += (programs.empty() ? "" : ", ") + std::to_string(i) + " " + pn;
    rep.printf("  programs: %s\n", programs.c_str());
    if (!md.seed_handle.empty()) rep.printf("  seed handle: %s\n", md.seed_handle.c_str());
    std::uint64_t tensor_bytes = 0;
    rep.printf("  anchors (%zu):\n", md.anchors.size());
    for (const auto& an : md.anchors) {
      std::string data;
      json aj = {{"type", std::string(ipu::popef::to_string(an.type))}, {"name", an.name}, {"tensor", ipu::to_string(an.info)},
                 {"handle", an.handle}, {"programs", an.programs}, {"per_replica", an.is_per_replica}};
      if (const auto* t = m.find_tensor(an.name)) {
        data = "  TensorData " + ipu::format_grouped(t->data.size()) + " bytes";
        tensor_bytes += t->data.size();
        aj["tensor_data_bytes"] = t->data.size();
      } else if (const auto* f = m.find_feed(an.name)) {
        data = "  FeedData " + ipu::format_grouped(f->data.size()) + " bytes";
        aj["feed_data_bytes"] = f->data.size();
      }
      mj["anchors"].push_back(aj);
      rep.printf("    %-7s %-28s %-22s handle %-20s programs %s%s%s\n", std::string(ipu::popef::to_string(an.type)).c_str(),
                  an.name.c_str(), ipu::to_string(an.info).c_str(), an.handle.c_str(), list(an.programs).c_str(),
                  an.is_per_replica ? " per-replica" : "", data.c_str());
    }
    rep.printf("  tensor data: %zu tensors, %s bytes\n", m.tensors.size(), ipu::format_grouped(tensor_bytes).c_str());
    mj["tensor_data"] = {{"tensors", m.tensors.size()}, {"bytes", tensor_bytes}};
    mj["engine_options"] = md.engine_options;
    mj["device_options"] = md.device_options;
    mj["opaque"] = json::array();
    for (const auto& o : m.opaque) mj["opaque"].push_back({{"name", o.name}, {"bytes", o.payload.size()}});
    j["models"].push_back(mj);
    for (const auto& [k, v] : md.engine_options) {
      std::string one_line = v;
      for (auto& c : one_line)
        if (c == '\n') c = ';';
      rep.printf("  engine option %s = %s\n", k.c_str(), one_line.c_str());
    }
    for (const auto& [k, v] : md.device_options) rep.printf("  device option %s = %s\n", k.c_str(), v.c_str());
    for (const auto& o : m.opaque) rep.printf("  opaque '%s': %s bytes\n", o.name.c_str(), ipu::format_grouped(o.payload.size()).c_str());
  }
  rep.finish();
}

/// Adds the `inspect` subcommand to the tool.
inline void add_inspect_command(CLI::App& app) {
  auto a = std::make_shared<inspect_args>();
  auto* cmd = app.add_subcommand("inspect", "list the blobs, metadata and anchors of PopEF files");
  cmd->add_option("files", a->files, "PopEF files (several form one set of models)")->required();
  add_json_option(*cmd, a->json);
  cmd->callback([a] { run_inspect(*a); });  // errors reach main, which prints one line
}

}  // namespace ipu_cli
