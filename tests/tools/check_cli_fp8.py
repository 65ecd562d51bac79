#!/usr/bin/env python3
"""`ipu compile --precision fp8_weight | fp8` from the command line: the PopEF file holds the Conv
and Gemm weights in one byte an element (well under fp16's file), `ipu run X.popef` runs it, its
outputs are near the F32 model's (and not fp16's bit for bit: the weights really were rounded),
and an unknown precision is refused with one line naming the valid ones.
Usage: check_cli_fp8.py IPU MODEL INPUT_NPY WORK_DIR   (MODEL: LeNet-5 with input 'image')
"""
import glob
import os
import subprocess
import sys

import numpy as np

ipu, model, image, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
problems = []


def run(*args, fail=False):
    p = subprocess.run([ipu, *args], capture_output=True, text=True, timeout=300)
    if (p.returncode != 0) != fail:
        sys.exit(f"ipu {' '.join(args)}: exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def expect(cond, what):
    if not cond:
        problems.append(what)


def outputs(directory):
    files = sorted(glob.glob(os.path.join(directory, "*.npy")))
    expect(len(files) == 1, f"{directory}: one output expected, found {files}")
    return np.load(files[0]).astype(np.float64)


run("run", model, "--input", f"image={image}", "--output-dir", os.path.join(work, "f32"))
want = outputs(os.path.join(work, "f32"))
got, size = {}, {}
for precision in ("fp16", "fp8_weight", "fp8"):
    popef = os.path.join(work, precision + ".popef")
    run("compile", model, "-o", popef, "--precision", precision, "--device", "mk2", "--ipus", "1", "--strategy", "sharded")
    size[precision] = os.path.getsize(popef)
    out = os.path.join(work, precision)
    run("run", popef, "--input", f"image={image}", "--output-dir", out)
    got[precision] = outputs(out)
    expect(got[precision].shape == want.shape, f"{precision}: shape {got[precision].shape}, F32's {want.shape}")
    err = float(np.max(np.abs(got[precision] - want)))
    print(f"{precision}: {size[precision]} bytes, max |probability - F32's| {err:.4f}, "
          f"top-1 agreement {np.mean(got[precision].argmax(-1) == want.argmax(-1)):.2f}")

# The weights are 61706 of LeNet-5's elements: at one byte instead of two the file loses ~60 KB.
expect(size["fp8_weight"] < 0.7 * size["fp16"], f"fp8_weight's file {size['fp8_weight']} is not well under fp16's {size['fp16']}")
expect(abs(size["fp8"] - size["fp8_weight"]) < 0.1 * size["fp8_weight"], f"fp8's file {size['fp8']} and fp8_weight's {size['fp8_weight']}")
# Probabilities: F8143's 4 significant bits move them by a few hundredths at most on this model.
expect(np.max(np.abs(got["fp8_weight"] - want)) < 0.05, "fp8_weight's probabilities are far from F32's")
expect(np.max(np.abs(got["fp8"] - want)) < 0.08, "fp8's probabilities are far from F32's")
expect(np.any(got["fp8_weight"] != got["fp16"]), "fp8_weight gave fp16's outputs: the weights were not rounded")
expect(np.any(got["fp8"] != got["fp8_weight"]), "fp8 gave fp8_weight's outputs: the activations were not rounded")

p = run("compile", model, "-o", os.path.join(work, "bad.popef"), "--precision", "fp4", fail=True)
expect(len(p.stderr.strip().splitlines()) == 1 and not p.stdout, f"a refusal is one line on stderr: {p.stderr!r}")
for name in ("'fp4'", "fp32", "fp16", "fp8_weight", "fp8"):
    expect(name in p.stderr, f"the refusal of --precision fp4 does not name {name}: {p.stderr!r}")

if problems:
    sys.exit("\n".join(problems))
print("ok")
