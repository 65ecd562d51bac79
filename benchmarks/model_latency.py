#!/usr/bin/env python3
"""Whole-model latency of `ipu run` against PyTorch 1.13 on the same thread count, in the same run.

Exports torchvision AlexNet and MobileNetV2 (batch 4, random weights) with tests/data/export_models.py,
times PyTorch's eager inference and `ipu run MODEL --iterations N --threads T`, and prints the
median latencies and their ratio (ipu / PyTorch; below 1 means ipu is faster).
Usage: /usr/bin/python3 benchmarks/model_latency.py IPU_BINARY [--threads 1] [--iterations 20] [--models alexnet,mobilenet_v2]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "data"))
import export_models  # noqa: E402
import torch_blas  # noqa: E402


def torch_latency_ms(name, x, threads, iterations):
    torch_blas.pin(threads)
    torch.manual_seed(0)
    model = export_models.MODELS[name][0]().eval()
    with torch.no_grad():
        model(x)  # warm-up
        times = []
        for _ in range(iterations):
            t0 = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def ipu_latency_ms(binary, model_path, input_path, threads, iterations, out_dir):
    cmd = [binary, "run", model_path, "--input", f"input={input_path}", "--threads", str(threads),
           "--iterations", str(iterations), "--output-dir", out_dir]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"ipu run failed: {res.stderr.strip()}")
    m = re.search(r"latency_ms median=([0-9.]+)", res.stdout)
    if not m:
        raise SystemExit(f"no latency line in: {res.stdout}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ipu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--models", default="alexnet,mobilenet_v2")
    ap.add_argument("--model-dir", default=None, help="where exported models are kept (default: a temp dir)")
    args = ap.parse_args()
    model_dir = args.model_dir or tempfile.mkdtemp(prefix="ipu-bench-")
    os.makedirs(model_dir, exist_ok=True)
    for name in args.models.split(","):
        export_models.export(name, model_dir)
        onnx_path = os.path.join(model_dir, name + ".onnx")
        input_path = os.path.join(model_dir, name + ".input.npy")
        x = torch.from_numpy(np.load(input_path))
        ours = ipu_latency_ms(args.ipu, onnx_path, input_path, args.threads, args.iterations, model_dir)
        theirs = torch_latency_ms(name, x, args.threads, args.iterations)
        print(f"{name}: threads={args.threads} ipu_ms={ours:.2f} pytorch_ms={theirs:.2f} ratio={ours / theirs:.3f}")


if __name__ == "__main__":
    main()
