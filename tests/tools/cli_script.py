"""What the CLI test scripts share: a work folder, `ipu` run as a subprocess, and the problems found,
reported together at the end.

    cli = CliScript(ipu, work)
    cli.run("run", model, "--input", ...)            # exits the script if ipu fails
    p = cli.run("compile", model, fail=True)          # must fail, with one line on stderr
    cli.expect(condition, "what went wrong")
    cli.finish("ok: what was checked")
"""
import os
import subprocess
import sys


class CliScript:
    def __init__(self, ipu, work):
        self.ipu, self.work = ipu, work
        self.problems = []
        os.makedirs(work, exist_ok=True)

    def path(self, name):
        return os.path.join(self.work, name)

    def run(self, *args, fail=False):
        """Runs `ipu ARGS`; a refusal (fail=True) must be one line on stderr and nothing on stdout."""
        p = subprocess.run([self.ipu, *args], capture_output=True, text=True, timeout=300)
        if (p.returncode != 0) != fail:
            sys.exit(f"ipu {' '.join(args)}: exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        if fail and (p.stdout or len(p.stderr.strip().splitlines()) != 1):
            self.problems.append(
                f"ipu {' '.join(args)}: a refusal must be one line on stderr, got {p.stderr!r} / {p.stdout!r}")
        return p

    def expect(self, cond, what):
        if not cond:
            self.problems.append(what)

    def finish(self, ok):
        """Prints the problems and exits 1 if there are any, else prints `ok`."""
        if self.problems:
            print("FAILED:\n  " + "\n  ".join(self.problems))
            sys.exit(1)
        print(ok)
