#!/usr/bin/env python3
"""`ipu train` under mpirun: the replicas spread over 2 processes train the weights one process
running every replica trains, bit for bit; only rank 0 prints and writes; refusals.

An MLP (ONNX built here, random weights) is trained for 4 steps of Adam with --replicas 2 and 4
(gradient accumulation 2) by one process and by `mpirun -np 2`; every initializer of the two
trained models must be equal byte for byte, and the weights must have moved (each process is fed
only its replicas' rows of a step, so this checks the split too). Then: replicas the
ranks do not divide, --mpi-timeout without mpirun, and a bad --mpi-timeout, each a clear error.
Usage: check_cli_train_mpi.py IPU_EXECUTABLE MPIRUN
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

MPI_FLAGS = ["--oversubscribe", "--allow-run-as-root", "-np", "2"]


def mlp(path, rng):
    init = [onh.from_array(rng.normal(0, 0.4, s).astype(np.float32), n)
            for n, s in [("w1", (6, 8)), ("b1", (8,)), ("w2", (8, 3)), ("b2", (3,))]]
    nodes = [oh.make_node("MatMul", ["x", "w1"], ["m1"]), oh.make_node("Add", ["m1", "b1"], ["a1"]),
             oh.make_node("Tanh", ["a1"], ["h"]), oh.make_node("MatMul", ["h", "w2"], ["m2"]),
             oh.make_node("Add", ["m2", "b2"], ["y"])]
    g = oh.make_graph(nodes, "mlp", [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 6])],
                      [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 3])], init)
    onnx.save(oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)]), path)


def run(cmd, fail=False, expect=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if fail != (p.returncode != 0):
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    if expect is not None and expect not in p.stdout + p.stderr:
        sys.exit(f"{' '.join(cmd)}: no '{expect}' in\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def weights(path):
    return {t.name: onh.to_array(t) for t in onnx.load(path).graph.initializer}


def main():
    ipu, mpirun = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as d:
        path = lambda n: os.path.join(d, n)  # noqa: E731
        mlp(path("mlp.onnx"), rng)
        np.save(path("x.npy"), rng.normal(0, 1, (64, 6)).astype(np.float32))
        np.save(path("y.npy"), rng.normal(0, 1, (64, 3)).astype(np.float32))
        common = [path("mlp.onnx"), "--output", "y", "--loss", "mse", "--input", "x=" + path("x.npy"),
                  "--labels", path("y.npy"), "--optimizer", "adam", "--lr", "0.01", "--gradient-accumulation", "2",
                  "--steps", "4"]
        for r in ("2", "4"):
            one, spread = path(f"one{r}.onnx"), path(f"spread{r}.onnx")
            run([ipu, "train", *common, "--replicas", r, "-o", one])
            p = run([mpirun, *MPI_FLAGS, ipu, "train", *common, "--replicas", r, "--mpi-timeout", "30", "-o", spread],
                    expect=f"mpi: 2 processes share {r} replicas")
            if p.stdout.count("wrote ") != 1 or p.stdout.count("step 4/4") != 1:
                sys.exit(f"rank 0 alone should report and write:\n{p.stdout}")
            a, b, initial = weights(one), weights(spread), weights(path("mlp.onnx"))
            for n in initial:
                if a[n].tobytes() != b[n].tobytes():
                    sys.exit(f"--replicas {r}: weight {n} differs between one process and mpirun -np 2")
            if all(a[n].tobytes() == initial[n].tobytes() for n in initial):
                sys.exit("the weights did not train")
        run([mpirun, *MPI_FLAGS, ipu, "train", *common, "--replicas", "3", "-o", path("bad.onnx")], fail=True,
            expect="2 MPI ranks do not divide 3 replicas")
        run([ipu, "train", *common, "--mpi-timeout", "5", "-o", path("bad.onnx")], fail=True,
            expect="--mpi-timeout without mpirun")
        run([mpirun, *MPI_FLAGS, ipu, "train", *common, "--replicas", "2", "--mpi-timeout", "0", "-o", path("bad.onnx")],
            fail=True, expect="--mpi-timeout: Value 0 not in range")
    print("ipu train under mpirun: OK")


if __name__ == "__main__":
    main()
