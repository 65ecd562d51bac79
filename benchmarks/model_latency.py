#!/usr/bin/env python3
"""Whole-model inference latency of `ipu run` against PyTorch 1.13 and ONNX Runtime, in paired rounds.

Usage: /usr/bin/python3 benchmarks/model_latency.py IPU_BINARY [--ort-dir DIR] [--threads 1,2]
           [--rounds 5] [--iterations 30] [--budget 1.0] [--models all|NAME,...] [--model-dir DIR] [--verbose]

  IPU_BINARY      the release `ipu` tool (build/release/tools/ipu/ipu)
  --ort-dir DIR   the folder holding node_modules/onnxruntime-node (installed outside the repository,
                  see benchmarks/README.md); without it the ONNX Runtime column is skipped
  --threads 1,2   thread counts, each a table of its own (ipu --threads, PyTorch's intra-op and
                  OpenBLAS threads, ONNX Runtime's intra- and inter-op threads)
  --rounds R      paired rounds per model and thread count: each times every contender back to
                  back, in an order that rotates from round to round
  --iterations N  timed runs per contender and round (after one untimed warm-up), at most ...
  --budget S      ... as many as fit in S seconds at ipu's first-run latency, at least 3: the
                  large models would otherwise take most of the run
  --models        comma-separated names of tests/data/export_models.py's MODELS and LATENCY
                  (default: all of them); models are exported there at batch 4, random weights
  --model-dir DIR where exported models are kept between runs (default: a temp dir)
  --verbose       per-round figures

Each model is exported once (ONNX opset 13, with PyTorch's output for its input). Per model and
thread count, `ipu run` first runs once: a model it refuses is skipped with the reason, and its
output is compared with PyTorch's (max |ipu - torch| / max |torch|, expected below 1e-4; ONNX
Runtime's likewise). Then every round runs, in rotating order:
  - `ipu run MODEL --input input=X --threads T --iterations N`, a child process; its median;
  - PyTorch eager inference under torch.no_grad() in a child process started once per model and
    thread count (importing PyTorch takes seconds), which times N runs on command;
  - benchmarks/ort_latency.js under node, a child process: ONNX Runtime's CPU provider, all
    graph optimisations; its median.
Reported per model: each contender's median over rounds, the ratios ipu / PyTorch and ipu / ORT
(median of the per-round ratios, below 1: ipu is faster; min-max over rounds), the output errors,
and each contender's peak resident memory (the largest of its processes' over the rounds, measured
by GNU time /usr/bin/time; it includes the runtime, so the line "runtime alone" gives Python +
PyTorch's and node + ORT's before any model). Then the geometric mean of each ratio over the
models that have it.
"""
import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "data"))


def torch_worker(name, input_path, threads):
    """Child process: build the model as export_models.py exported it, then per line N on stdin,
    one warm-up and N timed runs, answering `median_ms` (the same warm-up the other contenders
    get each round, after the caches were theirs)."""
    import torch
    import export_models
    import torch_blas
    corename = torch_blas.pin(threads)
    model, _ = export_models.build(name)
    x = torch.from_numpy(np.load(input_path))
    print(f"ready {corename}", flush=True)
    with torch.no_grad():
        for line in sys.stdin:
            n = int(line)
            model(x)
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                model(x)
                times.append((time.perf_counter() - t0) * 1e3)
            print(f"{statistics.median(times):.6f}", flush=True)


# A child's own ru_maxrss (wait4) starts at its parent's: fork copies the parent's resident pages
# into its count and exec keeps the high-water mark, so every child of this process (which has
# imported PyTorch) would report at least ~250 MB. GNU time is a small process whose child's count
# starts near zero, so it measures what the contender itself touched.
TIME = "/usr/bin/time"


def timed(cmd, rss_file):
    """CMD under GNU time writing its peak RSS to RSS_FILE, or CMD alone without GNU time."""
    return [TIME, "-f", "%M", "-o", rss_file, *cmd] if os.access(TIME, os.X_OK) else cmd


def read_rss_mb(rss_file):
    """The peak RSS in MB that GNU time wrote, or None."""
    try:
        with open(rss_file) as f:
            return int(f.read().split()[-1]) / 1024
    except (OSError, ValueError, IndexError):
        return None


def run_child(cmd, env=None):
    """Runs CMD to completion: (exit code, stdout, stderr, peak RSS in MB or None)."""
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = os.path.join(tmp, "rss")
        res = subprocess.run(timed(cmd, rss_file), capture_output=True, text=True, env=env)
        return res.returncode, res.stdout, res.stderr, read_rss_mb(rss_file)


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else "(no output)"


def median_from(stdout):
    m = re.search(r"^\S*\s*latency_ms .*?\bmedian=([0-9.]+)", stdout, re.M)
    return float(m.group(1)) if m else None


def rel_error(path, reference):
    got = np.load(path).astype(np.float64)
    ref = np.load(reference).astype(np.float64)
    if got.shape != ref.shape:
        return float("inf")
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), np.finfo(np.float64).tiny))


