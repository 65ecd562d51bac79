#!/usr/bin/env python3
"""Load on `ipu serve` (loopback, bounded): CLIENTS threads x REQUESTS one-row requests to LeNet-5
compiled with a batch of 4, served without and then with dynamic batching, in the same run. Every
response is checked against the same row run alone. Prints p50 / p99 latency, throughput, and the
batching gain as a ratio.

serve_load.py IPU LENET_ONNX [--clients 8] [--requests 50]
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

import numpy as np


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/lenet5/infer", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def body(x):
    return {"inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 1, 28, 28], "data": x.flatten().tolist()}]}


def serve(ipu, repo):
    p = subprocess.Popen([ipu, "serve", "--model-repository", repo, "--http-port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("serving 1 models"):
        raise SystemExit(f"ipu serve did not start: {line!r}")
    return p, int(line.rsplit(":", 1)[1])


def load(ipu, repo, config, inputs, clients, requests):
    cfg = os.path.join(repo, "lenet5", "config.json")
    if config:
        with open(cfg, "w") as f:
            json.dump(config, f)
    elif os.path.exists(cfg):
        os.remove(cfg)
    p, port = serve(ipu, repo)
    try:
        alone = [np.array(post(port, body(x))["outputs"][0]["data"]) for x in inputs]  # also warms up
        latencies, wrong = [], [0]
        lock = threading.Lock()

        def client(c):
            mine = []
            for i in range(requests):
                k = (c * requests + i) % len(inputs)
                t0 = time.perf_counter()
                out = np.array(post(port, body(inputs[k]))["outputs"][0]["data"])
                mine.append(time.perf_counter() - t0)
                if not np.array_equal(out, alone[k]):
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
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=50)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        repo = os.path.join(d, "repo")
        os.makedirs(os.path.join(repo, "lenet5", "1"))
        subprocess.run([a.ipu, "compile", a.onnx, "-o", os.path.join(repo, "lenet5", "1", "model.popef"),
                        "--device", "cpu"], check=True, capture_output=True, timeout=300)
        rng = np.random.default_rng(0)
        inputs = [rng.random((1, 1, 28, 28), dtype=np.float32) for _ in range(16)]
        plain = load(a.ipu, repo, None, inputs, a.clients, a.requests)
        batched = load(a.ipu, repo, {"dynamic_batching": {"max_queue_delay_microseconds": 2000}}, inputs, a.clients,
                       a.requests)
    for name, r in (("no batching", plain), ("dynamic batching", batched)):
        print(f"{name:17s} p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  {r['requests_per_s']:.0f} requests/s  "
              f"answered {r['answered']}  wrong {r['wrong']}")
    print(f"batching gain (throughput ratio): {batched['requests_per_s'] / plain['requests_per_s']:.2f}")
    if plain["wrong"] or batched["wrong"]:
        raise SystemExit("some responses differ from the row run alone")


if __name__ == "__main__":
    main()
