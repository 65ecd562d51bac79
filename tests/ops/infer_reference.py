#!/usr/bin/env python3
"""Reference output shapes for tests/ops/test_infer.cpp.

Reads a JSON list of single-op cases, and for each prints the output types and shapes that ONNX's
own shape inference (strict mode) gives, or, for cases marked "torch", what PyTorch's pooling
produces (ONNX 1.12 differs from PyTorch and ONNX Runtime for ceil_mode windows that start in
the padding). Usage: infer_reference.py CASES.json OUT.json
Case: {"op", "opset", "attrs": [{"name", "kind": i|f|s|ints|floats|t, "value"}],
       "inputs": [null | {"type": onnx code, "shape": [...], "values": [...]?}],
       "num_outputs", "reference": "onnx" | "torch"}
Result per case: {"outputs": [{"type", "shape"}]} or {"error": "..."}.
"""
import json
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference


def np_dtype(onnx_type):
    return onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[onnx_type]  # ONNX 1.12 has no helper for this


def attribute(a):
    kind, value = a["kind"], a["value"]
    if kind == "t":
        arr = np.array(value["values"], dtype=np_dtype(value["type"])).reshape(value["shape"])
        return helper.make_attribute(a["name"], numpy_helper.from_array(arr))
    if kind == "f":
        return helper.make_attribute(a["name"], float(value))
    if kind == "floats":
        return helper.make_attribute(a["name"], [float(v) for v in value])
    return helper.make_attribute(a["name"], value)


def onnx_case(case):
    inputs, initializers, names = [], [], []
    for i, spec in enumerate(case["inputs"]):
        if spec is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        if "values" in spec:
            dtype = np_dtype(spec["type"])
            arr = np.array(spec["values"], dtype=dtype).reshape(spec["shape"])
            initializers.append(numpy_helper.from_array(arr, name))
        inputs.append(helper.make_tensor_value_info(name, spec["type"], spec["shape"]))
    outs = [f"out{i}" for i in range(case["num_outputs"])]
    node = helper.make_node(case["op"], names, outs)
    node.attribute.extend(attribute(a) for a in case["attrs"])
    graph = helper.make_graph([node], "case", inputs, [onnx.ValueInfoProto(name=o) for o in outs], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case["opset"])])
    try:
        inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as e:  # noqa: BLE001 - any inference failure is the answer
        return {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    result = []
    for o in inferred.graph.output:
        t = o.type.tensor_type
        if not t.HasField("shape") or any(not d.HasField("dim_value") for d in t.shape.dim):
            return {"error": f"no static shape inferred for {o.name}"}
        result.append({"type": t.elem_type, "shape": [d.dim_value for d in t.shape.dim]})
    return {"outputs": result}


def torch_case(case):
    import torch  # only pooling cases need it

    attrs = {a["name"]: a["value"] for a in case["attrs"]}
    spec = case["inputs"][0]
    n = len(spec["shape"]) - 2
    kernel = attrs["kernel_shape"]
    pads = attrs.get("pads", [0] * 2 * n)
    if pads[:n] != pads[n:]:
        return {"error": "PyTorch pads symmetrically"}
    x = torch.zeros(spec["shape"])
    kw = dict(kernel_size=kernel, stride=attrs.get("strides", [1] * n), padding=pads[:n],
              ceil_mode=bool(attrs.get("ceil_mode", 0)))
    try:
        if case["op"] == "MaxPool":
            y = getattr(torch.nn.functional, f"max_pool{n}d")(x, dilation=attrs.get("dilations", [1] * n), **kw)
        else:
            y = getattr(torch.nn.functional, f"avg_pool{n}d")(x, **kw)
    except Exception as e:  # noqa: BLE001
        return {"error": str(e)}
    return {"outputs": [{"type": spec["type"], "shape": list(y.shape)}]}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    results = [torch_case(c) if c.get("reference") == "torch" else onnx_case(c) for c in cases]
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
