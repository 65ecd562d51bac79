"""The small model the serving tests and benchmarks/serve_load.py serve beside LeNet-5:
y = relu(x * W + B) over rows of 3, the batch dimension dynamic."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

W = np.array([2.0, -1.0, 0.5], dtype=np.float32)
B = np.array([1.0, 1.0, -4.0], dtype=np.float32)


def save_affine_model(path):
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["s"]),
         helper.make_node("Relu", ["s"], ["y"])], "affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
