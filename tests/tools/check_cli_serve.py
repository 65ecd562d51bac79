#!/usr/bin/env python3
"""`ipu serve` end to end: compile an ONNX model with `ipu compile`, serve it from a repository on
an ephemeral port, query it with urllib and compare with numpy; then SIGTERM and a clean exit.
With `grpc`, gRPC is served as well (--grpc-port 0): the line and the JSON report its port, which
answers an HTTP/2 client preface with a SETTINGS frame (the gRPC calls themselves are checked by
tests/serve/test_grpc_server.cpp, through the generated C++ client).

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
    shutil.rmtree(work, ignore_errors=True)
    print("ipu serve: metadata, inference equal to numpy, 413 and 400 answers, " +
          ("the gRPC port answering HTTP/2, " if grpc else "") + "clean SIGTERM exit")


if __name__ == "__main__":
    main()
