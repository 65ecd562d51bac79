// ONNX backend node-test conformance: runs ONNX's own node tests on the CPU device.
//
// How to run it:
//   cmake --build build/dev --target ipu_conformance
//   ctest --test-dir build/dev -R conformance          # generates the tests, then runs them all
// or by hand:
//   /usr/bin/python3 tests/conformance/generate_node_tests.py /tmp/onnx-tests   # -> /tmp/onnx-tests/node
//   build/dev/tests/conformance/ipu_conformance /tmp/onnx-tests/node [/tmp/onnx-tests/simple]
//       --expected tests/conformance/expected_pass.txt [--filter relu] [--threads 2]
//   ... --update-expected    # rewrite the list with what passes now (only the filtered tests change)
//
// Several directories may be given: ONNX's small whole-model tests (simple/, e.g. the Gradient
// op's test_gradient_of_add) share the expected list with the node tests.
// Each test_*/model.onnx is imported, planned and run on every test_data_set_*/input_*.pb; each
// output must match output_*.pb in type and shape, and in value within ONNX's tolerances
// (|actual - expected| <= atol + rtol * |expected|, rtol 1e-3, atol 1e-7, NaN equal to NaN;
// integers and bools exactly; a BFLOAT16 output may also be one ulp above expected, see
// bf16_truncated). Each test also runs after the graph passes (passes/optimize.hpp),
// whose outputs must stay within 1e-5 of the largest |output| of the unoptimised graph's. A test is:
//   pass        - every data set matches,
//   unsupported - the importer declines the model or an op has no kernel (with the reason), or
//                 the model draws random numbers (Bernoulli, RandomNormal...): ONNX's expected
//                 values are numpy's draws, which no other generator reproduces, so only the
//                 outputs' types and shapes are checked (a mismatch there fails),
//   fail        - anything else: a wrong value, an error while running, a crash or a timeout.
// Tests run in forked children, so a crashing kernel fails one test, not the run. --no-fork runs
// them in this process, each named before it starts (a crash then ends the run after naming the
// test it was in): CTest runs it so, because under the sanitizers a fork costs about 0.3 s (ASan
// locks and copies its stack depot), twenty times the test; the whole suite took 260 s, not 13.
// Sequence and optional data (SequenceProto / OptionalProto files) are bound as the importer lowers
// them (ipu/onnx/sequences.hpp): a sequence input's element shapes and an empty optional go into
// import_options, and expected sequences are compared element by element. Dynamic input dimensions
// are fixed to the data's, as a user fixes them with --input-shape, and inputs whose values decide
// a shape or a sequence's structure (a Loop's trip count, an If's condition) are fixed to the
// data's values at import, as `ipu run` does (ipu/onnx/value_dependence.hpp).
// The exit status is non-zero when a test listed in the expected file does not pass; tests that
// pass without being listed are reported so the list can grow.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <onnx/onnx-data_pb.h>

#include "ipu/cpu/device.hpp"
#include "ipu/cpu/blas_tuning.hpp"
#include "ipu/bfloat16.hpp"
#include "ipu/half.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/proto.hpp"
#include "ipu/onnx/tensor.hpp"
#include "ipu/ops/op_table.hpp"
#include "ipu/passes/optimize.hpp"

namespace fs = std::filesystem;

namespace {

enum class outcome { pass, fail, unsupported };

struct result {
  outcome status = outcome::fail;
  std::string reason;
};

struct options {
  std::vector<fs::path> dirs;
  fs::path expected;
  std::string filter;
  bool update = false;
  bool fork = true;
  std::size_t threads = 1;
  int timeout_s = 120;
  double rtol = 1e-3, atol = 1e-7;
};

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\t', ' ');
  return s.size() > 400 ? s.substr(0, 400) + "..." : s;
}

std::uint16_t bf16_bits(const ipu::host_tensor& t, std::size_t i) {
  std::uint16_t b;
  std::memcpy(&b, t.data() + i * 2, 2);
  return b;
}

/// ONNX 1.12 made its expected BFLOAT16 values (test_cast_FLOAT_to_BFLOAT16 and the CastLike
/// tests) by truncating floats to their top 16 bits; Cast rounds to nearest even, as ONNX's spec
/// and later test data do. So a BF16 result one ulp above expected in magnitude, same sign, is the
/// rounding of a value ONNX truncated, and is accepted; nothing else is.
bool bf16_truncated(const ipu::host_tensor& actual, const ipu::host_tensor& expected, std::size_t i) {
  const auto a = bf16_bits(actual, i), e = bf16_bits(expected, i);
  const bool finite = (e & 0x7f80u) != 0x7f80u;
  return finite && (a & 0x8000u) == (e & 0x8000u) && (a & 0x7fffu) == (e & 0x7fffu) + 1u;
}

