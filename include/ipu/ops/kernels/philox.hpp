#pragma once
// The counter-based generator of the library's random kernels (training-mode Dropout's mask, the
// random ops of ops/kernels/random.hpp).
#include <array>
#include <cstdint>

namespace ipu::detail::tensor_ops {

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): four
/// random 32-bit words from a 128-bit counter and a 64-bit key. Counter-based: any element's draw is
/// computed on its own, so a result does not depend on how the work is split over threads.
constexpr std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> c, std::array<std::uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0], p1 = std::uint64_t{0xCD9E8D57u} * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<std::uint32_t>(p0)};
  }
  return c;
}

}  // namespace ipu::detail::tensor_ops
