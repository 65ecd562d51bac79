#!/usr/bin/env python3
"""The graph optimisation stage from the command line: `ipu convert` writes the optimised model,
`--passes LIST` runs exactly those passes, `--no-optimize` none, on convert, run and compile; the
optimised model computes what the original does (within 1e-5 of the largest output), and bad pass
lists, contradicting flags and flags a PopEF file cannot take are refused with one line.
Usage: check_cli_convert.py IPU WORK_DIR
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
rng = np.random.default_rng(7)


# x [2, 3, 6, 6] -> Conv (+B) -> BatchNormalization -> Relu -> Add(k) -> y, where k = Neg(c) is
# computable before running, and a Sigmoid of x that no output reads.
c_out = 4
init = [
    numpy_helper.from_array(rng.standard_normal((c_out, 3, 3, 3)).astype(np.float32) * 0.3, "w"),
    numpy_helper.from_array(rng.standard_normal(c_out).astype(np.float32) * 0.1, "b"),
    numpy_helper.from_array((rng.random(c_out) + 0.5).astype(np.float32), "scale"),
    numpy_helper.from_array(rng.standard_normal(c_out).astype(np.float32) * 0.2, "bias"),
    numpy_helper.from_array(rng.standard_normal(c_out).astype(np.float32) * 0.3, "mean"),
    numpy_helper.from_array((rng.random(c_out) + 0.5).astype(np.float32), "var"),
    numpy_helper.from_array(rng.standard_normal((1, c_out, 1, 1)).astype(np.float32), "c"),
]
nodes = [
    helper.make_node("Conv", ["x", "w", "b"], ["conv"], pads=[1, 1, 1, 1], name="conv"),
    helper.make_node("BatchNormalization", ["conv", "scale", "bias", "mean", "var"], ["bn"], epsilon=1e-3, name="bn"),
    helper.make_node("Relu", ["bn"], ["relu"], name="relu"),
    helper.make_node("Neg", ["c"], ["k"], name="neg"),
    helper.make_node("Add", ["relu", "k"], ["y"], name="add"),
    helper.make_node("Sigmoid", ["x"], ["unused"], name="dead"),
]
graph = helper.make_graph(nodes, "convert_me", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c_out, 6, 6])], init)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model)
onnx.save(model, path("model.onnx"))
np.save(path("x.npy"), rng.standard_normal((2, 3, 6, 6)).astype(np.float32))


def outputs(model_file, name, *flags):
    out = path("out_" + name)
    run("run", model_file, "--input", "x=" + path("x.npy"), "--output-dir", out, *flags)
    return np.load(os.path.join(out, "y.npy"))


# ipu convert, every pass: one FusedConv (the Conv with its Relu), no BatchNormalization, Neg or
# dead Sigmoid left.
j = json.loads(run("convert", path("model.onnx"), "-o", path("opt.onnx"), "--json").stdout)
expect([p["pass"] for p in j["passes"]] == ["eliminate-dead-code", "fold-constants", "fold-batch-normalization",
                                          "fuse-conv-activation", "fuse-layer-normalization", "fuse-swish",
                                          "nchwc-layout"],
       f"convert's default passes: {j['passes']}")
expect(j["ops_before"] == 6 and j["ops_after"] == 2, f"convert: ops {j['ops_before']} -> {j['ops_after']}, want 6 -> 2")
opt = onnx.load(path("opt.onnx"))
onnx.checker.check_model(opt)
# Folded values are written as Constant nodes (the exporter's form for constants, as against weights).
expect(sorted(n.op_type for n in opt.graph.node if n.op_type != "Constant") == ["Add", "FusedConv"],
       f"the optimised model's ops: {[n.op_type for n in opt.graph.node]}")
fused = next(n for n in opt.graph.node if n.op_type == "FusedConv")
expect(fused.domain == "com.microsoft" and helper.get_attribute_value(fused.attribute[-1]) == b"Relu",
       f"the fused op: {fused}")
text = run("convert", path("model.onnx"), "-o", path("opt_text.onnx")).stdout
expect("fold-batch-normalization" in text and "6 -> 5" in text and "wrote " in text, f"convert's text: {text!r}")

# The same outputs: the original unoptimised, the original optimised by run, and the converted file.
want = outputs(path("model.onnx"), "plain", "--no-optimize")
scale = np.abs(want).max()
for name, got in [("optimised by run", outputs(path("model.onnx"), "default")),
                  ("converted", outputs(path("opt.onnx"), "converted", "--no-optimize"))]:
    err = np.abs(got - want).max() / scale
    expect(err < 1e-5, f"{name}: max |diff| / max |y| = {err}")

# --passes runs exactly those, in order; --no-optimize none.
j = json.loads(run("convert", path("model.onnx"), "-o", path("only_bn.onnx"), "--passes", "fold-batch-normalization",
                   "--json").stdout)
expect([p["pass"] for p in j["passes"]] == ["fold-batch-normalization"] and j["ops_after"] == 5,
       f"--passes fold-batch-normalization: {j}")
j = json.loads(run("convert", path("model.onnx"), "-o", path("none.onnx"), "--no-optimize", "--json").stdout)
expect(j["passes"] == [] and j["ops_after"] == 6, f"--no-optimize: {j}")
j = json.loads(run("run", path("model.onnx"), "--input", "x=" + path("x.npy"), "--output-dir", path("out_json"),
                   "--passes", "eliminate-dead-code", "--json").stdout)
expect([(p["pass"], p["ops_before"], p["ops_after"]) for p in j["passes"]] == [("eliminate-dead-code", 6, 5)],
       f"ipu run --passes eliminate-dead-code: {j.get('passes')}")

# compile: the PopEF file holds the optimised graph; its report says what ran.
j = json.loads(run("compile", path("model.onnx"), "-o", path("model.popef"), "--json").stdout)
expect(len(j["passes"]) == 7 and j["passes"][-1]["ops_after"] == 2, f"compile's passes: {j['passes']}")
j = json.loads(run("compile", path("model.onnx"), "-o", path("plain.popef"), "--no-optimize", "--json").stdout)
expect(j["passes"] == [], f"compile --no-optimize: {j['passes']}")
got = outputs(path("model.popef"), "popef")
expect(np.abs(got - want).max() / scale < 1e-5, "the compiled optimised model's outputs differ")

# fuse-qdq, named before the defaults: a QDQ Conv (x and its weights dequantized, the result
# quantized) becomes one QLinearConv in the converted file, which ONNX's checker accepts; the
# integer outputs stay within one quantization step of the float QDQ graph's.
sx, sw, sy = np.float32(0.05), (rng.random(c_out) * 0.02 + 0.005).astype(np.float32), np.float32(0.1)
wq = rng.integers(-127, 128, (c_out, 3, 3, 3), dtype=np.int8)
q_init = [
    numpy_helper.from_array(np.array(sx), "sx"), numpy_helper.from_array(np.array(128, np.uint8), "zx"),
    numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(sw, "sw"),
    numpy_helper.from_array(np.zeros(c_out, np.int8), "zw"),
    numpy_helper.from_array(rng.integers(-500, 500, c_out, dtype=np.int32), "bq"),
    numpy_helper.from_array((sx * sw).astype(np.float32), "sb"),
    numpy_helper.from_array(np.array(sy), "sy"), numpy_helper.from_array(np.array(0, np.uint8), "zy"),
]
q_nodes = [
    helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
    helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
    helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=0),
    helper.make_node("DequantizeLinear", ["bq", "sb"], ["bd"], axis=0),
    helper.make_node("Conv", ["xd", "wd", "bd"], ["conv"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["conv"], ["relu"]),
    helper.make_node("QuantizeLinear", ["relu", "sy", "zy"], ["yq"]),
    helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"]),
]
q_graph = helper.make_graph(q_nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 6, 6])],
                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c_out, 6, 6])], q_init)
q_model = helper.make_model(q_graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(q_model)
onnx.save(q_model, path("qdq.onnx"))
j = json.loads(run("convert", path("qdq.onnx"), "-o", path("qdq_int.onnx"), "--passes", "fuse-qdq,default",
                   "--json").stdout)
expect([p["pass"] for p in j["passes"]][:2] == ["fuse-qdq", "eliminate-dead-code"], f"fuse-qdq,default: {j['passes']}")
q_opt = onnx.load(path("qdq_int.onnx"))
onnx.checker.check_model(q_opt)
expect(sorted(n.op_type for n in q_opt.graph.node if n.op_type != "Constant") ==
       ["DequantizeLinear", "QLinearConv", "QuantizeLinear"], f"fuse-qdq's ops: {[n.op_type for n in q_opt.graph.node]}")
q_float = outputs(path("qdq.onnx"), "qdq_float")
q_int = outputs(path("qdq.onnx"), "qdq_int", "--passes", "fuse-qdq,default")
expect(np.abs(q_int - q_float).max() <= sy * 1.001, f"fuse-qdq moved an output by {np.abs(q_int - q_float).max()}")
expect(np.array_equal(outputs(path("qdq_int.onnx"), "qdq_converted", "--no-optimize"), q_int),
       "the converted QLinearConv model differs from run --passes fuse-qdq,default")

# Refusals, one line each.
for args, words in [
    (["convert", path("model.onnx"), "-o", path("bad.onnx"), "--passes", "fold-everything"], "no graph pass 'fold-everything'"),
    (["convert", path("model.onnx"), "-o", path("bad.onnx"), "--passes", "fold-constants,,eliminate-dead-code"], "empty name"),
    (["convert", path("model.onnx"), "-o", path("bad.onnx"), "--passes", "none", "--no-optimize"], "contradict"),
    (["convert", path("model.onnx"), "-o", path("bad.txt")], "not an .onnx file"),
    (["convert", path("model.onnx"), "-o", path("model.onnx")], "model.onnx"),
    (["run", path("model.popef"), "--passes", "fold-constants"], "optimised when it was compiled"),
    (["run", path("model.popef"), "--no-optimize"], "optimised when it was compiled"),
    (["compile", path("model.onnx"), "-o", path("bad.popef"), "--passes", "bogus"], "no graph pass 'bogus'"),
    (["run", path("model.onnx"), "--passes", "bogus"], "no graph pass 'bogus'"),
    (["run", path("qdq.onnx"), "--input", "x=" + path("x.npy"), "--passes", "default,fuse-qdq"], "pass 'fuse-qdq' comes after 'fold-constants'"),
]:
    p = run(*args, fail=True)
    expect(words in p.stderr, f"ipu {' '.join(args)}: {p.stderr.strip()!r} does not say {words!r}")
expect(not os.path.exists(path("bad.onnx")) and not os.path.exists(path("bad.popef")), "a refused command wrote a file")

cli.finish("convert, --passes and --no-optimize: all checks passed")
