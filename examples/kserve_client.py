#!/usr/bin/env python3
"""A KServe v2 client for `ipu serve`: sends a .npy file as one input of a served model, over HTTP
(Python's requests, JSON or the binary-tensor extension) or gRPC (grpcio, with client stubs generated
from include/ipu/serve/kserve_v2.proto by grpc_tools.protoc on the first gRPC call), and prints the
outputs (or saves them with --save DIR).

    ipu compile examples/models/lenet5.onnx -o repo/lenet5/1/model.popef --device cpu
    ipu serve --model-repository repo --http-port 8000 --grpc-port 8001 &
    examples/kserve_client.py lenet5 image=examples/models/lenet5.input.npy
    examples/kserve_client.py lenet5 image=examples/models/lenet5.input.npy --grpc 127.0.0.1:8001

Debian packages: python3-numpy, python3-requests; for gRPC python3-grpcio and python3-grpc-tools.
"""
import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

KSERVE_TYPES = {np.dtype("float32"): "FP32", np.dtype("float64"): "FP64", np.dtype("float16"): "FP16",
                np.dtype("int64"): "INT64", np.dtype("int32"): "INT32", np.dtype("int16"): "INT16",
                np.dtype("int8"): "INT8", np.dtype("uint8"): "UINT8", np.dtype("bool"): "BOOL"}
NUMPY_TYPES = {v: k for k, v in KSERVE_TYPES.items()}


def http_infer(url, model, name, x, binary):
    import requests
    x = np.ascontiguousarray(x)
    tensor = {"name": name, "datatype": KSERVE_TYPES[x.dtype], "shape": list(x.shape)}
    if not binary:
        tensor["data"] = x.flatten().tolist()
        r = requests.post(f"{url}/v2/models/{model}/infer", json={"inputs": [tensor]}, timeout=60)
        if r.status_code != 200:
            sys.exit(f"{r.status_code}: {r.json().get('error')}")
        return {o["name"]: np.array(o["data"], dtype=NUMPY_TYPES[o["datatype"]]).reshape(o["shape"])
                for o in r.json()["outputs"]}
    raw = x.astype(x.dtype.newbyteorder("<")).tobytes()
    tensor["parameters"] = {"binary_data_size": len(raw)}
    header = json.dumps({"inputs": [tensor], "parameters": {"binary_data_output": True}}).encode()
    r = requests.post(f"{url}/v2/models/{model}/infer", data=header + raw, timeout=60,
                      headers={"Inference-Header-Content-Length": str(len(header)),
                               "Content-Type": "application/octet-stream"})
    if r.status_code != 200:
        sys.exit(f"{r.status_code}: {r.json().get('error')}")
    n = int(r.headers["Inference-Header-Content-Length"])
    outputs, at = {}, n
    for o in json.loads(r.content[:n])["outputs"]:
        size = o["parameters"]["binary_data_size"]
        dtype = NUMPY_TYPES[o["datatype"]].newbyteorder("<")
        outputs[o["name"]] = np.frombuffer(r.content[at:at + size], dtype=dtype).reshape(o["shape"])
        at += size
    return outputs


def grpc_stubs():
    here = os.path.dirname(os.path.abspath(__file__))
    proto_dir = os.path.join(here, "..", "include", "ipu", "serve")
    out = tempfile.mkdtemp(prefix="kserve-stubs-")
    atexit.register(shutil.rmtree, out, True)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", proto_dir, f"--python_out={out}",
                    f"--grpc_python_out={out}", os.path.join(proto_dir, "kserve_v2.proto")], check=True)
    sys.path.insert(0, out)
    import kserve_v2_pb2
    import kserve_v2_pb2_grpc
    return kserve_v2_pb2, kserve_v2_pb2_grpc


def grpc_infer(address, model, name, x):
    import grpc
    pb, pb_grpc = grpc_stubs()
    x = np.ascontiguousarray(x)
    req = pb.ModelInferRequest(model_name=model)
    t = req.inputs.add()
    t.name, t.datatype = name, KSERVE_TYPES[x.dtype]
    t.shape.extend(x.shape)
    req.raw_input_contents.append(x.astype(x.dtype.newbyteorder("<")).tobytes())
    with grpc.insecure_channel(address) as channel:
        try:
            r = pb_grpc.GRPCInferenceServiceStub(channel).ModelInfer(req, timeout=60)
        except grpc.RpcError as e:
            sys.exit(f"{e.code().name}: {e.details()}")
    return {o.name: np.frombuffer(raw, dtype=NUMPY_TYPES[o.datatype].newbyteorder("<")).reshape(list(o.shape))
            for o, raw in zip(r.outputs, r.raw_output_contents)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("input", help="NAME=FILE.npy")
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="the HTTP server (default %(default)s)")
    ap.add_argument("--binary", action="store_true", help="HTTP: the binary-tensor extension instead of JSON")
    ap.add_argument("--grpc", metavar="HOST:PORT", help="use gRPC at this address instead of HTTP")
    ap.add_argument("--save", metavar="DIR", help="write each output to DIR/<name>.npy instead of printing it")
    a = ap.parse_args()
    if "=" not in a.input:
        ap.error("the input is NAME=FILE.npy")
    if a.grpc and a.binary:
        ap.error("--binary is an HTTP option (gRPC always sends raw tensors)")
    name, path = a.input.split("=", 1)
    x = np.load(path)
    if x.dtype not in KSERVE_TYPES:
        ap.error(f"{path} holds {x.dtype}, which KServe v2 does not carry")
    outputs = grpc_infer(a.grpc, a.model, name, x) if a.grpc else http_infer(a.url, a.model, name, x, a.binary)
    for out_name, value in outputs.items():
        if a.save:
            os.makedirs(a.save, exist_ok=True)
            np.save(os.path.join(a.save, out_name + ".npy"), value)
        else:
            print(f"{out_name} {value.dtype} {list(value.shape)}:\n{value}")


if __name__ == "__main__":
    main()
