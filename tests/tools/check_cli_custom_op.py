#!/usr/bin/env python3
"""`ipu run` / `ipu compile` with `--custom-op LIB.so`: custom ops from a shared library.

check_cli_custom_op.py IPU LIB.so WORKDIR

LIB.so is tests/ops/custom_op_libs/square_ops.cpp built as a module: plugin.ops::SquarePlus
(version 2), y = x * x + offset. The model is one SquarePlus node with offset 0.5.

- Without --custom-op the ONNX model is refused, naming the op, its domain and version and
  --custom-op; with it, y equals numpy's x * x + 0.5.
- A missing library and a library given twice are refused, each naming it.
- Compiled with --custom-op to PopEF, the file runs only with --custom-op again: without it the
  error names plugin.ops::SquarePlus (version 2) and --custom-op; with it y is as above.
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


def ipu_cmd(ipu, *args):
    p = subprocess.run([ipu, *args], capture_output=True, text=True, timeout=600)
    print(f"--- ipu {' '.join(args)}: status {p.returncode}\n{p.stdout}{p.stderr}")
    return p


def refused(p, pattern, what):
    check(p.returncode == 1, f"{what}: exit status {p.returncode}, not 1")
    check(re.search(pattern, p.stderr) is not None, f"{what}: stderr does not match {pattern!r}")


def main():
    ipu, lib, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    node = helper.make_node("SquarePlus", ["x"], ["y"], domain="plugin.ops", offset=0.5)
    graph = helper.make_graph([node], "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("plugin.ops", 2)])
    path = os.path.join(work, "custom.onnx")
    onnx.save(model, path)
    x = np.array([[1, -2, 3], [0.5, 4, -1]], dtype=np.float32)
    np.save(os.path.join(work, "x.npy"), x)
    want = x * x + np.float32(0.5)

    def run(model_path, out, *extra):
        return ipu_cmd(ipu, "run", model_path, "--input", "x=" + os.path.join(work, "x.npy"),
                       "--output-dir", os.path.join(work, out), *extra)

    def output_ok(out, what):
        y = np.load(os.path.join(work, out, "y.npy"))
        check(y.shape == want.shape and np.array_equal(y, want), f"{what}: y = {y}, not {want}")

    refused(run(path, "none"), r"SquarePlus \(domain plugin\.ops, opset 2, node .*--custom-op LIB\.so",
            "ONNX without --custom-op")
    p = run(path, "onnx", "--custom-op", lib)
    check(p.returncode == 0, "ONNX with --custom-op fails")
    if p.returncode == 0:
        output_ok("onnx", "ONNX with --custom-op")
    missing = os.path.join(work, "missing.so")
    refused(run(path, "missing", "--custom-op", missing), re.escape(missing) + r".*does not exist|does not exist.*" + re.escape(missing),
            "a missing library")
    refused(run(path, "twice", "--custom-op", lib, "--custom-op", lib),
            r"plugin\.ops::SquarePlus \(version 2\) is already registered", "a library given twice")

    popef = os.path.join(work, "custom.popef")
    p = ipu_cmd(ipu, "compile", path, "-o", popef, "--device", "mk2", "--ipus", "1", "--strategy", "sharded",
                "--batches-per-step", "1", "--custom-op", lib)
    check(p.returncode == 0, "compile with --custom-op fails")
    refused(ipu_cmd(ipu, "compile", path, "-o", os.path.join(work, "no.popef")), r"SquarePlus \(domain plugin\.ops",
            "compile without --custom-op")
    if p.returncode == 0:
        refused(run(popef, "popef_none"),
                r"custom op plugin\.ops::SquarePlus \(version 2\), which is not registered.*--custom-op LIB\.so",
                "PopEF without --custom-op")
        p = run(popef, "popef", "--custom-op", lib)
        check(p.returncode == 0, "PopEF with --custom-op fails")
        if p.returncode == 0:
            output_ok("popef", "PopEF with --custom-op")

    for what in problems:
        print("FAIL:", what)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
