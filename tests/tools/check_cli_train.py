#!/usr/bin/env python3
"""`ipu train` against PyTorch training the same model on the same rows, and its refusals.

An MLP exported by PyTorch (batch 4) is trained by `ipu train` for 6 steps of SGD with momentum on
12 samples (steps wrap around the data) and by torch.optim.SGD on the same micro-batches; the
printed losses and the trained ONNX model's weights must match PyTorch's within 1e-4. Then RMSprop
with gradient accumulation 3 (each update uses the mean gradient of 3 micro-batches, rows
(k * 3 + j) * batch) against torch.optim.RMSprop doing the same. Then bad input: each refused with
one clear error line and a non-zero exit.
Usage: check_cli_train.py IPU_EXECUTABLE
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper
import torch


class DropoutMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8)
        self.drop = torch.nn.Dropout(0.5)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(self.drop(self.fc1(x)))


def weights_of(model_path):
    return {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(model_path).graph.initializer}


def same_weights(a, b, tolerance):
    """The largest relative difference of two trained models' weights is at most `tolerance`."""
    wa, wb = weights_of(a), weights_of(b)
    if sorted(wa) != sorted(wb):
        sys.exit(f"{a} and {b} have different weights: {sorted(wa)} and {sorted(wb)}")
    err = max(np.abs(wa[n] - wb[n]).max() / max(np.abs(wb[n]).max(), 1e-6) for n in wa)
    return err <= tolerance, err


