#!/usr/bin/env python3
"""`ipu serve` against real clients, two models at once: curl over HTTP, Python's `requests` (JSON
and the binary-tensor extension) and `grpcio` (stubs generated here from the project's
kserve_v2.proto with grpc_tools.protoc) must give exactly what `ipu run` gives on the same inputs.
Then a bounded load (CLIENTS threads, each sending REQUESTS requests alternating between the two
models, every response matched to its request by id and content), and FUZZ hostile requests over
HTTP and gRPC (random bodies, truncated binary tensors, huge declared sizes, unknown models): each
is answered with a KServe error status, and the server (an ASan build in CI) keeps serving and
exits cleanly on SIGTERM, leaks included.

check_serve_clients.py IPU WORKDIR [--grpc] [--clients 16] [--requests 25] [--fuzz 10000]
"""
import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import requests

from serve_models import B, W, save_affine_model, stop_server

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
OK_ERRORS = {400, 404, 405, 413, 503}


def fail(msg):
    sys.exit(f"check_serve_clients: {msg}")


def make_repository(ipu, work):
    """affine (y = relu(x W + B), rows of 3, batch 4) and LeNet-5 (batch 4), both with dynamic batching."""
    repo = os.path.join(work, "repo")
    affine = os.path.join(work, "affine.onnx")
    save_affine_model(affine)
    models = {"affine": (affine, ["--batch", "4"]), "lenet5": (os.path.join(ROOT, "examples", "models", "lenet5.onnx"), [])}
    for name, (src, extra) in models.items():
        os.makedirs(os.path.join(repo, name, "1"))
        subprocess.run([ipu, "compile", src, "-o", os.path.join(repo, name, "1", "model.popef"), "--device", "cpu"] + extra,
                       check=True, capture_output=True, timeout=600)
        with open(os.path.join(repo, name, "config.json"), "w") as f:
            json.dump({"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 500}}, f)
    return repo


def ipu_run(ipu, work, model, name, x):
    """The outputs `ipu run` writes for input `name` = x on the served PopEF file."""
    d = os.path.join(work, "run-" + model)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    np.save(os.path.join(d, "in.npy"), x)
    subprocess.run([ipu, "run", os.path.join(work, "repo", model, "1", "model.popef"), "--input",
                    f"{name}={os.path.join(d, 'in.npy')}", "--output-dir", d, "--threads", "1"],
                   check=True, capture_output=True, timeout=600)
    return {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".npy") and f != "in.npy"}


def json_body(name, x, request_id=None):
    body = {"inputs": [{"name": name, "datatype": "FP32", "shape": list(x.shape), "data": x.flatten().tolist()}]}
    if request_id is not None:
        body["id"] = request_id
    return body


def from_json(out):
    o = out["outputs"][0]
    return o["name"], np.array(o["data"], dtype=np.float32).reshape(o["shape"])


def check_equal(what, got, want):
    if got.shape != want.shape or not np.array_equal(got, want):
        fail(f"{what}: got {got.flatten()[:6]}... {got.shape}, ipu run gives {want.flatten()[:6]}... {want.shape}")


def with_curl(port, model, name, x, work):
    path = os.path.join(work, f"curl-{model}.json")
    with open(path, "w") as f:
        json.dump(json_body(name, x), f)
    r = subprocess.run(["curl", "-sS", "--fail-with-body", "-H", "Content-Type: application/json", "--data-binary",
                        "@" + path, f"http://127.0.0.1:{port}/v2/models/{model}/infer"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"curl {model}: exit {r.returncode}: {r.stdout} {r.stderr}")
    return from_json(json.loads(r.stdout))


def with_requests_binary(port, model, name, x):
    """The binary-tensor extension both ways: raw FP32 in, raw FP32 out."""
    raw = x.astype("<f4").tobytes()
    header = json.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": list(x.shape),
                                     "parameters": {"binary_data_size": len(raw)}}],
                         "parameters": {"binary_data_output": True}}).encode()
    r = requests.post(f"http://127.0.0.1:{port}/v2/models/{model}/infer", data=header + raw, timeout=120,
                      headers={"Inference-Header-Content-Length": str(len(header)),
                               "Content-Type": "application/octet-stream"})
    if r.status_code != 200:
        fail(f"requests, binary {model}: {r.status_code} {r.text[:300]}")
    n = int(r.headers["Inference-Header-Content-Length"])
    head = json.loads(r.content[:n])
    o = head["outputs"][0]
    size = o["parameters"]["binary_data_size"]
    return o["name"], np.frombuffer(r.content[n:n + size], dtype="<f4").reshape(o["shape"])


