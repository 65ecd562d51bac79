#!/usr/bin/env python3
"""Checks `ipu info MODEL` against Python's onnx: inputs and outputs (name, type, shape), the
histogram of ops, and the parameter count and bytes.
Usage: check_info.py IPU MODEL [extra ipu info args...]"""
import collections
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

TYPES = {1: "F32", 2: "U8", 3: "S8", 4: "U16", 5: "S16", 6: "S32", 7: "S64", 9: "BOOL", 10: "F16", 11: "F64",
         12: "U32", 13: "U64"}


def main():
    ipu, path, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    p = subprocess.run([ipu, "info", path] + extra, capture_output=True, text=True)
    print(p.stdout)
    print(p.stderr, file=sys.stderr)
    if p.returncode != 0:
        sys.exit(f"ipu info exited with {p.returncode}")
    out = p.stdout
    m = onnx.load(path)
    problems = []

    def expect(pattern):
        if not re.search(pattern, out, re.M):
            problems.append(f"no line matching {pattern!r}")

    inits = {t.name for t in m.graph.initializer}
    for v in list(m.graph.input) + list(m.graph.output):
        if v.name in inits:
            continue
        t = v.type.tensor_type
        dims = ",".join(str(d.dim_value) for d in t.shape.dim)
        expect(rf"^  {re.escape(v.name)} +{TYPES[t.elem_type]}\[{dims}\]$")
    hist = collections.Counter(n.op_type for n in m.graph.node if n.op_type != "Constant")
    expect(rf"^ops +{sum(hist.values()):,} \({len(hist)} types\)$")
    for op, n in hist.items():
        expect(rf"^  {op} +{n}$")
    params = sum(int(np.prod(t.dims)) for t in m.graph.initializer)
    nbytes = sum(numpy_helper.to_array(t).nbytes for t in m.graph.initializer)
    expect(rf"^parameters +{params:,} in {len(inits):,} weights \({nbytes:,} bytes\)$")
    opset = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")][0]
    expect(rf"^opsets +ai\.onnx {opset}")
    if problems:
        sys.exit("FAILED: " + "; ".join(problems))


if __name__ == "__main__":
    main()
