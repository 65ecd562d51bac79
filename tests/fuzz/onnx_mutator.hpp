// A structure-aware libFuzzer mutator for ONNX models (libprotobuf-mutator is not in Debian).
// Byte-level mutations of a protobuf mostly break its framing, so the importer refuses them at the
// parse. This mutator parses the input as a ModelProto and edits it through protobuf's reflection:
// one field of one message anywhere in the model gets an interesting value (0, -1, 2^31, 2^63-1,
// NaN...), another name already in the model (so edges between nodes change), another ONNX op
// type, or loses, duplicates or swaps a repeated element. The result is serialised again, so it
// stays a well-formed model that reaches the checker, shape inference, folding and the kernels.
// One mutation in eight, and every input that does not parse, goes to libFuzzer's byte mutator.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

namespace onnx_mutator {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

/// Every message of the tree under `m` (depth-first, `m` first).
inline void collect_messages(Message& m, std::vector<Message*>& out) {
  out.push_back(&m);
  const Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, f); ++i) collect_messages(*r->MutableRepeatedMessage(&m, f, i), out);
    } else {
      collect_messages(*r->MutableMessage(&m, f), out);
    }
  }
}

/// The tensor names a model uses: node inputs and outputs, graph inputs, outputs and initializers.
inline void collect_names(const onnx::GraphProto& g, std::vector<std::string>& out) {
  for (const auto& v : g.input()) out.push_back(v.name());
  for (const auto& v : g.output()) out.push_back(v.name());
  for (const auto& t : g.initializer()) out.push_back(t.name());
  for (const auto& n : g.node()) {
    out.insert(out.end(), n.input().begin(), n.input().end());
    out.insert(out.end(), n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_names(a.g(), out);
      for (const auto& sub : a.graphs()) collect_names(sub, out);
    }
  }
}

inline const std::vector<std::string>& op_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> t;
    for (const auto& s : onnx::OpSchemaRegistry::get_all_schemas())
      if (s.domain().empty()) t.push_back(s.Name());
    return t;
  }();
  return types;
}

template <class Rng>
std::int64_t interesting_int(Rng& rng, std::int64_t current) {
  static constexpr std::int64_t values[] = {0, 1, -1, 2, 3, 4, 7, 8, 16, 255, 256, 65535, 1 << 20,
                                            std::int64_t{1} << 31, (std::int64_t{1} << 31) - 1, std::int64_t{1} << 32,
                                            std::int64_t{1} << 62, std::numeric_limits<std::int64_t>::max(),
                                            std::numeric_limits<std::int64_t>::min(), -2, -(std::int64_t{1} << 31)};
  switch (rng() % 3) {
    case 0: return values[rng() % std::size(values)];
    case 1: return static_cast<std::int64_t>(static_cast<std::uint64_t>(current) + (rng() % 2 ? 1 : -1));
    default: return static_cast<std::int64_t>(rng() % 64) - 8;
  }
}

template <class Rng>
double interesting_float(Rng& rng) {
  static constexpr double values[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1e-45, 1e30, -1e30, 3.4e38,
                                      std::numeric_limits<double>::infinity(),
                                      -std::numeric_limits<double>::infinity(),
                                      std::numeric_limits<double>::quiet_NaN()};
  return values[rng() % std::size(values)];
}

template <class Rng>
std::string mutated_string(Rng& rng, const std::string& current, const std::vector<std::string>& names,
                           const FieldDescriptor* f) {
  if (f->name() == "op_type" && rng() % 2) return op_types()[rng() % op_types().size()];
  if (!names.empty() && rng() % 3) return names[rng() % names.size()];
  if (rng() % 4 == 0) return {};
  std::string s = current;
  s.resize(s.size() + 8);
  const auto n = LLVMFuzzerMutate(reinterpret_cast<std::uint8_t*>(s.data()), current.size(), s.size());
  s.resize(n);
  return s;
}