double element(const ipu::host_tensor& t, std::size_t i) {
  const std::byte* p = t.data() + i * ipu::size_of(t.info().type);
  auto load = [&]<class T>(T) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return static_cast<double>(v);
  };
  switch (t.info().type) {
    case ipu::data_type::BOOL: return load(std::uint8_t{}) != 0 ? 1.0 : 0.0;
    case ipu::data_type::U8: return load(std::uint8_t{});
    case ipu::data_type::S8: return load(std::int8_t{});
    case ipu::data_type::U16: return load(std::uint16_t{});
    case ipu::data_type::S16: return load(std::int16_t{});
    case ipu::data_type::S32: return load(std::int32_t{});
    case ipu::data_type::U32: return load(std::uint32_t{});
    case ipu::data_type::S64: return load(std::int64_t{});
    case ipu::data_type::U64: return load(std::uint64_t{});
    case ipu::data_type::F16: {
      ipu::half h;
      std::memcpy(&h, p, sizeof h);
      return static_cast<double>(static_cast<float>(h));
    }
    case ipu::data_type::F32: return load(float{});
    case ipu::data_type::F64: return load(double{});
    case ipu::data_type::BF16: return static_cast<double>(ipu::bfloat16::to_float(bf16_bits(t, i)));
    default: return std::nan("");
  }
}

/// Empty when `actual` matches `expected`, else why not.
std::string compare(const ipu::host_tensor& actual, const ipu::host_tensor& expected, const options& o) {
  if (actual.info() != expected.info())
    return "is " + ipu::to_string(actual.info()) + ", expected " + ipu::to_string(expected.info());
  const auto type = expected.info().type;
  if (type == ipu::data_type::STRING) {  // strings match exactly
    for (std::size_t i = 0; i < static_cast<std::size_t>(expected.info().num_elements()); ++i)
      if (actual.string_at(i) != expected.string_at(i))
        return "element " + std::to_string(i) + " is \"" + std::string(actual.string_at(i)) + "\", expected \"" +
               std::string(expected.string_at(i)) + "\"";
    return {};
  }
  const bool exact = !ipu::is_floating_point(type);
  if (exact && ipu::size_of(type) == 8) {  // 64-bit integers do not round-trip through double
    if (std::memcmp(actual.data(), expected.data(), expected.bytes().size()) == 0) return {};
  }
  const auto n = static_cast<std::size_t>(expected.info().num_elements());
  std::size_t bad = 0, first = 0;
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double a = element(actual, i), e = element(expected, i);
    bool ok;
    if (exact) {
      if (ipu::size_of(type) == 8) {
        ok = std::memcmp(actual.data() + i * 8, expected.data() + i * 8, 8) == 0;
      } else {
        ok = a == e;
      }
    } else if (std::isnan(e) || std::isnan(a)) {
      ok = std::isnan(e) && std::isnan(a);
    } else if (std::isinf(e) || std::isinf(a)) {
      ok = a == e;
    } else {
      ok = std::fabs(a - e) <= o.atol + o.rtol * std::fabs(e) ||
           (type == ipu::data_type::BF16 && bf16_truncated(actual, expected, i));
    }
    if (!ok) {
      if (!bad++) first = i;
      if (!std::isnan(a - e)) worst = std::max(worst, std::fabs(a - e));
    }
  }
  if (!bad) return {};
  std::ostringstream s;
  s.precision(9);
  s << bad << " of " << n << " elements differ; first at " << first << ": " << element(actual, first) << " vs expected "
    << element(expected, first) << "; max abs diff " << worst;
  return s.str();
}

/// The optimised graph's output against the unoptimised one's: within 1e-5 of the largest finite
/// |value| for floats (the passes change only rounding), exactly otherwise.
std::string compare_optimised(const ipu::host_tensor& optimised, const ipu::host_tensor& plain, const options& o) {
  options within = o;
  within.rtol = 0;
  double largest = 0;
  if (ipu::is_floating_point(plain.info().type))
    for (std::size_t i = 0; i < static_cast<std::size_t>(plain.info().num_elements()); ++i)
      if (const double v = std::fabs(element(plain, i)); std::isfinite(v)) largest = std::max(largest, v);
  within.atol = 1e-5 * largest;
  return compare(optimised, plain, within);
}

