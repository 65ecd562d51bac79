#pragma once
// Reading and writing ONNX protobuf messages with errors a user can act on.
//
// Protobuf happily "parses" many corrupt inputs and says nothing useful when it cannot, so every
// entry point checks the things that go wrong in practice first: a missing or empty file, a file
// over protobuf's 2 GB limit for one message, and bytes that are not the expected message.
#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/message.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "ipu/error.hpp"
#include "ipu/file.hpp"

namespace ipu::onnx {

/// Protobuf refuses to parse or write a single message larger than this.
inline constexpr std::uint64_t max_protobuf_bytes = INT_MAX;

namespace detail {

/// Collapses a multi-line message (ONNX's checker adds "==> Context:" paragraphs) into one line.
inline std::string single_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool space = false;
  for (char c : s) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

inline std::string size_text(std::uint64_t bytes) {
  return std::to_string(bytes) + " bytes (" + std::to_string(bytes >> 20) + " MiB)";
}

inline error too_big(std::uint64_t bytes, std::string_view where) {
  return error(error_category::onnx,
               "the message is " + size_text(bytes) + ", over protobuf's 2 GB limit for a single message",
               std::string(where),
               "store the weights as external data (onnx.save_model(model, path, save_as_external_data=True))");
}


/// Protobuf stops parsing messages nested deeper than this (its default); an ONNX subgraph costs
/// three levels (node, attribute, graph), so about 30 levels of If / Loop / Scan bodies.
inline constexpr int protobuf_depth_limit = 100;

/// Why a parse failed: bytes that parse with a deeper limit were refused for their nesting alone.
/// (The retry's limit stays small: the parser recurses once per level.)
inline std::string parse_failure(google::protobuf::Message& msg, google::protobuf::io::CodedInputStream& retry,
                                 std::string_view what) {
  retry.SetRecursionLimit(protobuf_depth_limit * 10);
  msg.Clear();
  if (msg.ParseFromCodedStream(&retry) && retry.ConsumedEntireMessage())
    return "the " + std::string(what) + " nests messages deeper than protobuf's limit of " +
           std::to_string(protobuf_depth_limit) + " (subgraphs inside subgraphs, about " +
           std::to_string(protobuf_depth_limit / 3) + " levels)";
  return "the bytes are not a serialized " + std::string(what) + " (truncated or corrupt)";
}

}  // namespace detail

/// Parses `bytes` into `msg`. `what` names the message kind in errors ("ONNX model"), `where` says
/// where the bytes came from.
inline void parse_proto(google::protobuf::Message& msg, std::string_view bytes, std::string_view what,
                        std::string_view where = "bytes") {
  if (bytes.empty())
    throw error(error_category::onnx, "no bytes to parse: an empty " + std::string(what) + " is not valid",
                std::string(where), "pass the serialized " + std::string(what));
  if (bytes.size() > max_protobuf_bytes) throw detail::too_big(bytes.size(), where);
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  if (!msg.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    google::protobuf::io::CodedInputStream retry(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                                 static_cast<int>(bytes.size()));
    const auto why = detail::parse_failure(msg, retry, what);
    msg.Clear();
    throw error(error_category::onnx, why, std::string(where),
                "check that this is a complete " + std::string(what) + " file, with subgraphs nested less deeply");
  }
}

/// Reads a file into `msg`, streaming (the file is never held twice in memory).
inline void read_proto_file(google::protobuf::Message& msg, const std::filesystem::path& path, std::string_view what) {
  const auto file = open_regular_file(path, std::string(what) + " file");
  if (file.size() > max_protobuf_bytes) throw detail::too_big(file.size(), path.string());
  if (file.size() == 0)
    throw error(error_category::onnx, std::string(what) + " file is empty", path.string(),
                "the file was probably not written completely; export it again");
  bool ok = false;
  {
    google::protobuf::io::FileInputStream stream(file.fd());
    google::protobuf::io::CodedInputStream in(&stream);
    ok = msg.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
  }
  if (!ok) {
    std::string why = "the file is not a serialized " + std::string(what) + " (truncated or corrupt)";
    if (::lseek(file.fd(), 0, SEEK_SET) == 0) {
      google::protobuf::io::FileInputStream stream(file.fd());
      google::protobuf::io::CodedInputStream retry(&stream);
      if (const auto w = detail::parse_failure(msg, retry, what); w.find("deeper") != std::string::npos) why = w;
    }
    msg.Clear();
    throw error(error_category::onnx, why, path.string(), "check that the file is complete; export it again if in doubt");
  }
}

/// Serializes `msg` (refusing messages over 2 GB, which protobuf cannot write).
inline std::string serialize_proto(const google::protobuf::Message& msg, std::string_view where) {
  const auto size = msg.ByteSizeLong();
  if (size > max_protobuf_bytes) throw detail::too_big(size, where);
  std::string out;
  if (!msg.SerializeToString(&out))
    throw error(error_category::internal, "protobuf failed to serialize the message", std::string(where));
  return out;
}

/// Writes `msg` to `path`, replacing it.
inline void write_proto_file(const google::protobuf::Message& msg, const std::filesystem::path& path) {
  const auto bytes = serialize_proto(msg, path.string());
  write_file_atomically(path, std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), "file");
}

}  // namespace ipu::onnx
