#!/usr/bin/env python3
"""Writes the seed corpus of one fuzz target into a directory (run by CTest as a fixture).

usage: make_corpus.py onnx|options|npy|cli DIR [ONNX_NODE_TESTS_DIR]

onnx:    small models built with onnx.helper (each op family the importer treats specially: Loop,
         Scan, If, Range, ConstantOfShape, Reshape from a shape computation, declared value_info,
         external data), plus up to 300 model.onnx files of ONNX's node tests when their directory
         is given and exists (the conformance fixture writes it).
options: PopTorch option files: each call the parser knows, chained, nested and commented.
npy:     numpy.save of every dtype the reader takes (strings too), versions 1.0/2.0/3.0, Fortran order, scalars.
cli:     --input-shape lists (first byte even) and TensorProto .pb files (first byte odd).
"""
import io
import os
import shutil
import sys


def write(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def onnx_corpus(d, node_dir):
    import numpy as np
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    def model(name, nodes, inputs, outputs, inits=(), value_info=(), opset=17):
        g = h.make_graph(nodes, name, inputs, outputs, list(inits), value_info=list(value_info))
        m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
        m.ir_version = 8
        write(d, name + ".onnx", m.SerializeToString())

    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
    model("relu", [h.make_node("Relu", ["x"], ["y"])], [x], [y])
    model("relu_opset7", [h.make_node("Relu", ["x"], ["y"])], [x], [y], opset=7)
    model("matmul", [h.make_node("MatMul", ["x", "w"], ["y"])], [x],
          [h.make_tensor_value_info("y", T.FLOAT, [2, 4])],
          [nh.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")])
    # A declared intermediate shape that disagrees with inference (the overflow case).
    model("value_info_mismatch", [h.make_node("Relu", ["x"], ["t"]), h.make_node("Neg", ["t"], ["y"])], [x], [y],
          value_info=[h.make_tensor_value_info("t", T.FLOAT, [4, 5])])
    model("output_mismatch", [h.make_node("Relu", ["x"], ["y"])], [x],
          [h.make_tensor_value_info("y", T.FLOAT, [7])])
    model("range", [h.make_node("Range", ["s", "l", "d"], ["y"])], [],
          [h.make_tensor_value_info("y", T.INT64, [None])],
          [nh.from_array(np.array(0, np.int64), "s"), nh.from_array(np.array(10, np.int64), "l"),
           nh.from_array(np.array(3, np.int64), "d")])
    model("constant_of_shape", [h.make_node("ConstantOfShape", ["s"], ["y"],
                                            value=nh.from_array(np.array([1.5], np.float32)))], [],
          [h.make_tensor_value_info("y", T.FLOAT, None)], [nh.from_array(np.array([2, 3], np.int64), "s")])
    model("reshape_shape", [h.make_node("Shape", ["x"], ["s"]), h.make_node("Reshape", ["x", "s"], ["y"])], [x], [y])
    body = h.make_graph([h.make_node("Add", ["acc", "one"], ["acc2"]),
                         h.make_node("Identity", ["cond"], ["cond2"])], "body",
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond", T.BOOL, []),
                         h.make_tensor_value_info("acc", T.FLOAT, [2, 3])],
                        [h.make_tensor_value_info("cond2", T.BOOL, []), h.make_tensor_value_info("acc2", T.FLOAT, [2, 3])],
                        [nh.from_array(np.ones((2, 3), np.float32), "one")])
    model("loop", [h.make_node("Loop", ["n", "", "x"], ["y"], body=body)], [x], [y],
          [nh.from_array(np.array(3, np.int64), "n")])
    scan_body = h.make_graph([h.make_node("Add", ["s", "e"], ["s2"]), h.make_node("Identity", ["s2"], ["o"])], "scan",
                             [h.make_tensor_value_info("s", T.FLOAT, [3]), h.make_tensor_value_info("e", T.FLOAT, [3])],
                             [h.make_tensor_value_info("s2", T.FLOAT, [3]), h.make_tensor_value_info("o", T.FLOAT, [3])])
    model("scan", [h.make_node("Scan", ["z", "x"], ["y", "ys"], body=scan_body, num_scan_inputs=1)], [x],
          [h.make_tensor_value_info("y", T.FLOAT, [3]), h.make_tensor_value_info("ys", T.FLOAT, [2, 3])],
          [nh.from_array(np.zeros(3, np.float32), "z")])
    then_g = h.make_graph([h.make_node("Relu", ["x"], ["a"])], "then", [], [h.make_tensor_value_info("a", T.FLOAT, [2, 3])])
    else_g = h.make_graph([h.make_node("Neg", ["x"], ["b"])], "else", [], [h.make_tensor_value_info("b", T.FLOAT, [2, 3])])
    model("if", [h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)], [x], [y],
          [nh.from_array(np.array(True), "c")])
    ext = nh.from_array(np.zeros((3, 4), np.float32), "w")
    onnx.external_data_helper.set_external_data(ext, "weights.bin", offset=0, length=48)
    ext.ClearField("raw_data")
    ext.data_location = T.EXTERNAL
    model("external", [h.make_node("MatMul", ["x", "w"], ["y"])], [x], [h.make_tensor_value_info("y", T.FLOAT, [2, 4])],
          [ext])
    model("conv_pool", [h.make_node("Conv", ["i", "k"], ["c"], pads=[1, 1, 1, 1]),
                        h.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
          [h.make_tensor_value_info("i", T.FLOAT, [1, 1, 4, 4])], [h.make_tensor_value_info("y", T.FLOAT, [1, 1, 2, 2])],
          [nh.from_array(np.ones((1, 1, 3, 3), np.float32), "k")])
    model("gather_concat", [h.make_node("Gather", ["x", "idx"], ["g"], axis=1), h.make_node("Concat", ["g", "g"], ["y"], axis=0)],
          [x], [h.make_tensor_value_info("y", T.FLOAT, [4, 2])], [nh.from_array(np.array([0, 2], np.int64), "idx")])
    # Sequences, lowered at import (ipu/onnx/sequences.hpp): split / erase / concat, and a Loop
    # carrying a sequence that is unrolled.
    model("sequence_split_concat",
          [h.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
           h.make_node("SequenceErase", ["rows", "p"], ["one"]),
           h.make_node("ConcatFromSequence", ["one"], ["y"], axis=0, new_axis=1)],
          [x], [h.make_tensor_value_info("y", T.FLOAT, [1, 3])], [nh.from_array(np.array(-1, np.int64), "p")])
    seq_body = h.make_graph([h.make_node("Identity", ["cond"], ["cond2"]),
                             h.make_node("SequenceInsert", ["s", "x"], ["s2"])], "seq_body",
                            [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond", T.BOOL, []),
                             h.make_tensor_sequence_value_info("s", T.FLOAT, None)],
                            [h.make_tensor_value_info("cond2", T.BOOL, []),
                             h.make_tensor_sequence_value_info("s2", T.FLOAT, None)])
    model("sequence_loop",
          [h.make_node("SequenceEmpty", [], ["e"], dtype=T.FLOAT),
           h.make_node("Loop", ["n", "", "e"], ["s"], body=seq_body),
           h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
          [x], [h.make_tensor_value_info("y", T.FLOAT, [6, 3])], [nh.from_array(np.array(3, np.int64), "n")])
    if node_dir and os.path.isdir(node_dir):
        n = 0
        for name in sorted(os.listdir(node_dir)):
            p = os.path.join(node_dir, name, "model.onnx")
            if os.path.isfile(p) and os.path.getsize(p) < 16384 and n < 300:
                shutil.copy(p, os.path.join(d, "node_" + name + ".onnx"))
                n += 1


OPTIONS = [
    "deviceIterations(1)\nreplicationFactor(1)\nenableSyntheticData(True)\n",
    "setExecutionStrategy(poptorch.ShardedExecution())\n",
    "setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))\n",
    "connectionType(poptorch.ConnectionType.OnDemand)\n",
    """# training run on 4 IPUs
   deviceIterations(8)   # trailing comment
replicationFactor(2)

Training.gradientAccumulation(4)
outputMode(poptorch.OutputMode.EveryN, output_return_period=2)
Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Sum).setAutomaticLossScaling(True)
Precision.setPartialsType(torch.half)
Precision.halfFloatCasting(poptorch.HalfFloatCastingBehavior.HalfUpcastToFloat)
inputReplicaGrouping(input_group_size=2, input_group_type=poptorch.enums.CommGroupType.Consecutive)
setAvailableMemoryProportion({"IPU0": 0.5, 'IPU3': 0.25,})
enableExecutableCaching('/tmp/exe cache')
randomSeed(1_000)
autoRoundNumIPUs()
connectionType(poptorch.ConnectionType.OnDemand).syncPattern(poptorch.SyncPattern.SinglePipeline)
TensorLocations.setWeightLocation(poptorch.TensorLocationSettings().useOnChipStorage(False).minElementsForOffChip(1024))
Distributed.configureProcessId(1, 4)
""",
    'setExecutionStrategy(poptorch.PipelinedExecution(poptorch.Stage("A", "B").ipu(0), "C", ["D", "E"]))\n',
    'setExecutionStrategy(poptorch.SerialPhasedExecution(poptorch.Phase(poptorch.Stage("A").ipu(0), '
    'poptorch.Stage("A2").ipu(1)), poptorch.Phase(poptorch.Stage("B"), poptorch.Stage("B2")).ipus(0, 1), ["C", "C2"])'
    '.setTensorsLiveness(poptorch.Liveness.OffChipAfterEachPhase))\n',
    'setExecutionStrategy(poptorch.ParallelPhasedExecution([poptorch.Phase(poptorch.Stage("0").ipu(0)), '
    'poptorch.Phase(poptorch.Stage("1").ipu(1))]).sendTensorsOffChipAfterFwd().useSeparateBackwardPhase(True))\n',
    "deviceIterations(-(+(-4)))\nsetAvailableMemoryProportion(0.5)\nuseOfflineIpuTarget('ipu21')\n",
    "Precision.setFloatType(torch.half)\nTraining.gradientAccumulation(2)\n",
    "deviceIterations(((((((1)))))))\n",
]


def options_corpus(d):
    for i, text in enumerate(OPTIONS):
        write(d, "options_%02d.conf" % i, text.encode())


def npy_corpus(d):
    import numpy as np
    arrays = [np.arange(6, dtype=t).reshape(2, 3) for t in
              (np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
               np.int64, np.uint64)]
    arrays += [np.array(3.5, np.float32), np.zeros((0, 4), np.float32), np.array([True, False]),
               np.arange(6, dtype=">f4").reshape(3, 2), np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
               np.array([["monday", "tuesday"], ["caf\u00e9", ""]]), np.array([b"a\xff", b"bc"])]
    for i, a in enumerate(arrays):
        b = io.BytesIO()
        np.save(b, a)
        write(d, "a%02d.npy" % i, b.getvalue())
    from numpy.lib import format as fmt
    for version in ((2, 0), (3, 0)):
        b = io.BytesIO()
        fmt.write_array(b, np.ones((2, 2), np.float32), version=version)
        write(d, "v%d.npy" % version[0], b.getvalue())


def cli_corpus(d):
    for i, text in enumerate(["x=1,3,224,224", "x=\ny=2,2", "a=b=1,2", "x=1,,2", "x=-1", "x=9223372036854775807,2",
                              "input=1\ninput=2"]):
        write(d, "shape_%02d" % i, b"\x00" + text.encode())
    import numpy as np
    from onnx import numpy_helper as nh, helper as h, TensorProto as T
    tensors = [nh.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "x"),
               nh.from_array(np.array([1, -2], np.int64), "i"),
               nh.from_array(np.array([True, False]), "b"),
               nh.from_array(np.arange(4, dtype=np.float16), "h"),
               h.make_tensor("f", T.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0]),
               h.make_tensor("d", T.INT32, [3], [1, 2, 3])]
    for i, t in enumerate(tensors):
        write(d, "tensor_%02d" % i, b"\x01" + t.SerializeToString())


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    kind, d = sys.argv[1], sys.argv[2]
    os.makedirs(d, exist_ok=True)
    if kind == "onnx":
        onnx_corpus(d, sys.argv[3] if len(sys.argv) > 3 else None)
    elif kind == "options":
        options_corpus(d)
    elif kind == "npy":
        npy_corpus(d)
    elif kind == "cli":
        cli_corpus(d)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
