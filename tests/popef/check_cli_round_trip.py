"""ONNX -> `ipu compile` -> PopEF -> `ipu run` in a fresh process, served by the Model Runtime with
the file's schedule, from one client and from four (`--clients 4 --iterations 8`): the outputs must
be byte for byte those of `ipu run MODEL.onnx`, and `ipu inspect` must describe the file. `ipu run MODEL.onnx` must
also match PyTorch's output (MODEL.output.npy, written by tests/data/export_models.py):
max |ipu - torch| / max |torch| < 1e-4.

usage: check_cli_round_trip.py IPU MODEL.onnx INPUT.npy WORKDIR [ipu compile options...]
"""
import os
import shutil
import subprocess
import sys


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAILED ({p.returncode}): {' '.join(cmd)}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p.stdout


def main():
    ipu, model, x, work = sys.argv[1:5]
    extra = sys.argv[5:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    popef = os.path.join(work, "model.popef")
    print(run([ipu, "compile", model, "-o", popef] + extra))
    listing = run([ipu, "inspect", popef])
    for part in ("Executable", "Metadata", "TensorData", "anchors", "program flow: load [0], main [5]"):
        if part not in listing:
            sys.exit(f"ipu inspect does not mention {part!r}:\n{listing}")
    name = run([sys.executable, "-c", "import onnx,sys; print(onnx.load(sys.argv[1], load_external_data=False).graph.input[0].name)", model]).strip()
    run([ipu, "run", model, "--input", f"{name}={x}", "--output-dir", os.path.join(work, "onnx")])
    run([ipu, "run", popef, "--input", f"{name}={x}", "--output-dir", os.path.join(work, "popef")])
    text = run([ipu, "run", popef, "--input", f"{name}={x}", "--output-dir", os.path.join(work, "popef4"),
                "--clients", "4", "--iterations", "8"])
    if "latency_ms mean=" not in text or "throughput samples_per_s=" not in text:
        sys.exit(f"ipu run --clients 4 --iterations 8 printed no latency or throughput:\n{text}")
    outs = sorted(os.listdir(os.path.join(work, "onnx")))
    for run_dir in ("popef", "popef4"):
        if not outs or outs != sorted(os.listdir(os.path.join(work, run_dir))):
            sys.exit(f"different output files: {outs} vs {os.listdir(os.path.join(work, run_dir))}")
        for f in outs:
            a = open(os.path.join(work, "onnx", f), "rb").read()
            b = open(os.path.join(work, run_dir, f), "rb").read()
            if a != b:
                sys.exit(f"{f}: the PopEF run ({run_dir}) differs from the ONNX run")
    print(f"identical outputs (1 and 4 clients): {', '.join(outs)}")
    expected = model[: -len(".onnx")] + ".output.npy"
    if len(outs) != 1:
        sys.exit(f"expected one graph output to compare with {expected}, got {outs}")
    import numpy as np
    ours, torch_out = np.load(os.path.join(work, "onnx", outs[0])), np.load(expected)
    if ours.shape != torch_out.shape:
        sys.exit(f"{outs[0]}: shape {ours.shape}, PyTorch's {torch_out.shape}")
    err = float(np.abs(ours.astype(np.float64) - torch_out).max() / np.abs(torch_out).max())
    print(f"against PyTorch: max |ipu - torch| / max |torch| = {err:.2e}")
    if not err < 1e-4:
        sys.exit(f"{outs[0]}: differs from PyTorch's output by {err:.2e} (relative to its largest value)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
