#!/usr/bin/env python3
"""Simulated IPUs against the host device: a model compiled for 4 pipelined IPUs and run through the
Model Runtime, against the same model run whole on the CPU device, on this machine.

Usage: /usr/bin/python3 benchmarks/pipelined_vs_host.py IPU_BINARY [--models NAME,...] [--ipus 4]
           [--rounds 3] [--seconds 2] [--model-dir DIR]

  IPU_BINARY      the release `ipu` tool (build/release/tools/ipu/ipu)
  --models        names from tests/data/export_models.py's MODELS and LATENCY (exported at batch 4,
                  random weights; default: resnet18,mobilenet_v2,googlenet,transformer_encoder,mlp)
  --ipus N        IPUs of the pipelined executable (`ipu compile --ipus N --strategy pipelined`, Mk2)
  --rounds R      paired rounds: each runs both contenders back to back, alternating which goes first
  --seconds S     how long each contender runs per round (`ipu run --duration S`), at least: a
                  model whose 6 steps of 16 requests (of 4 samples) take longer at the host's latency
                  runs that long, so that the pipelined run is timed in its steady state
  --model-dir DIR where exported models and executables are kept between runs (default: a temp dir)

Both contenders run as users run them by default, each given the whole machine: `ipu run MODEL.onnx`
(the CPU device, kernel threads = hardware threads) and `ipu run MODEL.popef` (one engine worker per
pipeline stage, each with hardware-thread kernel threads). Reported per model: each one's samples/s
(median over rounds), the ratio pipelined / host (median of the per-round ratios, min-max; at least
1.0 means the simulated IPUs are no slower than the host device), and whether the two runs' outputs
for the same input are equal bit for bit. Then the geometric mean of the ratios.
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "data"))

STEPS = 6
DEFAULT_MODELS = "resnet18,mobilenet_v2,googlenet,transformer_encoder,mlp"


def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        lines = [l for l in (res.stderr or res.stdout).strip().splitlines() if l.strip()]
        raise RuntimeError(lines[-1] if lines else f"exit code {res.returncode}")
    return res.stdout


def samples_per_s(stdout):
    m = re.search(r"\bsamples_per_s=([0-9.]+)", stdout)
    if not m:
        raise RuntimeError("no samples_per_s in the report")
    return float(m.group(1))


def main():
    import export_models
    known = [*export_models.MODELS, *export_models.LATENCY]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ipu")
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--ipus", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--model-dir", default=None)
    args = ap.parse_args()
    names = args.models.split(",")
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error(f"unknown models {unknown}; known: {','.join(known)}")
    if args.ipus < 1 or args.rounds < 1 or not args.seconds > 0:
        ap.error("--ipus and --rounds must be at least 1, --seconds above 0")

    model_dir = args.model_dir or tempfile.mkdtemp(prefix="ipu-pipelined-")
    os.makedirs(model_dir, exist_ok=True)
    print(f"load average before: {os.getloadavg()}", flush=True)
    print(f"\n{args.ipus} pipelined Mk2 IPUs through the runtime against the CPU device, {args.rounds} paired rounds "
          f"of {args.seconds:g} s each (batch 4)")
    print("| model | host samples/s | pipelined samples/s | pipelined / host | outputs equal |")
    print("|---|---|---|---|---|")
    ratios = []
    for name in names:
        try:
            export_models.export(name, model_dir)
            onnx_path = os.path.join(model_dir, name + ".onnx")
            x = os.path.join(model_dir, name + ".input.npy")
            popef = os.path.join(model_dir, f"{name}.pipelined{args.ipus}.popef")
            run([args.ipu, "compile", onnx_path, "--ipus", str(args.ipus), "--strategy", "pipelined", "-o", popef])
            out = {k: os.path.join(model_dir, f"out-{name}-{k}") for k in ("host", "pipelined")}
            for d in out.values():
                os.makedirs(d, exist_ok=True)
            cmds = {
                "host": [args.ipu, "run", onnx_path, "--input", f"input={x}", "--duration", str(args.seconds),
                         "--output-dir", out["host"]],
                "pipelined": [args.ipu, "run", popef, "--input", f"input={x}", "--duration", str(args.seconds),
                              "--output-dir", out["pipelined"]],
            }
            # Long enough for STEPS whole steps of the PopEF run at the host's latency: a shorter run
            # would mostly time the pipeline filling, not its steady state.
            probe = re.search(r"median=([0-9.]+)", run([*cmds["host"][:5], "--iterations", "3", "--output-dir",
                                                        out["host"]]))
            seconds = max(args.seconds, STEPS * 16 * float(probe.group(1)) / 1e3 if probe else 0.0)
            for k in cmds:
                cmds[k][cmds[k].index("--duration") + 1] = f"{seconds:.3f}"
            figures = {"host": [], "pipelined": []}
            for r in range(args.rounds):
                order = ["host", "pipelined"] if r % 2 == 0 else ["pipelined", "host"]
                for k in order:
                    figures[k].append(samples_per_s(run(cmds[k])))
        except RuntimeError as e:
            print(f"| {name} | skipped: {e} | | | |", flush=True)
            continue
        a = np.load(os.path.join(out["host"], "output.npy"))
        b = np.load(os.path.join(out["pipelined"], "output.npy"))
        equal = a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
        per_round = [p / h for h, p in zip(figures["host"], figures["pipelined"])]
        ratio = statistics.median(per_round)
        ratios.append(ratio)
        print(f"| {name} | {statistics.median(figures['host']):.1f} | {statistics.median(figures['pipelined']):.1f} | "
              f"{ratio:.2f} ({min(per_round):.2f}-{max(per_round):.2f}) | {'yes' if equal else 'NO'} |", flush=True)
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"| geomean | | | {geo:.2f} (n={len(ratios)}) | |")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
