#!/usr/bin/env python3
"""Checks `ipu model --json` against figures computed here from the public sources.

check_model.py IPU_BINARY
"""
import json
import subprocess
import sys


def model(ipu, *args):
    p = subprocess.run([ipu, "model", "--json", *args], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"ipu model {' '.join(args)} failed: {p.stderr.strip()}")
    return json.loads(p.stdout)


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b))


def main():
    ipu = sys.argv[1]
    problems = []

    def check(ok, what):
        if not ok:
            problems.append(what)

    # Mk1 (GC2): 1216 tiles, 1.6 GHz, 8 / 32 MACs per cycle per tile; PCIe Gen3 x8 after 128b/130b
    # coding and 256-byte TLPs with 24 bytes of header, LCRC and framing.
    m = model(ipu, "--device", "mk1")
    check(m["tiles"] == 1216 and m["clock_hz"] == 1_600_000_000, "mk1 tiles / clock")
    peak = {"fp32": 1216 * 1.6e9 * 8 * 2 / 1e12, "fp16.32": 1216 * 1.6e9 * 32 * 2 / 1e12, "fp16.16": 1216 * 1.6e9 * 32 * 2 / 1e12}
    check(len(m["gemm"]) == 18, "6 sizes x 3 precisions")
    for g in m["gemm"]:
        n = g["n"]
        check(close(g["peak_tflops"], peak[g["precision"]]), f"peak {g}")
        check(close(g["tflops"], 2 * n**3 / g["seconds"] / 1e12), f"tflops = 2 n^3 / seconds {g}")
        check(close(g["seconds"], g["cycles"] / 1.6e9), f"seconds = cycles / clock {g}")
        check(0 < g["efficiency"] < 1, f"overheads keep efficiency below 1 {g}")
    # Larger problems amortise the vertex and exchange overheads (while the operands fit).
    f16 = [g for g in m["gemm"] if g["precision"] == "fp16.32"]
    check(f16[0]["efficiency"] < f16[3]["efficiency"], "efficiency grows with n")
    host = 8e9 * 8 * 128 / 130 / 8 * 256 / 280
    check(close(m["host"]["bytes_per_second"], host), f"mk1 host {m['host']}")
    check(close(m["host"]["min_latency_seconds"], 48 / 1.6e9 + 256 / host), "mk1 host latency: sync + one TLP")
    # Host -> IPU is read by the IPU: completions of one 64-byte RCB with 12 + 4 + 4 bytes of header,
    # LCRC and framing; the least read is the sync, a 24-byte request and one 256-byte payload.
    read = 8e9 * 8 * 128 / 130 / 8 * 64 / 84
    check(close(m["host"]["read_bytes_per_second"], read), f"mk1 host reads {m['host']}")
    check(close(m["host"]["read_min_latency_seconds"], 48 / 1.6e9 + (24 + 256) / read), "mk1 read latency")
    check([s["cycles"] for s in m["sync"]] == [48, 48, 96, 144, 240, 816], f"sync {m['sync']}")
    check(close(m["exchange"]["tile_pair_bytes_per_second"], 4 * 1.6e9), "exchange per tile pair")
    check(close(m["exchange"]["all_tiles_bytes_per_second"], 4 * 1.6e9 * 1216), "exchange all tiles")
    link = 128 * 2**30 / 8 * 0.85
    check(close(m["ipu_link"]["board_partner_bytes_per_second"], 4 * link), "4 rung links to the partner")
    check(close(m["ipu_link"]["across_boards_bytes_per_second"], 2 * link), "2 links to the next board")
    # Ring all-reduce of B bytes over 2 replicas: 2 (R - 1) / R B over the 4 rung links + 2 syncs.
    r2 = m["all_reduce"][0]
    check(r2["replicas"] == 2 and abs(r2["seconds"] - ((64 << 20) / (4 * link) + 2 * 48 / 1.6e9)) < 2e-9,
          f"all-reduce over 2 replicas {r2}")

    # Mk2: the host rate is the RoCEv2 share of 2 x 100 GbE (4096 B payload per 4178 B on the wire).
    m2 = model(ipu, "--device", "mk2", "--all-reduce-bytes", "1000000", "--batch", "2")
    check(close(m2["host"]["bytes_per_second"], 25e9 * 4096 / 4178 / 4), f"mk2 host {m2['host']}")
    # Reads through the gateway's Gen4 x8 (15.75 x 64 / 84 = 12.0 GB/s) stay above the Ethernet share.
    check(close(m2["host"]["read_bytes_per_second"], 25e9 * 4096 / 4178 / 4), f"mk2 host reads {m2['host']}")
    check(all(r["bytes"] == 1000000 for r in m2["all_reduce"]), "--all-reduce-bytes")
    m1 = model(ipu, "--device", "mk2")
    for c1, c2 in zip(m1["conv"], m2["conv"]):
        check(c2["batch"] == 2 and c2["cycles"] > c1["cycles"], f"--batch 2 costs more {c1['layer']}")
    check(len(m1["conv"]) == 9, "3 layers x 3 precisions")

    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
