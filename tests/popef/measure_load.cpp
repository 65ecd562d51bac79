// Measures loading a PopEF file against reading the same file once, both from the page cache:
//
//   popef_measure_load MODEL.onnx [RUNS]
//
// compiles MODEL.onnx to a PopEF file in the temp directory, then times (median of RUNS, default 9)
//   read:   read() of the whole file in 1 MiB chunks into one buffer (what `cat` costs, plus a copy);
//   load:   ipu::popef::load — map, verify every checksum, decode the executable, rebuild the graph
//           with every weight bound as a view of the mapping;
//   and, to show where the time goes, the reader alone with and without checksums.
// Prints one line per figure and the load / read ratio. A measurement, not a test: no assertion.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <vector>

#include "ipu/onnx/import.hpp"
#include "ipu/popef/compile.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/popef/reader.hpp"

namespace {

double median_ms(int runs, const std::function<void()>& f) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::size_t read_file(const std::filesystem::path& p, std::vector<char>& buffer) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) std::exit(1);
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: popef_measure_load MODEL.onnx [RUNS]\n");
    return 2;
  }
  const int runs = argc > 2 ? std::atoi(argv[2]) : 9;
  const auto file = std::filesystem::temp_directory_path() / ("popef-measure-" + std::to_string(::getpid()) + ".popef");
  {
    const auto g = ipu::onnx::load_model(argv[1]);
    (void)ipu::popef::compile_and_export(g, ipu::options().execution_strategy(ipu::strategy_settings::sharded()),
                                         ipu::device_from_name("mk2", 1), file);
  }
  const auto size = std::filesystem::file_size(file);
  std::vector<char> buffer;
  (void)read_file(file, buffer);  // into the page cache
  buffer.reserve(size + (std::size_t{1} << 20));
  const double read_ms = median_ms(runs, [&] { (void)read_file(file, buffer); });
  std::size_t weight_bytes = 0;
  const double load_ms = median_ms(runs, [&] {
    const auto m = ipu::popef::load(file);
    weight_bytes = 0;
    for (const auto& t : m.model().tensors())
      if (t.kind == ipu::tensor_kind::variable) weight_bytes += t.data.size();
  });
  const double reader_ms = median_ms(runs, [&] { const ipu::popef::reader r(file); });
  ipu::popef::reader_options unchecked;
  unchecked.verify_checksums = false;
  const double unchecked_ms = median_ms(runs, [&] { const ipu::popef::reader r(file, unchecked); });
  std::filesystem::remove(file);

  std::printf("file                 %.1f MB (weights %.1f MB)\n", static_cast<double>(size) / 1e6,
              static_cast<double>(weight_bytes) / 1e6);
  std::printf("read once            %8.2f ms  (%.2f GB/s)\n", read_ms, static_cast<double>(size) / read_ms / 1e6);
  std::printf("popef::load          %8.2f ms\n", load_ms);
  std::printf("  reader, checksums  %8.2f ms\n", reader_ms);
  std::printf("  reader, unchecked  %8.2f ms\n", unchecked_ms);
  std::printf("load / read          %8.2f x\n", load_ms / read_ms);
  return 0;
}