std::vector<fs::path> sorted_dirs(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& stem) {
  std::vector<fs::path> out;
  for (std::size_t i = 0;; ++i) {
    auto p = dir / (stem + "_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) return out;
    out.push_back(p);
  }
}

/// A value of a test's data set, as the imported graph sees it (sequences.hpp): a tensor is one
/// tensor, a sequence its elements, an optional its value or nothing.
struct boundary_value {
  bool present = true;
  bool sequence = false;
  std::vector<ipu::host_tensor> tensors;
};

boundary_value load_value(const fs::path& p, const ::onnx::TypeProto& type) {
  auto from_sequence = [](const ::onnx::SequenceProto& seq) {
    boundary_value v{true, true, {}};
    for (const auto& t : seq.tensor_values()) v.tensors.push_back(ipu::onnx::to_host_tensor(t));
    return v;
  };
  if (type.has_sequence_type()) {
    ::onnx::SequenceProto seq;
    ipu::onnx::read_proto_file(seq, p, "ONNX sequence");
    return from_sequence(seq);
  }
  if (type.has_optional_type()) {
    ::onnx::OptionalProto opt;
    ipu::onnx::read_proto_file(opt, p, "ONNX optional");
    if (opt.has_tensor_value()) return {true, false, {ipu::onnx::to_host_tensor(opt.tensor_value())}};
    if (opt.has_sequence_value()) return from_sequence(opt.sequence_value());
    return {false, false, {}};
  }
  auto t = ipu::onnx::load_tensor(p);
  // ONNX 1.12 wrote BFLOAT16 test data as UINT16 tensors of the bit patterns (numpy has no
  // bfloat16); where the model declares BFLOAT16, those bits are the values.
  if (type.has_tensor_type() && type.tensor_type().elem_type() == ::onnx::TensorProto_DataType_BFLOAT16 &&
      t.info().type == ipu::data_type::U16) {
    ipu::host_tensor bf(ipu::tensor_info{ipu::data_type::BF16, t.info().shape});
    std::memcpy(bf.data(), t.data(), t.bytes().size());
    return {true, false, {std::move(bf)}};
  }
  return {true, false, {std::move(t)}};
}

/// ONNX 1.12's BFLOAT16 CastLike tests (test_castlike_*BFLOAT16*) declare the `like` input with
/// the output's shape, [3, 4], but store a one-element tensor for it. CastLike reads only the type
/// of `like`, so its one value is repeated to the declared shape; this applies only to an input
/// that no node reads but as CastLike's `like` (the _expanded models read it nowhere).
void widen_castlike_like(const ::onnx::GraphProto& g, const ::onnx::ValueInfoProto& in, ipu::host_tensor& t) {
  if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape() || t.info().num_elements() != 1) return;
  std::vector<std::int64_t> dims;
  for (const auto& d : in.type().tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return;
    dims.push_back(d.dim_value());
  }
  if (dims == t.info().shape.dims()) return;
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute())
      if (a.has_g() || a.graphs_size() > 0) return;  // a subgraph might read it
    for (int k = 0; k < n.input_size(); ++k)
      if (n.input(k) == in.name() && !(n.op_type() == "CastLike" && n.domain().empty() && k == 1)) return;
  }
  ipu::host_tensor wide(ipu::tensor_info{t.info().type, ipu::shape(dims)});
  const auto size = ipu::size_of(t.info().type);
  for (std::size_t j = 0; j < static_cast<std::size_t>(wide.info().num_elements()); ++j)
    std::memcpy(wide.data() + j * size, t.data(), size);
  t = std::move(wide);
}

