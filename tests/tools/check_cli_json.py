#!/usr/bin/env python3
"""`--json` on every subcommand: `--json FILE` writes JSON holding the figures the text prints in
the same invocation (each figure formatted as the text formats it must give the text's string),
`--json` alone prints only that JSON on stdout. Also `ipu run --profile FILE`: a Chrome trace with a
span per run and, nested in it, one span per op the CPU device executed, named after the model's ops.
(ipu train's JSON: check_cli_train.py; ipu serve's: check_cli_serve.py.)
Usage: check_cli_json.py IPU LENET5.onnx WORK_DIR
"""
import json
import os
import re
import subprocess
import sys

import onnx

ipu, lenet, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
problems = []


def run(*args, fail=False):
    p = subprocess.run([ipu, *args], capture_output=True, text=True, timeout=300)
    if (p.returncode != 0) != fail:
        sys.exit(f"ipu {' '.join(args)}: exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def with_json(name, *args, same_stdout=True):
    """Runs `ipu ARGS --json FILE` (text and JSON of one run) and, when `same_stdout`, `ipu ARGS
    --json`, whose stdout must be that JSON alone (figures that do not depend on timing)."""
    f = os.path.join(work, name + ".json")
    text = run(*args, "--json", f).stdout
    with open(f) as fh:
        j = json.load(fh)
    if f"wrote {f} (JSON report)" not in text:
        problems.append(f"{name}: the text does not say it wrote {f}")
    if same_stdout:
        alone = json.loads(run(*args, "--json").stdout)  # stdout is JSON only, or this raises
        if alone != j:
            problems.append(f"{name}: --json alone printed other JSON than --json FILE wrote")
    return text, j


def expect(name, text, pattern):
    if not re.search(pattern, text, re.M):
        problems.append(f"{name}: no line matching {pattern!r} in:\n{text}")


def f(v, d):
    return f"{v:.{d}f}"


def mib(b):
    return f(b / 1048576, 1) + " MiB"


E = re.escape

# version
text, j = with_json("version", "version")
expect("version", text, rf"^{E(j['name'])} {E(j['version'])}$")

# model: every GEMM row, sync and all-reduce row
text, j = with_json("model", "model", "--device", "mk1")
expect("model", text, rf"^device {j['device']}: {j['tiles']} tiles at {f(j['clock_hz'] / 1e9, 3)} GHz")
for g in j["gemm"]:
    expect("model", text, rf"^  {E(g['precision'])} +{g['n']} +{f(g['tflops'], 2)} +{f(100 * g['efficiency'], 1)}% "
                          rf"+{f(g['peak_tflops'], 2)} +{g['tiles_used']}")
for s in j["sync"]:
    expect("model", text, rf"^ +{s['ipus']} IPUs +{s['cycles']} cycles +{f(s['seconds'] * 1e9, 1)} ns$")
for r in j["all_reduce"]:
    expect("model", text, rf"^ +{r['replicas']} replicas +{f(r['seconds'] * 1e6, 1)} us  "
                          rf"{f(r['algorithm_bytes_per_second'] / 1e9, 2)} GB/s$")

# info: against the text and against Python's onnx
text, j = with_json("info", "info", lenet)
m = onnx.load(lenet)
for t in j["inputs"] + j["outputs"]:
    expect("info", text, rf"^  {E(t['name'])} +{E(t['type'])}$")
    if t["type"] != f"{t['dtype']}[{','.join(map(str, t['shape']))}]":
        problems.append(f"info: {t} type and shape disagree")
if [t["name"] for t in j["inputs"]] != [i.name for i in m.graph.input if i.name not in
                                        {x.name for x in m.graph.initializer}]:
    problems.append(f"info: inputs {j['inputs']} are not the model's")
expect("info", text, rf"^ops +{j['ops']:,} \({len(j['op_types'])} types\)$")
for o in j["op_types"]:
    expect("info", text, rf"^  {E(o['type'])} +{o['count']}$")
if sum(o["count"] for o in j["op_types"]) != j["ops"]:
    problems.append("info: the op histogram does not add up to the op count")
expect("info", text, rf"^parameters +{j['parameters']:,} in {j['weights']:,} weights \({j['parameter_bytes']:,} bytes\)$")
expect("info", text, rf"^constants +{j['constants']:,} \({j['constant_bytes']:,} bytes\)$")
expect("info", text, rf"^format +ONNX IR {j['ir_version']}")
expect("info", text, rf"^opsets +{E(j['opsets'][0]['domain'])} {j['opsets'][0]['version']}")
if j["unsupported"] != []:
    problems.append(f"info: LeNet has unsupported ops {j['unsupported']}")

# plan (inference, pipelined over 4 IPUs): memory per IPU, cycles per stage, the prediction
text, j = with_json("plan", "plan", lenet, "--ipus", "4")
if len(j["memory"]) != 4 or len(j["stages"]) != 4:
    problems.append(f"plan: {len(j['memory'])} memory rows and {len(j['stages'])} stages, not 4")
for mem in j["memory"]:
    expect("plan", text, rf"^{mem['ipu']} +{E(mib(mem['total_bytes']))} +\( *{f(100 * mem['total_bytes'] / mem['ipu_bytes'], 1)}%\) "
                         rf"+{f(mem['worst_tile_bytes'] / 1024, 1)} KiB .* on tile {mem['worst_tile']}$")
for s in j["stages"]:
    expect("plan", text, rf"^{s['stage']} +{s['ipu']} +- +{s['ops']} +{s['cycles']} +{f(s['seconds'] * 1e6, 2)} +{s['compute']} "
                         rf"+{s['in']} +{s['out']} +{s['sync']}{'  <- slowest' if s['slowest'] else ''}$")
p = j["predicted"]
expect("plan", text, rf"^predicted: {p['cycles_per_step']} cycles per step = {f(p['seconds_per_step'] * 1e3, 3)} ms; latency "
                     rf"{p['latency_cycles']} cycles = {f(p['latency_seconds'] * 1e3, 3)} ms; throughput "
                     rf"{f(p['samples_per_second'], 1)} samples/s$")
expect("plan", text, rf"^pipeline bubble: {f(100 * j['pipeline_bubble'], 1)}%$")
expect("plan", text, rf"^device iterations: {j['device_iterations']} micro-batches per step$")
expect("plan", text, rf"strategy: {j['strategy']}, {j['ipus_per_replica']} IPUs per replica x {j['replicas']} replica")

# plan --train: per-IPU memory, per-stage cycles, all-reduce, weight update, samples/s
text, j = with_json("plan_train", "plan", lenet, "--train", "--device", "bow", "--device-iterations", "1", "--loss",
                    "cross-entropy", "--optimizer", "adam", "--ipus", "2", "--replicas", "2", "--gradient-accumulation", "3")
b = j["batch"]
expect("plan_train", text, rf"^batch: micro-batch {b['micro_batch']} x gradient accumulation {b['gradient_accumulation']} x "
                           rf"{b['replicas']} replicas = global batch {b['global_batch']}")
for mem in j["memory"]:
    expect("plan_train", text, rf"^{mem['ipu']} +{E(mib(mem['plan_bytes']))} +{E(mib(mem['activation_bytes']))} "
                               rf"+{E(mib(mem['stash_bytes']))} +{E(mib(mem['gradient_bytes']))} +{E(mib(mem['optimizer_bytes']))} "
                               rf"+{E(mib(mem['total_bytes']))} +{f(100 * mem['total_bytes'] / mem['ipu_bytes'], 1)}%$")
for s in j["stages"]:
    expect("plan_train", text, rf"^{s['stage']} +{s['ipu']} +{s['forward_ops']}/{s['backward_ops']}/{s['update_ops']} "
                               rf"+{s['forward']} +{s['backward']} +{s['recompute']} +{s['update']} *$")
# plan --train --recompute: a pipeline's backward stages rerun forward ops (the host executor's
# rule), costed in the recompute column; nothing else in the step changes. LeNet over 2 IPUs: the
# last stage (its own backward) reruns nothing; NormOnly finds no normalisation; Standard and
# RecomputeAll rerun the same ops (the stage's input is the checkpoint).
per_mode = {}
for mode in ("none", "standard", "norm-only", "all"):
    t, jm = with_json("plan_train_recompute_" + mode, "plan", lenet, "--train", "--device", "bow", "--device-iterations", "1",
                      "--loss", "cross-entropy", "--ipus", "2", "--strategy", "pipelined", "--gradient-accumulation", "3",
                      "--recompute", mode, same_stdout=False)
    for s in jm["stages"]:
        expect("plan_train_recompute_" + mode, t, rf"^{s['stage']} +{s['ipu']} +{s['forward_ops']}/{s['backward_ops']}/"
                                                  rf"{s['update_ops']} +{s['forward']} +{s['backward']} +{s['recompute']} "
                                                  rf"+{s['update']} *$")
    per_mode[mode] = jm
rec = {m: [s["recompute"] for s in jm["stages"]] for m, jm in per_mode.items()}
if rec["none"] != [0, 0] or rec["norm-only"] != [0, 0] or rec["standard"] != rec["all"] or rec["standard"][0] <= 0 \
        or rec["standard"][1] != 0 or rec["standard"][0] > per_mode["standard"]["stages"][0]["forward"]:
    problems.append(f"plan --train --recompute: recompute cycles per stage {rec}")
strip = lambda jm: [{k: v for k, v in s.items() if k != "recompute"} for s in jm["stages"]]
if any(strip(jm) != strip(per_mode["none"]) for jm in per_mode.values()):
    problems.append("plan --train --recompute: the forward, backward or update changed with the recomputation")
if not per_mode["standard"]["weight_update"]["accumulation_cycles"] > per_mode["none"]["weight_update"]["accumulation_cycles"]:
    problems.append("plan --train --recompute standard: the micro-batches do not take longer than with none")
for bad, message in ((["--strategy", "sharded", "--recompute", "all"], "was asked of a step that is not pipelined"),
                     (["--recompute", "bogus"], "unknown recomputation 'bogus'")):
    r = run("plan", lenet, "--train", "--ipus", "2", "--gradient-accumulation", "3", *bad, fail=True)
    if message not in r.stderr:
        problems.append(f"plan --train {' '.join(bad)}: stderr {r.stderr!r}")
if "--recompute applies to training" not in run("plan", lenet, "--recompute", "all", fail=True).stderr:
    problems.append("plan --recompute without --train is not refused")

ar = j["all_reduce"]
expect("plan_train", text, rf"^all-reduce: {E(mib(ar['gradient_bytes']))} of gradients per IPU over {ar['replicas']} replicas: "
                           rf"{ar['cycles']} cycles = {f(ar['seconds'] * 1e3, 3)} ms")
w = j["weight_update"]
expect("plan_train", text, rf"^weight update: micro-batches {w['accumulation_cycles']} cycles \(bubble "
                           rf"{f(100 * w['pipeline_bubble'], 1)}%\) \+ all-reduce {w['all_reduce_cycles']} \+ optimizer "
                           rf"{w['optimizer_cycles']} \+ outputs {w['output_cycles']} = {w['cycles']} cycles = "
                           rf"{f(w['seconds'] * 1e3, 3)} ms$")
p = j["predicted"]
expect("plan_train", text, rf"^predicted: {p['cycles_per_step']} cycles per step = {f(p['seconds_per_step'] * 1e3, 3)} ms; "
                           rf"throughput {f(p['samples_per_second'], 1)} samples/s$")
if len(j["stages"]) < 2 or j["training"]["optimizer"] != "adam":
    problems.append(f"plan_train: {j['training']}")

# compile and inspect
popef = os.path.join(work, "lenet5.popef")
text, j = with_json("compile", "compile", lenet, "-o", popef, "--ipus", "4", same_stdout=False)
expect("compile", text, rf"^wrote {E(j['output'])} \({j['bytes']} bytes\): executable '{E(j['executable'])}'$")
pl = j["plan"]
expect("compile", text, rf"^plan: {pl['strategy']} on {E(pl['device'])}, {pl['stages']} stages on {pl['ipus_per_replica']} "
                        rf"IPUs x {pl['replicas']} replicas, {pl['batches_per_step']} batches per step of {pl['micro_batch']} samples$")
p = j["predicted"]
expect("compile", text, rf"^predicted: {f(p['samples_per_second'], 1)} samples/s, {f(p['seconds_per_step'] * 1e3, 3)} ms "
                        rf"per step, latency {f(p['latency_seconds'] * 1e3, 3)} ms$")
if j["bytes"] != os.path.getsize(popef):
    problems.append(f"compile: {j['bytes']} bytes, the file has {os.path.getsize(popef)}")

text, j = with_json("inspect", "inspect", popef)
for fl in j["files"]:
    expect("inspect", text, rf"^{E(fl['name'])}: {fl['bytes']:,} bytes$")
    for bl in fl["blobs"]:
        expect("inspect", text, rf"^  {bl['index']} +{bl['offset']:,} +{bl['size']:,}  {E(bl['type'])} +{E(bl['name'])}")
for md in j["models"]:
    expect("inspect", text, rf"^  ipu version {E(md['ipu_version'])}, {md['ipus']} IPUs, replication {md['replication_factor']}, "
                            rf"{md['processes']} processes.* {md['device_iterations']} device iterations$")
    expect("inspect", text, rf"^  anchors \({len(md['anchors'])}\):$")
    for an in md["anchors"]:
        expect("inspect", text, rf"^    {E(an['type'])} +{E(an['name'])} +{E(an['tensor'])} +handle {E(an['handle'])} ")
    expect("inspect", text, rf"^  tensor data: {md['tensor_data']['tensors']} tensors, {md['tensor_data']['bytes']:,} bytes$")

# run: the text's latency and throughput figures are the JSON's; --profile's trace, one span per node
# of the model as written (--no-optimize: fuse-conv-activation would fuse LeNet's Conv and Relu)
trace = os.path.join(work, "profile.json")
text, j = with_json("run", "run", lenet, "--iterations", "3", "--output-dir", work, "--profile", trace, "--no-optimize",
                    same_stdout=False)
lat = j["latency_ms"]
expect("run", text, "^latency_ms " + " ".join(f"{k}={f(lat[k], 3)}" for k in ("mean", "median", "p90", "p95", "p99", "min", "max")) + "$")
expect("run", text, rf"^throughput samples_per_s={f(j['throughput']['samples_per_s'], 1)} iterations_per_s="
                    rf"{f(j['throughput']['iterations_per_s'], 1)} iterations={j['iterations']} batch={j['batch']} "
                    rf"seconds={f(j['seconds'], 3)}$")
for o in j["outputs"]:
    expect("run", text, rf"^wrote {E(o['file'])} {E(o['type'])}$")
if len(j["samples_ms"]) != 3:
    problems.append(f"run: {len(j['samples_ms'])} latency samples, not 3")
pr = j["profile"]
expect("run", text, rf"^wrote profile {E(trace)}: {pr['runs']} of {pr['measured_runs']} measured runs, {pr['ops_per_run']} ops each$")
alone = run("run", lenet, "--iterations", "2", "--output-dir", work, "--json").stdout
if set(json.loads(alone)) < {"latency_ms", "throughput", "outputs"}:  # stdout is JSON only, or this raises
    problems.append(f"run --json printed {alone}")

with open(trace) as fh:
    events = json.load(fh)["traceEvents"]
runs = sorted((e for e in events if e.get("ph") == "X" and e["cat"] == "run"), key=lambda e: e["ts"])
ops = [e for e in events if e.get("ph") == "X" and e["cat"] == "op"]
if len(runs) != 3 or pr["runs"] != 3 or pr["measured_runs"] != 3:
    problems.append(f"profile: {len(runs)} run spans, {pr['runs']} runs reported, not the 3 measured")
for i, r in enumerate(runs):
    mine = [e for e in ops if e["args"]["run"] == r["args"]["run"]]
    if len(mine) != pr["ops_per_run"] or r["args"]["ops"] != len(mine):
        problems.append(f"profile: run {i} has {len(mine)} op spans, not {pr['ops_per_run']}")
    for e in mine:  # nested within the run (times are whole nanoseconds in microseconds)
        if e["ts"] < r["ts"] - 1e-3 or e["ts"] + e["dur"] > r["ts"] + r["dur"] + 1e-3:
            problems.append(f"profile: op span {e} is outside run {r}")
            break
    # LeNet's nodes are all executed as they are: one span each, named and typed as the node.
    got = sorted((e["name"], e["args"]["type"]) for e in mine)
    if got != sorted((n.name or n.op_type, n.op_type) for n in m.graph.node):
        problems.append(f"profile: run {i} spans {got} are not the model's ops")

# An annotated model (PopART's __pipeline_stage): each op span carries its node's stage; one run
# without timing is the one measured.
staged = onnx.load(lenet)
half = len(staged.graph.node) // 2
for i, n in enumerate(staged.graph.node):
    n.attribute.append(onnx.helper.make_attribute("__pipeline_stage", 0 if i < half else 1))
onnx.save(staged, os.path.join(work, "staged.onnx"))
text = run("run", os.path.join(work, "staged.onnx"), "--output-dir", work, "--profile", trace, "--no-optimize").stdout
expect("profile", text, rf"^wrote profile {E(trace)}: 1 of 1 measured runs, {len(staged.graph.node)} ops each$")
with open(trace) as fh:
    spans = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X" and e["cat"] == "op"]
want = {n.name: 0 if i < half else 1 for i, n in enumerate(staged.graph.node)}
if {e["name"]: e["args"].get("stage") for e in spans} != want:
    problems.append(f"profile: stages {[(e['name'], e['args'].get('stage')) for e in spans]}, want {want}")

p = run("run", popef, "--profile", trace, "--output-dir", work, fail=True)
if "--profile applies to an ONNX model" not in p.stderr or "--trace" not in p.stderr:
    problems.append(f"run popef --profile: {p.stderr}")

if problems:
    sys.exit("FAILED:\n" + "\n".join(problems))
print("ok")
