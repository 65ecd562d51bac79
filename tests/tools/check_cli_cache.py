#!/usr/bin/env python3
"""`ipu compile --cache-dir`: the executable cache seen from the command line.

check_cli_cache.py IPU MODEL.onnx WORKDIR

- Compiling twice into one cache: the first says on stderr that it stored an entry, the second that
  it was a hit on that entry; both outputs equal, byte for byte, the output of a compile without a
  cache.
- Two `ipu compile` processes started together on an empty cache directory: both exit 0 with that
  same output; the directory then holds one entry and no temporary files, `ipu inspect` reads the
  entry, and the next compile is a hit on it (so it records the right key).
- A damaged (truncated) entry: the next compile warns, rebuilds and stores it, and its output is
  still the same.
"""
import os
import re
import shutil
import subprocess
import sys

problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


def compile_model(ipu, model, out, *extra):
    return subprocess.Popen([ipu, "compile", model, "-o", out, *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p, what):
    out, err = p.communicate(timeout=600)
    print(f"--- {what}: status {p.returncode}\n{out}{err}")
    check(p.returncode == 0, f"{what}: exit status {p.returncode}")
    return err


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    ipu, model, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cache = os.path.join(work, "cache")
    entry_re = re.escape(cache + os.sep) + r"[0-9a-f]{32}\.popef"

    finish(compile_model(ipu, model, os.path.join(work, "plain.popef")), "without a cache")
    plain = read(os.path.join(work, "plain.popef"))

    # Twice, one after the other.
    err = finish(compile_model(ipu, model, os.path.join(work, "first.popef"), "--cache-dir", cache), "first")
    stored = re.findall(r"^ipu: executable cache miss: stored (" + entry_re + r")$", err, re.M)
    check(len(stored) == 1, "the first compile does not say it stored one entry")
    err = finish(compile_model(ipu, model, os.path.join(work, "second.popef"), "--cache-dir", cache), "second")
    hits = re.findall(r"^ipu: executable cache hit: (" + entry_re + r")$", err, re.M)
    check(len(hits) == 1 and hits == stored, "the second compile is not a hit on the first one's entry")
    check(len([l for l in err.splitlines() if l.strip()]) == 1, "the hit is not one line on stderr")
    check(read(os.path.join(work, "first.popef")) == plain, "the output of a miss differs from an uncached compile")
    check(read(os.path.join(work, "second.popef")) == plain, "the output of a hit differs from an uncached compile")

    # Two processes at once on an empty directory.
    shared = os.path.join(work, "shared")
    ps = [compile_model(ipu, model, os.path.join(work, f"p{i}.popef"), "--cache-dir", shared) for i in range(2)]
    for i, p in enumerate(ps):
        finish(p, f"concurrent compile {i}")
        check(read(os.path.join(work, f"p{i}.popef")) == plain, f"concurrent compile {i}: another output")
    names = sorted(os.listdir(shared))
    check(len(names) == 1 and re.fullmatch(r"[0-9a-f]{32}\.popef", names[0]),
          f"after concurrent compiles the cache holds {names}, expected one entry and no temporary files")
    if names:
        entry = os.path.join(shared, names[0])
        finish(subprocess.Popen([ipu, "inspect", entry], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
               "inspect the entry")
        err = finish(compile_model(ipu, model, os.path.join(work, "after.popef"), "--cache-dir", shared), "after")
        check(f"ipu: executable cache hit: {entry}" in err, "the compile after the concurrent ones is not a hit")

        # A truncated entry is rebuilt.
        good = read(entry)
        with open(entry, "wb") as f:
            f.write(good[: len(good) // 2])
        err = finish(compile_model(ipu, model, os.path.join(work, "rebuilt.popef"), "--cache-dir", shared), "rebuilt")
        check(re.search(r"WARN.*executable cache entry " + re.escape(entry) + " is unusable", err) is not None,
              "no warning about the damaged entry")
        check(f"ipu: executable cache miss: stored {entry}" in err, "the damaged entry is not stored again")
        check(read(entry) == good, "the rebuilt entry differs from the original")
        check(read(os.path.join(work, "rebuilt.popef")) == plain, "the output after a rebuild differs")

    if problems:
        print("FAILED: " + "; ".join(problems))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
