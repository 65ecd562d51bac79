#!/usr/bin/env python3
"""A PyTorch-quantized ResNet-18, exported to ONNX in QDQ form, run by `ipu run` against PyTorch.

Usage: /usr/bin/python3 benchmarks/quantized_accuracy.py IPU_BINARY [--images 64] [--seed 0]
           [--model-dir DIR]

  IPU_BINARY   the `ipu` tool (build/release/tools/ipu/ipu)
  --images N   random images (seeded, N(0, 1) per pixel) run through every model in one batch
  --seed S     seeds the weights, the calibration batches and the images
  --model-dir  where the exported models and outputs are kept (default: a temp dir)

torchvision's quantizable ResNet-18 is built with random weights (there is no network access for
pretrained ones); a few training-mode batches first give BatchNorm non-trivial running statistics.
It is then quantized the way PyTorch's eager-mode post-training flow does it (fuse Conv+BN+ReLU,
fbgemm qconfig: per-channel int8 weights, uint8 activations; calibrated on 8 random batches;
converted) and exported with torch.onnx at opset 13, which writes QuantizeLinear /
DequantizeLinear pairs around float Conv / Gemm / Add ops. Both the float and the quantized model
are run by PyTorch and by `ipu run` on the same images, the QDQ model twice: as written (float
products between the DequantizeLinear and QuantizeLinear ops) and with `--passes fuse-qdq,default`
(integer QLinearConv, as PyTorch's quantized kernels compute). Reported: top-1 agreement of each ipu run
with PyTorch's float model and with PyTorch's own quantized model, the largest logit difference
relative to the largest |logit|, and how many distinct classes the float model predicts (random
weights predict few, which makes agreement easier: read it with that number).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def ipu_run(ipu, model, images_npy, out_dir, extra=()):
    import onnx
    name = onnx.load(model).graph.input[0].name
    os.makedirs(out_dir, exist_ok=True)
    res = subprocess.run([ipu, "run", model, "--input", f"{name}={images_npy}", "--output-dir", out_dir, *extra],
                         capture_output=True, text=True)
    if res.returncode != 0:
        lines = [l for l in (res.stderr or res.stdout).strip().splitlines() if l.strip()]
        raise RuntimeError(f"ipu run {model}: " + (lines[-1] if lines else f"exit code {res.returncode}"))
    outs = sorted(f for f in os.listdir(out_dir) if f.endswith(".npy"))
    if len(outs) != 1:
        raise RuntimeError(f"ipu run {model}: expected one output in {out_dir}, found {outs}")
    return np.load(os.path.join(out_dir, outs[0]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ipu")
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model-dir")
    args = ap.parse_args()
    if args.images < 1:
        ap.error("--images must be at least 1")

    import torch
    from torchvision.models.quantization import resnet18

    work = args.model_dir or tempfile.mkdtemp(prefix="ipu-qdq-")
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(args.seed)
    model = resnet18(weights=None, quantize=False)
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(16, 3, 224, 224))
    model.eval()
    images = torch.randn(args.images, 3, 224, 224)
    images_npy = os.path.join(work, "images.npy")
    np.save(images_npy, images.numpy())

    print(f"exporting the float model ({args.images} images per batch) ...", flush=True)
    float_onnx = os.path.join(work, "resnet18_f32.onnx")
    torch.onnx.export(model, images, float_onnx, opset_version=13)
    with torch.no_grad():
        ref_float = model(images).numpy()

    print("quantizing (fuse, fbgemm qconfig, 8 calibration batches, convert) and exporting ...", flush=True)
    model.fuse_model()
    model.qconfig = torch.ao.quantization.get_default_qconfig("fbgemm")
    torch.ao.quantization.prepare(model, inplace=True)
    with torch.no_grad():
        for _ in range(8):
            model(torch.randn(16, 3, 224, 224))
    torch.ao.quantization.convert(model, inplace=True)
    qdq_onnx = os.path.join(work, "resnet18_qdq.onnx")
    torch.onnx.export(model, images, qdq_onnx, opset_version=13)
    with torch.no_grad():
        ref_quant = model(images).numpy()
    np.save(os.path.join(work, "torch_f32.npy"), ref_float)
    np.save(os.path.join(work, "torch_int8.npy"), ref_quant)

    print("running both through ipu ...", flush=True)
    ipu_float = ipu_run(args.ipu, float_onnx, images_npy, os.path.join(work, "out_f32"))
    ipu_quant = ipu_run(args.ipu, qdq_onnx, images_npy, os.path.join(work, "out_qdq"))
    ipu_int = ipu_run(args.ipu, qdq_onnx, images_npy, os.path.join(work, "out_int"), ["--passes", "fuse-qdq,default"])

    import onnx
    from collections import Counter
    ops = Counter(n.op_type for n in onnx.load(qdq_onnx).graph.node)
    print(f"QDQ model: {ops['QuantizeLinear']} QuantizeLinear, {ops['DequantizeLinear']} DequantizeLinear, "
          f"{ops['Conv']} Conv, {ops['Gemm']} Gemm")

    def top1(x):
        return x.argmax(axis=1)

    def agree(a, b):
        return float((top1(a) == top1(b)).mean())

    def rel(a, b):
        return float(np.abs(a - b).max() / np.abs(b).max())

    print(f"float model: {len(set(top1(ref_float).tolist()))} distinct classes predicted over {args.images} images")
    print(f"{'run':<28}{'top-1 vs torch f32':>20}{'top-1 vs torch int8':>21}{'max rel diff':>14}")
    print(f"{'ipu, float model':<28}{agree(ipu_float, ref_float):>20.3f}{'':>21}{rel(ipu_float, ref_float):>14.2e}")
    print(f"{'torch, quantized model':<28}{agree(ref_quant, ref_float):>20.3f}{'':>21}{rel(ref_quant, ref_float):>14.2e}")
    print(f"{'ipu, QDQ model':<28}{agree(ipu_quant, ref_float):>20.3f}{agree(ipu_quant, ref_quant):>21.3f}"
          f"{rel(ipu_quant, ref_quant):>14.2e}")
    print(f"{'ipu, QDQ model, fuse-qdq':<28}{agree(ipu_int, ref_float):>20.3f}{agree(ipu_int, ref_quant):>21.3f}"
          f"{rel(ipu_int, ref_quant):>14.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
