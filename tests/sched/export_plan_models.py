#!/usr/bin/env python3
"""Models whose `ipu plan` predictions the scheduler's report quotes, exported at run time.

  matmul_2048.onnx  Y = A x B with A an input [2048, 2048] and B a [2048, 2048] FP32 weight
  resnet50.onnx     torchvision ResNet-50 (random weights), input [batch, 3, 224, 224] with a
                    dynamic batch dimension (fix it with `ipu plan --batch N`)

Usage: export_plan_models.py OUT_DIR [matmul_2048] [resnet50]
"""
import os
import sys

import numpy as np


def matmul(out_dir):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    b = numpy_helper.from_array(rng.standard_normal((2048, 2048), dtype=np.float32) * 0.02, "B")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["A", "B"], ["Y"], name="matmul")],
        "matmul_2048",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [2048, 2048])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2048, 2048])],
        initializer=[b],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out_dir, "matmul_2048.onnx"))


def resnet50(out_dir):
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, x, os.path.join(out_dir, "resnet50.onnx"), opset_version=13, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name in sys.argv[2:] or ["matmul_2048", "resnet50"]:
        {"matmul_2048": matmul, "resnet50": resnet50}[name](out_dir)
        print("exported", os.path.join(out_dir, name + ".onnx"))


if __name__ == "__main__":
    main()
