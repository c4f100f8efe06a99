#!/usr/bin/env python3
"""bench/torch_mezo.py without torch: what it checks before importing torch, and its CPU peak.

    test_torch_mezo.py TORCH_MEZO_PY WORK_DIR

- a missing, malformed or wrong --tokens file, and a bad --eps, --lr, --wd or --device, are
  each refused with one line on stderr and exit 1 or 2 (not SKIP, not a traceback), whether
  or not torch is installed;
- CpuPeak, the CPU's per-case peak: after a 256 MiB buffer is touched and freed, a reset
  peak stays well below it (the whole process's ru_maxrss would not).
Exit 0 when all hold, 1 otherwise."""
import importlib.util
import json
import os
import subprocess
import sys

script, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
failures = []


def write(name, text):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


good = write("good.json", json.dumps({"candidates": [5, 7], "examples": [{"tokens": [1, 2, 3], "label": 1}]}))
bad_files = {
    "missing": os.path.join(work, "no-such.json"),
    "truncated": write("truncated.json", '{"candidates":[1,2]'),
    "label 3": write("label3.json", json.dumps({"candidates": [1, 2], "examples": [{"tokens": [1, 2], "label": 3}]})),
    "no examples": write("empty.json", json.dumps({"candidates": [1, 2], "examples": []})),
    "a list": write("list.json", "[1, 2]"),
    "a string token": write("strtok.json", json.dumps({"candidates": [1, 2], "examples": [{"tokens": ["a"], "label": 0}]})),
}
cases = [("--tokens " + k, ["--tokens", v]) for k, v in bad_files.items()]
for opt, values in (("--eps", ["nan", "0", "-1e-3", "inf"]), ("--lr", ["-5", "0", "nan"]), ("--wd", ["inf", "-1", "nan"]),
                    ("--device", ["gpu", "cuda:x"])):
    cases += [("%s %s" % (opt, v), ["--tokens", good, opt, v]) for v in values]
for what, args in cases:
    r = subprocess.run([sys.executable, script] + args, capture_output=True, text=True, timeout=60)
    lines = r.stderr.splitlines()
    if r.returncode not in (1, 2) or len(lines) != 1 or "Traceback" in r.stderr or "SKIP" in r.stdout:
        failures.append("%s: exit %d, stderr %r, stdout %r" % (what, r.returncode, r.stderr[-300:], r.stdout[-200:]))

# CpuPeak, imported from the script (its main() runs only as a program)
spec = importlib.util.spec_from_file_location("torch_mezo", script)
tm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tm)
if not os.path.exists("/proc/self/clear_refs"):
    print("note: no /proc/self/clear_refs here: the CPU peak's reset is not checked")
else:
    peak = tm.CpuPeak()
    big = b"\x01" * (256 << 20)   # touched: resident
    del big
    peak.reset()
    after = peak.mib()
    rss = tm.proc_status_kib("VmRSS") / 1024.0
    if not peak.exact or after > rss + 64:
        failures.append("CpuPeak: %.0f MiB after a reset (RSS %.0f MiB, exact %s): the freed 256 MiB were counted"
                        % (after, rss, peak.exact))
    if "clear_refs" not in tm.peak_memory_note("cpu", peak):
        failures.append("the CPU's peak note does not say how the peak was measured")

for f in failures:
    print("FAIL: " + f)
print("%s: torch_mezo.py, %d refusals and the CPU peak" % ("FAIL" if failures else "ok", len(cases)))
sys.exit(1 if failures else 0)
