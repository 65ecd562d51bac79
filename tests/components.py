#!/usr/bin/env python3
"""Each CMake component's headers pull in only that component's dependencies, run as a CTest.

Loading a PopEF file must not need libonnx either (ipu::popef, ipu::runtime). Debian installs libonnx's, protobuf's and OpenBLAS's headers in /usr/include, so a header that
needs them would still compile with a component that does not link them; instead, this preprocesses
one translation unit of each component's headers (`c++ -M`) and fails if the dependency list names
a header of a library the component does not link (CMakeLists.txt lists the components).

usage: components.py CXX INCLUDE_DIR GENERATED_DIR
"""
import pathlib
import subprocess
import sys
import tempfile

# Folders (or files) of each light component, and the libraries their headers must not reach.
COMPONENTS = {
    "core": {
        "headers": ["*.hpp", "io", "graph", "device", "ops", "builder", "train", "poptorch", "sched"],
        "exclude": ["ipu.hpp", "ops/kernels/", "ops/all.hpp", "train/session.hpp", "poptorch/model.hpp"],
        "forbidden": ["/onnx/", "/google/protobuf/", "cblas", "openblas", "popef.pb.h", "xxhash", "zlib.h"],
    },
    "host": {
        "headers": ["ops/all.hpp", "ops/kernels", "cpu", "exec", "train/session.hpp", "poptorch/model.hpp"],
        "exclude": [],
        "forbidden": ["/onnx/", "/google/protobuf/", "popef.pb.h", "xxhash", "zlib.h"],
    },
    "popef": {
        "headers": ["popef", "compile"],
        "exclude": [],
        "forbidden": ["/onnx/", "cblas", "openblas"],
    },
    "runtime": {
        "headers": ["runtime"],
        "exclude": [],
        "forbidden": ["/onnx/"],
    },
    "serve": {
        "headers": ["serve"],
        # ipu::serve_grpc: gRPC and the generated service
        "exclude": ["serve/grpc_server.hpp", "serve/grpc_codec.hpp"],
        "forbidden": ["/onnx/", "grpcpp", "kserve_v2"],
    },
    # The gRPC messages' codec, which the request fuzzer compiles alone: the protobuf messages only,
    # no gRPC++ and no model runtime or kernels. Checked when gRPC's code has been generated.
    "serve_grpc codec": {
        "headers": ["serve/grpc_codec.hpp"],
        "exclude": [],
        "forbidden": ["/onnx/", "grpcpp", "grpc.pb.h", "/runtime/", "/ops/kernels/", "popef.pb.h"],
        "needs": "ipu/serve/kserve_v2.pb.h",
    },
}


def headers_of(root: pathlib.Path, spec: dict) -> list[str]:
    out = []
    for h in spec["headers"]:
        if h.endswith(".hpp") and "*" in h:
            found = root.glob(h)
        elif h.endswith(".hpp"):
            found = [root / h]
        else:
            found = (root / h).rglob("*.hpp")
        for p in found:
            rel = p.relative_to(root).as_posix()
            if not any(rel == e or (e.endswith("/") and rel.startswith(e)) for e in spec["exclude"]):
                out.append(rel)
    return sorted(set(out))


def main() -> int:
    cxx, include, generated = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
    root = include / "ipu"
    failures = 0
    for name, spec in COMPONENTS.items():
        if "needs" in spec and not (pathlib.Path(generated) / spec["needs"]).exists():
            continue
        headers = headers_of(root, spec)
        with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as tu:
            tu.write("".join(f'#include "ipu/{h}"\n' for h in headers))
        deps = subprocess.run([cxx, "-std=c++20", "-M", f"-I{include}", f"-I{generated}", tu.name],
                              capture_output=True, text=True)
        pathlib.Path(tu.name).unlink()
        if deps.returncode != 0:
            print(f"ipu::{name}: its headers do not preprocess:\n{deps.stderr}")
            failures += 1
            continue
        files = deps.stdout.replace("\\\n", " ").split()
        bad = sorted({f for f in files for pattern in spec["forbidden"] if pattern in f})
        for f in bad:
            print(f"ipu::{name} reaches {f}, a header of a library the component does not link")
        failures += bool(bad)
        print(f"ipu::{name}: {len(headers)} headers, {len(files)} files preprocessed, {len(bad)} forbidden")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
