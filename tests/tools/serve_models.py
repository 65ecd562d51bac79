"""The small model the serving tests and benchmarks/serve_load.py serve beside LeNet-5:
y = relu(x * W + B) over rows of 3, the batch dimension dynamic."""
import signal
import subprocess

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


def stop_server(p, timeout=120):
    """SIGTERMs an `ipu serve` process; the problem with its exit, or None when it stopped cleanly
    (exit 0, its stop line, no sanitizer report)."""
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return f"no exit within {timeout} s of SIGTERM"
    err = p.stderr.read()
    if rc != 0 or "stopped (SIGTERM)" not in err or "Sanitizer" in err:
        return f"exit status {rc}, stderr {err[-2000:]!r}"
    return None
