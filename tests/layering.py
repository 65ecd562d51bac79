#!/usr/bin/env python3
"""The layering rule of include/ipu/, run as a CTest.

Folders follow the data path, and a header may include only its own folder and the folders before
it: core (include/ipu/*.hpp) < io < graph < device < ops < passes < builder < cpu < train < onnx < poptorch < sched
< exec < popef < compile < runtime < popart < dist. ipu/ipu.hpp, the umbrella, includes
everything but dist (MPI, an optional component).

No folder uses another folder's details: a `detail::NAME` namespace belongs to the folder that
opens it, and `NAME::detail` to folder NAME; a header elsewhere that names it is an error.

Prints every violation as FILE:LINE: message and exits 1 if there is any.
"""
import pathlib
import re
import sys

LAYERS = ["", "io", "graph", "device", "ops", "passes", "builder", "cpu", "train", "onnx", "poptorch", "sched", "exec",
          "popef", "compile", "runtime", "popart", "serve", "dist"]
UMBRELLA = "ipu.hpp"

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]ipu/([^">]+)[">]')
OPENS_DETAIL = re.compile(r'namespace\s+(?:ipu::)?detail::(\w+)')
USES_DETAIL = re.compile(r'(?<![\w:])(?:ipu::)?detail::(\w+)::|(?<![\w])(\w+)::detail::')


def folder_of(relative: str) -> str:
    parts = relative.split("/")
    return "" if len(parts) == 1 else parts[0]


def strip_comments(line: str) -> str:
    return line.split("//", 1)[0]


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "include") / "ipu"
    headers = sorted(p for p in root.rglob("*") if p.suffix in (".hpp", ".h") and p.is_file())
    if not headers:
        print(f"layering: no headers under {root}")
        return 1
    rank = {name: i for i, name in enumerate(LAYERS)}
    problems = []

    # Which folder opens each detail::NAME namespace.
    owners: dict[str, set[str]] = {}
    for h in headers:
        rel = h.relative_to(root).as_posix()
        for line in h.read_text(encoding="utf-8").splitlines():
            for m in OPENS_DETAIL.finditer(strip_comments(line)):
                owners.setdefault(m.group(1), set()).add(folder_of(rel))

    for h in headers:
        rel = h.relative_to(root).as_posix()
        if rel == UMBRELLA:
            continue
        mine = folder_of(rel)
        if mine not in rank:
            problems.append(f"{h}:1: folder '{mine}' is not in the layer list of tests/layering.py; add it "
                            "where it belongs on the data path")
            continue
        for n, line in enumerate(h.read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE.match(line)
            if m:
                target = m.group(1)
                theirs = folder_of(target)
                if target == UMBRELLA:
                    problems.append(f"{h}:{n}: includes the umbrella header; include what it uses")
                elif theirs not in rank:
                    problems.append(f"{h}:{n}: includes ipu/{target}, in folder '{theirs}' that is not a layer")
                elif rank[theirs] > rank[mine]:
                    problems.append(f"{h}:{n}: '{mine or 'core'}' includes ipu/{target} from '{theirs}', a folder "
                                    "later on the data path; move the shared part down or the header up")
            code = strip_comments(line)
            for m in USES_DETAIL.finditer(code):
                name = m.group(1) or m.group(2)
                if m.group(1):
                    owner = owners.get(name)
                    if owner is not None and mine not in owner:
                        problems.append(f"{h}:{n}: uses detail::{name}, a detail of "
                                        f"'{'/'.join(sorted(o or 'core' for o in owner))}'; give it a public name")
                elif name in rank and name != mine and name != "ipu":
                    problems.append(f"{h}:{n}: uses {name}::detail, a detail of '{name}'; give it a public name")

    for p in problems:
        print(p)
    print(f"layering: {len(headers)} headers, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
