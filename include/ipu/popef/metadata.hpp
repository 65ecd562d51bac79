#pragma once
// PopEF metadata as plain C++ values — anchors, program flow, device and replication figures — and
// their protobuf encoding (the info message of a Metadata blob).
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "ipu/data_type.hpp"
#include "ipu/error.hpp"
#include "ipu/popef/format.hpp"
#include "ipu/popef/popef.pb.h"
#include "ipu/sched/executable.hpp"
#include "ipu/tensor_info.hpp"

namespace ipu::popef {

enum class anchor_type : std::uint8_t { unknown, input, output };

/// "UNKNOWN", "INPUT", "OUTPUT".
constexpr std::string_view to_string(anchor_type t) noexcept {
  switch (t) {
    case anchor_type::unknown: return "UNKNOWN";
    case anchor_type::input: return "INPUT";
    case anchor_type::output: return "OUTPUT";
  }
  return "?";
}

/// A tensor the host exchanges with the executable: an input, an output, or a weight loaded by
/// the load program.
struct anchor {
  std::string name;    // the tensor's name in the model
  std::string handle;  // the host stream carrying it
  tensor_info info;    // per replica, per micro-batch
  bool is_per_replica = false;
  anchor_type type = anchor_type::unknown;
  std::vector<std::uint32_t> programs;  // programs that use it (PopART numbering)
  friend bool operator==(const anchor&, const anchor&) = default;
};

/// A custom op (ops/custom_ops.hpp) the executable runs: loading it needs the op registered.
struct custom_op_use {
  std::string domain, type;
  std::int64_t version = 1;
  friend bool operator==(const custom_op_use&, const custom_op_use&) = default;
};

struct metadata {
  std::string executable;  // the Executable blob it describes
  std::vector<anchor> anchors;
  ipu::program_flow flow;
  std::map<std::uint32_t, std::string> programs;  // program index -> name
  std::uint32_t replication_factor = 1;
  std::uint32_t num_ipus = 1;  // IPUs the executable reserves
  std::string ipu_version;     // "ipu1", "ipu2", "ipu21", "cpu"
  bool is_pod = false;
  std::uint32_t num_processes = 1;
  bool is_inference = true;
  std::uint64_t device_iterations = 1;  // batches per step (x gradient accumulation when training)
  std::string seed_handle;              // empty: no seed stream
  std::map<std::string, std::string> engine_options;
  std::map<std::string, std::string> device_options;
  std::vector<custom_op_use> custom_ops;  // written by write_model (compiled_model.hpp)