result run_test(const fs::path& test_dir, const options& o) {
  // The model's boundary types say how each data file reads.
  ::onnx::ModelProto proto;
  std::vector<const ::onnx::ValueInfoProto*> model_inputs;
  try {
    ipu::onnx::read_proto_file(proto, test_dir / "model.onnx", "ONNX model");
  } catch (const std::exception& e) {
    return {outcome::fail, "reading the model: " + one_line(e.what())};
  }
  std::set<std::string> initializers;
  for (const auto& t : proto.graph().initializer()) initializers.insert(t.name());
  for (const auto& in : proto.graph().input())
    if (!initializers.count(in.name())) model_inputs.push_back(&in);

  const auto sets = sorted_dirs(test_dir, "test_data_set_");
  if (sets.empty()) return {outcome::fail, "no test_data_set_* directories"};
  struct data_set {
    std::vector<std::pair<std::string, ipu::host_tensor>> inputs;  // by the imported graph's names
    std::vector<ipu::host_tensor> expected;
    std::map<std::string, ipu::host_tensor, std::less<>> tensor_inputs;  // what import may fix
    ipu::onnx::import_options import;
  };
  std::vector<data_set> data;
  try {
    for (const auto& set : sets) {
      data_set d;
      const auto in_files = numbered_files(set, "input");
      for (std::size_t i = 0; i < in_files.size() && i < model_inputs.size(); ++i) {
        const auto& type = model_inputs[i]->type();
        auto v = load_value(in_files[i], type);
        if (v.tensors.size() == 1) widen_castlike_like(proto.graph(), *model_inputs[i], v.tensors[0]);
        const auto& name = model_inputs[i]->name();
        // Dynamic dimensions are fixed to the data's, as a user fixes them (ipu --input-shape).
        if (type.has_tensor_type() && type.tensor_type().has_shape() && v.tensors.size() == 1) {
          const auto& dims = type.tensor_type().shape().dim();
          if (std::any_of(dims.begin(), dims.end(), [](const auto& dim) { return !dim.has_dim_value(); }))
            d.import.input_shapes[name] = v.tensors[0].info().shape.dims();
        }
        if (!v.present) d.import.absent_inputs.insert(name);
        if (v.sequence)
          for (const auto& t : v.tensors) d.import.sequence_inputs[name].push_back(t.info().shape.dims());
        if (v.sequence && v.tensors.empty()) d.import.sequence_inputs[name] = {};
        if (!v.sequence && v.present && v.tensors.size() == 1) d.tensor_inputs.emplace(name, v.tensors[0]);
        for (std::size_t e = 0; e < v.tensors.size(); ++e)
          d.inputs.emplace_back(v.sequence ? ipu::onnx::sequence_element_name(name, e) : name, std::move(v.tensors[e]));
      }
      const auto out_files = numbered_files(set, "output");
      for (std::size_t i = 0; i < out_files.size(); ++i) {
        const auto& type = static_cast<int>(i) < proto.graph().output_size() ? proto.graph().output(static_cast<int>(i)).type()
                                                                            : ::onnx::TypeProto();
        for (auto& t : load_value(out_files[i], type).tensors) d.expected.push_back(std::move(t));
      }
      data.push_back(std::move(d));
    }
  } catch (const std::exception& e) {
    // Data that does not load: the model may say why.
    try {
      (void)ipu::onnx::load_model(test_dir / "model.onnx", {});
    } catch (const ipu::error& imported) {
      return {outcome::unsupported,
              "import: " + one_line(imported.message() + (imported.hint().empty() ? "" : " (" + imported.hint() + ")"))};
    } catch (const std::exception&) {
    }
    return {outcome::fail, "reading the test data: " + one_line(e.what())};
  }

  bool draws = false;
  for (std::size_t k = 0; k < data.size(); ++k) {
    const auto& d = data[k];
    // Each data set is imported with its own sequence lengths and absent optionals, and with the
    // values of the inputs that decide its shapes or its sequences' structure, as `ipu run` does.
    ipu::graph g;
    std::vector<std::string> fixed;
    try {
      g = ipu::onnx::load_model_given_inputs(test_dir / "model.onnx", d.import, d.tensor_inputs, &fixed);
    } catch (const ipu::error& e) {  // the message without the model's path, which is the test's
      return {outcome::unsupported, "import: " + one_line(e.message() + (e.hint().empty() ? "" : " (" + e.hint() + ")"))};
    } catch (const std::exception& e) {
      return {outcome::unsupported, "import: " + one_line(e.what())};
    }
    try {
      ipu::cpu::check_kernels(g, ipu::default_op_registry());
    } catch (const ipu::error& e) {
      return {outcome::unsupported, one_line(e.message())};
    }
    draws = draws || std::any_of(g.ops().begin(), g.ops().end(),
                                 [](const ipu::op_node& op) { return ipu::flags_of(op.domain, op.type).random; });
    // Every test also runs after the graph passes (`ipu run`'s default), which must leave the
    // outputs within rounding of the unoptimised graph's.
    ipu::graph optimised;
    try {
      optimised = ipu::passes::optimize(g, ipu::passes::default_passes());
    } catch (const std::exception& e) {
      return {outcome::fail, "graph passes: " + one_line(e.what())};
    }
    const std::string set = sets[k].filename().string();
    ipu::cpu::named_tensors inputs;
    for (const auto& [name, t] : d.inputs)
      if (std::find(fixed.begin(), fixed.end(), name) == fixed.end()) inputs.emplace_back(name, t.view());
    try {
      ipu::cpu::device dev(std::move(g), {.threads = o.threads});
      ipu::cpu::device opt_dev(std::move(optimised), {.threads = o.threads});
      const auto actual = dev.run(inputs);
      if (actual.size() != d.expected.size())
        return {outcome::fail, set + ": " + std::to_string(actual.size()) + " outputs, expected " +
                                   std::to_string(d.expected.size())};
      if (draws) {
        for (std::size_t i = 0; i < actual.size(); ++i)
          if (actual[i].info() != d.expected[i].info())
            return {outcome::fail, set + " output " + std::to_string(i) + " is " + ipu::to_string(actual[i].info()) +
                                       ", expected " + ipu::to_string(d.expected[i].info())};
        continue;
      }
      for (std::size_t i = 0; i < actual.size(); ++i)
        if (auto why = compare(actual[i], d.expected[i], o); !why.empty())
          return {outcome::fail, set + " output " + std::to_string(i) + " ('" +
                                     dev.model().tensor(dev.model().outputs()[i]).name + "') " + why};
      const auto after_passes = opt_dev.run(inputs);
      for (std::size_t i = 0; i < actual.size(); ++i)
        if (auto why = compare_optimised(after_passes.at(i), actual[i], o); !why.empty())
          return {outcome::fail, set + " output " + std::to_string(i) + " after the graph passes " + why};
    } catch (const std::exception& e) {
      return {outcome::fail, one_line(e.what())};
    }
  }
  if (draws)
    return {outcome::unsupported, "random op: the expected values are numpy's draws, which this library's generator "
                                  "does not reproduce (types and shapes match)"};
  return {outcome::pass, {}};
}

