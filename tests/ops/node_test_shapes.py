#!/usr/bin/env python3
"""ONNX's own shape inference on ONNX's backend node tests, for tests/ops/test_op_table.cpp.

Generates the node tests from Debian's python3-onnx (tests/conformance/generate_node_tests.py),
then for each test drops the shapes its model declares for its outputs and runs ONNX's shape
inference (strict mode) on the model alone, as tests/ops/infer_reference.py does for single cases.
Writes OUT.json: {"dir": node tests directory, "tests": {test name: {output name: {"type",
"shape"}}}}, listing only outputs ONNX infers a fully static shape for.
Usage: node_test_shapes.py WORK_DIR OUT.json
"""
import json
import os
import subprocess
import sys

import onnx
from onnx import shape_inference


def inferred_outputs(path):
    model = onnx.load(path)
    names = [o.name for o in model.graph.output]
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    try:
        inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception:  # noqa: BLE001 - no inference, nothing to compare
        return {}
    out = {}
    for o in inferred.graph.output:
        if not o.type.HasField("tensor_type"):
            continue
        t = o.type.tensor_type
        if not t.HasField("shape") or any(not d.HasField("dim_value") for d in t.shape.dim):
            continue
        out[o.name] = {"type": t.elem_type, "shape": [d.dim_value for d in t.shape.dim]}
    return out


def main():
    work, out_path = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    generator = os.path.join(here, "..", "conformance", "generate_node_tests.py")
    subprocess.run([sys.executable, generator, work], check=True, stdout=subprocess.DEVNULL)
    node_dir = os.path.join(work, "node")
    tests = {}
    for name in sorted(os.listdir(node_dir)):
        model = os.path.join(node_dir, name, "model.onnx")
        if os.path.exists(model):
            tests[name] = inferred_outputs(model)
    with open(out_path, "w") as f:
        json.dump({"dir": node_dir, "tests": tests}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
