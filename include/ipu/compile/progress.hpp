#pragma once
// PopTorch's compilation progress bar (Options::showCompilationProgressBar, on by default): how far
// popef::compile() has got, as the stage it starts and the share of the work done before it. The
// bar is drawn where compile_options::progress says; without a sink it is drawn on stderr when that
// is a terminal (a log file or a pipe gets no carriage-return noise), and not at all when the
// option is off.
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

#include <unistd.h>

namespace ipu::popef {

/// One step of the bar: `percent` of the compilation is done and `stage` starts (at 100: "done").
struct compile_progress {
  std::string_view stage;
  unsigned percent = 0;
};

using progress_sink = std::function<void(const compile_progress&)>;

/// The bar as text: "Graph compilation:  40%|########            | planning".
inline std::string progress_bar_text(const compile_progress& p, std::size_t width = 20) {
  const unsigned pct = p.percent > 100 ? 100 : p.percent;
  const std::size_t filled = width * pct / 100;
  std::string bar = "Graph compilation: ";
  const std::string number = std::to_string(pct);
  bar.append(3 - number.size(), ' ');
  bar += number + "%|" + std::string(filled, '#') + std::string(width - filled, ' ') + "| ";
  bar += p.stage;
  return bar;
}

/// Draws the bar on `out` in place (carriage return, cleared line), and ends the line at 100%.
/// Does nothing unless `out` is a terminal.
inline progress_sink terminal_progress_bar(std::FILE* out = stderr) {
  if (out == nullptr || ::isatty(::fileno(out)) == 0) return {};
  return [out](const compile_progress& p) {
    std::fprintf(out, "\r\033[K%s%s", progress_bar_text(p).c_str(), p.percent >= 100 ? "\n" : "");
    std::fflush(out);
  };
}

}  // namespace ipu::popef
