#pragma once
// A model: the blobs of one executable linked by name — its metadata, the tensor data and feed
// data of its anchors, its opaque blobs — gathered from a reader's files.
//
//   ipu::popef::reader r;
//   r.parse_file("model.popef").parse_file("weights.popef");
//   ipu::popef::model m = ipu::popef::model_builder(r).create_model();
//
// Links are checked across everything the reader holds, so a broken file is reported whatever
// model is asked for: executable names are unique; every metadata names an existing executable and
// each executable has at most one; tensor and feed data names are unique and each matches an anchor
// of some metadata, with the anchor's type and shape; opaque blobs name an existing executable.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/popef/metadata.hpp"
#include "ipu/popef/reader.hpp"

namespace ipu::popef {

struct model {
  executable_blob executable;
  metadata_blob metadata;
  std::vector<tensor_blob> tensors;  // TensorData of the metadata's anchors
  std::vector<tensor_blob> feeds;    // FeedData of the metadata's anchors
  std::vector<opaque_blob> opaque;   // opaque blobs naming the executable

  [[nodiscard]] const tensor_blob* find_tensor(std::string_view anchor) const noexcept {
    for (const auto& t : tensors)
      if (t.name == anchor) return &t;
    return nullptr;
  }
  [[nodiscard]] const tensor_blob* find_feed(std::string_view anchor) const noexcept {
    for (const auto& t : feeds)
      if (t.name == anchor) return &t;
    return nullptr;
  }
  [[nodiscard]] const opaque_blob* find_opaque(std::string_view name) const noexcept {
    for (const auto& o : opaque)
      if (o.name == name) return &o;
    return nullptr;
  }
};

class model_builder {
 public:
  /// Checks the links between all the reader's blobs; throws ipu::error (popef) for a duplicate
  /// or dangling one. The reader must outlive the builder.
  explicit model_builder(const reader& r) : reader_(r) { check_links(); }

  /// Executables that have metadata, in file order: the models this reader can make.
  [[nodiscard]] std::vector<std::string> model_names() const {
    std::vector<std::string> out;
    for (const auto& m : reader_.metadata()) out.push_back(m.value.executable);
    return out;
  }

  /// The model of `executable`; empty: the only one there is.
  [[nodiscard]] model create_model(std::string_view executable = {}) const {
    const auto names = model_names();
    if (executable.empty()) {
      if (names.size() != 1)
        throw error(error_category::popef,
                    names.empty() ? std::string("no model: the input has no Metadata blob")
                                  : "the input holds " + std::to_string(names.size()) + " models: " + join(names),
                    sources(), names.empty() ? "add the file holding the metadata" : "name the executable to load");
      executable = names.front();
    }
    const metadata_blob* meta = nullptr;
    for (const auto& m : reader_.metadata())
      if (m.value.executable == executable) meta = &m;
    if (!meta)
      throw error(error_category::popef, "no metadata for executable '" + std::string(executable) + "'", sources(),
                  names.empty() ? std::string("add the file holding the metadata")
                                : "the models here are: " + join(names));
    model out;
    for (const auto& e : reader_.executables())
      if (e.name == executable) out.executable = e;
    out.metadata = *meta;
    for (const auto& t : reader_.tensors())
      if (meta->value.find_anchor(t.name)) out.tensors.push_back(t);
    for (const auto& t : reader_.feeds())
      if (meta->value.find_anchor(t.name)) out.feeds.push_back(t);
    for (const auto& o : reader_.opaque_blobs())
      if (o.executable == executable) out.opaque.push_back(o);
    return out;
  }

 private:
  [[nodiscard]] std::string sources() const {
    std::string s;
    for (const auto& src : reader_.sources()) s += (s.empty() ? "" : ", ") + src.name;
    return s.empty() ? std::string("no sources") : s;
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "'" : ", '") + x + "'";
    return s;
  }
  [[noreturn]] static void fail(const std::string& what, const std::string& where, const std::string& hint) {
    throw error(error_category::popef, what, where, hint);
  }

  void check_links() const {
    std::map<std::string, const executable_blob*, std::less<>> executables;
    for (const auto& e : reader_.executables())
      if (auto [it, fresh] = executables.emplace(e.name, &e); !fresh)
        fail("executable '" + e.name + "' is defined twice (also at " + it->second->blob.location + ")", e.blob.location,
             "executable names must be unique: drop one of the files, or export one under another name");
    std::map<std::string, const metadata_blob*, std::less<>> metadata;
    for (const auto& m : reader_.metadata()) {
      const auto& name = m.value.executable;
      if (!executables.count(name))
        fail("the metadata names executable '" + name + "', which no Executable blob defines", m.blob.location,
             "add the file holding the executable");
      if (auto [it, fresh] = metadata.emplace(name, &m); !fresh)
        fail("executable '" + name + "' has two metadata blobs (also at " + it->second->blob.location + ")",
             m.blob.location, "keep one metadata blob per executable");
    }
    auto check_data = [&](const std::vector<tensor_blob>& blobs, const char* kind) {
      std::map<std::string, const tensor_blob*, std::less<>> seen;
      for (const auto& t : blobs) {
        if (auto [it, fresh] = seen.emplace(t.name, &t); !fresh)
          fail(std::string(kind) + " '" + t.name + "' is defined twice (also at " + it->second->blob.location + ")",
               t.blob.location, "tensor names must be unique: drop one of the files");
        const anchor* a = nullptr;
        for (const auto& m : reader_.metadata())
          if (const auto* found = m.value.find_anchor(t.name)) {
            a = found;
            if (a->info != t.info)
              fail(std::string(kind) + " '" + t.name + "' is " + to_string(t.info) + " but its anchor in the metadata of '" +
                       m.value.executable + "' is " + to_string(a->info),
                   t.blob.location, "the data belongs to another model; export it again");
          }
        if (!a)
          fail(std::string(kind) + " '" + t.name + "' matches no anchor of any metadata", t.blob.location,
               "the data belongs to another model, or the metadata is missing; add the file holding it");
      }
    };
    check_data(reader_.tensors(), "TensorData");
    check_data(reader_.feeds(), "FeedData");
    for (const auto& o : reader_.opaque_blobs())
      if (!executables.count(o.executable))
        fail("opaque blob '" + o.name + "' names executable '" + o.executable + "', which no Executable blob defines",
             o.blob.location, "add the file holding the executable");
  }

  const reader& reader_;
};

}  // namespace ipu::popef