// Runs one test in a child process: a crash or a hang fails that test only.
result run_isolated(const fs::path& test_dir, const options& o) {
  if (!o.fork) return run_test(test_dir, o);
  int fds[2];
  if (pipe(fds) != 0) return {outcome::fail, "pipe() failed"};
  std::cout.flush();
  const pid_t pid = fork();
  if (pid < 0) return {outcome::fail, "fork() failed"};
  if (pid == 0) {
    close(fds[0]);
    const auto r = run_test(test_dir, o);
    const std::string msg = std::to_string(static_cast<int>(r.status)) + r.reason;
    std::size_t off = 0;
    while (off < msg.size()) {
      const auto w = write(fds[1], msg.data() + off, msg.size() - off);
      if (w <= 0) break;
      off += static_cast<std::size_t>(w);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    char buf[4096];
    const auto n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    msg.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) return {outcome::fail, "timed out after " + std::to_string(o.timeout_s) + " s"};
  if (WIFSIGNALED(status)) return {outcome::fail, std::string("crashed: ") + strsignal(WTERMSIG(status))};
  if (msg.empty() || msg[0] < '0' || msg[0] > '2') return {outcome::fail, "the test process exited without a result"};
  return {static_cast<outcome>(msg[0] - '0'), msg.substr(1)};
}

std::set<std::string> read_list(const fs::path& p) {
  std::set<std::string> names;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    line.erase(std::find(line.begin(), line.end(), '#'), line.end());
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.erase(line.begin());
    if (!line.empty()) names.insert(line);
  }
  return names;
}

