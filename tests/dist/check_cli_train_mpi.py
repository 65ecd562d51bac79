#!/usr/bin/env python3
"""`ipu train` under mpirun: the replicas spread over 2 processes train the weights one process
running every replica trains, bit for bit; only rank 0 prints and writes; refusals.

An MLP (ONNX built here, random weights) is trained for 4 steps of Adam with --replicas 2 and 4
(gradient accumulation 2) by one process and by `mpirun -np 2`; every initializer of the two
trained models must be equal byte for byte, and the weights must have moved (each process is fed
only its replicas' rows of a step, so this checks the split too), also with files whose rows
wrap around within a micro-batch. Each rank reads only the rows of
its micro-batches from the .npy files: rank 0's --json report says how many rows and bytes it read,
which must be exactly its share (headers included) and, with --replicas 2, less than the files.
Then: a label out of range named by its row, replicas the ranks do not divide, --mpi-timeout without mpirun, and a bad --mpi-timeout, each a clear error.
Usage: check_cli_train_mpi.py IPU_EXECUTABLE MPIRUN
"""
import json
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
        steps, accumulation, batch = 4, 2, 4  # the flags below; batch: the model's
        flags = lambda x, y, loss="mse": [  # noqa: E731
            path("mlp.onnx"), "--output", "y", "--loss", loss, "--input", "x=" + path(x), "--labels", path(y),
            "--optimizer", "adam", "--lr", "0.01", "--gradient-accumulation", str(accumulation), "--steps", str(steps)]
        common = flags("x.npy", "y.npy")
        for r in ("2", "4"):
            one, spread = path(f"one{r}.onnx"), path(f"spread{r}.onnx")
            run([ipu, "train", *common, "--replicas", r, "-o", one])
            report = path(f"spread{r}.json")
            p = run([mpirun, *MPI_FLAGS, ipu, "train", *common, "--replicas", r, "--mpi-timeout", "30", "-o", spread,
                     "--json", report], expect=f"mpi: 2 processes share {r} replicas")
            # Rank 0 runs R / 2 replicas: per step, each accumulation index's R / 2 micro-batches of
            # `batch` rows, from each file; plus each file's header once.
            files = [path("x.npy"), path("y.npy")]
            arrays = [np.load(f) for f in files]
            rows = steps * accumulation * (int(r) // 2) * batch
            want_bytes = sum(os.path.getsize(f) - a.nbytes + rows * a[0].nbytes for f, a in zip(files, arrays))
            with open(report) as f:
                mpi = json.load(f)["mpi"]
            if mpi["input_rows_read"] != 2 * rows or mpi["input_bytes_read"] != want_bytes:
                sys.exit(f"--replicas {r}: rank 0 read {mpi['input_rows_read']} rows, {mpi['input_bytes_read']} bytes; "
                         f"its share is {2 * rows} rows, {want_bytes} bytes")
            if r == "2" and not want_bytes < sum(os.path.getsize(f) for f in files):
                sys.exit("rank 0's share should be less than the whole files")
            if p.stdout.count(f"wrote {spread}\n") != 1 or p.stdout.count("step 4/4") != 1:
                sys.exit(f"rank 0 alone should report and write:\n{p.stdout}")
            a, b, initial = weights(one), weights(spread), weights(path("mlp.onnx"))
            for n in initial:
                if a[n].tobytes() != b[n].tobytes():
                    sys.exit(f"--replicas {r}: weight {n} differs between one process and mpirun -np 2")
            if all(a[n].tobytes() == initial[n].tobytes() for n in initial):
                sys.exit("the weights did not train")
        # 10 rows: micro-batches wrap around the files' end (a rank reads the rows in two parts), and
        # the float64 inputs are converted as they are read. Still one process's weights.
        np.save(path("x10.npy"), rng.normal(0, 1, (10, 6)))
        np.save(path("y10.npy"), rng.normal(0, 1, (10, 3)).astype(np.float32))
        run([ipu, "train", *flags("x10.npy", "y10.npy"), "--replicas", "2", "-o", path("one10.onnx")])
        run([mpirun, *MPI_FLAGS, ipu, "train", *flags("x10.npy", "y10.npy"), "--replicas", "2", "-o",
             path("spread10.onnx")])
        a, b = weights(path("one10.onnx")), weights(path("spread10.onnx"))
        if any(a[n].tobytes() != b[n].tobytes() for n in a):
            sys.exit("10-row files: the weights differ between one process and mpirun -np 2")
        # A class index out of range is refused naming its row of the file, by the rank that reads it
        # (row 37 is in micro-batch 1 of step 3: rank 1's) as by one process reading the whole file.
        classes = rng.integers(0, 3, 64)
        classes[37] = 3
        np.save(path("classes.npy"), classes)
        bad_classes = flags("x.npy", "classes.npy", loss="cross-entropy")
        run([ipu, "train", *bad_classes, "--replicas", "2", "-o", path("bad.onnx")], fail=True,
            expect="label 3 is not a class index of the output's 3 classes (row 37 of the file)")
        run([mpirun, *MPI_FLAGS, ipu, "train", *bad_classes, "--replicas", "2", "-o", path("bad.onnx")], fail=True,
            expect="label 3 is not a class index of the output's 3 classes (row 37 of the file)")
        run([mpirun, *MPI_FLAGS, ipu, "train", *common, "--replicas", "3", "-o", path("bad.onnx")], fail=True,
            expect="2 MPI ranks do not divide 3 replicas")
        run([ipu, "train", *common, "--mpi-timeout", "5", "-o", path("bad.onnx")], fail=True,
            expect="--mpi-timeout without mpirun")
        run([mpirun, *MPI_FLAGS, ipu, "train", *common, "--replicas", "2", "--mpi-timeout", "0", "-o", path("bad.onnx")],
            fail=True, expect="--mpi-timeout: Value 0 not in range")
    print("ipu train under mpirun: OK")


if __name__ == "__main__":
    main()