/// Sets one scalar field (singular, or element `i` of a repeated one) to an interesting value.
template <class Rng>
void mutate_scalar(Message& m, const FieldDescriptor* f, int i, Rng& rng, const std::vector<std::string>& names) {
  const Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      const auto v = static_cast<std::int32_t>(interesting_int(rng, rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f)));
      rep ? r->SetRepeatedInt32(&m, f, i, v) : r->SetInt32(&m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      const auto v = interesting_int(rng, rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f));
      rep ? r->SetRepeatedInt64(&m, f, i, v) : r->SetInt64(&m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      const auto v = static_cast<std::uint32_t>(interesting_int(rng, 0));
      rep ? r->SetRepeatedUInt32(&m, f, i, v) : r->SetUInt32(&m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      const auto v = static_cast<std::uint64_t>(interesting_int(rng, 0));
      rep ? r->SetRepeatedUInt64(&m, f, i, v) : r->SetUInt64(&m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const auto v = static_cast<float>(interesting_float(rng));
      rep ? r->SetRepeatedFloat(&m, f, i, v) : r->SetFloat(&m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      const auto v = interesting_float(rng);
      rep ? r->SetRepeatedDouble(&m, f, i, v) : r->SetDouble(&m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      const bool v = !(rep ? r->GetRepeatedBool(m, f, i) : r->GetBool(m, f));
      rep ? r->SetRepeatedBool(&m, f, i, v) : r->SetBool(&m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* e = f->enum_type();
      const int v = e->value(static_cast<int>(rng() % static_cast<unsigned>(e->value_count())))->number();
      rep ? r->SetRepeatedEnumValue(&m, f, i, v) : r->SetEnumValue(&m, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      auto v = mutated_string(rng, rep ? r->GetRepeatedString(m, f, i) : r->GetString(m, f), names, f);
      rep ? r->SetRepeatedString(&m, f, i, std::move(v)) : r->SetString(&m, f, std::move(v));
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: break;
  }
}

/// Adds one element to a repeated field: a copy of an existing one, or a fresh interesting value.
template <class Rng>
void grow(Message& m, const FieldDescriptor* f, Rng& rng, const std::vector<std::string>& names) {
  const Reflection* r = m.GetReflection();
  const int n = r->FieldSize(m, f);
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE:
      if (n > 0) r->AddMessage(&m, f)->CopyFrom(r->GetRepeatedMessage(m, f, static_cast<int>(rng() % static_cast<unsigned>(n))));
      else r->AddMessage(&m, f);
      return;
    case FieldDescriptor::CPPTYPE_INT32: r->AddInt32(&m, f, 0); break;
    case FieldDescriptor::CPPTYPE_INT64: r->AddInt64(&m, f, 0); break;
    case FieldDescriptor::CPPTYPE_UINT32: r->AddUInt32(&m, f, 0); break;
    case FieldDescriptor::CPPTYPE_UINT64: r->AddUInt64(&m, f, 0); break;
    case FieldDescriptor::CPPTYPE_FLOAT: r->AddFloat(&m, f, 0); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: r->AddDouble(&m, f, 0); break;
    case FieldDescriptor::CPPTYPE_BOOL: r->AddBool(&m, f, false); break;
    case FieldDescriptor::CPPTYPE_ENUM: r->AddEnumValue(&m, f, 0); break;
    case FieldDescriptor::CPPTYPE_STRING: r->AddString(&m, f, {}); break;
  }
  mutate_scalar(m, f, n, rng, names);
}

/// One edit of the model.
template <class Rng>
void mutate(onnx::ModelProto& model, Rng& rng) {
  std::vector<std::string> names;
  collect_names(model.graph(), names);
  std::vector<Message*> messages;
  collect_messages(model, messages);
  Message& m = *messages[rng() % messages.size()];
  const auto* d = m.GetDescriptor();
  if (d->field_count() == 0) return;
  const FieldDescriptor* f = d->field(static_cast<int>(rng() % static_cast<unsigned>(d->field_count())));
  const Reflection* r = m.GetReflection();
  if (!f->is_repeated()) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (rng() % 4 == 0) r->ClearField(&m, f);
      else r->MutableMessage(&m, f);  // present, perhaps empty: the next mutation may fill it
    } else if (rng() % 8 == 0) {
      r->ClearField(&m, f);
    } else {
      mutate_scalar(m, f, 0, rng, names);
    }
    return;
  }
  const int n = r->FieldSize(m, f);
  switch (n == 0 ? 0 : rng() % 4) {
    case 0: grow(m, f, rng, names); break;
    case 1: r->SwapElements(&m, f, static_cast<int>(rng() % static_cast<unsigned>(n)), n - 1); r->RemoveLast(&m, f); break;
    case 2: r->SwapElements(&m, f, static_cast<int>(rng() % static_cast<unsigned>(n)), static_cast<int>(rng() % static_cast<unsigned>(n))); break;
    default:
      if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE)
        mutate_scalar(m, f, static_cast<int>(rng() % static_cast<unsigned>(n)), rng, names);
      break;
  }
}

}  // namespace onnx_mutator

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                               unsigned int seed) {
  std::minstd_rand rng(seed);
  onnx::ModelProto model;
  if (rng() % 8 == 0 || !model.ParseFromArray(data, static_cast<int>(size))) return LLVMFuzzerMutate(data, size, max_size);
  for (unsigned edits = 1 + rng() % 3; edits > 0; --edits) onnx_mutator::mutate(model, rng);
  std::string out;
  if (!model.SerializeToString(&out) || out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
