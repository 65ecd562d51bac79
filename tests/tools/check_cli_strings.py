#!/usr/bin/env python3
"""STRING tensors from the command line: `ipu run` reads numpy's string arrays (str and bytes) as
STRING inputs, runs StringNormalizer and Cast on them and writes STRING outputs numpy reads back;
`ipu convert` writes string constants ONNX's checker accepts; `ipu compile` and `ipu plan` refuse a
model with strings in one line, since the IPU has none.
Usage: check_cli_strings.py IPU WORK_DIR
"""
import os
import sys

import numpy as np
import onnx
from cli_script import CliScript
from onnx import TensorProto, helper

cli = CliScript(sys.argv[1], sys.argv[2])
path, run, expect = cli.path, cli.run, cli.expect

# words [5] -> StringNormalizer(UPPER, stopwords "monday") -> kept [3]
# numbers [3] (strings) -> Cast FLOAT -> values; values -> Cast STRING -> text
# a string constant, through Identity, -> greeting
nodes = [
    helper.make_node("StringNormalizer", ["words"], ["kept"], case_change_action="UPPER", stopwords=["monday"]),
    helper.make_node("Cast", ["numbers"], ["values"], to=TensorProto.FLOAT),
    helper.make_node("Cast", ["values"], ["text"], to=TensorProto.STRING),
    helper.make_node("Constant", [], ["hello"],
                     value=helper.make_tensor("hello_value", TensorProto.STRING, [2], [b"hello", "caf\u00e9".encode()])),
    helper.make_node("Identity", ["hello"], ["greeting"]),
]
graph = helper.make_graph(
    nodes, "strings",
    [helper.make_tensor_value_info("words", TensorProto.STRING, [5]),
     helper.make_tensor_value_info("numbers", TensorProto.STRING, [3])],
    [helper.make_tensor_value_info("kept", TensorProto.STRING, [3]),
     helper.make_tensor_value_info("values", TensorProto.FLOAT, [3]),
     helper.make_tensor_value_info("text", TensorProto.STRING, [3]),
     helper.make_tensor_value_info("greeting", TensorProto.STRING, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(model)
onnx.save(model, path("strings.onnx"))
np.save(path("words.npy"), np.array(["Monday", "tuesday", "caf\u00e9", "MONDAY", "\u03c3"]))
np.save(path("numbers.npy"), np.array([b"1.5", b" -2e3 ", b"INF"]))  # bytes ('S') work too

run("run", path("strings.onnx"), "--input", "words=" + path("words.npy"), "--input", "numbers=" + path("numbers.npy"),
    "--output-dir", path("out"))
kept = np.load(path("out/kept.npy"))
expect(kept.tolist() == ["TUESDAY", "CAF\u00c9", "\u03a3"], f"kept is {kept!r}")
values = np.load(path("out/values.npy"))
expect(values.dtype == np.float32 and values.tolist() == [1.5, -2000.0, float("inf")], f"values are {values!r}")
text = np.load(path("out/text.npy"))
expect(text.tolist() == ["1.5", "-2000.0", "INF"], f"text is {text!r}")
greeting = np.load(path("out/greeting.npy"))
expect(greeting.tolist() == ["hello", "caf\u00e9"], f"greeting is {greeting!r}")

# convert folds the constant into a STRING initializer, written as string_data.
run("convert", path("strings.onnx"), "-o", path("strings.opt.onnx"))
opt = onnx.load(path("strings.opt.onnx"))
onnx.checker.check_model(opt)
strings_out = [t for t in opt.graph.initializer if t.data_type == TensorProto.STRING] + \
    [a.t for n in opt.graph.node if n.op_type == "Constant" for a in n.attribute if a.t.data_type == TensorProto.STRING]
expect(any(list(t.string_data) == [b"hello", "caf\u00e9".encode()] and not t.raw_data for t in strings_out),
       f"no string constant with the greeting in the converted model: {strings_out!r}")
run("run", path("strings.opt.onnx"), "--input", "words=" + path("words.npy"), "--input", "numbers=" + path("numbers.npy"),
    "--output-dir", path("out_opt"))
for name in ("kept", "values", "text", "greeting"):
    a, b = np.load(path(f"out/{name}.npy")), np.load(path(f"out_opt/{name}.npy"))
    expect(a.dtype == b.dtype and a.tolist() == b.tolist(), f"{name}: converted model gives {b!r}, the original {a!r}")

# Random strings are digits, so a Cast accepts them.
cast_only = helper.make_model(helper.make_graph(
    [helper.make_node("Cast", ["numbers"], ["values"], to=TensorProto.FLOAT)], "cast",
    [helper.make_tensor_value_info("numbers", TensorProto.STRING, [4])],
    [helper.make_tensor_value_info("values", TensorProto.FLOAT, [4])]), opset_imports=[helper.make_opsetid("", 13)])
onnx.save(cast_only, path("cast.onnx"))
run("run", path("cast.onnx"), "--synthetic", "random", "--output-dir", path("out_synthetic"))
synthetic = np.load(path("out_synthetic/values.npy")).tolist()
expect(all(v in (0.0, 1.0, 2.0, 3.0) for v in synthetic), f"synthetic strings are not digits: {synthetic}")

# Refusals: the IPU has no strings; a word that is not a number names the element.
p = run("compile", path("strings.onnx"), "-o", path("strings.popef"), fail=True)
expect("is STRING: the IPU has no string type" in p.stderr, f"compile refusal: {p.stderr!r}")
expect(not os.path.exists(path("strings.popef")), "compile left a file behind")
p = run("plan", path("strings.onnx"), fail=True)
expect("is STRING: the IPU has no string type, so an IPU plan cannot carry it" in p.stderr, f"plan refusal: {p.stderr!r}")
np.save(path("bad_numbers.npy"), np.array(["1", "one", "3"]))
p = run("run", path("strings.onnx"), "--input", "words=" + path("words.npy"), "--input", "numbers=" + path("bad_numbers.npy"),
        "--output-dir", path("out_bad"), fail=True)
expect('element 1 of the input, "one", is not a number' in p.stderr, f"bad number refusal: {p.stderr!r}")

cli.finish("ok: STRING inputs, outputs, constants and refusals")
