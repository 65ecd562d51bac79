#pragma once
// The channel blocks of the blocked (NCHWc) ops, for their shape rules, their kernels and the
// nchwc-layout pass that makes them: oneDNN's AVX2 layout (8 channels a block) and its AVX-512
// layout (16).
#include <cstdint>
#include <limits>

namespace ipu {

inline constexpr std::int64_t nchwc_max_block = 16;

/// Whether the blocked ops take blocks of `block` channels.
constexpr bool is_nchwc_block(std::int64_t block) noexcept { return block == 8 || block == 16; }

/// `channels` rounded up to whole blocks of `block`; -1, which no dimension matches, when that
/// would overflow (a stranger's `channels` attribute or dimension).
constexpr std::int64_t nchwc_padded_channels(std::int64_t channels, std::int64_t block) noexcept {
  if (channels > std::numeric_limits<std::int64_t>::max() - (block - 1)) return -1;
  return (channels + (block - 1)) / block * block;  // not (channels + block) - 1, which can overflow
}

}  // namespace ipu