def grpc_stubs(work):
    out = os.path.join(work, "stubs")
    os.makedirs(out, exist_ok=True)
    proto_dir = os.path.join(ROOT, "include", "ipu", "serve")
    r = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", proto_dir, f"--python_out={out}",
                        f"--grpc_python_out={out}", os.path.join(proto_dir, "kserve_v2.proto")],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"grpc_tools.protoc: {r.stderr}")
    sys.path.insert(0, out)
    import kserve_v2_pb2  # noqa: E402
    import kserve_v2_pb2_grpc  # noqa: E402
    return kserve_v2_pb2, kserve_v2_pb2_grpc


def with_grpc(pb, stub, model, name, x):
    req = pb.ModelInferRequest(model_name=model)
    t = req.inputs.add()
    t.name, t.datatype = name, "FP32"
    t.shape.extend(x.shape)
    req.raw_input_contents.append(x.astype("<f4").tobytes())
    r = stub.ModelInfer(req, timeout=120)
    o = r.outputs[0]
    data = (np.frombuffer(r.raw_output_contents[0], dtype="<f4") if r.raw_output_contents
            else np.array(o.contents.fp32_contents, dtype=np.float32))
    return o.name, data.reshape(list(o.shape))


def load(port, inputs, alone, clients, per_client):
    """CLIENTS threads x per_client one-row requests, alternating models; every answer checked."""
    wrong, answered, errors = [0], [0], []
    lock = threading.Lock()

    def client(c):
        with requests.Session() as s:
            for i in range(per_client):
                model = ("affine", "lenet5")[(c + i) % 2]
                name, rows = inputs[model]
                k = (c * per_client + i) % len(rows)
                rid = f"{c}-{i}"
                try:
                    r = s.post(f"http://127.0.0.1:{port}/v2/models/{model}/infer", json=json_body(name, rows[k], rid),
                               timeout=120)
                    out = r.json()
                    ok = r.status_code == 200 and out.get("id") == rid and out.get("model_name") == model
                    ok = ok and np.array_equal(from_json(out)[1], alone[model][k])
                except Exception as e:  # noqa: BLE001 - counted and reported below
                    ok = False
                    with lock:
                        errors.append(repr(e))
                with lock:
                    answered[0] += 1
                    wrong[0] += not ok

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if answered[0] != clients * per_client or wrong[0]:
        fail(f"load: {answered[0]} of {clients * per_client} answered, {wrong[0]} wrong or lost; {errors[:3]}")


def fuzz_http(port, count, inputs, rng):
    """count hostile requests over one keep-alive connection, each of which must be answered."""
    name, rows = inputs["affine"]
    valid = json.dumps(json_body(name, rows[0])).encode()
    raw = rows[0].astype("<f4").tobytes()
    statuses = {}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for n in range(count):
        kind = n % 8
        path, headers = "/v2/models/affine/infer", {"Content-Type": "application/json"}
        if kind == 0:  # random bytes
            body = rng.randbytes(rng.randrange(0, 600))
        elif kind == 1:  # a valid body cut short, or with a byte flipped
            body = bytearray(valid[:rng.randrange(0, len(valid))] if rng.random() < 0.5 else valid)
            if body and rng.random() < 0.5:
                body[rng.randrange(len(body))] = rng.randrange(256)
            body = bytes(body)
        elif kind == 2:  # huge or negative declared shapes, wrong types and counts
            shape = rng.choice([[2**62, 3], [-1, 3], [1, 3, 2**40], [0, 3], [1, 4], [1], [2**31, 2**31]])
            dtype = rng.choice(["FP32", "FP64", "INT64", "BYTES", "BOOL", "FP16", "nope"])
            data = rng.choice([[1.0, 2.0, 3.0], [], ["a"], [[1, 2], [3]], None, 7])
            body = json.dumps({"inputs": [{"name": rng.choice([name, "zz", ""]), "datatype": dtype,
                                           "shape": shape, "data": data}]}).encode()
        elif kind == 3:  # the binary extension with a header length or binary size that lies
            size = rng.choice([len(raw), len(raw) - 1, len(raw) + 4, 2**63, -5, 0])
            header = json.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": [1, 3],
                                             "parameters": {"binary_data_size": size}}]}).encode()
            body = header + raw[:rng.randrange(0, len(raw) + 1)]
            headers = {"Inference-Header-Content-Length": str(rng.choice([len(header), len(header) + 7, 0, -3, 2**70,
                                                                          len(body) + 1])),
                       "Content-Type": "application/octet-stream"}
        elif kind == 4:  # unknown models and versions, odd paths
            path = rng.choice(["/v2/models/nope/infer", "/v2/models/affine/versions/9/infer",
                               "/v2/models/affine/versions/-1/infer", "/v2/models/%00/infer",
                               "/v2/models/" + "a" * 5000 + "/infer", "/v2/models/affine/versions/1/infer"])
            body = valid
        elif kind == 5:  # outputs requested by names that do not exist, or malformed
            body = json.dumps(dict(json.loads(valid), outputs=rng.choice(
                [[{"name": "nope"}], [{}], "y", [{"name": "y", "parameters": {"binary_data": "yes"}}]]))).encode()
        elif kind == 6:  # deeply nested JSON
            depth = rng.randrange(100, 100000)
            body = b"[" * depth + b"]" * rng.choice([depth, 0])
        else:  # the size limit (--max-request-bytes)
            body = b" " * 70000
        try:
            conn.request("POST", path, body=body, headers=headers)
            r = conn.getresponse()
            payload = r.read()
        except (http.client.HTTPException, ConnectionError, TimeoutError) as e:
            # Every request here is one the server can read to the end: each deserves an answer.
            fail(f"fuzz request {n} (kind {kind}): no answer ({e!r}) for {path} {headers} {body[:300]!r}")
        statuses[r.status] = statuses.get(r.status, 0) + 1
        if r.status != 200:
            if r.status not in OK_ERRORS:
                fail(f"fuzz request {n} (kind {kind}): status {r.status} {payload[:200]!r} for {path} "
                     f"{headers} {body[:300]!r}")
            try:
                err = json.loads(payload)["error"]
            except (ValueError, KeyError, TypeError):
                fail(f"fuzz request {n} (kind {kind}): status {r.status} without an error JSON: {payload[:200]!r}")
            if not isinstance(err, str) or not err:
                fail(f"fuzz request {n} (kind {kind}): empty error")
    conn.close()
    return statuses