  [[nodiscard]] const anchor* find_anchor(std::string_view name) const noexcept {
    for (const auto& a : anchors)
      if (a.name == name) return &a;
    return nullptr;
  }
  friend bool operator==(const metadata&, const metadata&) = default;
};

/// The engine option holding the seed of the model's random ops (PopTorch's randomSeed), which
/// `ipu compile` writes when its options set one; the runtime seeds every device with it.
inline constexpr std::string_view random_seed_option = "ipu.random_seed";

/// The seed `m`'s engine options give, or nullopt when they give none. Throws ipu::error for a value
/// that is not a decimal number below 2^64.
inline std::optional<std::uint64_t> random_seed(const metadata& m, const std::string& where = "PopEF metadata") {
  const auto it = m.engine_options.find(std::string(random_seed_option));
  if (it == m.engine_options.end()) return std::nullopt;
  const auto& v = it->second;
  std::uint64_t seed = 0;
  bool ok = !v.empty() && v.size() <= 20;
  for (const char ch : v) {
    if (!ok) break;
    const auto digit = static_cast<std::uint64_t>(ch - '0');
    ok = ch >= '0' && ch <= '9' && seed <= (~std::uint64_t{0} - digit) / 10;
    seed = seed * 10 + digit;
  }
  if (!ok)
    throw error(error_category::popef, "engine option " + std::string(random_seed_option) + " is '" + v.substr(0, 40) +
                                           "', not a seed (a decimal number below 2^64)",
                where, "the file is damaged; compile the model again");
  return seed;
}

namespace detail {

/// Parses a protobuf message from bytes that must stay below protobuf's 2 GB limit.
template <class Message>
void parse_message(Message& m, std::span<const std::byte> bytes, std::string_view what, const std::string& where) {
  if (bytes.size() > max_message_size)
    throw error(error_category::popef,
                std::string(what) + " is " + std::to_string(bytes.size()) + " bytes, over protobuf's 2 GB message limit",
                where, "the file is damaged; export it again");
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw error(error_category::popef, std::string(what) + " does not parse as a protobuf message", where,
                "the file is damaged or was not written by ipu; export it again");
}

/// Serializes deterministically (same value, same bytes), refusing messages over 2 GB.
template <class Message>
std::string serialize_message(const Message& m, std::string_view what) {
  const auto size = m.ByteSizeLong();
  if (size > max_message_size)
    throw error(error_category::popef,
                std::string(what) + " would be " + std::to_string(size) + " bytes, over protobuf's 2 GB message limit",
                {}, "keep large tensors in TensorData blobs; they have no size limit");
  std::string out;
  out.resize(size);
  google::protobuf::io::ArrayOutputStream array(out.data(), static_cast<int>(size));
  google::protobuf::io::CodedOutputStream coded(&array);
  coded.SetSerializationDeterministic(true);
  m.SerializeWithCachedSizes(&coded);
  if (coded.HadError())
    throw error(error_category::internal, "serializing " + std::string(what) + " failed");
  return out;
}

inline pb::DataType to_proto(data_type t) noexcept { return static_cast<pb::DataType>(static_cast<int>(t) + 1); }

inline data_type data_type_from_proto(int v, const std::string& what, const std::string& where) {
  if (v < 1 || v > static_cast<int>(std::size(all_data_types)))
    throw error(error_category::popef, what + " has " + (v == 0 ? std::string("no data type") : "unknown data type " + std::to_string(v)),
                where, "the file is damaged or was written by a newer ipu");
  // STRING's elements are addresses; an executable never holds strings (compile refuses them).
  if (all_data_types[static_cast<std::size_t>(v - 1)] == data_type::STRING)
    throw error(error_category::popef, what + " has element type STRING, which PopEF files do not carry", where,
                "the file is damaged or was not written by ipu");
  return all_data_types[static_cast<std::size_t>(v - 1)];
}

inline void to_proto(const tensor_info& info, pb::TensorInfo& out) {
  out.set_data_type(to_proto(info.type));
  out.clear_shape();
  for (auto d : info.shape) out.add_shape(d);
}

/// Bytes of `info`, refusing negative dimensions and sizes over 2^62 so corrupt shapes cannot
/// overflow.
inline tensor_info tensor_info_from_proto(const pb::TensorInfo& p, const std::string& what, const std::string& where) {
  tensor_info info;
  info.type = data_type_from_proto(p.data_type(), what, where);
  std::vector<std::int64_t> dims;
  dims.reserve(static_cast<std::size_t>(p.shape_size()));
  constexpr std::uint64_t limit = std::uint64_t{1} << 62;
  std::uint64_t bytes = size_of(info.type);
  for (auto d : p.shape()) {
    if (d < 0)
      throw error(error_category::popef, what + " has negative dimension " + std::to_string(d), where,
                  "the file is damaged; export it again");
    if (d != 0 && bytes > limit / static_cast<std::uint64_t>(d))
      throw error(error_category::popef, what + " is impossibly large (over 2^62 bytes)", where,
                  "the file is damaged; export it again");
    bytes *= static_cast<std::uint64_t>(d);
    dims.push_back(d);
  }
  info.shape = ipu::shape(std::move(dims));
  return info;
}

inline void to_proto(const ipu::program_flow& f, pb::ProgramFlow& out) {
  for (auto p : f.load) out.add_load(p);
  for (auto p : f.main) out.add_main(p);
  for (auto p : f.save) out.add_save(p);
}

inline ipu::program_flow program_flow_from_proto(const pb::ProgramFlow& p) {
  ipu::program_flow f;
  f.load.assign(p.load().begin(), p.load().end());
  f.main.assign(p.main().begin(), p.main().end());
  f.save.assign(p.save().begin(), p.save().end());
  return f;
}

}  // namespace detail

inline pb::Metadata to_proto(const metadata& m) {
  pb::Metadata p;
  p.set_executable(m.executable);
  for (const auto& a : m.anchors) {
    auto* pa = p.add_anchors();
    pa->set_name(a.name);
    pa->set_handle(a.handle);
    detail::to_proto(a.info, *pa->mutable_info());
    pa->set_is_per_replica(a.is_per_replica);
    pa->set_type(a.type == anchor_type::input    ? pb::INPUT
                 : a.type == anchor_type::output ? pb::OUTPUT
                                                 : pb::ANCHOR_UNKNOWN);
    for (auto prog : a.programs) pa->add_programs(prog);
  }
  detail::to_proto(m.flow, *p.mutable_program_flow());
  for (const auto& [i, name] : m.programs) {
    auto* pn = p.add_programs();
    pn->set_index(i);
    pn->set_name(name);
  }
  p.set_replication_factor(m.replication_factor);
  p.set_num_ipus(m.num_ipus);
  p.set_ipu_version(m.ipu_version);
  p.set_is_pod(m.is_pod);
  p.set_num_processes(m.num_processes);
  p.set_is_inference(m.is_inference);
  p.set_device_iterations(m.device_iterations);
  p.set_seed_handle(m.seed_handle);
  for (const auto& [k, v] : m.engine_options) {
    auto* o = p.add_engine_options();
    o->set_key(k);
    o->set_value(v);
  }
  for (const auto& [k, v] : m.device_options) {
    auto* o = p.add_device_options();
    o->set_key(k);
    o->set_value(v);
  }
  for (const auto& c : m.custom_ops) {
    auto* o = p.add_custom_ops();
    o->set_domain(c.domain);
    o->set_type(c.type);
    o->set_version(c.version);
  }
  return p;
}

/// Decodes and checks a Metadata message; `where` names the blob in errors.
inline metadata metadata_from_proto(const pb::Metadata& p, const std::string& where) {
  auto fail = [&](const std::string& what) -> void {
    throw error(error_category::popef, what, where, "the file is damaged or was not written by ipu; export it again");
  };
  metadata m;
  m.executable = p.executable();
  if (m.executable.empty()) fail("the metadata names no executable");
  for (int i = 0; i < p.anchors_size(); ++i) {
    const auto& pa = p.anchors(i);
    anchor a;
    a.name = pa.name();
    if (a.name.empty()) fail("anchor " + std::to_string(i) + " has no name");
    if (m.find_anchor(a.name)) fail("anchor '" + a.name + "' is listed twice");
    a.handle = pa.handle();
    a.info = detail::tensor_info_from_proto(pa.info(), "anchor '" + a.name + "'", where);
    a.is_per_replica = pa.is_per_replica();
    switch (pa.type()) {
      case pb::INPUT: a.type = anchor_type::input; break;
      case pb::OUTPUT: a.type = anchor_type::output; break;
      case pb::ANCHOR_UNKNOWN: a.type = anchor_type::unknown; break;
      default: fail("anchor '" + a.name + "' has unknown type " + std::to_string(pa.type()));
    }
    a.programs.assign(pa.programs().begin(), pa.programs().end());
    m.anchors.push_back(std::move(a));
  }
  m.flow = detail::program_flow_from_proto(p.program_flow());
  for (const auto& pn : p.programs())
    if (!m.programs.emplace(pn.index(), pn.name()).second) fail("program " + std::to_string(pn.index()) + " is named twice");
  m.replication_factor = p.replication_factor();
  m.num_ipus = p.num_ipus();
  if (m.replication_factor == 0) fail("the replication factor is 0");
  if (m.num_ipus == 0) fail("the IPU count is 0");
  m.ipu_version = p.ipu_version();
  m.is_pod = p.is_pod();
  m.num_processes = p.num_processes();
  if (m.num_processes == 0) fail("the process count is 0");
  m.is_inference = p.is_inference();
  m.device_iterations = p.device_iterations();
  if (m.device_iterations == 0) fail("device iterations is 0");
  m.seed_handle = p.seed_handle();
  for (const auto& o : p.engine_options())
    if (!m.engine_options.emplace(o.key(), o.value()).second) fail("engine option '" + o.key() + "' is given twice");
  (void)random_seed(m, where);  // refused at load, not at the first run
  for (const auto& o : p.device_options())
    if (!m.device_options.emplace(o.key(), o.value()).second) fail("device option '" + o.key() + "' is given twice");
  for (const auto& o : p.custom_ops()) {
    if (o.domain().empty() || o.type().empty() || o.version() < 1)
      fail("a custom op is listed without its domain, type or version (>= 1)");
    m.custom_ops.push_back({o.domain(), o.type(), o.version()});
  }
  return m;
}

}  // namespace ipu::popef
