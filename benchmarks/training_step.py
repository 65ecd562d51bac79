#!/usr/bin/env python3
"""One training step (forward, cross-entropy loss, backward, SGD update with momentum) of the library's
training session against PyTorch 1.13 eager, both on one thread, in the same run.

Models, random weights, float32, exported to ONNX as tests/train/torch_models.py does for the
training tests (its Encoder class, torch_optimizers.export_for_training):
  resnet18     torchvision ResNet-18, 1000 classes, batch 8 of 3x224x224 (--size changes 224),
               BatchNorm in train() mode
  transformer  nn.TransformerEncoderLayer d_model 512, 8 heads, feed-forward 2048, no dropout, post-norm,
               batch 8 of 128 tokens, mean-pooled into a linear head of 10 classes

Ours runs in training_step_worker (benchmarks/training_step_worker.cpp, release build): a
training_session on a CPU device of --threads kernel threads with one OpenBLAS thread, timed in C++
around training_session::run, so process start, compiling and file IO are not timed. PyTorch runs
here under torch.set_num_threads(--threads), timed around zero_grad, forward, loss, backward and step.

Paired rounds (benchmarks/README.md): each round runs one step of each contender back to back, in
alternating order, so both see the same machine state; both first take one untimed step. Both train
the same weights on the same batch, so their losses must agree: the first step's are compared.
Reported: each contender's median step time, the median over rounds of ours/PyTorch, its smallest
and largest value, and the goal (ours <= PyTorch). --profile then prints where each spends a step.

Usage: /usr/bin/python3 benchmarks/training_step.py build/release/benchmarks/training_step_worker
           [--rounds 9] [--threads 1] [--models resnet18,transformer] [--size 224] [--profile]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "train"))
from torch_models import Encoder  # noqa: E402
from torch_optimizers import export_for_training  # noqa: E402
import torch_blas  # noqa: E402

BATCH = 8
LR, MOMENTUM = 0.01, 0.9


def make(name, size):
    """A fresh model, one batch of inputs and its labels."""
    if name == "resnet18":
        return torchvision.models.resnet18(), torch.randn(BATCH, 3, size, size), torch.randint(0, 1000, (BATCH,))
    if name == "transformer":
        return Encoder(512, 8, 2048, 10), torch.randn(BATCH, 128, 512), torch.randint(0, 10, (BATCH,))
    raise SystemExit(f"unknown model '{name}': use resnet18 or transformer")


class Ours:
    def __init__(self, worker, model_path, x_path, labels_path, threads):
        self.p = subprocess.Popen([worker, model_path, x_path, labels_path, str(LR), str(MOMENTUM), str(threads)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.openblas_core = self.expect("ready").split("openblas_core=")[-1].strip()

    def expect(self, prefix):
        line = self.p.stdout.readline()
        if not line.startswith(prefix):
            self.p.kill()
            raise SystemExit(f"training_step_worker: expected '{prefix}', got '{line.strip()}' (exit {self.p.wait()})")
        return line

    def step(self):
        self.p.stdin.write("step\n")
        fields = dict(kv.split("=") for kv in self.expect("step_ms=").split())
        return float(fields["step_ms"]), float(fields["loss"])

    def profile(self):
        self.p.stdin.write("profile\n")
        lines = []
        while (line := self.p.stdout.readline().rstrip()) != "end":
            if not line:
                raise SystemExit("training_step_worker ended during its profile")
            lines.append(line)
        return lines

    def close(self):
        self.p.stdin.close()
        self.p.wait()


class Torch:
    def __init__(self, model, x, labels):
        self.model, self.x, self.labels = model, x, labels
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

    def step_untimed(self):
        self.opt.zero_grad()
        loss = self.loss_fn(self.model(self.x), self.labels)
        loss.backward()
        self.opt.step()
        return loss

    def step(self):
        t0 = time.perf_counter()
        loss = self.step_untimed()
        return (time.perf_counter() - t0) * 1e3, loss.item()


def bench(name, args, model_dir):
    torch.manual_seed(0)
    model, x, labels = make(name, args.size)
    paths = [os.path.join(model_dir, f"{name}.{f}") for f in ("onnx", "x.npy", "labels.npy")]
    export_for_training(model, x, paths[0])
    np.save(paths[1], x.numpy())
    np.save(paths[2], labels.numpy())
    ours, theirs = Ours(args.worker, *paths, args.threads), Torch(model, x, labels)
    first = ours.step()[1], theirs.step()[1]  # untimed: first-touch allocation on both sides
    if abs(first[0] - first[1]) > 1e-3 * abs(first[1]):
        raise SystemExit(f"{name}: the first step's losses differ: ours {first[0]:.6g}, PyTorch {first[1]:.6g}")
    t_ours, t_torch, ratios = [], [], []
    for r in range(args.rounds):
        if r % 2 == 0:
            a, b = ours.step(), theirs.step()
        else:
            b, a = theirs.step(), ours.step()
        t_ours.append(a[0])
        t_torch.append(b[0])
        ratios.append(a[0] / b[0])
        if args.verbose:
            print(f"  round {r}: ours {a[0]:.1f} ms (loss {a[1]:.5g})  pytorch {b[0]:.1f} ms (loss {b[1]:.5g})")
    ratio = statistics.median(ratios)
    print(f"{name}: threads={args.threads} rounds={args.rounds} ours_ms={statistics.median(t_ours):.1f} "
          f"pytorch_ms={statistics.median(t_torch):.1f} ratio={ratio:.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}) "
          f"goal ours<=pytorch: {'met' if ratio <= 1 else 'not met'}; first loss ours {first[0]:.6g} pytorch {first[1]:.6g}")
    print(f"{name}: OpenBLAS kernels: ours {ours.openblas_core} (F32 products beyond 25^3 multiply-adds run on "
          f"oneDNN), PyTorch {args.torch_openblas_core}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}")
    sys.stdout.flush()
    if args.profile:
        print(f"{name}: ours, kernel time per op type (mean over the steps above):")
        for line in ours.profile():
            print("  " + line)
        with torch.autograd.profiler.profile() as prof:
            theirs.step_untimed()
        print(f"{name}: PyTorch, one step, by self CPU time:")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    ours.close()
    return ratio


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("worker", help="build/release/benchmarks/training_step_worker")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default="resnet18,transformer")
    ap.add_argument("--size", type=int, default=224, help="ResNet-18's image height and width")
    ap.add_argument("--model-dir", default=None, help="where exported models are kept (default: a temp dir)")
    ap.add_argument("--profile", action="store_true", help="then print where each contender spends a step")
    ap.add_argument("--verbose", action="store_true", help="print every round")
    args = ap.parse_args()
    torch.set_num_interop_threads(args.threads)
    args.torch_openblas_core = torch_blas.pin(args.threads)
    model_dir = args.model_dir or tempfile.mkdtemp(prefix="ipu-bench-")
    os.makedirs(model_dir, exist_ok=True)
    ratios = [bench(name, args, model_dir) for name in args.models.split(",")]
    return 0 if all(r <= 1 for r in ratios) else 1


if __name__ == "__main__":
    sys.exit(main())
