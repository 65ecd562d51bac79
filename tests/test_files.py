"""Every tests/<area>/test_<name>.cpp keeps its code in `namespace test_<name> { ... }`, run as a CTest.

The sanitizer builds compile each area's test files as one translation unit (IPU_UNITY_TESTS), so
two files' helpers of the same name would clash; a namespace per file keeps them apart.

Prints every file without its namespace and exits 1 if there is any.
"""
import pathlib
import re
import sys


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests")
    files = sorted(root.glob("*/test_*.cpp"))
    if not files:
        print(f"test_files: no test files under {root}")
        return 1
    missing = [f for f in files if not re.search(rf"^namespace {f.stem} {{$", f.read_text(), re.M)]
    for f in missing:
        print(f"{f}:1: wrap the file's code after its includes in `namespace {f.stem} {{ ... }}` "
              "so that it cannot clash with the other files of its area in a unity build")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
