#!/usr/bin/env python3
"""Runs the `ipu` CLI and checks how it ends.

check_cli.py [--fail | --usage] [--stdout REGEX]... [--stderr REGEX]... [--same-files DIR_A DIR_B]... -- COMMAND...
--fail: the command must exit with status 1 and print exactly ONE line, on stderr, and nothing on
stdout; --usage: the same with status 2 (a command line the parser refuses). Otherwise it must exit
with 0. Either way it must not crash (no signal, no sanitizer report).
--same-files: afterwards DIR_B holds the same file names as DIR_A (at least one), byte for byte.
--tty-stderr: stderr is a pseudo-terminal (what a user at a terminal sees); --no-stderr REGEX: stderr
must not match.
"""
import os
import pty
import re
import subprocess
import sys


def run_with_tty_stderr(cmd):
    """Runs cmd with stderr on a pseudo-terminal; returns (status, stdout, stderr)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, text=True, errors="replace")
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out = p.stdout.read()
    p.wait(timeout=600)
    os.close(master)
    return p.returncode, out, b"".join(chunks).decode(errors="replace")


def main():
    argv = sys.argv[1:]
    sep = argv.index("--")
    opts, cmd = argv[:sep], argv[sep + 1:]
    fail, out_res, err_res, same, tty, err_not = None, [], [], [], False, []
    i = 0
    while i < len(opts):
        if opts[i] == "--fail":
            fail = 1
        elif opts[i] == "--usage":
            fail = 2
        elif opts[i] == "--stdout":
            i += 1
            out_res.append(opts[i])
        elif opts[i] == "--stderr":
            i += 1
            err_res.append(opts[i])
        elif opts[i] == "--tty-stderr":
            tty = True
        elif opts[i] == "--no-stderr":
            i += 1
            err_not.append(opts[i])
        elif opts[i] == "--same-files":
            same.append((opts[i + 1], opts[i + 2]))
            i += 2
        else:
            sys.exit(f"unknown option {opts[i]}")
        i += 1
    if tty:
        p = subprocess.CompletedProcess(cmd, *run_with_tty_stderr(cmd))
    else:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600)
    problems = []
    for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:", "terminate called", "Segmentation"):
        if marker in p.stderr:
            problems.append(f"crash marker {marker!r} in stderr")
    if p.returncode < 0:
        problems.append(f"killed by signal {-p.returncode}")
    if fail:
        if p.returncode != fail:
            problems.append(f"exit status {p.returncode}, expected {fail}")
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr, expected exactly one")
        if p.stdout.strip():
            problems.append("output on stdout for a failure")
    elif p.returncode != 0:
        problems.append(f"exit status {p.returncode}, expected 0")
    for r in out_res:
        if not re.search(r, p.stdout, re.M):
            problems.append(f"stdout does not match {r!r}")
    for r in err_res:
        if not re.search(r, p.stderr, re.M):
            problems.append(f"stderr does not match {r!r}")
    for r in err_not:
        if re.search(r, p.stderr, re.M):
            problems.append(f"stderr matches {r!r}")
    for a, b in same:
        names = sorted(os.listdir(a)) if os.path.isdir(a) else []
        other = sorted(os.listdir(b)) if os.path.isdir(b) else []
        if not names or names != other:
            problems.append(f"{b} holds {other}, {a} holds {names}")
            continue
        for n in names:
            with open(os.path.join(a, n), "rb") as fa, open(os.path.join(b, n), "rb") as fb:
                if fa.read() != fb.read():
                    problems.append(f"{os.path.join(b, n)} differs from {os.path.join(a, n)}")
    print("$ " + " ".join(cmd))
    print("--- status", p.returncode)
    print("--- stdout\n" + p.stdout)
    print("--- stderr\n" + p.stderr)
    if problems:
        print("FAILED: " + "; ".join(problems))
        sys.exit(1)


if __name__ == "__main__":
    main()