class DeepMlp(torch.nn.Module):
    """Four layers: over 2 IPUs the first stage holds Tanh ops whose gradients read their outputs."""
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in ((6, 8), (8, 8), (8, 8), (8, 3)))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.tanh(layer(x))
        return self.layers[-1](x)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def run(ipu, args, fail=False):
    p = subprocess.run([ipu, "train", *args], capture_output=True, text=True)
    if fail != (p.returncode != 0):
        sys.exit(f"ipu train {' '.join(args)}: exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    if fail:
        lines = p.stderr.strip().splitlines()
        if len(lines) != 1 or "Sanitizer" in p.stderr or "runtime error" in p.stderr:
            sys.exit(f"ipu train {' '.join(args)}: expected one error line, got:\n{p.stderr}")
    return p


def check_json(text, j, report, alone_args=None):
    """--json FILE holds what the text of the same run says: plan, prediction, steps, losses."""
    def expect(pattern):
        if not re.search(pattern, text, re.M):
            sys.exit(f"--json {report}: no line matching {pattern!r} in:\n{text}\n(JSON {j})")
    if "plan" in j:
        pl = j["plan"]
        expect(rf"^plan: training step {pl['strategy']} on {re.escape(pl['device'])}, {pl['stages']} stages on {pl['ipus']} IPUs, "
               rf"{pl['micro_batches']} micro-batches of {pl['batch']} samples per weight update$")
        pr = j["predicted"]
        expect(rf"^predicted: {pr['samples_per_second']:.1f} samples/s, {pr['seconds_per_weight_update'] * 1e3:.3f} ms per weight update$")
    if "run" in j:
        expect(rf"^run: the training step {j['run']['schedule']} over {j['run']['stages']} stages on host threads$")
    if not j["steps"] or j["steps"][-1]["step"] != j["total_steps"]:
        sys.exit(f"--json {report}: steps {j['steps']}")
    for s in j["steps"]:
        expect(rf"^step {s['step']}/{j['total_steps']}  loss {re.escape(format(s['loss'], '.6g'))}  "
               rf"{s['samples_per_second']:.1f} samples/s$")
    first, last = (float(v) for v in re.search(r"^loss (\S+) -> (\S+)$", text, re.M).groups())
    if not (np.isclose(first, j["loss"]["first"], rtol=1e-5) and np.isclose(last, j["loss"]["last"], rtol=1e-5)):
        sys.exit(f"--json {report}: loss {j['loss']}, the text {first} -> {last}")
    expect(rf"^wrote {re.escape(j['output'])}$")
    if alone_args:  # the same training: the same losses, and stdout is the JSON alone (or this raises)
        alone = subprocess.run([sys.argv[1], "train", *alone_args, "--json"], capture_output=True, text=True)
        if alone.returncode != 0 or json.loads(alone.stdout)["loss"] != j["loss"]:
            sys.exit(f"--json alone: {alone.stdout} {alone.stderr}")


def main():
    ipu = sys.argv[1]
    torch.manual_seed(3)
    model = Mlp()
    x = torch.randn(12, 6)
    labels = torch.randint(0, 3, (12,))
    with tempfile.TemporaryDirectory() as d:
        path = lambda n: os.path.join(d, n)  # noqa: E731
        torch.onnx.export(model, (x[:4],), path("mlp.onnx"), opset_version=13, input_names=["x"], output_names=["y"])
        np.save(path("x.npy"), x.numpy().astype(np.float64))  # converted to the model's float32
        np.save(path("labels.npy"), labels.numpy())
        np.save(path("labels_float.npy"), labels.numpy().astype(np.float32))
        np.save(path("labels_bad.npy"), np.array([0, 1, 7] * 4, dtype=np.int64))

        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        losses = []
        for k in range(6):
            rows = [(k * 4 + i) % 12 for i in range(4)]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[rows]), labels[rows])
            losses.append(loss.item())
            loss.backward()
            opt.step()

        def check_trained(model_path, reference):
            trained = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(model_path).graph.initializer}
            for name, param in reference.named_parameters():
                want = param.detach().numpy()
                if name not in trained:
                    sys.exit(f"the trained model has no weight named {name}: {sorted(trained)}")
                err = np.abs(trained[name] - want).max() / max(np.abs(want).max(), 1e-6)
                if err > 1e-4:
                    sys.exit(f"weight {name} differs from PyTorch's by {err:.2e} (relative)")

        def last_losses(p):
            last = p.stdout.strip().splitlines()[-1]
            m = re.fullmatch(r"loss (\S+) -> (\S+)", last)
            if not m:
                sys.exit(f"the last line is not 'loss A -> B': {last!r}")
            return float(m.group(1)), float(m.group(2))

        def with_(output="y", loss="cross-entropy", labels=path("labels.npy")):
            return ["--output", output, "--loss", loss, "--input", "x=" + path("x.npy"), "--labels", labels]

        common = with_()
        p = run(ipu, [path("mlp.onnx"), *common, "--lr", "0.1", "--momentum", "0.9", "--steps", "6",
                      "-o", path("trained.onnx")])
        got = last_losses(p)
        if not np.allclose(got, (losses[0], losses[-1]), rtol=1e-4, atol=1e-5):
            sys.exit(f"losses {got}, PyTorch {losses[0]} -> {losses[-1]}")
        if not re.search(r"step 6/6  loss \S+  [0-9.]+ samples/s", p.stdout):
            sys.exit(f"no progress line in:\n{p.stdout}")
        check_trained(path("trained.onnx"), model)

        # RMSprop with momentum, 3 micro-batches per update, 4 updates: 12 micro-batches wrap around
        # the 12 rows 4 times.
        torch.manual_seed(3)
        model = Mlp()
        opt = torch.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.5, weight_decay=0.01)
        losses = []
        for k in range(4):
            opt.zero_grad()
            total = 0.0
            for j in range(3):
                rows = [((k * 3 + j) * 4 + i) % 12 for i in range(4)]
                loss = torch.nn.functional.cross_entropy(model(x[rows]), labels[rows]) / 3
                total += loss.item()
                loss.backward()
            losses.append(total)
            opt.step()
        p = run(ipu, [path("mlp.onnx"), *common, "--optimizer", "rmsprop", "--momentum", "0.5", "--weight-decay", "0.01",
                      "--gradient-accumulation", "3", "--steps", "4", "-o", path("trained_rmsprop.onnx")])
        got = got_rmsprop = last_losses(p)
        if not np.allclose(got, (losses[0], losses[-1]), rtol=1e-4, atol=1e-5):
            sys.exit(f"accumulated losses {got}, PyTorch {losses[0]} -> {losses[-1]}")
        if not re.search(r"step 4/4  loss \S+  [0-9.]+ samples/s", p.stdout):
            sys.exit(f"no progress line in:\n{p.stdout}")
        check_trained(path("trained_rmsprop.onnx"), model)

        run(ipu, [path("mlp.onnx"), *common, "--optimizer", "adam", "--lr", "0.01", "--steps", "2",
                  "-o", path("trained.popef")])
        if os.path.getsize(path("trained.popef")) == 0:
            sys.exit("the PopEF file is empty")

        # The options file: gradient accumulation as the flag gives it, bit for bit.
        def write(name, text):
            with open(path(name), "w") as f:
                f.write(text)
            return path(name)

        write("accumulate.conf", "# PopTorch's syntax\nTraining.gradientAccumulation(3)\n")
        run(ipu, [path("mlp.onnx"), *common, "--optimizer", "rmsprop", "--momentum", "0.5", "--weight-decay", "0.01",
                  "--options", path("accumulate.conf"), "--steps", "4", "-o", path("trained_conf.onnx")])
        ok, err = same_weights(path("trained_conf.onnx"), path("trained_rmsprop.onnx"), 0)
        if not ok:
            sys.exit(f"Training.gradientAccumulation(3) trains other weights than --gradient-accumulation 3 ({err:.2e})")
        # Sum of 3 micro-batches' gradients with lr 0.01 is the mean with lr 0.03 (up to rounding).
        write("sum.conf", "Training.gradientAccumulation(3)\n"
                          "Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Sum)\n")
        run(ipu, [path("mlp.onnx"), *common, "--lr", "0.01", "--options", path("sum.conf"), "--steps", "3",
                  "-o", path("trained_sum.onnx")])
        run(ipu, [path("mlp.onnx"), *common, "--lr", "0.03", "--gradient-accumulation", "3", "--steps", "3",
                  "-o", path("trained_mean.onnx")])
        ok, err = same_weights(path("trained_sum.onnx"), path("trained_mean.onnx"), 1e-5)
        if not ok:
            sys.exit(f"ReductionType.Sum with lr 0.01 differs from Mean with lr 0.03 by {err:.2e}")
        ok, err = same_weights(path("trained_sum.onnx"), path("trained.onnx"), 1e-3)
        if ok:
            sys.exit("ReductionType.Sum trained the same weights as a different run: the option did nothing")

        # Automatic loss scaling: the scale grows (F32 gradients are far below the top of their
        # range) and cancels out of the update, so the weights are the unscaled run's.
        write("als.conf", "Training.setAutomaticLossScaling(True)\n")
        p = run(ipu, [path("mlp.onnx"), *common, "--lr", "0.1", "--steps", "3", "--loss-scaling", "4",
                      "--options", path("als.conf"), "-o", path("trained_als.onnx")])
        if "automatic loss scaling: loss scale 4 -> 32" not in p.stdout:
            sys.exit(f"Training.setAutomaticLossScaling(True) did not double the loss scale each step:\n{p.stdout}")
        run(ipu, [path("mlp.onnx"), *common, "--lr", "0.1", "--steps", "3", "-o", path("trained_unscaled.onnx")])
        ok, err = same_weights(path("trained_als.onnx"), path("trained_unscaled.onnx"), 1e-5)
        if not ok:
            sys.exit(f"automatic loss scaling changed the trained weights by {err:.2e}")

        # randomSeed decides a training-mode Dropout's masks.
        torch.manual_seed(5)
        dropout = DropoutMlp()
        dropout.train()
        torch.onnx.export(dropout, (x[:4],), path("dropout.onnx"), opset_version=13, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING, input_names=["x"], output_names=["y"])
        if not any(n.op_type == "Dropout" for n in onnx.load(path("dropout.onnx")).graph.node):
            sys.exit("the exported model has no Dropout")
        for seed in (1, 2):
            write(f"seed{seed}.conf", f"randomSeed({seed})\n")
        for name, conf in (("a", "seed1.conf"), ("b", "seed1.conf"), ("c", "seed2.conf")):
            run(ipu, [path("dropout.onnx"), *common, "--lr", "0.1", "--steps", "3", "--options", path(conf),
                      "-o", path(f"dropout_{name}.onnx")])
        ok, err = same_weights(path("dropout_a.onnx"), path("dropout_b.onnx"), 0)
        if not ok:
            sys.exit(f"randomSeed(1) twice trained different weights ({err:.2e})")
        ok, err = same_weights(path("dropout_a.onnx"), path("dropout_c.onnx"), 1e-4)
        if ok:
            sys.exit(f"randomSeed(1) and randomSeed(2) trained the same weights ({err:.2e}): the seed did nothing")

        # The strategy flags plan the step for the device, and pipelined and phased ones run it so on
        # host threads; the trained weights do not change.
        for strategy, ipus, extra in (("sharded", "1", []), ("sharded", "2", []),
                                      ("pipelined", "2", ["--gradient-accumulation", "3"]),
                                      ("serial-phased", "2", []), ("parallel-phased", "2", ["--gradient-accumulation", "2"])):
            reference = path(f"reference_{strategy}_{ipus}.onnx")
            args = [path("mlp.onnx"), *common, "--lr", "0.1", "--steps", "3", *extra]
            run(ipu, [*args, "-o", reference])
            report = path(f"planned_{strategy}_{ipus}.json")
            planned = [*args, "--device", "mk2", "--ipus", ipus, "--strategy", strategy,
                       "-o", path(f"planned_{strategy}_{ipus}.onnx")]
            p = run(ipu, [*planned, "--json", report])
            with open(report) as f:
                j = json.load(f)
            check_json(p.stdout, j, report, planned if strategy == "pipelined" else None)
            if strategy in ("sharded", "pipelined"):
                # The training planner's prediction: what `ipu plan --train` prints for the same flags.
                m = re.search(r"^predicted: .*throughput ([0-9.]+) samples/s", p.stdout, re.M)
                planned = subprocess.run([ipu, "plan", path("mlp.onnx"), "--train", "--output", "y", "--loss", "cross-entropy",
                                          "--device", "mk2", "--ipus", ipus, "--strategy", strategy, *extra],
                                         capture_output=True, text=True)
                want = re.search(r"^predicted: .*throughput ([0-9.]+) samples/s", planned.stdout, re.M)
                if planned.returncode != 0 or not want or not m or m.group(0) != want.group(0) or float(m.group(1)) <= 0:
                    sys.exit(f"--strategy {strategy} --ipus {ipus}: ipu train predicts\n{p.stdout}\nipu plan --train:\n"
                             f"{planned.stdout}{planned.stderr}")
                if f"{j['planner']['predicted']['samples_per_second']:.1f}" != m.group(1):
                    sys.exit(f"--json {report}: the planner's samples/s {j['planner']['predicted']} against {m.group(0)}")
            else:
                if not re.search(rf"^plan: training step \S+ on .+, [0-9]+ stages on {ipus} IPUs", p.stdout, re.M):
                    sys.exit(f"--strategy {strategy} --ipus {ipus}: no plan line in:\n{p.stdout}")
                m = re.search(r"^predicted: ([0-9.]+) samples/s", p.stdout, re.M)
                if not m or float(m.group(1)) <= 0:
                    sys.exit(f"--strategy {strategy} --ipus {ipus}: no predicted throughput in:\n{p.stdout}")
            print(f"--strategy {strategy} --ipus {ipus}: {m.group(0)}")
            placed = re.search(r"^run: the training step (.+) over ([0-9]+) stages on host threads", p.stdout, re.M)
            if (strategy != "sharded") != bool(placed):
                sys.exit(f"--strategy {strategy} --ipus {ipus}: the step ran {'placed' if placed else 'plainly'}:\n{p.stdout}")
            if strategy == "pipelined" and int(placed.group(2)) != 2 * int(ipus) - 1:
                sys.exit(f"--strategy pipelined --ipus {ipus}: {placed.group(2)} stages, not {2 * int(ipus) - 1}")
            ok, err = same_weights(path(f"planned_{strategy}_{ipus}.onnx"), reference, 0)
            if not ok:
                sys.exit(f"--strategy {strategy} --ipus {ipus} changed the trained weights ({err:.2e})")
        # PopART's autoRecomputation (--recompute, or the options file's _Popart.set): the backward
        # stages rerun forward ops instead of stashing them; the weights do not change.
        def recomputed(args):
            p = run(ipu, args)
            m = re.search(r"^recomputation: (\S+), ([0-9]+) forward ops rerun, ([0-9]+) bytes of stash planned$", p.stdout, re.M)
            if not m:
                sys.exit(f"ipu train {' '.join(args)}: no recomputation line in:\n{p.stdout}")
            return m.group(1), int(m.group(2)), int(m.group(3))
        torch.onnx.export(DeepMlp(), (x[:4],), path("deep.onnx"), opset_version=13, input_names=["x"], output_names=["y"])
        plain = [path("deep.onnx"), *common, "--lr", "0.1", "--steps", "3", "--gradient-accumulation", "3"]
        run(ipu, [*plain, "-o", path("deep_reference.onnx")])
        piped = [*plain, "--device", "mk2", "--ipus", "2", "--strategy", "pipelined"]
        write("recompute.conf", '_Popart.set("autoRecomputation", 4)\n')
        stashed = recomputed([*piped, "-o", path("recompute_none.onnx")])
        for how, extra in (("flag", ["--recompute", "all"]), ("file", ["--options", path("recompute.conf")])):
            got = recomputed([*piped, *extra, "-o", path(f"recompute_{how}.onnx")])
            if got[0] != "RecomputeAll" or stashed[0] != "None" or stashed[1] != 0 or got[1] == 0 or not got[2] < stashed[2]:
                sys.exit(f"recomputation by {how}: {got} against no recomputation {stashed}")
            ok, err = same_weights(path(f"recompute_{how}.onnx"), path("deep_reference.onnx"), 0)
            if not ok:
                sys.exit(f"recomputation by {how} changed the trained weights ({err:.2e})")
        print(f"--recompute all: {got[1]} ops rerun, stash {got[2]} bytes (none: {stashed[2]})")
        # A file that sets autoRecomputation, even to its default None, holds the flag to its value:
        # an agreeing --recompute runs as the file alone does, a contradicting one is refused.
        write("recompute_none.conf", '_Popart.set("autoRecomputation", 0)\n')
        agreed = recomputed([*piped, "--options", path("recompute_none.conf"), "--recompute", "none",
                             "-o", path("recompute_agreed.onnx")])
        if agreed != stashed:
            sys.exit(f"--recompute none with the file's explicit None: {agreed}, not {stashed}")
        agreed = recomputed([*piped, "--options", path("recompute.conf"), "--recompute", "all",
                             "-o", path("recompute_agreed.onnx")])
        if agreed != got:
            sys.exit(f"--recompute all with the file's RecomputeAll: {agreed}, not {got}")
        for flag, conf, value in (("all", "recompute_none.conf", 0), ("none", "recompute.conf", 4)):
            args = [*piped, "--options", path(conf), "--recompute", flag, "-o", path("t.onnx")]
            p = run(ipu, args, fail=True)
            want = f'--recompute {flag} but the options file says _Popart.set("autoRecomputation", {value})'
            # Exit status 1, as every flag the options file contradicts (2 is the parser's).
            if want not in p.stderr or p.returncode != 1:
                sys.exit(f"ipu train {' '.join(args)}: exit {p.returncode}, expected 1 and '{want}' in: {p.stderr}")
        run(ipu, [path("mlp.onnx"), *common, "--lr", "0.1", "--steps", "3", "--replicas", "1", "-o", path("replicas1.onnx")])
        ok, err = same_weights(path("replicas1.onnx"), path("reference_sharded_1.onnx"), 0)
        if not ok:
            sys.exit("--replicas 1 changed the trained weights")
        # Replicas run a step's micro-batches at once and add their gradients in order: --replicas 3
        # trains what --gradient-accumulation 3 does (the RMSprop run above), bit for bit, losses too;
        # 2 replicas of 2 micro-batches (the options file's replicationFactor) what 4 micro-batches do.
        p3 = run(ipu, [path("mlp.onnx"), *common, "--optimizer", "rmsprop", "--momentum", "0.5", "--weight-decay", "0.01",
                       "--replicas", "3", "--steps", "4", "-o", path("replicas3.onnx")])
        ok, err = same_weights(path("replicas3.onnx"), path("trained_rmsprop.onnx"), 0)
        if not ok:
            sys.exit(f"--replicas 3 trains other weights than --gradient-accumulation 3 ({err:.2e})")
        if last_losses(p3) != got_rmsprop:
            sys.exit(f"--replicas 3: losses {last_losses(p3)}, --gradient-accumulation 3: {got_rmsprop}")
        write("replicated.conf", "replicationFactor(2)\n")
        run(ipu, [path("mlp.onnx"), *common, "--momentum", "0.9", "--gradient-accumulation", "4", "--steps", "5",
                  "-o", path("accumulate4.onnx")])
        run(ipu, [path("mlp.onnx"), *common, "--momentum", "0.9", "--options", path("replicated.conf"),
                  "--gradient-accumulation", "2", "--steps", "5", "-o", path("replicas2x2.onnx")])
        ok, err = same_weights(path("replicas2x2.onnx"), path("accumulate4.onnx"), 0)
        if not ok:
            sys.exit(f"replicationFactor(2) with 2 micro-batches trains other weights than 4 micro-batches ({err:.2e})")
        # A replicated step is planned as `ipu plan --train --replicas` plans it, all-reduce included.
        p = run(ipu, [path("mlp.onnx"), *common, "--replicas", "2", "--device", "mk2", "-o", path("replicas2_planned.onnx")])
        planned = subprocess.run([ipu, "plan", path("mlp.onnx"), "--train", "--output", "y", "--loss", "cross-entropy",
                                  "--device", "mk2", "--replicas", "2"], capture_output=True, text=True)
        for line in ("all-reduce:", "predicted:"):
            got_line = [x for x in p.stdout.splitlines() if x.startswith(line)]
            want_line = [x for x in planned.stdout.splitlines() if x.startswith(line)]
            if not got_line or got_line != want_line or "none" in got_line[0]:
                sys.exit(f"--replicas 2 --device mk2: ipu train prints {got_line}, ipu plan --train {want_line}")

        write("unsupported.conf", "randomSeed(3)\nPrecision.setPartialsType(torch.half)\n")
        write("iterations.conf", "deviceIterations(4)\n")
        write("unknown.conf", "Training.gradientAcumulation(2)\n")
        bad = [
            ([*common, "--options", path("unsupported.conf"), "-o", path("t.onnx")],
             "sets Precision.setPartialsType(torch.half), which ipu train does not apply"),
            ([*common, "--options", path("iterations.conf"), "-o", path("t.onnx")], "sets deviceIterations(4)"),
            ([*common, "--options", path("replicated.conf"), "--replicas", "3", "-o", path("t.onnx")],
             "--replicas 3 but the options file says replicationFactor(2)"),
            ([*common, "--replicas", "2", "--device", "mk2", "--ipus", "2", "--strategy", "serial-phased",
              "-o", path("t.onnx")], "planning that replicated training step is not built yet"),
            ([*common, "--replicas", "0", "-o", path("t.onnx")], "--replicas"),
            ([*common, "--options", path("unknown.conf"), "-o", path("t.onnx")], "did you mean Training.gradientAccumulation"),
            ([*common, "--options", path("accumulate.conf"), "--gradient-accumulation", "2", "-o", path("t.onnx")],
             "--gradient-accumulation 2 but the options file says Training.gradientAccumulation(3)"),
            ([*common, "--strategy", "diagonal", "-o", path("t.onnx")], "unknown strategy 'diagonal'"),
            ([*common, "--recompute", "some", "-o", path("t.onnx")], "unknown recomputation 'some'"),
            ([*common, "--recompute", "standard", "-o", path("t.onnx")],
             "recomputation Standard was asked of a step that is not pipelined"),
            ([*common, "--options", path("recompute.conf"), "--recompute", "standard", "-o", path("t.onnx")],
             "--recompute standard but the options file says _Popart.set(\"autoRecomputation\", 4)"),
            ([*common, "--device", "mk2", "--ipus", "2", "--strategy", "pipelined", "-o", path("t.onnx")],
             "the training pipeline has 3 stages (2 forward, their backward, the last combined) but gradient accumulation is 1"),
            ([*common, "--device", "mk2", "--ipus", "2", "--strategy", "pipelined", "--gradient-accumulation", "2",
              "-o", path("t.onnx")], "the training pipeline has 3 stages (2 forward, their backward, the last combined) but gradient accumulation is 2"),
            ([*common, "--device", "mk2", "--ipus", "4", "--strategy", "pipelined", "--gradient-accumulation", "4",
              "-o", path("t.popef")], "the trained model cannot be planned for its PopEF file: the model has 3 ops"),

            ([*with_(labels=path("labels_float.npy")), "-o", path("t.onnx")], "F32 data; the model needs S64"),
            ([*with_(labels=path("labels_bad.npy")), "-o", path("t.onnx")], "label 7 is not a class index"),
            ([*common, "--optimizer", "adam", "--momentum", "0.9", "-o", path("t.onnx")], "--momentum applies to sgd"),
            ([*common, "--optimizer", "lamb", "--nesterov", "-o", path("t.onnx")], "--nesterov applies to sgd"),
            ([*common, "--gradient-accumulation", "0", "-o", path("t.onnx")], "--gradient-accumulation"),
            ([*common, "--optimizer", "lion", "-o", path("t.onnx")], "--optimizer"),
            ([*common, "-o", path("t.txt")], "neither .onnx nor .popef"),
            ([*with_(output="nope"), "-o", path("t.onnx")], "no output named 'nope'"),
            ([*with_(loss="hinge"), "-o", path("t.onnx")], "unknown loss 'hinge'"),
        ]
        for args, message in bad:
            p = run(ipu, [path("mlp.onnx"), *args], fail=True)
            if message not in p.stderr:
                sys.exit(f"ipu train {' '.join(args)}: expected '{message}' in: {p.stderr}")
    print(f"ipu train: PyTorch's losses and weights (SGD; RMSprop with accumulation), the options file, the strategy "
          f"flags, replicas as accumulation bit for bit, and {len(bad)} refusals: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
