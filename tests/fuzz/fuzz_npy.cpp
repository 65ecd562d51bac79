// libFuzzer target for the .npy readers: any bytes must parse or raise ipu::error — never crash,
// read out of bounds or allocate more than the file holds. What parses must round-trip: writing
// the tensor and reading it back gives the same type, shape and bytes (the same strings, for a
// STRING tensor, whose bytes are addresses). The row reader
// (npy_row_reader) is driven on the same bytes, as an in-memory file: it must refuse what
// parse_npy refuses with the same error (when it opens the file, or, for a bad string element,
// when it reads the rows), and read every row of what it accepts as parse_npy does.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "ipu/error.hpp"
#include "ipu/file.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/io/npy_rows.hpp"

namespace {

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// `part`'s elements are `whole`'s from element `first` on.
bool same_elements(const ipu::host_tensor& part, const ipu::host_tensor& whole, std::size_t first = 0) {
  if (part.info().type != whole.info().type) return false;
  if (part.info().type != ipu::data_type::STRING) {
    const auto size = ipu::size_of(part.info().type);
    return first * size + part.bytes().size() <= whole.bytes().size() &&
           same_bytes(part.bytes(), whole.bytes().subspan(first * size, part.bytes().size()));
  }
  const auto n = static_cast<std::size_t>(part.info().num_elements());
  if (first + n > static_cast<std::size_t>(whole.info().num_elements())) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (part.string_at(i) != whole.string_at(first + i)) return false;
  return true;
}

// The bytes as an open file (a memfd: no path, nothing left behind).
ipu::regular_file memory_file(const std::uint8_t* data, std::size_t size) {
  const int fd = ::memfd_create("fuzz_npy", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  ipu::regular_file file(fd, size);
  for (std::size_t done = 0; done < size;) {
    const auto n = ::write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
  return file;
}

// The row reader on the same bytes agrees with parse_npy: `whole` is what parse_npy gave, or
// nothing and `refusal` its error.
void check_rows(const std::uint8_t* data, std::size_t size, const ipu::host_tensor* whole, const std::string& refusal) {
  std::string error;
  try {
    ipu::io::npy_row_reader r(memory_file(data, size), "fuzz");
    // A string array's elements are decoded as they are read, so a bad one is refused here at the latest.
    const auto all = r.read(0, r.rows());
    if (!whole) std::abort();  // parse_npy refused it
    if (r.info() != whole->info()) std::abort();
    if (all.info() != whole->info() || !same_elements(all, *whole)) std::abort();
    if (r.rows() > 1) {  // a last row alone lies where the whole file has it
      const auto last = r.read(r.rows() - 1, 1);
      const auto per_row = static_cast<std::size_t>(whole->info().num_elements() / r.rows());
      if (!same_elements(last, *whole, static_cast<std::size_t>(whole->info().num_elements()) - per_row)) std::abort();
    }
    return;
  } catch (const ipu::error& e) {
    error = e.what();
  }
  // Refused: as parse_npy refused it, or, for what it accepts, because a scalar has no rows.
  if (whole ? whole->info().shape.rank() != 0 : error != refusal) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ipu::host_tensor t;
  try {
    t = ipu::io::parse_npy(std::as_bytes(std::span(data, size)), "fuzz");
  } catch (const ipu::error& e) {
    check_rows(data, size, nullptr, e.what());
    return 0;  // refusing bad input with a clear error is the expected outcome
  }
  check_rows(data, size, &t, {});
  const auto bytes = ipu::io::to_npy(t);
  const auto back = ipu::io::parse_npy(bytes, "to_npy");
  if (back.info() != t.info() || !same_elements(back, t)) std::abort();
  return 0;
}
