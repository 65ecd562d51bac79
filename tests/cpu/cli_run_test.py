#!/usr/bin/env python3
"""CLI tests of `ipu run`: a small ONNX model built with onnx.helper at test time, results checked
against NumPy, and every documented failure checked for one error line and a non-zero exit.
Usage: cli_run_test.py IPU_BINARY CASE   (CASE: npy, pb, data, iterations, perf, check, threads, errors,
hostile, popef, popef_errors)

The perf case checks `ipu run` as a benchmark tool: invented inputs (zeros give Relu(b) and b; a
seed gives the same random inputs again), --json's figures equal the text's, and its percentiles
equal NumPy's over the latency samples it reports; the check case compares outputs with an ONNX
test data set's references, and a perturbed reference fails with one line naming the output.

The popef cases compile a 7-op chain for a 4-IPU Mk2 with pipelining and serve the file through
the Model Runtime: outputs bit-identical to `ipu run` on the ONNX model, with 1 and 4 clients, and
a trace with 4 stage lanes whose spans overlap (the stages ran as a pipeline; needs 2 cores).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(3)
W = RNG.standard_normal((4, 3)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)


def make_model(path):
    """y = Relu(x @ W + b); also outputs s = x @ W + b under a name that needs sanitising."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["out/sum:0"]),
        helper.make_node("Relu", ["out/sum:0"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "cli_model",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("out/sum:0", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


CHAIN_W = [RNG.standard_normal((256, 256)).astype(np.float32) / 16 for _ in range(4)]


def make_chain(path):
    """y = Sigmoid(Tanh(Relu(x @ W0) @ W1) @ W2) @ W3, x F32[64,256]: four matrix products, one per
    pipeline stage, each long enough (milliseconds) that the stages' threads meet in time."""
    acts = ["Relu", "Tanh", "Sigmoid"]
    nodes, prev = [], "x"
    for i in range(4):
        nodes.append(helper.make_node("MatMul", [prev, f"W{i}"], [f"m{i}"]))
        prev = f"m{i}"
        if i < 3:
            nodes.append(helper.make_node(acts[i], [prev], [f"a{i}"]))
            prev = f"a{i}"
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 256])],
        [numpy_helper.from_array(w, f"W{i}") for i, w in enumerate(CHAIN_W)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def same_files(a_dir, b_dir):
    names = sorted(os.listdir(a_dir))
    assert names and names == sorted(os.listdir(b_dir)), (names, os.listdir(b_dir))
    for n in names:
        a = open(os.path.join(a_dir, n), "rb").read()
        b = open(os.path.join(b_dir, n), "rb").read()
        assert a == b, f"{n}: {b_dir} differs from {a_dir}"


def host_compute_events(trace_file):
    """The trace's measured (host) compute slices."""
    with open(trace_file) as f:
        events = json.load(f)["traceEvents"]
    host_pids = {e["pid"] for e in events if e.get("ph") == "M" and e["args"]["name"].endswith(" host")}
    return [e for e in events if e.get("ph") == "X" and e["pid"] in host_pids and e["cat"] == "compute"]


def stage_lanes(trace_file):
    """{host lane (tid): (stage, [(begin, end)...])} of the trace's compute events."""
    lanes = {}
    for e in host_compute_events(trace_file):
        stage, spans = lanes.setdefault(e["tid"], (e["args"]["stage"], []))
        assert stage == e["args"]["stage"], f"lane {e['tid']} runs stages {stage} and {e['args']['stage']}"
        spans.append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    return lanes


def stage_spans(trace_file):
    """{stage: {micro_batch: (first begin, last end)}} of the trace's host compute events."""
    spans = {}
    for e in host_compute_events(trace_file):
        begin, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        by_mb = spans.setdefault(e["args"]["stage"], {})
        b, f = by_mb.get(e["args"]["micro_batch"], (begin, end))
        by_mb[e["args"]["micro_batch"]] = (min(b, begin), max(f, end))
    return spans


def reference(x):
    s = x @ W + B
    return np.maximum(s, 0), s


def run(ipu, *args, cwd=None):
    # A bounded wait: an input that hangs the tool (a FIFO) fails the test instead of stalling CI.
    res = subprocess.run([ipu, "run", *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    return res.returncode, res.stdout, res.stderr


LATENCY = (r"latency_ms mean=([0-9.]+) median=([0-9.]+) p90=([0-9.]+) p95=([0-9.]+) p99=([0-9.]+) "
           r"min=([0-9.]+) max=([0-9.]+)")


def expect_ok(ipu, *args, cwd=None):
    code, out, err = run(ipu, *args, cwd=cwd)
    assert code == 0, f"ipu run {' '.join(args)} failed ({code}): {err}"
    return out


def check_outputs(out_dir, x):
    y, s = reference(x)
    got_y = np.load(os.path.join(out_dir, "y.npy"))
    got_s = np.load(os.path.join(out_dir, "out_sum_0.npy"))  # '/' and ':' become '_'
    assert got_y.dtype == np.float32 and got_y.shape == (2, 3), (got_y.dtype, got_y.shape)
    np.testing.assert_allclose(got_y, y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_s, s, rtol=1e-5, atol=1e-6)
    return got_y, got_s


def expect_error(ipu, needle, *args):
    code, out, err = run(ipu, *args)
    lines = [l for l in err.splitlines() if l.strip()]
    assert code != 0, f"expected failure for {args}, got success: {out}"
    assert len(lines) == 1, f"expected one error line for {args}, got: {err!r}"
    assert re.search(needle, lines[0]), f"{needle!r} not in {lines[0]!r}"


def main():
    ipu, case = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="ipu-cli-run-") as d:
        model = os.path.join(d, "model.onnx")
        make_model(model)
        x = RNG.standard_normal((2, 4)).astype(np.float32)
        np.save(os.path.join(d, "x.npy"), x)
        with open(os.path.join(d, "x.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, "x").SerializeToString())
        out_dir = os.path.join(d, "out")

        if case == "npy":
            text = expect_ok(ipu, model, "--input", f"x={d}/x.npy", "--output-dir", out_dir)
            check_outputs(out_dir, x)
            assert "latency_ms" not in text
            # The default output directory is the current one.
            expect_ok(ipu, model, "--input", f"x={d}/x.npy", cwd=d)
            check_outputs(d, x)
        elif case == "pb":
            expect_ok(ipu, model, "--input", f"x={d}/x.pb", "--output-dir", out_dir)
            check_outputs(out_dir, x)
        elif case == "data":
            data = os.path.join(d, "test_data_set_0")
            os.makedirs(data)
            with open(os.path.join(data, "input_0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(x, "x").SerializeToString())
            expect_ok(ipu, model, "--data", data, "--output-dir", out_dir)
            check_outputs(out_dir, x)
            # An extra input file has no graph input to go to.
            with open(os.path.join(data, "input_1.pb"), "wb") as f:
                f.write(numpy_helper.from_array(x, "x2").SerializeToString())
            expect_error(ipu, r"input_1\.pb.*has no graph input", model, "--data", data, "--output-dir", out_dir)
        elif case == "iterations":
            text = expect_ok(ipu, model, "--input", f"x={d}/x.npy", "--output-dir", out_dir, "--iterations", "5")
            lines = [l for l in text.splitlines() if l.startswith("latency_ms")]
            assert len(lines) == 1, text
            m = re.fullmatch(LATENCY, lines[0])
            assert m, lines[0]
            mean, med, p90, p95, p99, lo, hi = map(float, m.groups())
            assert lo <= med <= p90 <= p95 <= p99 <= hi and lo <= mean <= hi, lines[0]
            m = re.search(r"^throughput samples_per_s=([0-9.]+) iterations_per_s=([0-9.]+) iterations=5 batch=2 ", text, re.M)
            assert m and abs(float(m.group(1)) - 2 * float(m.group(2))) <= 0.2, text
            check_outputs(out_dir, x)
        elif case == "perf":
            # No input given: invented. Zeros give Relu(b) and b.
            text = expect_ok(ipu, model, "--synthetic", "zeros", "--output-dir", out_dir)
            assert re.search(r"^synthetic input x F32\[2,4\] zeros$", text, re.M), text
            check_outputs(out_dir, np.zeros((2, 4), np.float32))
            # Random inputs: the same seed gives the same outputs, another seed others.
            outs = []
            for i, seed in enumerate(["7", "7", "8"]):
                od = os.path.join(d, f"r{i}")
                expect_ok(ipu, model, "--seed", seed, "--output-dir", od)
                outs.append(np.load(os.path.join(od, "y.npy")))
            assert np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[0], outs[2]), outs
            # A PopTorch options file's randomSeed is the seed; its other settings are refused.
            opts = os.path.join(d, "seed.txt")
            open(opts, "w").write("randomSeed(7)\n")
            expect_ok(ipu, model, "--options", opts, "--output-dir", os.path.join(d, "r3"))
            assert np.array_equal(np.load(os.path.join(d, "r3", "y.npy")), outs[0])
            open(opts, "w").write("randomSeed(7)\ndeviceIterations(4)\n")
            expect_error(ipu, r"sets deviceIterations\(4\), which ipu run does not apply", model, "--options", opts)
            # --json holds what the text says; its percentiles are NumPy's over its samples.
            js = os.path.join(d, "report.json")
            text = expect_ok(ipu, model, "--input", f"x={d}/x.npy", "--output-dir", out_dir, "--iterations", "40",
                             "--warmup", "3", "--json", js)
            rep = json.load(open(js))
            m = re.search("^" + LATENCY + "$", text, re.M)
            assert m, text
            keys = ["mean", "median", "p90", "p95", "p99", "min", "max"]
            for k, v in zip(keys, m.groups()):
                assert abs(rep["latency_ms"][k] - float(v)) <= 0.0005 + 1e-9, (k, v, rep["latency_ms"])
            samples = np.array(rep["samples_ms"])
            assert len(samples) == 40 and rep["iterations"] == 40 and rep["warmup"] == 3 and rep["batch"] == 2, rep
            for k, q in (("median", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
                assert abs(rep["latency_ms"][k] - np.percentile(samples, q)) <= 1e-9, (k, rep["latency_ms"])
            assert abs(rep["latency_ms"]["mean"] - samples.mean()) <= 1e-9
            assert rep["latency_ms"]["min"] == samples.min() and rep["latency_ms"]["max"] == samples.max()
            m = re.search(r"^throughput samples_per_s=([0-9.]+) iterations_per_s=([0-9.]+) iterations=40 batch=2 "
                          r"seconds=([0-9.]+)$", text, re.M)
            assert m, text
            assert abs(rep["throughput"]["samples_per_s"] - float(m.group(1))) <= 0.05 + 1e-9, rep
            assert abs(rep["seconds"] - float(m.group(3))) <= 0.0005 + 1e-9, rep
            assert rep["seconds"] * 1e3 >= samples.sum(), rep  # the timed runs lie inside the timed span
            assert [o["name"] for o in rep["outputs"]] == ["y", "out/sum:0"], rep["outputs"]
            assert rep["inputs"] == [{"name": "x", "type": "F32[2,4]", "file": f"{d}/x.npy"}], rep["inputs"]
            # --duration: as many runs as fit, at least one; no progress line when stderr is a pipe.
            code, out, err = run(ipu, model, "--input", f"x={d}/x.npy", "--output-dir", out_dir, "--duration", "0.2")
            assert code == 0 and err == "", (code, err)
            m = re.search(r"^throughput .* iterations=(\d+) batch=2 seconds=([0-9.]+)$", out, re.M)
            assert m and int(m.group(1)) >= 1 and float(m.group(2)) >= 0.2, out
            # --progress: a line on stderr once the run has taken 2 s (the shortest run that shows one).
            code, out, err = run(ipu, model, "--input", f"x={d}/x.npy", "--output-dir", out_dir, "--duration", "2.2",
                                 "--progress")
            assert code == 0 and re.fullmatch(r"(ipu run: \d+ iterations, 2\.[0-9] of 2\.2 s\n)+", err), (code, err)
            # Usage errors: exit 2 (parser) or 1, one line.
            for args, status, needle in (
                (["--iterations", "-1"], 2, "--iterations"), (["--iterations", "0"], 2, "--iterations"),
                (["--duration", "0"], 2, "--duration"), (["--duration", "-1"], 2, "--duration"),
                (["--iterations", "3", "--duration", "1"], 2, "excludes"), (["--warmup", "-1"], 2, "--warmup"),
                (["--synthetic", "ones"], 2, "--synthetic"), (["--seed", "-1"], 2, "--seed"),
                (["--rtol", "-1", "--check"], 2, "--rtol"), (["--warmup", "2"], 1, "--warmup applies to a timed run"),
                (["--rtol", "0.1"], 1, "--rtol and --atol apply to --check"),
                (["--check"], 1, "--check compares with the output_<i>.pb files"),
                (["--synthetic", "zeros", "--seed", "3"], 1, "--seed applies to random inputs"),
                (["--input", f"x={d}/x.npy", "--seed", "3"], 1, "nothing to invent")):
                code, out, err = run(ipu, model, "--output-dir", out_dir, *args)
                lines = [l for l in err.splitlines() if l.strip()]
                assert code == status and len(lines) == 1 and needle in lines[0] and not out, (args, code, out, err)
        elif case == "check":
            data = os.path.join(d, "test_data_set_0")
            os.makedirs(data)
            with open(os.path.join(data, "input_0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(x, "x").SerializeToString())
            y, s = reference(x)
            with open(os.path.join(data, "output_0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(y, "y").SerializeToString())
            np.save(os.path.join(data, "output_1.npy"), s)  # a .npy reference does too
            text = expect_ok(ipu, model, "--data", data, "--output-dir", out_dir, "--check")
            assert re.search(r"^check y ok against .*output_0\.pb$", text, re.M), text
            assert re.search(r"^check out/sum:0 ok against .*output_1\.npy$", text, re.M), text
            # A perturbed reference: exit 1, one line naming the output, its element and both values.
            bad = s.copy()
            bad[1, 2] += 0.5
            np.save(os.path.join(data, "output_1.npy"), bad)
            code, out, err = run(ipu, model, "--data", data, "--output-dir", os.path.join(d, "o2"), "--check")
            lines = [l for l in err.splitlines() if l.strip()]
            assert code == 1 and len(lines) == 1 and not out, (code, out, err)
            assert re.search(r"'out/sum:0' vs output_1\.npy: 1 of 6 elements differ; the worst, element 5, is "
                             + r"[-0-9.e]+ where [-0-9.e]+ is expected", lines[0]), lines[0]
            assert "'y'" not in lines[0], lines[0]
            assert not os.path.exists(os.path.join(d, "o2")), "outputs written despite the mismatch"
            # Loose enough tolerances accept it; a missing reference is named.
            expect_ok(ipu, model, "--data", data, "--output-dir", out_dir, "--check", "--atol", "0.6")
            os.remove(os.path.join(data, "output_1.npy"))
            expect_error(ipu, r"no reference for output 1 'out/sum:0'", model, "--data", data, "--check")
        elif case == "threads":
            big = RNG.standard_normal((2, 4)).astype(np.float32)
            np.save(os.path.join(d, "big.npy"), big)
            outs = []
            for i, threads in enumerate(["2", "2", "1"]):
                od = os.path.join(d, f"out{i}")
                expect_ok(ipu, model, "--input", f"x={d}/big.npy", "--output-dir", od, "--threads", threads)
                outs.append(check_outputs(od, big))
            assert all(np.array_equal(a, b) for a, b in zip(outs[0], outs[1])), "runs with 2 threads differ"
        elif case == "errors":
            expect_error(ipu, r"no input named 'nope'.*x F32\[2,4\]", model, "--input", f"nope={d}/x.npy")
            np.save(os.path.join(d, "wrong_shape.npy"), np.zeros((3, 4), np.float32))
            expect_error(ipu, r"input 'x' expects F32\[2,4\] but received F32\[3,4\]", model,
                         "--input", f"x={d}/wrong_shape.npy", "--output-dir", out_dir)
            np.save(os.path.join(d, "wrong_type.npy"), np.zeros((2, 4), np.float64))
            expect_error(ipu, r"input 'x' expects F32\[2,4\] but received F64\[2,4\]", model,
                         "--input", f"x={d}/wrong_type.npy", "--output-dir", out_dir)
            expect_error(ipu, r"does not exist", model, "--input", f"x={d}/missing.npy")
            expect_error(ipu, r"does not exist", model, "--input", f"x={d}/missing.pb")
            raw = open(os.path.join(d, "x.npy"), "rb").read()
            open(os.path.join(d, "short.npy"), "wb").write(raw[:-5])
            expect_error(ipu, r"truncated", model, "--input", f"x={d}/short.npy")
            pb = open(os.path.join(d, "x.pb"), "rb").read()
            open(os.path.join(d, "short.pb"), "wb").write(pb[:len(pb) // 2])
            expect_error(ipu, r"short\.pb", model, "--input", f"x={d}/short.pb")
            open(os.path.join(d, "garbage.npy"), "wb").write(b"not an array at all, sorry")
            expect_error(ipu, r"magic", model, "--input", f"x={d}/garbage.npy")
            expect_error(ipu, r"unknown input file type '\.txt'", model, "--input", f"x={d}/x.txt")
            expect_error(ipu, r"not NAME=FILE", model, "--input", "x")
            expect_error(ipu, r"given twice", model, "--input", f"x={d}/x.npy", "--input", f"x={d}/x.pb")
            expect_error(ipu, r"model\.nope|does not exist|cannot open", os.path.join(d, "model.nope"),
                         "--input", f"x={d}/x.npy")
            expect_error(ipu, r"not a directory", model, "--data", os.path.join(d, "x.npy"))
        elif case == "hostile":
            # A negative count is refused by the parser (exit 2, one line), not wrapped to 2^64 - 1.
            for flag in ("--threads", "--iterations", "--clients"):
                code, _, err = run(ipu, model, "--input", f"x={d}/x.npy", flag, "-1")
                assert code == 2 and len(err.strip().splitlines()) == 1, (flag, code, err)
            # An output never replaces an input: y.npy given as the input x, outputs into its folder.
            np.save(os.path.join(d, "y.npy"), x)
            before = open(os.path.join(d, "y.npy"), "rb").read()
            expect_error(ipu, r"the output .*y\.npy' is the input", model, "--input", f"x={d}/y.npy", "--output-dir", d)
            assert open(os.path.join(d, "y.npy"), "rb").read() == before
            # compile -o onto the model itself, however the path is spelled, refuses and keeps it.
            model_bytes = open(model, "rb").read()
            os.symlink(model, os.path.join(d, "link.onnx"))
            for target in (model, os.path.join(d, ".", "model.onnx"), os.path.join(d, "link.onnx")):
                res = subprocess.run([ipu, "compile", model, "-o", target], capture_output=True, text=True, timeout=120)
                lines = [l for l in res.stderr.splitlines() if l.strip()]
                assert res.returncode != 0 and len(lines) == 1 and "is the input" in lines[0], (target, res)
                assert open(model, "rb").read() == model_bytes
            # A FIFO as the model, a PopEF file or an input: an error at once, never a hang.
            for name in ("fifo.onnx", "fifo.popef", "fifo.npy"):
                os.mkfifo(os.path.join(d, name))
            expect_error(ipu, r"pipe \(FIFO\), not a regular file", os.path.join(d, "fifo.onnx"), "--input", f"x={d}/x.npy")
            expect_error(ipu, r"pipe \(FIFO\), not a regular file", os.path.join(d, "fifo.popef"), "--input", f"x={d}/x.npy")
            expect_error(ipu, r"pipe \(FIFO\), not a regular file", model, "--input", f"x={d}/fifo.npy")
            # --version answers.
            res = subprocess.run([ipu, "--version"], capture_output=True, text=True, timeout=60)
            assert res.returncode == 0 and res.stdout.strip() == "ipu 0.1.0", res
        elif case in ("popef", "popef_errors"):
            chain = os.path.join(d, "chain.onnx")
            make_chain(chain)
            np.save(os.path.join(d, "xc.npy"), RNG.standard_normal((64, 256)).astype(np.float32))
            popef = os.path.join(d, "chain.popef")
            res = subprocess.run([ipu, "compile", chain, "-o", popef, "--device", "mk2", "--ipus", "4",
                                  "--strategy", "pipelined", "--batches-per-step", "8"],
                                 capture_output=True, text=True)
            assert res.returncode == 0, res.stderr
            if case == "popef_errors":
                expect_error(ipu, r"--clients is 0", popef, "--input", f"x={d}/x.npy", "--clients", "0")
                expect_error(ipu, r"--clients applies to a PopEF file", chain, "--input", f"x={d}/x.npy",
                             "--clients", "2")
                expect_error(ipu, r"--trace applies to a PopEF file", chain, "--input", f"x={d}/x.npy",
                             "--trace", os.path.join(d, "t.json"))
                # No input given: invented, served as any request is.
                text = expect_ok(ipu, popef, "--synthetic", "zeros", "--output-dir", out_dir)
                assert re.search(r"^synthetic input x F32\[64,256\] zeros$", text, re.M), text
                assert np.load(os.path.join(out_dir, "y.npy")).shape == (64, 256)
                np.save(os.path.join(d, "wrong_shape.npy"), np.zeros((3, 4), np.float32))
                expect_error(ipu, r"input 'x' expects F32\[64,256\] but received F32\[3,4\]", popef,
                             "--input", f"x={d}/wrong_shape.npy", "--output-dir", out_dir)
                expect_error(ipu, r"--input-shape does not apply to a PopEF file", popef, "--input",
                             f"x={d}/x.npy", "--input-shape", "x=2,4")
            else:
                onnx_out, one, four = (os.path.join(d, n) for n in ("onnx", "one", "four"))
                expect_ok(ipu, chain, "--input", f"x={d}/xc.npy", "--output-dir", onnx_out)
                expect_ok(ipu, popef, "--input", f"x={d}/xc.npy", "--output-dir", one)
                text = expect_ok(ipu, popef, "--input", f"x={d}/xc.npy", "--output-dir", four, "--clients", "4")
                same_files(onnx_out, one)
                same_files(onnx_out, four)
                assert "latency_ms" not in text, text
                # One kernel thread per stage leaves a core for each of two stages to run at once (the
                # bits follow the kernels' thread count, so the reference runs with one thread too).
                onnx_1, four_1 = os.path.join(d, "onnx1"), os.path.join(d, "four1")
                expect_ok(ipu, chain, "--input", f"x={d}/xc.npy", "--output-dir", onnx_1, "--threads", "1")
                trace = os.path.join(d, "trace.json")
                text = expect_ok(ipu, popef, "--input", f"x={d}/xc.npy", "--output-dir", four_1, "--clients", "4",
                                 "--iterations", "32", "--trace", trace, "--threads", "1")
                same_files(onnx_1, four_1)
                assert re.search("^" + LATENCY + "$", text, re.M), text
                m = re.search(r"^throughput samples_per_s=[0-9.]+ iterations_per_s=[0-9.]+ iterations=(\d+) batch=64 "
                              r"seconds=[0-9.]+ clients=(\d+) steps=(\d+) requests_per_step=(\d+)$", text, re.M)
                assert m and m.group(1) == "32" and m.group(2) == "4" and m.group(4) == "8", text
                assert int(m.group(3)) >= 4, text  # 32 requests at most 8 a step, plus the warm-up
                lanes = stage_lanes(trace)
                assert sorted(stage for stage, _ in lanes.values()) == [0, 1, 2, 3], lanes.keys()
                # The schedule, not the clock: whether two stages' spans overlap depends on how busy
                # the machine is, so check what holds on any machine. Each stage has its own thread,
                # runs every micro-batch once, one at a time and in order, and starts a micro-batch
                # only after the stage before it finished that micro-batch.
                spans = stage_spans(trace)
                assert sorted(spans) == [0, 1, 2, 3], spans.keys()
                for stage, by_mb in spans.items():
                    assert sorted(by_mb) == list(range(8)), (stage, sorted(by_mb))
                    order = sorted(by_mb.values())
                    assert all(e0 <= b1 + 0.001 for (_, e0), (b1, _) in zip(order, order[1:])), (stage, order)
                    assert [mb for mb, _ in sorted(by_mb.items(), key=lambda kv: kv[1])] == list(range(8)), stage
                    if stage:
                        for mb, (begin, _) in by_mb.items():
                            assert begin + 0.001 >= spans[stage - 1][mb][1], (stage, mb, begin, spans[stage - 1][mb])
                # --duration ends in whole steps: each of 3 clients stops at a multiple of the 8
                # requests a step takes, so no step runs padded and every request is counted.
                text = expect_ok(ipu, popef, "--input", f"x={d}/xc.npy", "--output-dir", four_1, "--clients", "3",
                                 "--duration", "0.3", "--threads", "1")
                m = re.search(r"^throughput .* iterations=(\d+) batch=64 .* requests_per_step=(\d+)$", text, re.M)
                assert m and m.group(2) == "8" and int(m.group(1)) % 8 == 0, text
        else:
            raise SystemExit(f"unknown case {case}")
    print(f"ok: {case}")


if __name__ == "__main__":
    main()