def fuzz_grpc(channel, count, valid, rng):
    """count ModelInfer messages, random bytes or a valid request's bytes mutated: each answered (an
    error status or outputs), never a crash or a hang. gRPC itself answers INTERNAL for bytes that
    do not parse as the request message, before any of the server's code runs."""
    import grpc
    infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                request_serializer=lambda b: b, response_deserializer=lambda b: b)
    codes = {}
    for n in range(count):
        if n % 2:
            body = rng.randbytes(rng.randrange(0, 300))
        else:
            body = bytearray(valid[:rng.randrange(1, len(valid) + 1)] if rng.random() < 0.3 else valid)
            for _ in range(rng.randrange(1, 4)):
                body[rng.randrange(len(body))] = rng.randrange(256)
            body = bytes(body)
        try:
            infer(body, timeout=60)
            code = "OK"
        except grpc.RpcError as e:
            code = e.code().name
            if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "UNKNOWN"):
                fail(f"gRPC fuzz request {n}: {code} {e.details()}")
        codes[code] = codes.get(code, 0) + 1
    return codes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ipu")
    ap.add_argument("work")
    ap.add_argument("--grpc", action="store_true")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=25)
    ap.add_argument("--fuzz", type=int, default=10000)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    repo = make_repository(a.ipu, a.work)

    rng = np.random.default_rng(7)
    x_affine = rng.standard_normal((4, 3)).astype(np.float32) * 4
    x_lenet = np.load(os.path.join(ROOT, "examples", "models", "lenet5.input.npy")).astype(np.float32)
    want = {"affine": ("y", ipu_run(a.ipu, a.work, "affine", "x", x_affine)["y"]),
            "lenet5": ("probabilities", ipu_run(a.ipu, a.work, "lenet5", "image", x_lenet)["probabilities"])}
    check_equal("ipu run, affine, against numpy", want["affine"][1], np.maximum(x_affine * W + B, 0))

    p = subprocess.Popen([a.ipu, "serve", "--model-repository", repo, "--http-port", "0", "--max-request-bytes", "65536"] +
                         (["--grpc-port", "0"] if a.grpc else []),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    statuses, codes = {}, {}
    clock = [time.perf_counter()]

    def timed(what):  # phases' wall time, printed at the end (the CI step's budget)
        now = time.perf_counter()
        phases.append(f"{what} {now - clock[0]:.1f} s")
        clock[0] = now

    phases = []
    try:
        line = p.stdout.readline()
        if not line.startswith("serving 2 models on http://127.0.0.1:"):
            fail(f"unexpected first line {line!r}; stderr: {p.stderr.read() if p.poll() is not None else ''}")
        grpc_port = None
        if a.grpc:
            line, grpc_line = line.split(" and ")
            grpc_port = int(grpc_line.rsplit(":", 1)[1])
        port = int(line.rsplit(":", 1)[1])
        timed("start")

        x = {"affine": ("x", x_affine), "lenet5": ("image", x_lenet)}
        for model, (name, value) in x.items():
            out_name, want_value = want[model]
            got = with_curl(port, model, name, value, a.work)
            if got[0] != out_name:
                fail(f"curl {model}: output {got[0]!r}")
            check_equal(f"curl {model}", got[1], want_value)
            r = requests.post(f"http://127.0.0.1:{port}/v2/models/{model}/versions/1/infer", json=json_body(name, value),
                              timeout=120)
            if r.status_code != 200:
                fail(f"requests {model}: {r.status_code} {r.text[:300]}")
            check_equal(f"requests, JSON, {model}", from_json(r.json())[1], want_value)
            check_equal(f"requests, binary, {model}", with_requests_binary(port, model, name, value)[1], want_value)
        # The example client (examples/kserve_client.py), each way, saving what it receives.
        np.save(os.path.join(a.work, "lenet5.input.npy"), x_lenet)
        ways = [["--url", f"http://127.0.0.1:{port}"], ["--url", f"http://127.0.0.1:{port}", "--binary"]]
        if a.grpc:
            ways.append(["--grpc", f"127.0.0.1:{grpc_port}"])
        for k, way in enumerate(ways):
            saved = os.path.join(a.work, f"client-{k}")
            subprocess.run([sys.executable, os.path.join(ROOT, "examples", "kserve_client.py"), "lenet5",
                            "image=" + os.path.join(a.work, "lenet5.input.npy"), "--save", saved] + way,
                           check=True, capture_output=True, timeout=300)
            check_equal(f"examples/kserve_client.py {' '.join(way)}", np.load(os.path.join(saved, "probabilities.npy")),
                        want["lenet5"][1])
        # Errors the protocol defines, through requests.
        r = requests.post(f"http://127.0.0.1:{port}/v2/models/nope/infer", json=json_body("x", x_affine), timeout=60)
        if r.status_code != 404 or "error" not in r.json():
            fail(f"unknown model: {r.status_code} {r.text[:200]}")
        r = requests.post(f"http://127.0.0.1:{port}/v2/models/affine/infer", json=json_body("x", x_lenet), timeout=60)
        if r.status_code != 400 or "error" not in r.json():
            fail(f"wrong shape: {r.status_code} {r.text[:200]}")

        channel = None
        if a.grpc:
            import grpc
            pb, pb_grpc = grpc_stubs(a.work)
            channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            if not stub.ServerLive(pb.ServerLiveRequest(), timeout=60).live:
                fail("gRPC ServerLive: not live")
            if not stub.ModelReady(pb.ModelReadyRequest(name="lenet5"), timeout=60).ready:
                fail("gRPC ModelReady: lenet5 not ready")
            for model, (name, value) in x.items():
                got = with_grpc(pb, stub, model, name, value)
                if got[0] != want[model][0]:
                    fail(f"gRPC {model}: output {got[0]!r}")
                check_equal(f"gRPC {model}", got[1], want[model][1])
            try:
                stub.ModelInfer(pb.ModelInferRequest(model_name="nope"), timeout=60)
                fail("gRPC: an unknown model answered")
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.NOT_FOUND:
                    fail(f"gRPC unknown model: {e.code()} {e.details()}")

        # Load: one-row requests, each row's answer known from a run of its own.
        inputs = {"affine": ("x", [x_affine[i:i + 1] for i in range(4)]),
                  "lenet5": ("image", [x_lenet[i:i + 1] for i in range(4)])}
        alone = {m: [want[m][1][i:i + 1] for i in range(4)] for m in inputs}
        timed("clients")
        load(port, inputs, alone, a.clients, a.requests)
        timed("load")
        statuses = fuzz_http(port, a.fuzz, inputs, random.Random(11))
        timed("HTTP fuzz")
        if channel is not None:
            valid = pb.ModelInferRequest(model_name="affine", inputs=[pb.ModelInferRequest.InferInputTensor(
                name="x", datatype="FP32", shape=[1, 3])], raw_input_contents=[x_affine[:1].tobytes()])
            codes = fuzz_grpc(channel, max(a.fuzz // 10, 1), valid.SerializeToString(), random.Random(12))
            timed("gRPC fuzz")
            channel.close()
        # Still serving, and still right.
        check_equal("after the fuzzing, requests", from_json(requests.post(
            f"http://127.0.0.1:{port}/v2/models/affine/infer", json=json_body("x", x_affine), timeout=60).json())[1],
            want["affine"][1])
    finally:
        stopped = stop_server(p)
    if stopped:
        fail(stopped)
    shutil.rmtree(a.work, ignore_errors=True)
    print(f"ipu serve, two models: curl, requests (JSON, binary) " + ("and grpcio " if a.grpc else "") +
          f"equal to ipu run; {a.clients} x {a.requests} requests all matched; {a.fuzz} fuzzed HTTP requests "
          f"answered {dict(sorted(statuses.items()))}" + (f", gRPC {codes}" if a.grpc else "") + "; clean SIGTERM exit ("
          + ", ".join(phases) + ")")


if __name__ == "__main__":
    main()
