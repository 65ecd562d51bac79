#!/usr/bin/env python3
"""Load on `ipu serve` (loopback, bounded): two models served at once (LeNet-5 and a small affine
model, each compiled with a batch of 4), CLIENTS threads x REQUESTS one-row requests alternating
between them, served without and then with dynamic batching, in the same run. Every response is
matched to its request (its id, its model, and the row's answer from a request of its own). Prints
p50 / p99 latency, throughput, and the batching gain as a ratio.

serve_load.py IPU LENET_ONNX [--clients 16] [--requests 500]
"""
import argparse
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request

import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "tools"))
from serve_models import save_affine_model  # noqa: E402

INPUT = {"lenet5": ("image", (1, 1, 28, 28)), "affine": ("x", (1, 3))}


def post(port, model, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/{model}/infer", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def body(model, x, rid=None):
    name, shape = INPUT[model]
    b = {"inputs": [{"name": name, "datatype": "FP32", "shape": list(shape), "data": x.flatten().tolist()}]}
    if rid is not None:
        b["id"] = rid
    return b


def serve(ipu, repo):
    p = subprocess.Popen([ipu, "serve", "--model-repository", repo, "--http-port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("serving 2 models"):
        raise SystemExit(f"ipu serve did not start: {line!r}")
    return p, int(line.rsplit(":", 1)[1])


def load(ipu, repo, config, inputs, clients, requests):
    for model in INPUT:
        cfg = os.path.join(repo, model, "config.json")
        if config:
            with open(cfg, "w") as f:
                json.dump(config, f)
        elif os.path.exists(cfg):
            os.remove(cfg)
    p, port = serve(ipu, repo)
    try:
        # Each row's answer from a request of its own (this also warms the server up).
        alone = {m: [np.array(post(port, m, body(m, x))["outputs"][0]["data"]) for x in inputs[m]] for m in INPUT}
        latencies, wrong = [], [0]
        lock = threading.Lock()

        def client(c):
            mine = []
            for i in range(requests):
                model = ("lenet5", "affine")[(c + i) % 2]
                k = (c * requests + i) % len(inputs[model])
                rid = f"{c}-{i}"
                t0 = time.perf_counter()
                out = post(port, model, body(model, inputs[model][k], rid))
                mine.append(time.perf_counter() - t0)
                if (out.get("id") != rid or out.get("model_name") != model or
                        not np.array_equal(np.array(out["outputs"][0]["data"]), alone[model][k])):
                    with lock:
                        wrong[0] += 1
            with lock:
                latencies.extend(mine)

        t0 = time.perf_counter()
        threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    lat = np.array(latencies) * 1e3
    return {"p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
            "requests_per_s": len(lat) / wall, "answered": len(lat), "wrong": wrong[0]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ipu")
    ap.add_argument("onnx")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=500)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        repo = os.path.join(d, "repo")
        save_affine_model(os.path.join(d, "affine.onnx"))
        for model, src, extra in (("lenet5", a.onnx, []), ("affine", os.path.join(d, "affine.onnx"), ["--batch", "4"])):
            os.makedirs(os.path.join(repo, model, "1"))
            subprocess.run([a.ipu, "compile", src, "-o", os.path.join(repo, model, "1", "model.popef"), "--device", "cpu"]
                           + extra, check=True, capture_output=True, timeout=300)
        rng = np.random.default_rng(0)
        inputs = {m: [rng.random(INPUT[m][1], dtype=np.float32) for _ in range(16)] for m in INPUT}
        plain = load(a.ipu, repo, None, inputs, a.clients, a.requests)
        batched = load(a.ipu, repo, {"dynamic_batching": {"max_queue_delay_microseconds": 2000}}, inputs, a.clients,
                       a.requests)
    print(f"{a.clients} clients x {a.requests} requests, alternating between lenet5 and affine")
    for name, r in (("no batching", plain), ("dynamic batching", batched)):
        print(f"{name:17s} p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  {r['requests_per_s']:.0f} requests/s  "
              f"answered {r['answered']}  wrong {r['wrong']}")
    print(f"batching gain (throughput ratio): {batched['requests_per_s'] / plain['requests_per_s']:.2f}")
    if plain["wrong"] or batched["wrong"]:
        raise SystemExit("some responses differ from their request's own answer")


if __name__ == "__main__":
    main()