/// A whole decimal number from lo to hi, or nothing: a flag's value that is not one gets the usage
/// message, not an uncaught exception.
std::optional<long> whole_number(const std::string& text, long lo, long hi) {
  if (text.empty() || text.size() > 9 || !std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return std::nullopt;
  const long v = std::stol(text);
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

int usage(const char* argv0) {
  std::cerr << "usage: " << argv0
            << " NODE_TEST_DIR... [--expected FILE] [--update-expected] [--filter TEXT] [--threads N]"
               " [--timeout SECONDS] [--no-fork]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ipu::tune_openblas_for_host_device();  // this program owns its process
  options o;
  bool timeout_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "error: " << a << " needs a value\n";
        std::exit(usage(argv[0]));
      }
      return argv[++i];
    };
    if (a == "--expected") o.expected = value();
    else if (a == "--update-expected") o.update = true;
    else if (a == "--filter") o.filter = value();
    else if (a == "--threads" || a == "--timeout") {
      const auto v = a == "--threads" ? whole_number(value(), 1, 1024) : whole_number(value(), 1, 86400);
      if (!v) {
        std::cerr << "error: " << a << " takes a whole number (--threads 1-1024, --timeout 1-86400 seconds)\n";
        return usage(argv[0]);
      }
      if (a == "--threads") o.threads = static_cast<std::size_t>(*v);
      else {
        o.timeout_s = static_cast<int>(*v);
        timeout_given = true;
      }
    } else if (a == "--no-fork") o.fork = false;
    else if (!a.empty() && a[0] == '-') return usage(argv[0]);
    else o.dirs.push_back(a);
  }
  if (o.dirs.empty()) return usage(argv[0]);
  if (timeout_given && !o.fork) {
    std::cerr << "error: --timeout stops a forked test; with --no-fork nothing could stop it (drop one of them)\n";
    return 2;
  }
  if (o.update && o.expected.empty()) {
    std::cerr << "error: --update-expected needs --expected FILE\n";
    return 2;
  }
  std::vector<fs::path> tests;
  for (const auto& d : o.dirs) {
    auto found = sorted_dirs(d, "test_");
    tests.insert(tests.end(), found.begin(), found.end());
  }
  std::erase_if(tests, [&](const fs::path& p) {
    return !o.filter.empty() && p.filename().string().find(o.filter) == std::string::npos;
  });
  if (tests.empty()) {
    std::cerr << "error: no test_* directories in " << o.dirs.front()
              << " (generate them with tests/conformance/generate_node_tests.py)\n";
    return 2;
  }

  std::set<std::string> passed;
  std::size_t n_fail = 0, n_unsupported = 0;
  for (const auto& t : tests) {
    const auto name = t.filename().string();
    if (!o.fork) std::cout << "running     " << name << std::endl;  // before a crash could end the run
    const auto r = run_isolated(t, o);
    switch (r.status) {
      case outcome::pass:
        passed.insert(name);
        std::cout << "pass        " << name << "\n";
        break;
      case outcome::fail:
        ++n_fail;
        std::cout << "fail        " << name << ": " << r.reason << "\n";
        break;
      case outcome::unsupported:
        ++n_unsupported;
        std::cout << "unsupported " << name << ": " << r.reason << "\n";
        break;
    }
    std::cout.flush();
  }

  const auto total = tests.size();
  const auto expected = o.expected.empty() ? std::set<std::string>{} : read_list(o.expected);
  std::vector<std::string> regressions, unlisted;
  for (const auto& t : tests) {
    const auto name = t.filename().string();
    const bool ok = passed.contains(name);
    if (expected.contains(name) && !ok) regressions.push_back(name);
    if (!expected.contains(name) && ok) unlisted.push_back(name);
  }
  for (const auto& e : expected)  // listed but absent from the generated tests
    if (o.filter.empty() && !std::any_of(tests.begin(), tests.end(), [&](const fs::path& p) { return p.filename() == e; }))
      regressions.push_back(e + " (no such test)");

  std::printf("\ntotal %zu: %zu passed, %zu failed, %zu unsupported; pass rate %.1f%%\n", total, passed.size(), n_fail,
              n_unsupported, 100.0 * static_cast<double>(passed.size()) / static_cast<double>(total));
  if (!o.expected.empty()) {
    std::printf("expected to pass (%s): %zu listed, %zu not passing\n", o.expected.c_str(), expected.size(),
                regressions.size());
    for (const auto& r : regressions) std::printf("  NOT PASSING (listed as expected): %s\n", r.c_str());
    if (!unlisted.empty()) {
      std::printf("%zu passing tests are not in the expected list (add them with --update-expected):\n", unlisted.size());
      for (const auto& u : unlisted) std::printf("  newly passing: %s\n", u.c_str());
    }
  }
  if (o.update) {
    std::set<std::string> next = expected;
    for (const auto& t : tests) next.erase(t.filename().string());  // the tests run now are decided afresh
    next.insert(passed.begin(), passed.end());
    std::ofstream out(o.expected, std::ios::trunc);
    out << "# ONNX backend node tests the CPU device must pass (one per line).\n"
           "# Regenerate: ipu_conformance NODE_TEST_DIR --expected THIS_FILE --update-expected\n";
    for (const auto& n : next) out << n << "\n";
    std::printf("wrote %zu names to %s\n", next.size(), o.expected.c_str());
    regressions.clear();
  }
  std::printf("%zu passed, %zu failed\n", passed.size(), total - passed.size());
  return regressions.empty() ? 0 : 1;
}
