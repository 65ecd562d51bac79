#!/usr/bin/env python3
"""Accuracy of 8-bit float compilation: ResNet-18 compiled with `ipu compile --precision` fp32, fp16,
fp8_weight and fp8, each PopEF run on the same random images, compared with the fp32 executable.

Usage: /usr/bin/python3 benchmarks/fp8_accuracy.py IPU_BINARY [--images 64] [--batch 16]
           [--size 224] [--model-dir DIR]

  IPU_BINARY      the `ipu` tool (build/release/tools/ipu/ipu; the asan build works, slowly)
  --images N      random images (standard normal, seed 1), run in batches of --batch
  --batch B       the exported model's batch: each PopEF run takes B images
  --size S        image height and width
  --model-dir DIR where the exported model, images, executables and outputs are kept (default: a
                  temp dir); an existing model there is reused

ResNet-18 is torchvision's with random weights (seed 0). Its BatchNorms' running statistics are
made non-trivial first: at their initial mean 0 / variance 1 they normalise nothing and the
activations of a random network drift by orders of magnitude through the layers, which is not
what a trained network looks like. So the model runs 4 random batches in train mode (cumulative
averages, no gradients), then is exported in eval mode (ONNX opset 13). Each precision is
compiled for one Mk2 IPU (sharded, one stage) and run with `ipu run X.popef`, one process per
batch. Reported per precision: top-1 agreement with the fp32 executable over the images, and the
max relative error (max |y - y_fp32| over max |y_fp32|, over all logits); for fp32 itself the same
against PyTorch (which checks the reference).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

PRECISIONS = ("fp32", "fp16", "fp8_weight", "fp8")


def export(path, batch, size, images, batches_dir):
    import torch
    import torchvision

    torch.manual_seed(0)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    model = torchvision.models.resnet18(weights=None)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative averages over the batches below
    model.train()
    stats = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, 3, size, size, generator=stats))
    model.eval()
    x = torch.randn(images, 3, size, size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch_logits = torch.cat([model(x[i:i + batch]) for i in range(0, images, batch)])
    os.makedirs(batches_dir, exist_ok=True)
    for i in range(0, images, batch):
        np.save(os.path.join(batches_dir, f"{i // batch}.npy"), x[i:i + batch].numpy())
    np.save(os.path.join(batches_dir, "torch.npy"), torch_logits.numpy())
    tmp = path + ".tmp"
    torch.onnx.export(model, x[:batch], tmp, opset_version=13, input_names=["input"], output_names=["logits"])
    os.replace(tmp, path)


def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {res.returncode}\n{res.stderr}")
    return res.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ipu")
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--model-dir")
    args = ap.parse_args()
    if args.images % args.batch:
        sys.exit("--images must be a multiple of --batch")
    work = args.model_dir or tempfile.mkdtemp(prefix="fp8_accuracy_")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, f"resnet18_b{args.batch}_s{args.size}.onnx")
    batches = os.path.join(work, f"images_{args.images}_b{args.batch}_s{args.size}")
    if not (os.path.exists(model) and os.path.exists(os.path.join(batches, "torch.npy"))):
        export(model, args.batch, args.size, args.images, batches)
    n = args.images // args.batch

    logits, sizes = {}, {}
    for p in PRECISIONS:
        popef = os.path.join(work, f"resnet18_{p}.popef")
        run([args.ipu, "compile", model, "-o", popef, "--precision", p, "--device", "mk2", "--ipus", "1",
             "--strategy", "sharded"])
        sizes[p] = os.path.getsize(popef)
        outs = []
        for b in range(n):
            out = os.path.join(work, f"out_{p}_{b}")
            run([args.ipu, "run", popef, "--input", f"input={os.path.join(batches, f'{b}.npy')}", "--output-dir", out])
            outs.append(np.load(os.path.join(out, "logits.npy")).astype(np.float64))
        logits[p] = np.concatenate(outs)
        print(f"  ran {p}", file=sys.stderr, flush=True)

    def compare(got, ref):
        agree = float(np.mean(got.argmax(-1) == ref.argmax(-1)))
        rel = float(np.abs(got - ref).max() / np.abs(ref).max())
        return agree, rel

    torch_logits = np.load(os.path.join(batches, "torch.npy")).astype(np.float64)
    print(f"ResNet-18, {args.images} random {args.size}x{args.size} images, batch {args.batch}, Mk2 1 IPU")
    print(f"{'precision':<11} {'PopEF bytes':>12} {'top-1 vs fp32':>14} {'max rel err':>12}")
    for p in PRECISIONS:
        agree, rel = compare(logits[p], logits["fp32"] if p != "fp32" else torch_logits)
        ref = "  (vs PyTorch)" if p == "fp32" else ""
        print(f"{p:<11} {sizes[p]:>12} {100 * agree:>13.1f}% {rel:>12.2e}{ref}")


if __name__ == "__main__":
    main()
