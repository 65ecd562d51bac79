#!/usr/bin/env python3
"""Writes the models the `ipu` CLI tests use: good ones and the ways files go bad.
Usage: make_cli_models.py OUT_DIR LENET5_ONNX"""
import os
import random
import sys

import onnx
from onnx import TensorProto, helper


def main():
    out, lenet = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)

    def write(name, data):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)

    good = open(lenet, "rb").read()
    write("empty.onnx", b"")
    write("truncated.onnx", good[: len(good) // 2])
    rng = random.Random(1234)
    write("garbage.onnx", bytes(rng.randrange(256) for _ in range(4096)))
    write("tensor.onnx", helper.make_tensor("t", TensorProto.FLOAT, [2], [1.0, 2.0]).SerializeToString())

    # Two nodes using an op no library implements, one of them unnamed, plus a supported-looking one.
    frob = helper.make_graph(
        [helper.make_node("Frobnicate", ["x"], ["f"], name="frob1", domain="com.example"),
         helper.make_node("Frobnicate", ["f"], ["g"], domain="com.example"),
         helper.make_node("Relu", ["g"], ["y"], name="relu")],
        "frob", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        value_info=[helper.make_tensor_value_info("f", TensorProto.FLOAT, [2, 3]),
                    helper.make_tensor_value_info("g", TensorProto.FLOAT, [2, 3])])
    write("frobnicate.onnx", helper.make_model(
        frob, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)]).SerializeToString())

    # A dynamic batch dimension that --input-shape fixes.
    dyn = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    write("dynamic.onnx", helper.make_model(dyn, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())

    # A sequence input (--sequence-input binds its elements), concatenated into one tensor.
    seq = helper.make_graph(
        [helper.make_node("ConcatFromSequence", ["xs"], ["y"], axis=0)], "seq",
        [helper.make_tensor_sequence_value_info("xs", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])])
    write("sequence.onnx", helper.make_model(seq, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())

    # Valid protobuf, invalid ONNX: a node reads a tensor nobody defines.
    bad = helper.make_graph(
        [helper.make_node("Add", ["x", "ghost"], ["y"])], "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    write("invalid.onnx", helper.make_model(bad, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())

    # PopTorch options files for --options: settings plan and compile apply, and one they refuse.
    write("options_ok.txt", b"# batches per step and replicas\ndeviceIterations(4)\nreplicationFactor(2)\n")
    write("options_no_bar.txt", b"showCompilationProgressBar(False)\n")
    write("options_training.txt", b"deviceIterations(4)\nTraining.gradientAccumulation(8)\n")


if __name__ == "__main__":
    main()
