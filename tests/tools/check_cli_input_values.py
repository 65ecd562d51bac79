#!/usr/bin/env python3
"""Models whose structure depends on input values, from the command line: `ipu run` fixes such
inputs (a Loop's trip count, a SequenceAt position, a Range's length) to the values it is given,
from --input files and from --data sets, and says so; `--input-value` fixes them explicitly for any
subcommand; without a value the import fails in one line naming the input; values that do not fit
the model are refused.
Usage: check_cli_input_values.py IPU WORK_DIR
"""
import json
import os
import sys

import numpy as np
import onnx
from cli_script import CliScript
from onnx import TensorProto, helper, numpy_helper

cli = CliScript(sys.argv[1], sys.argv[2])
path, run, expect = cli.path, cli.run, cli.expect

# rows = SplitToSequence(X [3, 2]); picked = SequenceAt(rows, p) * s; ramp = Range(0, n, 1) (float)
nodes = [
    helper.make_node("SplitToSequence", ["X"], ["rows"], keepdims=0),
    helper.make_node("SequenceAt", ["rows", "p"], ["row"]),
    helper.make_node("Mul", ["row", "s"], ["picked"]),
    helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero_v", TensorProto.INT64, [], [0])),
    helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one_v", TensorProto.INT64, [], [1])),
    helper.make_node("Range", ["zero", "n", "one"], ["ramp"]),
]
graph = helper.make_graph(
    nodes, "value_dependent",
    [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 2]),
     helper.make_tensor_value_info("p", TensorProto.INT64, []),
     helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
     helper.make_tensor_value_info("n", TensorProto.INT64, [])],
    [helper.make_tensor_value_info("picked", TensorProto.FLOAT, [2]),
     helper.make_tensor_value_info("ramp", TensorProto.INT64, ["len"])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(model)
onnx.save(model, path("dependent.onnx"))
X = np.arange(6, dtype=np.float32).reshape(3, 2)
np.save(path("X.npy"), X)
np.save(path("p.npy"), np.array(1, dtype=np.int64))
np.save(path("s.npy"), np.array(-2, dtype=np.float32))
np.save(path("n.npy"), np.array(4, dtype=np.int64))


def check_outputs(out_dir, what):
    picked = np.load(os.path.join(out_dir, "picked.npy"))
    expect(picked.tolist() == [-4.0, -6.0], f"{what}: picked is {picked!r}")
    ramp = np.load(os.path.join(out_dir, "ramp.npy"))
    expect(ramp.tolist() == [0, 1, 2, 3], f"{what}: ramp is {ramp!r}")


# ipu run fixes p and n from its --input files, says so, and feeds X and s as inputs.
inputs = ["--input", "X=" + path("X.npy"), "--input", "p=" + path("p.npy"), "--input", "s=" + path("s.npy"),
          "--input", "n=" + path("n.npy")]
p = run("run", path("dependent.onnx"), *inputs, "--output-dir", path("out"))
check_outputs(path("out"), "--input")
expect("input n fixed at import" in p.stdout and "input p fixed at import" in p.stdout,
       f"ipu run does not say which inputs it fixed: {p.stdout!r}")
expect("input X fixed" not in p.stdout and "input s fixed" not in p.stdout, f"only p and n are fixed: {p.stdout!r}")

# --json lists the fixed inputs with their files.
p = run("run", path("dependent.onnx"), *inputs, "--output-dir", path("out_json"), "--json")
report = json.loads(p.stdout)
fixed = sorted(i["name"] for i in report["inputs"] if i.get("fixed_at_import"))
expect(fixed == ["n", "p"], f"--json fixed inputs are {fixed}")

# --data: an ONNX test data set, whose files follow the model's declared inputs.
data = path("data")
os.makedirs(data, exist_ok=True)
for i, (name, value) in enumerate([("X", X), ("p", np.array(1, np.int64)), ("s", np.array(-2, np.float32)),
                                   ("n", np.array(4, np.int64))]):
    with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
        f.write(numpy_helper.from_array(value, name).SerializeToString())
for i, value in enumerate([np.array([-4, -6], np.float32), np.arange(4, dtype=np.int64)]):
    with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
        f.write(numpy_helper.from_array(value).SerializeToString())
run("run", path("dependent.onnx"), "--data", data, "--check", "--output-dir", path("out_data"))
check_outputs(path("out_data"), "--data")

# --input-value fixes them explicitly: the inputs left are X and s.
run("run", path("dependent.onnx"), "--input-value", "p=" + path("p.npy"), "--input-value", "n=" + path("n.npy"),
    "--input", "X=" + path("X.npy"), "--input", "s=" + path("s.npy"), "--output-dir", path("out_fixed"))
check_outputs(path("out_fixed"), "--input-value")
# compile with the values fixed: the PopEF file's inputs are X and s.
run("compile", path("dependent.onnx"), "-o", path("dependent.popef"), "--input-value", "p=" + path("p.npy"),
    "--input-value", "n=" + path("n.npy"))
run("run", path("dependent.popef"), "--input", "X=" + path("X.npy"), "--input", "s=" + path("s.npy"),
    "--output-dir", path("out_popef"))
check_outputs(path("out_popef"), "compiled with --input-value")
p = run("run", path("dependent.popef"), "--input-value", "p=" + path("p.npy"), fail=True)
expect("were bound when it was compiled" in p.stderr, f"--input-value on a PopEF file: {p.stderr!r}")
p = run("info", path("dependent.onnx"), "--input-value", "p=" + path("p.npy"), "--input-value", "n=" + path("n.npy"))
expect("Range" in p.stdout or "ramp" in p.stdout, f"ipu info with fixed inputs: {p.stdout!r}")

# Refusals, one line each.
p = run("run", path("dependent.onnx"), fail=True)  # nothing to fix them from
expect("from the value of input 'p'" in p.stderr and "--input-value" in p.stderr, f"no values: {p.stderr!r}")
p = run("compile", path("dependent.onnx"), "-o", path("dependent.popef"), fail=True)
expect("from the value of input" in p.stderr, f"compile without values: {p.stderr!r}")
np.save(path("p_float.npy"), np.array(1, dtype=np.float32))
p = run("run", path("dependent.onnx"), "--input-value", "p=" + path("p_float.npy"), fail=True)
expect("the model declares the element type INT64" in p.stderr, f"a float position: {p.stderr!r}")
p = run("run", path("dependent.onnx"), "--input-value", "q=" + path("p.npy"), fail=True)
expect("'q' is not an input of the model" in p.stderr, f"an unknown name: {p.stderr!r}")
p = run("run", path("dependent.onnx"), "--input-value", "p", fail=True)
expect("is not NAME=FILE" in p.stderr, f"no file: {p.stderr!r}")
p = run("run", path("dependent.onnx"), "--input-value", "p=" + path("p.npy"), "--input-value", "n=" + path("n.npy"),
        "--input", "p=" + path("p.npy"), fail=True)
expect("input 'p' is fixed at import by --input-value" in p.stderr, f"fixed and given: {p.stderr!r}")
p = run("run", path("dependent.onnx"), "--input-value", "p=" + path("p.npy"), "--input-value", "p=" + path("p.npy"),
        fail=True)
expect("'p' is given twice" in p.stderr, f"a name fixed twice: {p.stderr!r}")

# No output replaces a value file: not --output-dir, -o (through a hard link) or --json.
clash = path("clash")
os.makedirs(clash, exist_ok=True)
np.save(os.path.join(clash, "picked.npy"), np.array(1, dtype=np.int64))
p = run("run", path("dependent.onnx"), "--input-value", "p=" + os.path.join(clash, "picked.npy"),
        "--input-value", "n=" + path("n.npy"), "--input", "X=" + path("X.npy"), "--input", "s=" + path("s.npy"),
        "--output-dir", clash, fail=True)
expect("would destroy the input" in p.stderr, f"--output-dir over a value file: {p.stderr!r}")
expect(np.load(os.path.join(clash, "picked.npy")).tolist() == 1, "--output-dir replaced the value file")
for link in (path("n_link.popef"), path("n_link.json")):
    if not os.path.exists(link):
        os.link(path("n.npy"), link)
for flags in (["-o", path("n_link.popef")], ["-o", path("other.popef"), "--json=" + path("n_link.json")]):
    p = run("compile", path("dependent.onnx"), "--input-value", "p=" + path("p.npy"), "--input-value",
            "n=" + path("n.npy"), *flags, fail=True)
    expect("would destroy the input" in p.stderr, f"{flags} over a value file: {p.stderr!r}")
    expect(np.load(path("n.npy")).tolist() == 4, f"{flags} replaced the value file")
p = run("plan", path("dependent.onnx"), "--input-value", "p=" + path("p.npy"), "--input-value", "n=" + path("n.npy"),
        "--trace", path("p.npy"), fail=True)
expect("would destroy the input" in p.stderr, f"plan --trace over a value file: {p.stderr!r}")
expect(np.load(path("p.npy")).tolist() == 1, "plan --trace replaced the value file")

cli.finish("ok: inputs fixed at import from --input, --data and --input-value, the refusals, and value files kept")
