#!/usr/bin/env python3
"""`ipu plan --report`: a 4-IPU pipelined ResNet-50 (torchvision's, exported here when PyTorch is
installed; else the largest model the tests make) drawn as one HTML page, rendered by headless
Chromium without console errors, its DOM holding a Gantt row per stage, a box per stage and
micro-batch, the copy and host arrows, 1,472 tiles per IPU and a bar per stage; the screenshot shows
the chart's colours. The Chrome trace written with it has a flow arrow per copy and memory counters.
Exits 77 (skipped) when /usr/bin/chromium is absent.
Usage: check_plan_report.py IPU_BINARY WORK_DIR FALLBACK_ONNX"""
import json
import os
import re
import subprocess
import sys

CHROMIUM = "/usr/bin/chromium"
IPUS, MICRO_BATCHES = 4, 8


def model_path(work, fallback):
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError:
        print(f"PyTorch/torchvision missing: planning {fallback} instead of ResNet-50")
        return fallback
    path = os.path.join(work, "resnet50.onnx")
    if not os.path.exists(path):  # exported once per build directory
        exporter = os.path.join(os.path.dirname(__file__), "..", "sched", "export_plan_models.py")
        subprocess.run([sys.executable, exporter, work, "resnet50"], check=True, stdout=subprocess.DEVNULL)
    return path


def count(text, pattern):
    return len(re.findall(pattern, text))


def main():
    ipu, work, fallback = sys.argv[1:4]
    if not os.path.exists(CHROMIUM):
        print(f"SKIP: {CHROMIUM} is absent (apt-get install chromium); the report is not rendered")
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    model = model_path(work, fallback)
    html, trace, png = (os.path.join(work, n) for n in ("plan.html", "plan.json", "plan.png"))
    for f in (html, trace, png):
        if os.path.exists(f):
            os.remove(f)
    out = subprocess.run([ipu, "plan", model, "--batch", "1", "--device", "mk2", "--ipus", str(IPUS), "--strategy",
                          "pipelined", "--device-iterations", str(MICRO_BATCHES), "--report", html, "--trace", trace],
                         check=True, capture_output=True, text=True).stdout
    stages = count(out, r"(?m)^\d+ +\d+ +- +\d+ ")
    if stages < IPUS:
        sys.exit(f"{stages} stages in the plan's table:\n{out}")

    # The trace: a flow arrow (start and finish) per IPU-Link copy, two samples of each IPU's memory.
    events = json.load(open(trace))["traceEvents"]
    copies = sum(1 for e in events if e["ph"] == "X" and e["cat"] == "ipu_copy")
    flows = sum(1 for e in events if e["ph"] == "s")
    if flows != sum(1 for e in events if e["ph"] == "f") or not (stages - 1) * MICRO_BATCHES <= flows <= copies:
        sys.exit(f"{flows} flow arrows for {copies} copies")
    counters = [e for e in events if e["ph"] == "C"]
    if len(counters) != 2 * IPUS or any(e["args"]["total_bytes"] <= 0 for e in counters):
        sys.exit(f"memory counters {counters}")

    # Rendered: no console message (the page logs none: any is an error), nothing fetched, the
    # script ran to its end (body data-ready), and the SVG elements in the DOM.
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                        "--host-resolver-rules=MAP * ~NOTFOUND", f"--screenshot={png}", "--window-size=1400,2000",
                        "--dump-dom", "file://" + os.path.abspath(html)],
                       capture_output=True, text=True, timeout=240)
    problems = [line for line in r.stderr.splitlines() if "CONSOLE" in line or "net::ERR" in line]
    if r.returncode != 0 or problems:
        sys.exit(f"chromium exit {r.returncode}:\n" + "\n".join(problems or r.stderr.splitlines()[-5:]))
    dom = r.stdout
    want = {
        r'data-ready="1"': 1,
        r'<g class="stage-row"': stages,
        r'<rect class="mb"': stages * MICRO_BATCHES,
        r'<line class="arrow ipu_copy"': flows,
        r'<line class="arrow host_to_device"': MICRO_BATCHES,  # one input
        r'<line class="arrow device_to_host"': MICRO_BATCHES,  # one output
        r'<svg class="tiles"': IPUS,
        r'<rect class="tile"': IPUS * 1472,
        r'<g class="stage-bar"': stages,
    }
    for pattern, n in want.items():
        if count(dom, pattern) != n:
            sys.exit(f"DOM: {count(dom, pattern)} x {pattern}, expected {n}")

    # The screenshot: 1400 x 2000, with micro-batch 0's box colour and the compute bars' colour.
    with open(png, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")) != (1400, 2000):
        sys.exit("the screenshot is not a 1400 x 2000 PNG")
    try:
        from PIL import Image
    except ImportError:
        Image = None
    if Image:
        colours = {c for _, c in Image.open(png).convert("RGB").getcolors(1 << 24)}
        for c in ((0x90, 0xCA, 0xF9), (0x1E, 0x88, 0xE5)):
            if c not in colours:
                sys.exit(f"the screenshot lacks the colour {c}")
    print(f"rendered {os.path.basename(model)}: {stages} stages, {flows} copies, {len(dom)} bytes of DOM")
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
