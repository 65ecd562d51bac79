#!/usr/bin/env python3
"""`ipu serve` end to end: compile an ONNX model with `ipu compile`, serve it from a repository on
an ephemeral port, query it with urllib and compare with numpy; then SIGTERM and a clean exit.
With `grpc`, gRPC is served as well (--grpc-port 0): the line and the JSON report its port, which
answers an HTTP/2 client preface with a SETTINGS frame (the gRPC calls themselves are checked by
tests/serve/test_grpc_server.cpp, through the generated C++ client).

Then devices: two models compiled for one Mk2 IPU, served on a simulated system of one IPU
(IPU_SYSTEM, a private IPU_DEVICE_LOCK_DIR): the second is unavailable, its reason naming the IPU
asked for and its holder, until the first is unloaded and a repository load retries it.

check_cli_serve.py IPU WORKDIR [grpc]
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np

from serve_models import B, W, save_affine_model, stop_server


def fail(msg):
    sys.exit(f"check_cli_serve: {msg}")


def request(port, path, body=None, timeout=30):
    """(status, parsed JSON) of a GET (no body) or POST."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def speaks_http2(port):
    """True when the port answers HTTP/2's client preface with a SETTINGS frame, as a gRPC server does."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))  # preface, empty SETTINGS
        head = b""
        while len(head) < 9:
            chunk = s.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
        return head[3] == 4 and head[5:9] == b"\0\0\0\0"  # frame type SETTINGS on stream 0


def check_devices(ipu, work, onnx_file):
    """Each model reserves its own device; one that gets none is unavailable with the reason until a load retries."""
    repo = os.path.join(work, "devices")
    for model in ("a", "b"):
        os.makedirs(os.path.join(repo, model, "1"))
    popef = os.path.join(repo, "a", "1", "model.popef")
    subprocess.run([ipu, "compile", onnx_file, "-o", popef, "--device", "mk2", "--ipus", "1", "--batch", "4"], check=True,
                   capture_output=True, timeout=300)
    shutil.copy(popef, os.path.join(repo, "b", "1", "model.popef"))
    env = dict(os.environ, IPU_SYSTEM="mk2:1", IPU_DEVICE_LOCK_DIR=os.path.join(work, "locks"))
    p = subprocess.Popen([ipu, "serve", "--model-repository", repo, "--http-port", "0"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        if not line.startswith("serving 1 models on http://127.0.0.1:"):  # b has no device
            fail(f"devices: unexpected first line {line!r}; stderr: {p.stderr.read() if p.poll() is not None else ''}")
        port = int(line.rsplit(":", 1)[1])
        status, index = request(port, "/v2/repository/index", b"")
        b = [e for e in index if e["name"] == "b"]
        if status != 200 or len(b) != 1 or b[0]["state"] != "UNAVAILABLE":
            fail(f"devices: index {status} {index}")
        for part in ("no free device: the only device of 1 IPU (device 0) is busy", f"IPU 0 held by process {p.pid} (this process)",
                     "model 'a' version 1 holds IPU 0"):
            if part not in b[0]["reason"]:
                fail(f"devices: the reason {b[0]['reason']!r} does not say {part!r}")
        x = np.array([[1, 2, 3]], dtype=np.float32)
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": x.flatten().tolist()}]}
        status, out = request(port, "/v2/models/b/infer", body)
        if status != 503 or "no free device" not in out.get("error", ""):
            fail(f"devices: infer on b without a device: {status} {out}")
        status, out = request(port, "/v2/repository/models/a/unload", b"")
        if status != 200:
            fail(f"devices: unload a: {status} {out}")
        status, out = request(port, "/v2/repository/models/b/load", b"")
        if status != 200:
            fail(f"devices: load b after unloading a: {status} {out}")
        status, out = request(port, "/v2/models/b/infer", body)
        if status != 200 or out["outputs"][0]["data"] != np.maximum(x * W + B, 0).flatten().tolist():
            fail(f"devices: infer on b once loaded: {status} {out}")
    finally:
        stopped = stop_server(p)
    if stopped:
        fail(f"devices: {stopped}")


def main():
    ipu, work = sys.argv[1], sys.argv[2]
    grpc = len(sys.argv) > 3 and sys.argv[3] == "grpc"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "repo", "affine", "1"))
    # y = relu(x * W + B) over rows of 3, batch dynamic.
    onnx_file = os.path.join(work, "affine.onnx")
    save_affine_model(onnx_file)
    popef = os.path.join(work, "repo", "affine", "1", "model.popef")
    subprocess.run([ipu, "compile", onnx_file, "-o", popef, "--device", "cpu", "--batch", "4"], check=True,
                   capture_output=True, timeout=300)
    with open(os.path.join(work, "repo", "affine", "config.json"), "w") as f:
        json.dump({"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 1000}}, f)

    p = subprocess.Popen([ipu, "serve", "--model-repository", os.path.join(work, "repo"), "--http-port", "0",
                          "--max-request-bytes", "4096", "--json", os.path.join(work, "serve.json")] +
                         (["--grpc-port", "0"] if grpc else []),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()  # printed once the server accepts connections
        if not line.startswith("serving 1 models on http://127.0.0.1:"):
            fail(f"unexpected first line {line!r}; stderr: {p.stderr.read() if p.poll() is not None else ''}")
        grpc_port = None
        if grpc:
            if " and grpc://127.0.0.1:" not in line:
                fail(f"--grpc-port: no gRPC address in {line!r}")
            line, grpc_line = line.split(" and ")
            grpc_port = int(grpc_line.rsplit(":", 1)[1])
            if not speaks_http2(grpc_port):
                fail(f"the gRPC port {grpc_port} does not answer HTTP/2")
        port = int(line.rsplit(":", 1)[1])
        # --json FILE: the same figures, written once serving (a line says so).
        if p.stdout.readline() != f"wrote {os.path.join(work, 'serve.json')} (JSON report)\n":
            fail("no line saying the JSON report was written")
        with open(os.path.join(work, "serve.json")) as f:
            started = json.load(f)
        want = {"models": 1, "bind": "127.0.0.1", "port": port, "url": f"http://127.0.0.1:{port}"}
        if grpc:
            want["grpc_port"] = grpc_port
        if started != want:
            fail(f"--json FILE wrote {started}, the text says {line!r}")

        status, _ = request(port, "/v2/health/ready")
        if status != 200:
            fail(f"ready: status {status}")
        status, meta = request(port, "/v2/models/affine")
        if status != 200 or meta["inputs"] != [{"name": "x", "datatype": "FP32", "shape": [-1, 3]}]:
            fail(f"metadata: {status} {meta}")
        x = np.array([[1, 2, 3], [-1, 0, 4], [0.5, 8, 9], [3, 3, 3], [-2, -2, 20], [1, 1, 1]], dtype=np.float32)
        status, out = request(port, "/v2/models/affine/infer",
                              {"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                           "data": x.flatten().tolist()}]})
        if status != 200:
            fail(f"infer: {status} {out}")
        y = np.array(out["outputs"][0]["data"], dtype=np.float32).reshape(out["outputs"][0]["shape"])
        want = np.maximum(x * W + B, 0)
        if y.shape != want.shape or not np.array_equal(y, want):
            fail(f"infer: got {y.tolist()}, numpy says {want.tolist()}")
        status, out = request(port, "/v2/models/affine/infer", b" " * 5000)
        if status != 413 or "size limit" not in out.get("error", ""):
            fail(f"--max-request-bytes: {status} {out}")
        status, out = request(port, "/v2/models/affine/infer", b"{not json")
        if status != 400 or "malformed JSON" not in out.get("error", ""):
            fail(f"bad JSON: {status} {out}")
    finally:
        stopped = stop_server(p)
    if stopped:
        fail(stopped)
    check_devices(ipu, work, onnx_file)
    shutil.rmtree(work, ignore_errors=True)
    print("ipu serve: metadata, inference equal to numpy, 413 and 400 answers, " +
          ("the gRPC port answering HTTP/2, " if grpc else "") + "clean SIGTERM exit; " +
          "a model without a free device unavailable with the reason until unloading another frees one")


if __name__ == "__main__":
    main()