class Contender:
    def __init__(self, label):
        self.label = label
        self.times = []
        self.rss = None  # peak RSS in MB
        self.error = None   # max relative error against PyTorch's output
        self.failed = None  # why it has no figures


def ipu_cmd(args, onnx_path, input_path, threads, iterations, out_dir):
    return [args.ipu, "run", onnx_path, "--input", f"input={input_path}", "--threads", str(threads),
            "--iterations", str(iterations), "--output-dir", out_dir]


def ort_cmd(onnx_path, input_path, threads, iterations, out_path):
    return ["node", os.path.join(HERE, "ort_latency.js"), onnx_path, input_path, str(threads),
            str(iterations), out_path]


def measure(args, name, threads, model_dir, ort_env):
    """One model at one thread count: the probe, then the paired rounds. Returns the contenders,
    or None (with the reason printed) when ipu refuses the model."""
    onnx_path = os.path.join(model_dir, name + ".onnx")
    input_path = os.path.join(model_dir, name + ".input.npy")
    reference = os.path.join(model_dir, name + ".output.npy")
    out_dir = os.path.join(model_dir, f"out-{name}-{threads}")
    os.makedirs(out_dir, exist_ok=True)
    ipu_out = os.path.join(out_dir, "output.npy")  # export_models names the graph output "output"
    ort_out = os.path.join(out_dir, "ort.npy")

    ipu, torch_c, ort = Contender("ipu"), Contender("pytorch"), Contender("ort")
    rc, out, err, rss = run_child(ipu_cmd(args, onnx_path, input_path, threads, 1, out_dir))
    if rc != 0:
        print(f"  skipped {name}: ipu run refused it: {last_line(err or out)}", flush=True)
        return None
    ipu.rss = rss
    ipu.error = rel_error(ipu_out, reference) if os.path.exists(ipu_out) else None
    first = median_from(out)
    iterations = max(3, min(args.iterations, int(args.budget * 1e3 / max(first, 1e-3))))

    worker_rss = os.path.join(out_dir, "torch.rss")
    worker = subprocess.Popen(timed([sys.executable, os.path.abspath(__file__), "--torch-worker", name, input_path,
                                     str(threads)], worker_rss),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = worker.stdout.readline().split()
    if not ready or ready[0] != "ready":
        torch_c.failed = "the PyTorch worker did not start"
        worker.stdin.close()
        worker.wait()
        worker = None
    else:
        torch_c.corename = ready[1]
    if ort_env is None:
        ort.failed = "no --ort-dir"

    def run_ipu():
        rc, out, err, rss = run_child(ipu_cmd(args, onnx_path, input_path, threads, iterations, out_dir))
        ipu.rss = max_rss(ipu.rss, rss)
        return median_from(out) if rc == 0 else None

    def run_torch():
        if worker is None or torch_c.failed:
            return None
        try:
            worker.stdin.write(f"{iterations}\n")
            worker.stdin.flush()
            return float(worker.stdout.readline())
        except (OSError, ValueError):  # the worker died: its stderr already went to ours
            torch_c.failed = "the PyTorch worker stopped"
            print(f"  {name}: {torch_c.failed}", flush=True)
            return None

    def run_ort():
        if ort.failed:
            return None
        rc, out, err, rss = run_child(ort_cmd(onnx_path, input_path, threads, iterations, ort_out), env=ort_env)
        if rc != 0:
            ort.failed = last_line(err or out)
            print(f"  {name}: onnxruntime failed: {ort.failed}", flush=True)
            return None
        ort.rss = max_rss(ort.rss, rss)
        if ort.error is None:
            ort.error = rel_error(ort_out, reference)
            m = re.search(r"version=(\S+)", out)
            ort.version = m.group(1) if m else "?"
        return median_from(out)

    contenders = [(ipu, run_ipu), (torch_c, run_torch), (ort, run_ort)]
    for r in range(args.rounds):
        # Rotating order: a contender that always ran first (or right after a memory-hungry one)
        # would meet the machine in a state of its own.
        order = contenders[r % 3:] + contenders[:r % 3]
        figures = {}
        for c, run in order:
            figures[c.label] = run()
            c.times.append(figures[c.label])
        if args.verbose:
            shown = " ".join(f"{k}={v:.3f}" for k, v in figures.items() if v is not None)
            print(f"  {name} threads={threads} round {r + 1}: {shown} ms", flush=True)
    if worker is not None:
        try:
            worker.stdin.close()
        except OSError:
            pass
        worker.wait()
        torch_c.rss = read_rss_mb(worker_rss)
    torch_c.error = 0.0  # the reference is PyTorch's own output
    return ipu, torch_c, ort, iterations


def max_rss(a, b):
    return b if a is None else a if b is None else max(a, b)


def ratio_stats(ours, theirs):
    """Median, min and max over rounds of ours / theirs, rounds where both ran."""
    ratios = [a / b for a, b in zip(ours, theirs) if a is not None and b is not None and b > 0]
    if not ratios:
        return None
    return statistics.median(ratios), min(ratios), max(ratios)


def fmt_ms(times):
    vals = [t for t in times if t is not None]
    if not vals:
        return "n/a"
    m = statistics.median(vals)
    return f"{m:.3f}" if m < 1 else f"{m:.2f}" if m < 100 else f"{m:.0f}"


def fmt_ratio(stats):
    return "n/a" if stats is None else f"{stats[0]:.2f} ({stats[1]:.2f}-{stats[2]:.2f})"


def fmt_err(c):
    if c.error is None:
        return "n/a"
    flag = "" if c.error < 1e-4 else " (!)"
    return f"{c.error:.1e}{flag}"


def runtime_rss(ort_env):
    """Peak RSS of the runtimes before any model: Python importing PyTorch and torchvision (what the
    worker imports), node loading onnxruntime-node."""
    _, _, _, torch_rss = run_child([sys.executable, "-c", "import torch, torchvision"])
    ort_rss = None
    if ort_env is not None:
        rc, _, _, rss = run_child(["node", "-e", "require('onnxruntime-node')"], env=ort_env)
        ort_rss = rss if rc == 0 else None
    return torch_rss, ort_rss


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        torch_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    import export_models
    all_models = [*export_models.MODELS, *export_models.LATENCY]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ipu")
    ap.add_argument("--ort-dir", default=None)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--models", default="all")
    ap.add_argument("--model-dir", default=None)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    names = all_models if args.models == "all" else args.models.split(",")
    unknown = [n for n in names if n not in all_models]
    if unknown:
        ap.error(f"unknown models {unknown}; known: {','.join(all_models)}")
    thread_counts = [int(t) for t in args.threads.split(",")]

    ort_env = None
    if args.ort_dir:
        modules = os.path.join(os.path.abspath(args.ort_dir), "node_modules")
        if not os.path.isdir(os.path.join(modules, "onnxruntime-node")):
            ap.error(f"no onnxruntime-node under {modules}")
        if shutil.which("node") is None:
            ap.error("--ort-dir needs node on PATH")
        ort_env = dict(os.environ, NODE_PATH=modules)
    else:
        print("note: ONNX Runtime skipped (no --ort-dir; see benchmarks/README.md to install it)")

    model_dir = args.model_dir or tempfile.mkdtemp(prefix="ipu-bench-")
    os.makedirs(model_dir, exist_ok=True)
    exported = []
    for name in names:
        try:
            export_models.export(name, model_dir)
            exported.append(name)
        except Exception as e:  # noqa: BLE001 - a model torch cannot export is skipped, not fatal
            print(f"skipped {name}: export failed: {e}")

    torch_rss, ort_rss = runtime_rss(ort_env)
    if torch_rss is None:
        print(f"note: peak RSS is n/a without GNU time ({TIME})")
    else:
        print(f"runtime alone, peak RSS: python + torch + torchvision {torch_rss:.0f} MB"
              + (f", node + onnxruntime-node {ort_rss:.0f} MB" if ort_rss else ""))
    print(f"load average before: {os.getloadavg()}", flush=True)

    for threads in thread_counts:
        rows = []
        for name in exported:
            res = measure(args, name, threads, model_dir, ort_env)
            if res is not None:
                rows.append((name, *res))
        versions = {getattr(r[3], "version", None) for r in rows} - {None}
        corenames = {getattr(r[2], "corename", None) for r in rows} - {None}
        print(f"\nthreads={threads}, {args.rounds} paired rounds; PyTorch's OpenBLAS: {','.join(corenames) or '?'}; "
              f"onnxruntime {','.join(versions) or 'n/a'}")
        print("| model | iters | ipu ms | PyTorch ms | ORT ms | ipu / PyTorch | ipu / ORT | ipu err | ORT err "
              "| peak RSS MB ipu / PyTorch / ORT |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        by_torch, by_ort = [], []
        for name, ipu, torch_c, ort, iterations in rows:
            vs_torch = ratio_stats(ipu.times, torch_c.times)
            vs_ort = ratio_stats(ipu.times, ort.times)
            if vs_torch:
                by_torch.append(vs_torch[0])
            if vs_ort:
                by_ort.append(vs_ort[0])
            rss = " / ".join("n/a" if c.rss is None or c.failed else f"{c.rss:.0f}" for c in (ipu, torch_c, ort))
            print(f"| {name} | {iterations} | {fmt_ms(ipu.times)} | {fmt_ms(torch_c.times)} | {fmt_ms(ort.times)} "
                  f"| {fmt_ratio(vs_torch)} | {fmt_ratio(vs_ort)} | {fmt_err(ipu)} | {fmt_err(ort)} | {rss} |")

        def geomean(xs):
            return f"{math.exp(statistics.fmean(math.log(x) for x in xs)):.2f} (n={len(xs)})" if xs else "n/a"
        print(f"| geomean | | | | | {geomean(by_torch)} | {geomean(by_ort)} | | | |", flush=True)
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
