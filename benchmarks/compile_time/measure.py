#!/usr/bin/env python3
"""How long the library's headers take to compile a model planned with pipelining inside a constant
expression, as the number of pipeline stages grows. Reports; never fails on timing.

Each translation unit is generated from constexpr_pipeline.cpp.in with the stage count substituted
(0 = the same headers, nothing planned: the baseline). Each is compiled with -fsyntax-only (constant
evaluation happens in the front end) `--repeat` times; the table shows the best wall time, and the
time above the baseline, i.e. what planning at compile time costs.

Usage: measure.py [--compiler g++] [--include DIR] [--stages 0,1,2,4,...] [--repeat N]
                  [--out-dir DIR] [--flag=-fconstexpr-ops-limit=...]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--compiler", default=os.environ.get("CXX", "g++"))
    p.add_argument("--include", default=os.path.join(HERE, "..", "..", "include"))
    p.add_argument("--stages", default="0,1,2,4,8,16,32,64")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--out-dir", default=None, help="where the generated TUs go (default: a temporary directory)")
    p.add_argument("--flag", action="append", default=[], help="extra compiler flag (repeatable)")
    a = p.parse_args()

    with open(os.path.join(HERE, "constexpr_pipeline.cpp.in")) as f:
        template = f.read()
    out_dir = a.out_dir or tempfile.mkdtemp(prefix="ipu_compile_time_")
    os.makedirs(out_dir, exist_ok=True)
    flags = ["-std=c++20", "-fsyntax-only", "-fconstexpr-ops-limit=17179869184", "-fconstexpr-loop-limit=16777216",
             "-I" + os.path.abspath(a.include)] + a.flag

    rows = []
    baseline = None
    for n in [int(s) for s in a.stages.split(",") if s]:
        tu = os.path.join(out_dir, f"constexpr_pipeline_{n}.cpp")
        with open(tu, "w") as f:
            f.write(template.replace("@IPU_STAGES@", str(n)))
        best = None
        for _ in range(max(1, a.repeat)):
            t0 = time.monotonic()
            r = subprocess.run([a.compiler] + flags + [tu], capture_output=True, text=True)
            dt = time.monotonic() - t0
            if r.returncode != 0:
                sys.stderr.write(f"stages={n}: compilation failed:\n{r.stderr[-4000:]}\n")
                best = None
                break
            best = dt if best is None else min(best, dt)
        if n == 0:
            baseline = best
        rows.append((n, best))
        print(f"stages={n}: " + (f"{best:.2f} s" if best is not None else "failed"), flush=True)

    print()
    print("| pipeline stages | compile time (s) | above the baseline (s) |")
    print("|---:|---:|---:|")
    for n, t in rows:
        if t is None:
            print(f"| {n} | failed | |")
        elif n == 0:
            print(f"| 0 (headers only) | {t:.2f} | 0 |")
        else:
            extra = f"{t - baseline:.2f}" if baseline is not None else ""
            print(f"| {n} | {t:.2f} | {extra} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
