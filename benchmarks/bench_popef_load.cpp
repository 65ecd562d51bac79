// Loading a PopEF file against reading it once, in the same run, both from the page cache.
//
// The model carries AlexNet's fully connected layers (9216 -> 4096 -> 4096 -> 1000, weights and
// biases: 235 MB of F32, 94% of AlexNet's 244 MB), built in C++ so the benchmark needs no exported
// file. It is compiled once to a PopEF file in the temp directory; then
//   read_once:  read() of the whole file in 1 MiB chunks into one buffer;
//   popef_load: ipu::popef::load, i.e. map, verify every blob's checksum, decode the executable and
//               rebuild the graph with every weight bound as a view of the mapping.
// The goal (issue 5): load at most 1.5x read_once. `ratio popef_load / read_once (time)` says it.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "baseline_main.hpp"
#include "ipu/builder/builder.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/popef/compiled_model.hpp"

namespace {

ipu::graph alexnet_classifier() {
  ipu::builder b("alexnet_classifier");
  auto x = b.add_input_tensor({ipu::data_type::F32, {1, 9216}}, "features");
  const std::int64_t widths[] = {9216, 4096, 4096, 1000};
  for (std::size_t i = 0; i + 1 < std::size(widths); ++i) {
    const auto in = widths[i], out = widths[i + 1];
    std::vector<float> w(static_cast<std::size_t>(in * out)), bias(static_cast<std::size_t>(out));
    for (std::size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(k % 251) * 1e-4f - 0.0125f;
    for (std::size_t k = 0; k < bias.size(); ++k) bias[k] = static_cast<float>(k % 7) * 1e-3f;
    const auto name = "classifier." + std::to_string(i);
    const auto wt = b.add_initialized_input(ipu::make_constant<float>({out, in}, w), name + ".weight");
    const auto bt = b.add_initialized_input(ipu::make_constant<float>({out}, bias), name + ".bias");
    ipu::gemm_options o;
    o.trans_b = true;  // PyTorch's Linear: weight [out, in]
    x = b.gemm(x, wt, bt, o);
    if (i + 2 < std::size(widths)) x = b.relu(x);
  }
  b.add_output(x);
  return std::move(b).build();
}

const std::filesystem::path& popef_file() {
  static const std::filesystem::path file = [] {
    auto f = std::filesystem::temp_directory_path() / ("ipu-bench-popef-load-" + std::to_string(::getpid()) + ".popef");
    (void)ipu::popef::compile_and_export(alexnet_classifier(),
                                         ipu::options().execution_strategy(ipu::strategy_settings::sharded()),
                                         ipu::device_from_name("mk2", 1), f);
    return f;
  }();
  return file;
}

std::size_t read_file(const std::filesystem::path& p, std::vector<char>& buffer) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::size_t total = 0;
  constexpr std::size_t chunk = std::size_t{1} << 20;
  for (;;) {
    if (buffer.size() < total + chunk) buffer.resize(total + chunk);
    const auto n = ::read(fd, buffer.data() + total, chunk);
    if (n <= 0) break;
    total += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return total;
}

void read_once(benchmark::State& state) {
  const auto& file = popef_file();
  std::vector<char> buffer;
  const auto size = read_file(file, buffer);  // into the page cache, and the buffer sized
  if (size != std::filesystem::file_size(file)) state.SkipWithError("cannot read the PopEF file");
  for (auto _ : state) benchmark::DoNotOptimize(read_file(file, buffer));
  state.SetBytesProcessed(static_cast<std::int64_t>(size) * state.iterations());
}

void popef_load(benchmark::State& state) {
  const auto& file = popef_file();
  std::size_t weight_bytes = 0;
  for (auto _ : state) {
    const auto m = ipu::popef::load(file);
    weight_bytes = 0;
    for (const auto& t : m.model().tensors())
      if (t.kind == ipu::tensor_kind::variable) weight_bytes += t.data.size();
    benchmark::DoNotOptimize(weight_bytes);
  }
  state.counters["weight_MB"] = static_cast<double>(weight_bytes) / 1e6;
  state.SetBytesProcessed(static_cast<std::int64_t>(std::filesystem::file_size(file)) * state.iterations());
}

}  // namespace

BENCHMARK(read_once)->Name("read_once")->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly();
BENCHMARK(popef_load)->Name("popef_load")->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly();

static const int ratio_load = ipu::bench::compare("popef_load", "read_once");

int main(int argc, char** argv) {
  const int r = ipu::bench::run_main(argc, argv);
  std::error_code ec;
  std::filesystem::remove(popef_file(), ec);
  return r;
}
