#!/usr/bin/env python3
"""`ipu plan --train --trace`: the predicted training step as Chrome-trace JSON shows forward,
backward, all-reduce and update on every IPU, in PopART's pipeline order, never two at once on
one IPU, the all-reduce after the last backward and the update after the all-reduce.
Usage: check_plan_trace.py IPU_BINARY LENET5_ONNX"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    ipu, model = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.json")
        subprocess.run([ipu, "plan", model, "--train", "--device", "mk2", "--ipus", "2", "--replicas", "2",
                        "--gradient-accumulation", "4", "--device-iterations", "2", "--loss", "cross-entropy",
                        "--optimizer", "adamw", "--trace", trace], check=True, stdout=subprocess.DEVNULL)
        events = [e for e in json.load(open(trace))["traceEvents"] if e["ph"] == "X"]
    kinds = {e["cat"] for e in events}
    if kinds != {"forward", "backward", "all-reduce", "update"}:
        sys.exit(f"kinds {sorted(kinds)}")
    for ipu_id in (0, 1):
        mine = sorted((e for e in events if e["tid"] == ipu_id), key=lambda e: e["ts"])
        for a, b in zip(mine, mine[1:]):
            if b["ts"] < a["ts"] + a["dur"] - 1e-6:
                sys.exit(f"IPU {ipu_id}: {a['name']} and {b['name']} overlap")
        for update in (0, 1):
            this = [e for e in mine if e["args"]["weight_update"] == update]
            f = [e["args"]["micro_batch"] for e in this if e["cat"] == "forward"]
            b = [e["args"]["micro_batch"] for e in this if e["cat"] == "backward"]
            if f != [0, 1, 2, 3] or b != [0, 1, 2, 3]:
                sys.exit(f"IPU {ipu_id}, update {update}: forwards {f}, backwards {b}")
            last_backward = max(e["ts"] + e["dur"] for e in this if e["cat"] == "backward")
            reduce = [e for e in this if e["cat"] == "all-reduce"]
            upd = [e for e in this if e["cat"] == "update"]
            if len(reduce) != 1 or reduce[0]["ts"] < last_backward - 1e-6:
                sys.exit(f"IPU {ipu_id}: all-reduce {reduce} before the last backward ({last_backward})")
            if not upd or min(e["ts"] for e in upd) < reduce[0]["ts"] + reduce[0]["dur"] - 1e-6:
                sys.exit(f"IPU {ipu_id}: update before the all-reduce ends")
    # Stage 0 (IPU 0) runs micro-batch 0's backward only after stage 1 has run its fused one.
    s1 = min(e["ts"] for e in events if e["tid"] == 1 and e["cat"] == "backward")
    s0 = min(e["ts"] for e in events if e["tid"] == 0 and e["cat"] == "backward")
    if not s0 > s1:
        sys.exit("stage 0's first backward does not follow stage 1's")
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
