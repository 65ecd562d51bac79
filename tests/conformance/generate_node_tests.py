#!/usr/bin/env python3
"""Writes ONNX's own backend node tests (model.onnx + test_data_set_*/input_*.pb, output_*.pb) from
Debian's python3-onnx, like `backend-test-tools generate-data -o OUT_DIR`.

onnx 1.12's test generators use NumPy aliases that NumPy 1.24 removed (np.float, np.int, np.bool,
np.object, np.str); they are restored before onnx is imported.
Usage: generate_node_tests.py OUT_DIR [OP_TYPE]   (tests land in OUT_DIR/node/test_*)
"""
import argparse
import builtins
import sys
import warnings

warnings.simplefilter("ignore")
import numpy as np  # noqa: E402

for _alias in ("float", "int", "bool", "object", "str"):
    if _alias not in np.__dict__:
        setattr(np, _alias, getattr(builtins, _alias))

from onnx.backend.test import cmd_tools  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("op_type", nargs="?", default=None, help="only the tests of this op")
    args = ap.parse_args()
    cmd_tools.generate_data(argparse.Namespace(output=args.out_dir, op_type=args.op_type))
    return 0


if __name__ == "__main__":
    sys.exit(main())
