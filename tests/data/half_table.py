#!/usr/bin/env python3
"""Reference tables for ipu::half, computed by numpy (IEEE binary16, round to nearest even).

Usage: half_table.py OUT_DIR

Writes little-endian binary files:
  half_to_float.u32   65536 float32 bit patterns: every half bit pattern converted to float32
  float_inputs.u32    N float32 bit patterns chosen to exercise float32 -> float16
  float_to_half.u16   N float16 bit patterns: numpy's conversion of each input
The inputs hold every half value, every midpoint between neighbouring halves (ties) and the float32
values just below and above each midpoint, specials, and random bit patterns over all of float32
and over the half range.
"""
import pathlib
import sys

import numpy as np


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)

    all_halves = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    as_float = all_halves.view(np.float16).astype(np.float32)
    as_float.view(np.uint32).astype("<u4").tofile(out / "half_to_float.u32")

    # Midpoints between each finite non-negative half and the next one up; the last one, between
    # 65504 and the next power of two 65536, is the overflow threshold 65520.
    finite = np.arange(0x7C00, dtype=np.uint16)
    lo = finite.view(np.float16).astype(np.float64)
    hi = np.append(lo[1:], 65536.0)
    mid = ((lo + hi) / 2).astype(np.float32)  # exact: a half needs 11 bits, a midpoint 12
    assert np.all(mid.astype(np.float64) == (lo + hi) / 2)
    below = np.nextafter(mid, np.float32(0))
    above = np.nextafter(mid, np.float32(np.inf))

    rng = np.random.default_rng(20240601)
    random_any = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    # Exponents from float32 2^-30 to 2^20: the half subnormal, normal and overflow ranges.
    exps = rng.integers(127 - 30, 127 + 20, size=200_000, dtype=np.uint32)
    mants = rng.integers(0, 2**23, size=200_000, dtype=np.uint32)
    signs = rng.integers(0, 2, size=200_000, dtype=np.uint32)
    random_half_range = ((signs << 31) | (exps << 23) | mants).view(np.float32)

    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 65504.0, 65519.996, 65520.0, 1e9, -1e9,
         np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1e-45, 2.0**-24, 2.0**-25, 2.0**-26,
         3 * 2.0**-25, 2.0**-14, 1.0, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11],
        dtype=np.float32)

    positive = np.concatenate([as_float, mid, below, above])
    inputs = np.concatenate([positive, -positive, random_any, random_half_range, specials]).astype(np.float32)
    inputs.view(np.uint32).astype("<u4").tofile(out / "float_inputs.u32")
    with np.errstate(over="ignore", invalid="ignore"):
        halves = inputs.astype(np.float16)
    halves.view(np.uint16).astype("<u2").tofile(out / "float_to_half.u16")


if __name__ == "__main__":
    main()
